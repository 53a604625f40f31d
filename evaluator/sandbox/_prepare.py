"""Compiling a candidate ahead, in its own harness process, while another candidate holds the GPU.

Compiling is most of an evaluation on a GPU: a tuning kernel's tests phase, three quarters of its
wall time, is Triton compiling its settings (docs/results.md#evaluations-per-gpu-hour). The local
backend therefore hands the next queued candidates to harness processes started early, and each
one runs a *dry pass* before its real request arrives: the candidate is imported and called once
per test and ranked shape on inputs that have the shapes, strides and dtypes of the real ones but
no values, with

- every Triton launch turned into a compile (``warmup``) plus the module load and launcher build
  that a first launch would do, and nothing sent to the GPU (an autotuner compiles each of its
  configs and benchmarks none);
- every torch operation that would run a kernel evaluated on the meta device instead (its result
  is an empty tensor of the right layout; an in-place one changes nothing).

So a dry pass computes nothing on the GPU: the candidate being timed meanwhile keeps the GPU to
itself. With ``compile_workers`` above one the launches only submit their compiles to a pool of
threads (Triton's own ``AsyncCompileMode``; its compiler and ptxas release the GIL), so a
candidate with several settings or splits compiles them side by side instead of one after another,
and the pass ends once every one is compiled and loaded. What the pass leaves is the candidate's
own Triton cache on disk, in its own process's private directory. The real run then imports the
submission afresh (no state of the dry pass survives but that cache) and finds its kernels
compiled. The verdict comes from the real run alone, exactly as without the pass; a pass that
fails, raises or overruns its budget only means that less is compiled ahead. One harness process
still serves one candidate, so nothing one candidate compiled is ever loaded by another.
"""

from __future__ import annotations

import contextlib
import signal
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import FrameType, ModuleType
from typing import TYPE_CHECKING, Protocol

from kernel_scientist.blackboard.records import Shape
from kernel_scientist.evaluator._wire import GpuRequest
from kernel_scientist.evaluator.sandbox._capture import ALLOCATION_OPS
from kernel_scientist.evaluator.sandbox._hooks import dispatch_mode, swapped
from kernel_scientist.evaluator.sandbox._rundir import (
    generate_input,
    import_reference,
    import_submission,
    isolate_candidate,
)

if TYPE_CHECKING:
    import torch
    from torch._ops import OpOverload


class FutureKernel(Protocol):
    """A kernel Triton compiles on a thread of the pool (its ``AsyncCompileMode``)."""

    def result(self, ignore_errors: bool = False) -> object:
        """The compiled kernel, once its compile has ended (None where it failed and errors are ignored)."""
        ...


DRY_PASS_BUDGET_S = 120.0  # a pass still running then is cut short; the real run compiles the rest


class _Overrun(BaseException):
    """The dry pass's budget ran out (a BaseException, so that the candidate's ``except
    Exception`` does not swallow it; the alarm repeats each second until the pass is left)."""


@contextlib.contextmanager
def dry_launches(device: str, pending: list[FutureKernel] | None = None) -> Iterator[None]:
    """Triton launches compile and load without running; torch kernels on ``device`` are
    evaluated on meta tensors. Undone on exit. Inside ``parallel_compiles`` a launch only submits
    its compile (the launch returns None) and its future kernel goes to ``pending``."""
    import torch
    from torch.utils._pytree import tree_map
    from triton.runtime import autotuner, driver, interpreter, jit

    compile_jit = jit.JITFunction.run

    def compile_only(self: jit.JITFunction, *args: object, grid: object, warmup: bool, **kwargs: object) -> object:
        kernel = compile_jit(self, *args, grid=grid, warmup=True, **kwargs)
        if pending is not None and hasattr(kernel, "result"):  # a future kernel: Triton's own test
            pending.append(kernel)  # compiling on the pool; reading any attribute would wait for it
            return None
        init = getattr(kernel, "_init_handles", None)
        if init is not None:
            init()  # loads the module and builds the launcher, as a first launch would
        return kernel

    def interpreted(
        self: interpreter.InterpretedFunction, *args: object, grid: object, warmup: bool, **kwargs: object
    ) -> None:
        return None  # the interpreter compiles nothing: skipping its run is the whole saving

    def each_config(self: autotuner.Autotuner, *args: object, **kwargs: object) -> None:
        for cfg in self.configs:
            self.fn.run(*args, **kwargs, **cfg.all_kwargs())

    def no_launch(self: object, *args: object, **kwargs: object) -> None:
        return None

    swaps: list[tuple[object, str, object]] = [
        (jit.JITFunction, "run", compile_only),
        (interpreter.InterpretedFunction, "run", interpreted),
        (autotuner.Autotuner, "run", each_config),
    ]
    with contextlib.suppress(Exception):  # no GPU driver (the CPU interpreter): nothing to patch there
        swaps.append((driver.active.launcher_cls, "__call__", no_launch))
    target = torch.device(device).type

    def abstract(func: OpOverload, args: tuple[object, ...], kwargs: dict[str, object]) -> object:
        name = str(func)
        if getattr(func, "is_view", False) or name.startswith(ALLOCATION_OPS):
            return func(*args, **kwargs)
        schema = getattr(func, "_schema", None)
        if schema is None:  # not an aten operator (a higher-order one): its parts come here again
            return func(*args, **kwargs)
        if schema.is_mutable and args and isinstance(args[0], torch.Tensor):
            return args[0]  # an in-place write: nothing to compute in a dry pass

        def to_meta(x: object) -> object:
            if isinstance(x, torch.Tensor) and x.device.type == target:
                return torch.empty_strided(x.shape, x.stride(), dtype=x.dtype, device="meta")
            if isinstance(x, torch.device) and x.type == target:
                return torch.device("meta")
            return x

        out = func(*tree_map(to_meta, args), **tree_map(to_meta, kwargs))
        where = next((t.device for t in _tensors((args, kwargs)) if t.device.type == target), torch.device(device))

        def back(x: object) -> object:
            if isinstance(x, torch.Tensor) and x.device.type == "meta":
                return torch.empty_strided(x.shape, x.stride(), dtype=x.dtype, device=where)
            return x

        return tree_map(back, out)

    with swapped(*swaps), dispatch_mode(abstract):
        yield


