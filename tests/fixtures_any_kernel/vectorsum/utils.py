"""The two helpers of GPU MODE's pmpp_v2/utils.py that reference.py imports."""

import torch


class DeterministicContext:
    def __init__(self):
        self.allow_tf32 = None
        self.deterministic = None

    def __enter__(self):
        self.allow_tf32 = torch.backends.cudnn.allow_tf32
        self.deterministic = torch.backends.cudnn.deterministic
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cudnn.deterministic = True
        torch.use_deterministic_algorithms(True)
        return self

    def __exit__(self, exc_type, exc_value, traceback):
        torch.backends.cudnn.allow_tf32 = self.allow_tf32
        torch.backends.cudnn.deterministic = self.deterministic
        torch.use_deterministic_algorithms(False)


def make_match_reference(reference, rtol=1e-5, atol=1e-8):
    """A check_implementation: (True, "") when the output matches the reference, else (False, why)."""

    def check(data, output):
        expected = reference(data)
        if not isinstance(output, torch.Tensor) or output.shape != expected.shape:
            return False, f"expected a tensor of shape {tuple(expected.shape)}"
        bad = ~torch.isclose(output.float(), expected.float(), rtol=rtol, atol=atol)
        return (False, f"{int(bad.sum())} elements differ from the reference") if bad.any() else (True, "")

    return check
