"""The campaign runner: owns the root task group and starts each agent in it.

With a simulated backend the whole campaign runs on trio's MockClock (autojump): modeled thinking
time, evaluation time and the rate limit pass in virtual time, and wall time is spent only on real
work (kernel transformations, the sandboxed CPU checks). With a real backend it would run on the
wall clock; the agents cannot tell the difference.

At the deadline nothing new starts and the evaluations in flight finish and are recorded (their
hardware time is spent); the runner says so then, and the closing line says when the last of them
ended (docs/tuning.md, "The deadline"). Ctrl-C anywhere after the blackboard holds the campaign
says where it stopped and how to continue (``interrupted_text``).

An honest end. A campaign in which no agent can make progress any more ends then, not at its
deadline: nothing is queued, in flight or waiting in the pipeline, and every kernel that passed is
exhausted (its brain gave no plan for it), or none passed at all. Nothing can re-open work then,
since only a newly evaluated kernel is a new base (``stalled``). The closing line gives the reason,
once, and ``resume`` has nothing to continue. Waiting out the clock instead cost hours of wall
time on a real GPU for nothing.
"""

from __future__ import annotations

import contextlib
import random
import signal
import threading
import time
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import anyio
import msgspec
import trio.testing
from anyio.abc import TaskStatus

from kernel_scientist.agents import (
    Agent,
    Archivist,
    Brain,
    CampaignClock,
    Context,
    Critic,
    Engineer,
    EvaluatorAgent,
    OfflineBrain,
    Theorist,
)
from kernel_scientist.agents.brain import no_plan_text
from kernel_scientist.blackboard import (
    LOWERED_AUTHOR,
    SEED_AUTHOR,
    Blackboard,
    BlackboardError,
    Campaign,
    EvalReport,
    HypothesisState,
    Kernel,
    KernelState,
    Message,
    RunSegment,
    Scenario,
    SelectionState,
    SubmissionState,
    metrics,
    retune,
    scenario_from_json,
    scenario_json,
    seed_kernel,
)
from kernel_scientist.evaluator import Backend, StartsInBackground, Task
from kernel_scientist.knowledge.lowering import Lowered

from . import learn, logs
from .status import finished_at


@dataclass
class Outcome:
    db: Path
    resumed: bool
    released: int  # leases handed back on resume
    wall_s: float


class Interrupted(Exception):
    """Ctrl-C (SIGINT) stopped a campaign; the message is the one line the user sees."""


class Stopped(Exception):
    """The backend went away mid-campaign (a Ray cluster lost); the message is the one line the
    user sees, with how to continue."""


class NothingToResume(Exception):
    """``resume`` of a campaign that has already closed; nothing was written."""


def check_new(db: Path, fresh_name: str = "", named: bool = True) -> None:
    """Refuse, in one line whose advice works when followed, a --db that ``run`` cannot create
    without touching what the user did not ask it to: a path that exists (a campaign's blackboard,
    another file, a folder), a conversation log beside it, or (``named``: the user typed the path)
    a parent folder that does not exist. ``fresh_name`` is the file name a suggested path uses
    where the given one is a folder or not a blackboard (the scenario's default name)."""
    from kernel_scientist.blackboard import inspect, open_existing

    fresh = fresh_name or db.name
    if db.is_dir():
        raise BlackboardError(
            f"--db {db}: is a folder; name the blackboard file to create, e.g. --db {_free(db / fresh)}"
        )
    if db.exists():
        try:
            inspect(db)
        except BlackboardError as exc:
            what = str(exc).split(";")[0]  # what the file is; its advice is for commands that read one
            raise BlackboardError(
                f"{what}; `run` creates a new blackboard and never overwrites a file: "
                f"pass a new path, e.g. --db {_free(db.with_name(fresh))}"
            ) from None
        with open_existing(db) as board:
            closed = finished_at(board)
        carry_on = (
            f"continue it with `kernel-scientist resume --db {db}`"
            if closed is None
            else f"it finished at {logs.clock(closed)} campaign time (its leaderboard: "
            f"`kernel-scientist status --db {db}`)"
        )
        raise BlackboardError(f"{db} already holds a campaign; {carry_on}, or start a new one with --db {_free(db)}")
    log = logs.jsonl_path(db)
    if log.exists():
        raise BlackboardError(
            f"{log} already exists and the new campaign's conversation would be appended to it; "
            f"pass another --db, e.g. --db {_free(db)}"
        )
    parent = db.parent
    if parent.exists() and not parent.is_dir():
        raise BlackboardError(f"--db {db}: {parent} is a file, not a folder; pass another --db")
    if named and not parent.exists():
        raise BlackboardError(
            f"--db {db}: no folder {parent} to write it in; create it first (mkdir -p {parent}) or pass another --db"
        )


