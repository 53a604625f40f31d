from typing import TypedDict, TypeVar

import torch

input_t = TypeVar("input_t", bound=tuple[torch.Tensor, torch.Tensor])  # (RGB image (H, W, 3), output (H, W))
output_t = TypeVar("output_t", bound=torch.Tensor)  # the grayscale image (H, W)


class TestSpec(TypedDict):
    size: int  # H = W
    seed: int
