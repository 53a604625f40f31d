"""Inputs and outputs of a task's call, whatever their structure, across the sandbox boundary.

A folder's ``generate_input`` returns one tensor, a tuple of them, or a structure with other
values (sizes, flags); ``custom_kernel`` returns a tensor, several, or a plain number. The
candidate's process turns its output into a ``Value`` tree of raw bytes and plain numbers
(``encode_output``), and the judging process rebuilds plain tensors from it (``decode_output``):
nothing live (a tensor subclass, an object with its own ``__eq__``) crosses, whatever the shape of
the output (docs/evaluator-attacks.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeGuard

from kernel_scientist.evaluator._task import TaskMeta, tensor_bytes
from kernel_scientist.evaluator._wire import ScalarValue, SeqValue, TensorValue, Value

if TYPE_CHECKING:
    import torch


def tensors_of(data: object) -> list[torch.Tensor]:
    """The tensors inside an input or output structure (tuple, list, dict or one tensor), in order."""
    import torch

    if isinstance(data, torch.Tensor):
        return [data]
    if isinstance(data, (tuple, list)):
        return [t for x in data for t in tensors_of(x)]
    if isinstance(data, dict):
        return [t for x in data.values() for t in tensors_of(x)]
    return []


def clone_data(data: object) -> object:
    """A deep copy of the tensors of an input structure; other values shared (as the public harness)."""
    import torch

    if isinstance(data, torch.Tensor):
        return data.clone()
    if isinstance(data, (tuple, list)):  # copied as a plain tuple or list, whatever the subclass
        copies = [clone_data(x) for x in data]
        return tuple(copies) if isinstance(data, tuple) else copies
    if isinstance(data, dict):
        return {k: clone_data(v) for k, v in data.items()}
    return data


def output_slot(data: object, meta: TaskMeta) -> torch.Tensor | None:
    """The preallocated output tensor inside the inputs, when the task declares one."""
    import torch

    if meta.output is None or not isinstance(data, (tuple, list)):
        return None
    try:
        slot = data[meta.output]
    except IndexError:
        return None
    return slot if isinstance(slot, torch.Tensor) else None


def prefill_output(data: object, meta: TaskMeta) -> None:
    """NaN into the declared output slot: an unwritten or stale output can never pass."""
    slot = output_slot(data, meta)
    if slot is not None and slot.is_floating_point():
        slot.fill_(float("nan"))


def modified_inputs(before: object, after: object, meta: TaskMeta, out: object) -> list[str]:
    """Inputs the call wrote to. The declared output slot may be written, and so may an input the
    call returned (a folder without metadata whose kernel writes a preallocated output and
    returns it, as the public fp8-mm folder's does)."""
    import torch

    returned = {t.untyped_storage().data_ptr() for t in tensors_of(out) if type(t) is torch.Tensor}
    slot = output_slot(after, meta)
    changed = []
    for i, (a, b) in enumerate(zip(tensors_of(before), tensors_of(after))):
        if b is slot or b.untyped_storage().data_ptr() in returned:
            continue
        if a.shape != b.shape or a.dtype != b.dtype or not torch.equal(tensor_bytes(a), tensor_bytes(b)):
            changed.append(f"input {i}")
    return changed


def _plain_scalar(out: object) -> TypeGuard[int | float | bool | None]:
    """A plain number or None: exactly int, float or bool, no subclass."""
    return out is None or type(out) in (int, float, bool)


def _plain_seq(out: object) -> TypeGuard[tuple[object, ...] | list[object]]:
    """A plain tuple or list, no subclass (a named tuple, a list with its own methods)."""
    return type(out) in (tuple, list)


def not_plain(out: object) -> str | None:
    """Why an output is not plain values (a tensor subclass, an object of its own), or None.
    Tensors must be plain ``torch.Tensor``; numbers plain int, float, bool or None; containers
    plain tuples and lists."""
    import torch

    if type(out) is torch.Tensor or _plain_scalar(out):
        return None
    if _plain_seq(out):
        return next((why for why in map(not_plain, out) if why), None)
    return f"custom_kernel returned {type(out).__name__}, not a plain torch.Tensor (or a tuple, list or number)"


def encode_output(out: object) -> Value | str:
    """The output as a ``Value`` tree, or the reason it cannot be one (``not_plain``)."""
    import torch

    if type(out) is torch.Tensor:
        t = out.detach().contiguous()
        return TensorValue(
            dtype=str(t.dtype).removeprefix("torch."), dims=list(t.shape), data=tensor_bytes(t).cpu().numpy().tobytes()
        )
    if _plain_scalar(out):
        return ScalarValue(out)
    if _plain_seq(out):
        items: list[Value] = []
        for x in out:
            v = encode_output(x)
            if isinstance(v, str):
                return v
            items.append(v)
        return SeqValue(kind="tuple" if type(out) is tuple else "list", items=items)
    return not_plain(out) or "unreachable"


def decode_output(value: Value, device: str = "cpu") -> object:
    """Plain Python and torch values again, built by the judging process. Raises ValueError when
    the bytes do not form the announced tensor."""
    import torch

    if isinstance(value, ScalarValue):
        return value.value
    if isinstance(value, SeqValue):
        items = [decode_output(v, device) for v in value.items]
        return tuple(items) if value.kind == "tuple" else items
    dtype = getattr(torch, value.dtype, None)
    if not isinstance(dtype, torch.dtype):
        raise ValueError(f"unknown dtype {value.dtype!r}")
    try:
        raw = (
            torch.frombuffer(bytearray(value.data), dtype=torch.uint8)
            if value.data
            else torch.empty(0, dtype=torch.uint8)
        )
        return raw.view(dtype).reshape(value.dims).to(device)
    except (RuntimeError, ValueError) as exc:
        raise ValueError(f"output bytes do not form a {value.dtype} {value.dims} tensor ({exc})") from None
