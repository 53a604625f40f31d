# attack: broadcast_sum_fallback — expected: crash launched no matrix work
# gpu-defence: timed for real: the product costs m*n*k memory traffic, and a shape that OOMs fails
import torch


def _dequantised(data):
    a, b, a_scale, b_scale, c = data
    m, k = a.shape
    n = b.shape[0]
    sa = a_scale.repeat_interleave(128, dim=1)[:, :k]
    sb = b_scale.repeat_interleave(128, dim=0).repeat_interleave(128, dim=1)[:n, :k]
    return a.float() * sa, b.float() * sb, c


def custom_kernel(data):
    a, b, c = _dequantised(data)
    # No matmul op at all: broadcast multiply and reduce.
    c[...] = (a[:, None, :] * b[None, :, :]).sum(-1).to(c.dtype)
    return c
