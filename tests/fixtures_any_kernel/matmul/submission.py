# GPU MODE's pmpp_v2/matmul_py seed (seed.py) as Inductor lowered it on an H100, kept verbatim.
# ruff: noqa
# fmt: off
"""Lowered by Inductor from submission.py (torch 2.11.0, triton 3.6.0, code for CUDA), traced on 256x256x256 with every size symbolic.

Inductor's Triton kernels as it wrote them, its launch code without its runtime, and each
kernel's launch settings as literals below (the first of Inductor's candidates).
Kept as library calls (Inductor hands these ops to a library): torch.mm.
"""

import math

import torch
import triton
import triton.language as tl

# Launch settings of each kernel: the techniques for any Triton kernel tune these literals.
XBLOCK_0 = 512


@triton.jit
def triton_poi_fused_copy__0(in_ptr0, out_ptr0, xnumel, XBLOCK: tl.constexpr):
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[:]
    xmask = xindex < xnumel
    x0 = xindex
    tmp0 = tl.load(in_ptr0 + x0, xmask).to(tl.float32)
    tl.store(out_ptr0 + x0, tmp0, xmask)


def custom_kernel(data):
    arg0_1 = data[0].size()[0]
    arg1_1 = data[0].size()[1]
    arg2_1 = data[0]
    arg3_1 = data[1].size()[1]
    arg4_1 = data[1]
    arg5_1 = data[2]
    device = arg2_1.device
    s63 = arg0_1
    s37 = arg1_1
    s67 = arg3_1
    arg2_1_size = arg2_1.size()
    s11 = arg2_1_size[1]
    arg4_1_size = arg4_1.size()
    s23 = arg4_1_size[1]
    buf0 = torch.empty_strided((s63, s23), (s23, 1), dtype=torch.float16, device=device)
    torch.mm(arg2_1, arg4_1, out=buf0)
    triton_poi_fused_copy__0_xnumel = s23 * s63
    triton_poi_fused_copy__0[triton.cdiv(triton_poi_fused_copy__0_xnumel, XBLOCK_0),](buf0, arg5_1, triton_poi_fused_copy__0_xnumel, XBLOCK=XBLOCK_0, num_warps=4, num_stages=1)
    outs = (arg5_1,)
    return outs[0]
