# From GPU MODE's reference-kernels, problems/pmpp_v2/vectorsum_py/reference.py: the same sum and
# inputs, its check (make_match_reference's rtol 1e-5, atol 1e-8) as ../utils.py's match_reference,
# without its DeterministicContext (cuDNN flags, which no sum here reads).
import torch
from task import input_t, output_t
from utils import match_reference


def ref_kernel(data: input_t) -> output_t:
    data, _ = data
    return data.to(torch.float64).sum().to(torch.float32)


def generate_input(size: int, seed: int) -> input_t:
    gen = torch.Generator(device="cuda")
    gen.manual_seed(seed)
    data = torch.randn(size, device="cuda", dtype=torch.float32, generator=gen).contiguous()
    offset_gen = torch.Generator(device="cuda")
    offset_gen.manual_seed(seed + 1)
    scale_gen = torch.Generator(device="cuda")
    scale_gen.manual_seed(seed + 2)
    offset = (torch.rand(1, device="cuda", generator=offset_gen) * 200 - 100).item()
    scale = (torch.rand(1, device="cuda", generator=scale_gen) * 9.9 + 0.1).item()
    return (data * scale + offset).contiguous(), torch.empty(1, device="cuda", dtype=torch.float32)


check_implementation = match_reference(ref_kernel)
