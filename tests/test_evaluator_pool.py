"""The sandbox pool: jobs expected ahead run once, in a fresh process each, and are handed out
only to the request they were run for; the simulated backend's reports do not depend on it."""

from __future__ import annotations

from pathlib import Path

import pytest
from kernel_scientist.evaluator import SimulatedBackend
from kernel_scientist.evaluator.backends._pool import SandboxPool
from kernel_scientist.evaluator.sandbox._forkserver import ForkServer
from test_evaluator_sandbox import TASK, request  # a pre-screen request of the task's smallest shape

SECRET_SEED = 11


def counting(log: Path, word: str) -> str:
    """A candidate that notes each run of itself in ``log`` (outside its sandbox directory)."""
    return f"open({str(log)!r}, 'a').write({word!r} + '\\n')\nprint({word!r})\n"


@pytest.fixture(scope="module")
def pool():
    p = SandboxPool([ForkServer(), ForkServer()])
    p.start()
    try:
        yield p
    finally:
        p.close()


def test_an_expected_job_runs_once_and_run_takes_its_outcome(pool, tmp_path):
    log = tmp_path / "runs.txt"
    req = request(counting(log, "ahead"))
    taken = pool.stats.taken
    pool.expect(req, 30.0, 1000)
    assert pool.wait_idle(120)
    job = pool.run(req, 30.0, 1000)
    assert log.read_text() == "ahead\n"  # run once, ahead of the ask
    assert pool.stats.taken == taken + 1
    direct = ForkServer()
    try:
        alone = direct.run(req, 30.0, 1000)  # what a single server gives the same request
    finally:
        direct.close()
    assert job.finished is not None and alone.finished is not None
    assert (job.finished.exit_code, job.finished.result, job.finished.output) == (
        alone.finished.exit_code,
        alone.finished.result,
        alone.finished.output,
    )


def test_an_outcome_is_handed_out_once_and_only_for_its_own_request(pool, tmp_path):
    log = tmp_path / "runs.txt"
    req = request(counting(log, "one"))
    pool.expect(req, 30.0, 1000)
    assert pool.wait_idle(120)
    pool.run(request(counting(log, "two")), 30.0, 1000)  # another source: runs itself
    pool.run(req, 31.0, 1000)  # the same source under another limit: runs itself
    assert log.read_text().split() == ["one", "two", "one"]
    pool.run(req, 30.0, 1000)  # the expected outcome, taken
    pool.run(req, 30.0, 1000)  # taken already: runs again
    assert log.read_text().split() == ["one", "two", "one", "one"]


async def test_an_evaluation_run_ahead_reports_what_one_run_on_demand_reports():
    better = TASK.seed_source.replace("BLOCK_N = 64\n", "BLOCK_N = 128\n")
    assert better != TASK.seed_source
    with SimulatedBackend(TASK, noise=0.02, timeout_s=60.0, own_kernel=True) as ahead:
        await ahead.evaluate(TASK.seed_source, submission_id=1, secret_seed=SECRET_SEED)
        screened = await ahead.prescreen(better)  # expects better's evaluation
        assert ahead._pool.wait_idle(180)
        report = await ahead.evaluate(better, submission_id=2, secret_seed=SECRET_SEED)
        assert ahead._pool.stats.taken == 1
    with SimulatedBackend(TASK, noise=0.02, timeout_s=60.0, own_kernel=True) as alone:
        assert await alone.prescreen(better) == screened  # no secret seed yet: nothing expected
        assert alone._pool.stats.expected == 0
        assert await alone.evaluate(better, submission_id=2, secret_seed=SECRET_SEED) == report
    assert report.passed_score() is not None
