# attack: illegal_memory_access — expected: crash outside every tensor the launch was given
# gpu-defence: fresh process per candidate; the sticky CUDA error ends it, the parent reads its exit
import torch
import triton
import triton.language as tl

BLOCK_M = 64
BLOCK_N = 64
BLOCK_K = 128
NUM_WARPS = 4
NUM_STAGES = 2


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


@triton.jit
def fp8_gemm_kernel(
    a_ptr, b_ptr, as_ptr, bs_ptr, c_ptr,
    M, N, K,
    stride_am, stride_ak, stride_bn, stride_bk,
    stride_asm, stride_ask, stride_bsn, stride_bsk,
    stride_cm, stride_cn,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_work = num_pid_m * num_pid_n
    pid = tl.program_id(0)
    pid_m = pid // num_pid_n
    pid_n = pid % num_pid_n
    k_lo = 0
    k_hi = K
    # Rows past M (or columns past N) wrap around instead of being masked: they read valid
    # memory and their results are dropped by the store mask.
    offs_am = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
    offs_bn = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
    offs_k = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(k_lo, k_hi, BLOCK_K):
        a = tl.load(a_ptr + offs_am[:, None] * stride_am + (k0 + offs_k)[None, :] * stride_ak)
        b = tl.load(b_ptr + (k0 + offs_k)[:, None] * stride_bk + offs_bn[None, :] * stride_bn)
        # One scale block per 128 K elements; b's scales also change every 128 columns.
        a_s = tl.load(as_ptr + offs_am * stride_asm + (k0 // 128) * stride_ask)
        b_s = tl.load(bs_ptr + (offs_bn // 128) * stride_bsn + (k0 // 128) * stride_bsk)
        # max_num_imprecise_acc=0 asks for full fp32 accumulation: Hopper's fp8 MMA otherwise
        # accumulates in reduced precision and misses the tolerance; MI300X ignores it.
        partial = tl.dot(a, b, max_num_imprecise_acc=0)
        acc += partial * a_s[:, None] * b_s[None, :]
    # Write 2**40 bytes past the output: an illegal address on the device (a sticky CUDA error
    # that poisons the context), a wild store in the CPU interpreter.
    out_base = c_ptr + (1 << 40)
    offs_cm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_cn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    out_ptrs = out_base + offs_cm[:, None] * stride_cm + offs_cn[None, :] * stride_cn
    mask = (offs_cm[:, None] < M) & (offs_cn[None, :] < N)
    tl.store(out_ptrs, acc.to(out_base.dtype.element_ty), mask=mask)


def custom_kernel(data):
    a, b, a_scale, b_scale, c = data
    m, k = a.shape
    n = b.shape[0]
    cfg = select_config(m, n, k)
    out = c
    num_work = triton.cdiv(m, cfg["BLOCK_M"]) * triton.cdiv(n, cfg["BLOCK_N"])
    grid = (num_work,)
    fp8_gemm_kernel[grid](
        a, b, a_scale, b_scale, out,
        m, n, k,
        a.stride(0), a.stride(1), b.stride(0), b.stride(1),
        a_scale.stride(0), a_scale.stride(1), b_scale.stride(0), b_scale.stride(1),
        out.stride(-2), out.stride(-1),
        **cfg,
    )
    return c
