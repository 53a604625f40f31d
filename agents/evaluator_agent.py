"""The evaluator agent: the only path to hardware.

It takes approved submissions from the queue in order of expected value, and never exceeds the
backend's limits: at most ``in_flight`` evaluations at once (one worker task each) and a rate limit
enforced as a minimum spacing of ``3600 / rate_per_hour`` campaign seconds between starts, so any
hour holds at most ``ceil(rate_per_hour)`` starts. Start times live on the blackboard (each lease
records one), so a resumed campaign keeps the spacing the service already saw.

At the deadline it starts nothing new and lets the evaluations in flight finish.

Before it takes the first candidate of a run, a leader recorded with fewer timings than
``evaluator.retime_leaders`` asks for (a blackboard written by an earlier version, or a run with
fewer re-timings) is timed again (``_retime_leader``; docs/evaluator.md, "Re-timing a new leader").

On a backend that can profile (``Profiles``: the local one, with Nsight Compute), a new leader is
then profiled once where ``evaluator.profile`` asks for it: one call of its ranked shape farthest
from the speed of light (the longest where none is known), kept in its report for the designer.
"""

from __future__ import annotations

import zlib

import anyio
import msgspec
from anyio.abc import TaskStatus
from kernel_scientist.blackboard import EvalReport, Evaluation, Submission, SubmissionState, metrics
from kernel_scientist.blackboard.profile import profile_line, profile_target
from kernel_scientist.evaluator import Profiles

from ._base import SEED_PRIORITY, Agent


