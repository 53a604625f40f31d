"""The campaign's measures, defined once: speed-up and uplift, the leader, the limits in force,
evaluator utilisation, rate-limit use, the headroom before the next start, the best score over
time, and how an uplift or a predicted range is written.

``status``, ``watch``, ``report``, ``sweep`` and the evaluator agent all compute these here, so the
same campaign gives the same figure everywhere. Definitions:

- **Speed-up** of a score over a baseline (the seed's, the PyTorch reference's) = baseline / score
  (2.0 = twice as fast); **uplift** = speed-up - 1 (0.10 = 10% faster).
- **The leader** = the passing, timed evaluation with the lowest score; an exact tie goes to the
  older kernel (the lower id). The evaluator agent re-times against it, so this rule decides what
  the campaign does; ``status`` ranks by the same rule.
- The limits in force at a campaign time are those of the run segment (the first run, or a
  resume with ``--set evaluator.in_flight=2`` and the like) that covers it (``limits_at``). Files
  written before segments were recorded have one, from the scenario they were started with.
- Capacity over a window is the integral of ``in_flight`` over it, segment by segment; busy time
  is the evaluator time spent on evaluations in it (finished ones, and the running part of leased
  ones). **Utilisation** = busy / capacity.
- **Rate used** = evaluation starts in the window / the starts the rate limit allowed in it (the
  integral of ``rate_per_hour``, rounded up, at least 1).
- **Headroom** = campaign seconds until the rate limit in force allows the next start.
- **Best over time** = (finish time, best score so far) at every passing, timed evaluation.
- **Prediction calibration** = over hypotheses with an observed uplift: Spearman's rank correlation
  of the middle of the predicted [min, max] with the observed uplift, the share of observed uplifts
  inside their range, and the median width of the ranges.
- **Evaluation phases** = per phase of the harness's runs on a real GPU (start-up, set-up, tests,
  timing), the median wall seconds over the evaluations that recorded it.
- **Re-timings** = over the would-be leaders timed more than once: how many, and the median of
  the later timings' geometric mean over the first, minus one (how much a first timing flattered).
- The window of a finished campaign ends at its close; of a running one, at ``now``.
- **Distance from the speed of light** of a shape = its time / its speed of light (3.2 = "3.2x").
  The speed of light is the folder's declared roofline, or without one a lower bound: the bytes its
  inputs and outputs hold over HBM bandwidth. Every surface names which (``bound_name``).
- **Host-bound**: the host's work is at least ``records.HOST_BOUND`` (60%) of a call's time. The work is
  measured inside the call on a real GPU; on a simulated one it is the device's host floor (the
  protocol's cost of a call with one launch: the least host work any call has). Such a shape's GPU
  waits on the host, so a faster kernel gains little there and a leaner host path (fewer launches,
  a direct launch) is what helps.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

import msgspec

from .config import scenario_from_json
from .records import (
    Campaign,
    Evaluation,
    Hypothesis,
    RunSegment,
    ShapeResult,
    Submission,
    SubmissionState,
)


def speedup(base_us: float | None, new_us: float | None) -> float | None:
    """How many times faster ``new_us`` is than ``base_us``; None when either is missing."""
    if not base_us or not new_us:
        return None
    return base_us / new_us


def uplift(base_us: float | None, new_us: float | None) -> float | None:
    """The fractional speed-up of ``new_us`` over ``base_us`` (0.10 = 10% faster); None when either
    is missing."""
    times = speedup(base_us, new_us)
    return None if times is None else times - 1.0


def _rank(scored: tuple[float, Evaluation]) -> tuple[float, int]:
    score, ev = scored
    return score, ev.kernel_id  # an exact tie: the older kernel first


def ranked(evals: list[Evaluation]) -> list[tuple[float, Evaluation]]:
    """(score, evaluation) of every passing, timed evaluation, the leader first (module note)."""
    scored = [(score, ev) for ev in evals if (score := ev.report.passed_score()) is not None]
    return sorted(scored, key=_rank)


def leader(evals: list[Evaluation]) -> Evaluation | None:
    """The evaluation with the best score (module note), or None before any passed and was timed."""
    best = ranked(evals)
    return best[0][1] if best else None


def uplift_text(value: float | None) -> str:
    """An uplift as every surface writes it: "+12.3%", or "n/a" where there is none."""
    return "n/a" if value is None else f"{value:+.1%}"


def predicted_range_text(min_uplift: float, max_uplift: float, digits: int = 1) -> str:
    """A predicted [min, max] uplift as every surface writes it: "+5.0%..+60.0%" (``digits``
    after the point)."""
    return f"{min_uplift:+.{digits}%}..{max_uplift:+.{digits}%}"


# Where a speed of light comes from: the folder's declared flops/bytes, or the bytes its tensors hold
# (``Task.sol_basis``).
SolBasis = Literal["declared", "io-bytes"]


def bound_name(basis: SolBasis | None) -> str:
    """What a shape's speed of light is called on every surface: the folder's declared one, or the
    lower bound from input and output bytes (``Task.sol_basis``); None, where the task is not at
    hand: plainly "speed of light"."""
    if basis is None:
        return "speed of light"
    return "declared speed of light" if basis == "declared" else "I/O-bytes lower bound"


def bound_description(basis: SolBasis | None) -> str:
    """What the speed of light is, in a clause a report prints once beside its name."""
    if basis == "declared":
        return "the folder's declared flops and bytes at the device's peak rates"
    if basis == "io-bytes":
        return "a lower bound: the bytes the inputs and outputs hold, over peak HBM bandwidth"
    return "as the backend recorded it"


def sol_ratio(shape: ShapeResult) -> float | None:
    """How far a shape is from its speed of light: time / speed of light (1.0 = at it), the
    inverse of the record's ``sol_fraction``; None where either is missing."""
    fraction = shape.sol_fraction()
    return 1 / fraction if fraction else None