@contextlib.contextmanager
def parallel_compiles(workers: int) -> Iterator[list[FutureKernel] | None]:
    """Triton's asynchronous compile mode on a pool of ``workers`` threads, where this Triton has
    it (3.4 on) and more than one is asked for: yields the list that ``dry_launches`` fills with
    future kernels, else None (compiles then run in the launching thread, as always). On exit
    compiles not yet started are cancelled and running ones waited for, so no thread of the pass
    outlives it into the real run."""
    try:
        from triton.runtime import _async_compile
    except ImportError:
        _async_compile = None
    if workers < 2 or _async_compile is None:
        yield None
        return
    pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="ks-compile")
    mode = _async_compile.AsyncCompileMode(pool, ignore_errors=True)
    token = _async_compile.active_mode.set(mode)
    try:
        yield []
    finally:
        _async_compile.active_mode.reset(token)
        pool.shutdown(wait=True, cancel_futures=True)


def load_compiled(pending: list[FutureKernel]) -> None:
    """Wait for each future kernel of ``pending`` and load it (module and launcher, as a first
    launch would). A compile that failed is left to the real run, which reports it."""
    for future in pending:
        kernel = future.result(ignore_errors=True)
        with contextlib.suppress(Exception):
            if kernel is not None and hasattr(kernel, "_init_handles"):
                kernel._init_handles()


def _tensors(tree: object) -> list[torch.Tensor]:
    import torch
    from torch.utils._pytree import tree_leaves

    return [t for t in tree_leaves(tree) if isinstance(t, torch.Tensor)]


def layout_inputs(ref: ModuleType, shape: Shape, device: str) -> object:
    """The inputs of ``shape`` with the real ones' shapes, strides and dtypes and no values:
    generated on the meta device (no kernel runs), then allocated on ``device``."""
    import torch
    from torch.utils._pytree import tree_map

    data = generate_input(ref, shape, "meta")

    def real(x: object) -> object:
        if isinstance(x, torch.Tensor):
            return torch.empty_strided(x.shape, x.stride(), dtype=x.dtype, device=device)
        return x

    return tree_map(real, data)


def dry_pass(
    req: GpuRequest, folder: Path, budget_s: float = DRY_PASS_BUDGET_S
) -> tuple[dict[str, float], ModuleType | None]:
    """Import the task's reference, then the candidate, and call it once per distinct test and
    ranked shape under ``dry_launches``, compiling on ``req.compile_workers`` threads. Returns the
    pass's phases (``prepare_s``; ``prepare_calls``, the calls that returned) and the reference
    module, which the real run must use: it was loaded before any of the candidate's code ran, as
    the real run would load it. Whatever the candidate does (raises, exits, loops past the budget)
    ends the pass, not the process."""
    began = time.perf_counter()
    done, ref = 0, None
    expired, leaving = [False], [False]

    def overrun(signum: int, frame: FrameType | None) -> None:
        if leaving[0]:
            return
        expired[0] = True
        signal.setitimer(signal.ITIMER_REAL, 1.0)  # again, should the candidate catch it
        raise _Overrun()

    def stop_alarm() -> None:
        leaving[0] = True
        signal.setitimer(signal.ITIMER_REAL, 0)

    previous = signal.signal(signal.SIGALRM, overrun)
    signal.setitimer(signal.ITIMER_REAL, budget_s)
    try:
        ref = import_reference(req.modules)
        isolate_candidate(req.modules, folder)
        fn = import_submission(req.source, folder)
        seen: set[str] = set()
        with contextlib.ExitStack() as stack:
            pending = stack.enter_context(parallel_compiles(req.compile_workers))
            stack.callback(stop_alarm)  # before the pool is closed: its wait must not be interrupted
            # The ranked shapes too: a kernel may compile per shape (a split chosen per shape, say),
            # and their warm-up calls would otherwise compile on the GPU's time.
            for shape in [*req.tests, *req.benchmarks]:
                if expired[0] or fn is None:
                    break
                if shape.label() in seen:  # a repeated shape would only reach the launch replay
                    continue
                seen.add(shape.label())
                try:
                    data = layout_inputs(ref, shape, req.device)
                    with dry_launches(req.device, pending):
                        fn(data)
                    done += 1
                except (Exception, SystemExit):  # noqa: BLE001 - the candidate's failure ends only its own call
                    continue
            load_compiled(pending or [])
    except (_Overrun, Exception, SystemExit):  # noqa: BLE001 - an import that fails is the real run's verdict
        pass
    finally:
        stop_alarm()
        signal.signal(signal.SIGALRM, previous)
    return {"prepare_s": time.perf_counter() - began, "prepare_calls": float(done)}, ref
