"""Concurrency sweeps: run a scenario under every combination of some limits, several seeds each.

Each run is a separate ``kernel-scientist run --quiet`` process with its own blackboard file (a
simulated campaign runs in virtual time, so a day takes seconds; processes, not threads, because
each campaign owns a trio loop and a sandbox server). A bounded pool of worker threads only waits on
those processes. Results are read back from the blackboards, so a sweep's numbers are exactly what
``status`` would say about each run.

Every ``--vary`` value is validated before anything runs, by loading the scenario with that value as
an override: a typo or an out-of-range value fails the whole sweep at once with the loader's
one-line message.
"""

from __future__ import annotations

import itertools
import os
import statistics
import subprocess
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

import msgspec

from kernel_scientist.blackboard import ScenarioError, load_scenario, metrics, open_existing

from . import status as status_mod


class Axis(msgspec.Struct, frozen=True):
    key: str  # a dotted scenario key, e.g. agents.engineers
    values: list[str]  # as typed (TOML values); validated against the scenario


class Run(msgspec.Struct, frozen=True):
    setting: dict[str, str]  # key -> value, one per axis
    seed: int
    db: str


class RunResult(msgspec.Struct, frozen=True):
    run: Run
    ok: bool
    error: str = ""
    best_us: float | None = None
    speedup_vs_seed: float | None = None
    evaluations: int = 0
    failed: int = 0
    utilisation: float = 0.0  # busy evaluator time / (campaign length * in_flight)
    rate_used: float = 0.0  # evaluation starts / what the rate limit allows in the campaign
    wall_s: float = 0.0
    node: str = ""  # the Ray node that ran it (`sweep --ray`); empty for this machine


class SettingSummary(msgspec.Struct, frozen=True):
    setting: dict[str, str]
    seeds: int
    best_us_mean: float | None
    best_us_min: float | None
    best_us_max: float | None
    speedup_vs_seed_mean: float | None
    evaluations_mean: float
    utilisation_mean: float
    utilisation_min: float
    utilisation_max: float
    rate_used_mean: float


class SweepSummary(msgspec.Struct, frozen=True):
    scenario: str
    simulated: bool
    overrides: list[str]
    axes: list[Axis]
    seeds: list[int]
    settings: list[SettingSummary]
    runs: list[RunResult]


def parse_vary(items: list[str], scenario: Path, overrides: list[str]) -> list[Axis]:
    """``KEY=V1,V2`` -> Axis, each value checked by loading the scenario with it. Raises
    ScenarioError (one line, naming the key and the value)."""
    axes, seen = [], set()
    for item in items:
        key, sep, raw = item.partition("=")
        key = key.strip()
        values = [v.strip() for v in raw.split(",") if v.strip()]
        if not sep or not key or not values:
            raise ScenarioError(f"--vary {item!r}: expected KEY=V1,V2,..., e.g. agents.engineers=1,2,4")
        if key in seen:
            raise ScenarioError(f"--vary {key}: given twice; list all its values in one --vary")
        seen.add(key)
        for value in values:
            try:
                load_scenario(scenario, [*overrides, f"{key}={value}"])
            except ScenarioError as exc:
                raise ScenarioError(f"--vary {key}={value}: {exc}") from None
        axes.append(Axis(key=key, values=values))
    return axes


def plan(scenario: Path, axes: list[Axis], seeds: int, out: Path, overrides: list[str]) -> tuple[list[Run], list[int]]:
    """Every combination of the axes' values, times ``seeds`` seeds (the scenario's seed onwards)."""
    base = load_scenario(scenario, overrides)
    seed_list = [base.campaign.seed + i for i in range(seeds)]
    runs = []
    for combo in itertools.product(*(a.values for a in axes)):
        setting = {a.key: v for a, v in zip(axes, combo)}
        slug = "_".join(f"{k}-{v}" for k, v in setting.items()) or "base"
        slug = "".join(c if c.isalnum() or c in "-_." else "-" for c in slug)
        for seed in seed_list:
            runs.append(Run(setting=setting, seed=seed, db=str(out / "runs" / f"{slug}-seed{seed}.sqlite")))
    return runs, seed_list


def command(scenario: Path, run: Run, overrides: list[str]) -> list[str]:
    sets = [*overrides, *(f"{k}={v}" for k, v in run.setting.items()), f"campaign.seed={run.seed}"]
    return [
        sys.executable,
        "-m",
        "kernel_scientist",
        "run",
        str(scenario),
        "--db",
        run.db,
        "--quiet",
        *itertools.chain.from_iterable(("--set", s) for s in sets),
    ]


