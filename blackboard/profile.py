"""A report's profile (``EvalReport.profile``) as a short markdown table: one row per launch of
the profiled call, the counters an engineer reads first to see what bounds a kernel (its time,
SM and memory throughput against their peaks, DRAM, the L2 hit rate, achieved occupancy,
registers). The line above says which shape and which tool, since a profiled call runs with the
profiler's replays and is not the timed one. For the language-model scientist's prompts and any
report that shows an evaluation."""

from __future__ import annotations

from kernel_scientist.blackboard.records import EvalReport, KernelProfile, Profile

__all__ = ["profile_line", "profile_table", "profile_target"]


def profile_target(report: EvalReport) -> int:
    """The ranked shape a profile tells the most about: the one farthest from its speed of light
    (time over it), the longest where none is known. An index into ``report.shapes``."""

    def far(i: int) -> tuple[float, float]:
        s = report.shapes[i]
        time_us = s.time_us or 0.0
        return (time_us / s.sol_us if s.sol_us else 0.0, time_us)

    return max(range(len(report.shapes)), key=far)


def profile_line(profile: Profile) -> str:
    """One line for the conversation log: the shape, the launches, and the longest one's counters."""
    where = profile.shape.label()
    if not profile.launches:
        return f"no profile of the call on {where}: {profile.error or 'no launch was profiled'}"
    k = max(profile.launches, key=lambda x: x.time_us or 0.0)
    n = len(profile.launches)
    return (
        f"profiled one call on {where} ({n} launch{'es' if n != 1 else ''}); longest {k.kernel[:60]}: "
        f"{'-' if k.time_us is None else f'{k.time_us:.1f} us'}, SM {_pct(k.sm_pct)}, memory {_pct(k.memory_pct)}, "
        f"DRAM {_pct(k.dram_pct)}, occupancy {_pct(k.occupancy_pct)}"
    )


def profile_table(profile: Profile | None) -> str:
    """The table, or the one line saying why there is no profile; "" when none was asked."""
    if profile is None:
        return ""
    where = profile.shape.label()
    if not profile.launches:
        return f"No profile of the call on {where}: {profile.error or 'no launch was profiled'}"
    lines = [
        f"Profile of one call on {where} ({profile.tool or 'Nsight Compute'}; % of each unit's peak):",
        "",
        "| launch | grid | block | time | SM | memory | DRAM | L2 hit | occupancy | registers |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    lines += [_row(k) for k in profile.launches]
    return "\n".join(lines)


def _row(k: KernelProfile) -> str:
    cells = [
        _cell(k.kernel)[:80],
        k.grid or "-",
        k.block or "-",
        "-" if k.time_us is None else f"{k.time_us:.1f} us",
        _pct(k.sm_pct),
        _pct(k.memory_pct),
        _pct(k.dram_pct),
        _pct(k.l2_hit_pct),
        _pct(k.occupancy_pct),
        "-" if k.registers is None else str(k.registers),
    ]
    return "| " + " | ".join(cells) + " |"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}%"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")
