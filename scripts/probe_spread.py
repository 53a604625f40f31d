"""Where GPU MODE eval.py's mean leaves its best: every call of its leaderboard loop, with what
happened inside it.

eval.py reports the mean of up to 100 calls. On an H200 campaign R's kernel 32 read 136.1 us as
the geomean of those means and 123.0 us as the geomean of the best calls, with single calls up
to 300 us (docs/h200.md, seventeenth session): a tail worth more than most kernel changes. This
runs eval.py's loop (``evaluator.harness.time_shape_eval_py``'s pattern) on each submission and
shape and keeps, per call, the host-clock time, the part until ``custom_kernel`` returned (the
rest is the wait for the GPU), the thread's CPU time in that window, the garbage collections that
ran in it and the involuntary context switches around it. Variants leave one part of the
pattern out, so the one whose tail disappears names the cause:

- ``eval_py``: the loop as published (fresh inputs and a copy, synchronize, call, synchronize,
  the folder's check);
- ``no_gc``: the same with Python's garbage collector disabled for the loop;
- ``reuse``: one input set for every call (no fresh allocation), the check still between calls;
- ``no_check``: fresh inputs, no check between calls.

    python scripts/probe_spread.py FILE.py [FILE.py ...] [--task DIR] [--calls 100]
        [--shapes all|1024x7168x256,...] [--variants eval_py,no_gc,...] [--out spread.json]
    TRITON_INTERPRET=1 python scripts/probe_spread.py FILE.py --device cpu --calls 3 --shapes ...
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent  # the checkout, for the default task folder
VARIANTS = ("eval_py", "no_gc", "reuse", "no_check")


class _Collections:
    """Start times of the garbage collections (``gc.callbacks``), to count those inside a window."""

    def __init__(self) -> None:
        self.starts: list[tuple[int, int]] = []

    def __call__(self, phase: str, info: dict) -> None:
        if phase == "start":
            self.starts.append((time.perf_counter_ns(), info.get("generation", -1)))


def _loop(fn, ref, shape, meta, calls: int, variant: str, device: str, collections: _Collections) -> list[dict]:
    """eval.py's timed loop on one shape (after its untimed first call), one record per call."""
    from kernel_scientist.evaluator._gpu_harness import _sync
    from kernel_scientist.evaluator._rundir import generate_input
    from kernel_scientist.evaluator._task import check_failure
    from kernel_scientist.evaluator._values import clone_data

    data = generate_input(ref, shape, device)
    pristine = clone_data(data)
    out = fn(data)  # eval.py's obligatory untimed check first
    _sync(device)
    if check_failure(ref, pristine, out):
        raise SystemExit(f"probe_spread: wrong output on {shape.label()}")
    records = []
    if variant == "no_gc":
        gc.collect()
        gc.disable()
    try:
        for i in range(calls):
            if variant != "reuse":
                data = generate_input(ref, shape.with_seed(shape.seed + 13 * (i + 1)), device)
                pristine = clone_data(data)
            _sync(device)
            switches = resource.getrusage(resource.RUSAGE_THREAD).ru_nivcsw
            seen = len(collections.starts)
            cpu0 = time.thread_time_ns()
            t0 = time.perf_counter_ns()
            out = fn(data)
            returned = time.perf_counter_ns()
            cpu1 = time.thread_time_ns()
            _sync(device)
            t1 = time.perf_counter_ns()
            switches = resource.getrusage(resource.RUSAGE_THREAD).ru_nivcsw - switches
            inside = [g for at, g in collections.starts[seen:] if t0 <= at <= t1]
            records.append(
                {
                    "us": (t1 - t0) / 1e3,
                    "call_us": (returned - t0) / 1e3,
                    "cpu_us": (cpu1 - cpu0) / 1e3,
                    "gc": inside,
                    "ivcsw": switches,
                }
            )
            if variant != "no_check" and check_failure(ref, pristine, out):
                raise SystemExit(f"probe_spread: wrong output on {shape.label()} (call {i + 1})")
            del out
    finally:
        gc.enable()
    return records


def summarise(records: list[dict]) -> dict:
    """Mean, median, best and worst of the calls, and what the slow ones (over 1.3 x median + 10
    us) had in common: a collection inside, a context switch around, the excess before the
    return (host) or after it (the GPU wait)."""
    times = [r["us"] for r in records]
    median = statistics.median(times)
    call_median = statistics.median(r["call_us"] for r in records)
    slow = [r for r in records if r["us"] > 1.3 * median + 10]
    return {
        "calls": len(times),
        "mean_us": round(statistics.fmean(times), 2),
        "median_us": round(median, 2),
        "best_us": round(min(times), 2),
        "worst_us": round(max(times), 2),
        "call_median_us": round(call_median, 2),
        "cpu_median_us": round(statistics.median(r["cpu_us"] for r in records), 2),
        "slow": len(slow),
        "slow_excess_us": round(sum(r["us"] - median for r in slow) / max(len(times), 1), 2),
        "slow_with_gc": sum(1 for r in slow if r["gc"]),
        "slow_with_switch": sum(1 for r in slow if r["ivcsw"]),
        "slow_in_host": sum(1 for r in slow if r["call_us"] - call_median > 0.5 * (r["us"] - median)),
        "gc_inside": sum(len(r["gc"]) for r in records),
    }


