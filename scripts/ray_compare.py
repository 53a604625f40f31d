"""The Ray backend against the local backend on the same kernels: verdicts, scores and the cost of Ray.

Each kernel (the task's seed, then the evaluated kernels of a blackboard in id order) is evaluated
``--repeat`` times on each backend, alternating local and Ray so that drift in the machine's clocks
falls on both alike, with the same secret seed. Printed per kernel: both verdicts, both scores and
their difference, both walls. The Ray overhead per evaluation is given two ways: what the Ray
backend itself records (its wall around the task minus the harness process's wall, in each
report's provenance), and the difference of the two backends' mean walls.

    python scripts/ray_compare.py --address auto --db runs/gpu.sqlite --kernels 5 --out compare.json
    python scripts/ray_compare.py --device cpu --small --kernels 1    # a dry run on the CPU
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--task", type=Path, default=ROOT / "evaluator" / "tasks" / "amd_fp8_mm")
    p.add_argument("--db", type=Path, help="a blackboard whose evaluated kernels are compared after the seed")
    p.add_argument("--kernels", type=int, default=5, help="how many kernels, the seed included")
    p.add_argument("--repeat", type=int, default=1, help="evaluations per kernel and backend")
    p.add_argument("--address", default="", help="the Ray cluster (default: one on this machine, else a new one)")
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    p.add_argument(
        "--small",
        action="store_true",
        help="the task's shapes cut to ones the CPU interpreter runs in seconds (with --device cpu)",
    )
    p.add_argument("--timeout", type=float, default=300.0)
    p.add_argument("--max-calls", type=int, default=20)
    p.add_argument("--shape-budget", type=float, default=1.0)
    p.add_argument("--out", type=Path, default=Path("ray_compare.json"))
    args = p.parse_args()

    import msgspec
    import trio
    from kernel_scientist.blackboard import Shape, open_existing
    from kernel_scientist.evaluator import LocalBackend, RayBackend, load_task

    task = load_task(args.task)
    if args.small:
        task = msgspec.structs.replace(
            task, tests=task.check_shapes[:2], benchmarks=[Shape(64, 64, 128, 7), Shape(64, 128, 256, 8)]
        )
    sources = [("seed", task.seed_source)]
    recorded_in_db = []
    if args.db:
        with open_existing(args.db) as board:
            evals = board.evaluations()
            done = {e.kernel_id for e in evals}
            sources += [(f"kernel {k.id}", k.source) for k in board.kernels() if k.id in done and k.author != "seed"]
            recorded_in_db = [
                float(m.group(1)) for e in evals if (m := re.search(r"overhead ([0-9.]+) s", e.report.provenance.notes))
            ]
        if recorded_in_db:
            print(
                f"{args.db}: the Ray overhead its {len(recorded_in_db)} evaluations recorded: mean "
                f"{statistics.fmean(recorded_in_db):.3f} s, median {statistics.median(recorded_in_db):.3f} s, "
                f"max {max(recorded_in_db):.3f} s",
                flush=True,
            )
    sources = sources[: args.kernels]
    common = dict(
        timeout_s=args.timeout,
        max_calls=args.max_calls,
        shape_budget_s=args.shape_budget,
        device=args.device,
        own_kernel=True,
    )
    local = LocalBackend(task, **common)
    ray_backend = RayBackend(task, address=args.address, **common)

    async def one(backend, source, n):
        began = time.perf_counter()
        report = await backend.evaluate(source, submission_id=n, secret_seed=12345)
        return report, time.perf_counter() - began

    rows = []

    async def run_all():
        n = 0
        for name, source in sources:
            for _ in range(args.repeat):
                for label, backend in (("local", local), ("ray", ray_backend)):
                    n += 1
                    report, wall = await one(backend, source, n)
                    notes = report.provenance.notes
                    overhead = re.search(r"overhead ([0-9.]+) s", notes)
                    rows.append(
                        {
                            "kernel": name,
                            "backend": label,
                            "outcome": str(report.outcome),
                            "score_us": report.score_us,
                            "wall_s": round(wall, 3),
                            "ray_overhead_s": float(overhead.group(1)) if overhead else None,
                            "device": report.provenance.device,
                            "reason": report.reason[:200],
                            "notes": notes,
                        }
                    )
                    print(
                        f"{name:>10} {label:>5}: {report.outcome:<13} "
                        f"{'' if report.score_us is None else f'{report.score_us:10.1f} us'}  wall {wall:6.2f} s"
                        + (f"  (ray overhead {overhead.group(1)} s)" if overhead else ""),
                        flush=True,
                    )

    with ray_backend:
        trio.run(run_all)

    print("\nkernel      local verdict / ray verdict      local us      ray us   ray-local")
    agree = 0
    for name, _ in sources:
        mine = {b: [r for r in rows if r["kernel"] == name and r["backend"] == b] for b in ("local", "ray")}
        verdicts = {b: sorted({r["outcome"] for r in rs}) for b, rs in mine.items()}
        scores = {b: [r["score_us"] for r in rs if r["score_us"] is not None] for b, rs in mine.items()}
        mean = {b: statistics.fmean(v) if v else None for b, v in scores.items()}
        diff = f"{(mean['ray'] / mean['local'] - 1) * 100:+6.1f}%" if mean["local"] and mean["ray"] else "   n/a"
        agree += verdicts["local"] == verdicts["ray"]
        print(
            f"{name:>10}  {'/'.join(verdicts['local']):>13} / {'/'.join(verdicts['ray']):<13} "
            f"{mean['local'] or float('nan'):10.1f}  {mean['ray'] or float('nan'):10.1f}   {diff}"
        )
    walls = {b: statistics.fmean(r["wall_s"] for r in rows if r["backend"] == b) for b in ("local", "ray")}
    recorded = [r["ray_overhead_s"] for r in rows if r["ray_overhead_s"] is not None]
    summary = {
        "kernels": len(sources),
        "repeat": args.repeat,
        "verdicts_agree": agree,
        "campaign_overheads_s": recorded_in_db,
        "mean_wall_s": walls,
        "ray_overhead_recorded_mean_s": statistics.fmean(recorded) if recorded else None,
        "ray_minus_local_wall_mean_s": walls["ray"] - walls["local"],
        "device": args.device,
        "date": time.strftime("%Y-%m-%d"),
        "rows": rows,
    }
    print(
        f"\nverdicts agree on {agree} of {len(sources)} kernels; mean wall per evaluation: local "
        f"{walls['local']:.2f} s, ray {walls['ray']:.2f} s (difference {walls['ray'] - walls['local']:+.2f} s); "
        f"Ray overhead recorded per evaluation: {summary['ray_overhead_recorded_mean_s'] or 0:.3f} s"
    )
    args.out.write_text(json.dumps(summary, indent=1))
    return 0 if agree == len(sources) else 1


if __name__ == "__main__":
    sys.exit(main())
