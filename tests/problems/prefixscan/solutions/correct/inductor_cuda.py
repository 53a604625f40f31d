# Correct but serial: Inductor's CUDA code for this folder's seed (pmpp_v2/prefixsum_py's), as
# `from_capture` writes it from tests/fixtures_lowering/pmpp-v2-h100.json.gz: one program loops over
# the vector with a running carry (what block_scan rewrites).
"""Lowered by Inductor from submission.py (torch 2.11.0, triton 3.6.0, code for CUDA), traced on size=4096 with every size symbolic.

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
def inductor_select_one(x, mask, dim, keep_dims=False):
    idtype = tl.core.get_int_dtype(x.dtype.primitive_bitwidth, signed=False)
    ix = x.to(idtype, bitcast=True)
    iy = tl.sum(ix * mask, dim, keep_dims=keep_dims)
    return iy.to(x.dtype, bitcast=True)


@triton.jit
def triton_red_fused_copy__cumsum_0__triton_helper_fn_add0(arg0_0, arg1_0):
    tmp0 = arg0_0 + arg1_0
    return tmp0


@triton.jit
def triton_red_fused_copy__cumsum_0(in_ptr0, out_ptr1, xnumel, r0_numel, XBLOCK: tl.constexpr, R0_BLOCK: tl.constexpr):
    xnumel = 1
    rnumel = r0_numel
    RBLOCK: tl.constexpr = R0_BLOCK
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[:, None]
    xmask = tl.full([XBLOCK], True, tl.int1)[:, None]
    r0_base = tl.arange(0, R0_BLOCK)[None, :]
    rbase = r0_base
    tmp3 = tl.full([XBLOCK, 1], float('nan'), tl.float32)
    for r0_offset in tl.range(0, r0_numel, R0_BLOCK):
        r0_index = r0_offset + r0_base
        r0_mask = r0_index < r0_numel
        roffset = r0_offset
        rindex = r0_index
        r0_0 = r0_index
        tmp0 = tl.load(in_ptr0 + r0_0, r0_mask, eviction_policy='evict_first', other=0.0)
        tmp1 = tmp0.to(tl.float32)
        tmp2 = tl.broadcast_to(tmp1, [XBLOCK, R0_BLOCK])
        tmp4, = tl.associative_scan((tmp2,), 1, triton_red_fused_copy__cumsum_0__triton_helper_fn_add0)
        tmp5 = inductor_select_one(tmp4, rbase == RBLOCK - 1, dim=-1, keep_dims=True)
        tmp6 = tmp3 + tmp5
        tmp7 = tmp3 + tmp4
        tmp8 = tl.where(roffset > 0, tmp7, tmp4)
        tmp3 = tl.where(roffset > 0, tmp6, tmp5)
        tl.store(out_ptr1 + tl.broadcast_to(r0_0, [XBLOCK, R0_BLOCK]), tmp8, r0_mask)


def custom_kernel(data):
    arg0_1 = data[0].size()[0]
    arg1_1 = data[0]
    arg2_1 = data[1]
    device = arg1_1.device
    s63 = arg0_1
    arg1_1_size = arg1_1.size()
    s11 = arg1_1_size[0]
    triton_red_fused_copy__cumsum_0[triton.cdiv(1, XBLOCK_0),](arg1_1, arg2_1, 1, s11, XBLOCK=XBLOCK_0, R0_BLOCK=R0_BLOCK_0, num_warps=16, num_stages=1)
    outs = (arg2_1,)
    return outs[0]
