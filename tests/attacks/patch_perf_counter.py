# attack: patch_perf_counter — expected: rejected_by_rule timer_patch
# gpu-defence: timers and statistics in the parent: host clock in the harness is cross-checked, stats computed in _local
import time

import torch

_real = time.perf_counter
time.perf_counter = lambda: _real() * 0.5


def custom_kernel(data):
    return data[-1]
