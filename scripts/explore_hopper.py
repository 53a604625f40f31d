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
import traceback
from pathlib import Path

import torch
import triton
import triton.language as tl
from _gemm_forms import ATOL, RTOL, convert, grouped_tile, parse_configs, to_fp16_block
from kernel_scientist.evaluator import geomean

ROOT = Path(__file__).resolve().parents[1]

# (BLOCK_M, BLOCK_N, num_warps, num_stages)
CONFIGS = parse_configs("128x128x8x3,128x128x8x4,64x128x4x4,128x64x4x4,64x64x4x4,128x256x8x3,256x128x8x3,64x256x4x4")


@triton.jit
def _scales(as_ptr, bs_ptr, kb, M, N, NBLK_N, offs_m, offs_n, other: tl.constexpr = 0.0):
    """The a and b scales of scale block kb for a tile's rows and columns."""
    a_s = tl.load(as_ptr + kb * M + offs_m)
    b_s = tl.load(bs_ptr + kb * NBLK_N + offs_n // 128, mask=offs_n < N, other=other)
    return a_s, b_s


@triton.jit
def _row_scale(as_ptr, bs_ptr, kb, M, NBLK_N, offs_m, n0):
    """Token ``fma``: a tile no wider than b's 128-column scale block has one b scale per K block,
    so the two scales fold into one per-row vector and the scaled add is one FMA per element."""
    a_s = tl.load(as_ptr + kb * M + offs_m, mask=offs_m < M, other=1.0)
    return a_s * tl.load(bs_ptr + kb * NBLK_N + n0 // 128)


@triton.jit
def _row_scale_tma(as_desc, bs_ptr, kb, NBLK_N, m0, n0, BLOCK_M: tl.constexpr):
    """Token ``tsc``: ``_row_scale`` with the a scales copied by the tensor-memory engine (a [1,
    BLOCK_M] box of the [K/128, M] scale array), so they travel through the loop's asynchronous
    pipeline like the operand tiles instead of an ordinary global load that the warps wait on (the
    top stall reason in an H100 profile of campaign U's best: docs/h200.md, twenty-first session).
    Rows past M read as 0 (their results are dropped)."""
    a_s = tl.reshape(as_desc.load([kb, m0]), (BLOCK_M,))
    return a_s * tl.load(bs_ptr + kb * NBLK_N + n0 // 128)


@triton.jit
def _block(a_desc, b_desc, k0, m0, n0, BLOCK_M, BLOCK_N, SUBK, CONVERT, LO):
    """One 128-deep scale block's product (from k0 + LO) in SUBK-deep dots; CONVERT: fp8 tiles to fp16 first."""
    partial = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for kk in tl.static_range(LO, LO + 128, SUBK):
        a = a_desc.load([k0 + kk, m0])
        b = b_desc.load([k0 + kk, n0])
        if CONVERT:
            a = a.to(tl.float16)
            b = b.to(tl.float16)
        partial = tl.dot(a.T, b, partial)
    return partial


@triton.jit
def _grid_barrier(bar_ptr, NUM_PROGS: tl.constexpr):
    """All NUM_PROGS (co-resident, persistent) programs wait here for each other. bar_ptr holds
    [arrivals, generation]: the last to arrive resets the count and bumps the generation, which
    the others spin on, so the barrier is reusable call after call with no host-side reset."""
    gen = tl.atomic_add(bar_ptr + 1, 0, sem="acquire")
    arrived = tl.atomic_add(bar_ptr, 1, sem="acq_rel")
    if arrived == NUM_PROGS - 1:
        tl.atomic_xchg(bar_ptr, 0, sem="relaxed")
        tl.atomic_add(bar_ptr + 1, 1, sem="release")
    else:
        while tl.atomic_add(bar_ptr + 1, 0, sem="acquire") == gen:
            pass


@triton.jit
def _gemm(
    a_ptr,
    b_ptr,
    as_ptr,
    bs_ptr,
    c_ptr,
    M,
    N,
    K,
    NBLK_N,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    GROUP_M: tl.constexpr,
    CONVERT: tl.constexpr,
    NUM_PROGS: tl.constexpr,
    WS: tl.constexpr,
    SUBK: tl.constexpr,
    TWO: tl.constexpr,
    TMA_C: tl.constexpr,
    LAG: tl.constexpr,
    RS: tl.constexpr = False,
    FMA: tl.constexpr = False,
    FLAT: tl.constexpr = True,
    PF: tl.constexpr = False,
    TSC: tl.constexpr = False,
    c_desc=None,
    a8_ptr=None,
    b8_ptr=None,
    bar_ptr=None,
    CBLOCK: tl.constexpr = 4096,
):
    """The persistent tile loop over a and b (fp16, or fp8 with CONVERT) through TMA descriptors, built
    here over a_ptr, b_ptr and c_ptr; with ``c_desc`` (token ``hd``) a_ptr, b_ptr and c_desc are
    descriptors built on the host. With ``a8_ptr`` and ``b8_ptr`` (token ``one``) the pre-pass runs in
    the same launch: every program converts its share of them into a_ptr and b_ptr (CBLOCK elements
    a block), a grid-wide barrier on ``bar_ptr``, then the tile loop reads the fp16 copies."""
    if a8_ptr is not None:
        pid = tl.program_id(0)
        na = M * K
        nb = N * K
        blocks_a = tl.cdiv(na, CBLOCK)
        total = blocks_a + tl.cdiv(nb, CBLOCK)
        for blk in range(pid, total, NUM_PROGS):
            to_fp16_block(blk, blocks_a, a8_ptr, b8_ptr, a_ptr, b_ptr, na, nb, CBLOCK)
        tl.debug_barrier()
        _grid_barrier(bar_ptr, NUM_PROGS)
        # The copies were written through ordinary stores; the tensor-memory engine reads through the
        # async proxy, which needs this fence to see them.
        tl.inline_asm_elementwise(
            "fence.proxy.async.global; mov.u32 $0, 0;", "=r", [], dtype=tl.int32, is_pure=False, pack=1
        )
    if c_desc is None:
        # a is [M, K] column-major, so a [K, M] row-major array for a descriptor; b likewise [K, N].
        a_desc = tl.make_tensor_descriptor(a_ptr, shape=[K, M], strides=[M, 1], block_shape=[SUBK, BLOCK_M])
        b_desc = tl.make_tensor_descriptor(b_ptr, shape=[K, N], strides=[N, 1], block_shape=[SUBK, BLOCK_N])
        c_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[N, 1], block_shape=[BLOCK_M, BLOCK_N])
    else:
        a_desc = a_ptr
        b_desc = b_ptr
    if TSC:
        as_desc = tl.make_tensor_descriptor(
            as_ptr, shape=[tl.cdiv(K, 128), M], strides=[M, 1], block_shape=[1, BLOCK_M]
        )
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_tiles = num_pid_m * num_pid_n
    STEP: tl.constexpr = 256 if TWO else 128
    for tile in tl.range(tl.program_id(0), num_tiles, NUM_PROGS, flatten=FLAT, warp_specialize=WS):
        pid_m, pid_n = grouped_tile(tile, num_pid_m, num_pid_n, GROUP_M)
        offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        if RS and FMA:
            # The rescaled accumulator with the folded per-row scale (tokens rs + fma).
            prev = tl.full((BLOCK_M,), 1.0, tl.float32)
            for k0 in range(0, K, 128):
                s = _row_scale(as_ptr, bs_ptr, k0 // 128, M, NBLK_N, offs_m, pid_n * BLOCK_N)
                acc = acc * (prev / s)[:, None]
                prev = s
                a = a_desc.load([k0, pid_m * BLOCK_M])
                b = b_desc.load([k0, pid_n * BLOCK_N])
                acc = tl.dot(a.T, b, acc)
            acc = acc * prev[:, None]
        elif RS:
            # One live fp32 tile: the accumulator is kept in units of the current block's scale,
            # acc_kb = acc_(kb-1) * s_(kb-1) / s_kb + dot_kb, so the dot accumulates in place and
            # c = s_last * acc. Half the registers of the scaled add: room for larger tiles or a
            # second program per SM whose dots fill this one's rescaling.
            prev_as = tl.full((BLOCK_M,), 1.0, tl.float32)
            prev_bs = tl.full((BLOCK_N,), 1.0, tl.float32)
            for k0 in range(0, K, SUBK):
                if k0 % 128 == 0:
                    a_s, b_s = _scales(as_ptr, bs_ptr, k0 // 128, M, N, NBLK_N, offs_m, offs_n, 1.0)
                    acc = acc * ((prev_as / a_s)[:, None] * (prev_bs / b_s)[None, :])
                    prev_as, prev_bs = a_s, b_s
                a = a_desc.load([k0, pid_m * BLOCK_M])
                b = b_desc.load([k0, pid_n * BLOCK_N])
                acc = tl.dot(a.T, b, acc)
            acc = acc * (prev_as[:, None] * prev_bs[None, :])
        elif LAG:
            # The scaled add of block kb-1 is written after the dot of block kb, so the
            # tensor cores can run that dot while the CUDA cores scale the previous one.
            prev = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
            prev_as = tl.zeros((BLOCK_M,), dtype=tl.float32)
            prev_bs = tl.zeros((BLOCK_N,), dtype=tl.float32)
            for k0 in range(0, K, 128):
                a = a_desc.load([k0, pid_m * BLOCK_M])
                b = b_desc.load([k0, pid_n * BLOCK_N])
                partial = tl.dot(a.T, b)
                acc += prev * prev_as[:, None] * prev_bs[None, :]
                a_s, b_s = _scales(as_ptr, bs_ptr, k0 // 128, M, N, NBLK_N, offs_m, offs_n)
                prev, prev_as, prev_bs = partial, a_s, b_s
            acc += prev * prev_as[:, None] * prev_bs[None, :]
        else:
            # Token pf: the folded row scale of the next block is loaded one step ahead, so its
            # global load is in flight during this block's dot (an H100 profile of campaign U's best
            # showed its warps stalled on these loads: docs/h200.md, twenty-first session).
            if PF:
                s_next = _row_scale(as_ptr, bs_ptr, 0, M, NBLK_N, offs_m, pid_n * BLOCK_N)
            for k0 in range(0, K, STEP):
                m0, n0 = pid_m * BLOCK_M, pid_n * BLOCK_N
                if PF:
                    s = s_next
                    s_next = _row_scale(as_ptr, bs_ptr, (k0 // 128 + 1) % tl.cdiv(K, 128), M, NBLK_N, offs_m, n0)
                partial = _block(a_desc, b_desc, k0, m0, n0, BLOCK_M, BLOCK_N, SUBK, CONVERT, 0)
                if TWO:
                    partial2 = _block(a_desc, b_desc, k0, m0, n0, BLOCK_M, BLOCK_N, SUBK, CONVERT, 128)
                kb = k0 // 128
                if FMA and PF:
                    acc += partial * s[:, None]
                elif FMA and TSC:
                    acc += partial * _row_scale_tma(as_desc, bs_ptr, kb, NBLK_N, m0, n0, BLOCK_M)[:, None]
                elif FMA:
                    acc += partial * _row_scale(as_ptr, bs_ptr, kb, M, NBLK_N, offs_m, n0)[:, None]
                else:
                    a_s, b_s = _scales(as_ptr, bs_ptr, kb, M, N, NBLK_N, offs_m, offs_n)
                    acc += partial * a_s[:, None] * b_s[None, :]
                if TWO:
                    a_s2, b_s2 = _scales(as_ptr, bs_ptr, kb + 1, M, N, NBLK_N, offs_m, offs_n)
                    acc += partial2 * a_s2[:, None] * b_s2[None, :]
        if TMA_C:
            c_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N], acc.to(tl.bfloat16))
        else:
            tl.store(
                c_ptr + offs_m[:, None] * N + offs_n[None, :],
                acc.to(tl.bfloat16),
                mask=(offs_m[:, None] < M) & (offs_n[None, :] < N),
            )


@triton.jit
def _gemm_sk(
    a_ptr,
    b_ptr,
    as_ptr,
    bs_ptr,
    c_ptr,
    ws_ptr,
    cnt_ptr,
    M,
    N,
    K,
    NBLK_N,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    GROUP_M: tl.constexpr,
    SPLIT: tl.constexpr,
    FMA: tl.constexpr = False,
):
    """Split-K over the pre-converted fp16 operands, one launch: each of SPLIT programs per tile sums
    a slice of the K blocks; all but the last to finish leave an fp32 partial in the workspace, and
    the last one (found with a per-tile arrival counter) adds them and writes c, then resets the
    counter for the next call."""
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[K, M], strides=[M, 1], block_shape=[128, BLOCK_M])
    b_desc = tl.make_tensor_descriptor(b_ptr, shape=[K, N], strides=[N, 1], block_shape=[128, BLOCK_N])
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_tiles = num_pid_m * num_pid_n
    pid = tl.program_id(0)
    tile = pid % num_tiles
    split = pid // num_tiles
    pid_m, pid_n = grouped_tile(tile, num_pid_m, num_pid_n, GROUP_M)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    k_blocks = tl.cdiv(K, 128)
    per = tl.cdiv(k_blocks, SPLIT)
    kb_lo = split * per
    kb_hi = tl.minimum(k_blocks, kb_lo + per)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for kb in range(kb_lo, kb_hi):
        a = a_desc.load([kb * 128, pid_m * BLOCK_M])
        b = b_desc.load([kb * 128, pid_n * BLOCK_N])
        partial = tl.dot(a.T, b)
        if FMA:
            acc += partial * _row_scale(as_ptr, bs_ptr, kb, M, NBLK_N, offs_m, pid_n * BLOCK_N)[:, None]
        else:
            a_s, b_s = _scales(as_ptr, bs_ptr, kb, M, N, NBLK_N, offs_m, offs_n)
            acc += partial * a_s[:, None] * b_s[None, :]
    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    tile_ws = ws_ptr + tile * BLOCK_M * BLOCK_N
    local = tl.arange(0, BLOCK_M)[:, None] * BLOCK_N + tl.arange(0, BLOCK_N)[None, :]
    if SPLIT > 1:
        tl.store(tile_ws + split * num_tiles * BLOCK_M * BLOCK_N + local, acc)
        tl.debug_barrier()
        arrived = tl.atomic_add(cnt_ptr + tile, 1, sem="acq_rel")
        if arrived == SPLIT - 1:
            for other in tl.static_range(SPLIT):
                if other != split:
                    acc += tl.load(tile_ws + other * num_tiles * BLOCK_M * BLOCK_N + local, cache_modifier=".cg")
            tl.store(c_ptr + offs_m[:, None] * N + offs_n[None, :], acc.to(tl.bfloat16), mask=mask)
            tl.atomic_xchg(cnt_ptr + tile, 0)
    else:
        tl.store(c_ptr + offs_m[:, None] * N + offs_n[None, :], acc.to(tl.bfloat16), mask=mask)


@triton.jit
def _tile_part(
    a_desc,
    b_desc,
    as_ptr,
    bs_ptr,
    M,
    NBLK_N,
    pid_m,
    pid_n,
    kb_lo,
    kb_hi,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    as_desc=None,
):
    """Scale blocks kb_lo..kb_hi-1 of one output tile, the scales folded per row (token ``fma``)."""
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for kb in range(kb_lo, kb_hi):
        a = a_desc.load([kb * 128, pid_m * BLOCK_M])
        b = b_desc.load([kb * 128, pid_n * BLOCK_N])
        partial = tl.dot(a.T, b)
        if as_desc is not None:  # token tsc
            acc += (
                partial
                * _row_scale_tma(as_desc, bs_ptr, kb, NBLK_N, pid_m * BLOCK_M, pid_n * BLOCK_N, BLOCK_M)[:, None]
            )
        else:
            acc += partial * _row_scale(as_ptr, bs_ptr, kb, M, NBLK_N, offs_m, pid_n * BLOCK_N)[:, None]
    return acc


@triton.jit
def _gemm_stk(
    a_ptr,
    b_ptr,
    as_ptr,
    bs_ptr,
    c_ptr,
    ws_ptr,
    flag_ptr,
    M,
    N,
    K,
    NBLK_N,
    DP_TILES,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    GROUP_M: tl.constexpr,
    NUM_PROGS: tl.constexpr,
    TSC: tl.constexpr = False,
):
    """Stream-K over the fp16 copies (token ``stk``): the first DP_TILES tiles go whole to the
    persistent programs in turn; the scale blocks of the other tiles are shared out evenly, one
    contiguous range per program, so every program does the same work however the tiles fall on
    the SMs. Each program walks its range from the end, so the part of a tile it does first is
    that tile's beginning (left in its workspace slot, flag set) and the part it does last is a
    tile's end, whose owner adds the lower programs' slots (long finished) and writes c. Owners
    wait only on lower program ids, so an in-order interpreter runs it too."""
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[K, M], strides=[M, 1], block_shape=[128, BLOCK_M])
    b_desc = tl.make_tensor_descriptor(b_ptr, shape=[K, N], strides=[N, 1], block_shape=[128, BLOCK_N])
    c_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[N, 1], block_shape=[BLOCK_M, BLOCK_N])
    as_desc = None
    if TSC:
        as_desc = tl.make_tensor_descriptor(
            as_ptr, shape=[tl.cdiv(K, 128), M], strides=[M, 1], block_shape=[1, BLOCK_M]
        )
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_tiles = num_pid_m * num_pid_n
    kblocks = tl.cdiv(K, 128)
    pid = tl.program_id(0)
    for tile in range(pid, DP_TILES, NUM_PROGS):
        pid_m, pid_n = grouped_tile(tile, num_pid_m, num_pid_n, GROUP_M)
        acc = _tile_part(a_desc, b_desc, as_ptr, bs_ptr, M, NBLK_N, pid_m, pid_n, 0, kblocks, BLOCK_M, BLOCK_N, as_desc)
        c_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N], acc.to(tl.bfloat16))
    sk_iters = (num_tiles - DP_TILES) * kblocks
    lo = pid * sk_iters // NUM_PROGS
    end = (pid + 1) * sk_iters // NUM_PROGS
    local = tl.arange(0, BLOCK_M)[:, None] * BLOCK_N + tl.arange(0, BLOCK_N)[None, :]
    while end > lo:
        t = (end - 1) // kblocks
        tile_start = t * kblocks
        seg_lo = tl.maximum(lo, tile_start)
        pid_m, pid_n = grouped_tile(DP_TILES + t, num_pid_m, num_pid_n, GROUP_M)
        k_lo = seg_lo - tile_start
        k_hi = end - tile_start
        acc = _tile_part(a_desc, b_desc, as_ptr, bs_ptr, M, NBLK_N, pid_m, pid_n, k_lo, k_hi, BLOCK_M, BLOCK_N, as_desc)
        if k_hi < kblocks:
            # A tile's beginning (or middle): this program's first segment, its one workspace slot.
            tl.store(ws_ptr + pid * BLOCK_M * BLOCK_N + local, acc)
            tl.debug_barrier()
            tl.atomic_xchg(flag_ptr + pid, 1, sem="release")
        else:
            q = pid - 1
            covered = seg_lo
            while covered > tile_start:
                q_lo = q * sk_iters // NUM_PROGS
                if q_lo < covered:  # an empty range (fewer K blocks than programs) left nothing
                    while tl.atomic_add(flag_ptr + q, 0, sem="acquire") == 0:
                        pass
                    acc += tl.load(ws_ptr + q * BLOCK_M * BLOCK_N + local, cache_modifier=".cg")
                    tl.atomic_xchg(flag_ptr + q, 0, sem="relaxed")
                covered = q_lo
                q -= 1
            c_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N], acc.to(tl.bfloat16))
        end = seg_lo


