"""Predictions that learn: the offline brain's predicted uplift ranges move to what the campaign
observed for a technique and variant, narrow to the observed spread plus the timing noise, and
the calibration is shown on status."""

from __future__ import annotations

import random

import trio
from _support import ROOT
from kernel_scientist.agents._calibration import calibrate
from kernel_scientist.agents.brain import DesignView, KernelView, TrialView
from kernel_scientist.agents.offline_brain import OfflineBrain
from kernel_scientist.evaluator import load_task

SEED = load_task(ROOT / "evaluator" / "tasks" / "amd_fp8_mm").seed_source


def _design(trials: list[TrialView], noise: float = 0.02):
    base = KernelView(id=1, parent_id=None, author="seed", summary="", score_us=300.0, shape_us=[])
    view = DesignView(
        base=base,
        base_source=SEED,
        reference=None,
        reference_source=None,
        trials=trials,
        findings=[],
        written=[],
        avenues=40,
        plans=40,
        choose=3,
        noise=noise,
    )
    return trio.run(OfflineBrain(random.Random(1)).design, view)


def test_observed_uplifts_move_and_sharpen_the_predicted_range():
    prior = {(p.technique, p.label): p for p in _design([]).plans}
    technique, label = "split_k", "SPLIT_K=4"
    assert (technique, label) in prior
    # The campaign saw split-K lose about 45% on five bases, one variant a little less.
    seen = [
        TrialView(base_id=i, technique=technique, label=f"SPLIT_K={2 + i}", observed_uplift=u, verdict="refuted")
        for i, u in enumerate([-0.50, -0.44, -0.47, -0.41, -0.46])
    ]
    after = {(p.technique, p.label): p for p in _design(seen).plans}
    plan, before = after[technique, label], prior[technique, label]
    mid = (plan.min_uplift + plan.max_uplift) / 2
    assert -0.50 < mid < -0.35 < (before.min_uplift + before.max_uplift) / 2
    assert plan.max_uplift - plan.min_uplift < 0.6 * (before.max_uplift - before.min_uplift)
    # No range is sharper than the noise of the two measurements an uplift compares.
    noisy = {(p.technique, p.label): p for p in _design(seen, noise=0.2).plans}[technique, label]
    assert noisy.max_uplift - noisy.min_uplift > 2 * 0.2 * 2**0.5 * 0.99
    # Other techniques keep their prior.
    other = next(key for key in prior if key[0] != technique)
    assert after[other].min_uplift == prior[other].min_uplift


def test_failed_kernels_count_against_their_technique_and_build_failures_do_not():
    """A form whose kernels keep failing the check stops looking promising; a kernel that did not
    compile says nothing about the idea."""
    prior = {(p.technique, p.label): p for p in _design([]).plans}
    technique, label = "split_k", "SPLIT_K=4"

    def failed(verdict: str, n: int) -> list[TrialView]:
        return [
            TrialView(base_id=10 + i, technique=technique, label=label, observed_uplift=None, verdict=verdict)
            for i in range(n)
        ]

    lo, hi = calibrate(-0.2, 0.3, technique, label, failed("refuted", 3))
    assert (lo + hi) / 2 < -0.7  # the variant that failed: pulled to the failures' -100%
    lo, hi = calibrate(-0.2, 0.3, technique, "SPLIT_K=8", failed("refuted", 3))
    assert -0.8 < (lo + hi) / 2 < -0.6  # another form of it: pulled by the technique's record only
    after = {(p.technique, p.label): p for p in _design(failed("refuted", 3)).plans}
    assert (technique, label) in prior and (technique, label) not in after  # no longer planned
    untouched = {(p.technique, p.label): p for p in _design(failed("build_failed", 3) + failed("pending", 2)).plans}
    assert untouched[technique, label].min_uplift == prior[technique, label].min_uplift
