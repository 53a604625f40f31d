"""Views: the plain data a brain is shown, read from the blackboard."""

from __future__ import annotations

from kernel_scientist.blackboard import Blackboard, EvalReport, Evaluation, Kernel, ShapeResult, metrics

from .brain import KernelView


def kernel_view(board: Blackboard, kernel: Kernel) -> KernelView:
    ev = board.evaluation_for(kernel.id)
    report = ev.report if ev is not None and ev.report.passed() else None
    return KernelView(
        id=kernel.id,
        parent_id=kernel.parent_id,
        author=kernel.author,
        summary=kernel.summary,
        score_us=report.score_us if report else None,
        shape_us=[s.time_us for s in report.shapes] if report else [],
        shape_notes=[shape_note(s) for s in report.shapes] if report else [],
    )


def shape_note(shape: ShapeResult) -> str:
    """Where one shape's time goes, in words: host-bound or how far from the speed of light."""
    parts = []
    if shape.bound() == "host":
        parts.append(f"host-bound ({shape.host_us:.0f} of {shape.time_us:.0f} us in host work)")
    fraction = shape.sol_fraction()
    if fraction is not None:
        parts.append(f"{fraction:.0%} of speed of light")
    return ", ".join(parts)


def bounds_summary(report: EvalReport) -> str:
    """One line on which shapes are host-bound and which are farthest from the speed of light;
    empty where the backend measured no host time (simulated)."""
    shapes = [s for s in report.shapes if s.time_us]
    host = [s.shape.label() for s in shapes if s.bound() == "host"]
    device = [s for s in shapes if s.bound() == "device" and s.sol_fraction() is not None]
    if not host and not device:
        return ""
    text = f"host-bound on {len(host)} of {len(shapes)} shapes" + (
        f" ({', '.join(host[:4])}{', ...' if len(host) > 4 else ''})" if host else ""
    )
    if device:
        far = min(device, key=lambda s: s.sol_fraction() or 0.0)  # device: those with a fraction
        text += f"; farthest from the speed of light: {far.shape.label()} at {far.sol_fraction():.0%}"
    return text


def observed_uplift(base: Evaluation | None, new: Evaluation | None) -> float | None:
    """What a change did: the uplift of ``new`` over ``base``, both passed and timed, else None."""
    if base is None or new is None:
        return None
    return metrics.uplift(base.report.passed_score(), new.report.passed_score())
