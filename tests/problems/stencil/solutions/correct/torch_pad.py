# Correct and slow: torch slicing into the preallocated output.
import torch.nn.functional as F
from task import input_t, output_t


def custom_kernel(data: input_t) -> output_t:
    x, out = data
    p = F.pad(x, (1, 1, 1, 1))
    out.copy_(0.5 * x + 0.125 * (p[:-2, 1:-1] + p[2:, 1:-1] + p[1:-1, :-2] + p[1:-1, 2:]))
    return out
