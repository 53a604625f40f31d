"""The campaign's measures, defined once: the limits in force, evaluator utilisation, rate-limit
use, the headroom before the next start, and the best score over time.

``status``, ``watch``, ``report``, ``sweep`` and the evaluator agent all compute these here, so the
same campaign gives the same figure everywhere. Definitions:

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
- The window of a finished campaign ends at its close; of a running one, at ``now``.
"""

from __future__ import annotations

import math

import msgspec

from .config import scenario_from_json
from .records import Campaign, Evaluation, RunSegment, Submission, SubmissionState


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
    return [RunSegment(started_at=0.0, rate_per_hour=cfg.evaluator.rate_per_hour, in_flight=cfg.evaluator.in_flight,
                       hours=cfg.campaign.hours)]


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
    busy += sum(max(0.0, end - max(s.starts[-1], start)) for s in subs
                if s.state == SubmissionState.LEASED and s.starts)
    return busy


def usage(campaign: Campaign, evals: list[Evaluation], subs: list[Submission], starts: list[float],
          end: float) -> Usage:
    """Utilisation and rate use over [0, end), each against the limits in force at each moment."""
    busy = busy_s(evals, subs, 0.0, end)
    capacity = capacity_s(campaign, 0.0, end)
    allowed = max(1, math.ceil(sum((b - a) / 3600.0 * seg.rate_per_hour for a, b, seg in _spans(campaign, end)) - 1e-9))
    used = sum(1 for t in starts if t < end)
    return Usage(end=end, busy_s=busy, capacity_s=capacity, utilisation=min(1.0, busy / capacity) if capacity else 0.0,
                 starts=used, allowed=allowed, rate_used=min(1.0, used / allowed))


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
        score = ev.report.score_us
        if ev.report.outcome != "passed" or score is None:
            continue
        best = min(best, score)
        out.append((ev.finished_at, best))
    return out