def _free(db: Path) -> Path:
    """``db``, or the first of ``name-2.sqlite``, ``name-3.sqlite``, ... that neither exists nor has a
    conversation log beside it: a path ``run`` would accept."""
    stem, suffix = db.stem, db.suffix or ".sqlite"
    candidate, n = db.with_suffix(suffix), 1
    while candidate.exists() or logs.jsonl_path(candidate).exists():
        n += 1
        candidate = db.with_name(f"{stem}-{n}{suffix}")
    return candidate


def interrupted_text(db: Path | None, resume: bool = False) -> str:
    """The one line for Ctrl-C during ``run`` or ``resume``, wherever it lands: before the
    blackboard holds a campaign, nothing was written; after, where the campaign stopped and the
    command that continues it (or, once it has closed, where its leaderboard is)."""
    from kernel_scientist.blackboard import open_existing

    if db is None or not db.exists():
        return f"interrupted before the campaign {'resumed' if resume else 'started'}; nothing was written"
    try:
        with open_existing(db) as board:
            board.campaign()  # a blackboard that holds no campaign raises here
            at, closed = board.clock(), finished_at(board)
    except BlackboardError as exc:
        return f"interrupted; {exc}"
    if closed is not None:
        return (
            f"interrupted after the campaign finished at {logs.clock(closed)} campaign time; "
            f"its leaderboard: `kernel-scientist status --db {db}`"
        )
    return f"interrupted at {logs.clock(at)} campaign time; continue with `kernel-scientist resume --db {db}`"


def start(
    scenario: Scenario,
    db: Path,
    listeners: Sequence[Callable[[Message], None]] = (),
    lessons: Sequence[learn.Lesson] = (),
) -> Outcome:
    """Create a campaign in a new blackboard file and run it to its deadline; ``lessons``
    (``learn.read_all``) seed its findings with what earlier campaigns measured. A start that
    fails (no API key, no GPU, a broken task) or is interrupted before the campaign is recorded
    leaves no file behind."""
    check_new(db, named=False)
    return _run(scenario, db, listeners, resume=False, lessons=lessons)


def resume(db: Path, listeners: Sequence[Callable[[Message], None]] = (), overrides: Sequence[str] = ()) -> Outcome:
    """Continue a campaign from its blackboard file (after a crash, kill -9 or Ctrl-C), optionally
    with retuned limits (``evaluator.in_flight=2``) for this run. Raises NothingToResume, having
    written nothing, when the campaign has closed and ``campaign.hours`` was not extended, or
    when it ended early with nothing left to try (more hours would not change that)."""
    from kernel_scientist.blackboard import open_existing

    with open_existing(db) as board:  # read-only: every check happens before the first write
        scenario = scenario_from_json(board.campaign().config_json)
        closed = finished_at(board)
        if overrides:
            scenario = retune(scenario, list(overrides), str(db))
        why = stalled(board, scenario) if closed is not None else None
    if why is not None:  # it ended early with nothing left: a resume would end at once, saying so again
        raise NothingToResume(
            f"{db}: the campaign ended at {logs.clock(closed or 0.0)} campaign time with {why}; "
            f"nothing to resume (its leaderboard: kernel-scientist status --db {db})"
        )
    if closed is not None and scenario.campaign.hours * 3600.0 <= closed:
        raise NothingToResume(
            f"{db}: the campaign already finished at {logs.clock(closed)} campaign time "
            f"(campaign.hours = {scenario.campaign.hours:g}); nothing to resume. To run it longer: "
            f"kernel-scientist resume --db {db} --set campaign.hours={max(2 * scenario.campaign.hours, 1):g}"
        )
    return _run(scenario, db, listeners, resume=True, retuned=list(overrides))


