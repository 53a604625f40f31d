"""Map the design space of a block-scaled fp8 GEMM on a GPU, in one run: accumulation modes x
operand layouts x launch configurations, each checked and timed on the task's 18 ranked shapes.

It answers "which kernel structure can pass the check and how fast is it" before a campaign spends
evaluations on it; what it finds becomes techniques in knowledge/. Modes:

  precise  one fp8 tl.dot per 128-wide K block with max_num_imprecise_acc=0 (the seed's form)
  sub32    four fp8 dots of K = 32 per block, default accumulation, each added to the fp32
           accumulator with its scale (promotion after every MMA, written out by hand)
  sub64    two fp8 dots of K = 64 per block, likewise
  bf16     fp8 tiles converted to bf16 before the dot (exact), one scaled add per block
  fp16     fp8 tiles converted to fp16 before the dot (exact for e4m3, a one-instruction convert)
  fast     one fp8 dot per block, default accumulation (known to fail on Hopper; for scale)
  fp16x2   fp16 with the K loop unrolled by two blocks, both dots issued before either scaled
           add (can the second MMA overlap the first block's promotion?); needs k % 256 == 0

Layouts: ``strided`` loads the column-major inputs as given; ``kmajor`` copies a and b to
K-contiguous rows first (the copy is inside the timed call). Times are medians of
``triton.testing.do_bench`` (which clears a 256 MB buffer between calls), one input set per shape;
a shape passes when every element is within the task's tolerance of the reference.

    python scripts/explore_kernels.py --out explore.json [--deadline 300] [--modes precise,bf16]
    TRITON_INTERPRET=1 python scripts/explore_kernels.py --smoke   # correctness only, CPU
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import torch
import triton
from _gemm_forms import ATOL, RTOL, parse_configs, strided_args, strided_gemm
from kernel_scientist.evaluator import geomean

ROOT = Path(__file__).resolve().parents[1]

MODES = {"precise": 0, "sub32": 1, "sub64": 2, "bf16": 3, "fp16": 4, "fast": 5, "fp16x2": 6}
# (BLOCK_M, BLOCK_N, num_warps, num_stages), cheapest to compile first.
CONFIGS = parse_configs("128x128x8x3,64x128x4x4,128x128x4x3,128x64x4x4,128x256x8x3,256x128x8x3,64x64x4x4,128x128x8x4")


def make_kernel(mode: str, layout: str, cfg: tuple[int, int, int, int]):
    bm, bn, warps, stages = cfg

    def run(data):
        a, b, a_scale, b_scale, c = data
        if layout == "kmajor":
            a, b = a.contiguous(), b.contiguous()
        m, k = a.shape
        n = b.shape[0]
        grid = (triton.cdiv(m, bm) * triton.cdiv(n, bn),)
        strided_gemm[grid](
            *strided_args((a, b, a_scale, b_scale, c)),
            BLOCK_M=bm,
            BLOCK_N=bn,
            MODE=MODES[mode],
            GROUP_M=8,
            num_warps=warps,
            num_stages=stages,
        )
        return c

    return run


def summarise(rows: list[dict], shapes: list[str]) -> dict:
    """Per (mode, layout): the best single config and the best config per shape, over passing rows."""
    out: dict[str, dict] = {}
    oracle: dict[str, float] = {}
    for key in sorted({(r["mode"], r["layout"]) for r in rows}):
        mine = [r for r in rows if (r["mode"], r["layout"]) == key]
        per_cfg: dict[str, dict[str, float]] = {}
        failed: dict[str, int] = {}
        for r in mine:
            if r["passed"] and r["us"]:
                per_cfg.setdefault(r["cfg"], {})[r["shape"]] = r["us"]
            else:
                failed[r["cfg"]] = failed.get(r["cfg"], 0) + 1
        complete = {c: geomean(list(t.values())) for c, t in per_cfg.items() if len(t) == len(shapes)}
        best_per_shape = {}
        for s in shapes:
            times = [t[s] for t in per_cfg.values() if s in t]
            if times:
                best_per_shape[s] = min(times)
                if key[0] != "fast":
                    oracle[s] = min(oracle.get(s, math.inf), min(times))
        out[f"{key[0]}/{key[1]}"] = {
            "best_config": min(complete, key=complete.get) if complete else None,
            "best_config_geomean_us": round(min(complete.values()), 1) if complete else None,
            "per_shape_best_geomean_us": round(geomean(list(best_per_shape.values())), 1)
            if len(best_per_shape) == len(shapes)
            else None,
            "passing_shapes": len(best_per_shape),
            "failed_runs": failed,
        }
    if len(oracle) == len(shapes):
        out["best passing variant per shape"] = {"geomean_us": round(geomean(list(oracle.values())), 1)}
    return out


def main(argv: list[str] | None = None) -> int:
    from kernel_scientist.evaluator import load_task
    from kernel_scientist.evaluator.harness import import_reference

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--task", type=Path, default=ROOT / "evaluator" / "tasks" / "amd_fp8_mm")
    p.add_argument("--out", type=Path, default=Path("explore.json"))
    p.add_argument("--modes", default="precise,bf16,fp16,sub32,sub64,fast")
    p.add_argument("--layouts", default="kmajor,strided")
    p.add_argument("--configs", help="BMxBNxWARPSxSTAGES,... instead of the built-in list")
    p.add_argument("--deadline", type=float, default=300.0, help="stop starting new variants after this many s")
    p.add_argument("--smoke", action="store_true", help="check every variant on two small shapes, no timing")
    args = p.parse_args(argv)

    task = load_task(args.task)
    ref = import_reference(task.modules)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    shapes = task.benchmarks if not args.smoke else [s for s in task.tests if s.m * s.n * s.k <= 256 * 256 * 512][:2]
    inputs = {}
    for s in shapes:
        data = ref.generate_input(s.m, s.n, s.k, s.seed, device=device)
        expected = ref.ref_kernel(tuple(t.clone() for t in data)).float()
        inputs[s.label()] = (data, expected)
    started = time.monotonic()
    rows: list[dict] = []
    meta = {
        "gpu": torch.cuda.get_device_name(0) if device == "cuda" else "cpu",
        "torch": torch.__version__,
        "triton": triton.__version__,
        "date": time.strftime("%Y-%m-%d"),
        "method": "median of triton.testing.do_bench (256 MB clear between calls), one input set per shape",
    }
    configs = CONFIGS if not args.configs else parse_configs(args.configs)
    variants = [
        (mode, layout, cfg)
        for mode in args.modes.split(",")
        for layout in args.layouts.split(",")
        for cfg in (configs if not args.smoke else configs[:1])
    ]
    for mode, layout, cfg in variants:
        if time.monotonic() - started > args.deadline:
            print(
                f"deadline reached; {len(variants) - len({(r['mode'], r['layout'], r['cfg']) for r in rows})} "
                "variants not run",
                flush=True,
            )
            break
        fn = make_kernel(mode, layout, cfg)
        name = "x".join(map(str, cfg))
        for s in shapes:
            data, expected = inputs[s.label()]
            row = {
                "mode": mode,
                "layout": layout,
                "cfg": name,
                "shape": s.label(),
                "us": None,
                "passed": False,
                "mismatched": None,
                "error": None,
            }
            try:
                data[4].fill_(float("nan"))
                out = fn(data).float()
                bad = ~torch.isclose(out, expected, rtol=RTOL, atol=ATOL)
                row["mismatched"] = int(bad.sum())
                row["passed"] = row["mismatched"] == 0
                if not args.smoke:
                    row["us"] = round(1000 * triton.testing.do_bench(lambda: fn(data), warmup=5, rep=20), 2)  # noqa: B023
            except Exception as exc:  # out of shared memory, a compiler limit: record and go on
                row["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:160] if str(exc) else ''}"
                rows.append(row)
                break  # a config that cannot compile fails the same way on every shape
            rows.append(row)
        done = [r for r in rows if (r["mode"], r["layout"], r["cfg"]) == (mode, layout, name)]
        ok = [r for r in done if r["passed"] and r["us"]]
        gm = f"{geomean([r['us'] for r in ok]):.1f} us" if len(ok) == len(shapes) and not args.smoke else "-"
        print(
            f"{mode:>8} {layout:>8} {name:>12}: {sum(r['passed'] for r in done)}/{len(shapes)} passed, "
            f"geomean {gm}{'  ' + done[-1]['error'] if done and done[-1]['error'] else ''} "
            f"[{time.monotonic() - started:.0f} s]",
            flush=True,
        )
        args.out.write_text(json.dumps({"meta": meta, "rows": rows}, indent=0))
    summary = summarise(rows, [s.label() for s in shapes]) if not args.smoke else {}
    args.out.write_text(json.dumps({"meta": meta, "summary": summary, "rows": rows}, indent=0))
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
