"""What the GEMM exploration scripts share (explore_kernels.py, explore_hopper.py, sweep_h200.py,
gluon_gemm.py): the task's tolerance, the ``BMxBNxWARPSxSTAGES`` launch configurations, the grouped
tile order, the fp8 -> fp16 pre-pass, and the block-scaled GEMM over strided operands that
explore_kernels.py and sweep_h200.py time in their own forms.

Not a script: the others import it (``python scripts/NAME.py`` puts scripts/ first on sys.path).
"""

from __future__ import annotations

import triton
import triton.language as tl

RTOL, ATOL = 2e-2, 1e-3


def parse_configs(text: str) -> list[tuple[int, ...]]:
    """``BMxBNxWARPSxSTAGES,...`` as (BLOCK_M, BLOCK_N, num_warps, num_stages) tuples, in order."""
    return [tuple(int(x) for x in c.split("x")) for c in text.split(",")]


def strided_args(data) -> tuple:
    """The runtime arguments of ``strided_gemm`` for (a, b, a_scale, b_scale, c): the five tensors,
    M, N, K, then each tensor's two strides."""
    a, b, a_s, b_s, c = data
    m, k = a.shape
    return (a, b, a_s, b_s, c, m, b.shape[0], k, *(s for t in (a, b, a_s, b_s, c) for s in t.stride()))


@triton.jit
def grouped_tile(tile, num_pid_m, num_pid_n, GROUP_M: tl.constexpr):
    """(pid_m, pid_n) of tile number ``tile`` in grouped order: GROUP_M row tiles in a row share
    their b tiles in L2 (GROUP_M 1: row-major order)."""
    group = GROUP_M * num_pid_n
    first_m = (tile // group) * GROUP_M
    size_m = min(num_pid_m - first_m, GROUP_M)
    return first_m + (tile % group) % size_m, (tile % group) // size_m


@triton.jit
def _to_fp16(src_ptr, dst_ptr, block, n, BLOCK: tl.constexpr):
    offs = block * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=mask).to(tl.float16), mask=mask)


@triton.jit
def to_fp16_block(blk, blocks_a, a_ptr, b_ptr, a16_ptr, b16_ptr, NA, NB, BLOCK: tl.constexpr):
    """Block ``blk`` of the pre-pass, element for element (layout kept): a's ``blocks_a`` blocks
    first, then b's."""
    if blk < blocks_a:
        _to_fp16(a_ptr, a16_ptr, blk, NA, BLOCK)
    else:
        _to_fp16(b_ptr, b16_ptr, blk - blocks_a, NB, BLOCK)


@triton.jit
def convert(a_ptr, b_ptr, a16_ptr, b16_ptr, NA, NB, BLOCK: tl.constexpr):
    # fp8 -> fp16 of both operands in one launch, a block per program (e4m3 fits fp16 exactly).
    to_fp16_block(tl.program_id(0), tl.cdiv(NA, BLOCK), a_ptr, b_ptr, a16_ptr, b16_ptr, NA, NB, BLOCK)


@triton.jit
def mode_dot(a, b, MODE: tl.constexpr):
    """One tile product: 0 fp8 with max_num_imprecise_acc=0, 3 via bf16, 4 via fp16, any other the
    hardware's default fp8 accumulation within this one dot."""
    if MODE == 0:
        part = tl.dot(a, b, max_num_imprecise_acc=0)
    elif MODE == 3:
        part = tl.dot(a.to(tl.bfloat16), b.to(tl.bfloat16))
    elif MODE == 4:
        part = tl.dot(a.to(tl.float16), b.to(tl.float16))
    else:
        part = tl.dot(a, b)
    return part


