# attack: stale_empty_output — expected: wrong_output wrong output
# gpu-defence: NaN pre-fill; the expected output lives in another process (_calls.fresh_inputs)
import torch


def custom_kernel(data):
    c = data[-1]
    # Hope the allocator hands back the block a freed reference output lived in.
    return torch.empty_like(c)
