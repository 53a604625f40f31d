# Wrong: each program scans its own block and never adds what the blocks before it sum to, so every
# block after the first restarts from zero.
import triton
import triton.language as tl
from task import input_t, output_t


@triton.jit
def _add(a, b):
    return a + b


@triton.jit
def scan_blocks(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    v = tl.load(x_ptr + offs, mask=mask, other=0.0)
    tl.store(y_ptr + offs, tl.associative_scan(v, 0, _add), mask=mask)


def custom_kernel(data: input_t) -> output_t:
    x, y = data
    n = x.numel()
    scan_blocks[(triton.cdiv(n, 1024),)](x, y, n, BLOCK=1024, num_warps=4)
    return y
