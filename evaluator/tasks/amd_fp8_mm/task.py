"""Types of the amd-fp8-mm task, in the GPU MODE folder format."""

from typing import TypedDict, TypeVar

import torch

# (a, b, a_scale, b_scale, c): fp8 [m, k] and [n, k] column-major, fp32 scales, bf16 [m, n] output.
input_t = TypeVar("input_t", bound=tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor])
output_t = TypeVar("output_t", bound=torch.Tensor)


class TestSpec(TypedDict):
    """Keyword arguments of ``generate_input`` for one test or benchmark."""

    m: int
    n: int
    k: int
    seed: int