def stream_k_dp_tiles(tiles: int, n_sms: int) -> int:
    """Tiles done whole: every full wave but the last; the last full wave and the partial one are
    shared out by scale blocks (so each program's share is at least about one tile)."""
    waves, tail = divmod(tiles, n_sms)
    if tail == 0:
        return tiles
    return max(0, waves - 1) * n_sms


def pick_split(tiles: int, k_blocks: int, n_sms: int, most: int = 8) -> int:
    """The split that minimises (waves of programs) x (K blocks per program), plus a small charge
    per extra split for the partials' round trip; 1 when the tiles already fill the GPU."""

    def cost(s):
        return -(-tiles * s // n_sms) * -(-k_blocks // s) + (s - 1) * 2

    return min(range(1, max(1, min(most, k_blocks // 2)) + 1), key=cost)


@triton.jit
def _empty(x_ptr):
    pass


_SCRATCH: dict[int, torch.Tensor] = {}


def _alloc(size: int, alignment: int, stream):
    """Triton's scratch for in-kernel tensor descriptors, one buffer per size: launches on one
    stream run in order, so reusing it is safe, and no call pays an allocation."""
    buf = _SCRATCH.get(size)
    if buf is None:
        buf = _SCRATCH[size] = torch.empty(size, dtype=torch.int8, device="cuda")
    return buf


class _Lean:
    """One launch site: the JIT path on the first call, then the compiled kernel's C launcher
    with nothing in between (no binding, no specialisation, no cache lookup, the stream read once)."""

    def __init__(self, kernel):
        self.kernel = kernel
        self.compiled = {}

    def __call__(self, grid, args, consts, **options):
        key = (grid, tuple(consts.items()))
        hit = self.compiled.get(key)
        if hit is None:
            ck = self.kernel[grid](*args, **consts, **options)
            if not hasattr(ck, "run"):  # Triton's interpreter: no compiled kernel, the JIT path always
                return
            stream = torch.cuda.current_stream().cuda_stream
            tail = tuple(consts.get(p.name, p.default) for p in self.kernel.params[len(args) :])
            grid3 = tuple(grid) + (1,) * (3 - len(grid))
            self.compiled[key] = (ck, stream, tail, grid3)
            return
        ck, stream, tail, (g0, g1, g2) = hit
        ck.run(g0, g1, g2, stream, ck.function, ck.packed_metadata, None, None, None, *args, *tail)


def make(variant: str, cfg):
    """A callable for one design: ``variant`` is tokens joined by ``_``: ``pre`` (a conversion
    pre-pass) or ``inreg`` (fp8 tiles converted in registers), ``ws`` warp specialisation, ``k64``
    two 64-deep dots per scale block, ``two`` two scale blocks per loop step, ``stc`` c written with
    tl.store instead of a descriptor, ``hd`` descriptors built on the host, ``lag`` the scaled add of
    each block one step behind its dot (so the two can overlap), ``sk`` split-K in one launch with
    the split picked per shape (``pick_split``; not persistent), ``x2``/``x3`` two or three persistent
    programs per SM, ``one`` the pre-pass inside the GEMM's launch behind a grid-wide barrier,
    ``ha``/``hb`` only b (or only a) converted by the pre-pass, the other operand's fp8 tiles
    converted in the kernel (half the pre-pass's traffic where that operand is the larger),
    ``nofl`` the tile loop not flattened with the K loop, ``pf`` (with ``fma``) each block's row scale
    loaded one step ahead, ``tsc`` (with ``fma`` or ``stk``) the a scales copied by a tensor descriptor; ``glu`` the single-partition Gluon kernel,
    ``glw`` the warp-specialised one (``ns`` without its turn barriers, ``r224`` its consumers'
    registers)."""
    bm, bn, warps, stages = cfg
    tokens = set(variant.split("_"))
    if "fma" in tokens and (bn > 128 or "two" in tokens or "lag" in tokens):
        raise ValueError("fma needs BLOCK_N <= 128 (one b scale per tile and K block), without two or lag")
    if "pf" in tokens and ("fma" not in tokens or tokens & {"two", "rs", "lag", "stk", "sk", "lean"}):
        raise ValueError("pf: the folded scale (fma) in the plain persistent loop only")
    if "tsc" in tokens and (
        "fma" not in tokens and "stk" not in tokens or tokens & {"two", "rs", "lag", "pf", "sk", "lean"}
    ):
        raise ValueError("tsc: the folded scale (fma) in the persistent loop or stk only")
    if "stk" in tokens and (bn > 128 or tokens & {"ws", "sk", "ha", "hb", "one", "inreg", "lean"}):
        raise ValueError("stk: the plain persistent loop with the folded scale (BLOCK_N <= 128) only")
    if ("ha" in tokens or "hb" in tokens) and tokens & {"sk", "one", "inreg", "lean"}:
        raise ValueError("ha / hb convert one operand in the persistent tile loop only")
    if "glw" in tokens:  # the warp-specialised Gluon kernel (scripts/gluon_ws_gemm.py); Hopper only
        from gluon_ws_gemm import make_ws_gluon  # noqa: PLC0415

        regs = next((int(t[1:]) for t in tokens if t[:1] == "r" and t[1:].isdigit()), 232)
        return make_ws_gluon(cfg, convert, stagger="ns" not in tokens, regs=regs)
    if "glu" in tokens:  # the Gluon kernel (scripts/gluon_gemm.py); Hopper only
        from gluon_gemm import make_gluon  # noqa: PLC0415

        return make_gluon(cfg, convert, outstanding=0 if "w0" in tokens else 1, per_sm=2 if "x2" in tokens else 1)
    inreg = "inreg" in tokens
    # ha / hb: one operand stays fp8 and is converted in the kernel (CONVERT leaves fp16 tiles as they are).
    half = "a" if "ha" in tokens else "b" if "hb" in tokens else None
    host_desc = "hd" in tokens
    consts = dict(
        BLOCK_M=bm,
        BLOCK_N=bn,
        GROUP_M=8,
        CONVERT=inreg or half is not None,
        WS="ws" in tokens,
        SUBK=64 if "k64" in tokens else 128,
        TWO="two" in tokens,
        TMA_C="stc" not in tokens,
        LAG="lag" in tokens,
        RS="rs" in tokens,
        FMA="fma" in tokens,
        FLAT="nofl" not in tokens,
        PF="pf" in tokens,
        TSC="tsc" in tokens,
        num_warps=warps,
        num_stages=stages,
    )
    n_sms = torch.cuda.get_device_properties(0).multi_processor_count if torch.cuda.is_available() else 4
    scratch = {}
    if "lean" in tokens:
        return _make_lean(consts, n_sms)

    def fn(data):
        a, b, a_s, b_s, c = data
        m, k = a.shape
        n = b.shape[0]
        if inreg:
            a_in, b_in = a, b
        else:
            key = (m, n, k)
            if key not in scratch:
                scratch[key] = (torch.empty_like(a, dtype=torch.float16), torch.empty_like(b, dtype=torch.float16))
            a_in, b_in = scratch[key]
            na, nb = a.numel(), b.numel()
            if "one" in tokens:
                if "bar" not in scratch:
                    scratch["bar"] = torch.zeros(2, dtype=torch.int32, device=a.device)
                progs = min(triton.cdiv(m, bm) * triton.cdiv(n, bn), n_sms)
                one = dict(a8_ptr=a, b8_ptr=b, bar_ptr=scratch["bar"], CBLOCK=4096)
                _gemm[(progs,)](a_in, b_in, a_s, b_s, c, m, n, k, b_s.shape[0], NUM_PROGS=progs, **one, **consts)
                return c
            if half == "a":  # only b converted; the kernel reads a's fp8 tiles
                convert[(triton.cdiv(nb, 4096),)](a, b, b_in, b_in, 0, nb, BLOCK=4096)
                a_in = a
            elif half == "b":
                convert[(triton.cdiv(na, 4096),)](a, b, a_in, a_in, na, 0, BLOCK=4096)
                b_in = b
            else:
                convert[(triton.cdiv(na, 4096) + triton.cdiv(nb, 4096),)](a, b, a_in, b_in, na, nb, BLOCK=4096)
        # x2 / x3: two or three resident programs per SM, whose dots and scaled adds interleave.
        per_sm = 3 if "x3" in tokens else 2 if "x2" in tokens else 1
        progs = min(triton.cdiv(m, bm) * triton.cdiv(n, bn), per_sm * n_sms)
        if "stk" in tokens:
            tiles = triton.cdiv(m, bm) * triton.cdiv(n, bn)
            wkey = ("stk", bm, bn)
            if wkey not in scratch:
                scratch[wkey] = (
                    torch.empty(n_sms * bm * bn, dtype=torch.float32, device=a.device),
                    torch.zeros(n_sms, dtype=torch.int32, device=a.device),
                )
            ws, flags = scratch[wkey]
            _gemm_stk[(n_sms,)](
                a_in,
                b_in,
                a_s,
                b_s,
                c,
                ws,
                flags,
                m,
                n,
                k,
                b_s.shape[0],
                stream_k_dp_tiles(tiles, n_sms),
                BLOCK_M=bm,
                BLOCK_N=bn,
                GROUP_M=8,
                NUM_PROGS=n_sms,
                TSC="tsc" in tokens,
                num_warps=warps,
                num_stages=stages,
            )
            return c
        if "sk" in tokens:
            tiles = triton.cdiv(m, bm) * triton.cdiv(n, bn)
            split = pick_split(tiles, triton.cdiv(k, 128), n_sms)
            wkey = ("ws", m, n, k)
            if wkey not in scratch:
                scratch[wkey] = (
                    torch.empty(split * tiles * bm * bn, dtype=torch.float32, device=a.device),
                    torch.zeros(tiles, dtype=torch.int32, device=a.device),
                )
            ws, cnt = scratch[wkey]
            _gemm_sk[(tiles * split,)](
                a_in,
                b_in,
                a_s,
                b_s,
                c,
                ws,
                cnt,
                m,
                n,
                k,
                b_s.shape[0],
                BLOCK_M=bm,
                BLOCK_N=bn,
                GROUP_M=8,
                SPLIT=split,
                FMA="fma" in tokens,
                num_warps=warps,
                num_stages=stages,
            )
            return c
        if host_desc:
            from triton.tools.tensor_descriptor import TensorDescriptor  # noqa: PLC0415

            sub = consts["SUBK"]
            ad = TensorDescriptor(a_in, [k, m], [m, 1], [sub, bm])
            bd = TensorDescriptor(b_in, [k, n], [n, 1], [sub, bn])
            cd = TensorDescriptor(c, [m, n], [n, 1], [bm, bn])
            _gemm[(progs,)](ad, bd, a_s, b_s, c, m, n, k, b_s.shape[0], NUM_PROGS=progs, c_desc=cd, **consts)
        else:
            _gemm[(progs,)](a_in, b_in, a_s, b_s, c, m, n, k, b_s.shape[0], NUM_PROGS=progs, **consts)
        return c

    return fn


def _make_lean(consts, n_sms: int):
    """The pre-pass + persistent GEMM (``pre_*`` tokens) with the least host work per call: per
    shape, the fp16 buffers, the grids and the constants once; then two C launcher calls."""
    prepass, gemm = _Lean(convert), _Lean(_gemm)
    options = {k: consts[k] for k in ("num_warps", "num_stages")}
    kconsts = {k: v for k, v in consts.items() if k not in options}
    per_shape = {}

    def fn(data):
        a, b, a_s, b_s, c = data
        shape = per_shape.get((a.shape, b.shape))
        if shape is None:
            m, k = a.shape
            n = b.shape[0]
            a16, b16 = torch.empty_like(a, dtype=torch.float16), torch.empty_like(b, dtype=torch.float16)
            progs = min(triton.cdiv(m, consts["BLOCK_M"]) * triton.cdiv(n, consts["BLOCK_N"]), n_sms)
            cgrid = (triton.cdiv(a.numel(), 4096) + triton.cdiv(b.numel(), 4096),)
            shape = per_shape[(a.shape, b.shape)] = (
                a16,
                b16,
                cgrid,
                (a.numel(), b.numel()),
                (progs,),
                (m, n, k, b_s.shape[0]),
                dict(kconsts, NUM_PROGS=progs),
            )
        a16, b16, cgrid, sizes, ggrid, dims, gconsts = shape
        prepass(cgrid, (a, b, a16, b16, *sizes), {"BLOCK": 4096})
        gemm(ggrid, (a16, b16, a_s, b_s, c, *dims), gconsts, **options)
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
    p.add_argument(
        "--variants", default="pre_ws,pre_ws_hd,pre_ws_stc,pre_ws_k64,pre_ws_k64_stc,pre_ws_two,inreg_ws_k64"
    )
    p.add_argument("--configs", default="", help="BMxBNxWARPSxSTAGES,... (default: the built-in list)")
    p.add_argument("--only", default="", help="MxNxK,... : time these ranked shapes only")
    p.add_argument("--graph", action="store_true", help="also the GPU time alone (do_bench_cudagraph)")
    p.add_argument("--no-anchors", action="store_true", help="skip cuBLAS, the pre-pass and the host floors")
    args = p.parse_args()
    from kernel_scientist.evaluator import load_task
    from kernel_scientist.evaluator.harness import import_reference

    task = load_task(ROOT / "evaluator" / "tasks" / "amd_fp8_mm")
    ref = import_reference(task.modules)

    device = "cpu" if args.smoke else "cuda"
    if not args.smoke:
        triton.set_allocator(_alloc)
    shapes = [(b.m, b.n, b.k, b.seed) for b in task.benchmarks]
    if args.only:
        shapes = [s for s in shapes if f"{s[0]}x{s[1]}x{s[2]}" in args.only.split(",")]
    if args.smoke:
        shapes = [(128, 192, 256, 1), (64, 128, 128, 2), (64, 128, 1024, 3)]
    variants = args.variants.split(",")
    if args.smoke:  # the interpreter runs programs one after another: a grid barrier never opens
        variants = [v for v in variants if "one" not in v.split("_")]
    began = time.time()
    flush = None if args.smoke else torch.empty(int(128e6), dtype=torch.int8, device=device)
    inputs = {}
    for m, n, k, seed in shapes:
        data = ref.generate_input(m=m, n=n, k=k, seed=seed, device=device)
        want = ref.ref_kernel(tuple(t.clone() for t in data)).float()
        inputs[(m, n, k)] = (data, want)
    rows = []
    anchors = {}
    if not args.smoke and not args.no_anchors:
        for (m, n, k), (data, _) in inputs.items():
            a16 = data[0].to(torch.float16).contiguous()
            b16 = data[1].to(torch.float16).contiguous()
            anchors[f"{m}x{n}x{k}"] = triton.testing.do_bench(lambda: a16 @ b16.T, warmup=10, rep=40) * 1e3  # noqa: B023
        print(
            f"anchor cuBLAS fp16 (no scales, K-contiguous) geomean {geomean(list(anchors.values())):.1f} us", flush=True
        )
        prepass = {}
        for (m, n, k), (data, _) in inputs.items():
            a8, b8 = data[0], data[1]
            a16, b16 = torch.empty_like(a8, dtype=torch.float16), torch.empty_like(b8, dtype=torch.float16)
            grid = (triton.cdiv(a8.numel(), 4096) + triton.cdiv(b8.numel(), 4096),)
            prepass[f"{m}x{n}x{k}"] = (
                triton.testing.do_bench(
                    lambda: convert[grid](a8, b8, a16, b16, a8.numel(), b8.numel(), BLOCK=4096),  # noqa: B023
                    warmup=10,
                    rep=40,
                )
                * 1e3
            )
        anchors["prepass alone"] = prepass
        print("the fp16 pre-pass alone: " + ", ".join(f"{s} {us:.1f}" for s, us in prepass.items()), flush=True)
    if not args.smoke and not args.no_anchors:
        x = torch.empty(1, device=device)
        small = ref.generate_input(m=64, n=64, k=128, seed=1, device=device)
        probes = {
            "empty triton launch": lambda: _empty[(1,)](x),
            "torch zero_": lambda: x.zero_(),
            "empty call": lambda: None,
        }
        for name in ("pre_ws", "pre_ws_hd", "inreg_ws"):
            probes[f"{name} 64x64x128"] = (lambda f: lambda: f(small))(make(name, (64, 64, 4, 4)))
        for name, probe in probes.items():
            probe()
            anchors[f"host floor: {name}"] = leaderboard_us(lambda _: probe(), None, flush, calls=200)  # noqa: B023
            print(f"host floor: {name}: {anchors[f'host floor: {name}']:.1f} us", flush=True)
    for variant in variants:
        configs = parse_configs(args.configs) if args.configs else CONFIGS
        for cfg in configs[:2] if args.smoke else configs:
            if time.time() - began > args.deadline:
                print("deadline reached", flush=True)
                break
            try:
                fn = make(variant, cfg)
            except ValueError as exc:  # a token that this tile shape cannot take
                print(f"{variant:14s} {str(cfg):20s} skipped: {exc}", flush=True)
                continue
            per, lb, graph, bad, err = {}, {}, {}, 0, None
            for (m, n, k), (data, want) in inputs.items():
                label = f"{m}x{n}x{k}"
                try:
                    data[-1].fill_(float("nan"))
                    out = fn(data).float()
                except Exception as exc:  # noqa: BLE001 - a form that does not compile is a result
                    traceback.print_exc(limit=-3)
                    err = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}" if str(exc) else type(exc).__name__
                    break
                ok = bool(((out - want).abs() <= ATOL + RTOL * want.abs()).all())
                bad += not ok
                if not args.smoke:
                    per[label] = triton.testing.do_bench(lambda: fn(data), warmup=10, rep=40) * 1e3  # noqa: B023
                    lb[label] = leaderboard_us(fn, data, flush)
                    if args.graph and "lean" not in variant:
                        graph[label] = triton.testing.do_bench_cudagraph(lambda: fn(data), rep=40) * 1e3  # noqa: B023
            row = {
                "variant": variant,
                "config": cfg,
                "failed_shapes": bad,
                "error": err,
                "do_bench": per,
                "leaderboard": lb,
                "graph": graph,
            }
            if per and len(per) == len(inputs):
                row["geomean_do_bench"] = geomean(list(per.values()))
                row["geomean_leaderboard"] = geomean(list(lb.values()))
            if graph and len(graph) == len(inputs):
                row["geomean_graph"] = geomean(list(graph.values()))
            rows.append(row)
            print(
                f"{variant:14s} {str(cfg):20s} fail={bad} err={err} "
                f"do_bench={row.get('geomean_do_bench', math.nan):.1f} "
                f"leaderboard={row.get('geomean_leaderboard', math.nan):.1f} "
                f"gpu-only={row.get('geomean_graph', math.nan):.1f}",
                flush=True,
            )
    best: dict[str, tuple[float, str]] = {}
    for row in rows:
        if row["failed_shapes"] == 0 and not row["error"]:
            for label, us in row["do_bench"].items():
                if label not in best or us < best[label][0]:
                    best[label] = (us, f"{row['variant']} {row['config']}")
    if best and len(best) == len(inputs):
        print(f"best design per shape (do_bench): geomean {geomean([v[0] for v in best.values()]):.1f} us")
        for label, (us, what) in best.items():
            print(f"  {label:>16}: {us:7.1f} us  {what}")
    Path(args.out).write_text(
        json.dumps(
            {"anchors": anchors, "rows": rows, "versions": {"torch": torch.__version__, "triton": triton.__version__}},
            indent=1,
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
