import torch
from task import input_t, output_t


def custom_kernel(data: input_t) -> output_t:
    data, _ = data
    return data.to(torch.float64).sum().to(torch.float32)