def _run(
    scenario: Scenario,
    db: Path,
    listeners: Sequence[Callable[[Message], None]],
    *,
    resume: bool,
    retuned: Sequence[str] = (),
    lessons: Sequence[learn.Lesson] = (),
) -> Outcome:
    from kernel_scientist.evaluator import load_task, make_backend

    wall = time.perf_counter()
    # Everything that can refuse to start does so before the blackboard file exists.
    if scenario.agents.brain != "offline":
        from kernel_scientist.agents.llm import LLMService

        LLMService.preflight(scenario)
    task = load_task(scenario.task_path())
    try:  # read before anything is created: a campaign without its seed would be a dead end
        seed_source = "" if resume else scenario.seed_path().read_text()
    except OSError as exc:
        raise BlackboardError(
            f"{scenario.seed_path()}: cannot read the seed kernel ({exc.strerror}); "
            "set campaign.seed_file to a file of the task folder"
        ) from None
    with _keeping_sigterm():
        backend = make_backend(scenario.evaluator, task, llm=scenario.agents.brain != "offline")
    released = 0
    with backend:
        try:
            board = _open_board(scenario, db, task, backend, resume, seed_source)
        except KeyboardInterrupt:
            raise Interrupted(interrupted_text(db, resume)) from None
        try:
            with board:
                try:
                    released = _campaign(board, scenario, task, backend, listeners, resume, retuned, lessons)
                except BaseException as exc:
                    lost = _lost(exc)
                    if lost is None:
                        raise
                    raise Stopped(
                        f"{lost}; the campaign stopped at {logs.clock(board.clock())} campaign time "
                        "with every finished evaluation recorded; continue with `kernel-scientist "
                        f"resume --db {db}` once the cluster is back (--set evaluator.ray_address=... "
                        "if its address changed)"
                    ) from None
        except BaseException as exc:
            if not _is_interrupt(exc):
                raise
            # Wherever it landed (the opening lines, the agents, the closing line, closing the
            # file), the blackboard holds the campaign: the line says where it stopped.
            raise Interrupted(interrupted_text(db, resume)) from None
    return Outcome(db=db, resumed=resume, released=released, wall_s=time.perf_counter() - wall)


def _campaign(
    board: Blackboard,
    scenario: Scenario,
    task: Task,
    backend: Backend,
    listeners: Sequence[Callable[[Message], None]],
    resume: bool,
    retuned: Sequence[str],
    lessons: Sequence[learn.Lesson],
) -> int:
    """Say how the campaign starts (or resumes), then run the agents past the deadline until the
    work in flight has ended; returns the number of claims a resume handed back."""
    for listener in listeners:
        board.on_message(listener)
    released = 0
    if resume:
        ev = scenario.evaluator
        board.start_segment(
            RunSegment(
                started_at=board.clock(),
                rate_per_hour=ev.rate_per_hour,
                in_flight=ev.in_flight,
                hours=scenario.campaign.hours,
                settings=list(retuned),
            )
        )
        released = board.release_leases()
        board.say(
            agent="runner",
            kind="info",
            at=board.clock(),
            text=f"resumed at campaign time {board.clock() / 3600:.2f} h; "
            f"{released} unfinished claims handed back" + (f"; this run with {', '.join(retuned)}" if retuned else ""),
        )
    else:
        board.say(
            agent="runner",
            kind="info",
            at=0.0,
            kernel_id=board.kernels()[0].id,
            text=f"campaign '{scenario.campaign.name}' on {task.name}: {scenario.campaign.hours:g} h "
            f"({'virtual' if backend.simulated else 'wall'} clock), backend {backend.name} "
            f"({backend.device_name}), seed {scenario.campaign.seed}; reference "
            f"{_reference_text(board.campaign().reference, backend.simulated)}",
        )
        learn.record(board, list(lessons), at=0.0)
    clock = CampaignClock(offset=board.clock(), deadline=scenario.campaign.hours * 3600.0)
    options = {"clock": trio.testing.MockClock(autojump_threshold=0)} if backend.simulated else {}
    anyio.run(_agents, board, scenario, clock, backend, task, backend="trio", backend_options=options)
    return released


