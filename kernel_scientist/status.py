"""The leaderboard: the best kernels of a campaign, with what produced every number.

Per ranked shape the best kernel's time is set against its speed of light and marked host-bound
where it is (``blackboard.metrics``). What that speed of light is (declared, or a lower bound from
input and output bytes) is the task folder's to say, so the folder is read again from where the
campaign's scenario named it; where it is gone, the bound is named plainly.
"""

from __future__ import annotations

import msgspec

from kernel_scientist.blackboard import (
    Blackboard,
    EvalReport,
    Evaluation,
    KernelState,
    metrics,
    scenario_from_json,
    seed_evaluation,
    seed_score,
)
from kernel_scientist.blackboard.records import HOST_BOUND
from kernel_scientist.evaluator import Task, TaskError, geomean, load_task
from kernel_scientist.evaluator.model import report_host_floor_us


class Entry(msgspec.Struct, frozen=True):
    kernel_id: int
    score_us: float
    speedup_vs_seed: float | None
    speedup_vs_reference: float | None
    author: str
    summary: str
    parent_id: int | None


class Status(msgspec.Struct, frozen=True):
    task: str
    backend: str
    simulated: bool
    device: str
    seed: int
    submissions: int
    evaluations: int
    failed: int
    rejected: int
    best: Entry | None
    seed_score_us: float | None
    reference_score_us: float | None
    virtual_hours: float
    leaderboard: list[Entry]
    # Evaluations one GPU finishes per hour of its own time: 3600 / the mean evaluation's duration
    # (start to verdict, campaign clock: modeled on simulated backends, wall time on real ones).
    evaluations_per_gpu_hour: float | None = None
    # Median wall seconds per phase of an evaluation on a real GPU (blackboard.metrics); {} otherwise.
    evaluation_phases: dict[str, float] = {}
    # "simulated on AMD Instinct MI300X" / "measured on NVIDIA H200": from the evaluations' provenance.
    label: str = ""
    kind: str = ""  # "simulated" | "measured" | "" (no evaluation yet)
    # blackboard.metrics over the whole campaign so far, with the limits in force at each moment.
    utilisation: float = 0.0
    rate_used: float = 0.0
    predictions: metrics.Calibration | None = None  # predicted vs observed uplift (blackboard.metrics)
    retimes: metrics.Retimes | None = None  # would-be leaders timed again (blackboard.metrics)


def finished_at(board: Blackboard) -> float | None:
    """The campaign time at which the campaign closed (its latest message is the runner's
    "closing" one), or None while it runs (or was stopped before its end: a resumable campaign)."""
    last = board.last_message()
    if last is None:
        return None
    # Files written before the "closing" kind marked the end with an "info" line of this text.
    legacy = last.kind == "info" and last.agent == "runner" and last.text.startswith("campaign over")
    return last.at if last.kind == "closing" or legacy else None


def status(board: Blackboard, top: int = 10) -> Status:
    """The campaign's standing, read as one moment (the campaign may be writing the file)."""
    with board.reading():
        return _status(board, top)


def _status(board: Blackboard, top: int) -> Status:
    campaign = board.campaign()
    evals = board.evaluations()
    kernels = {k.id: k for k in board.kernels()}
    seed_us = seed_score(board)
    ref_us = campaign.reference.score_us if campaign.reference else None
    entries = []
    scored = metrics.ranked(evals)  # the leader first
    for score, ev in scored:
        k = kernels[ev.kernel_id]
        entries.append(
            Entry(
                kernel_id=k.id,
                score_us=round(score, 3),
                speedup_vs_seed=_rounded(metrics.speedup(seed_us, score)),
                speedup_vs_reference=_rounded(metrics.speedup(ref_us, score)),
                author=k.author,
                summary=k.summary,
                parent_id=k.parent_id,
            )
        )
    prov = next(
        (e.report.provenance for e in evals if e.report.passed_score() is not None),
        evals[0].report.provenance if evals else None,
    )
    use = metrics.usage(campaign, evals, board.submissions(), board.evaluation_starts(), board.clock())
    return Status(
        task=campaign.task,
        backend=campaign.backend,
        simulated=prov.simulated if prov else campaign.simulated,
        device=prov.hardware if prov else "",
        label=prov.label() if prov else "",
        kind=prov.kind if prov else "",
        utilisation=round(use.utilisation, 4),
        rate_used=round(use.rate_used, 4),
        predictions=metrics.calibration(board.hypotheses()),
        retimes=metrics.retimes(evals),
        seed=campaign.seed,
        submissions=len(board.submissions()),
        evaluations=len(evals),
        failed=len(evals) - len(scored),
        rejected=len(board.kernels(KernelState.REJECTED)),
        best=entries[0] if entries else None,
        seed_score_us=seed_us,
        reference_score_us=ref_us,
        virtual_hours=round(board.clock() / 3600, 3) if campaign.virtual_time else 0.0,
        leaderboard=entries[:top],
        evaluations_per_gpu_hour=_per_gpu_hour(evals),
        evaluation_phases=metrics.evaluation_phases(evals),
    )


def _rounded(speedup: float | None) -> float | None:
    return None if speedup is None else round(speedup, 3)


def _per_gpu_hour(evals: list[Evaluation]) -> float | None:
    busy = sum(max(0.0, e.finished_at - e.started_at) for e in evals)
    return round(3600 * len(evals) / busy, 1) if evals and busy > 0 else None


