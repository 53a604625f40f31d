"""A leader recorded with one timing (an older blackboard) is timed again when its campaign resumes."""

import math
import subprocess
import sys
import textwrap

import pytest
from _support import ROOT, cli, smoke_run
from kernel_scientist.blackboard import KernelState, Outcome, open_existing

RETIME = ("--set", "evaluator.retime_leaders=1")
AGAIN = "timing it again with new inputs (2 of 2)"


@pytest.fixture(scope="module")
def single_timed(tmp_path_factory):
    """A closed one-hour campaign whose every evaluation, its leader's included, was timed once:
    what a blackboard written before leaders were re-timed holds."""
    db = tmp_path_factory.mktemp("single") / "single.sqlite"
    done = cli(*smoke_run(db, "--quiet", "--set", "evaluator.retime_leaders=0", "--set", "campaign.hours=1"))
    assert done.returncode == 0, done.stderr[-3000:]
    with open_existing(db) as board:
        assert board.evaluations() and not [e for e in board.evaluations() if e.report.runs_us]
    return db


def _copy(db, tmp_path):
    out = tmp_path / "board.sqlite"
    with open_existing(db) as board:
        board.copy_to(out)
    return out


def _ranked(db):
    """The passing, timed evaluations, best first."""
    with open_existing(db) as board:
        scored = [e for e in board.evaluations() if e.report.passed_score() is not None]
    return sorted(scored, key=lambda e: (e.report.passed_score(), e.kernel_id))


def _leader(db):
    """The leading evaluation and its submission."""
    ev = _ranked(db)[0]
    with open_existing(db) as board:
        return ev, next(s for s in board.submissions() if s.id == ev.submission_id)


def _said(db, kernel_id, text):
    with open_existing(db) as board:
        return [m for m in board.messages() if m.kernel_id == kernel_id and text in m.text]


def _resume(db, *extra):
    done = cli("resume", "--db", str(db), "--quiet", *extra)
    assert done.returncode == 0, done.stderr[-3000:]


def test_resume_times_a_single_timed_leader_again_once(single_timed, tmp_path):
    db = _copy(single_timed, tmp_path)
    before, sub = _leader(db)
    first = before.report.passed_score()
    _resume(db, *RETIME, "--set", "campaign.hours=1.5")
    with open_existing(db) as board:
        after = board.evaluation_for(before.kernel_id)
        assert after.id == before.id and after.report.runs_us[0] == first and len(after.report.runs_us) == 2
        assert after.report.passed_score() == pytest.approx(math.sqrt(math.prod(after.report.runs_us)), rel=1e-4)
        assert board.kernel(before.kernel_id).state == KernelState.EVALUATED
        starts = next(s for s in board.submissions() if s.id == sub.id).starts
        assert len(starts) == 2 and starts[0] == sub.starts[0]  # the rate limiter counts the re-timing
        resumed = next(m.id for m in board.messages() if m.text.startswith("resumed at"))
        later = [m for m in board.messages() if m.id > resumed and m.agent == "evaluator"]
    lines = _said(db, before.kernel_id, AGAIN)
    assert [m.text for m in lines] == [
        f"kernel {before.kernel_id} leads ({first:.1f} us, simulated on AMD Instinct MI300X) with one timing "
        "(recorded by an earlier "
        f"run or version); {AGAIN}"
    ]
    # Before any new candidate is timed; then its new score is announced.
    assert later[0].id == lines[0].id and "evaluating kernel" not in later[1].text
    assert later[1].text.startswith(f"kernel {before.kernel_id}: ") and "geometric mean of 2 timings" in later[1].text

    _resume(db, *RETIME, "--set", "campaign.hours=2")  # a second resume: nothing left to re-time
    with open_existing(db) as board:
        assert board.evaluation_for(before.kernel_id) == after
        assert len(next(s for s in board.submissions() if s.id == sub.id).starts) == 2
    assert len(_said(db, before.kernel_id, AGAIN)) == 1


