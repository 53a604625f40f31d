import torch
from task import input_t, output_t


def custom_kernel(data: input_t) -> output_t:
    data, output = data
    weights = torch.tensor([0.2989, 0.5870, 0.1140], device=data.device, dtype=data.dtype)
    output[...] = torch.sum(data * weights, dim=-1)
    return output
