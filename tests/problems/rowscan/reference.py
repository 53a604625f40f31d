import torch
from task import input_t, output_t
from utils import match_reference_message


def ref_kernel(x: input_t) -> output_t:
    return x.double().cumsum(dim=1).float()


def generate_input(rows: int, cols: int, seed: int) -> input_t:
    gen = torch.Generator(device="cuda")
    gen.manual_seed(seed)
    return torch.randn(rows, cols, device="cuda", dtype=torch.float32, generator=gen)


# A float32 running sum of up to 16383 unit normals drifts by about 1e-3 from the float64 one.
check_implementation = match_reference_message(ref_kernel, rtol=1e-4, atol=1e-2)