def measure(run: Run, wall_s: float = 0.0) -> RunResult:
    """Read a finished run's numbers back from its blackboard."""
    with open_existing(run.db) as board:
        st = status_mod.status(board)
        use = metrics.usage(
            board.campaign(), board.evaluations(), board.submissions(), board.evaluation_starts(), board.clock()
        )
    return RunResult(
        run=run,
        ok=True,
        best_us=st.best.score_us if st.best else None,
        speedup_vs_seed=st.best.speedup_vs_seed if st.best else None,
        evaluations=st.evaluations,
        failed=st.failed,
        utilisation=use.utilisation,
        rate_used=use.rate_used,
        wall_s=wall_s,
    )


def execute(
    scenario: Path, runs: list[Run], overrides: list[str], jobs: int, done: Callable[[RunResult], None] = lambda r: None
) -> list[RunResult]:
    """Run every campaign (at most ``jobs`` at once); results in the order of ``runs``."""
    import time

    def one(run: Run) -> RunResult:
        Path(run.db).parent.mkdir(parents=True, exist_ok=True)
        t0 = time.perf_counter()
        proc = subprocess.run(
            command(scenario, run, overrides),
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        wall = time.perf_counter() - t0
        if proc.returncode != 0:
            tail = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
            return RunResult(run=run, ok=False, error=f"exit {proc.returncode}: {tail}", wall_s=wall)
        return measure(run, wall)

    results: dict[int, RunResult] = {}
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        futures = {pool.submit(one, run): i for i, run in enumerate(runs)}
        try:
            for fut in as_completed(futures):
                result = fut.result()
                results[futures[fut]] = result
                done(result)
        except BaseException:  # Ctrl-C: the campaigns not yet started never start (the pool would run them)
            pool.shutdown(cancel_futures=True)
            raise
    return [results[i] for i in range(len(runs))]


def summarise(results: list[RunResult]) -> list[SettingSummary]:
    groups: dict[tuple[tuple[str, str], ...], list[RunResult]] = {}
    for r in results:
        groups.setdefault(tuple(r.run.setting.items()), []).append(r)
    out = []
    for key, rs in groups.items():
        ok = [r for r in rs if r.ok]
        best = [r.best_us for r in ok if r.best_us is not None]
        speed = [r.speedup_vs_seed for r in ok if r.speedup_vs_seed is not None]
        util = [r.utilisation for r in ok] or [0.0]
        out.append(
            SettingSummary(
                setting=dict(key),
                seeds=len(ok),
                best_us_mean=statistics.fmean(best) if best else None,
                best_us_min=min(best) if best else None,
                best_us_max=max(best) if best else None,
                speedup_vs_seed_mean=statistics.fmean(speed) if speed else None,
                evaluations_mean=statistics.fmean([r.evaluations for r in ok]) if ok else 0.0,
                utilisation_mean=statistics.fmean(util),
                utilisation_min=min(util),
                utilisation_max=max(util),
                rate_used_mean=statistics.fmean([r.rate_used for r in ok]) if ok else 0.0,
            )
        )
    return out


def setting_label(setting: dict[str, str]) -> str:
    return ", ".join(f"{k.rsplit('.', 1)[-1]}={v}" for k, v in setting.items()) or "(scenario as is)"


def plot(summary: SweepSummary, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    label = "simulated" if summary.simulated else "measured"
    names = [setting_label(s.setting) for s in summary.settings]
    xs = list(range(len(names)))
    fig, (a, b) = plt.subplots(1, 2, figsize=(max(11, len(names) * 1.6), 5))
    for i, s in enumerate(summary.settings):
        if s.best_us_mean is not None and s.best_us_min is not None and s.best_us_max is not None:
            a.errorbar(
                [i],
                [s.best_us_mean],
                yerr=[[s.best_us_mean - s.best_us_min], [s.best_us_max - s.best_us_mean]],
                fmt="o",
                color="#1f4e79",
                capsize=5,
            )
        b.errorbar(
            [i],
            [s.utilisation_mean * 100],
            yerr=[[(s.utilisation_mean - s.utilisation_min) * 100], [(s.utilisation_max - s.utilisation_mean) * 100]],
            fmt="o",
            color="#e07b39",
            capsize=5,
        )
        b.scatter([i], [s.rate_used_mean * 100], marker="x", color="#2a9d3a")
    for r in summary.runs:  # every seed, faint, so the spread is visible as points too
        if r.ok and r.best_us is not None:
            a.scatter([names.index(setting_label(r.run.setting))], [r.best_us], s=10, color="#9bb7d4")
    b.scatter([], [], marker="x", color="#2a9d3a", label="rate budget used (starts / allowed)")
    b.errorbar([], [], fmt="o", color="#e07b39", label="evaluator busy time")
    for ax in (a, b):
        ax.set_xticks(xs, names, rotation=25, ha="right")
        ax.grid(alpha=0.3)
    a.set_ylabel(f"best time, us ({label})")
    a.set_title(f"best score per setting: mean, min..max over {len(summary.seeds)} seed(s)")
    b.set_ylabel(f"% ({label})")
    b.set_ylim(0, 105)
    b.set_title("evaluator utilisation per setting")
    b.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
