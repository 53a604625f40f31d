# Correct but serial: one program walks the whole vector a block at a time, Triton's scan within the
# block and a running carry between blocks (what a one-program scan looks like written by hand).
import triton
import triton.language as tl
from task import input_t, output_t


@triton.jit
def _add(a, b):
    return a + b


@triton.jit
def scan_carry(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    carry = tl.zeros((), tl.float32)
    for start in range(0, n, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        mask = offs < n
        v = tl.load(x_ptr + offs, mask=mask, other=0.0)
        tl.store(y_ptr + offs, tl.associative_scan(v, 0, _add) + carry, mask=mask)
        carry += tl.sum(v, 0)


def custom_kernel(data: input_t) -> output_t:
    x, y = data
    scan_carry[(1,)](x, y, x.numel(), BLOCK=1024, num_warps=4)
    return y
