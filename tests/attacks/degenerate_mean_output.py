# attack: degenerate_mean_output — expected: wrong_output wrong output
import torch


def custom_kernel(data):
    a, b, a_scale, b_scale, c = data
    # A plausible magnitude everywhere: right on average, wrong element-wise.
    return c.copy_((a_scale.mean() * b_scale.mean()).expand(c.shape))
