import torch
from task import input_t, output_t
from utils import make_match_reference


def ref_kernel(data: input_t) -> output_t:
    return torch.relu(data)


def generate_input(size: int, seed: int) -> input_t:
    gen = torch.Generator(device="cuda")
    gen.manual_seed(seed)
    return torch.randn(size, device="cuda", dtype=torch.float32, generator=gen)


check_implementation = make_match_reference(ref_kernel)