def sol_text(shape: ShapeResult, basis: SolBasis | None) -> str:
    """ "3.2x the I/O-bytes lower bound (31% of speed of light)"; empty without a speed of light."""
    ratio = sol_ratio(shape)
    if ratio is None:
        return ""
    return f"{ratio:.1f}x the {bound_name(basis)} ({1 / ratio:.0%} of speed of light)"


def host_bound(shape: ShapeResult, host_floor_us: float | None = None) -> bool | None:
    """Whether a shape is host-bound (module note): the record's own rule (``ShapeResult.bound``)
    on its measured host work, else on ``host_floor_us`` (simulated: the least host work any call
    has). None where neither is known or the shape has no time."""
    if shape.host_us is None and host_floor_us is not None:
        shape = msgspec.structs.replace(shape, host_us=host_floor_us)
    bound = shape.bound()
    return None if bound is None else bound == "host"


def shape_words(labels: Sequence[str]) -> str:
    """What ranked shapes' labels (``Shape.label``) are made of, for a heading or a prompt: a
    matrix product's "m x n x k" ("1024x576x7168"), else the folder's own generate_input
    arguments ("size=512")."""
    return "m x n x k" if labels and all(s and "=" not in s for s in labels) else "generate_input's arguments"


class Usage(msgspec.Struct, frozen=True):
    """Utilisation and rate use of a campaign window [0, end)."""

    end: float
    busy_s: float
    capacity_s: float
    utilisation: float
    starts: int
    allowed: int
    rate_used: float


def segments(campaign: Campaign) -> list[RunSegment]:
    """The campaign's run segments in order; a file without any gets one from its scenario."""
    if campaign.segments:
        return list(campaign.segments)
    cfg = scenario_from_json(campaign.config_json)
    return [
        RunSegment(
            started_at=0.0,
            rate_per_hour=cfg.evaluator.rate_per_hour,
            in_flight=cfg.evaluator.in_flight,
            hours=cfg.campaign.hours,
        )
    ]


