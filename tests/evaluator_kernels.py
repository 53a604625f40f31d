"""Submissions used by the evaluator tests (not a test module: pytest collects test_*.py only).

``tiled_source`` writes a complete block-scaled FP8 GEMM submission with the given launch
parameters, optionally copying a and b to K-contiguous layouts first (a pre-pass) and launching
tiles in grouped order. Faulty variants are small edits of it, so each test changes one thing.
"""

from __future__ import annotations

_TEMPLATE = """
import torch
import triton
import triton.language as tl
from task import input_t, output_t


@triton.jit
def _gemm(a_ptr, b_ptr, as_ptr, bs_ptr, c_ptr, M, N, K,
          s_am, s_ak, s_bn, s_bk, s_asm, s_ask, s_bsn, s_bsk, s_cm, s_cn,
          BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    pid = tl.program_id(0)
    tiles_m = tl.cdiv(M, BLOCK_M)
    tiles_n = tl.cdiv(N, BLOCK_N)
    per_group = GROUP_M * tiles_n
    first_m = (pid // per_group) * GROUP_M
    size_m = min(tiles_m - first_m, GROUP_M)
    pid_m = first_m + (pid % per_group) % size_m
    pid_n = (pid % per_group) // size_m
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for kb in range(0, tl.cdiv(K, BLOCK_K)):
        ks = kb * BLOCK_K + rk
        a = tl.load(a_ptr + rm[:, None] * s_am + ks[None, :] * s_ak, mask=(rm[:, None] < M) & (ks[None, :] < K), other=0.0)
        b = tl.load(b_ptr + rn[None, :] * s_bn + ks[:, None] * s_bk, mask=(rn[None, :] < N) & (ks[:, None] < K), other=0.0)
        sa = tl.load(as_ptr + rm * s_asm + kb * s_ask, mask=rm < M, other=0.0)
        sb = tl.load(bs_ptr + (rn // 128) * s_bsn + kb * s_bsk, mask=rn < N, other=0.0)
        part = tl.dot(a, b, max_num_imprecise_acc=0)
        acc += part SCALE
    tl.store(c_ptr + rm[:, None] * s_cm + rn[None, :] * s_cn, acc.to(tl.bfloat16), mask=(rm[:, None] < M) & (rn[None, :] < N))


def custom_kernel(data: input_t) -> output_t:
    a, b, a_scale, b_scale, c = data
    PREPASS
    m, k = a.shape
    n = b.shape[0]
    grid = (triton.cdiv(m, BM) * triton.cdiv(n, BN),)
    _gemm[grid](a, b, a_scale, b_scale, c, m, n, k,
                a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                a_scale.stride(0), a_scale.stride(1), b_scale.stride(0), b_scale.stride(1),
                c.stride(0), c.stride(1),
                BLOCK_M=BM, BLOCK_N=BN, BLOCK_K=128, GROUP_M=GM, num_warps=WARPS, num_stages=STAGES)
    BODY_END
"""


def tiled_source(*, bm=64, bn=64, warps=4, stages=2, group_m=1, prepass=False, scale=True, body_end="return c") -> str:
    return (
        _TEMPLATE.replace("PREPASS", "a, b = a.contiguous(), b.contiguous()" if prepass else "pass")
        .replace("SCALE", "* sa[:, None] * sb[None, :]" if scale else "")
        .replace("BM", str(bm))
        .replace("BN", str(bn))
        .replace("GM", str(group_m))
        .replace("WARPS", str(warps))
        .replace("STAGES", str(stages))
        .replace("BODY_END", body_end)
    )


SEEDLIKE = tiled_source()
BETTER = tiled_source(bm=128, bn=128, warps=8, stages=2, group_m=8, prepass=True)
SKIPS_SCALE = tiled_source(scale=False)
RETURNS_ZEROS = tiled_source(body_end="return torch.zeros_like(c)")
SYNTAX_ERROR = SEEDLIKE.replace(
    "def custom_kernel(data: input_t) -> output_t:", "def custom_kernel(data: input_t) -> output_t"
)
RAISES = SEEDLIKE.replace(
    "    a, b, a_scale, b_scale, c = data\n", "    raise ValueError('boom from the candidate')\n", 1
)
LOOPS = SEEDLIKE.replace("    a, b, a_scale, b_scale, c = data\n", "    while True:\n        pass\n", 1)
FLOODS = SEEDLIKE.replace(
    "    a, b, a_scale, b_scale, c = data\n",
    "    for _ in range(400):\n        print('x' * 10000)\n    a, b, a_scale, b_scale, c = data\n",
    1,
)
WRITES_INPUT = SEEDLIKE.replace(
    "    m, k = a.shape\n",
    "    m, k = a.shape\n    a_scale.mul_(1.0)\n    b_scale.add_(0.0)\n    a_scale[0, 0] = 0.0\n",
    1,
)
SEGFAULTS = "import os, signal\n\ndef custom_kernel(data):\n    os.kill(os.getpid(), signal.SIGSEGV)\n"
HIDDEN_MATMUL = """
import torch
from operator import matmul as _mul


def custom_kernel(data):
    a, b, a_scale, b_scale, c = data
    k = a.shape[1]
    sa = a_scale.repeat_interleave(128, dim=1)[:, :k]
    sb = b_scale.repeat_interleave(128, dim=0).repeat_interleave(128, dim=1)[: b.shape[0], :k]
    c[...] = _mul(a.float() * sa, (b.float() * sb).T).to(c.dtype)
    return c
"""


def branchy_source(mode: int) -> str:
    """A kernel holding two accumulation forms behind a constexpr branch (MODE 0: fp8 with precise
    accumulation, MODE 1: fp16 upcast), launched with ``mode``."""
    return (
        tiled_source()
        .replace("GROUP_M: tl.constexpr):", "GROUP_M: tl.constexpr, MODE: tl.constexpr):")
        .replace(
            "        part = tl.dot(a, b, max_num_imprecise_acc=0)\n",
            "        if MODE == 0:\n            part = tl.dot(a, b, max_num_imprecise_acc=0)\n"
            "        else:\n            part = tl.dot(a.to(tl.float16), b.to(tl.float16))\n",
        )
        .replace("num_warps=", f"MODE={mode}, num_warps=")
    )


FP16_UPCAST = tiled_source().replace(
    "tl.dot(a, b, max_num_imprecise_acc=0)", "tl.dot(a.to(tl.float16), b.to(tl.float16))"
)
