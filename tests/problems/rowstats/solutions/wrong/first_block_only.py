# Wrong: reads only the first BLOCK columns of each row.
import torch
import triton
import triton.language as tl
from task import input_t, output_t


@triton.jit
def rowstats_kernel(x_ptr, sum_ptr, max_ptr, cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < cols
    v = tl.load(x_ptr + row * stride + offs, mask=mask, other=0.0)
    tl.store(sum_ptr + row, tl.sum(v, axis=0))
    tl.store(max_ptr + row, tl.max(tl.where(mask, v, float("-inf")), axis=0))


def custom_kernel(x: input_t) -> output_t:
    rows, cols = x.shape
    sums = torch.empty(rows, device=x.device, dtype=torch.float32)
    maxima = torch.empty(rows, device=x.device, dtype=torch.float32)
    rowstats_kernel[(rows,)](x, sums, maxima, cols, x.stride(0), BLOCK=256)
    return sums, maxima
