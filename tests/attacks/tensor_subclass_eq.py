# attack: tensor_subclass_eq — expected: crash not a plain torch.Tensor
# gpu-defence: _calls._judge requires type(out) is torch.Tensor
import torch


class AlwaysEqual(torch.Tensor):
    def __eq__(self, other):
        return True

    def __ne__(self, other):
        return False


def custom_kernel(data):
    return data[-1].as_subclass(AlwaysEqual)
