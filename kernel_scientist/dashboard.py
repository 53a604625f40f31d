"""The live dashboard: what every agent is doing, the evaluator's queue and limits, and progress.

Everything shown is derived from the blackboard alone (``snapshot``), so the same view works inside
the running campaign (``run --watch``, fed by a message listener on a second connection) and from
another process (``watch --db``, which polls ``PRAGMA data_version`` and sleeps between polls: a
commit by the campaign changes it, nothing else does). ``render`` turns a snapshot into one rich
renderable; ``rich.live.Live`` redraws it in place, so the terminal does not flicker or scroll.

Times are campaign times (virtual seconds when the campaign is simulated); the dashboard says which.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import msgspec
from rich.console import Console, Group
from rich.live import Live
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from kernel_scientist.blackboard import (
    Blackboard,
    HypothesisState,
    Kernel,
    KernelState,
    Message,
    Submission,
    SubmissionState,
    metrics,
    open_existing,
    scenario_from_json,
    seed_score,
)

from .logs import ALARM, clock, colour
from .status import finished_at

SPARKS = "▁▂▃▄▅▆▇█"


class AgentRow(msgspec.Struct, frozen=True):
    name: str
    state: str  # "working", "waiting", "evaluating", "done", "not started"
    task: str  # what it holds or last said
    last_at: float | None


class QueueRow(msgspec.Struct, frozen=True):
    kernel_id: int
    expected_value: float
    state: str  # queued | leased
    waited_s: float
    summary: str


class Snapshot(msgspec.Struct, frozen=True):
    name: str
    task: str
    simulated: bool
    seed: int
    now: float  # campaign time of the latest record
    hours: float  # the campaign's deadline
    over: bool
    rate_per_hour: float
    in_flight: int
    starts_last_hour: int
    next_start_in_s: float  # 0 = the rate limit would allow a start now
    utilisation: float  # blackboard.metrics: busy / capacity in force, since the start
    rate_used: float  # blackboard.metrics: starts / starts the rate limits in force allowed
    label: str  # from the evaluations' provenance: "simulated on ..." / "measured on ..."
    predictions: metrics.Calibration
    evaluations: int
    failed: int
    best_us: float | None
    seed_us: float | None
    best_over_time: list[tuple[float, float]]  # (campaign time, best score so far in us)
    agents: list[AgentRow]
    queue: list[QueueRow]
    messages: list[Message]


def snapshot(board: Blackboard, messages: int = 12) -> Snapshot:
    """Read one consistent view of a campaign (one read transaction: a commit by the campaign's
    process lands wholly before or wholly after it)."""
    with board.reading():
        return _snapshot(board, messages)


def _snapshot(board: Blackboard, messages: int) -> Snapshot:
    campaign = board.campaign()
    scenario = scenario_from_json(campaign.config_json)
    now = board.clock()
    conversation = board.messages()  # a campaign day has a few thousand lines: cheap to re-read
    recent = conversation[-messages:]
    kernels = {k.id: k for k in board.kernels()}
    evals = board.evaluations()
    subs = board.submissions()

    # The best score over time, in the order results landed (blackboard.metrics).
    best_over_time = metrics.best_over_time(evals)
    best = best_over_time[-1][1] if best_over_time else None
    failed = sum(1 for e in evals if e.report.passed_score() is None)
    seed_us = seed_score(board)

    # Rate limit and utilisation against the limits in force at each moment (blackboard.metrics).
    starts = board.evaluation_starts()
    next_in = metrics.headroom_s(campaign, starts, now)
    leased = [s for s in subs if s.state == SubmissionState.LEASED]
    use = metrics.usage(campaign, evals, subs, starts, now)
    limits = metrics.limits_at(campaign, now)

    queue = [
        QueueRow(
            kernel_id=s.kernel_id,
            expected_value=s.expected_value,
            state=s.state,
            waited_s=max(0.0, now - s.enqueued_at),
            summary=kernels[s.kernel_id].summary,
        )
        for s in subs
        if s.state in (SubmissionState.QUEUED, SubmissionState.LEASED)
    ]
    over = finished_at(board) is not None
    return Snapshot(
        name=campaign.name,
        task=campaign.task,
        simulated=campaign.simulated,
        seed=campaign.seed,
        label=next((e.report.provenance.label() for e in evals), ""),
        predictions=metrics.calibration(board.hypotheses()),
        now=now,
        hours=limits.hours,
        over=over,
        rate_per_hour=limits.rate_per_hour,
        in_flight=limits.in_flight,
        starts_last_hour=sum(1 for t in starts if t > now - 3600.0),
        next_start_in_s=next_in,
        utilisation=use.utilisation,
        rate_used=use.rate_used,
        evaluations=len(evals),
        failed=failed,
        best_us=best,
        seed_us=seed_us,
        best_over_time=best_over_time,
        agents=_agents(board, conversation, scenario.agents.engineers, kernels, leased, over),
        queue=queue,
        messages=recent,
    )


def _agents(
    board: Blackboard,
    conversation: list[Message],
    engineers: int,
    kernels: dict[int, Kernel],
    leased: list[Submission],
    over: bool,
) -> list[AgentRow]:
    names = ["archivist", "theorist", *(f"engineer-{i + 1}" for i in range(engineers)), "critic", "evaluator"]
    latest: dict[str, Message] = {}
    for msg in conversation:
        latest[msg.agent] = msg
    claimed = {h.lease_owner: h for h in board.hypotheses(HypothesisState.CLAIMED) if h.lease_owner}
    drafts = [k for k in kernels.values() if k.state == KernelState.DRAFT]
    rows = []
    for name in names:
        last = latest.get(name)
        state, task = ("waiting", last.text if last else "")
        if name in claimed:
            hyp = claimed[name]
            state, task = "working", f"implementing H{hyp.id} {hyp.label or hyp.technique}"
        elif name == "evaluator" and leased:
            state = "evaluating"
            task = "kernel " + ", ".join(str(s.kernel_id) for s in leased)
        elif name == "critic" and drafts:
            state, task = "working", "reviewing kernel " + ", ".join(str(k.id) for k in drafts)
        elif last is None:
            state = "not started"
        if over:
            state = "done"
        rows.append(AgentRow(name=name, state=state, task=task, last_at=last.at if last else None))
    return rows


# ---- rendering ---------------------------------------------------------------------------
def over_time(points: list[tuple[float, float]], now: float, width: int = 60) -> list[float]:
    """Sample a step series of (time, value) at ``width`` even times up to ``now`` (the value in
    force at each; samples before the first point are dropped), so the sparkline's x axis is time."""
    out, j, current = [], 0, None
    for i in range(width):
        t = now * (i + 1) / width
        while j < len(points) and points[j][0] <= t:
            current = points[j][1]
            j += 1
        if current is not None:
            out.append(current)
    return out


