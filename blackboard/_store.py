"""The blackboard: the only place agents meet, and the only module that speaks SQL.

Agents never call each other. They write records here and wait for the tables they care about to
change (``await board.wait_change("kernel")``): a write notifies the waiters of the tables it
touched, so nobody polls. Notification is in-process; another process following a campaign (``logs
--follow``) watches the file instead.

Every state transition names the state it expects to leave (``from_``) and fails if the row is
elsewhere, so a transition applied twice is harmless, and every claim of shared work is a lease
with an expiry on the campaign clock, so a killed run leaves nothing stuck.
"""

from __future__ import annotations

import hashlib
import sqlite3
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

import anyio
import msgspec
from msgspec import UNSET, UnsetType

from . import _db
from .records import (
    Campaign,
    EvalReport,
    Evaluation,
    Finding,
    Hypothesis,
    HypothesisState,
    Kernel,
    KernelState,
    LLMCall,
    Message,
    MessageKind,
    Review,
    RunSegment,
    Selection,
    SelectionState,
    Submission,
    SubmissionState,
    Verdict,
)

T = TypeVar("T", bound=msgspec.Struct)
V = TypeVar("V")
SqlValue = str | int | float | bytes | None  # what a query's parameters and a row's columns hold
_encode = msgspec.json.Encoder().encode

TOPICS = (
    "campaign",
    "kernel",
    "selection",
    "hypothesis",
    "review",
    "submission",
    "evaluation",
    "message",
    "finding",
    "llm_call",
)

# Each record's table, and the columns it is searched by beside its id and its JSON body: inserts and
# updates write those columns from the record, so a row's columns never disagree with its body.
_TABLES: dict[type[msgspec.Struct], tuple[str, tuple[str, ...]]] = {
    Kernel: ("kernel", ("state", "source_hash")),
    Selection: ("selection", ()),
    Hypothesis: ("hypothesis", ("state", "selection_id")),
    Review: ("review", ("kernel_id",)),
    Submission: ("submission", ("kernel_id", "state", "expected_value")),
    Evaluation: ("evaluation", ("kernel_id", "submission_id")),
    Message: ("message", ("agent", "kind")),
    Finding: ("finding", ("technique",)),
    LLMCall: ("llm_call", ("agent", "seq")),
}


def _row(record: msgspec.Struct, names: tuple[str, ...]) -> tuple[SqlValue, ...]:
    """The values of a row that holds ``record``: its body, then the fields ``names``."""
    return (_encode(record), *(getattr(record, name) for name in names))


def _given(new: V | UnsetType, old: V) -> V:
    """``new`` where a caller gave it, else ``old`` (an update's field left out)."""
    return old if isinstance(new, UnsetType) else new


