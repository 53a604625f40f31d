"""The archivist: the paper's evolutionary selector, and the campaign's memory.

It digests every evaluation into a finding (what a technique did, overall and per shape group) and,
whenever the pipeline has room and no selection is waiting, picks a base kernel to improve and a
reference kernel to borrow from. With a language model, a choice among one is not asked: when a
single kernel is open (not exhausted), the program picks it, with as reference the kernel faster
than it on the most shapes, and the selection's reason says it was chosen without the brain.
"""

from __future__ import annotations

import math

import anyio
from anyio.abc import TaskStatus
from kernel_scientist.blackboard import Evaluation, KernelState, SelectionState, Shape, metrics

from ._base import Agent
from ._views import bounds_summary, failures, kernel_view, pending_trials
from .brain import Choice, KernelView, SelectionView, faster_reference


class Archivist(Agent):
    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        with anyio.move_on_at(self.ctx.clock.to_loop(self.ctx.clock.deadline)):
            while True:
                if self._undigested() or (self._should_select() and not self.retired):
                    await self.think(self.ctx.scenario.agents.latency.archivist)
                    for ev in self._undigested():
                        self.digest(ev)
                    if self._should_select() and not self.retired:
                        await self.select()
                    continue
                await self.board.wait_change("evaluation", "selection", "submission", "hypothesis", "kernel")

    async def final_pass(self) -> None:
        """After the deadline: digest the evaluations that finished while the queue drained."""
        for ev in self._undigested():
            self.digest(ev)

    # ---- memory ------------------------------------------------------------------------
    def _undigested(self) -> list[Evaluation]:
        seen = {i for f in self.board.findings() for i in f.evidence}
        return [ev for ev in self.board.evaluations() if ev.id not in seen]

    def digest(self, ev: Evaluation) -> None:
        board = self.board
        kernel = board.kernel(ev.kernel_id)
        report = ev.report
        hyp = board.hypothesis(kernel.hypothesis_id) if kernel.hypothesis_id else None
        technique = hyp.technique if hyp else kernel.author
        score = report.passed_score()
        if score is None:  # failed, or correct but untimed
            verdict = "passed untimed" if report.passed() else "failed"
            text = f"kernel {kernel.id} ({kernel.summary or technique}) {verdict}: {report.reason}"
            board.add_finding(technique=technique, scope="all", uplift=-1.0, evidence=[ev.id], text=text, at=self.now())
            self.say("finding", text, kernel_id=kernel.id)
            return
        base_ev = board.evaluation_for(hyp.base_id) if hyp else None
        base_score = base_ev.report.passed_score() if base_ev else None
        if hyp is None or base_score is None:
            text = f"kernel {kernel.id} ({kernel.author}) scores {score:.1f} us ({report.provenance.label()})"
            if bounds := bounds_summary(report, self.ctx.task):
                text += f"; {bounds}"
            board.add_finding(technique=technique, scope="all", uplift=0.0, evidence=[ev.id], text=text, at=self.now())
            self.say("finding", text, kernel_id=kernel.id)
            return
        overall = metrics.uplift(base_score, score) or 0.0
        groups: dict[str, list[float]] = {}
        assert base_ev is not None  # it has a score
        for new, old in zip(report.shapes, base_ev.report.shapes):
            if new.time_us and old.time_us:
                groups.setdefault(_group(new.shape), []).append(math.log(old.time_us / new.time_us))
        parts = [f"{metrics.uplift_text(math.exp(sum(v) / len(v)) - 1)} on {g}" for g, v in sorted(groups.items())]
        text = (
            f"{hyp.technique} ({hyp.params and ', '.join(f'{k}={v}' for k, v in hyp.params.items())})"
            f" on kernel {hyp.base_id}: {metrics.uplift_text(overall)} overall; " + ", ".join(parts)
        )
        if bounds := bounds_summary(report, self.ctx.task):
            text += f"; kernel {kernel.id} is {bounds}"
        board.add_finding(
            technique=hyp.technique, scope="all", uplift=round(overall, 5), evidence=[ev.id], text=text, at=self.now()
        )
        self.say("finding", text, kernel_id=kernel.id, hypothesis_id=hyp.id)

    # ---- selection ---------------------------------------------------------------------
    def _should_select(self) -> bool:
        board = self.board
        if any(s.state == SelectionState.OPEN for s in board.selections()):
            return False
        if self.pending() >= self.ctx.scenario.agents.max_pending:
            return False
        exhausted = self._exhausted()
        return any(k.id not in exhausted for k in self._candidates())

    def _exhausted(self) -> list[int]:
        return sorted({s.base_id for s in self.board.selections() if s.state == SelectionState.EXHAUSTED})

    def _candidates(self) -> list[KernelView]:
        views = [kernel_view(self.board, k, self.ctx.task) for k in self.board.kernels(KernelState.EVALUATED)]
        return [v for v in views if v.score_us is not None]

    async def select(self) -> None:
        board = self.board
        exhausted = self._exhausted()
        candidates = self._candidates()
        shapes = [s.label() for s in self.ctx.task.benchmarks] if self.ctx.task is not None else []
        open_ = [k for k in candidates if k.id not in exhausted]
        if self.asks_a_model and len(open_) == 1:
            choice: Choice | None = _only(open_[0], candidates)
        else:
            view = SelectionView(
                kernels=candidates,
                exhausted=exhausted,
                shapes=shapes,
                pending=pending_trials(board),
                failures=failures(board),
                evaluations_left=self.starts_left(),
            )
            choice = await self.ask("selection", self.ctx.brain.select, view)
        if choice is None:
            return
        valid = {k.id for k in candidates}
        if choice.base_id not in valid or (choice.reference_id is not None and choice.reference_id not in valid):
            self.say(
                "error",
                f"brain chose kernels {choice.base_id}/{choice.reference_id} that are not "
                "evaluated candidates; selection skipped",
            )
            return
        sel = board.add_selection(
            base_id=choice.base_id, reference_id=choice.reference_id, reason=choice.reason, at=self.now()
        )
        ref = f", reference {sel.reference_id}" if sel.reference_id else ""
        # A reason that cites scores cites the campaign's own: say where they came from, as every timing line does.
        times = f"; times simulated on {self.ctx.backend.spec.label}" if self.ctx.backend.simulated else ""
        text = f"selection {sel.id}: base kernel {sel.base_id}{ref} ({choice.reason}{times if ' us' in choice.reason else ''})"
        self.say("selection", text, kernel_id=sel.base_id)


def _only(base: KernelView, candidates: list[KernelView]) -> Choice:
    """The choice when one kernel is open: it, and as reference the candidate faster than it on
    the most shapes (the earlier kernel on a tie), if any is faster anywhere."""
    reference, borrowed = faster_reference(base, candidates)
    why = "the only kernel not exhausted, chosen without asking the brain" + borrowed
    return Choice(base_id=base.id, reference_id=reference.id if reference else None, reason=why)


def _group(shape: Shape) -> str:
    """Which shapes a finding pools: a GEMM's by m (small-m and large-m shapes behave apart);
    any other task's by its first argument."""
    if shape.is_mnk():
        return f"m={shape.m}"
    name, value = next(iter(shape.kwargs().items()))
    return f"{name}={value}"
