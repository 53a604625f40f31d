# attack: patch_elapsed_time — expected: rejected_by_rule timer_patch
# gpu-defence: host-clock cross-check flags events that disagree (_local._timed)
import torch


def _fast(self, other):
    return 0.001


setattr(torch.cuda.Event, 'elapsed_time', _fast)


def custom_kernel(data):
    return data[-1]