class EvaluatorAgent(Agent):
    def __post_init__(self) -> None:
        super().__post_init__()
        # Mixed into every test seed; candidates never see it (see the evaluator's harness).
        self.secret_seed = zlib.crc32(f"secret:{self.ctx.seed}".encode())
        self._current: list[str] = []  # the sources being evaluated now

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        async with anyio.create_task_group() as hints:
            if not self.ctx.backend.simulated:  # real hardware may compile what is queued meanwhile
                hints.start_soon(self._hinter)
            await self._retime_leader()  # before any new candidate is compared with its score
            async with anyio.create_task_group() as workers:
                for i in range(self.ctx.scenario.evaluator.in_flight):
                    workers.start_soon(self._worker, i)
            hints.cancel_scope.cancel()

    def _hint(self, first: list[str], queued: list[Submission] | None = None) -> None:
        """Tell the backend what comes next: ``first`` (the source about to start or running),
        then the queue in lease order (``queued``, when the caller has just read it)."""
        board = self.board
        if queued is None:
            queued = board.submissions(SubmissionState.QUEUED)
        self.ctx.backend.prepare(first + [board.kernel(s.kernel_id).source for s in queued])

    async def _hinter(self) -> None:
        """A candidate queued while another is being evaluated is named at once, not only when
        the next evaluation starts (by then it would be the one starting, with nothing compiled)."""
        while True:
            await self.board.wait_change("submission")
            self._hint(self._current[:1])

    def _headroom(self) -> float:
        """Campaign seconds until the rate limit in force allows the next start (0 = now)."""
        return metrics.headroom_s(self.board.campaign(), self.board.evaluation_starts(), self.now())

    async def _worker(self, index: int) -> None:
        rank = self.rank + index
        owner = f"{self.name}/{index}"
        while True:
            sub = None  # stays None when the deadline cancels the wait
            with anyio.move_on_at(self.ctx.clock.to_loop(self.ctx.clock.deadline)):
                sub = await self._next(rank, owner)
            if sub is None:
                return
            await self._evaluate(sub, rank, owner)

    async def _next(self, rank: int, owner: str) -> Submission | None:
        while True:
            await self._await_headroom(rank)
            ready = None if self.ctx.backend.simulated else self._compiled_ahead
            sub = self.board.lease_submission(owner, self.now(), self.ctx.scenario.evaluator.lease_s, ready)
            if sub is not None:
                return sub
            await self.board.wait_change("submission")

    async def _evaluate(self, sub: Submission, rank: int, owner: str) -> None:
        board = self.board
        kernel = board.kernel(sub.kernel_id)
        started = self.now()
        queued = board.submissions(SubmissionState.QUEUED)  # in lease order
        waiting = len(queued)
        why = (
            "the seed baseline" if sub.expected_value >= SEED_PRIORITY else f"expected value {sub.expected_value:+.3f}"
        )
        board.say(
            agent=self.name,
            kind="queue",
            at=started,
            kernel_id=kernel.id,
            hypothesis_id=kernel.hypothesis_id,
            text=f"evaluating kernel {kernel.id} ({why}, attempt {sub.attempts}, {waiting} still queued)",
        )
        # This candidate, then those most likely to come next: a backend may compile them while
        # this one holds the hardware (and must not give up what it compiled for this one).
        if not self.ctx.backend.simulated:  # the simulated device compiles nothing: no queries for it
            self._hint([kernel.source], queued)
        self._current.append(kernel.source)
        # Real work (sandboxed CPU check, launch capture) runs inline; the hardware's time is then
        # charged to the campaign clock (each timing's as it ends, a re-timing's too).
        try:
            base = kernel.is_baseline()
            report = await self._timed(kernel.source, sub.id, self.secret_seed, base)
            report = await self._retime(kernel.id, kernel.source, sub.id, report, base)
            report = await self._profiled(kernel.id, kernel.source, report, base)
        finally:
            self._current.remove(kernel.source)
        await self.act(rank)
        board.record_evaluation(
            submission_id=sub.id, owner=owner, started_at=started, finished_at=self.now(), report=report
        )
        text = evaluation_text(kernel.id, report)
        board.say(
            agent=self.name,
            kind="evaluation",
            at=self.now(),
            text=text,
            kernel_id=kernel.id,
            hypothesis_id=kernel.hypothesis_id,
        )

    async def _retime(
        self, kernel_id: int, source: str, submission_id: int, report: EvalReport, baseline: bool
    ) -> EvalReport:
        """A first score that would lead the campaign is timed again (``evaluator.retime_leaders``
        more times, each with new inputs) and the report holds their geometric mean: the leader
        is what the archivist breeds from and what the campaign reports, so it must not be one
        lucky timing. Every other candidate keeps its one timing."""
        first = report.passed_score()
        leader = self._leader()
        best = leader.report.passed_score() if leader is not None else None
        if first is None or (best is not None and first >= best):
            return report
        for run in range(1, self.ctx.scenario.evaluator.retime_leaders + 1):
            self.board.say(
                agent=self.name,
                kind="queue",
                at=self.now(),
                kernel_id=kernel_id,
                text=f"kernel {kernel_id}: {report.passed_score():.1f} us ({report.provenance.label()}) would lead"
                + (f" (best so far {best:.1f} us)" if best is not None else "")
                + f"; timing it again with new inputs ({run + 1} of {self.ctx.scenario.evaluator.retime_leaders + 1})",
            )
            report = report.retimed(await self._timed(source, submission_id, self._retime_seed(run), baseline))
            if report.passed_score() is None:
                break
        return report

    async def _profiled(self, kernel_id: int, source: str, report: EvalReport, baseline: bool) -> EvalReport:
        """A new leader's report with its profile (module note), where the backend can profile and
        ``evaluator.profile`` asks for it ("auto": for a language model, which reads it)."""
        backend, setting = self.ctx.backend, self.ctx.scenario.evaluator.profile
        if setting == "off" or (setting == "auto" and not self.asks_a_model) or not isinstance(backend, Profiles):
            return report
        leader = self._leader()
        best = leader.report.passed_score() if leader is not None else None
        score = report.passed_score()
        if score is None or not report.shapes or (best is not None and score >= best):
            return report
        index = profile_target(report)
        where = report.shapes[index].shape.label()
        self.say(
            "queue", f"kernel {kernel_id} leads: profiling one call on {where} (Nsight Compute)", kernel_id=kernel_id
        )
        profile = await backend.profile(source, index, secret_seed=self.secret_seed, baseline=baseline)
        self.say("info", f"kernel {kernel_id}: {profile_line(profile)}", kernel_id=kernel_id)
        return msgspec.structs.replace(report, profile=profile)

    async def _timed(self, source: str, submission_id: int, secret_seed: int, baseline: bool) -> EvalReport:
        """One timing on the backend, its hardware time charged to the campaign clock as it ends;
        ``baseline``: the seed or its lowering (``Kernel.is_baseline``)."""
        report = await self.ctx.backend.evaluate(
            source, submission_id=submission_id, secret_seed=secret_seed, baseline=baseline
        )
        await anyio.sleep(report.duration_s)
        return report

    def _retime_seed(self, run: int) -> int:
        """The secret seed of a kernel's timing number ``run`` + 1 (0: its first, ``secret_seed``):
        new inputs for every timing, the same ones whether it runs now or in a later resume."""
        return zlib.crc32(f"retime:{run}:{self.secret_seed}".encode())

    def _leader(self) -> Evaluation | None:
        """The recorded leader (``metrics.leader``: the best passing score, a tie to the older kernel)."""
        return metrics.leader(self.board.evaluations())

    async def _retime_leader(self) -> None:
        """When a campaign starts or resumes with a leader timed fewer than ``retime_leaders`` + 1
        times (a blackboard from before leaders were re-timed keeps its lucky single timing), time
        it again before any new candidate, so that it is neither bred from nor raced against on
        one sample. Each timing is recorded as it ends (``Blackboard.record_retiming``): a killed
        run loses only the timing in progress, and a resume counts on from the blackboard. A
        kernel that loses the lead meanwhile hands it on to the next, which is checked the same way."""
        wanted = self.ctx.scenario.evaluator.retime_leaders + 1
        tried: set[int] = set()  # a re-timing that added nothing (passed untimed) is not repeated
        while (ev := self._leader()) is not None and ev.report.timings() < wanted and ev.kernel_id not in tried:
            tried.add(ev.kernel_id)
            if not await self._retime_recorded(ev, wanted):
                return  # the deadline came first

    async def _retime_recorded(self, ev: Evaluation, wanted: int) -> bool:
        """Time a recorded evaluation's kernel until it has ``wanted`` timings or fails; False when
        the deadline stopped it. Each run waits for the rate limit and is recorded as a start."""
        board, rank = self.board, self.rank
        kernel = board.kernel(ev.kernel_id)
        source, baseline = kernel.source, kernel.is_baseline()
        recorded = False
        while (score := ev.report.passed_score()) is not None and (done := ev.report.timings()) < wanted:
            with anyio.move_on_at(self.ctx.clock.to_loop(self.ctx.clock.deadline)):
                await self._await_headroom(rank)
            if self.ctx.clock.over():
                return False
            board.say(
                agent=self.name,
                kind="queue",
                at=self.now(),
                kernel_id=ev.kernel_id,
                text=f"kernel {ev.kernel_id} leads ({score:.1f} us, {ev.report.provenance.label()}) with "
                + ("one timing" if done == 1 else f"{done} timings")
                + ("" if recorded else " (recorded by an earlier run or version)")
                + f"; timing it again with new inputs ({done + 1} of {wanted})",
            )
            board.record_start(ev.submission_id, self.now())
            if not self.ctx.backend.simulated:
                self._hint([source])
            self._current.append(source)
            try:
                again = await self._timed(source, ev.submission_id, self._retime_seed(done), baseline)
            finally:
                self._current.remove(source)
            await self.act(rank)
            report = ev.report.retimed(again)
            if report == ev.report:  # passed untimed: nothing to fold in
                break
            ev, recorded = board.record_retiming(ev, report), True
        if recorded:
            kernel = board.kernel(ev.kernel_id)
            board.say(
                agent=self.name,
                kind="evaluation",
                at=self.now(),
                text=evaluation_text(kernel.id, ev.report),
                kernel_id=kernel.id,
                hypothesis_id=kernel.hypothesis_id,
            )
        return True

    def _compiled_ahead(self, sub: Submission) -> bool:
        """On real hardware the queue's head is often a candidate queued a moment ago, still
        compiling ahead, while compiled ones wait behind it, and the GPU would sit idle for that
        compile (docs/results.md#evaluations-per-gpu-hour). So the evaluator takes the compiled one
        of highest expected value first; the head follows once its compile has ended."""
        return self.ctx.backend.compiled_ahead(self.board.kernel(sub.kernel_id).source)

    async def _await_headroom(self, rank: int) -> None:
        """Wait for this agent's slot at a moment the rate limit allows a start."""
        while True:
            await self.act(rank)
            wait = self._headroom()
            if wait <= 0:
                return
            await anyio.sleep(wait)


def evaluation_text(kernel_id: int, report: EvalReport) -> str:
    """The evaluator's line for one result, labelled from its provenance ("simulated on ..." or
    "measured on ..."), as is every line of this agent that states a time."""
    score = report.passed_score()
    if score is not None:
        runs = ", ".join(f"{r:.1f}" for r in report.runs_us)
        runs = f"; geometric mean of {len(report.runs_us)} timings: {runs}" if runs else ""
        return f"kernel {kernel_id}: {score:.1f} us ({report.provenance.label()}{runs})"
    if report.passed():  # correct, but the backend could not time it (it says why)
        return f"kernel {kernel_id} passed, untimed: {report.reason}"
    return f"kernel {kernel_id} {report.outcome}: {report.reason}"
