"""Helpers shared by every task folder, in the GPU MODE reference-kernels style.

A run directory is assembled from a task's ``files:`` list, and this module lands there as
``utils.py`` next to ``reference.py``; so it imports nothing of ours, only torch and the standard
library. The element-wise rule (|out - ref| <= atol + rtol * |ref|, non-finite values only where the
reference has them) is the one the public leaderboard applied.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import torch


def set_seed(seed: int = 42) -> None:
    """Seed every generator a task may draw from (Python, torch CPU and, if present, the GPUs)."""
    random.seed(seed)
    torch.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(seed)


def verbose_allclose(
    received: torch.Tensor,
    expected: torch.Tensor,
    rtol: float = 1e-5,
    atol: float = 1e-8,
    max_print: int = 5,
) -> list[str]:
    """Compare two tensors element-wise and describe what is wrong.

    Returns:
        Human-readable lines, empty when every element is within ``atol + rtol * |expected|``.
        A shape mismatch, or NaN/Inf where the reference is finite, is reported as a failure.
    """
    if received.shape != expected.shape:
        return [f"SIZE MISMATCH: received {tuple(received.shape)}, expected {tuple(expected.shape)}"]

    # Compare in fp32 on one device: bf16 arithmetic would add its own rounding to the check.
    got = received.detach().to(device=expected.device, dtype=torch.float32)
    want = expected.detach().to(torch.float32)

    tolerance = atol + rtol * want.abs()
    close = (got - want).abs() <= tolerance
    # Non-finite values: equal only when both sides hold the same special value.
    both_nan = torch.isnan(got) & torch.isnan(want)
    same_inf = torch.isinf(got) & torch.isinf(want) & (torch.sign(got) == torch.sign(want))
    close = close | both_nan | same_inf
    # A NaN on either side makes the difference NaN, which compares False above: nothing to add.

    bad = (~close).nonzero()
    if bad.numel() == 0:
        return []
    lines = [f"Number of mismatched elements: {bad.shape[0]} of {want.numel()}"]
    for index in bad[:max_print].tolist():
        where = tuple(index)
        lines.append(f"ERROR at {where}: {got[where].item()!r} {want[where].item()!r}")
    if bad.shape[0] > max_print:
        lines.append(f"... and {bad.shape[0] - max_print} more mismatched elements.")
    return lines


def _clone(value: Any) -> Any:
    """Deep-copy tensors (keeping their strides) inside tuples, lists and dicts."""
    if isinstance(value, torch.Tensor):
        # empty_strided + copy_ keeps a column-major input column-major; clone() would too for
        # dense tensors, but this states the intent and also covers overlapping views.
        copy = torch.empty_strided(value.shape, value.stride(), dtype=value.dtype, device=value.device)
        copy.copy_(value)
        return copy
    if isinstance(value, tuple):
        return tuple(_clone(item) for item in value)
    if isinstance(value, list):
        return [_clone(item) for item in value]
    if isinstance(value, dict):
        return {key: _clone(item) for key, item in value.items()}
    return value


def make_match_reference(
    reference: Callable[[Any], Any], rtol: float = 1e-5, atol: float = 1e-8
) -> Callable[[Any, Any], tuple[bool, str]]:
    """Build ``check_implementation(data, output)`` that compares ``output`` with the reference.

    The reference runs on a private copy of ``data``: reference kernels write into the
    preallocated output tensor, and the submission may have returned that very tensor.
    """

    def check_implementation(data: Any, output: Any) -> tuple[bool, str]:
        expected = reference(_clone(data))
        if not isinstance(output, torch.Tensor):
            return False, f"expected a torch.Tensor output, got {type(output).__name__}"
        reasons = verbose_allclose(output, expected, rtol=rtol, atol=atol)
        if reasons:
            return False, "mismatch found! custom implementation doesn't match reference: " + " ".join(
                reasons
            )
        return True, ""

    return check_implementation