def sparkline(values: list[float]) -> str:
    """Unicode blocks scaled between the series' min and max."""
    if not values:
        return ""
    lo, hi = min(values), max(values)
    span = hi - lo or 1.0
    return "".join(SPARKS[min(len(SPARKS) - 1, int((v - lo) / span * (len(SPARKS) - 1) + 0.5))] for v in values)


def render(snap: Snapshot) -> Group:
    """One frame: the header, the agents, the evaluator's limits and queue, progress, messages."""
    label = snap.label or "no evaluations yet"
    queue_title = (
        "evaluator: limits, and the kernels left unevaluated at the end"
        if snap.over
        else "evaluator: limits and queue (by expected value)"
    )
    return Group(
        Panel(_header(snap), title="kernel-scientist watch", subtitle=f"all times and scores {label}"),
        Panel(_agents_table(snap), title="agents"),
        Panel(Group(_gauge(snap), Text(""), _queue_table(snap)), title=queue_title),
        Panel(_progress(snap, label), title="best score over time (speed-up vs seed)"),
        Panel(_messages_table(snap), title="latest messages"),
    )


def _header(snap: Snapshot) -> Text:
    clock_kind = "virtual" if snap.simulated else "wall"
    head = Text()
    head.append(f"{snap.name}", style="bold")
    head.append(f"  {snap.task}, seed {snap.seed}  ")
    head.append(f"campaign time {clock(snap.now)} / {snap.hours:g} h ({clock_kind} clock)")
    head.append("  FINISHED" if snap.over else "  running", style="green" if snap.over else "yellow")
    return head


