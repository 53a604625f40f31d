# The relu seed as a chain of two elementwise kernels (relu(2x) / 2 is relu(x) exactly), for
# fuse_launches: the second reads what the first wrote, each element in the program that wrote it.
import torch
import triton
import triton.language as tl
from task import input_t, output_t


@triton.jit
def double_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 2.0, mask=mask)


@triton.jit
def half_relu_kernel(x_ptr, out_ptr, n, BLOCK_SIZE: tl.constexpr):
    offs = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, tl.maximum(x * 0.5, 0.0), mask=mask)


def custom_kernel(data: input_t) -> output_t:
    n = data.numel()
    doubled = torch.empty_like(data)
    double_kernel[(triton.cdiv(n, 1024),)](data, doubled, n, BLOCK=1024)
    out = torch.empty_like(data)
    half_relu_kernel[(triton.cdiv(n, 1024),)](doubled, out, n, BLOCK_SIZE=1024)
    return out
