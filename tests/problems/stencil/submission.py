# One program per BLOCK_H x BLOCK_W tile; neighbours loaded with masks (zeros outside the image).
import triton
import triton.language as tl
from task import input_t, output_t


@triton.jit
def stencil_kernel(x_ptr, out_ptr, height, width, BLOCK_H: tl.constexpr, BLOCK_W: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_H + tl.arange(0, BLOCK_H)[:, None]
    cols = tl.program_id(1) * BLOCK_W + tl.arange(0, BLOCK_W)[None, :]
    inside = (rows < height) & (cols < width)
    centre = tl.load(x_ptr + rows * width + cols, mask=inside, other=0.0)
    up = tl.load(x_ptr + (rows - 1) * width + cols, mask=inside & (rows >= 1), other=0.0)
    down = tl.load(x_ptr + (rows + 1) * width + cols, mask=inside & (rows + 1 < height), other=0.0)
    left = tl.load(x_ptr + rows * width + cols - 1, mask=inside & (cols >= 1), other=0.0)
    right = tl.load(x_ptr + rows * width + cols + 1, mask=inside & (cols + 1 < width), other=0.0)
    tl.store(out_ptr + rows * width + cols, 0.5 * centre + 0.125 * (up + down + left + right), mask=inside)


def custom_kernel(data: input_t) -> output_t:
    x, out = data
    height, width = x.shape
    BLOCK_H, BLOCK_W = 16, 32
    grid = (triton.cdiv(height, BLOCK_H), triton.cdiv(width, BLOCK_W))
    stencil_kernel[grid](x, out, height, width, BLOCK_H=BLOCK_H, BLOCK_W=BLOCK_W, num_warps=4)
    return out
