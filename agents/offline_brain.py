"""The offline brain: deterministic decisions from the blackboard's history and the catalogue.

It plays each role the way the paper's LLM did, with arithmetic instead of prose:
- select: usually the best kernel as base (an evolutionary selector with a little exploration),
  and as reference the kernel that beats the base on the most ranked shapes;
- design: every applicable variant of every technique in ``knowledge`` is an avenue; its predicted
  uplift starts at the literature prior and is recalibrated on what this campaign has observed for
  that technique and variant (agents._calibration); innovation decays with
  each use of the technique; the three plans run are the most innovative, the highest maximum and
  the highest minimum uplift;
- implement: the technique's executable transformation of the base source;
- review: approve unless a static rule or the CPU pre-screen says no.
Every random choice comes from a ``random.Random`` seeded by the campaign seed and the agent.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from kernel_scientist.blackboard import metrics, source_hash
from kernel_scientist.evaluator import rule_verdict

from kernel_scientist import knowledge

from ._calibration import calibrate
from .brain import (
    CannotImplement,
    Choice,
    Critique,
    Design,
    DesignView,
    Draft,
    ImplementView,
    Plan,
    ReviewView,
    SelectionView,
    faster_reference,
)

EXPLORE = 0.2  # probability that the selector picks a runner-up as base


class OfflineBrain:
    name = "offline"
    calibrates = True  # its plans' ranges come from agents._calibration already (the theorist need not)

    def __init__(self, rng: random.Random, vendor: str = "amd", kernels: str = "gemm") -> None:
        self.rng = rng
        # The catalogue as it applies to the target's vendor (no AMD-only knobs on NVIDIA, and the
        # forms and priors measured on that vendor's hardware) and to the task's kind of kernel
        # (no GEMM-only rewrite of a stencil).
        self.catalogue = {t.name: t for t in knowledge.catalogue(vendor, kernels)}

    # ---- archivist: base and reference ----------------------------------------------------
    async def select(self, view: SelectionView) -> Choice:
        ranked = sorted((k for k in view.kernels if k.score_us is not None), key=lambda k: k.score_us or 0.0)
        fresh = [k for k in ranked if k.id not in view.exhausted] or ranked
        base = fresh[0]
        why = f"best open kernel ({base.score_us:.1f} us)"
        if len(fresh) > 1 and self.rng.random() < EXPLORE:
            base = self.rng.choice(fresh[1:4])
            why = f"exploring runner-up ({base.score_us:.1f} us, best is {fresh[0].score_us:.1f} us)"
        reference, borrowed = faster_reference(base, ranked)
        why += borrowed
        return Choice(base_id=base.id, reference_id=reference.id if reference else None, reason=why)

    # ---- theorist: avenues, plans, choice ------------------------------------------------
    def _innovation(self, technique: knowledge.Technique, view: DesignView) -> float:
        tried = sum(1 for t in view.trials if t.technique == technique.name)
        return technique.novelty / (1 + tried)

    async def design(self, view: DesignView) -> Design:
        done = {(t.technique, t.label) for t in view.trials if t.base_id == view.base.id}
        scored: list[tuple[float, Plan]] = []
        for technique in self.catalogue.values():
            try:
                variants = technique.variants(view.base_source, view.reference_source)
            except Exception:  # a base the technique cannot parse: not an avenue
                continue
            innovation = self._innovation(technique, view)
            for variant in variants:
                if (technique.name, variant.label) in done:
                    continue
                edge = technique.edge(variant.params)  # one form measured against another
                # The prior (literature range plus the variant's edge), recalibrated on what the
                # campaign observed for this technique and variant (agents._calibration).
                lo, hi = calibrate(
                    technique.prior_min + edge,
                    technique.prior_max + edge,
                    technique.name,
                    variant.label,
                    view.trials,
                    view.noise,
                )
                plan = Plan(
                    technique=technique.name,
                    params=dict(variant.params),
                    label=variant.label,
                    plan=f"{technique.title}: {variant.label}",
                    changes=list(variant.changes),
                    min_uplift=round(lo, 4),
                    max_uplift=round(hi, 4),
                    innovation=round(innovation, 4),
                )
                jitter = self.rng.uniform(0, 0.02)  # breaks ties between variants differently per seed
                scored.append(((lo + hi) / 2 + 0.1 * innovation + jitter, plan))
        scored.sort(key=lambda item: -item[0])
        avenues: list[Plan] = []
        per_technique: dict[str, int] = {}
        written = set(view.written)
        for _, plan in scored:  # at most two variants of one technique among the avenues
            if per_technique.get(plan.technique, 0) < 2 and self._new(plan, view, written):
                per_technique[plan.technique] = per_technique.get(plan.technique, 0) + 1
                avenues.append(plan)
            if len(avenues) == view.avenues:
                break
        plans = avenues[: view.plans]
        chosen: list[int] = []
        why: list[str] = []
        criteria: tuple[tuple[str, Callable[[Plan], float]], ...] = (
            ("most innovative", lambda p: p.innovation),
            ("highest maximum uplift", lambda p: p.max_uplift),
            ("highest minimum uplift", lambda p: p.min_uplift),
        )
        for reason, key in criteria:
            order = sorted(range(len(plans)), key=lambda i: (-key(plans[i]), i))
            pick = next((i for i in order if i not in chosen), None)
            if pick is not None and len(chosen) < view.choose:
                chosen.append(pick)
                why.append(reason)
        for i in range(len(plans)):  # fill up when more than three are asked for
            if len(chosen) < view.choose and i not in chosen:
                chosen.append(i)
                why.append("next best expected uplift")
        lines = [
            f"{p.plan} (predicted {metrics.predicted_range_text(p.min_uplift, p.max_uplift, 0)}, "
            f"innovation {p.innovation:.2f})"
            for p in avenues
        ]
        return Design(avenues=lines, plans=plans, chosen=chosen, why=why)

    def _new(self, plan: Plan, view: DesignView, written: set[str]) -> bool:
        """Would this plan produce a kernel nobody has written yet, that the static rules let
        through? (Evaluations are scarce and an engineer's hour is not free: a plan whose result
        already exists is no experiment, nor one the critic must send back, as every rewrite of
        a lowering that keeps a library matmul would be under ``evaluator.own_kernel``.)"""
        try:
            source = self.catalogue[plan.technique].rewrite(view.base_source, dict(plan.params), view.reference_source)
        except knowledge.NotApplicable:
            return False
        return source_hash(source) not in written and rule_verdict(source, own_kernel=view.own_kernel) is None

    # ---- engineer: the transformation ------------------------------------------------------
    async def implement(self, view: ImplementView) -> Draft:
        technique = self.catalogue.get(view.technique)
        if technique is None:
            raise CannotImplement(f"no technique named {view.technique!r} in the catalogue")
        try:
            source = technique.rewrite(view.base_source, dict(view.params), view.reference_source)
        except knowledge.NotApplicable as exc:
            raise CannotImplement(str(exc)) from exc
        return Draft(source=source, summary=view.plan)

    # ---- critic: approve or send back -------------------------------------------------------
    async def review(self, view: ReviewView) -> Critique:
        reasons = [f.text() for f in view.static_findings if f.rejects]
        if view.prescreen is not None and not view.prescreen.passed:
            reasons.append(f"CPU pre-screen failed: {view.prescreen.text()}")
        if view.base_source is not None and view.source.strip() == view.base_source.strip():
            reasons.append("the source is identical to its base")
        if reasons:
            return Critique(approve=False, reasons=reasons, expected_value=0.0)
        # The queue is ordered by expected gain plus a price for what an experiment teaches.
        value = (view.min_uplift + view.max_uplift) / 2 + 0.05 * view.innovation
        notes = [f.text() for f in view.static_findings if not f.rejects]
        return Critique(
            approve=True,
            reasons=notes or ["plan followed; static rules and pre-screen clean"],
            expected_value=round(value, 5),
        )
