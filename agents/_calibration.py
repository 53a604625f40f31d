"""Predictions that learn: a plan's predicted [min, max] uplift, recalibrated on what this campaign
(and the campaigns it learned from) observed for the same technique and variant.

A brain's range for a plan is its prior (the catalogue's literature range plus the variant's edge
for the offline brain, a language model's guess otherwise). Observed uplifts then move it:

- centre: the prior's middle is pulled to the median of the technique's observed uplifts (one
  observation weighs as much as the prior; the median because a technique's failures are far out)
  and then to the mean of the same variant's (same label) observations, likewise;
- failures: a kernel of the technique that failed its check or crashed (verdict refuted, nothing
  observed) lost its evaluation and taught only that; it counts in the centre as an uplift of
  FAILED (-100%), at the technique's and the variant's level alike, so a form that keeps failing
  stops being planned (a build failure says nothing about the idea and does not count);
- half-width: once a technique has three observations, the prior's half-width gives way to the
  median absolute leave-one-out error of this very rule on them (so the range is as wide as the
  rule's own misses, about half of them falling outside at first); the timing noise (lognormal
  sigma of each of the two evaluations compared) is added in quadrature, since no prediction can
  be sharper than the measurement that judges it.

docs/techniques.md gives the main job's figures against the earlier rule.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

from .brain import TrialView

FAILED = -1.0  # the uplift a failed kernel counts as: the evaluation was lost (module note)


def _centre(prior_mid: float, label: str, seen: list[TrialView], failed: Sequence[TrialView] = ()) -> float:
    centre = prior_mid
    values = [t.observed_uplift for t in seen if t.observed_uplift is not None] + [FAILED] * len(failed)
    if values:
        w = len(values) / (len(values) + 1)
        centre = (1 - w) * centre + w * statistics.median(values)
    same = [t.observed_uplift for t in seen if t.label == label and t.observed_uplift is not None]
    same += [FAILED for t in failed if t.label == label]
    if same:
        w = len(same) / (len(same) + 1)
        centre = (1 - w) * centre + w * statistics.fmean(same)
    return centre


def calibrate(
    prior_min: float, prior_max: float, technique: str, label: str, trials: list[TrialView], noise: float = 0.0
) -> tuple[float, float]:
    """The calibrated [min, max] uplift of one plan (module note)."""
    seen = [t for t in trials if t.technique == technique and t.observed_uplift is not None]
    failed = [t for t in trials if t.technique == technique and t.observed_uplift is None and t.verdict == "refuted"]
    mid, half = (prior_min + prior_max) / 2, (prior_max - prior_min) / 2
    centre = _centre(mid, label, seen, failed)
    if len(seen) >= 3:
        errors = [
            abs((t.observed_uplift or 0.0) - _centre(mid, t.label, seen[:i] + seen[i + 1 :]))
            for i, t in enumerate(seen)
        ]
        w = len(seen) / (len(seen) + 1)
        half = (1 - w) * half + w * statistics.median(errors)
    half = math.sqrt(half**2 + 2 * noise**2)
    return round(centre - half, 4), round(centre + half, 4)
