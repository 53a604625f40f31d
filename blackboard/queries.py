"""Questions many readers ask of a blackboard, answered once.

The runner, the agents, ``status``, ``watch``, ``report`` and ``export`` all need the seed kernel
(every speed-up's baseline) and its evaluation; written out at each place, the answers drifted
(one checked that the seed passed, another did not). Anything that reads a campaign asks here.
"""

from __future__ import annotations

from ._store import Blackboard
from .records import Evaluation, Kernel


def seed_kernel(board: Blackboard) -> Kernel | None:
    """The kernel the campaign started from (the user's submission), or None before it exists."""
    return next((k for k in board.kernels() if k.is_seed()), None)


def seed_evaluation(board: Blackboard) -> Evaluation | None:
    """The seed kernel's evaluation, or None while it has none."""
    seed = seed_kernel(board)
    return board.evaluation_for(seed.id) if seed is not None else None


def seed_score(board: Blackboard) -> float | None:
    """The seed's score in us when it passed and was timed (``EvalReport.passed_score``)."""
    ev = seed_evaluation(board)
    return ev.report.passed_score() if ev is not None else None
