"""Where the host time inside a timed call goes: the harness's calling pattern (fresh inputs, a
NaN-filled output, an L2 flush, a device-wide synchronize before the call, the folder's check
after it), with every call profiled.

On an H200 the local backend measured 100-200 us of host work inside ``custom_kernel`` per call
(docs/h200.md, bench-9), for a kernel that makes one Triton launch. This prints, per shape, the mean
and median host time of a call, the garbage collections that ran inside calls and their time, and
the functions the calls spent it in (cProfile, cumulative), so one device call answers whether it
is Triton's launch path, Python work in the submission, or collector pauses.

    python scripts/probe_host.py FILE.py [--task DIR] [--calls 50] [--shapes 3] [--out probe.json]
    TRITON_INTERPRET=1 python scripts/probe_host.py FILE.py --device cpu --smallest-tests --calls 3 --shapes 1
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import json
import pstats
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent  # the checkout, for the default task folder


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("file", type=Path, help="the submission to probe")
    p.add_argument("--task", type=Path, default=ROOT / "evaluator" / "tasks" / "amd_fp8_mm")
    p.add_argument("--calls", type=int, default=50)
    p.add_argument("--shapes", type=int, default=3, help="the first N ranked shapes")
    p.add_argument(
        "--smallest-tests",
        action="store_true",
        help="probe the task's smallest test shapes instead (a dry run in the CPU interpreter)",
    )
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    p.add_argument("--out", type=Path, default=Path("probe_host.json"))
    args = p.parse_args()
    if not args.file.is_file():
        raise SystemExit(f"probe_host: {args.file} is not a file")

    import torch
    from kernel_scientist.evaluator import load_task
    from kernel_scientist.evaluator.harness import generate_input, import_reference, import_submission, prefill_output

    task = load_task(args.task)
    ref = import_reference(task.modules)
    fn = import_submission(args.file.read_text(), Path(tempfile.mkdtemp()))
    if fn is None:
        raise SystemExit(f"probe_host: {args.file} defines no custom_kernel(data)")
    cuda = args.device == "cuda"
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    flush = torch.empty(64 * 1024 * 1024, dtype=torch.float32, device=args.device) if cuda else None

    in_call = [False]
    pauses: list[float] = []
    began: list[float] = []

    def collector(phase, info):  # gc.callbacks: time each collection that runs inside a call
        if not in_call[0]:
            return
        if phase == "start":
            began.append(time.perf_counter())
        elif began:
            pauses.append((time.perf_counter() - began.pop()) * 1e6)

    gc.callbacks.append(collector)
    rows = []
    shapes = sorted(task.tests, key=lambda s: s.work()) if args.smallest_tests else task.benchmarks
    for shape in shapes[: args.shapes]:
        data = generate_input(ref, shape, args.device)
        fn(data)  # warm-up: compiles, tunes
        sync()
        # Each mode drops one part of the harness's pattern, so the one whose removal makes the
        # host time collapse is the cause; only the last mode runs under cProfile.
        modes = {}
        for mode in ("harness", "no_flush", "reused_inputs", "no_sync_before", "profiled"):
            profile = cProfile.Profile() if mode == "profiled" else None
            hosts: list[float] = []
            pauses.clear()
            for i in range(args.calls):
                if mode != "reused_inputs" or i == 0:
                    data = generate_input(ref, shape.with_seed(shape.seed + 13 * (i + 1)), args.device)
                prefill_output(data, task.meta)
                if flush is not None and mode != "no_flush":
                    flush.zero_()
                if mode != "no_sync_before":
                    sync()
                in_call[0] = True
                if profile is not None:
                    profile.enable()
                t0 = time.perf_counter()
                fn(data)
                t1 = time.perf_counter()
                if profile is not None:
                    profile.disable()
                in_call[0] = False
                sync()
                hosts.append((t1 - t0) * 1e6)
            modes[mode] = {
                "mean": round(statistics.fmean(hosts), 2),
                "median": round(statistics.median(hosts), 2),
                "max": round(max(hosts), 2),
                "gc_pauses": len(pauses),
                "gc_pause_us": round(sum(pauses), 2),
            }
            print(
                f"{shape.label():>18} {mode:>15}: host mean {modes[mode]['mean']} us, median "
                f"{modes[mode]['median']} us, max {modes[mode]['max']} us; {len(pauses)} collections inside calls"
            )
        text = io.StringIO()
        pstats.Stats(profile, stream=text).sort_stats("cumulative").print_stats(15)
        row = {"shape": shape.label(), "calls": args.calls, "modes": modes, "profile": text.getvalue()}
        rows.append(row)
        print("\n".join(text.getvalue().splitlines()[:30]))
    args.out.write_text(
        json.dumps(
            {"file": str(args.file), "device": args.device, "rows": rows, "torch": str(torch.__version__)}, indent=1
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
