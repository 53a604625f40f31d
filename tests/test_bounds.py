"""A kernel under the simulated device touches only the tensors its launch was given
(evaluator/sandbox/_bounds.py): the device charges a memory-bound launch for those tensors'
bytes, so a narrowed view read past its end through pointer arithmetic would be timed for work
it does not count. Through the simulated backend's real sandbox, with the folder's own check."""

from __future__ import annotations

import anyio
from _support import ROOT
from kernel_scientist.blackboard.records import Outcome
from kernel_scientist.evaluator import load_task
from kernel_scientist.evaluator.backends import SimulatedBackend

VECADD = ROOT / "tests" / "problems" / "vecadd"
SEED = (VECADD / "submission.py").read_text()
LAUNCH = "add_kernel[(triton.cdiv(n, BLOCK),)](a, b, out, n, BLOCK=BLOCK, num_warps=4)"
# Correct on every shape (the storage behind the one-element view holds all of a), but its launch
# is given 2 bytes of a where it reads all of them.
NARROWED = SEED.replace(LAUNCH, LAUNCH.replace("](a, b,", "](a[:1], b,"))
# The same add through transposed views of the same data: strided, and every access inside them.
STRIDED = SEED.replace(
    LAUNCH,
    "if n % 4 == 0:\n"
    "        add_kernel[(triton.cdiv(n, BLOCK),)](a.view(4, -1).t().t(), b.view(4, -1), out.view(-1, 4), n,"
    " BLOCK=BLOCK, num_warps=4)\n"
    "    else:\n"
    f"        {LAUNCH}",
)


def _evaluate(source: str):
    with SimulatedBackend(load_task(VECADD), device="h200", noise=0.0, timeout_s=120) as backend:
        return anyio.run(lambda: backend.evaluate(source, submission_id=1, secret_seed=5), backend="trio")


def test_a_launch_that_reads_past_the_view_it_was_given_fails_and_says_where():
    assert NARROWED != SEED
    report = _evaluate(NARROWED)
    assert report.outcome is not Outcome.PASSED and report.score_us is None
    assert "add_kernel: a load of " in report.reason
    assert "outside every tensor the launch was given (the first 2 bytes past the end of a_ptr)" in report.reason


def test_views_whose_accesses_stay_inside_them_are_timed_as_before():
    assert STRIDED != SEED
    strided, seed = _evaluate(STRIDED), _evaluate(SEED)
    assert strided.outcome is Outcome.PASSED and seed.outcome is Outcome.PASSED
    assert strided.score_us == seed.score_us  # the same bytes, the same launches
