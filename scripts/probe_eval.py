"""How many evaluations an hour one GPU gives, and where each evaluation's wall time goes: the
campaign's own local backend (``evaluator.LocalBackend``, the harness's whole protocol: tests,
ranked shapes with fresh inputs, an L2 flush and a re-check per timed call) run on submission
files back to back, with and without the spare harness process, and with the next two files compiled
ahead (``prepare``: the campaign's default, evaluator/_prepare.py), under the stop rule given.

    python scripts/probe_eval.py FILE.py [FILE.py ...] [--rounds 2] [--min-calls 3 --max-calls 20
        --rel-stderr 0.001 --budget 1.0] [--compile-workers N] [--out probe.json]

Prints, per evaluation, its wall time from request to verdict and its phases (the harness's own
clock: set-up, tests with their compiles and first-call tuning, timing), then the evaluations per
GPU-hour of each mode. The anchor in the same run: the seed kernel, evaluated the same way.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import msgspec
import trio

ROOT = Path(__file__).resolve().parent.parent


async def _run(args: argparse.Namespace) -> dict:
    from kernel_scientist.evaluator import LocalBackend, load_task

    task = load_task(Path(args.task))
    if args.small:  # a dry run without a GPU: two small shapes under the interpreter
        from kernel_scientist.blackboard import Shape

        task = msgspec.structs.replace(
            task, tests=task.check_shapes[:1], benchmarks=[Shape(64, 64, 128, 7), Shape(64, 128, 256, 8)]
        )
    files = [("seed", task.seed_source)] + [(Path(f).name, Path(f).read_text()) for f in args.files]
    out: dict = {"settings": vars(args), "modes": {}}
    for mode in args.modes.split(","):
        spare = mode in ("spare", "prepare")
        rows = []
        with LocalBackend(
            task,
            timeout_s=args.timeout,
            min_calls=args.min_calls,
            max_calls=args.max_calls,
            rel_stderr=args.rel_stderr,
            shape_budget_s=args.budget,
            own_kernel=True,
            spare=spare,
            prepare_ahead=2 if mode == "prepare" else 0,
            compile_workers=args.compile_workers or None,
            device="cpu" if args.small else "cuda",
        ) as backend:
            began = time.perf_counter()
            order = [(round_, name, source) for round_ in range(args.rounds) for name, source in files]
            for i, (round_, name, source) in enumerate(order):
                backend.prepare([s for _, _, s in order[i : i + 3]])  # as the evaluator agent does
                t0 = time.perf_counter()
                report = await backend.evaluate(source, submission_id=len(rows) + 1, secret_seed=round_ + 1)
                wall = time.perf_counter() - t0
                rows.append(
                    {
                        "file": name,
                        "round": round_,
                        "outcome": report.outcome.value,
                        "score_us": report.score_us,
                        "wall_s": round(wall, 2),
                        "notes": report.provenance.notes,
                    }
                )
                print(
                    f"{mode:5} {name:32} {report.outcome.value:12} {report.score_us or 0:8.1f} us"
                    f"  {wall:5.1f} s  {report.provenance.notes}",
                    flush=True,
                )
            total = time.perf_counter() - began
        per_hour = 3600 * len(rows) / total
        out["modes"][mode] = {"rows": rows, "total_s": round(total, 1), "per_gpu_hour": round(per_hour, 1)}
        print(
            f"{mode}: {len(rows)} evaluations in {total:.1f} s = {per_hour:.0f} per GPU-hour "
            f"(median {statistics.median(r['wall_s'] for r in rows):.1f} s each)",
            flush=True,
        )
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("files", nargs="*", help="submission files (the seed is always evaluated too)")
    p.add_argument("--task", default=str(ROOT / "evaluator" / "tasks" / "amd_fp8_mm"))
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--min-calls", type=int, default=3)
    p.add_argument("--max-calls", type=int, default=20)
    p.add_argument("--rel-stderr", type=float, default=0.001)
    p.add_argument("--budget", type=float, default=1.0, help="wall seconds per ranked shape")
    p.add_argument("--timeout", type=float, default=300.0)
    p.add_argument(
        "--compile-workers",
        type=int,
        default=0,
        help="compile threads per dry pass (0: the backend's default; 1: none)",
    )
    p.add_argument("--out", default="")
    p.add_argument(
        "--modes",
        default="cold,spare",
        help="any of cold (a process per request), spare, prepare (spare + compiled ahead)",
    )
    p.add_argument("--small", action="store_true", help="dry run on the CPU (interpreter), two small shapes")
    args = p.parse_args()
    if set(args.modes.split(",")) - {"cold", "spare", "prepare"}:
        print(f"probe_eval: --modes takes cold, spare and/or prepare, not {args.modes!r}", file=sys.stderr)
        return 2
    if args.compile_workers < 0:
        print(
            f"probe_eval: --compile-workers takes 0 (the default) or more, not {args.compile_workers}", file=sys.stderr
        )
        return 2
    missing = [f for f in args.files if not Path(f).is_file()]
    if missing:
        print(f"probe_eval: no such file: {missing[0]}", file=sys.stderr)
        return 2
    import torch

    if not args.small and not torch.cuda.is_available():
        print("probe_eval: no GPU visible; --small runs the same protocol on the CPU", file=sys.stderr)
        return 2
    result = trio.run(_run, args)
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
