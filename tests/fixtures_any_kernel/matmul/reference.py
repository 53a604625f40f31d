import torch
from task import input_t, output_t
from utils import match_reference


def ref_kernel(data: input_t) -> output_t:
    a, b, c = data
    return (a.float() @ b.float()).to(c.dtype)


def generate_input(m: int, n: int, k: int, seed: int) -> input_t:
    gen = torch.Generator(device="cuda")
    gen.manual_seed(seed)
    a = torch.empty(m, k, device="cuda", dtype=torch.float16)
    a.uniform_(0, 1, generator=gen)
    b = torch.empty(k, n, device="cuda", dtype=torch.float16)
    b.uniform_(0, 1, generator=gen)
    c = torch.empty(m, n, device="cuda", dtype=torch.float16)
    return a, b, c


check_implementation = match_reference(ref_kernel, rtol=2e-2, atol=2e-2)