def _agents_table(snap: Snapshot) -> Table:
    agents = Table(expand=True, box=None, pad_edge=False)
    agents.add_column("agent", no_wrap=True)
    agents.add_column("state", no_wrap=True)
    agents.add_column("since", no_wrap=True)
    agents.add_column("current task / last said", overflow="ellipsis", no_wrap=True, ratio=1)
    for row in snap.agents:
        style = {"working": "bold", "evaluating": "bold green", "done": "dim"}.get(row.state, "")
        agents.add_row(
            Text(row.name, style=colour(row.name)),
            Text(row.state, style=style),
            clock(row.last_at) if row.last_at is not None else "-",
            row.task,
        )
    return agents


def _queue_table(snap: Snapshot, rows: int = 8) -> Table:
    queue = Table(expand=True, box=None, pad_edge=False)
    queue.add_column("kernel", justify="right")
    queue.add_column("EV", justify="right")
    queue.add_column("state")
    queue.add_column("waited", justify="right")
    queue.add_column("change", overflow="ellipsis", no_wrap=True, ratio=1)
    for q in snap.queue[:rows]:
        state = "not run" if snap.over else q.state
        queue.add_row(str(q.kernel_id), f"{q.expected_value:+.3f}", state, clock(q.waited_s), q.summary)
    if not snap.queue:
        queue.add_row("-", "", "empty", "", "")
    elif len(snap.queue) > rows:
        queue.add_row("…", "", f"+{len(snap.queue) - rows} more", "", "")
    return queue


def _gauge(snap: Snapshot) -> Text:
    """The rate limit, the in-flight limit and how much of it was used."""
    gauge = Text()
    gauge.append(f"rate limit {snap.rate_per_hour:g}/h: {snap.starts_last_hour} started in the last hour; ")
    if snap.over:  # a finished campaign starts nothing: no countdown, and the queue is what was left
        gauge.append("campaign finished, no more starts")
    else:
        gauge.append(
            "next start allowed now" if snap.next_start_in_s <= 0 else f"next start in {clock(snap.next_start_in_s)}"
        )
    gauge.append(f"\nin flight ≤ {snap.in_flight}; utilisation {snap.utilisation:.0%} ")
    gauge.append(_bar(snap.utilisation), style="green")
    gauge.append(f" rate limit used {snap.rate_used:.0%}")
    gauge.append(f"\n{snap.evaluations} evaluations ({snap.failed} failed)")
    gauge.append(f"\n{metrics.calibration_text(snap.predictions)}")
    return gauge


def _progress(snap: Snapshot, label: str) -> Text:
    progress = Text()
    if snap.best_us is None:
        progress.append("no passing evaluation yet")
        return progress
    times = metrics.speedup(snap.seed_us, snap.best_us)
    vs_seed = f", {times:.2f}x the seed" if times is not None else ""
    progress.append(f"best {snap.best_us:.1f} us ({label}){vs_seed}\n")
    # Plot the speed-up over the seed (over the first best score while the seed has none), so the
    # line rises as the campaign improves.
    base = snap.seed_us or snap.best_over_time[0][1]
    series = [x for b in over_time(snap.best_over_time, snap.now) if (x := metrics.speedup(base, b)) is not None]
    progress.append(f"00:00:00 {sparkline(series)} {clock(snap.now)}", style="cyan")
    return progress