def _open_board(
    scenario: Scenario, db: Path, task: Task, backend: Backend, resume: bool, seed_source: str
) -> Blackboard:
    """The campaign's blackboard: reopened for a resume; for a new campaign, created with the
    campaign record and the seed kernel, and removed again if that fails half-way."""
    if resume:
        if isinstance(backend, StartsInBackground):
            backend.wait_started()
        return Blackboard(db)
    reference = backend.reference_report()  # the slow part of a start: before the file exists
    if isinstance(backend, StartsInBackground):  # it started meanwhile; one that cannot refuses here
        backend.wait_started()
    made = [folder for folder in (db.parent, *db.parent.parents) if not folder.exists()]  # the default out_dir
    board: Blackboard | None = None
    try:
        db.parent.mkdir(parents=True, exist_ok=True)
        board = Blackboard(db)
        board.create_campaign(
            Campaign(
                name=scenario.campaign.name,
                seed=scenario.campaign.seed,
                task=task.name,
                backend=backend.name,
                simulated=backend.simulated,
                config_json=scenario_json(scenario),
                created_wall=time.time(),
                virtual_time=backend.simulated,
                reference=reference,
                segments=[
                    metrics.first_segment(
                        scenario.evaluator.rate_per_hour, scenario.evaluator.in_flight, scenario.campaign.hours
                    )
                ],
            )
        )
        board.add_kernel(
            source=seed_source,
            author=SEED_AUTHOR,
            at=0.0,
            state=KernelState.DRAFT,
            summary=f"seed submission ({scenario.seed_path().name})",
        )
    except BaseException:  # Ctrl-C included: a start that did not finish leaves nothing behind
        if board is not None:
            board.close()
        for path in (db, db.with_name(db.name + "-wal"), db.with_name(db.name + "-shm")):
            path.unlink(missing_ok=True)
        for folder in made:  # innermost first; a folder something else wrote into stays
            with contextlib.suppress(OSError):
                folder.rmdir()
        raise
    return board


NOT_LOWERED = "was not lowered"  # in the runner's line on a seed (or reference) it decided not to lower


class Lowering(msgspec.Struct, frozen=True):
    """What the runner is due to lower: the seed, a PyTorch one that passed its check; or, when
    the seed failed (``failed`` says how), the folder's reference in its place."""

    seed: Kernel
    failed: str = ""  # "failed its check (wrong_output)", "was sent back by the critic"; "" = passed


def seed_fate(board: Blackboard, seed: Kernel) -> str | None:
    """None while the seed awaits its result; "" once it passed its check; else how it failed."""
    evaluation = board.evaluation_for(seed.id)
    if evaluation is not None:
        report = evaluation.report
        return "" if report.passed() else f"failed its check ({report.outcome})"
    return "was sent back by the critic" if seed.state == KernelState.REJECTED else None


def seed_to_lower(board: Blackboard, scenario: Scenario) -> Lowering | None:
    """What is due to be lowered now in a campaign with ``campaign.lower_seed``: once the seed has
    its result, the seed if it passed and has no Triton kernel of its own, the folder's reference
    if it failed (whatever its kernel), unless the runner has already lowered one or said why it
    did not. A function of the blackboard alone, so a campaign killed while lowering lowers on
    resume, and one resumed after it never lowers twice."""
    from kernel_scientist.knowledge.lowering import is_pytorch_only

    seed = seed_kernel(board) if scenario.campaign.lower_seed else None
    fate = None if seed is None else seed_fate(board, seed)
    if seed is None or fate is None or (not fate and not is_pytorch_only(seed.source)):
        return None
    if any(k.author == LOWERED_AUTHOR for k in board.kernels()):
        return None
    if any(m.kernel_id == seed.id and NOT_LOWERED in m.text for m in board.messages(agent="runner")):
        return None
    return Lowering(seed, fate)


def lower(scenario: Scenario, task: Task, due: Lowering) -> tuple[Lowered | None, str]:
    """The seed lowered by Inductor (in a process of its own, on this machine's device) when it
    passed its check, else the folder's reference (``lower_reference``): a failed seed is not
    lowered, since the lowering would copy its mistake into every kernel tuned from it, while the
    reference is correct by definition. Returns the lowering and the runner's line on it: what it
    gave ("{id}" for the new kernel's), or why there is none (with a failed seed the campaign then
    has nothing to build on and ends; with a passed one it goes on from the seed alone)."""
    from kernel_scientist.lower import REFERENCE_NAME, LoweringError, lower_reference, lower_seed

    name = scenario.seed_path().name
    timeout_s = scenario.campaign.lower_timeout_s
    try:
        if due.failed:
            lowered = lower_reference(task, timeout_s=timeout_s)
        else:
            lowered = lower_seed(task, due.seed.source, name, timeout_s=timeout_s)
    except LoweringError as exc:
        if due.failed:
            return None, f"{name} {due.failed} and the folder's {REFERENCE_NAME} {NOT_LOWERED} in its place: {exc}"
        return None, f"{name} has no Triton kernel and {NOT_LOWERED}: {exc}; the campaign goes on from it alone"
    count = f"{len(lowered.kernels)} Triton kernel{'s' if len(lowered.kernels) != 1 else ''}"
    kept = f"; library calls kept: {', '.join(lowered.library_calls)}" if lowered.library_calls else ""
    if due.failed:
        return lowered, (
            f"{name} {due.failed}: kernel {{id}} is the folder's {REFERENCE_NAME} lowered by Inductor "
            f"({count}{kept}), the campaign's start in its place; " + lowered.provenance
        )
    return lowered, (
        f"{name} has no Triton kernel and passed its check: kernel {{id}} is its lowering by Inductor "
        f"({count}{kept}); " + lowered.provenance
    )