def first_segment(rate_per_hour: float, in_flight: int, hours: float) -> RunSegment:
    return RunSegment(started_at=0.0, rate_per_hour=rate_per_hour, in_flight=in_flight, hours=hours)


def limits_at(campaign: Campaign, at: float) -> RunSegment:
    """The segment whose limits are in force at campaign time ``at``."""
    current = segments(campaign)[0]
    for seg in segments(campaign):
        if seg.started_at <= at:
            current = seg
    return current


def _spans(campaign: Campaign, end: float) -> list[tuple[float, float, RunSegment]]:
    segs = segments(campaign)
    out = []
    for i, seg in enumerate(segs):
        stop = min(end, segs[i + 1].started_at if i + 1 < len(segs) else end)
        if stop > seg.started_at:
            out.append((seg.started_at, stop, seg))
    return out


def capacity_s(campaign: Campaign, start: float, end: float) -> float:
    """Evaluator-seconds available in [start, end): in_flight integrated over the segments."""
    return sum(max(0.0, min(b, end) - max(a, start)) * seg.in_flight for a, b, seg in _spans(campaign, end))


def busy_s(evals: list[Evaluation], subs: list[Submission], start: float, end: float) -> float:
    """Evaluator-seconds spent in [start, end): finished evaluations, and leased ones so far."""
    busy = sum(max(0.0, min(e.finished_at, end) - max(e.started_at, start)) for e in evals)
    busy += sum(
        max(0.0, end - max(s.starts[-1], start)) for s in subs if s.state == SubmissionState.LEASED and s.starts
    )
    return busy


def usage(
    campaign: Campaign, evals: list[Evaluation], subs: list[Submission], starts: list[float], end: float
) -> Usage:
    """Utilisation and rate use over [0, end), each against the limits in force at each moment."""
    busy = busy_s(evals, subs, 0.0, end)
    capacity = capacity_s(campaign, 0.0, end)
    allowed = max(1, math.ceil(sum((b - a) / 3600.0 * seg.rate_per_hour for a, b, seg in _spans(campaign, end)) - 1e-9))
    used = sum(1 for t in starts if t < end)
    return Usage(
        end=end,
        busy_s=busy,
        capacity_s=capacity,
        utilisation=min(1.0, busy / capacity) if capacity else 0.0,
        starts=used,
        allowed=allowed,
        rate_used=min(1.0, used / allowed),
    )


def utilisation_by_hour(campaign: Campaign, evals: list[Evaluation], hours: int) -> list[float]:
    """Fraction of the capacity in force that was busy, per campaign hour."""
    out = []
    for h in range(hours):
        cap = capacity_s(campaign, h * 3600.0, (h + 1) * 3600.0)
        out.append(busy_s(evals, [], h * 3600.0, (h + 1) * 3600.0) / cap if cap else 0.0)
    return out


def headroom_s(campaign: Campaign, starts: list[float], now: float) -> float:
    """Campaign seconds until the rate limit in force allows the next start (0 = now)."""
    if not starts:
        return 0.0
    return max(0.0, starts[-1] + 3600.0 / limits_at(campaign, now).rate_per_hour - now)


def best_over_time(evals: list[Evaluation]) -> list[tuple[float, float]]:
    """(finish time, best score so far) at every passing, timed evaluation, in the order they landed."""
    out: list[tuple[float, float]] = []
    best = math.inf
    for ev in sorted(evals, key=lambda e: (e.finished_at, e.id)):
        score = ev.report.passed_score()
        if score is None:
            continue
        best = min(best, score)
        out.append((ev.finished_at, best))
    return out


def evaluation_phases(evals: list[Evaluation]) -> dict[str, float]:
    """Median wall seconds per harness phase over the evaluations that recorded it (real GPUs)."""
    by_phase: dict[str, list[float]] = {}
    for ev in evals:
        for name, seconds in ev.report.phases.items():
            by_phase.setdefault(name, []).append(seconds)
    return {name: round(_median(values), 2) for name, values in by_phase.items()}


