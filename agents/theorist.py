"""The theorist: the paper's experiment designer.

For each open selection it asks its brain for avenues (the paper: 10), written plans (5) each with
a rubric of changes, a predicted minimum and maximum uplift and an innovation score, and the ones
to run (3: the most innovative, the highest maximum, the highest minimum). All plans are recorded
as hypotheses; the chosen ones wait for an engineer. A design with no plans marks the base
exhausted (agents.brain, "Nothing left to try").
"""

from __future__ import annotations

import anyio
import msgspec
from anyio.abc import TaskStatus
from kernel_scientist.blackboard import (
    LEARNED,
    Hypothesis,
    HypothesisState,
    Selection,
    SelectionState,
    Verdict,
    metrics,
)

from ._base import Agent
from ._calibration import calibrate
from ._views import kernel_view, observed_uplift
from .brain import CalibratedRanges, DesignView, TrialView


class Theorist(Agent):
    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        with anyio.move_on_at(self.ctx.clock.to_loop(self.ctx.clock.deadline)):
            while True:
                if self._open() is None or self.retired:
                    await self.board.wait_change("selection")
                    continue
                await self.think(self.ctx.scenario.agents.latency.theorist)
                sel = self._open()  # still open: only the theorist closes a selection
                if sel is not None:
                    await self.design(sel)

    def _open(self) -> Selection | None:
        return next((s for s in self.board.selections() if s.state == SelectionState.OPEN), None)

    def trials(self) -> list[TrialView]:
        board = self.board
        out = []
        for hyp in board.hypotheses():
            if hyp.state == HypothesisState.PROPOSED:
                continue
            base_ev = board.evaluation_for(hyp.base_id)
            new_ev = board.evaluation_for(hyp.kernel_id) if hyp.kernel_id else None
            observed = observed_uplift(base_ev, new_ev)
            out.append(
                TrialView(
                    base_id=hyp.base_id,
                    technique=hyp.technique,
                    label=hyp.label,
                    observed_uplift=observed,
                    verdict=hyp.verdict,
                )
            )
        # Trials measured by the user's earlier campaigns (run --learn-from): evidence about a
        # technique, on no kernel of this campaign.
        out.extend(
            TrialView(base_id=-1, technique=f.technique, label=LEARNED, observed_uplift=f.uplift, verdict=LEARNED)
            for f in board.findings()
            if f.scope == LEARNED
        )
        return out

    async def design(self, sel: Selection) -> None:
        board = self.board
        cfg = self.ctx.scenario.agents
        base = board.kernel(sel.base_id)
        ref = board.kernel(sel.reference_id) if sel.reference_id else None
        view = DesignView(
            base=kernel_view(board, base, self.ctx.task),
            base_source=base.source,
            reference=kernel_view(board, ref, self.ctx.task) if ref else None,
            reference_source=ref.source if ref else None,
            trials=self.trials(),
            findings=[f.text for f in board.findings()[-20:]],
            written=sorted({k.source_hash for k in board.kernels()}),
            avenues=cfg.avenues,
            plans=cfg.plans,
            choose=cfg.choose,
            noise=self.ctx.scenario.evaluator.noise,
        )
        design = await self.ask(f"design for selection {sel.id}", self.ctx.brain.design, view)
        if design is None:  # the selection stays open: the next attempt comes after a think
            return
        now = self.now()
        drafts = []
        brain = self.ctx.brain
        calibrated = isinstance(brain, CalibratedRanges) and brain.calibrates
        for i, plan in enumerate(design.plans):
            chosen = i in design.chosen
            if not calibrated:
                lo, hi = calibrate(
                    plan.min_uplift, plan.max_uplift, plan.technique, plan.label, view.trials, view.noise
                )
                plan = msgspec.structs.replace(plan, min_uplift=lo, max_uplift=hi)
            drafts.append(
                Hypothesis(
                    id=0,
                    selection_id=sel.id,
                    base_id=sel.base_id,
                    reference_id=sel.reference_id,
                    avenue=plan.plan,
                    label=plan.label,
                    technique=plan.technique,
                    params=plan.params,
                    plan=plan.plan,
                    changes=plan.changes,
                    min_uplift=plan.min_uplift,
                    max_uplift=plan.max_uplift,
                    innovation=plan.innovation,
                    state=HypothesisState.CHOSEN if chosen else HypothesisState.PROPOSED,
                    verdict=Verdict.PENDING,
                    author=self.name,
                    created_at=now,
                    why_chosen=design.why[design.chosen.index(i)] if chosen else "",
                )
            )
        hyps = board.add_hypotheses(sel.id, drafts)
        if not hyps:  # no plans: the brain's way of saying that it has nothing to try (agents.brain)
            # Why is said once, by the runner, should the campaign end for want of work.
            self.say(
                "avenues",
                f"selection {sel.id}: no plan for kernel {sel.base_id}; marking it exhausted "
                "(the archivist will not pick it again)",
                kernel_id=sel.base_id,
            )
            return
        self.say(
            "avenues",
            f"selection {sel.id}, base kernel {sel.base_id}: {len(design.avenues)} avenues: "
            + "; ".join(design.avenues),
            kernel_id=sel.base_id,
        )
        for hyp in hyps:
            self.say(
                "plan",
                f"H{hyp.id} {hyp.plan}: predicted {metrics.predicted_range_text(hyp.min_uplift, hyp.max_uplift)}, "
                f"innovation {hyp.innovation:.2f}; changes: " + "; ".join(hyp.changes),
                hypothesis_id=hyp.id,
            )
        for hyp in hyps:
            if hyp.state == HypothesisState.CHOSEN:
                self.say("choice", f"run H{hyp.id} ({hyp.why_chosen})", hypothesis_id=hyp.id)
