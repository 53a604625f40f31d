# The row norm as TorchInductor lowers it: a looped reduction over each row (XBLOCK rows per
# program, R0_BLOCK columns per step), then the square root taken in place by a pointwise kernel.
# (kept as TorchInductor writes it, unformatted)
# fmt: off
import torch
import triton
import triton.language as tl
from task import input_t, output_t

XBLOCK_0 = 8
R0_BLOCK_0 = 64
XBLOCK_1 = 256


@triton.jit
def triton_red_fused_mul_sum_0(in_ptr0, out_ptr0, xnumel, r0_numel, XBLOCK : tl.constexpr, R0_BLOCK : tl.constexpr):
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[:, None]
    xmask = xindex < xnumel
    r0_base = tl.arange(0, R0_BLOCK)[None, :]
    x0 = xindex
    _tmp2 = tl.full([XBLOCK, R0_BLOCK], 0, tl.float32)
    for r0_offset in tl.range(0, r0_numel, R0_BLOCK):
        r0_index = r0_offset + r0_base
        r0_mask = r0_index < r0_numel
        r0_1 = r0_index
        tmp0 = tl.load(in_ptr0 + (r0_1 + r0_numel*x0), r0_mask & xmask, eviction_policy='evict_first', other=0.0)
        tmp1 = tmp0 * tmp0
        tmp3 = _tmp2 + tmp1
        _tmp2 = tl.where(r0_mask & xmask, tmp3, _tmp2)
    tmp2 = tl.sum(_tmp2, 1)[:, None]
    tl.store(out_ptr0 + (x0), tmp2, xmask)


@triton.jit
def triton_poi_fused_sqrt_1(in_out_ptr0, xnumel, XBLOCK : tl.constexpr):
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[:]
    xmask = xindex < xnumel
    x0 = xindex
    tmp0 = tl.load(in_out_ptr0 + (x0), xmask)
    tmp1 = tl.sqrt(tmp0)
    tl.store(in_out_ptr0 + (x0), tmp1, xmask)


def custom_kernel(data: input_t) -> output_t:
    arg0_1 = data
    xnumel, r0_numel = arg0_1.shape
    buf0 = torch.empty((xnumel,), device=arg0_1.device, dtype=torch.float32)
    triton_red_fused_mul_sum_0[(triton.cdiv(xnumel, XBLOCK_0),)](arg0_1, buf0, xnumel, r0_numel, XBLOCK=XBLOCK_0, R0_BLOCK=R0_BLOCK_0, num_warps=2, num_stages=1)
    buf1 = buf0
    del buf0
    triton_poi_fused_sqrt_1[(triton.cdiv(xnumel, XBLOCK_1),)](buf1, xnumel, XBLOCK=XBLOCK_1, num_warps=4, num_stages=1)
    return buf1
