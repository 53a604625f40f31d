# The vectorsum seed (seed.py) as `kernel-scientist lower` wrote it, kept verbatim.
# ruff: noqa
# fmt: off
"""Lowered by Inductor from seed.py (torch 2.13.0, triton 3.8.0, code for Triton's CPU backend), traced on size=4095 with every size symbolic.

Inductor's Triton kernels as it wrote them, its launch code without its runtime, and each
kernel's launch settings as literals below (the first of Inductor's candidates).
"""

import math

import torch
import triton
import triton.language as tl

# Launch settings of each kernel: the techniques for any Triton kernel tune these literals.
XBLOCK_0 = 1
R0_BLOCK_0 = 2048


@triton.jit
def triton_red_fused__to_copy_sum_0(in_ptr0, out_ptr1, xnumel, r0_numel, XBLOCK: tl.constexpr, R0_BLOCK: tl.constexpr):
    xnumel = 1
    rnumel = r0_numel
    RBLOCK: tl.constexpr = R0_BLOCK
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[:, None]
    xmask = tl.full([XBLOCK], True, tl.int1)[:, None]
    r0_base = tl.arange(0, R0_BLOCK)[None, :]
    rbase = r0_base
    _tmp3 = tl.full([XBLOCK, R0_BLOCK], 0, tl.float64)
    for r0_offset in tl.range(0, r0_numel, R0_BLOCK):
        r0_index = r0_offset + r0_base
        r0_mask = r0_index < r0_numel
        roffset = r0_offset
        rindex = r0_index
        r0_0 = r0_index
        tmp0 = tl.load(in_ptr0 + r0_0, r0_mask, eviction_policy='evict_first', other=0.0)
        tmp1 = tmp0.to(tl.float64)
        tmp2 = tl.broadcast_to(tmp1, [XBLOCK, R0_BLOCK])
        tmp4 = _tmp3 + tmp2
        _tmp3 = tl.where(r0_mask, tmp4, _tmp3)
    tmp3 = tl.sum(_tmp3, 1)[:, None]
    tmp5 = tmp3.to(tl.float32)
    tl.store(out_ptr1 + tl.full([1, 1], 0, tl.int32).broadcast_to(XBLOCK, 1), tmp5, None)


def custom_kernel(data):
    arg0_1 = data[0].size()[0]
    arg1_1 = data[0]
    device = arg1_1.device
    s63 = arg0_1
    buf1 = torch.empty_strided((), (), dtype=torch.float32, device=device)
    triton_red_fused__to_copy_sum_0[triton.cdiv(1, XBLOCK_0),](arg1_1, buf1, 1, s63, XBLOCK=XBLOCK_0, R0_BLOCK=R0_BLOCK_0, num_warps=16, num_stages=1)
    outs = (buf1,)
    return outs[0]
