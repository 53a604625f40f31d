# Wrong: the left and right neighbours wrap around the row ends instead of reading zeros.
import torch
from task import input_t, output_t


def custom_kernel(data: input_t) -> output_t:
    x, out = data
    up = torch.zeros_like(x)
    up[1:] = x[:-1]
    down = torch.zeros_like(x)
    down[:-1] = x[1:]
    out.copy_(0.5 * x + 0.125 * (up + down + x.roll(1, dims=1) + x.roll(-1, dims=1)))
    return out
