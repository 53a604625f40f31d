# The row norm seed (seed.py) as `kernel-scientist lower` wrote it, kept verbatim.
# ruff: noqa
# fmt: off
"""Lowered by Inductor from seed.py (torch 2.13.0, triton 3.8.0, code for Triton's CPU backend), traced on rows=37 cols=1000 with every size symbolic.

Inductor's Triton kernels as it wrote them, its launch code without its runtime, and each
kernel's launch settings as literals below (the first of Inductor's candidates).
"""

import math

import torch
import triton
import triton.language as tl

# Launch settings of each kernel: the techniques for any Triton kernel tune these literals.
XBLOCK_0 = 2
R0_BLOCK_0 = 1024


@triton.jit
def triton_red_fused_mul_sqrt_sum_0(in_out_ptr0, in_ptr0, ks0, xnumel, r0_numel, XBLOCK: tl.constexpr, R0_BLOCK: tl.constexpr):
    rnumel = r0_numel
    RBLOCK: tl.constexpr = R0_BLOCK
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[:, None]
    xmask = xindex < xnumel
    r0_base = tl.arange(0, R0_BLOCK)[None, :]
    rbase = r0_base
    x0 = xindex
    _tmp3 = tl.full([XBLOCK, R0_BLOCK], 0, tl.float32)
    for r0_offset in tl.range(0, r0_numel, R0_BLOCK):
        r0_index = r0_offset + r0_base
        r0_mask = r0_index < r0_numel
        roffset = r0_offset
        rindex = r0_index
        r0_1 = r0_index
        tmp0 = tl.load(in_ptr0 + (r0_1 + ks0 * x0), r0_mask & xmask, eviction_policy='evict_first', other=0.0)
        tmp1 = tmp0 * tmp0
        tmp2 = tl.broadcast_to(tmp1, [XBLOCK, R0_BLOCK])
        tmp4 = _tmp3 + tmp2
        _tmp3 = tl.where(r0_mask & xmask, tmp4, _tmp3)
    tmp3 = tl.sum(_tmp3, 1)[:, None]
    tmp5 = tl.sqrt_rn(tmp3)
    tl.store(in_out_ptr0 + x0, tmp5, xmask)


def custom_kernel(x):
    arg0_1 = x.size()[0]
    arg1_1 = x.size()[1]
    arg2_1 = x
    device = arg2_1.device
    s77 = arg0_1
    s27 = arg1_1
    buf0 = torch.empty_strided((s77,), (1,), dtype=torch.float32, device=device)
    buf1 = buf0
    triton_red_fused_mul_sqrt_sum_0[triton.cdiv(s77, XBLOCK_0),](buf1, arg2_1, s27, s77, s27, XBLOCK=XBLOCK_0, R0_BLOCK=R0_BLOCK_0, num_warps=8, num_stages=1)
    outs = (buf1,)
    return outs[0]