def source_hash(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()[:16]


class TransitionError(Exception):
    """A state change whose precondition no longer holds (someone else got there first)."""


class Blackboard:
    """A campaign's SQLite file. Open one per process; use it from one thread at a time.

    ``readonly``: the file must already be a blackboard; it is neither migrated nor written (a
    write raises ``sqlite3.OperationalError``), and no file is created beside it.
    """

    def __init__(self, path: str | Path, *, readonly: bool = False) -> None:
        self.path = Path(path)
        self.readonly = readonly
        self._generation = 0  # bumped when a read-only snapshot is reopened to follow a writer
        if readonly:
            self._conn, self._snapshot = _db.connect_readonly(self.path)
        else:
            self._conn, self._snapshot = _db.connect(self.path), False
        self._stat = self._file_stat()
        self._waiters: dict[str, list[anyio.Event]] = {}
        # Decoded once per version of a row's body: only a leader's re-timing rewrites one.
        self._evaluations: dict[int, tuple[bytes, Evaluation]] = {}
        self._listeners: list[Callable[[Message], None]] = []

    def _file_stat(self) -> tuple[int, int]:
        st = self.path.stat()
        return st.st_mtime_ns, st.st_size

    def close(self) -> None:
        self._conn.close()

    def copy_to(self, path: str | Path) -> None:
        """Write a consistent copy of the whole blackboard (its WAL included) as one self-contained
        file at ``path``: how a campaign that ran on another host travels back (`sweep --ray`)."""
        dest = sqlite3.connect(path)
        try:
            self._conn.backup(dest)
        finally:
            dest.close()

    def __enter__(self) -> Blackboard:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def reading(self) -> Iterator[Blackboard]:
        """One read transaction: every query inside sees the file as it was at the first one.

        Each query is otherwise its own read, so a view assembled from several (the dashboard, a
        status) can mix two moments of a campaign that another process is writing: its messages
        from before a commit and its "over" from after. Nested uses join the outer transaction."""
        if self._conn.in_transaction:
            yield self
            return
        self._conn.execute("BEGIN")
        try:
            yield self
        finally:
            self._conn.execute("COMMIT")

    # ---- change notification -------------------------------------------------------------
    async def wait_change(self, *topics: str) -> None:
        """Sleep until one of ``topics`` (table names) is written by this process."""
        event = anyio.Event()
        for topic in topics:
            self._waiters.setdefault(topic, []).append(event)
        await event.wait()

    def on_message(self, listener: Callable[[Message], None]) -> None:
        """Call ``listener(message)`` after each message commits (the console and JSONL logs)."""
        self._listeners.append(listener)

    def _notify(self, *topics: str) -> None:
        for topic in topics:
            for event in self._waiters.pop(topic, []):
                event.set()

    # ---- generic row access ----------------------------------------------------------------
    def _next_id(self, table: str) -> int:
        return int(self._conn.execute(f"SELECT coalesce(max(id), 0) + 1 FROM {table}").fetchone()[0])

    def _rows(self, cls: type[T], sql: str, args: Iterable[SqlValue] = ()) -> list[T]:
        return [msgspec.json.decode(body, type=cls) for (body,) in self._conn.execute(sql, tuple(args))]

    def _one(self, cls: type[T], id: int) -> T:
        table = _TABLES[cls][0]
        rows = self._rows(cls, f"SELECT body FROM {table} WHERE id = ?", (id,))
        if not rows:
            raise KeyError(f"no {table} with id {id}")
        return rows[0]

    def _insert_tx(self, draft: T) -> T:
        """Write ``draft`` as its table's next row, with the id assigned here (the draft's is
        ignored), inside the caller's write transaction."""
        table, columns = _TABLES[type(draft)]
        record = msgspec.structs.replace(draft, id=self._next_id(table))
        names = ("id", *columns)
        marks = ", ?" * len(names)
        self._conn.execute(f"INSERT INTO {table} (body, {', '.join(names)}) VALUES (?{marks})", _row(record, names))
        return record

    def _update_tx(self, record: T, **changes: object) -> T:
        """Write ``record`` with ``changes`` over its row (inside the caller's write transaction)."""
        record = msgspec.structs.replace(record, **changes)
        table, columns = _TABLES[type(record)]
        sets = "".join(f", {name} = ?" for name in columns)
        self._conn.execute(f"UPDATE {table} SET body = ?{sets} WHERE id = ?", _row(record, (*columns, "id")))
        return record

    def _add(self, draft: T) -> T:
        """Write one new record in a transaction of its own and wake its table's waiters."""
        with _db.write(self._conn):
            record = self._insert_tx(draft)
        self._notify(_TABLES[type(record)][0])
        return record

    # ---- campaign ------------------------------------------------------------------------
    def campaign(self) -> Campaign:
        """The campaign this file holds; a BlackboardError for a file that holds none (a run
        whose start failed before the campaign was recorded)."""
        rows = self._rows(Campaign, "SELECT body FROM campaign")
        if not rows:
            raise _db.BlackboardError(f"{self.path}: holds no campaign (was it created by `kernel-scientist run`?)")
        return rows[0]

    def create_campaign(self, campaign: Campaign) -> None:
        with _db.write(self._conn) as c:
            if c.execute("SELECT 1 FROM campaign").fetchone():
                raise TransitionError(f"{self.path} already holds a campaign; use `resume`")
            c.execute("INSERT INTO campaign (id, body) VALUES (1, ?)", (_encode(campaign),))
        self._notify("campaign")

    def start_segment(self, segment: RunSegment) -> Campaign:
        """Record the limits of a new run of this campaign (a resume), in force from its start."""
        with _db.write(self._conn) as c:
            campaign = self._rows(Campaign, "SELECT body FROM campaign")[0]
            campaign = msgspec.structs.replace(campaign, segments=[*campaign.segments, segment])
            c.execute("UPDATE campaign SET body = ? WHERE id = 1", (_encode(campaign),))
        self._notify("campaign")
        return campaign

    def clock(self) -> float:
        """The campaign time of the latest record (where a resumed campaign's clock restarts)."""
        row = self._conn.execute("SELECT max(json_extract(body, '$.at')) FROM message").fetchone()[0]
        return float(row or 0.0)

    # ---- kernels -------------------------------------------------------------------------
    def add_kernel(
        self,
        *,
        source: str,
        author: str,
        at: float,
        state: KernelState,
        summary: str = "",
        parent_id: int | None = None,
        reference_id: int | None = None,
        hypothesis_id: int | None = None,
        deviations: str = "",
    ) -> Kernel:
        """Record a kernel; with ``hypothesis_id`` the hypothesis is marked implemented atomically.
        ``deviations``: where the writer departed from the plan, in its words (``Kernel.deviations``)."""
        draft = Kernel(
            id=0,
            # who wrote it and when, what it is, what it came from
            author=author,
            state=state,
            created_at=at,
            source=source,
            source_hash=source_hash(source),
            summary=summary,
            parent_id=parent_id,
            reference_id=reference_id,
            hypothesis_id=hypothesis_id,
            deviations=deviations,
        )
        with _db.write(self._conn):
            kernel = self._insert_tx(draft)
            if hypothesis_id is not None:
                self._update_tx(
                    self._hyp(hypothesis_id),
                    state=HypothesisState.IMPLEMENTED,
                    kernel_id=kernel.id,
                    lease_owner=None,
                    lease_until=None,
                )
        self._notify("kernel", "hypothesis")
        return kernel

    def kernel(self, id: int) -> Kernel:
        return self._one(Kernel, id)

    def kernels(self, *states: KernelState) -> list[Kernel]:
        if not states:
            return self._rows(Kernel, "SELECT body FROM kernel ORDER BY id")
        marks = ",".join("?" * len(states))
        return self._rows(Kernel, f"SELECT body FROM kernel WHERE state IN ({marks}) ORDER BY id", states)

    def kernels_with_hash(self, digest: str) -> list[Kernel]:
        return self._rows(Kernel, "SELECT body FROM kernel WHERE source_hash = ? ORDER BY id", (digest,))

    def _set_kernel_state_tx(self, id: int, from_: tuple[KernelState, ...], to: KernelState) -> Kernel:
        kernel = self._one(Kernel, id)
        if kernel.state not in from_:
            raise TransitionError(f"kernel {id} is {kernel.state}, expected {'/'.join(from_)}")
        return self._update_tx(kernel, state=to)

    # ---- selections and hypotheses -------------------------------------------------------
    def add_selection(self, *, base_id: int, reference_id: int | None, reason: str, at: float) -> Selection:
        return self._add(Selection(id=0, base_id=base_id, reference_id=reference_id, reason=reason, at=at))

    def selections(self) -> list[Selection]:
        return self._rows(Selection, "SELECT body FROM selection ORDER BY id")

    def add_hypotheses(self, selection_id: int, drafts: list[Hypothesis]) -> list[Hypothesis]:
        """Insert a theorist's batch and close its selection in one transaction (so a resumed
        theorist never designs for the same selection twice); no drafts = base exhausted.
        Ids are assigned here (the drafts' are ignored)."""
        with _db.write(self._conn):
            sel = self._one(Selection, selection_id)
            if sel.state != SelectionState.OPEN:
                raise TransitionError(f"selection {selection_id} is already {sel.state}")
            self._update_tx(sel, state=SelectionState.DESIGNED if drafts else SelectionState.EXHAUSTED)
            out = [self._insert_tx(draft) for draft in drafts]
        self._notify("hypothesis", "selection")
        return out

    def _hyp(self, id: int) -> Hypothesis:
        return self._one(Hypothesis, id)

    def hypothesis(self, id: int) -> Hypothesis:
        return self._hyp(id)

    def hypotheses(self, *states: HypothesisState) -> list[Hypothesis]:
        if not states:
            return self._rows(Hypothesis, "SELECT body FROM hypothesis ORDER BY id")
        marks = ",".join("?" * len(states))
        return self._rows(Hypothesis, f"SELECT body FROM hypothesis WHERE state IN ({marks}) ORDER BY id", states)

    def claim_hypothesis(self, owner: str, now: float, lease_s: float) -> Hypothesis | None:
        """Lease the oldest chosen hypothesis (or one whose lease expired) to ``owner``."""
        with _db.write(self._conn):
            for hyp in self.hypotheses(HypothesisState.CHOSEN, HypothesisState.CLAIMED):
                if hyp.state == HypothesisState.CLAIMED and (hyp.lease_until or 0) > now:
                    continue
                claimed = self._update_tx(
                    hyp, state=HypothesisState.CLAIMED, lease_owner=owner, lease_until=now + lease_s
                )
                break
            else:
                return None
        self._notify("hypothesis")
        return claimed

    def update_hypothesis(
        self,
        id: int,
        expect: tuple[HypothesisState, ...] = (),
        *,
        state: HypothesisState | UnsetType = UNSET,
        verdict: Verdict | UnsetType = UNSET,
        observed_uplift: float | None | UnsetType = UNSET,
        kernel_id: int | None | UnsetType = UNSET,
        lease_owner: str | None | UnsetType = UNSET,
        lease_until: float | None | UnsetType = UNSET,
        why_abandoned: str | UnsetType = UNSET,
    ) -> Hypothesis:
        """Change the fields given (a field left out keeps its value; None is a value: a lease
        handed back has no owner); with ``expect``, only from one of those states."""
        with _db.write(self._conn):
            hyp = self._hyp(id)
            if expect and hyp.state not in expect:
                raise TransitionError(f"hypothesis {id} is {hyp.state}, expected {'/'.join(expect)}")
            hyp = self._update_tx(
                hyp,
                state=_given(state, hyp.state),
                verdict=_given(verdict, hyp.verdict),
                observed_uplift=_given(observed_uplift, hyp.observed_uplift),
                kernel_id=_given(kernel_id, hyp.kernel_id),
                lease_owner=_given(lease_owner, hyp.lease_owner),
                lease_until=_given(lease_until, hyp.lease_until),
                why_abandoned=_given(why_abandoned, hyp.why_abandoned),
            )
        self._notify("hypothesis")
        return hyp

    # ---- review and the queue --------------------------------------------------------------
    def review(
        self,
        *,
        kernel_id: int,
        reviewer: str,
        approved: bool,
        reasons: list[str],
        at: float,
        expected_value: float = 0.0,
    ) -> Review:
        """Record the critic's pre-submission review; an approval queues the kernel in the same
        transaction, so a kernel is never approved without being queued (or queued twice)."""
        with _db.write(self._conn):
            rev = self._insert_tx(
                Review(id=0, kernel_id=kernel_id, reviewer=reviewer, approved=approved, reasons=reasons, at=at)
            )
            if approved:
                self._set_kernel_state_tx(kernel_id, (KernelState.DRAFT,), KernelState.QUEUED)
                self._insert_tx(
                    Submission(
                        id=0,
                        kernel_id=kernel_id,
                        expected_value=expected_value,
                        state=SubmissionState.QUEUED,
                        enqueued_at=at,
                    )
                )
            else:
                self._set_kernel_state_tx(kernel_id, (KernelState.DRAFT,), KernelState.REJECTED)
        self._notify("review", "kernel", "submission")
        return rev

    def reviews(self, kernel_id: int | None = None) -> list[Review]:
        if kernel_id is None:
            return self._rows(Review, "SELECT body FROM review ORDER BY id")
        return self._rows(Review, "SELECT body FROM review WHERE kernel_id = ? ORDER BY id", (kernel_id,))

    def submissions(self, *states: SubmissionState) -> list[Submission]:
        """Submissions, highest expected value first (ties: oldest first)."""
        states = states or tuple(SubmissionState)
        marks = ",".join("?" * len(states))
        return self._rows(
            Submission, f"SELECT body FROM submission WHERE state IN ({marks}) ORDER BY expected_value DESC, id", states
        )

    def lease_submission(
        self, owner: str, now: float, lease_s: float, ready: Callable[[Submission], bool] | None = None
    ) -> Submission | None:
        """Claim the queued submission of highest expected value and mark its kernel evaluating.
        With ``ready``, the one of highest expected value among those it accepts (the evaluator's:
        compiled ahead, so the GPU does not wait on a compile), else the first as before."""
        with _db.write(self._conn):
            queued = self.submissions(SubmissionState.QUEUED)
            if not queued:
                return None
            first = next((q for q in queued if ready(q)), queued[0]) if ready is not None else queued[0]
            sub = self._update_tx(
                first,
                state=SubmissionState.LEASED,
                lease_owner=owner,
                lease_until=now + lease_s,
                attempts=first.attempts + 1,
                starts=[*first.starts, now],
            )
            self._set_kernel_state_tx(sub.kernel_id, (KernelState.QUEUED,), KernelState.EVALUATING)
        self._notify("submission", "kernel")
        return sub

    def release_leases(self, now: float | None = None) -> int:
        """Return leased submissions and claimed hypotheses to their queues: all of them (a resumed
        campaign: the process that held them is gone) or those whose lease ended before ``now``."""
        count = 0
        with _db.write(self._conn):
            for sub in self.submissions(SubmissionState.LEASED):
                if now is None or (sub.lease_until or 0) <= now:
                    self._update_tx(sub, state=SubmissionState.QUEUED, lease_owner=None, lease_until=None)
                    self._set_kernel_state_tx(sub.kernel_id, (KernelState.EVALUATING,), KernelState.QUEUED)
                    count += 1
            for hyp in self.hypotheses(HypothesisState.CLAIMED):
                if now is None or (hyp.lease_until or 0) <= now:
                    self._update_tx(hyp, state=HypothesisState.CHOSEN, lease_owner=None, lease_until=None)
                    count += 1
        self._notify("submission", "kernel", "hypothesis")
        return count

    def record_evaluation(
        self, *, submission_id: int, owner: str, started_at: float, finished_at: float, report: EvalReport
    ) -> Evaluation:
        """Store a result, close the submission and move the kernel on, all in one transaction.
        The UNIQUE submission id makes a second record of the same evaluation impossible. The
        transaction is durable (synced before this returns; ``_db`` says what that guarantees):
        callers acknowledge the result only after it."""
        with _db.write(self._conn, durable=True):
            sub = self._one(Submission, submission_id)
            if sub.state != SubmissionState.LEASED or sub.lease_owner != owner:
                raise TransitionError(
                    f"submission {submission_id} is {sub.state} (owner {sub.lease_owner}), not leased to {owner}"
                )
            ev = self._insert_tx(
                Evaluation(
                    id=0,
                    kernel_id=sub.kernel_id,
                    submission_id=sub.id,
                    started_at=started_at,
                    finished_at=finished_at,
                    report=report,
                )
            )
            self._update_tx(sub, state=SubmissionState.DONE)
            to = KernelState.EVALUATED if report.passed() else KernelState.FAILED
            self._set_kernel_state_tx(sub.kernel_id, (KernelState.EVALUATING,), to)
        self._notify("evaluation", "submission", "kernel")
        return ev

    def record_retiming(self, evaluation: Evaluation, report: EvalReport) -> Evaluation:
        """Replace a recorded evaluation's report with ``report``: the same kernel timed once more
        (``EvalReport.retimed``), as a leader recorded with fewer timings than the campaign asks
        for is when a campaign starts or resumes. ``evaluation`` is the record as the caller read
        it; one that has changed since is refused, so no timing is ever folded in twice. A report
        that no longer passes fails the kernel. Durable, like ``record_evaluation``."""
        with _db.write(self._conn, durable=True):
            current = self._decoded_evaluations("SELECT id, body FROM evaluation WHERE id = ?", (evaluation.id,))
            if current != [evaluation]:
                raise TransitionError(f"evaluation {evaluation.id} has changed since it was read")
            ev = self._update_tx(evaluation, report=report)
            if not report.passed():
                self._set_kernel_state_tx(ev.kernel_id, (KernelState.EVALUATED,), KernelState.FAILED)
        self._notify("evaluation", "kernel")
        return ev

    def record_start(self, submission_id: int, at: float) -> Submission:
        """Add a start at ``at`` to a finished submission whose kernel is timed again (a leader's
        re-timing on resume): the service sees that run too, so the rate limiter must count it."""
        with _db.write(self._conn):
            sub = self._one(Submission, submission_id)
            if sub.state != SubmissionState.DONE:
                raise TransitionError(f"submission {submission_id} is {sub.state}, expected done")
            sub = self._update_tx(sub, starts=[*sub.starts, at])
        self._notify("submission")
        return sub

    def _decoded_evaluations(self, sql: str, args: tuple[int, ...] = ()) -> list[Evaluation]:
        out = []
        for id, body in self._conn.execute(sql, args):
            cached = self._evaluations.get(id)
            if cached is None or cached[0] != body:
                cached = self._evaluations[id] = (body, msgspec.json.decode(body, type=Evaluation))
            out.append(cached[1])
        return out

    def evaluations(self) -> list[Evaluation]:
        return self._decoded_evaluations("SELECT id, body FROM evaluation ORDER BY id")

    def evaluation_for(self, kernel_id: int) -> Evaluation | None:
        rows = self._decoded_evaluations("SELECT id, body FROM evaluation WHERE kernel_id = ?", (kernel_id,))
        return rows[0] if rows else None

    def evaluation_starts(self) -> list[float]:
        """Campaign times at which evaluations were started, including ones a killed run never
        finished (the rate limiter's memory across resumes: the service saw them too)."""
        return sorted(t for sub in self.submissions() for t in sub.starts)

    # ---- conversation and findings ---------------------------------------------------------
    def say(
        self,
        *,
        agent: str,
        kind: MessageKind,
        text: str,
        at: float,
        kernel_id: int | None = None,
        hypothesis_id: int | None = None,
    ) -> Message:
        with _db.write(self._conn):
            msg = self._insert_tx(
                Message(
                    id=0, at=at, agent=agent, kind=kind, text=text, kernel_id=kernel_id, hypothesis_id=hypothesis_id
                )
            )
        # Listeners run after the commit: a line on the console or in the JSONL log is a promise
        # that the record is on disk.
        for listener in self._listeners:
            listener(msg)
        self._notify("message")
        return msg

    def messages(self, after_id: int = 0, agent: str | None = None) -> list[Message]:
        if agent is None:
            return self._rows(Message, "SELECT body FROM message WHERE id > ? ORDER BY id", (after_id,))
        return self._rows(Message, "SELECT body FROM message WHERE id > ? AND agent = ? ORDER BY id", (after_id, agent))

    def speakers(self) -> list[str]:
        """Every agent that has said something, by name."""
        return [a for (a,) in self._conn.execute("SELECT DISTINCT agent FROM message ORDER BY agent")]

    def last_message(self) -> Message | None:
        rows = self._rows(Message, "SELECT body FROM message ORDER BY id DESC LIMIT 1")
        return rows[0] if rows else None

    def add_finding(
        self, *, technique: str, scope: str, uplift: float, evidence: list[int], text: str, at: float
    ) -> Finding:
        return self._add(
            Finding(id=0, at=at, technique=technique, scope=scope, uplift=uplift, evidence=evidence, text=text)
        )

    def findings(self) -> list[Finding]:
        return self._rows(Finding, "SELECT body FROM finding ORDER BY id")

    # ---- language-model exchanges (record, replay, accounting) ---------------------------
    def add_llm_call(self, call: LLMCall) -> LLMCall:
        """Append one exchange; the id is assigned here. (agent, seq) is unique, so a turn can
        never be recorded twice."""
        return self._add(call)

    def llm_calls(self, agent: str | None = None) -> list[LLMCall]:
        if agent is None:
            return self._rows(LLMCall, "SELECT body FROM llm_call ORDER BY id")
        return self._rows(LLMCall, "SELECT body FROM llm_call WHERE agent = ? ORDER BY seq", (agent,))

    def llm_spend(self, agent: str | None = None) -> tuple[float, int]:
        """(USD, tokens) spent so far, by the whole campaign or by one agent."""
        calls = self.llm_calls(agent)
        return sum(c.cost_usd for c in calls), sum(c.tokens() for c in calls)

    def data_version(self) -> tuple[int, int]:
        """Changes when another connection commits (used to follow a campaign from outside).

        A read-only snapshot (opened while no writer had the file) cannot see commits: it is
        reopened, and the returned value changes, once a writer has the file (its ``-wal`` exists)
        or has changed it (a writer that came and went between two polls leaves a new mtime)."""
        if self._snapshot and (
            self.path.with_name(self.path.name + "-wal").exists() or self._file_stat() != self._stat
        ):
            self._conn.close()
            self._conn, self._snapshot = _db.connect_readonly(self.path)
            self._stat = self._file_stat()
            self._evaluations.clear()
            self._generation += 1
        return self._generation, self._conn.execute("PRAGMA data_version").fetchone()[0]

    def wait_commit(self, since: tuple[int, int], poll_s: float) -> tuple[int, int]:
        """Block until another process has committed since ``since`` (a ``data_version()``), looking
        every ``poll_s`` seconds, and return the new version. For following a campaign from
        outside (``logs --follow``, ``watch``): the writer is another process, so nothing can
        notify this one, and sleeping between looks keeps the follower off the CPU."""
        while (current := self.data_version()) == since:
            time.sleep(poll_s)
        return current


def open_existing(path: str | Path, *, writable: bool = False) -> Blackboard:
    """Open a blackboard that must already hold a campaign: read-only (status, logs, watch, export,
    report; nothing is written or created), or ``writable`` (resume, after the same check)."""
    p = Path(path)
    _db.inspect(p)  # a foreign, empty or missing file is refused before anything touches it
    try:
        board = Blackboard(p, readonly=not writable)
    except sqlite3.DatabaseError as exc:
        raise _db.BlackboardError(f"{p}: not a kernel-scientist blackboard ({exc})") from exc
    try:
        board.campaign()
    except sqlite3.DatabaseError as exc:
        board.close()
        raise _db.BlackboardError(f"{p}: not a kernel-scientist blackboard ({exc})") from exc
    except _db.BlackboardError:
        board.close()
        raise
    return board
