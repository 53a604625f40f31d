"""The blackboard through its public API, on real SQLite files."""

import sqlite3

import anyio
import msgspec
import pytest
from kernel_scientist.blackboard import (
    SCHEMA_VERSION,
    Blackboard,
    BlackboardError,
    EvalReport,
    Hypothesis,
    HypothesisState,
    KernelState,
    Outcome,
    Provenance,
    TransitionError,
    Verdict,
    open_existing,
)

PROV = Provenance(backend="test", simulated=True, device="none", timing_method="none")


def _report(outcome=Outcome.PASSED, score=10.0):
    return EvalReport(outcome=outcome, reason="", provenance=PROV, score_us=score)


def _queued_kernel(board, source="k", ev=0.5):
    k = board.add_kernel(source=source, author="t", at=0, state=KernelState.DRAFT)
    board.review(kernel_id=k.id, reviewer="critic", approved=True, reasons=[], at=1, expected_value=ev)
    return k


def _evaluated_kernel(board, outcome, source):
    """A kernel queued, leased and evaluated with ``outcome`` (10 us where it passed)."""
    kernel = _queued_kernel(board, source=source)
    sub = board.lease_submission("ev", now=2, lease_s=10)
    board.record_evaluation(
        submission_id=sub.id,
        owner="ev",
        started_at=2,
        finished_at=3,
        report=_report(outcome, 10.0 if outcome == Outcome.PASSED else None),
    )
    return kernel


def test_a_lease_takes_the_ready_one_of_highest_expected_value_else_the_head(board_path):
    board = Blackboard(board_path)
    low, high, mid = (_queued_kernel(board, source=s, ev=ev) for s, ev in (("low", 0.1), ("high", 0.9), ("mid", 0.5)))
    sources = {k.id: k.source for k in (low, high, mid)}
    ready = {"low", "mid"}  # the head ("high") is still compiling
    sub = board.lease_submission("ev", now=1, lease_s=10, ready=lambda q: sources[q.kernel_id] in ready)
    assert sub.kernel_id == mid.id and board.kernel(mid.id).state == KernelState.EVALUATING
    sub = board.lease_submission("ev", now=2, lease_s=10, ready=lambda q: False)  # none ready: the head
    assert sub.kernel_id == high.id
    assert board.lease_submission("ev", now=3, lease_s=10).kernel_id == low.id
    board.close()


