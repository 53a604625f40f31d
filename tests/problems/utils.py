"""Helpers shared by the test problem folders (a run directory gets this file as utils.py)."""

import torch


def allclose_report(received, expected, rtol=1e-5, atol=1e-8, max_print=3) -> list[str]:
    """The mismatches of two tensors, described (empty when they agree within tolerance)."""
    if not isinstance(received, torch.Tensor):
        return [f"expected a tensor, got {type(received).__name__}"]
    if received.shape != expected.shape:
        return [f"SIZE MISMATCH: got {tuple(received.shape)}, expected {tuple(expected.shape)}"]
    received = received.to(expected.dtype)
    bad = ((received - expected).abs() > atol + rtol * expected.abs()) | (received.isnan() != expected.isnan())
    count = int(bad.sum())
    if count == 0:
        return []
    lines = [f"{count} mismatched elements"]
    for index in bad.nonzero()[:max_print].tolist():
        i = tuple(index)
        lines.append(f"at {i}: {received[i].item()} vs {expected[i].item()}")
    return lines


def match_reference_message(reference, rtol=1e-5, atol=1e-8):
    """check_implementation in the format's older convention: a message, '' when it passes."""
    def check(data, output):
        reasons = allclose_report(output, reference(data), rtol=rtol, atol=atol)
        return ("output differs from the reference: " + "; ".join(reasons)) if reasons else ""
    return check