@contextlib.contextmanager
def _keeping_sigterm() -> Iterator[None]:
    """Put back the SIGTERM handler in force before the block (the command line's, which stops a
    campaign the way Ctrl-C does) if the block replaced it: ``ray.init``, which the Ray backend
    calls as it joins its cluster, installs ``sys.exit`` for SIGTERM, which would end a campaign
    mid-step with no line."""
    main = threading.current_thread() is threading.main_thread()
    before = signal.getsignal(signal.SIGTERM) if main else None
    try:
        yield
    finally:
        if before is not None and signal.getsignal(signal.SIGTERM) is not before:
            signal.signal(signal.SIGTERM, before)


def _is_interrupt(exc: BaseException) -> bool:
    """Ctrl-C, alone or inside the exception group a task group raises as it unwinds."""
    if isinstance(exc, KeyboardInterrupt):
        return True
    return isinstance(exc, BaseExceptionGroup) and exc.subgroup(KeyboardInterrupt) is not None


def _lost(exc: BaseException) -> BaseException | None:
    """The ClusterError (a lost cluster, or a host that cannot run the harness) that ended the
    agents, alone or inside the task groups' exception groups."""
    from kernel_scientist.evaluator import ClusterError

    if isinstance(exc, ClusterError):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        found: BaseException | None = exc.subgroup(ClusterError)
        while isinstance(found, BaseExceptionGroup):
            found = found.exceptions[0]
        return found
    return None


def _reference_text(reference: EvalReport | None, simulated: bool) -> str:
    score = reference.passed_score() if reference else None
    if score is None:
        return f"n/a ({reference.outcome}: {reference.reason})" if reference else "n/a"
    return f"{score:.1f} us ({'simulated' if simulated else 'measured'})"


async def _agents(board: Blackboard, scenario: Scenario, clock: CampaignClock, backend: Backend, task: Task) -> None:
    clock.origin = anyio.current_time()
    seed = scenario.campaign.seed

    service = None
    if scenario.agents.brain != "offline":  # a language model (or its recording) thinks
        from kernel_scientist.agents.llm import LLMService

        service = LLMService(scenario, board, clock.now)

    def context(name: str) -> Context:
        brain: Brain
        if service is not None:
            brain = service.brain(name)
        else:
            brain = OfflineBrain(
                random.Random(zlib.crc32(f"{seed}:brain:{name}".encode())),
                vendor=backend.spec.vendor,
                kernels=task.kernels(),
            )
        return Context(board=board, scenario=scenario, clock=clock, seed=seed, backend=backend, task=task, brain=brain)

    cfg = scenario.agents
    archivist = Archivist(context("archivist"), "archivist", rank=1)
    theorist = Theorist(context("theorist"), "theorist", rank=2)
    critic = Critic(context("critic"), "critic", rank=3)
    evaluator = EvaluatorAgent(context("evaluator"), "evaluator", rank=8)
    engineers = [Engineer(context(f"engineer-{i + 1}"), f"engineer-{i + 1}", rank=24 + i) for i in range(cfg.engineers)]
    runner = _Runner(context("runner"), "runner", rank=0)  # rank 0: the slot no agent uses
    if clock.over():
        board.say(agent="runner", kind="info", at=clock.now(), text="the campaign is already past its deadline")
    else:
        async with anyio.create_task_group() as root:
            runner.end = root.cancel_scope.cancel  # an early end stops every agent (module note)
            for agent in (evaluator, critic, archivist, theorist, *engineers, runner):
                await root.start(agent.run)
    # The queue has drained: judge and digest what finished after the deadline.
    await critic.final_pass()
    await archivist.final_pass()
    stopped = [a for a in (archivist, theorist, critic, *engineers) if a.retired]
    if stopped:  # said once more at the end, plainly: the brain went quiet for good, and why
        board.say(
            agent="runner",
            kind="warning",
            at=clock.now(),
            text=f"{', '.join(a.name for a in stopped)} stopped asking the brain before the end: "
            + "; ".join(f"{a.name}: {a.retired_why}" for a in stopped[:2])
            + ("; ..." if len(stopped) > 2 else ""),
        )
    board.say(
        agent="runner",
        kind="closing",
        at=clock.now(),
        text=_closing_text(board, clock, runner.in_flight, runner.stalled),
    )


