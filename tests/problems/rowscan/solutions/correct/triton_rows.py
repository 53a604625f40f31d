# Correct: one program per row, a block of the row at a time, Triton's scan within the block and a
# running carry between blocks.
import torch
import triton
import triton.language as tl
from task import input_t, output_t


@triton.jit
def _add(a, b):
    return a + b


@triton.jit
def scan_rows(x_ptr, y_ptr, cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    carry = tl.zeros((), tl.float32)
    for start in range(0, cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        mask = offs < cols
        v = tl.load(x_ptr + row * cols + offs, mask=mask, other=0.0)
        s = tl.associative_scan(v, 0, _add) + carry
        tl.store(y_ptr + row * cols + offs, s, mask=mask)
        carry += tl.sum(v, 0)


def custom_kernel(x: input_t) -> output_t:
    rows, cols = x.shape
    y = torch.empty_like(x)
    scan_rows[(rows,)](x, y, cols, BLOCK=1024, num_warps=4)
    return y
