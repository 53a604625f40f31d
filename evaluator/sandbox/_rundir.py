"""A folder's run directory and inputs, assembled the way its task.yml says, out of the candidate's reach.

``import_reference`` loads reference.py with the files: list's helpers served on demand under their
run-directory names; ``isolate_candidate`` readies the candidate's own directory (the list's modules
but never the harness's); ``generate_input`` draws one test's inputs on the device we run on, also
from folders that hard-code ``device='cuda'``.
"""

from __future__ import annotations

import contextlib
import importlib.abc
import importlib.util
import inspect
import shutil
import sys
import types
from collections.abc import Callable, Iterator, Sequence
from importlib.machinery import ModuleSpec
from pathlib import Path
from typing import TYPE_CHECKING

from kernel_scientist.blackboard.records import Shape
from kernel_scientist.evaluator.sandbox._hooks import dispatch_mode, swapped

if TYPE_CHECKING:
    from torch._ops import OpOverload

# A submission's ``custom_kernel``: called with the inputs, returns its output (whatever it is).
Kernel = Callable[[object], object]


class _RunDirectory(importlib.abc.MetaPathFinder):
    """Serves the files: list's modules under their run-directory names, as if they sat beside
    reference.py, but only on demand: ``../eval.py`` (the public harness's main) imports
    ``reference`` itself and must not run just because it is listed."""

    def __init__(self, modules: dict[str, str], reference: types.ModuleType) -> None:
        self.modules = modules
        self.reference = reference

    def find_spec(
        self, name: str, path: Sequence[str] | None = None, target: types.ModuleType | None = None
    ) -> ModuleSpec | None:
        if name == "reference":
            return importlib.util.spec_from_loader(name, _Ready(self.reference))
        if name in self.modules:
            return importlib.util.spec_from_file_location(name, self.modules[name])
        return None


class _Ready(importlib.abc.Loader):
    def __init__(self, module: types.ModuleType) -> None:
        self.module = module

    def create_module(self, spec: ModuleSpec) -> types.ModuleType:
        return self.module

    def exec_module(self, module: types.ModuleType) -> None:
        pass


def _new_module(name: str, path: str | Path) -> tuple[types.ModuleType, importlib.abc.Loader]:
    """An empty module for the Python file at ``path``, and the loader that runs it."""
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"{path}: not a Python file that can be imported")
    return importlib.util.module_from_spec(spec), spec.loader


def import_reference(modules: dict[str, str], alias: str = "_ks_reference") -> types.ModuleType:
    """Load reference.py under a private name. While it executes, its helpers (``task``,
    ``utils``, whatever the files: list names) are importable under their plain names; afterwards
    they are removed again from sys.modules, so nothing later (candidate code included) finds them
    by a plain ``import``."""
    ref, loader = _new_module(alias, modules["reference"])
    names = set(modules) | {"reference"}
    saved = {name: sys.modules.pop(name, None) for name in names}
    finder = _RunDirectory({k: v for k, v in modules.items() if k != "reference"}, ref)
    sys.meta_path.insert(0, finder)
    try:
        loader.exec_module(ref)
        return ref
    finally:
        sys.meta_path.remove(finder)
        for name, old in saved.items():
            if old is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = old


_HARNESS = ("reference", "utils", "eval", "_ks_reference")


def isolate_candidate(modules: dict[str, str], folder: Path) -> None:
    """Ready a candidate's working folder: the files: list's own modules beside it (submissions do
    ``from task import input_t``) except the harness's (reference, utils, eval), and none of the
    harness's modules importable by name."""
    for name, file in modules.items():
        if name not in _HARNESS:
            shutil.copy(file, folder / f"{name}.py")
    for name in set(_HARNESS) | set(modules):
        sys.modules.pop(name, None)


# ---- inputs: generate_input as the folder wrote it, on the device we run on ------------------
def generate_input(ref: types.ModuleType, shape: Shape, device: str) -> object:
    """The inputs of one shape on ``device`` ("cuda", "cpu" or "meta").

    A generator that takes ``device`` gets it. Public folders hard-code ``device='cuda'`` instead;
    elsewhere than a GPU their CUDA requests are redirected (``_redirected``), so the same folder
    runs under the CPU interpreter and records launches on meta tensors.
    """
    fn = ref.generate_input
    kwargs = shape.kwargs()
    try:
        takes_device = "device" in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        takes_device = False
    if takes_device:
        return fn(**kwargs, device=device)
    if device == "cuda":
        return fn(**kwargs)
    with _redirected(device):
        return fn(**kwargs)


def _is_cuda(dev: object) -> bool:
    return dev is not None and str(dev).split(":")[0] == "cuda"


@contextlib.contextmanager
def _redirected(target: str) -> Iterator[None]:
    """Run torch code written for CUDA on ``target``: device= arguments, ``.cuda()`` and
    ``.to('cuda')`` move there, ``torch.Generator(device='cuda')`` becomes a CPU generator (meta
    random ops accept one), and on meta ``.item()`` reads 0 (a generator that draws a scalar
    offset still yields the right shapes). Only for trusted code: the folder's generator."""
    import torch
    from torch.overrides import TorchFunctionMode

    real_generator = torch.Generator

    # A type still (torch's own modules write `torch.Generator | None`), whose instances are CPU
    # generators: mypy allows neither a variable as a base class nor a __new__ of another type.
    class generator(real_generator):  # type: ignore[valid-type,misc]
        def __new__(cls, device: object = None) -> torch.Generator:  # type: ignore[misc]
            return real_generator(device="cpu")

    class Devices(TorchFunctionMode):
        def __torch_function__(
            self,
            func: Callable[..., object],
            types: object,
            args: tuple[object, ...] = (),
            kwargs: dict[str, object] | None = None,
        ) -> object:
            kwargs = dict(kwargs or {})
            if _is_cuda(kwargs.get("device")):
                kwargs["device"] = target
            name = getattr(func, "__name__", "")
            if name == "cuda" and isinstance(args[0], torch.Tensor):  # Tensor.cuda
                return args[0].to(target)
            if name == "to" and len(args) > 1 and _is_cuda(args[1]):
                args = (args[0], target, *args[2:])
            return func(*args, **kwargs)

    def scalars(func: OpOverload, args: tuple[object, ...], kwargs: dict[str, object]) -> object:
        x = args[0] if args else None
        if str(func).startswith("aten._local_scalar_dense") and isinstance(x, torch.Tensor) and x.device.type == "meta":
            return False if x.dtype == torch.bool else (0.0 if x.is_floating_point() else 0)
        return func(*args, **kwargs)

    scalar_reads = dispatch_mode(scalars) if target == "meta" else contextlib.nullcontext()
    with swapped((torch, "Generator", generator)), Devices(), scalar_reads:
        yield


def import_submission(source: str, folder: Path) -> Kernel | None:
    """Write ``source`` as submission.py in ``folder``, import it, and return its
    ``custom_kernel`` (None when it defines no callable of that name)."""
    path = folder / "submission.py"
    path.write_text(source)
    module, loader = _new_module("submission", path)
    sys.modules["submission"] = module
    loader.exec_module(module)
    fn = getattr(module, "custom_kernel", None)
    return fn if callable(fn) else None
