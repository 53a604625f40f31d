from typing import TypedDict, TypeVar

import torch

input_t = TypeVar("input_t", bound=tuple[torch.Tensor, torch.Tensor, torch.Tensor])  # (a (m, k), b (k, n), c (m, n))
output_t = TypeVar("output_t", bound=torch.Tensor)  # c = a @ b


class TestSpec(TypedDict):
    m: int
    n: int
    k: int
    seed: int
