"""Every load and store of a kernel under Triton's interpreter stays inside the tensors its launch
was given: installed in the simulated backend's fork server, before any fork.

The simulated device charges a launch without ``tl.dot`` for the bytes of the tensors passed to
it (evaluator/model/_timing.py). A kernel handed a narrowed view (``x[:1]``) that reads the rest
of the storage through pointer arithmetic would run correctly on a GPU and be charged for four
bytes; so would one that reads a tensor it was never given through another's pointer. Here such
an access fails the candidate at its first check, naming the kernel, the access and how far
outside it fell, so no time is invented. The same check finds plain out-of-bounds bugs the
interpreter would otherwise read as garbage.

A launch's allowed ranges are the byte spans of its tensor arguments as the interpreter binds
them (a view's span follows its strides, negative ones included); every masked-in address of a
load, store or atomic, plus its element's size, must fall inside one of them. The common case (one
contiguous span holds the whole access) costs two reductions over the addresses.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from typing import Any

import numpy as np
from triton.runtime.interpreter import _get_np_dtype  # imported once, not per access

_SPANS: contextvars.ContextVar[tuple[str, list[tuple[int, int, str]]] | None] = contextvars.ContextVar(
    "ks_launch_spans", default=None
)


class OutsideItsTensors(Exception):
    """A kernel touched memory outside every tensor its launch was given."""


def _span(t: Any) -> tuple[int, int]:
    """The bytes [start, end) a tensor view can reach through its sizes and strides."""
    size = t.element_size()
    low = high = 0
    if t.numel() == 0:
        return t.data_ptr(), t.data_ptr()
    for n, stride in zip(t.shape, t.stride(), strict=True):
        reach = (n - 1) * stride
        low, high = low + min(0, reach), high + max(0, reach)
    return t.data_ptr() + low * size, t.data_ptr() + (high + 1) * size


def _tensors(fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[tuple[str, Any]] | None:
    """The launch's tensor arguments by parameter name, bound as the interpreter binds them (launch
    options such as num_warps dropped); None where they cannot be bound (the interpreter then
    raises its own error, and nothing is checked)."""
    import inspect

    try:
        names = inspect.getfullargspec(fn).args
        bound = inspect.getcallargs(fn, *args, **{k: v for k, v in kwargs.items() if k in names})
    except TypeError:
        return None
    return [(name, v) for name, v in bound.items() if hasattr(v, "data_ptr") and hasattr(v, "stride")]


def _check(kind: str, ptrs: Any, mask: Any | None) -> None:
    bound = _SPANS.get()
    if bound is None:
        return
    kernel, spans = bound
    addresses = np.asarray(ptrs.data, dtype=np.uint64)
    if mask is not None:
        addresses = addresses[np.asarray(mask.data, dtype=bool)]
    if addresses.size == 0:
        return
    width = np.dtype(_get_np_dtype(ptrs.get_element_ty())).itemsize
    low, high = int(addresses.min()), int(addresses.max()) + width
    if any(start <= low and high <= end for start, end, _ in spans):
        return
    inside = np.zeros(addresses.shape, dtype=bool)
    for start, end, _ in spans:
        inside |= (addresses >= start) & (addresses + width <= end)
    if inside.all():
        return
    outside = addresses[~inside]
    first = int(outside.min())
    nearest = min(spans, key=lambda s: min(abs(first - s[0]), abs(first - s[1])))
    where = (
        f"{first + width - nearest[1]} bytes past the end of {nearest[2]}"
        if first >= nearest[1] - width
        else f"{nearest[0] - first} bytes before the start of {nearest[2]}"
    )
    raise OutsideItsTensors(
        f"{kernel}: a {kind} of {outside.size} element(s) outside every tensor the launch was given "
        f"(the first {where}); pass the whole tensors a kernel reads or writes: the simulated device "
        "charges a launch for the bytes of the tensors it is given"
    )


def confine_launches() -> bool:
    """Install the check (module note); True when applied, False if already applied."""
    from triton.runtime import interpreter

    executor = interpreter.GridExecutor
    if getattr(executor.__call__, "_ks_confined", False):
        return False
    call = executor.__call__

    def __call__(self: Any, *args: Any, **kwargs: Any) -> Any:
        tensors = _tensors(self.fn, args, kwargs)
        spans = None if tensors is None else [(*_span(t), name) for name, t in tensors]
        token = _SPANS.set(None if spans is None else (getattr(self.fn, "__name__", "kernel"), spans))
        try:
            return call(self, *args, **kwargs)
        finally:
            _SPANS.reset(token)

    __call__._ks_confined = True  # type: ignore[attr-defined]
    executor.__call__ = __call__
    builder = interpreter.InterpreterBuilder

    def checked(name: str, kind: str, ptr_at: int, mask_at: int | None) -> None:
        original: Callable[..., Any] = getattr(builder, name)

        def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
            _check(kind, args[ptr_at], args[mask_at] if mask_at is not None and mask_at < len(args) else None)
            return original(self, *args, **kwargs)

        wrapper.__name__ = name
        setattr(builder, name, wrapper)

    checked("create_load", "load", 0, None)
    checked("create_store", "store", 0, None)
    checked("create_masked_load", "load", 0, 1)
    checked("create_masked_store", "store", 0, 2)
    checked("create_atomic_rmw", "atomic", 1, 3)
    checked("create_atomic_cas", "atomic", 0, None)
    return True
