"""`sweep`: run a scenario under every combination of some limits, several seeds each."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from ._args import Subparsers, UsageError, add_overrides, check_output, positive_int


def add(sub: Subparsers) -> None:
    sw = sub.add_parser("sweep", help="run every combination of some scenario limits, over seeds")
    sw.add_argument("scenario", type=Path)
    sw.add_argument(
        "--vary",
        action="append",
        default=[],
        metavar="KEY=V1,V2",
        help="a scenario key and its values, e.g. --vary agents.engineers=1,2,4 (repeatable)",
    )
    sw.add_argument("--seeds", type=positive_int, default=1, help="seeds per setting (the scenario's seed onwards)")
    sw.add_argument(
        "--jobs",
        type=positive_int,
        default=None,
        help="campaigns at once (default: half the CPUs; with --ray, as many as the cluster takes)",
    )
    sw.add_argument(
        "--ray",
        nargs="?",
        const="",
        default=None,
        metavar="ADDRESS",
        help="run the campaigns as Ray tasks across a cluster (ADDRESS: its head, e.g. 10.0.0.5:6379 "
        "or auto; none: a cluster on this machine, else a new local one); see docs/ray.md",
    )
    sw.add_argument(
        "--out", type=Path, help="folder for the runs, sweep.json and sweep.png (default: runs/sweep-<scenario name>)"
    )
    add_overrides(sw, "override a scenario key in every run (repeatable)")
    sw.set_defaults(handler=_sweep, on_interrupt=_interrupted)


def _sweep(args: argparse.Namespace) -> int:
    import msgspec
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
    from rich.table import Table

    from kernel_scientist import sweep
    from kernel_scientist.blackboard import load_scenario

    base = load_scenario(args.scenario, args.overrides)  # a broken scenario fails before any run
    axes = sweep.parse_vary(args.vary, args.scenario, args.overrides)
    out = args.out or Path(base.campaign.out_dir) / f"sweep-{base.campaign.name}"
    if args.out is not None:  # the default folder (under campaign.out_dir) is created with its parents
        check_output("--out", out, force=False, folder=True)
    elif out.exists() and not out.is_dir():
        raise UsageError(f"{out}: exists and is not a folder; pass --out with a folder for the sweep")
    held = [p for p in (out / "sweep.json", out / "sweep.png") if p.exists()]
    if (out / "runs").exists() and any((out / "runs").iterdir()):
        held.insert(0, out / "runs")
    if held:
        named = f"--out {out}" if args.out is not None else f"{out} (the default --out)"
        raise UsageError(f"{named}: already holds a sweep ({held[0]}); pass another --out or remove it")
    runs, seeds = sweep.plan(args.scenario, axes, args.seeds, out, args.overrides)
    args.sweep_out = out  # from here on what is under it is this sweep's (_interrupted)
    if args.ray is not None:  # the folder it carries and the cluster, checked before anything is said
        from kernel_scientist import sweep_ray

        sweep_ray.carry(args.scenario, args.overrides)
        sweep_ray.join(args.ray)
    jobs = args.jobs or (None if args.ray is not None else max(1, (os.cpu_count() or 2) // 2))
    err = Console(stderr=True)
    where = "" if args.ray is None else f" on the Ray cluster {args.ray or '(this machine)'}"
    err.print(
        f"sweep: {len(runs)} campaigns ({len(runs) // len(seeds)} settings x {len(seeds)} seeds), "
        f"{jobs or 'as many as fit'} at a time{where}, into {out}"
    )
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
        transient=False,
        disable=not err.is_terminal,
    ) as bar:
        task = bar.add_task("campaigns", total=len(runs))

        def done(r: sweep.RunResult) -> None:
            what = sweep.setting_label(r.run.setting) + f", seed {r.run.seed}"
            bar.update(task, advance=1, description=f"{'done' if r.ok else 'FAILED'}: {what}")

        if args.ray is None:
            results = sweep.execute(args.scenario, runs, args.overrides, jobs or 1, done)
        else:
            results = sweep_ray.execute(args.scenario, runs, args.overrides, args.ray, jobs, done)
    simulated = base.evaluator.backend == "simulated"
    summary = sweep.SweepSummary(
        scenario=str(args.scenario),
        simulated=simulated,
        overrides=args.overrides,
        axes=axes,
        seeds=seeds,
        settings=sweep.summarise(results),
        runs=results,
    )
    out.mkdir(parents=True, exist_ok=True)
    (out / "sweep.json").write_bytes(msgspec.json.format(msgspec.json.encode(summary)) + b"\n")
    png = sweep.plot(summary, out / "sweep.png")

    label = "simulated" if simulated else "measured"
    table = Table(title=f"sweep of {args.scenario} ({label}; mean ± half the min..max spread over seeds)")
    for col in ("setting", "seeds", "best us", "vs seed", "evaluations", "utilisation", "rate used"):
        table.add_column(col, justify="left" if col == "setting" else "right")
    for s in summary.settings:
        best = (
            "n/a"
            if s.best_us_mean is None or s.best_us_min is None or s.best_us_max is None
            else f"{s.best_us_mean:.1f} ± {(s.best_us_max - s.best_us_min) / 2:.1f}"
        )
        table.add_row(
            sweep.setting_label(s.setting),
            str(s.seeds),
            best,
            "n/a" if s.speedup_vs_seed_mean is None else f"{s.speedup_vs_seed_mean:.2f}x",
            f"{s.evaluations_mean:.1f}",
            f"{s.utilisation_mean:.0%} ± {(s.utilisation_max - s.utilisation_min) / 2:.0%}",
            f"{s.rate_used_mean:.0%}",
        )
    Console(width=max(120, Console().width)).print(table)
    failed = [r for r in results if not r.ok]
    for r in failed:
        print(f"failed: {sweep.setting_label(r.run.setting)}, seed {r.run.seed}: {r.error} ({r.run.db})")
    print(f"summary: {out / 'sweep.json'}\nplot:    {png}")
    return 1 if failed else 0


def _interrupted(args: argparse.Namespace) -> str:
    out: Path | None = getattr(args, "sweep_out", None)
    if out is None or not (out / "runs").exists():
        return "interrupted before the sweep's first campaign started; nothing was written"
    return (
        f"interrupted; the campaigns run so far are in {out / 'runs'} (no sweep.json or sweep.png was written); "
        "to sweep again, pass another --out"
    )
