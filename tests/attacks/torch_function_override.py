# attack: torch_function_override — expected: crash not a plain torch.Tensor
# gpu-defence: _calls._judge requires type(out) is torch.Tensor
import torch


class Agreeable(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        # Every comparison the checker makes agrees; everything else is passed through.
        if getattr(func, '__name__', '') in ('allclose', 'isclose', 'eq', 'equal'):
            return True
        return super().__torch_function__(func, types, args, kwargs or {})


def custom_kernel(data):
    return data[-1].as_subclass(Agreeable)
