"""An engineer: turns base + reference + one chosen plan into a complete submission file.

Engineers compete for chosen hypotheses through leases on the blackboard; a lease outlives a
modeled implementation several times over, and a resumed campaign hands unfinished ones back.
"""

from __future__ import annotations

import functools
from pathlib import Path

import anyio
from anyio.abc import TaskStatus
from kernel_scientist.blackboard import Hypothesis, HypothesisState, KernelState

from ._base import Agent
from .brain import CannotImplement, ImplementView


@functools.cache
def _reference_impl(task_path: str) -> str:
    """The task's reference.py: what a submission must compute (shown to an LLM writer)."""
    path = Path(task_path) / "reference.py"
    return path.read_text(encoding="utf-8") if path.is_file() else ""


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
                self.say("info", f"implementing H{hyp.id}: {hyp.plan}", hypothesis_id=hyp.id)
                await self.think(latency)
                await self.implement(hyp)

    async def implement(self, hyp: Hypothesis) -> None:
        """Turn a claimed hypothesis into a draft kernel, or abandon it saying why."""
        board = self.board
        base = board.kernel(hyp.base_id)
        ref = board.kernel(hyp.reference_id) if hyp.reference_id else None
        task = self.ctx.task
        view = ImplementView(
            base_source=base.source,
            reference_source=ref.source if ref else None,
            technique=hyp.technique,
            params=hyp.params,
            plan=hyp.plan,
            changes=hyp.changes,
            task_description=task.description if task else "",
            reference_impl=_reference_impl(task.path) if task else "",
        )
        try:
            draft = await self.ask(f"H{hyp.id}", self.ctx.brain.implement, view)
        except CannotImplement as exc:
            draft, why = None, str(exc)
        else:
            why = "the brain gave no kernel (see the warning above)"
        if draft is None:
            board.update_hypothesis(
                hyp.id,
                expect=(HypothesisState.CLAIMED,),
                state=HypothesisState.ABANDONED,
                lease_owner=None,
                lease_until=None,
            )
            self.say("warning", f"H{hyp.id} abandoned: {why}", hypothesis_id=hyp.id)
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
        )
        lines = len(draft.source.splitlines())
        self.say(
            "kernel",
            f"kernel {kernel.id} from kernel {base.id} for H{hyp.id}: {draft.summary} ({lines} lines)",
            kernel_id=kernel.id,
            hypothesis_id=hyp.id,
        )
