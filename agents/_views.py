"""Views: the plain data a brain is shown, read from the blackboard."""

from __future__ import annotations

from blackboard import Blackboard, Kernel

from .brain import KernelView


def kernel_view(board: Blackboard, kernel: Kernel) -> KernelView:
    ev = board.evaluation_for(kernel.id)
    passed = ev is not None and ev.report.outcome == "passed"
    return KernelView(
        id=kernel.id, parent_id=kernel.parent_id, author=kernel.author, summary=kernel.summary,
        score_us=ev.report.score_us if passed else None,
        shape_us=[s.time_us for s in ev.report.shapes] if passed else [])


def uplift(base_us: float | None, new_us: float | None) -> float | None:
    """Fractional speed-up of new over base (0.10 = 10% faster); None if either is missing."""
    if not base_us or not new_us:
        return None
    return base_us / new_us - 1.0
