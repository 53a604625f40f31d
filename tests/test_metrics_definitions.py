"""The campaign's measures that every surface shares (blackboard.metrics): speed-up and uplift, the
leader, and how an uplift and a predicted range are written."""

import pytest
from kernel_scientist.blackboard import (
    Blackboard,
    Campaign,
    EvalReport,
    Evaluation,
    KernelState,
    Outcome,
    Provenance,
    RunSegment,
    Scenario,
    metrics,
    scenario_json,
)

from kernel_scientist.status import status

PROV = Provenance(backend="test", simulated=True, device="none", timing_method="none")


def _evaluation(id, kernel_id, score, outcome=Outcome.PASSED):
    report = EvalReport(outcome=outcome, reason="", provenance=PROV, score_us=score)
    return Evaluation(id=id, kernel_id=kernel_id, submission_id=id, started_at=0.0, finished_at=1.0, report=report)


def test_speedup_is_the_baseline_over_the_score_and_uplift_one_less():
    assert metrics.speedup(300.0, 150.0) == 2.0
    assert metrics.speedup(100.0, 200.0) == 0.5
    assert metrics.uplift(300.0, 150.0) == 1.0
    assert metrics.uplift(110.0, 100.0) == pytest.approx(0.1)
    assert metrics.uplift(100.0, 125.0) == pytest.approx(-0.2)


@pytest.mark.parametrize("base, new", [(None, 10.0), (10.0, None), (0.0, 10.0), (10.0, 0.0), (None, None)])
def test_speedup_and_uplift_are_none_without_both_scores(base, new):
    assert metrics.speedup(base, new) is None
    assert metrics.uplift(base, new) is None


def test_the_leader_is_the_lowest_passing_timed_score():
    evals = [
        _evaluation(1, kernel_id=1, score=50.0),
        _evaluation(2, kernel_id=2, score=None, outcome=Outcome.WRONG_OUTPUT),
        _evaluation(3, kernel_id=3, score=20.0),
        _evaluation(4, kernel_id=4, score=None),  # passed, untimed: no score
        _evaluation(5, kernel_id=5, score=30.0),
    ]
    assert metrics.leader(evals).kernel_id == 3
    assert [(score, ev.kernel_id) for score, ev in metrics.ranked(evals)] == [(20.0, 3), (30.0, 5), (50.0, 1)]


def test_an_exact_tie_goes_to_the_older_kernel_whatever_the_evaluation_order():
    # kernel 7 was evaluated first, kernel 4 later, with the very same score
    evals = [_evaluation(1, kernel_id=7, score=12.5), _evaluation(2, kernel_id=4, score=12.5)]
    assert metrics.leader(evals).kernel_id == 4
    assert metrics.leader(evals[::-1]).kernel_id == 4
    assert [ev.kernel_id for _, ev in metrics.ranked(evals)] == [4, 7]


def test_no_leader_before_a_passing_timed_evaluation():
    assert metrics.leader([]) is None
    assert metrics.leader([_evaluation(1, kernel_id=1, score=None, outcome=Outcome.CRASH)]) is None
    assert metrics.ranked([]) == []


def test_status_lists_the_leader_the_evaluator_agent_times_against(tmp_path):
    """status ranks by the leader's rule: in an exact tie the older kernel leads, although the
    newer one was evaluated first (it was queued with a higher expected value)."""
    board = Blackboard(tmp_path / "b.sqlite")
    board.create_campaign(
        Campaign(
            name="tie",
            seed=1,
            task="t",
            backend="test",
            simulated=True,
            config_json=scenario_json(Scenario()),
            created_wall=0.0,
            virtual_time=True,
            segments=[RunSegment(started_at=0.0, rate_per_hour=6.0, in_flight=1, hours=1.0)],
        )
    )
    seed = board.add_kernel(source="seed", author="seed", at=0, state=KernelState.DRAFT)
    older = board.add_kernel(source="older", author="t", at=0, state=KernelState.DRAFT)
    newer = board.add_kernel(source="newer", author="t", at=0, state=KernelState.DRAFT)
    for kernel, value in ((seed, 3.0), (older, 0.1), (newer, 0.9)):
        board.review(kernel_id=kernel.id, reviewer="critic", approved=True, reasons=[], at=1, expected_value=value)
    for _ in range(3):  # leased in order of expected value: the seed, the newer kernel, the older
        sub = board.lease_submission("ev", now=2, lease_s=10)
        score = 40.0 if sub.kernel_id == seed.id else 10.0
        report = EvalReport(outcome=Outcome.PASSED, reason="", provenance=PROV, score_us=score)
        board.record_evaluation(submission_id=sub.id, owner="ev", started_at=2, finished_at=3, report=report)
    assert [ev.kernel_id for ev in board.evaluations()] == [seed.id, newer.id, older.id]
    st = status(board)
    board_leader = metrics.leader(board.evaluations())
    board.close()
    assert st.best.kernel_id == older.id == board_leader.kernel_id
    assert [e.kernel_id for e in st.leaderboard] == [older.id, newer.id, seed.id]
    assert st.best.speedup_vs_seed == 4.0 and st.best.speedup_vs_reference is None


def test_uplift_text():
    assert metrics.uplift_text(0.1234) == "+12.3%"
    assert metrics.uplift_text(-0.05) == "-5.0%"
    assert metrics.uplift_text(0.0) == "+0.0%"
    assert metrics.uplift_text(None) == "n/a"


def test_predicted_range_text():
    assert metrics.predicted_range_text(0.05, 0.6) == "+5.0%..+60.0%"
    assert metrics.predicted_range_text(-0.1, 0.025) == "-10.0%..+2.5%"
    assert metrics.predicted_range_text(0.05, 0.6, digits=0) == "+5%..+60%"