def started_early(phases: dict[str, float]) -> bool:
    """The harness process waited for its request (a spare), or was compiling the candidate ahead
    (``prepare_s``: it was started before the request and sent a dry pass): its start-up was not
    on the GPU's critical path, so its ``preload_s`` is not part of the evaluation's wall time."""
    return phases.get("idle_s", 0.0) > 0.05 or "prepare_s" in phases


class Retimes(msgspec.Struct, frozen=True):
    """The would-be leaders the evaluator timed again (``EvalReport.runs_us``): how many, and by
    how much their first timing flattered them (the median over them of the later timings'
    geometric mean against the first, minus one; None when there were none)."""

    count: int
    median_change: float | None


def retimes(evals: list[Evaluation]) -> Retimes:
    runs = [e.report.runs_us for e in evals if len(e.report.runs_us) > 1]
    later = [math.exp(sum(math.log(r) for r in rs[1:]) / (len(rs) - 1)) / rs[0] - 1 for rs in runs]
    return Retimes(count=len(runs), median_change=_median(later) if later else None)


def retime_text(retimed: Retimes | None) -> str:
    """One line for status and report; empty when nothing was timed again."""
    if retimed is None or retimed.median_change is None:
        return ""
    return (
        f"would-be leaders timed again with new inputs: {retimed.count}; the later timings were "
        f"{retimed.median_change:+.1%} against the first (median)"
    )


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


class Calibration(msgspec.Struct, frozen=True):
    """How well the predicted uplift ranges matched what the evaluations then showed."""

    judged: int  # hypotheses with an observed uplift
    rank_correlation: float | None  # Spearman, middle of [min, max] against observed; None under 3
    inside: float | None  # share of observed uplifts within [min, max]
    median_width: float | None  # of the ranges, in uplift (0.15 = 15 points)


def _ranks(values: list[float]) -> list[float]:
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    i = 0
    while i < len(order):  # ties share their mean rank
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2
        i = j + 1
    return ranks


def spearman(x: list[float], y: list[float]) -> float | None:
    """Spearman's rank correlation (None for fewer than 3 pairs or a constant side)."""
    if len(x) < 3:
        return None
    rx, ry = _ranks(x), _ranks(y)
    mx, my = sum(rx) / len(rx), sum(ry) / len(ry)
    cov = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    vx, vy = sum((a - mx) ** 2 for a in rx), sum((b - my) ** 2 for b in ry)
    return cov / math.sqrt(vx * vy) if vx and vy else None


def calibration(hypotheses: list[Hypothesis]) -> Calibration:
    """Predicted against observed uplift over every hypothesis with an observed uplift."""
    judged = [h for h in hypotheses if h.observed_uplift is not None]
    if not judged:
        return Calibration(judged=0, rank_correlation=None, inside=None, median_width=None)
    median = _median([h.max_uplift - h.min_uplift for h in judged])
    observed = [h.observed_uplift for h in judged if h.observed_uplift is not None]  # all of them
    return Calibration(
        judged=len(judged),
        rank_correlation=spearman([(h.min_uplift + h.max_uplift) / 2 for h in judged], observed),
        inside=sum(h.min_uplift <= o <= h.max_uplift for h, o in zip(judged, observed)) / len(judged),
        median_width=median,
    )


def calibration_text(cal: Calibration | None) -> str:
    """One line for status, watch and report."""
    if cal is None or cal.judged == 0:
        return "predictions: nothing judged yet"
    rho = "n/a" if cal.rank_correlation is None else f"{cal.rank_correlation:+.2f}"
    assert cal.inside is not None and cal.median_width is not None  # set whenever something was judged
    return (
        f"predictions: rank correlation {rho} (predicted vs observed uplift, {cal.judged} judged), "
        f"{cal.inside:.0%} inside their range, median range {cal.median_width * 100:.0f} points"
    )
