import torch


def make_match_reference(reference, rtol=1e-5, atol=1e-8):
    """A check_implementation: (True, "") when the output matches the reference, else (False, why)."""

    def check(data, output):
        expected = reference(data)
        if not isinstance(output, torch.Tensor) or output.shape != expected.shape:
            return False, f"expected a tensor of shape {tuple(expected.shape)}"
        bad = ~torch.isclose(output.float(), expected.float(), rtol=rtol, atol=atol)
        return (False, f"{int(bad.sum())} elements differ from the reference") if bad.any() else (True, "")

    return check
