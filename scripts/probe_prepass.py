"""How close the fp8 -> fp16 pre-pass comes to the memory's speed of light, per ranked shape and per
launch form: block size, warps, and an evict-first hint on the fp8 loads (read once, never again;
the fp16 copies the GEMM reads next should stay in L2 instead).

On Hopper the pre-pass is a tenth of a call on the largest shape and up to a third on the long-K
shapes with few tiles (docs/h200.md, twenty-first session); this says how much of that is the
pass's own inefficiency rather than its bytes. Figures stay in its output, never in the catalogue.

    python scripts/probe_prepass.py --out probe-prepass.json
    TRITON_INTERPRET=1 python scripts/probe_prepass.py --smoke     # correctness only, CPU
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch
import triton
import triton.language as tl
from kernel_scientist.evaluator import geomean

ROOT = Path(__file__).resolve().parents[1]


@triton.jit
def _convert(a_ptr, b_ptr, a16_ptr, b16_ptr, NA, NB, BLOCK: tl.constexpr, EVICT: tl.constexpr):
    """Both operands element for element in one launch, a block per program (as the catalogue's
    pre-pass); EVICT marks the fp8 loads evict-first."""
    pid = tl.program_id(0)
    blocks_a = tl.cdiv(NA, BLOCK)
    if pid < blocks_a:
        src, dst, n, blk = a_ptr, a16_ptr, NA, pid
    else:
        src, dst, n, blk = b_ptr, b16_ptr, NB, pid - blocks_a
    offs = blk * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    if EVICT:
        x = tl.load(src + offs, mask=mask, eviction_policy="evict_first")
    else:
        x = tl.load(src + offs, mask=mask)
    tl.store(dst + offs, x.to(tl.float16), mask=mask)


def forms() -> list[tuple[int, int, bool]]:
    """(BLOCK, num_warps, EVICT) of every form timed; (4096, 4, False) is the catalogue's."""
    return [(b, w, e) for b in (2048, 4096, 8192, 16384) for w in (4, 8) for e in (False, True)]


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--out", default="probe-prepass.json")
    p.add_argument("--smoke", action="store_true")
    args = p.parse_args()
    from kernel_scientist.evaluator import load_task
    from kernel_scientist.evaluator.harness import import_reference

    task = load_task(ROOT / "evaluator" / "tasks" / "amd_fp8_mm")
    ref = import_reference(task.modules)
    device = "cpu" if args.smoke else "cuda"
    shapes = [(b.m, b.n, b.k, b.seed) for b in task.benchmarks]
    if args.smoke:
        shapes = [(128, 192, 256, 1)]
    if not args.smoke:
        props = torch.cuda.get_device_properties(0)
        print(f"{props.name}, torch {torch.__version__}, triton {triton.__version__}", flush=True)
    result: dict[str, dict[str, float]] = {}
    for m, n, k, seed in shapes:
        a8, b8 = ref.generate_input(m=m, n=n, k=k, seed=seed, device=device)[:2]
        if a8.dtype == torch.float8_e4m3fnuz and not torch.version.hip:
            a8, b8 = a8.view(torch.float8_e4m3fn), b8.view(torch.float8_e4m3fn)
        a16, b16 = torch.empty_like(a8, dtype=torch.float16), torch.empty_like(b8, dtype=torch.float16)
        label = f"{m}x{n}x{k}"
        result[label] = {}
        for block, warps, evict in forms()[:2] if args.smoke else forms():
            grid = (triton.cdiv(a8.numel(), block) + triton.cdiv(b8.numel(), block),)

            def run(block=block, warps=warps, evict=evict, grid=grid, ops=(a8, b8, a16, b16)):
                _convert[grid](*ops, ops[0].numel(), ops[1].numel(), BLOCK=block, EVICT=evict, num_warps=warps)

            run()
            ok = torch.equal(a16, a8.to(torch.float16)) and torch.equal(b16, b8.to(torch.float16))
            if not ok:
                print(f"{label} {block} {warps} {evict}: WRONG", flush=True)
                return 1
            if not args.smoke:
                result[label][f"{block}/{warps}/{'evict' if evict else 'plain'}"] = (
                    triton.testing.do_bench(run, warmup=10, rep=40) * 1e3
                )
        if not args.smoke:
            row = result[label]
            best = min(row, key=row.get)
            gbytes = 3 * (a8.numel() + b8.numel()) / 1e9
            print(
                f"{label:>16}: catalogue's {row['4096/4/plain']:6.1f} us ({gbytes / row['4096/4/plain'] * 1e6:5.0f} GB/s),"
                f" best {best} {row[best]:6.1f} us ({gbytes / row[best] * 1e6:5.0f} GB/s)",
                flush=True,
            )
    if not args.smoke:
        keys = list(next(iter(result.values())))
        for key in keys:
            print(f"geomean {key:>18}: {geomean([r[key] for r in result.values()]):6.2f} us", flush=True)
        print(f"best form per shape: geomean {geomean([min(r.values()) for r in result.values()]):6.2f} us", flush=True)
    Path(args.out).write_text(
        json.dumps({"versions": {"torch": torch.__version__, "triton": triton.__version__}, "us": result}, indent=1)
    )
    print("ok" if args.smoke else "done", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
