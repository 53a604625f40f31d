from typing import TypedDict, TypeVar

import torch

input_t = TypeVar("input_t", bound=tuple[torch.Tensor, torch.Tensor])  # (x (size,), out (1,))
output_t = TypeVar("output_t", bound=torch.Tensor)  # the sum of x, a float32 scalar


class TestSpec(TypedDict):
    size: int
    seed: int
