"""Helpers shared by these test folders (a run directory gets this file as utils.py)."""

import torch


def match_reference(reference, rtol=1e-5, atol=1e-8):
    """check_implementation: (True, "") when the output matches the reference, else (False, why)."""

    def check(data, output):
        expected = reference(data)
        if not isinstance(output, torch.Tensor) or output.shape != expected.shape:
            return False, f"expected a tensor of shape {tuple(expected.shape)}"
        output = output.to(expected.dtype)
        bad = ((output - expected).abs() > atol + rtol * expected.abs()) | (output.isnan() != expected.isnan())
        if bad.any():
            first = tuple(bad.nonzero()[0].tolist())
            return False, f"{int(bad.sum())} elements differ from the reference, the first at {first}"
        return True, ""

    return check