def _phase_line(phases: dict[str, float]) -> list[str]:
    """Where an evaluation's wall time goes on the GPU (medians), or nothing when not measured."""
    names = {"tests_s": "tests (compiles, first-call tuning)", "timing_s": "timing", "setup_s": "set-up"}
    parts = [f"{label} {phases[key]:.1f} s" for key, label in names.items() if key in phases]
    if not parts:
        return []
    started = phases.get("preload_s")
    start = f"; start-up {started:.1f} s" if started is not None else ""
    early = " (before the request: a spare process)" if metrics.started_early(phases) else ""
    return ["median evaluation: " + ", ".join(parts) + start + early]


def _x(v: float | None) -> str:
    return "   n/a" if v is None else f"{v:5.2f}x"


def fit(text: str, width: int | None) -> str:
    """``text`` cut to ``width`` characters, the cut marked with an ellipsis (None: no limit)."""
    if width is None or len(text) <= width:
        return text
    return text[: max(0, width - 1)] + "…"


def render(board: Blackboard, top: int = 10, width: int | None = None) -> str:
    """The leaderboard as text; ``width`` is the terminal's (the change column takes what is left,
    and is cut with an ellipsis), None for output that is not a terminal (nothing is cut)."""
    st = status(board, top)
    label = st.label or "no evaluations yet"
    lines = [
        f"{st.task} — {label}; backend {st.backend}, seed {st.seed}, "
        f"{board.clock() / 3600:.2f} campaign hours ({'virtual' if board.campaign().virtual_time else 'wall'} clock)",
        f"{st.submissions} submissions, {st.evaluations} evaluations ({st.failed} failed"
        + (f"; {st.evaluations_per_gpu_hour:.0f} per GPU-hour" if st.evaluations_per_gpu_hour else "")
        + f"), {st.rejected} kernels sent back by the critic",
        f"evaluator utilisation {st.utilisation:.0%}, rate limit used {st.rate_used:.0%} "
        "(against the limits in force at each moment)",
        *_phase_line(st.evaluation_phases),
        *filter(None, [metrics.retime_text(st.retimes)]),
        metrics.calibration_text(st.predictions),
        f"seed kernel {_fmt(st.seed_score_us)}, PyTorch reference {_fmt(st.reference_score_us)} "
        f"(geometric mean over the ranked shapes, {label})",
        "",
        f"{'rank':>4} {'kernel':>6} {'score':>10} {'vs seed':>8} {'vs ref':>8}  author       change",
    ]
    for i, e in enumerate(st.leaderboard, 1):
        row = (
            f"{i:>4} {e.kernel_id:>6} {e.score_us:>7.1f} us {_x(e.speedup_vs_seed):>8} "
            f"{_x(e.speedup_vs_reference):>8}  {e.author:<12} "
        )
        lines.append(row + fit(e.summary, None if width is None else max(12, width - len(row))))
    if st.best is not None:
        task = campaign_task(board)
        best_ev = board.evaluation_for(st.best.kernel_id)
        bound = ""
        if best_ev is not None and any(s.sol_us for s in best_ev.report.shapes):
            bound = f", x {metrics.bound_name(task.sol_basis() if task else None)}"
        lines += [
            "",
            f"best kernel {st.best.kernel_id}, per ranked shape (us, {label}): best / seed / reference{bound}",
        ]
        lines += _per_shape(board, st.best.kernel_id, task)
    return "\n".join(lines)


def _fmt(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.1f} us"


def campaign_task(board: Blackboard) -> Task | None:
    """The campaign's problem folder, read again where its scenario named it; None when it is not
    there any more (moved, or the file came from another machine)."""
    try:
        return load_task(scenario_from_json(board.campaign().config_json).task_path())
    except (TaskError, msgspec.DecodeError, OSError):
        return None


def bound_lines(report: EvalReport, task: Task | None) -> list[str]:
    """What the per-shape bound columns mean, for the best kernel's ``report``: the speed of
    light's name and basis, the host-bound rule in force, or why there is no speed of light."""
    basis = task.sol_basis() if task is not None else None
    out = []
    if any(s.sol_us for s in report.shapes):
        name = metrics.bound_name(basis)
        out.append(f"x {name}: the best kernel's time over its {name} ({metrics.bound_description(basis)})")
    elif task is not None and basis == "io-bytes" and report.shapes:
        out.append(task.no_sol_reason(report.shapes[0].shape) or "no speed of light recorded")
    floor = report_host_floor_us(report.provenance)
    if any(metrics.host_bound(s, floor) for s in report.shapes):
        work = f"the device's {floor:.1f} us host floor" if floor is not None else "the host work measured"
        out.append(f"host-bound: {work} is at least {HOST_BOUND:.0%} of the call's time")
    return out


def _per_shape(board: Blackboard, kernel_id: int, task: Task | None) -> list[str]:
    best_ev = board.evaluation_for(kernel_id)
    best = best_ev.report.shapes if best_ev is not None else []
    seed = seed_evaluation(board)
    ref = board.campaign().reference
    floor = report_host_floor_us(best_ev.report.provenance) if best_ev is not None else None
    out = []
    for i, s in enumerate(best):
        seed_t = seed.report.shapes[i].time_us if seed and seed.report.shapes else None
        ref_t = ref.shapes[i].time_us if ref and ref.shapes else None
        row = f"  {s.shape.label():>16}: {_fmt(s.time_us):>10} / {_fmt(seed_t):>10} / {_fmt(ref_t):>10}"
        ratio = metrics.sol_ratio(s)
        row += f" {ratio:8.1f}x" if ratio is not None else ""
        out.append(row + ("  host-bound" if metrics.host_bound(s, floor) else ""))
    if best:
        geo = geomean([s.time_us for s in best if s.time_us])
        out.append(f"  {'geomean':>16}: {geo:7.1f} us")
    if best_ev is not None:
        out += [f"  {line}" for line in bound_lines(best_ev.report, task)]
    return out
