"""Map the Hopper design space of the block-scaled fp8 GEMM in one GPU run: where the fp8-to-fp16
conversion happens (a pre-pass or in registers), tensor descriptors (TMA), a persistent tile
schedule, warp specialisation, and tile shapes, each checked and timed on the task's ranked shapes
under both protocols (``do_bench`` and the leaderboard's host clock around one synchronised call).

It answers "which structure is worth a technique" before campaigns spend evaluations; the numbers
it prints stay in its output (docs/h200.md quotes them), never in the catalogue.

    python scripts/explore_hopper.py --out explore.json [--deadline 420]
    TRITON_INTERPRET=1 python scripts/explore_hopper.py --smoke      # correctness only, CPU
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import torch
import triton
import triton.language as tl

from evaluator import geomean

ROOT = Path(__file__).resolve().parents[1]

RTOL, ATOL = 2e-2, 1e-3
CONFIGS = [(128, 128, 8, 3), (128, 128, 8, 4), (64, 128, 4, 4), (128, 64, 4, 4), (64, 64, 4, 4),
           (128, 256, 8, 3), (256, 128, 8, 3), (64, 256, 4, 4)]


@triton.jit
def _convert(a_ptr, b_ptr, a16_ptr, b16_ptr, NA, NB, BLOCK: tl.constexpr):
    """fp8 -> fp16, element for element, both operands in one launch (layout kept)."""
    pid = tl.program_id(0)
    blocks_a = tl.cdiv(NA, BLOCK)
    if pid < blocks_a:
        offs = pid * BLOCK + tl.arange(0, BLOCK)
        mask = offs < NA
        tl.store(a16_ptr + offs, tl.load(a_ptr + offs, mask=mask).to(tl.float16), mask=mask)
    else:
        offs = (pid - blocks_a) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < NB
        tl.store(b16_ptr + offs, tl.load(b_ptr + offs, mask=mask).to(tl.float16), mask=mask)


@triton.jit
def _tiles(a_desc, b_desc, c_desc, as_ptr, bs_ptr, c_ptr, M, N, K, NBLK_N,
           BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, GROUP_M: tl.constexpr, CONVERT: tl.constexpr,
           NUM_PROGS: tl.constexpr, WS: tl.constexpr, SUBK: tl.constexpr, TWO: tl.constexpr,
           TMA_C: tl.constexpr):
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_tiles = num_pid_m * num_pid_n
    STEP: tl.constexpr = 256 if TWO else 128
    for tile in tl.range(tl.program_id(0), num_tiles, NUM_PROGS, flatten=True, warp_specialize=WS):
        group = GROUP_M * num_pid_n
        first_m = (tile // group) * GROUP_M
        size_m = min(num_pid_m - first_m, GROUP_M)
        pid_m = first_m + (tile % group) % size_m
        pid_n = (tile % group) // size_m
        offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k0 in range(0, K, STEP):
            partial = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
            for kk in tl.static_range(0, 128, SUBK):
                a = a_desc.load([k0 + kk, pid_m * BLOCK_M])
                b = b_desc.load([k0 + kk, pid_n * BLOCK_N])
                if CONVERT:
                    a = a.to(tl.float16)
                    b = b.to(tl.float16)
                partial = tl.dot(a.T, b, partial)
            if TWO:
                partial2 = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
                for kk in tl.static_range(128, 256, SUBK):
                    a = a_desc.load([k0 + kk, pid_m * BLOCK_M])
                    b = b_desc.load([k0 + kk, pid_n * BLOCK_N])
                    if CONVERT:
                        a = a.to(tl.float16)
                        b = b.to(tl.float16)
                    partial2 = tl.dot(a.T, b, partial2)
            kb = k0 // 128
            a_s = tl.load(as_ptr + kb * M + offs_m)
            b_s = tl.load(bs_ptr + kb * NBLK_N + offs_n // 128, mask=offs_n < N, other=0.0)
            acc += partial * a_s[:, None] * b_s[None, :]
            if TWO:
                a_s2 = tl.load(as_ptr + (kb + 1) * M + offs_m)
                b_s2 = tl.load(bs_ptr + (kb + 1) * NBLK_N + offs_n // 128, mask=offs_n < N, other=0.0)
                acc += partial2 * a_s2[:, None] * b_s2[None, :]
        if TMA_C:
            c_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N], acc.to(tl.bfloat16))
        else:
            tl.store(c_ptr + offs_m[:, None] * N + offs_n[None, :], acc.to(tl.bfloat16),
                     mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


@triton.jit
def _gemm(a_ptr, b_ptr, as_ptr, bs_ptr, c_ptr, M, N, K, NBLK_N,
          BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, GROUP_M: tl.constexpr,
          CONVERT: tl.constexpr, NUM_PROGS: tl.constexpr, WS: tl.constexpr, SUBK: tl.constexpr,
          TWO: tl.constexpr, TMA_C: tl.constexpr):
    # a is [M, K] column-major, so a [K, M] row-major array for a descriptor; b likewise [K, N].
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[K, M], strides=[M, 1], block_shape=[SUBK, BLOCK_M])
    b_desc = tl.make_tensor_descriptor(b_ptr, shape=[K, N], strides=[N, 1], block_shape=[SUBK, BLOCK_N])
    c_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[N, 1], block_shape=[BLOCK_M, BLOCK_N])
    _tiles(a_desc, b_desc, c_desc, as_ptr, bs_ptr, c_ptr, M, N, K, NBLK_N, BLOCK_M, BLOCK_N, GROUP_M, CONVERT,
           NUM_PROGS, WS, SUBK, TWO, TMA_C)


@triton.jit
def _gemm_host(a_desc, b_desc, c_desc, as_ptr, bs_ptr, c_ptr, M, N, K, NBLK_N,
               BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, GROUP_M: tl.constexpr,
               CONVERT: tl.constexpr, NUM_PROGS: tl.constexpr, WS: tl.constexpr, SUBK: tl.constexpr,
               TWO: tl.constexpr, TMA_C: tl.constexpr):
    _tiles(a_desc, b_desc, c_desc, as_ptr, bs_ptr, c_ptr, M, N, K, NBLK_N, BLOCK_M, BLOCK_N, GROUP_M, CONVERT,
           NUM_PROGS, WS, SUBK, TWO, TMA_C)


@triton.jit
def _empty(x_ptr):
    pass


def _alloc(size: int, alignment: int, stream):
    return torch.empty(size, dtype=torch.int8, device="cuda")


def make(variant: str, cfg):
    """A callable for one design: ``variant`` is tokens joined by ``_``: ``pre`` (a conversion
    pre-pass) or ``inreg`` (fp8 tiles converted in registers), ``ws`` warp specialisation, ``k64``
    two 64-deep dots per scale block, ``two`` two scale blocks per loop step, ``stc`` c written with
    tl.store instead of a descriptor, ``hd`` descriptors built on the host."""
    bm, bn, warps, stages = cfg
    tokens = set(variant.split("_"))
    convert = "inreg" in tokens
    host_desc = "hd" in tokens
    consts = dict(BLOCK_M=bm, BLOCK_N=bn, GROUP_M=8, CONVERT=convert, WS="ws" in tokens,
                  SUBK=64 if "k64" in tokens else 128, TWO="two" in tokens, TMA_C="stc" not in tokens,
                  num_warps=warps, num_stages=stages)
    n_sms = torch.cuda.get_device_properties(0).multi_processor_count if torch.cuda.is_available() else 4
    scratch = {}

    def fn(data):
        a, b, a_s, b_s, c = data
        m, k = a.shape
        n = b.shape[0]
        if convert:
            a_in, b_in = a, b
        else:
            key = (m, n, k)
            if key not in scratch:
                scratch.clear()
                scratch[key] = (torch.empty_like(a, dtype=torch.float16), torch.empty_like(b, dtype=torch.float16))
            a_in, b_in = scratch[key]
            na, nb = a.numel(), b.numel()
            _convert[(triton.cdiv(na, 4096) + triton.cdiv(nb, 4096),)](a, b, a_in, b_in, na, nb, BLOCK=4096)
        progs = min(triton.cdiv(m, bm) * triton.cdiv(n, bn), n_sms)
        if host_desc:
            from triton.tools.tensor_descriptor import TensorDescriptor  # noqa: PLC0415

            sub = consts["SUBK"]
            ad = TensorDescriptor(a_in, [k, m], [m, 1], [sub, bm])
            bd = TensorDescriptor(b_in, [k, n], [n, 1], [sub, bn])
            cd = TensorDescriptor(c, [m, n], [n, 1], [bm, bn])
            _gemm_host[(progs,)](ad, bd, cd, a_s, b_s, c, m, n, k, b_s.shape[0], NUM_PROGS=progs, **consts)
        else:
            _gemm[(progs,)](a_in, b_in, a_s, b_s, c, m, n, k, b_s.shape[0], NUM_PROGS=progs, **consts)
        return c

    return fn


def leaderboard_us(fn, data, flush, calls: int = 30) -> float:
    """Mean of ``calls`` single calls, host clock between device-wide synchronizes, L2 flushed."""
    times = []
    for _ in range(calls):
        flush.zero_()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn(data)
        torch.cuda.synchronize()
        times.append((time.perf_counter() - t0) * 1e6)
    return sum(times) / len(times)


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--out", default="explore_hopper.json")
    p.add_argument("--deadline", type=float, default=420)
    p.add_argument("--smoke", action="store_true")
    p.add_argument("--variants", default="pre_ws,pre_ws_hd,pre_ws_stc,pre_ws_k64,pre_ws_k64_stc,pre_ws_two,inreg_ws_k64")
    args = p.parse_args()
    from evaluator import load_task
    from evaluator.harness import import_reference

    task = load_task(ROOT / "evaluator" / "tasks" / "amd_fp8_mm")
    ref = import_reference(task.modules)

    device = "cpu" if args.smoke else "cuda"
    if not args.smoke:
        triton.set_allocator(_alloc)
    shapes = [(b.m, b.n, b.k, b.seed) for b in task.benchmarks]
    if args.smoke:
        shapes = [(128, 192, 256, 1), (64, 128, 128, 2)]
    variants = args.variants.split(",")
    began = time.time()
    flush = None if args.smoke else torch.empty(int(128e6), dtype=torch.int8, device=device)
    inputs = {}
    for m, n, k, seed in shapes:
        data = ref.generate_input(m=m, n=n, k=k, seed=seed, device=device)
        want = ref.ref_kernel(tuple(t.clone() for t in data)).float()
        inputs[(m, n, k)] = (data, want)
    rows = []
    anchors = {}
    if not args.smoke:
        for (m, n, k), (data, _) in inputs.items():
            a16 = data[0].to(torch.float16).contiguous()
            b16 = data[1].to(torch.float16).contiguous()
            anchors[f"{m}x{n}x{k}"] = triton.testing.do_bench(lambda: a16 @ b16.T, warmup=10, rep=40) * 1e3  # noqa: B023
        print(f"anchor cuBLAS fp16 (no scales, K-contiguous) geomean {geomean(list(anchors.values())):.1f} us",
              flush=True)
    if not args.smoke:
        x = torch.empty(1, device=device)
        small = ref.generate_input(m=64, n=64, k=128, seed=1, device=device)
        probes = {"empty triton launch": lambda: _empty[(1,)](x), "torch zero_": lambda: x.zero_(),
                  "empty call": lambda: None}
        for name in ("pre_ws", "pre_ws_hd", "inreg_ws"):
            probes[f"{name} 64x64x128"] = (lambda f: (lambda: f(small)))(make(name, (64, 64, 4, 4)))
        for name, probe in probes.items():
            probe()
            anchors[f"host floor: {name}"] = leaderboard_us(lambda _: probe(), None, flush, calls=200)  # noqa: B023
            print(f"host floor: {name}: {anchors[f'host floor: {name}']:.1f} us", flush=True)
    for variant in variants:
        for cfg in CONFIGS[:2] if args.smoke else CONFIGS:
            if time.time() - began > args.deadline:
                print("deadline reached", flush=True)
                break
            fn = make(variant, cfg)
            per, lb, bad, err = {}, {}, 0, None
            for (m, n, k), (data, want) in inputs.items():
                label = f"{m}x{n}x{k}"
                try:
                    data[-1].fill_(float("nan"))
                    out = fn(data).float()
                except Exception as exc:  # noqa: BLE001 - a form that does not compile is a result
                    err = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}" if str(exc) else type(exc).__name__
                    break
                ok = bool(((out - want).abs() <= ATOL + RTOL * want.abs()).all())
                bad += not ok
                if not args.smoke:
                    per[label] = triton.testing.do_bench(lambda: fn(data), warmup=10, rep=40) * 1e3  # noqa: B023
                    lb[label] = leaderboard_us(fn, data, flush)
            row = {"variant": variant, "config": cfg, "failed_shapes": bad, "error": err, "do_bench": per,
                   "leaderboard": lb}
            if per and len(per) == len(inputs):
                row["geomean_do_bench"] = geomean(list(per.values()))
                row["geomean_leaderboard"] = geomean(list(lb.values()))
            rows.append(row)
            print(f"{variant:14s} {str(cfg):20s} fail={bad} err={err} "
                  f"do_bench={row.get('geomean_do_bench', math.nan):.1f} "
                  f"leaderboard={row.get('geomean_leaderboard', math.nan):.1f}", flush=True)
    Path(args.out).write_text(json.dumps({"anchors": anchors, "rows": rows,
                                          "versions": {"torch": torch.__version__, "triton": triton.__version__}},
                                         indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