def test_schema_version_and_wal(board_path):
    Blackboard(board_path).close()
    conn = sqlite3.connect(board_path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_newer_schema_is_refused(board_path):
    Blackboard(board_path).close()
    conn = sqlite3.connect(board_path)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.close()
    with pytest.raises(BlackboardError, match="newer than this kernel-scientist"):
        Blackboard(board_path)


def test_garbage_file_and_empty_board_give_clear_errors(tmp_path):
    junk = tmp_path / "junk.sqlite"
    junk.write_bytes(b"not a database at all" * 100)
    with pytest.raises(BlackboardError, match="junk.sqlite"):
        open_existing(junk)
    with pytest.raises(BlackboardError, match="no such blackboard"):
        open_existing(tmp_path / "missing.sqlite")
    Blackboard(tmp_path / "empty.sqlite").close()
    with pytest.raises(BlackboardError, match="holds no campaign"):
        open_existing(tmp_path / "empty.sqlite")


def test_queue_orders_by_expected_value_and_leases(board_path):
    board = Blackboard(board_path)
    low = _queued_kernel(board, "a", 0.1)
    high = _queued_kernel(board, "b", 0.9)
    sub = board.lease_submission("ev/0", now=5, lease_s=100)
    assert sub.kernel_id == high.id and sub.starts == [5]
    assert board.kernel(high.id).state == KernelState.EVALUATING
    assert board.kernel(low.id).state == KernelState.QUEUED
    ev = board.record_evaluation(submission_id=sub.id, owner="ev/0", started_at=5, finished_at=9, report=_report())
    assert board.kernel(high.id).state == KernelState.EVALUATED
    assert board.evaluation_for(high.id) == ev
    # Recording the same evaluation again is refused: nothing is ever evaluated twice.
    with pytest.raises(TransitionError):
        board.record_evaluation(submission_id=sub.id, owner="ev/0", started_at=5, finished_at=9, report=_report())
    assert len(board.evaluations()) == 1


def test_failed_outcome_marks_kernel_failed(board_path):
    board = Blackboard(board_path)
    k = _queued_kernel(board)
    sub = board.lease_submission("ev/0", now=1, lease_s=10)
    board.record_evaluation(
        submission_id=sub.id, owner="ev/0", started_at=1, finished_at=2, report=_report(Outcome.CRASH, None)
    )
    assert board.kernel(k.id).state == KernelState.FAILED


def test_release_leases_returns_work_and_keeps_rate_memory(board_path):
    board = Blackboard(board_path)
    k = _queued_kernel(board)
    board.lease_submission("ev/0", now=10, lease_s=50)
    assert board.release_leases(now=20) == 0  # lease still valid
    assert board.release_leases(now=61) == 1
    assert board.kernel(k.id).state == KernelState.QUEUED
    again = board.lease_submission("ev/1", now=70, lease_s=50)
    assert again.attempts == 2 and again.starts == [10, 70]
    assert board.evaluation_starts() == [10, 70]


def test_rejection_and_double_review(board_path):
    board = Blackboard(board_path)
    k = board.add_kernel(source="x", author="t", at=0, state=KernelState.DRAFT)
    board.review(kernel_id=k.id, reviewer="critic", approved=False, reasons=["no"], at=1)
    assert board.kernel(k.id).state == KernelState.REJECTED
    with pytest.raises(TransitionError):  # the transaction rolls back: no second review row
        board.review(kernel_id=k.id, reviewer="critic", approved=True, reasons=[], at=2)
    assert len(board.reviews(k.id)) == 1 and board.submissions() == []


def _hyp(sel_id, base_id, state=HypothesisState.CHOSEN):
    return Hypothesis(
        id=0,
        selection_id=sel_id,
        base_id=base_id,
        reference_id=None,
        avenue="a",
        technique="t",
        params={"x": 1},
        plan="p",
        changes=[],
        min_uplift=0,
        max_uplift=0.1,
        innovation=0.5,
        state=state,
        verdict=Verdict.PENDING,
        author="theorist",
        created_at=0,
    )


def test_hypothesis_batch_closes_selection_once(board_path):
    board = Blackboard(board_path)
    k = board.add_kernel(source="x", author="seed", at=0, state=KernelState.DRAFT)
    sel = board.add_selection(base_id=k.id, reference_id=None, reason="best", at=0)
    hyps = board.add_hypotheses(sel.id, [_hyp(sel.id, k.id), _hyp(sel.id, k.id, HypothesisState.PROPOSED)])
    assert [h.id for h in hyps] == [1, 2]
    with pytest.raises(TransitionError):
        board.add_hypotheses(sel.id, [_hyp(sel.id, k.id)])
    assert len(board.hypotheses()) == 2
    claimed = board.claim_hypothesis("engineer-1", now=0, lease_s=10)
    assert claimed.id == 1 and board.claim_hypothesis("engineer-2", now=1, lease_s=10) is None
    stolen = board.claim_hypothesis("engineer-2", now=11, lease_s=10)  # the lease expired
    assert stolen.id == 1 and stolen.lease_owner == "engineer-2"
    made = board.add_kernel(source="y", author="engineer-2", at=12, state=KernelState.DRAFT, hypothesis_id=1)
    assert board.hypothesis(1).state == HypothesisState.IMPLEMENTED and board.hypothesis(1).kernel_id == made.id


async def test_writes_wake_waiters(board_path, autojump_clock):
    board = Blackboard(board_path)
    woke = []

    async def waiter():
        await board.wait_change("kernel")
        woke.append(anyio.current_time())

    async with anyio.create_task_group() as tg:
        tg.start_soon(waiter)
        await anyio.sleep(1)
        board.say(agent="x", kind="info", text="not a kernel", at=0)
        await anyio.sleep(1)
        assert woke == []
        board.add_kernel(source="x", author="t", at=0, state=KernelState.DRAFT)
    assert len(woke) == 1


def test_committed_records_survive_reopen(board_path):
    board = Blackboard(board_path)
    for i in range(5):
        board.say(agent="a", kind="info", text=f"m{i}", at=float(i))
    board.close()
    again = Blackboard(board_path)
    assert [m.text for m in again.messages()] == [f"m{i}" for i in range(5)]
    assert again.clock() == 4.0


def test_version_2_build_failures_become_build_failed_not_refuted(board_path):
    """Schema 3: a kernel that did not compile is not evidence against its idea. A version-2 file
    (as it was written then: "refuted") is migrated on the first writable open, and only the
    verdicts of kernels whose evaluation was a compile error change."""
    board = Blackboard(board_path)
    verdicts = {}
    for outcome, verdict in (
        (Outcome.COMPILE_ERROR, Verdict.REFUTED),
        (Outcome.PASSED, Verdict.REFUTED),
        (Outcome.WRONG_OUTPUT, Verdict.REFUTED),
        (Outcome.PASSED, Verdict.CONFIRMED),
    ):
        kernel = _evaluated_kernel(board, outcome, source=f"{outcome}{verdict}")
        sel = board.add_selection(base_id=kernel.id, reference_id=None, reason="", at=0)
        hyp = board.add_hypotheses(sel.id, [_hyp(sel.id, kernel.id)])[0]
        board.update_hypothesis(hyp.id, kernel_id=kernel.id, verdict=verdict)
        verdicts[hyp.id] = (outcome, verdict)
    board.close()
    conn = sqlite3.connect(board_path)
    conn.execute("PRAGMA user_version = 2")
    conn.commit()
    conn.close()
    with Blackboard(board_path, readonly=True) as old:  # read-only: read as it is, not migrated
        assert [h.verdict for h in old.hypotheses()] == [v for _, v in verdicts.values()]
    conn = sqlite3.connect(board_path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 2
    conn.close()
    with Blackboard(board_path) as board:
        got = {h.id: h.verdict for h in board.hypotheses()}
        assert board._conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 3
    for hyp_id, (outcome, verdict) in verdicts.items():
        expected = Verdict.BUILD_FAILED if outcome == Outcome.COMPILE_ERROR else verdict
        assert got[hyp_id] == expected, (outcome, verdict)


def test_read_only_opening_writes_nothing_and_refuses_writes(board_path):
    board = Blackboard(board_path)
    board.say(agent="runner", kind="info", text="hello", at=0.0)
    board.close()
    before = sorted(p.name for p in board_path.parent.iterdir()), board_path.read_bytes()
    ro = Blackboard(board_path, readonly=True)
    assert [m.text for m in ro.messages()] == ["hello"]
    with pytest.raises(sqlite3.OperationalError, match="readonly"):
        ro.say(agent="runner", kind="info", text="no", at=1.0)
    ro.close()
    assert (sorted(p.name for p in board_path.parent.iterdir()), board_path.read_bytes()) == before


def test_a_read_only_snapshot_follows_a_writer_that_comes_later(board_path):
    board = Blackboard(board_path)
    board.say(agent="runner", kind="info", text="one", at=0.0)
    board.close()
    follower = Blackboard(board_path, readonly=True)
    version = follower.data_version()
    with Blackboard(board_path) as writer:  # comes and goes between two polls
        writer.say(agent="runner", kind="info", text="two", at=1.0)
    assert follower.data_version() != version
    assert [m.text for m in follower.messages()] == ["one", "two"]
    follower.close()


def test_reads_inside_reading_see_one_moment_while_another_connection_commits(board_path):
    with Blackboard(board_path) as writer:  # the campaign's process, still running (its -wal exists)
        writer.say(agent="runner", kind="info", text="one", at=0.0)
        follower = Blackboard(board_path, readonly=True)
        with follower.reading():
            assert [m.text for m in follower.messages()] == ["one"]
            writer.say(agent="runner", kind="closing", text="campaign over", at=1.0)
            with follower.reading():  # nested: joins the outer read
                assert follower.last_message().text == "one"
            assert [m.text for m in follower.messages()] == ["one"]
        assert follower.last_message().text == "campaign over"  # the next read sees the commit
        follower.close()


def test_an_evaluation_is_synced_before_it_is_acknowledged(board_path):
    """Evaluation records commit with synchronous=FULL (the WAL fsynced before COMMIT returns);
    cheaper records keep NORMAL. Read from the statements SQLite actually ran."""
    board = Blackboard(board_path)
    _queued_kernel(board)
    sub = board.lease_submission("ev/0", now=1, lease_s=10)
    ran: list[str] = []
    board._conn.set_trace_callback(ran.append)  # the one connection the store writes through
    board.record_evaluation(submission_id=sub.id, owner="ev/0", started_at=1, finished_at=2, report=_report())
    board.say(agent="evaluator", kind="evaluation", text="kernel 1: 10.0 us", at=2)
    insert = next(i for i, s in enumerate(ran) if s.startswith("INSERT INTO evaluation"))
    full = max(i for i, s in enumerate(ran[:insert]) if s.startswith("PRAGMA synchronous"))
    commit = next(i for i, s in enumerate(ran) if i > insert and s == "COMMIT")
    assert ran[full] == "PRAGMA synchronous=FULL" and "COMMIT" not in ran[full:insert]
    assert ran[commit + 1] == "PRAGMA synchronous=NORMAL"
    assert "PRAGMA synchronous=FULL" not in ran[commit + 1 :]  # the message is an ordinary commit


def test_a_retimed_report_is_the_geometric_mean_and_a_failed_second_run_fails_it():
    from kernel_scientist.blackboard import Shape, ShapeResult

    def timed(a, b, seed):
        shapes = [ShapeResult(shape=Shape(64, 64, 64, i), passed=True, time_us=t) for i, t in enumerate((a, b))]
        prov = msgspec.structs.replace(PROV, seeds=[seed])
        return EvalReport(Outcome.PASSED, "", prov, score_us=(a * b) ** 0.5, shapes=shapes, duration_s=2.0)

    first, second = timed(100.0, 400.0, 1), timed(121.0, 484.0, 2)
    both = first.retimed(second)
    assert both.runs_us == [200.0, 242.0] and both.passed_score() == pytest.approx((200.0 * 242.0) ** 0.5)
    assert [s.time_us for s in both.shapes] == [110.0, 440.0] and both.duration_s == 4.0
    assert both.provenance.seeds == [1, 2]
    third = both.retimed(timed(100.0, 400.0, 3))  # a running mean over three timings
    assert third.passed_score() == pytest.approx((200.0 * 242.0 * 200.0) ** (1 / 3)) and len(third.runs_us) == 3

    wrong = EvalReport(Outcome.WRONG_OUTPUT, "shape 2 differs", PROV, duration_s=1.0)
    failed = first.retimed(wrong)
    assert failed.passed_score() is None and failed.outcome == Outcome.WRONG_OUTPUT
    assert failed.reason == "passed its first run (200.0 us), then on re-timing with new inputs: shape 2 differs"
    untimed = EvalReport(Outcome.PASSED, "could not time", PROV)
    assert first.retimed(untimed) == first and wrong.retimed(first) == wrong


def test_a_leaders_retiming_rewrites_its_evaluation_once_and_followers_see_it(board_path):
    board = Blackboard(board_path)
    kernel = _evaluated_kernel(board, Outcome.PASSED, "leader")
    ev = board.evaluation_for(kernel.id)
    follower = Blackboard(board_path, readonly=True)  # another process's view (watch, logs --follow)
    assert follower.evaluations() == [ev]
    sub = board.record_start(ev.submission_id, at=20)
    assert sub.starts == [2, 20] and board.evaluation_starts() == [2, 20]  # the rate limiter counts it
    twice = ev.report.retimed(_report(score=12.1))
    again = board.record_retiming(ev, twice)
    assert again.id == ev.id and again.report.runs_us == [10.0, 12.1]
    assert board.evaluation_for(kernel.id) == again and board.kernel(kernel.id).state == KernelState.EVALUATED
    follower.data_version()
    assert follower.evaluations() == [again]  # not the decoded body it had cached
    # The record as read before the first re-timing is stale: the same timing is never folded in twice.
    with pytest.raises(TransitionError, match="has changed"):
        board.record_retiming(ev, twice)
    failed = board.record_retiming(again, again.report.retimed(_report(Outcome.WRONG_OUTPUT, None)))
    assert failed.report.passed_score() is None and board.kernel(kernel.id).state == KernelState.FAILED
    _queued_kernel(board, source="next")
    leased = board.lease_submission("ev", now=30, lease_s=10)
    with pytest.raises(TransitionError, match="expected done"):  # only a finished submission is timed again
        board.record_start(leased.id, at=31)
    follower.close()
