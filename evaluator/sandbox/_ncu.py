"""Nsight Compute (``ncu``) around one profiled call of a candidate: where to find the tool, the
command line that wraps the GPU harness, and its CSV read into ``KernelProfile`` rows.

The harness opens the profiled range itself (``cudaProfilerStart``/``Stop`` around one call of
one ranked shape, after an untimed warm-up call), so ``--profile-from-start off`` leaves out the
tests, the warm-up and every compile. ``--clock-control none`` keeps the GPU's own clocks, as the
timed runs see them. Only the counters in ``METRICS`` are collected: a few passes per kernel,
not the full sections. The CSV is ncu's default page, one row per metric of each launch, with
its unit; numbers carry thousands separators.
"""

from __future__ import annotations

import csv
import functools
import glob
import io
import os
import shutil
import subprocess
from pathlib import Path

from kernel_scientist.blackboard.records import KernelProfile

# counter -> KernelProfile field
METRICS = {
    "gpu__time_duration.sum": "time_us",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed": "sm_pct",
    "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed": "memory_pct",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed": "dram_pct",
    "lts__t_sector_hit_rate.pct": "l2_hit_pct",
    "sm__warps_active.avg.pct_of_peak_sustained_active": "occupancy_pct",
    "launch__registers_per_thread": "registers",
}
_TO_US = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3, "s": 1e6, "second": 1e6}


class NcuError(Exception):
    """ncu gave no usable reading (its own words, one line)."""


def find_ncu() -> str | None:
    """The ncu executable: ``KS_NCU`` where set (a path), else on PATH, else the newest under
    /opt/nvidia/nsight-compute or CUDA's own folder; None where there is none."""
    named = os.environ.get("KS_NCU")
    if named:
        return named if os.access(named, os.X_OK) else None
    found = shutil.which("ncu")
    if found:
        return found
    patterns = ("/opt/nvidia/nsight-compute/*/ncu", "/usr/local/cuda*/bin/ncu", "/usr/local/cuda*/nsight-compute*/ncu")
    candidates = sorted({p for pattern in patterns for p in glob.glob(pattern) if os.access(p, os.X_OK)})
    return candidates[-1] if candidates else None


@functools.cache
def ncu_version(ncu: str) -> str:
    """ "Nsight Compute 2025.3.1.0", from ``ncu --version``'s last line ("Version 2025.3.1.0 (build
    ...)"); "Nsight Compute" where it says nothing usable."""
    try:
        out = subprocess.run([ncu, "--version"], capture_output=True, text=True, timeout=60, check=False).stdout
    except (OSError, subprocess.TimeoutExpired):
        return "Nsight Compute"
    words = out.strip().splitlines()[-1].split() if out.strip() else []
    return f"Nsight Compute {words[1]}" if len(words) > 1 and words[0] == "Version" else "Nsight Compute"


def command(ncu: str, log: Path) -> list[str]:
    """The prefix that runs a harness under ncu, its CSV written to ``log`` (not to the
    candidate's stdout, which the parent truncates)."""
    return [
        ncu,
        "--csv",
        "--profile-from-start",
        "off",
        "--clock-control",
        "none",
        "--metrics",
        ",".join(METRICS),
        "--log-file",
        str(log),
    ]


def _number(text: str) -> float | None:
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return None  # "n/a", an empty cell


def parse(text: str) -> list[KernelProfile]:
    """Each profiled launch of ncu's CSV, in the order ncu numbered them. Raises NcuError with
    ncu's first error line where the text holds no reading (no counters, no kernel in range)."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID",')), None)
    if start is None:
        errors = [line.removeprefix("==ERROR==").strip() for line in lines if line.startswith("==ERROR==")]
        warnings = [line.removeprefix("==WARNING==").strip() for line in lines if line.startswith("==WARNING==")]
        raise NcuError((errors or warnings or ["no kernel was profiled"])[0][:300])
    rows = csv.DictReader(io.StringIO("\n".join(line for line in lines[start:] if not line.startswith("=="))))
    launches: dict[str, dict[str, object]] = {}
    for row in rows:
        field = METRICS.get(row.get("Metric Name") or "")
        launch = launches.setdefault(
            row.get("ID") or "",
            {
                "kernel": row.get("Kernel Name") or "?",
                "grid": row.get("Grid Size") or "",
                "block": row.get("Block Size") or "",
            },
        )
        value = _number(row.get("Metric Value") or "")
        if field is None or value is None:
            continue
        if field == "time_us":
            scale = _TO_US.get((row.get("Metric Unit") or "").strip())
            if scale is None:
                continue  # a unit this reader does not know: unknown, never a wrong scale
            value *= scale
        launch[field] = int(value) if field == "registers" else round(value, 3)
    if not launches:
        raise NcuError("no kernel was profiled")
    return [KernelProfile(**fields) for _, fields in sorted(launches.items(), key=lambda kv: _order(kv[0]))]  # type: ignore[arg-type]


def _order(launch_id: str) -> tuple[int, str]:
    return (int(launch_id), "") if launch_id.isdigit() else (1 << 30, launch_id)
