# Correct and plain PyTorch: one library scan per row.
import torch
from task import input_t, output_t


def custom_kernel(x: input_t) -> output_t:
    return torch.cumsum(x, dim=1)
