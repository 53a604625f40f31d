# Wrong: the grid rounds down, so the elements past the last whole block are never summed.
import torch
import triton
import triton.language as tl
from task import input_t, output_t


@triton.jit
def sum_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    tl.atomic_add(out_ptr, tl.sum(x, axis=0))


def custom_kernel(data: input_t) -> output_t:
    x, _ = data
    out = torch.zeros(1, device=x.device, dtype=torch.float32)
    sum_kernel[(x.numel() // 1024,)](x, out, x.numel(), BLOCK=1024)
    return out[0]