def test_retime_leaders_0_leaves_a_single_timed_leader_alone_on_resume(single_timed, tmp_path):
    db = _copy(single_timed, tmp_path)
    before, sub = _leader(db)
    _resume(db, "--set", "campaign.hours=1.5")  # the campaign's own retime_leaders = 0
    with open_existing(db) as board:
        assert board.evaluation_for(before.kernel_id) == before
        assert next(s for s in board.submissions() if s.id == sub.id).starts == sub.starts
        assert not [m for m in board.messages() if "timing it again" in m.text]


# Resumes the campaign at argv[1] with the leader's re-timings (its submission: argv[2]) replaced:
# "fail" by a wrong output, "hang" by a wall-clock wait that the test ends with kill -9.
_PATCHED = """
import sys, time
from pathlib import Path
import msgspec
from kernel_scientist import campaign
from kernel_scientist.blackboard import Outcome
from kernel_scientist.evaluator.backends._simulated import SimulatedBackend

db, leader, mode = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
evaluate = SimulatedBackend.evaluate

async def patched(self, source, *, submission_id=0, secret_seed=0, baseline=False):
    report = await evaluate(self, source, submission_id=submission_id, secret_seed=secret_seed, baseline=baseline)
    if submission_id != leader:
        return report
    if mode == "hang":
        print("timing", flush=True)
        time.sleep(600)
    return msgspec.structs.replace(
        report, outcome=Outcome.WRONG_OUTPUT, reason="output differs on the new inputs", score_us=None
    )

SimulatedBackend.evaluate = patched
campaign.resume(db, overrides=["evaluator.retime_leaders=1", "campaign.hours=1.5"])
"""


def _patched(db, leader_sub, mode):
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(_PATCHED), str(db), str(leader_sub), mode],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_a_leader_that_fails_its_second_timing_on_resume_fails_and_loses_the_lead(single_timed, tmp_path):
    db = _copy(single_timed, tmp_path)
    before, sub = _leader(db)
    runner_up = _ranked(db)[1]
    proc = _patched(db, sub.id, "fail")
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err[-3000:]
    with open_existing(db) as board:
        report = board.evaluation_for(before.kernel_id).report
        assert report.outcome == Outcome.WRONG_OUTPUT and report.passed_score() is None
        assert report.reason.startswith(f"passed its first run ({before.report.passed_score():.1f} us), then on ")
        assert board.kernel(before.kernel_id).state == KernelState.FAILED
    assert _said(db, before.kernel_id, f"kernel {before.kernel_id} wrong_output: passed its first run")
    # The lead passed to the runner-up, itself recorded with one timing: it was timed again too.
    with open_existing(db) as board:
        assert len(board.evaluation_for(runner_up.kernel_id).report.runs_us) == 2
    assert len(_said(db, runner_up.kernel_id, AGAIN)) == 1
    now, _ = _leader(db)
    assert now.kernel_id != before.kernel_id and len(now.report.runs_us) == 2  # nobody leads on one timing


def test_kill_9_during_a_resumed_leaders_timing_neither_loses_nor_doubles_it(single_timed, tmp_path):
    db = _copy(single_timed, tmp_path)
    before, sub = _leader(db)
    proc = _patched(db, sub.id, "hang")
    try:
        assert proc.stdout.readline() == "timing\n", proc.stderr.read()[-3000:]
    finally:
        proc.kill()
        proc.communicate()
    with open_existing(db) as board:
        assert board.evaluation_for(before.kernel_id) == before  # nothing recorded of the lost timing
        assert len(next(s for s in board.submissions() if s.id == sub.id).starts) == 2  # the service saw it
    _resume(db, *RETIME, "--set", "campaign.hours=1.5")
    with open_existing(db) as board:
        runs = board.evaluation_for(before.kernel_id).report.runs_us
        assert len(runs) == 2 and runs[0] == before.report.passed_score()
        assert len(next(s for s in board.submissions() if s.id == sub.id).starts) == 3
        kernels = [e.kernel_id for e in board.evaluations()]
        assert len(kernels) == len(set(kernels))
    assert len(_said(db, before.kernel_id, AGAIN)) == 2  # said by the killed run and by the resume
