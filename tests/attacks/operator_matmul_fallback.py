# attack: operator_matmul_fallback — expected: rejected_by_rule heavy_op
import operator

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
    c[...] = operator.matmul(a, b.T).to(c.dtype)
    return c
