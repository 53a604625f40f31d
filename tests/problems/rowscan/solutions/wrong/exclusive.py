# Wrong: an exclusive scan (each sum leaves out its own element).
import torch
from task import input_t, output_t


def custom_kernel(x: input_t) -> output_t:
    return torch.cumsum(x, dim=1) - x