def stalled(board: Blackboard, scenario: Scenario) -> str | None:
    """Why no agent can make progress any more ("nothing left to try: ..."), or None while one
    can: while anything is queued, in flight or waiting in the pipeline (an open selection, a
    chosen or claimed plan, a kernel not yet judged or evaluated), while a kernel that passed is
    not exhausted (the archivist would pick it), while a lowering is due (``seed_to_lower``: the
    seed's, or the folder's reference when the seed failed), and while the leader lacks the
    timings the evaluator re-times a leader to (it does so when a run starts). A leader whose
    re-timing passed untimed keeps too few timings, and such a campaign runs to its deadline as
    before."""
    if any(s.state == SelectionState.OPEN for s in board.selections()):
        return None
    if board.hypotheses(HypothesisState.CHOSEN, HypothesisState.CLAIMED):
        return None
    if board.kernels(KernelState.DRAFT, KernelState.QUEUED, KernelState.EVALUATING):
        return None
    if board.submissions(SubmissionState.QUEUED, SubmissionState.LEASED):
        return None
    evals = board.evaluations()
    leader = metrics.leader(evals)
    if leader is not None and leader.report.timings() < scenario.evaluator.retime_leaders + 1:
        return None
    exhausted = {s.base_id for s in board.selections() if s.state == SelectionState.EXHAUSTED}
    passed = sorted({e.kernel_id for e in evals if e.report.passed_score() is not None})
    if any(k not in exhausted for k in passed):
        return None
    if seed_to_lower(board, scenario) is not None:  # the lowering (of the seed or the reference) is a new base
        return None
    if passed:
        return "nothing left to try: " + no_plan_text(scenario, [board.kernel(k) for k in passed])
    return "nothing to build on: " + _none_passed(board)


def _none_passed(board: Blackboard) -> str:
    """Why the archivist has no base to pick: what became of the seed (its evaluation's outcome,
    or the critic's review), and of the kernels after it."""
    seed = seed_kernel(board)
    assert seed is not None, "a campaign's blackboard holds its seed from the start"
    ev = board.evaluation_for(seed.id)
    if ev is not None:
        untimed = " untimed" if ev.report.passed() and ev.report.passed_score() is None else ""
        fate = f"{ev.report.outcome}{untimed}: {' '.join(ev.report.reason.split())[:160]}"
    elif seed.state == KernelState.REJECTED:
        reasons = [r.reasons for r in board.reviews(seed.id) if not r.approved]
        fate = "sent back by the critic" + (f": {'; '.join(reasons[-1])[:160]}" if reasons else "")
    else:
        fate = str(seed.state)
    others = len(board.kernels()) - 1
    rest = f"; nor did any of the {others} kernels after it" if others else ""
    timed = " with a time" if any(e.report.passed() for e in board.evaluations()) else ""  # some passed untimed
    return f"no kernel passed an evaluation{timed} (the seed, kernel {seed.id}, {fate}{rest})"


