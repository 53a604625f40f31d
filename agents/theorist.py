"""The theorist: the paper's experiment designer.

For each open selection it asks its brain for avenues (the paper: 10), written plans (5) each with
a rubric of changes, a predicted minimum and maximum uplift and an innovation score, and the ones
to run (the paper: 3, the most innovative, the highest maximum, the highest minimum; a language
model by default values each plan and the highest run, ``llm.choose_by``). All plans are recorded
as hypotheses; the chosen ones wait for an engineer, the best first. A design with no plans marks
the base exhausted (agents.brain, "Nothing left to try").

No design without news. With a language model, a selection whose base still waits for every
result of its last design is designed only once one of those results is in: a second design on the
same evidence costs a call and plans twins of what is already in flight. Nor, with a language
model, once the work waiting in the pipeline (plans, drafts, queued kernels) fills every
evaluation that can still start before the deadline: a plan designed then could never run.
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
    SubmissionState,
    Verdict,
    metrics,
)

from ._base import Agent
from ._calibration import calibrate
from ._views import failures, kernel_view, observed_uplift, pending_trials, task_view
from .brain import CalibratedRanges, DesignView, TrialView


class Theorist(Agent):
    def __post_init__(self) -> None:
        super().__post_init__()
        self._told: set[int] = set()  # selections whose wait for results was said
        self._full_said = False  # whether the wait for room before the deadline was said

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        with anyio.move_on_at(self.ctx.clock.to_loop(self.ctx.clock.deadline)):
            while True:
                if self._open() is None or self.retired:
                    await self.board.wait_change("selection")
                    continue
                if self.asks_a_model and (await self._waited() or await self._full()):
                    continue
                await self.think(self.ctx.scenario.agents.latency.theorist)
                sel = self._open()  # still open: only the theorist closes a selection
                if sel is not None:
                    await self.design(sel)

    def _open(self) -> Selection | None:
        return next((s for s in self.board.selections() if s.state == SelectionState.OPEN), None)

    async def _waited(self) -> bool:
        """Wait (and say so, once per selection) while the open selection's base has no result
        from its last design (module note); False when the design may go ahead."""
        await self.act()
        sel = self._open()
        if sel is None:
            return True
        unanswered = self._unanswered(sel.base_id)
        if not unanswered:
            return False
        if sel.id not in self._told:
            self._told.add(sel.id)
            ids = ", ".join(f"H{h.id}" for h in unanswered)
            self.say(
                "info",
                f"selection {sel.id}: no result yet from the last plans on kernel {sel.base_id} ({ids}); "
                "the design waits for one (no question to the brain before)",
                kernel_id=sel.base_id,
            )
        await self.board.wait_change("hypothesis", "selection")
        return True

    async def _full(self) -> bool:
        """Wait (and say so, once) while the work waiting in the pipeline fills every evaluation
        that can still start before the deadline (module note); False when a new plan could run."""
        left = self.starts_left()
        waiting = self.pending() - len(self.board.submissions(SubmissionState.LEASED))
        if left is None or waiting < left:
            return False
        if not self._full_said:
            self._full_said = True
            self.say(
                "info",
                f"the {left} evaluation{'s' if left != 1 else ''} that can still start before the deadline "
                f"{'are' if left != 1 else 'is'} taken by the work already waiting "
                f"({waiting} {'kernels and plans' if waiting != 1 else 'kernel or plan'}); no new design",
            )
        await self.board.wait_change("hypothesis", "kernel", "submission", "evaluation")
        return True

    def _unanswered(self, base_id: int) -> list[Hypothesis]:
        """The chosen plans of the latest design on ``base_id`` when none has a result yet (a
        verdict, or abandoned); empty when one has, or when the base has no design."""
        designed = [
            s.id for s in self.board.selections() if s.base_id == base_id and s.state == SelectionState.DESIGNED
        ]
        if not designed:
            return []
        chosen = [
            h for h in self.board.hypotheses() if h.selection_id == designed[-1] and h.state != HypothesisState.PROPOSED
        ]
        if any(h.state == HypothesisState.ABANDONED or h.verdict != Verdict.PENDING for h in chosen):
            return []
        return chosen

    def trials(self) -> list[TrialView]:
        board = self.board
        out = []
        for hyp in board.hypotheses():
            if hyp.state == HypothesisState.PROPOSED:
                continue
            base_ev = board.evaluation_for(hyp.base_id)
            new_ev = board.evaluation_for(hyp.kernel_id) if hyp.kernel_id else None
            observed = observed_uplift(base_ev, new_ev)
            abandoned = hyp.state == HypothesisState.ABANDONED
            out.append(
                TrialView(
                    base_id=hyp.base_id,
                    technique=hyp.technique,
                    label=hyp.label,
                    observed_uplift=observed,
                    verdict="abandoned" if abandoned else hyp.verdict,
                    note=hyp.why_abandoned if abandoned else "",
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
        parent = board.kernel(base.parent_id) if base.parent_id else None
        task = self.ctx.task
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
            parent=kernel_view(board, parent, task) if parent else None,
            shapes=[s.label() for s in task.benchmarks] if task is not None else [],
            pending=pending_trials(board),
            failures=failures(board),
            task=task_view(task, self.ctx.scenario.evaluator.own_kernel),
            evaluations_left=self.starts_left(),
            own_kernel=self.ctx.scenario.evaluator.own_kernel,
        )
        design = await self.ask(f"design for selection {sel.id}", self.ctx.brain.design, view)
        if design is None:  # the selection stays open: the next attempt comes after a think
            return
        now = self.now()
        drafts = []
        brain = self.ctx.brain
        calibrated = isinstance(brain, CalibratedRanges) and brain.calibrates
        order = list(range(len(design.plans)))
        if self.asks_a_model:  # engineers take the oldest chosen plan first: the best gets the first id
            order = [*design.chosen, *(i for i in order if i not in design.chosen)]
        for i in order:
            plan = design.plans[i]
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
                    # Only a plan that borrows from the reference has its writer shown it.
                    reference_id=sel.reference_id if plan.uses_reference else None,
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