def _messages_table(snap: Snapshot) -> Table:
    msgs = Table(expand=True, box=None, pad_edge=False, show_header=False)
    msgs.add_column(no_wrap=True)
    msgs.add_column(no_wrap=True)
    msgs.add_column(overflow="ellipsis", no_wrap=True, ratio=1)
    for m in snap.messages:
        style = ALARM if m.kind in ("error", "warning") else ""
        msgs.add_row(clock(m.at), Text(m.agent, style=colour(m.agent)), Text(m.text, style=style))
    return msgs


def _bar(fraction: float, width: int = 20) -> str:
    filled = int(round(fraction * width))
    return "█" * filled + "░" * (width - filled)


# ---- following ---------------------------------------------------------------------------
def watch(
    db: Path,
    *,
    once: bool = False,
    poll_s: float = 0.5,
    console: Console | None = None,
    stop_when_over: bool = False,
    messages: int = 12,
) -> None:
    """Draw the dashboard for the campaign in ``db`` and redraw it whenever the file changes.

    ``once`` draws one frame and returns. Otherwise it follows until interrupted (or, with
    ``stop_when_over``, until the campaign's closing message has been drawn).
    """
    console = console or Console()
    with open_existing(db) as board:
        if once:
            console.print(render(snapshot(board, messages)))
            return
        snap = snapshot(board, messages)
        with Live(render(snap), console=console, auto_refresh=False, transient=False) as live:
            version = board.data_version()
            while not (stop_when_over and snap.over):
                version = board.wait_commit(version, poll_s)  # the campaign runs in another process
                snap = snapshot(board, messages)
                live.update(render(snap), refresh=True)


class LiveListener:
    """A message listener for ``run --watch``: redraws the dashboard in the campaign's process.

    A simulated campaign runs in virtual time and writes many messages per wall second, so redraws
    are throttled to ``max_hz``; ``close`` draws the final frame. It reads through its own
    connection, opened at the first message (the file does not exist before the campaign does).
    """

    def __init__(
        self, db: Path, console: Console | None = None, max_hz: float = 4.0, now: Callable[[], float] = time.monotonic
    ) -> None:
        self.db, self.min_gap, self.now = db, 1.0 / max_hz, now
        self.console = console or Console(stderr=True)
        self._board: Blackboard | None = None
        self._live: Live | None = None
        self._last = float("-inf")

    def __call__(self, msg: Message) -> None:
        if self.now() - self._last < self.min_gap:
            return
        self._draw()

    def _draw(self) -> None:
        if self._board is None:
            self._board = Blackboard(self.db, readonly=True)
            self._live = Live(console=self.console, auto_refresh=False)
            self._live.start()
        assert self._live is not None  # started with the board
        self._live.update(render(snapshot(self._board)), refresh=True)
        self._last = self.now()

    def close(self) -> None:
        if self._board is None:
            return
        self._draw()
        if self._live is not None:
            self._live.stop()
        self._board.close()
        self._board = None


class _Spinner:
    """``run --quiet`` on a terminal: one spinner line with the campaign clock and result count."""

    def __init__(self, console: Console) -> None:
        self.evaluations = 0
        self.status = console.status("starting the campaign")
        self.status.start()

    def __call__(self, msg: Message) -> None:
        if msg.kind == "evaluation":
            self.evaluations += 1
        self.status.update(f"campaign time {clock(msg.at)}, {self.evaluations} evaluations")

    def close(self) -> None:
        self.status.stop()


def spinner(db: Path, console: Console | None = None) -> _Spinner | None:
    """A spinner listener when stderr is a terminal, else None (no output in pipes and logs)."""
    console = console or Console(stderr=True)
    return _Spinner(console) if console.is_terminal else None