def _geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("files", type=Path, nargs="+", help="submissions to probe")
    p.add_argument("--task", type=Path, default=ROOT / "evaluator" / "tasks" / "amd_fp8_mm")
    p.add_argument("--calls", type=int, default=100)
    p.add_argument("--shapes", default="all", help="'all' (the ranked shapes) or labels, comma-separated")
    p.add_argument("--variants", default=",".join(VARIANTS))
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    p.add_argument("--out", type=Path, default=Path("probe_spread.json"))
    args = p.parse_args()
    missing = [f for f in args.files if not f.is_file()]
    if missing:
        print(f"probe_spread: {missing[0]} is not a file", file=sys.stderr)
        return 2
    variants = [v for v in args.variants.split(",") if v]
    bad = [v for v in variants if v not in VARIANTS]
    problem = None
    if bad:
        problem = f"unknown variant {bad[0]} (one of {', '.join(VARIANTS)})"
    elif not variants:
        problem = f"--variants names none (one or more of {', '.join(VARIANTS)})"
    elif args.calls < 1:
        problem = "--calls must be at least 1"
    elif not args.out.parent.is_dir():  # refused before the loops, not after them
        problem = f"cannot write --out {args.out}: {args.out.parent} is not a folder"
    elif args.out.is_dir():
        problem = f"cannot write --out {args.out}: it is a folder"
    elif not os.access(args.out.parent, os.W_OK) or (args.out.exists() and not os.access(args.out, os.W_OK)):
        problem = f"cannot write --out {args.out}: permission denied"
    if problem:
        print(f"probe_spread: {problem}", file=sys.stderr)
        return 2

    from kernel_scientist.evaluator import load_task
    from kernel_scientist.evaluator._gpu_harness import _versions
    from kernel_scientist.evaluator._rundir import import_reference, import_submission, isolate_candidate

    task = load_task(args.task)
    known = {s.label(): s for s in task.benchmarks + task.tests}
    labels = [s.label() for s in task.benchmarks] if args.shapes == "all" else args.shapes.split(",")
    unknown = [s for s in labels if s not in known]
    if unknown:
        print(
            f"probe_spread: no shape {unknown[0]} in the task (labels look like {next(iter(known))})", file=sys.stderr
        )
        return 2
    import torch

    if args.device == "cuda" and not torch.cuda.is_available():
        print(
            "probe_spread: no GPU here (torch.cuda.is_available() is False); --device cpu runs the interpreter",
            file=sys.stderr,
        )
        return 2
    ref = import_reference(task.modules)
    collections = _Collections()
    gc.callbacks.append(collections)
    rows, summary = [], {}
    for file in args.files:
        folder = Path(tempfile.mkdtemp(prefix="ks-spread-"))
        isolate_candidate(task.modules, folder)
        sys.path.insert(0, str(folder))
        try:
            fn = import_submission(file.read_text(), folder)
        except (Exception, SystemExit) as exc:  # the submission's own import-time code may do anything
            print(f"probe_spread: {file} failed to import: {type(exc).__name__}: {exc}", file=sys.stderr)
            return 2
        finally:
            sys.path.remove(str(folder))
        if fn is None:
            print(f"probe_spread: {file} defines no custom_kernel(data)", file=sys.stderr)
            return 2
        for variant in variants:
            per_shape = []
            for label in labels:
                records = _loop(fn, ref, known[label], task.meta, args.calls, variant, args.device, collections)
                s = summarise(records)
                per_shape.append(s)
                rows.append({"file": str(file), "variant": variant, "shape": label, **s, "records": records})
                print(
                    f"{file.name:>12} {variant:>8} {label:>16}: mean {s['mean_us']:8.1f} median {s['median_us']:8.1f}"
                    f" best {s['best_us']:8.1f} worst {s['worst_us']:8.1f} | slow {s['slow']:3d} (+{s['slow_excess_us']:.1f}"
                    f" us on the mean; gc {s['slow_with_gc']}, switch {s['slow_with_switch']},"
                    f" host {s['slow_in_host']}) gc inside {s['gc_inside']}",
                    flush=True,
                )
            summary[f"{file} {variant}"] = {
                k: round(_geomean([s[k] for s in per_shape]), 2) for k in ("mean_us", "median_us", "best_us")
            }
    gc.callbacks.remove(collections)
    print("\ngeomean over the shapes (us):")
    for key, g in summary.items():
        print(f"  {key:>28}: mean {g['mean_us']:7.1f}  median {g['median_us']:7.1f}  best {g['best_us']:7.1f}")
    device = torch.cuda.get_device_name(0) if args.device == "cuda" else "cpu (Triton interpreter)"
    args.out.write_text(
        json.dumps(
            {
                "device": device,
                **_versions(),
                "calls": args.calls,
                "summary": summary,
                "rows": rows,
            },
            indent=1,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