@triton.jit
def strided_gemm(
    a_ptr,
    b_ptr,
    as_ptr,
    bs_ptr,
    c_ptr,
    M,
    N,
    K,
    stride_am,
    stride_ak,
    stride_bn,
    stride_bk,
    stride_asm,
    stride_ask,
    stride_bsn,
    stride_bsk,
    stride_cm,
    stride_cn,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    MODE: tl.constexpr,
    GROUP_M: tl.constexpr,
    BLOCK_K: tl.constexpr = 0,
    SPLIT_K: tl.constexpr = 1,
):
    """c = (a * a_scale) @ (b * b_scale).T over operands of any strides, one output tile per program
    (grouped order), in one of two forms:

    BLOCK_K 0 (explore_kernels.py): per 128-deep scale block, dots of 32 (MODE 1), 64 (MODE 2) or
    128 deep, each added to the fp32 accumulator times the block's scale product; MODE 6 is the
    fp16 form unrolled by two blocks, both dots issued before either scaled add (K % 256 == 0).
    BLOCK_K 64 or 128 (sweep_h200.py): one dot per BLOCK_K step, its scales loaded every step; the
    K blocks split over SPLIT_K programs (grid axis 1), which add fp32 partials atomically into c.
    """
    pid_m, pid_n = grouped_tile(tl.program_id(0), tl.cdiv(M, BLOCK_M), tl.cdiv(N, BLOCK_N), GROUP_M)
    offs_m = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
    offs_n = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
    if BLOCK_K == 0:
        SUB: tl.constexpr = 32 if MODE == 1 else (64 if MODE == 2 else 128)
        offs_k = tl.arange(0, SUB)
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        STEP: tl.constexpr = 256 if MODE == 6 else 128
        for k0 in range(0, K, STEP):
            if MODE == 6:
                a0 = tl.load(a_ptr + offs_m[:, None] * stride_am + (k0 + offs_k)[None, :] * stride_ak)
                b0 = tl.load(b_ptr + (k0 + offs_k)[:, None] * stride_bk + offs_n[None, :] * stride_bn)
                a1 = tl.load(a_ptr + offs_m[:, None] * stride_am + (k0 + 128 + offs_k)[None, :] * stride_ak)
                b1 = tl.load(b_ptr + (k0 + 128 + offs_k)[:, None] * stride_bk + offs_n[None, :] * stride_bn)
                s0 = (
                    tl.load(as_ptr + offs_m * stride_asm + (k0 // 128) * stride_ask)[:, None]
                    * tl.load(bs_ptr + (offs_n // 128) * stride_bsn + (k0 // 128) * stride_bsk)[None, :]
                )
                s1 = (
                    tl.load(as_ptr + offs_m * stride_asm + (k0 // 128 + 1) * stride_ask)[:, None]
                    * tl.load(bs_ptr + (offs_n // 128) * stride_bsn + (k0 // 128 + 1) * stride_bsk)[None, :]
                )
                p0 = tl.dot(a0.to(tl.float16), b0.to(tl.float16))
                p1 = tl.dot(a1.to(tl.float16), b1.to(tl.float16))
                acc += p0 * s0
                acc += p1 * s1
            else:
                a_s = tl.load(as_ptr + offs_m * stride_asm + (k0 // 128) * stride_ask)
                b_s = tl.load(bs_ptr + (offs_n // 128) * stride_bsn + (k0 // 128) * stride_bsk)
                scale = a_s[:, None] * b_s[None, :]
                for kk in tl.static_range(0, 128, SUB):
                    a = tl.load(a_ptr + offs_m[:, None] * stride_am + (k0 + kk + offs_k)[None, :] * stride_ak)
                    b = tl.load(b_ptr + (k0 + kk + offs_k)[:, None] * stride_bk + offs_n[None, :] * stride_bn)
                    # A scaled add, never `acc += dot`: Triton would fold that add into the dot's own
                    # (reduced-precision) accumulator.
                    acc += mode_dot(a, b, MODE) * scale
    else:
        offs_k = tl.arange(0, BLOCK_K)
        per_split = tl.cdiv(tl.cdiv(K, 128), SPLIT_K)
        k_lo = tl.program_id(1) * per_split * 128
        k_hi = min(K, k_lo + per_split * 128)
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k0 in range(k_lo, k_hi, BLOCK_K):
            a = tl.load(a_ptr + offs_m[:, None] * stride_am + (k0 + offs_k)[None, :] * stride_ak)
            b = tl.load(b_ptr + (k0 + offs_k)[:, None] * stride_bk + offs_n[None, :] * stride_bn)
            a_s = tl.load(as_ptr + offs_m * stride_asm + (k0 // 128) * stride_ask)
            b_s = tl.load(bs_ptr + (offs_n // 128) * stride_bsn + (k0 // 128) * stride_bsk)
            acc += mode_dot(a, b, MODE) * a_s[:, None] * b_s[None, :]
    offs_cm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_cn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (offs_cm[:, None] < M) & (offs_cn[None, :] < N)
    ptrs = c_ptr + offs_cm[:, None] * stride_cm + offs_cn[None, :] * stride_cn
    if SPLIT_K > 1:
        tl.atomic_add(ptrs, acc, mask=mask)
    else:
        tl.store(ptrs, acc.to(c_ptr.dtype.element_ty), mask=mask)
