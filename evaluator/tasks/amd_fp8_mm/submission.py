#!POPCORN leaderboard amd-fp8-mm
#!POPCORN gpus MI300
"""Seed submission for amd-fp8-mm: a plain, correct Triton block-scaled FP8 GEMM.

One program computes one BLOCK_M x BLOCK_N tile of c, in row-major tile order. The K loop steps
128 elements at a time, which is exactly one scale block, so each step multiplies one fp8 dot
product by one a-scale per row and one b-scale per column and adds it to an fp32 accumulator.
Operands are loaded straight from the column-major inputs with their real strides.

The ``# region: NAME`` / ``# endregion: NAME`` comment lines mark the parts that the technique
catalogue (knowledge/) rewrites; keep them when editing by hand.
"""

import torch
import triton
import triton.language as tl

# region: config
BLOCK_M = 64
BLOCK_N = 64
BLOCK_K = 128
NUM_WARPS = 4
NUM_STAGES = 2
# endregion: config


# region: select_config
def select_config(m: int, n: int, k: int) -> dict:
    """Launch settings for one shape: the kernel's constexprs plus num_warps / num_stages."""
    cfg = {
        "BLOCK_M": BLOCK_M,
        "BLOCK_N": BLOCK_N,
        "BLOCK_K": BLOCK_K,
        "num_warps": NUM_WARPS,
        "num_stages": NUM_STAGES,
    }
    return cfg
# endregion: select_config


@triton.jit
def fp8_gemm_kernel(
    # region: params
    a_ptr, b_ptr, as_ptr, bs_ptr, c_ptr,
    M, N, K,
    stride_am, stride_ak, stride_bn, stride_bk,
    stride_asm, stride_ask, stride_bsn, stride_bsk,
    stride_cm, stride_cn,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    # endregion: params
):
    # region: work_preamble
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_work = num_pid_m * num_pid_n
    # endregion: work_preamble
    # region: tile
    pid = tl.program_id(0)
    # region: pid_map
    # region: tile_order
    pid_m = pid // num_pid_n
    pid_n = pid % num_pid_n
    # endregion: tile_order
    # endregion: pid_map
    # region: k_bounds
    k_lo = 0
    k_hi = K
    # endregion: k_bounds
    # region: offsets
    # Rows past M (or columns past N) wrap around instead of being masked: they read valid
    # memory and their results are dropped by the store mask.
    offs_am = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
    offs_bn = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
    offs_k = tl.arange(0, BLOCK_K)
    # endregion: offsets
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    # region: k_loop
    for k0 in range(k_lo, k_hi, BLOCK_K):
        # region: loads
        a = tl.load(a_ptr + offs_am[:, None] * stride_am + (k0 + offs_k)[None, :] * stride_ak)
        b = tl.load(b_ptr + (k0 + offs_k)[:, None] * stride_bk + offs_bn[None, :] * stride_bn)
        # One scale block per 128 K elements; b's scales also change every 128 columns.
        a_s = tl.load(as_ptr + offs_am * stride_asm + (k0 // 128) * stride_ask)
        b_s = tl.load(bs_ptr + (offs_bn // 128) * stride_bsn + (k0 // 128) * stride_bsk)
        # endregion: loads
        # region: dot
        # max_num_imprecise_acc=0 asks for full fp32 accumulation: Hopper's fp8 MMA otherwise
        # accumulates in reduced precision and misses the tolerance; MI300X ignores it.
        partial = tl.dot(a, b, max_num_imprecise_acc=0)
        acc += partial * a_s[:, None] * b_s[None, :]
        # endregion: dot
    # endregion: k_loop
    # region: epilogue
    out_base = c_ptr
    offs_cm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_cn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    out_ptrs = out_base + offs_cm[:, None] * stride_cm + offs_cn[None, :] * stride_cn
    mask = (offs_cm[:, None] < M) & (offs_cn[None, :] < N)
    tl.store(out_ptrs, acc.to(out_base.dtype.element_ty), mask=mask)
    # endregion: epilogue
    # endregion: tile


def custom_kernel(data):
    # region: prepare
    a, b, a_scale, b_scale, c = data
    # region: fp8_flavour
    # The public generator draws e4m3fnuz on every platform, and Triton on NVIDIA cannot load it.
    # Same bit layout, exponent bias 8 instead of 7: every fnuz code but three reads as an e4m3fn
    # code of exactly twice its value (0x80, fnuz's NaN, would read as -0; 0x7F/0xFF, fnuz's
    # +-240, as NaN; a standard normal never draws them). So the bytes are reinterpreted and the
    # halving of both operands is folded into a's scales. ROCm loads fnuz natively.
    if a.dtype == torch.float8_e4m3fnuz and not torch.version.hip:
        a, b = a.view(torch.float8_e4m3fn), b.view(torch.float8_e4m3fn)
        a_scale = a_scale * 0.25
    # endregion: fp8_flavour
    m, k = a.shape
    n = b.shape[0]
    cfg = select_config(m, n, k)
    # endregion: prepare
    # region: output
    out = c
    # endregion: output
    # region: grid
    num_work = triton.cdiv(m, cfg["BLOCK_M"]) * triton.cdiv(n, cfg["BLOCK_N"])
    grid = (num_work,)
    # endregion: grid
    # region: launch
    fp8_gemm_kernel[grid](
        a, b, a_scale, b_scale, out,
        m, n, k,
        a.stride(0), a.stride(1), b.stride(0), b.stride(1),
        a_scale.stride(0), a_scale.stride(1), b_scale.stride(0), b_scale.stride(1),
        out.stride(-2), out.stride(-1),
        **cfg,
    )
    # endregion: launch
    # region: finish
    return c
    # endregion: finish
