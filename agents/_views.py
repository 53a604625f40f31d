"""Views: the plain data a brain is shown, read from the blackboard.

Per shape they say how far a kernel is from the speed of light and whether the shape is host-bound
(``blackboard.metrics`` defines both). What the speed of light is (the folder's declared one, or a
lower bound from its input and output bytes) is the task's to say: given the ``Task``, every note
names it; without one they say plainly "speed of light".
"""

from __future__ import annotations

import functools
from pathlib import Path

from kernel_scientist.blackboard import (
    Blackboard,
    EvalReport,
    Evaluation,
    HypothesisState,
    Kernel,
    KernelState,
    ShapeResult,
    SubmissionState,
    metrics,
)
from kernel_scientist.blackboard.compile_stats import compile_stats_table
from kernel_scientist.blackboard.profile import profile_table
from kernel_scientist.evaluator import Task, rules_text
from kernel_scientist.evaluator.model import report_host_floor_us

from .brain import FailureView, KernelView, PendingView, TaskView

FAILURES_SHOWN = 6  # the latest failed or sent-back kernels a selector or designer is shown


def task_view(task: Task | None, own_kernel: bool) -> TaskView:
    """What the designer and the writer are told of the task (``TaskView``); nothing without one."""
    if task is None:
        return TaskView(rules=rules_text(own_kernel=own_kernel))
    return _task_view(task.path, task.description, own_kernel)


@functools.cache
def _task_view(path: str, description: str, own_kernel: bool) -> TaskView:
    reference = Path(path) / "reference.py"
    return TaskView(
        description=description,
        reference_impl=reference.read_text(encoding="utf-8") if reference.is_file() else "",
        rules=rules_text(own_kernel=own_kernel),
    )


def kernel_view(board: Blackboard, kernel: Kernel, task: Task | None = None) -> KernelView:
    ev = board.evaluation_for(kernel.id)
    report = ev.report if ev is not None and ev.report.passed() else None
    basis = task.sol_basis() if task is not None else None
    floor = report_host_floor_us(report.provenance) if report else None
    return KernelView(
        id=kernel.id,
        parent_id=kernel.parent_id,
        author=kernel.author,
        summary=kernel.summary,
        score_us=report.score_us if report else None,
        shape_us=[s.time_us for s in report.shapes] if report else [],
        shape_notes=[shape_note(s, basis, floor) for s in report.shapes] if report else [],
        deviations=kernel.deviations,
        compile_stats=compile_stats_table(ev.report) if ev is not None else "",
        profile=profile_table(ev.report.profile) if ev is not None else "",
    )


def pending_trials(board: Blackboard) -> list[PendingView]:
    """Every chosen plan with no result yet, and where it stands: waiting for an engineer, being
    written, in review, queued (its place in the evaluator's order) or being evaluated."""
    queue = [s.kernel_id for s in board.submissions(SubmissionState.QUEUED)]  # in lease order
    out = []
    for hyp in board.hypotheses(HypothesisState.CHOSEN, HypothesisState.CLAIMED, HypothesisState.IMPLEMENTED):
        if hyp.state == HypothesisState.CHOSEN:
            stage = "waiting for an engineer"
        elif hyp.state == HypothesisState.CLAIMED:
            stage = f"being written by {hyp.lease_owner or 'an engineer'}"
        else:
            assert hyp.kernel_id is not None, f"H{hyp.id} is implemented without a kernel"
            state = board.kernel(hyp.kernel_id).state
            if state in (KernelState.DRAFT, KernelState.REVIEWED):
                stage = f"kernel {hyp.kernel_id} in review"
            elif state == KernelState.QUEUED and hyp.kernel_id in queue:
                stage = f"kernel {hyp.kernel_id} queued, {queue.index(hyp.kernel_id) + 1} of {len(queue)} in line"
            elif state == KernelState.EVALUATING:
                stage = f"kernel {hyp.kernel_id} being evaluated"
            else:  # evaluated, failed or sent back: it has its result
                continue
        out.append(
            PendingView(
                hypothesis_id=hyp.id,
                base_id=hyp.base_id,
                label=hyp.label or hyp.technique,
                stage=stage,
                plan=hyp.plan,
                min_uplift=hyp.min_uplift,
                max_uplift=hyp.max_uplift,
            )
        )
    return out


