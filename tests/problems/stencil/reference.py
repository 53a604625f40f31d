import torch
import torch.nn.functional as F
from task import input_t, output_t
from utils import match_reference_message


def ref_kernel(data: input_t) -> output_t:
    x, out = data
    p = F.pad(x.double(), (1, 1, 1, 1))
    y = 0.5 * p[1:-1, 1:-1] + 0.125 * (p[:-2, 1:-1] + p[2:, 1:-1] + p[1:-1, :-2] + p[1:-1, 2:])
    return y.float()


def generate_input(height: int, width: int, seed: int) -> input_t:
    gen = torch.Generator(device="cuda")
    gen.manual_seed(seed)
    x = torch.rand(height, width, device="cuda", dtype=torch.float32, generator=gen) * 2 - 1
    out = torch.zeros(height, width, device="cuda", dtype=torch.float32)
    return x, out


check_implementation = match_reference_message(ref_kernel, rtol=1e-5, atol=1e-6)