class _Runner(Agent):
    """The runner: ends the campaign early when no agent can make progress any more (``stalled``;
    module note), else at the deadline says that nothing new starts, which evaluations are still
    in flight (they finish and are recorded: their hardware time is spent, and on a real GPU an
    abandoned run would be a paid-for measurement thrown away) and what stays queued; remembers
    the submissions in flight (or why it ended early) for the closing line."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self.in_flight: list[int] = []  # submission ids
        self.stalled: str | None = None  # why the campaign ended before its deadline
        self.end: Callable[[], None] = lambda: None  # cancels every agent (set by the campaign runner)
        self.lowering_settled = False  # the seed's lowering is done or will never be due: no more reads

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        clock = self.ctx.clock
        with anyio.move_on_at(clock.to_loop(clock.deadline)):
            while True:  # read on this agent's own slot: every other agent's step is complete then
                await self.act()
                await self._lower_seed()
                self.stalled = stalled(self.board, self.ctx.scenario)
                if self.stalled is not None:
                    self.end()
                    return
                await self.board.wait_change("selection", "hypothesis", "kernel", "submission", "evaluation")
        await self.act()
        leased = self.board.submissions(SubmissionState.LEASED)
        queued = len(self.board.submissions(SubmissionState.QUEUED))
        self.in_flight = [s.id for s in leased]
        kernels = ", ".join(str(s.kernel_id) for s in leased)
        if not leased:
            running = "no evaluation is in flight"
        elif len(leased) == 1:
            running = f"the evaluation of kernel {kernels} in flight finishes and is recorded"
        else:
            running = f"the {len(leased)} evaluations in flight (kernels {kernels}) finish and are recorded"
        self.say(
            "info",
            f"deadline {_hours(clock.deadline)} reached: nothing new starts; {running}"
            + (f"; {_count(queued, 'queued submission')} left unevaluated" if queued else ""),
        )

    async def _lower_seed(self) -> None:
        """Lower what is due (``seed_to_lower``, ``lower``): the seed once it has passed its check,
        or the folder's reference once it failed; add the lowering as a draft for the critic,
        saying what it gave. The lowering is CPU work of up to ``campaign.lower_timeout_s`` wall
        seconds: on the virtual clock it runs here, blocking, so no campaign time passes (as a
        simulated evaluation's checks do); on the wall clock in a worker thread, so the other
        agents go on meanwhile. Either way the runner judges ``stalled`` only after it."""
        if self.lowering_settled:
            return
        board, scenario = self.board, self.ctx.scenario
        due = seed_to_lower(board, scenario)
        if due is None:  # settled once the seed has its result (every kernel is read until then)
            seed = seed_kernel(board)
            self.lowering_settled = not scenario.campaign.lower_seed or (
                seed is not None and seed_fate(board, seed) is not None
            )
            return
        self.lowering_settled = True
        if self.ctx.backend.simulated:
            lowered, line = lower(scenario, self.ctx.task, due)
        else:
            lowered, line = await anyio.to_thread.run_sync(lower, scenario, self.ctx.task, due)
            await self.act()
        if lowered is None:
            self.say("info", line, kernel_id=due.seed.id)
            return
        kernel = board.add_kernel(
            source=lowered.source,
            author=LOWERED_AUTHOR,
            at=self.now(),
            state=KernelState.DRAFT,
            summary=lowered.provenance,
            parent_id=due.seed.id,
        )
        self.say("info", line.replace("{id}", str(kernel.id)), kernel_id=kernel.id)


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _closing_text(board: Blackboard, clock: CampaignClock, in_flight: list[int], stalled: str | None) -> str:
    """The closing line: the deadline and, when evaluations were in flight then, when the last of
    them finished (the campaign's real end); or, for an early end, when and why."""
    total = _count(len(board.evaluations()), "evaluation")
    deadline = _hours(clock.deadline)
    if stalled is not None:
        return f"campaign over at {clock.now() / 3600:.2f} h, before its deadline of {deadline}: {stalled}; {total}"
    if in_flight:
        ends = [e.finished_at for e in board.evaluations() if e.submission_id in in_flight]
        which = "the evaluation" if len(in_flight) == 1 else f"the {len(in_flight)} evaluations"
        return (
            f"campaign over: deadline {deadline}; {which} in flight at the deadline finished "
            f"{'at' if len(in_flight) == 1 else 'by'} {max(ends, default=clock.now()) / 3600:.2f} h; {total}"
        )
    if clock.now() < clock.deadline + 60:  # the agents stop within moments of it
        return f"campaign over at its deadline, {deadline}, with nothing in flight; {total}"
    return f"campaign over at {clock.now() / 3600:.2f} h (deadline {deadline}); {total}"


def _hours(seconds: float) -> str:
    """A deadline as the scenario wrote it (campaign.hours): 24 h, 0.3 h, 0.01 h."""
    return f"{seconds / 3600:g} h"