def failures(board: Blackboard, limit: int = FAILURES_SHOWN) -> list[FailureView]:
    """The latest ``limit`` kernels that failed their evaluation or were sent back in review,
    oldest first, each with what it tried and the error text: the evaluator's reason (and the
    first failing shape's error where it adds to it), or the review's reasons."""
    out = []
    for kernel in board.kernels(KernelState.FAILED, KernelState.REJECTED)[-limit:]:
        hyp = board.hypothesis(kernel.hypothesis_id) if kernel.hypothesis_id else None
        what = f"{hyp.label or hyp.technique} ({hyp.technique}, H{hyp.id})" if hyp else kernel.summary or kernel.author
        ev = board.evaluation_for(kernel.id)
        if ev is not None:
            outcome, error = str(ev.report.outcome), ev.report.reason
            shape = next((r for r in ev.report.shapes if r.error and r.error not in error), None)
            if shape is not None:
                error += f"\n{shape.shape.label()}: {shape.error}"
        else:
            reviews = [r for r in board.reviews(kernel.id) if not r.approved]
            outcome = "sent back in review"
            error = "; ".join(reviews[-1].reasons) if reviews else "no reason recorded"
        out.append(
            FailureView(
                kernel_id=kernel.id,
                parent_id=kernel.parent_id,
                what=what,
                outcome=outcome,
                error=error,  # whole: a prompt trims it at line ends and says so
            )
        )
    return out


def shape_note(shape: ShapeResult, basis: metrics.SolBasis | None = None, host_floor_us: float | None = None) -> str:
    """Where one shape's time goes, in words: host-bound or not, and how far from the speed of
    light ("3.2x the I/O-bytes lower bound (31% of speed of light)")."""
    parts = []
    if metrics.host_bound(shape, host_floor_us):
        if shape.host_us is not None:
            parts.append(f"host-bound ({shape.host_us:.0f} of {shape.time_us:.0f} us in host work)")
        else:
            parts.append(f"host-bound ({host_floor_us:.0f} of {shape.time_us:.0f} us is the host floor)")
    if sol := metrics.sol_text(shape, basis):
        parts.append(sol)
    return ", ".join(parts)


def bounds_summary(report: EvalReport, task: Task | None = None) -> str:
    """One line on which shapes are host-bound and which are farthest from (and nearest to) the
    speed of light; empty where neither is known. With the task: what the speed of light is, and
    why there is none when its input and output bytes could not be had."""
    basis = task.sol_basis() if task is not None else None
    floor = report_host_floor_us(report.provenance)
    shapes = [s for s in report.shapes if s.time_us]
    host = [s.shape.label() for s in shapes if metrics.host_bound(s, floor)]
    device = [s for s in shapes if metrics.host_bound(s, floor) is False and s.sol_us]
    missing = _no_bound(report, task)
    if not host and not device:
        return missing
    text = f"host-bound on {len(host)} of {len(shapes)} shapes" + (
        f" ({', '.join(host[:4])}{', ...' if len(host) > 4 else ''})" if host else ""
    )
    if device:
        by_ratio = sorted(device, key=lambda s: metrics.sol_ratio(s) or 0.0)  # device: those with a ratio
        far, near = by_ratio[-1], by_ratio[0]
        text += f"; farthest from the speed of light: {far.shape.label()} at {metrics.sol_text(far, basis)}"
        if near is not far:
            text += f", nearest {near.shape.label()} at {metrics.sol_ratio(near):.1f}x"
    return "; ".join(filter(None, [text, missing]))


def _no_bound(report: EvalReport, task: Task | None) -> str:
    """Why a task has no speed of light (``Task.no_sol_reason``); empty where one was recorded."""
    if task is None or not report.shapes or any(s.sol_us for s in report.shapes):
        return ""
    return task.no_sol_reason(report.shapes[0].shape)


def observed_uplift(base: Evaluation | None, new: Evaluation | None) -> float | None:
    """What a change did: the uplift of ``new`` over ``base``, both passed and timed, else None."""
    if base is None or new is None:
        return None
    return metrics.uplift(base.report.passed_score(), new.report.passed_score())
