"""An engineer: turns base + reference + one chosen plan into a complete submission file.

Engineers compete for chosen hypotheses through leases on the blackboard; a lease outlives a
modeled implementation several times over, and a resumed campaign hands unfinished ones back.

A plan waits in the queue while results arrive, so with a language model it is re-checked when an
engineer takes it, by the program (no call): it is dropped, the reason recorded on it
(``Hypothesis.why_abandoned``) and said, when the same variant on the same base already has a
result or is already being tried (an earlier plan of the same label), or when a kernel evaluated
since it was designed is faster than its base would be at the plan's predicted maximum uplift, a
result it could have beaten when it was designed. The designer sees dropped plans among the trials
and can plan them again on the new best.
"""

from __future__ import annotations

from typing import Literal

import anyio
from anyio.abc import TaskStatus
from kernel_scientist.blackboard import Hypothesis, HypothesisState, KernelState, Verdict, metrics

from ._base import Agent
from ._views import task_view
from .brain import CannotImplement, ImplementView


class Engineer(Agent):
    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        latency = self.ctx.scenario.agents.latency.engineer
        with anyio.move_on_at(self.ctx.clock.to_loop(self.ctx.clock.deadline)):
            while not self.retired:
                await self.rest()  # a pause after failed brain steps, before any lease is taken
                await self.act()
                hyp = self.board.claim_hypothesis(self.name, self.now(), lease_s=4 * latency + 600)
                if hyp is None:
                    await self.board.wait_change("hypothesis")
                    continue
                if self.asks_a_model and (stale := self.stale(hyp)):
                    self.abandon(hyp, f"dropped before it was written: {stale}", "info")
                    continue
                self.say("info", f"implementing H{hyp.id}: {hyp.plan}", hypothesis_id=hyp.id)
                await self.think(latency)
                await self.implement(hyp)

    async def implement(self, hyp: Hypothesis) -> None:
        """Turn a claimed hypothesis into a draft kernel, or abandon it saying why."""
        board = self.board
        base = board.kernel(hyp.base_id)
        ref = board.kernel(hyp.reference_id) if hyp.reference_id else None
        view = ImplementView(
            base_source=base.source,
            reference_source=ref.source if ref else None,
            technique=hyp.technique,
            params=hyp.params,
            plan=hyp.plan,
            changes=hyp.changes,
            task=task_view(self.ctx.task, self.ctx.scenario.evaluator.own_kernel),
        )
        try:
            draft = await self.ask(f"H{hyp.id}", self.ctx.brain.implement, view)
        except CannotImplement as exc:
            draft, why = None, str(exc)
        else:
            why = f"the brain gave no kernel: {self.failed_why}"
        if draft is None:
            self.abandon(hyp, why, "warning")
            return
        kernel = board.add_kernel(
            source=draft.source,
            author=self.name,
            at=self.now(),
            state=KernelState.DRAFT,
            parent_id=base.id,
            reference_id=hyp.reference_id,
            hypothesis_id=hyp.id,
            summary=draft.summary,
            deviations=draft.deviations,
        )
        lines = len(draft.source.splitlines())
        deviated = f"; deviations from the plan: {draft.deviations}" if draft.deviations else ""
        self.say(
            "kernel",
            f"kernel {kernel.id} from kernel {base.id} for H{hyp.id}: {draft.summary} ({lines} lines){deviated}",
            kernel_id=kernel.id,
            hypothesis_id=hyp.id,
        )

    def abandon(self, hyp: Hypothesis, why: str, kind: Literal["info", "warning"]) -> None:
        """Give a claimed plan up for good, recording why on it."""
        self.board.update_hypothesis(
            hyp.id,
            expect=(HypothesisState.CLAIMED,),
            state=HypothesisState.ABANDONED,
            lease_owner=None,
            lease_until=None,
            why_abandoned=why,
        )
        self.say(kind, f"H{hyp.id} abandoned: {why}", hypothesis_id=hyp.id)

    def stale(self, hyp: Hypothesis) -> str:
        """Why a claimed plan is no longer worth writing (module note), or "" when it is."""
        board = self.board
        label = " ".join(hyp.label.lower().split())
        for other in board.hypotheses():
            same = other.base_id == hyp.base_id and " ".join(other.label.lower().split()) == label
            if not same or not label or other.id == hyp.id or other.state == HypothesisState.PROPOSED:
                continue
            # A result that was measured, or a kernel that ran and broke; a build failure or a
            # kernel sent back says nothing of the idea, and trying it again is no twin.
            if other.observed_uplift is not None or other.verdict == Verdict.REFUTED:
                seen = metrics.uplift_text(other.observed_uplift)
                return (
                    f"H{other.id} already tried {hyp.label} on kernel {hyp.base_id} "
                    f"(kernel {other.kernel_id}: {seen}, {other.verdict})"
                )
            if other.id < hyp.id and other.verdict == Verdict.PENDING and other.state != HypothesisState.ABANDONED:
                return f"H{other.id} already tries {hyp.label} on kernel {hyp.base_id}"
        base_ev = board.evaluation_for(hyp.base_id)
        base = base_ev.report.passed_score() if base_ev is not None else None
        if base is None or hyp.max_uplift <= -1.0:
            return ""
        reach = base / (1 + hyp.max_uplift)  # the base's score at the plan's predicted best
        evals = board.evaluations()
        now, then = metrics.leader(evals), metrics.leader([e for e in evals if e.finished_at <= hyp.created_at])
        best = now.report.passed_score() if now is not None else None
        before = then.report.passed_score() if then is not None else None
        if now is None or best is None or best >= reach or (before is not None and before < reach):
            return ""
        return (
            f"at its predicted best ({metrics.uplift_text(hyp.max_uplift)}) kernel {hyp.base_id} would score "
            f"{reach:.1f} us, and kernel {now.kernel_id}, evaluated since the plan was made, scores {best:.1f} us"
        )
