"""Hooks the sandbox sets into torch and Triton for the length of a block.

``dispatch_mode`` makes a torch dispatch mode from one function: the sandbox's three modes (the
torch recorder of ``_capture``, the dry pass's abstract evaluation in ``_prepare``, the scalar
reads on meta of ``_rundir``) differ only in what they do with each aten call. ``swapped`` replaces
attributes (Triton's launch paths, ``torch.Generator``) inside a block and puts the originals back
however it ends.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from torch._ops import OpOverload
    from torch.utils._python_dispatch import TorchDispatchMode

# What a mode does with one aten call: the operator, its positional and keyword arguments (a dict,
# never None); what it returns is the call's result.
DispatchHandler = Callable[["OpOverload", tuple[object, ...], dict[str, object]], object]


def dispatch_mode(handler: DispatchHandler) -> TorchDispatchMode:
    """A ``TorchDispatchMode`` that hands every aten call under it to ``handler``."""
    from torch.utils._python_dispatch import TorchDispatchMode

    # torch leaves TorchDispatchMode's __init_subclass__ and __init__ unannotated
    class _Mode(TorchDispatchMode):  # type: ignore[no-untyped-call]
        def __torch_dispatch__(
            self,
            func: OpOverload,
            types: object,
            args: tuple[object, ...] = (),
            kwargs: dict[str, object] | None = None,
        ) -> object:
            return handler(func, args, kwargs or {})

    return _Mode()  # type: ignore[no-untyped-call]


@contextlib.contextmanager
def swapped(*swaps: tuple[object, str, object]) -> Iterator[None]:
    """Each ``(owner, name, value)``: ``owner.name`` is ``value`` inside the block, and what it was
    before again on leaving it."""
    saved = [(owner, name, getattr(owner, name)) for owner, name, _ in swaps]
    for owner, name, value in swaps:
        setattr(owner, name, value)
    try:
        yield
    finally:
        for owner, name, original in saved:
            setattr(owner, name, original)
