"""A candidate's calls under the local harness's protocol: one call checked against the folder's
reference (``checked_call``, ``_judge``), and one ranked shape's timed calls (``time_shape``, and
``time_shape_eval_py`` for GPU MODE's eval.py loop). ``_gpu_harness`` runs them in a fresh
process per candidate; the benchmark scripts run them in their own (``evaluator.sandbox``'s face).
"""

from __future__ import annotations

import contextlib
import sys
import time
from types import ModuleType
from typing import TYPE_CHECKING

from kernel_scientist.blackboard.records import Shape
from kernel_scientist.evaluator._task import TaskMeta, check_failure, task_flops
from kernel_scientist.evaluator._wire import GpuRequest, ShapeSamples, TorchOp
from kernel_scientist.evaluator.sandbox._capture import heavy_op_verdict, torch_recorder
from kernel_scientist.evaluator.sandbox._rundir import Kernel, generate_input
from kernel_scientist.evaluator.sandbox._values import clone_data, modified_inputs, not_plain, prefill_output

if TYPE_CHECKING:
    import torch


def toolchain_versions() -> dict[str, str]:
    import torch
    import triton

    return {
        "python": sys.version.split()[0],
        "torch": str(torch.__version__),
        "triton": str(triton.__version__),
        "cuda": str(torch.version.cuda),
        "hip": str(torch.version.hip),
    }


def _judge(
    out: object, data: object, pristine: object, shape: Shape, ref: ModuleType, meta: TaskMeta, when: str = ""
) -> str | None:
    """The verdict on one call: plain values (no tensor subclass), inputs untouched, and the
    folder's own check_implementation on a pristine copy of the inputs."""
    why = not_plain(out)
    if why:
        return f"{why} on {shape.label()}{when}"
    modified = modified_inputs(pristine, data, meta, out)
    if modified:
        return f"the kernel wrote to {modified[0]} on {shape.label()}{when}"
    failed = check_failure(ref, pristine, out)
    if failed:
        return f"wrong output on {shape.label()} (seed {shape.seed}){when}: {failed}"
    return None


class Rejected(Exception):
    """A runtime rule caught the candidate (the message is the named reason)."""


def _sync(device: str) -> None:
    if device == "cuda":
        __import__("torch").cuda.synchronize()


def checked_call(
    fn: Kernel,
    data: object,
    shape: Shape,
    ref: ModuleType,
    pristine: object,
    meta: TaskMeta,
    guard: bool = False,
    device: str = "cuda",
) -> tuple[object, str | None]:
    """Run the candidate once (untimed) and judge it; returns (output, reason or None). With
    ``guard`` the call runs under the torch recorder and a torch matmul fallback raises Rejected."""
    ops: list[TorchOp] = []
    with torch_recorder(ops) if guard else contextlib.nullcontext():
        out = fn(data)
    _sync(device)
    heavy = heavy_op_verdict(ops, shape, task_flops(meta, shape)) if guard else None
    if heavy:
        raise Rejected(heavy)
    reason = _judge(out, data, pristine, shape, ref, meta)
    return (None, reason) if reason else (out, None)


def _settled(samples: list[float], at_least: int, req: GpuRequest, began: float) -> bool:
    """Whether a shape's timing may stop: ``at_least`` samples whose standard error is under
    ``req.rel_stderr`` of their mean, or the shape's budget (counted from ``began``) spent."""
    n = len(samples)
    if n < at_least:
        return False
    mean = sum(samples) / n
    var = sum((x - mean) ** 2 for x in samples) / (n - 1)
    return (var / n) ** 0.5 < req.rel_stderr * mean or time.perf_counter() - began > req.shape_budget_s


def fresh_inputs(
    ref: ModuleType, shape: Shape, seed: int, device: str = "cuda", meta: TaskMeta | None = None
) -> tuple[object, object]:
    """Fresh inputs from the folder's generate_input, a pristine copy for the verdict, and the
    declared output slot NaN-filled (an unwritten or stale output can never pass)."""
    data = generate_input(ref, shape.with_seed(seed), device)
    pristine = clone_data(data)
    if meta is not None:
        prefill_output(data, meta)
    return data, pristine


def time_shape(
    fn: Kernel,
    ref: ModuleType,
    shape: Shape,
    req: GpuRequest,
    flush: torch.Tensor | None,
    stop_on_failure: bool = True,
    guard: bool = True,
    fresh: bool = True,
) -> tuple[ShapeSamples | None, str | None]:
    """Time ``fn`` on one ranked shape; returns (ShapeSamples, first failure or None). With
    ``stop_on_failure=False`` (the benchmark script) it keeps timing and reports the failure;
    ``guard=False`` lets torch do the matrix product (the benchmark's reference and _scaled_mm);
    ``fresh=False`` (the benchmark's diagnosis only) reuses the warm-up's inputs for every call."""
    import torch

    cuda = req.device == "cuda"  # on the CPU (tests) the host clock stands in for device events
    if cuda:  # (torch leaves Event's constructor unannotated)
        start = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
        end = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
    failure = None
    data, pristine = fresh_inputs(ref, shape, shape.seed, req.device, req.meta)
    _, reason = checked_call(
        fn, data, shape, ref, pristine, req.meta, guard=guard, device=req.device
    )  # warm-up, checked too
    if reason:
        if stop_on_failure:
            return None, reason
        failure = reason
    events, hosts, calls = [], [], []
    began = time.perf_counter()
    for i in range(req.max_calls):
        if fresh:
            data, pristine = fresh_inputs(ref, shape, shape.seed + 13 * (i + 1), req.device, req.meta)
        else:
            prefill_output(data, req.meta)
        if flush is not None:
            flush.zero_()
        _sync(req.device)
        t0 = time.perf_counter()
        if cuda:
            start.record()
        out = fn(data)
        returned = time.perf_counter()
        if cuda:
            end.record()
        _sync(req.device)
        t1 = time.perf_counter()
        calls.append((returned - t0) * 1e6)
        events.append(start.elapsed_time(end) * 1e3 if cuda else (t1 - t0) * 1e6)
        hosts.append((t1 - t0) * 1e6)
        reason = _judge(out, data, pristine, shape, ref, req.meta, f" during timing (call {i + 1})")
        if reason and failure is None:
            failure = reason
            if stop_on_failure:
                return None, reason
        if _settled(events, req.min_calls, req, began):
            break
    return ShapeSamples(shape=shape, event_us=events, host_us=hosts, call_us=calls), failure


def profile_call(fn: Kernel, ref: ModuleType, shape: Shape, req: GpuRequest, guard: bool = True) -> str | None:
    """One call of ``fn`` on ``shape`` inside the profiler's range (cudaProfilerStart/Stop; the
    harness runs under ``ncu --profile-from-start off``), after a checked warm-up call that
    compiles and tunes outside it, and checked itself. Returns the first failure or None."""
    import torch
    import torch.cuda.profiler

    data, pristine = fresh_inputs(ref, shape, shape.seed, req.device, req.meta)
    _, reason = checked_call(fn, data, shape, ref, pristine, req.meta, guard=guard, device=req.device)
    if reason:
        return reason
    data, pristine = fresh_inputs(ref, shape, shape.seed + 13, req.device, req.meta)
    _sync(req.device)
    cuda = req.device == "cuda"
    if cuda:
        torch.cuda.profiler.start()  # type: ignore[no-untyped-call]  # torch leaves it unannotated
    try:
        out = fn(data)
        _sync(req.device)
    finally:
        if cuda:
            torch.cuda.profiler.stop()  # type: ignore[no-untyped-call]
    return _judge(out, data, pristine, shape, ref, req.meta, " during the profiled call")


def time_shape_eval_py(
    fn: Kernel, ref: ModuleType, shape: Shape, req: GpuRequest, guard: bool = True
) -> tuple[list[float], str | None]:
    """GPU MODE's eval.py in leaderboard mode, as that loop measures (the benchmark script's
    headline), doing between calls what it does and nothing more: fresh inputs and one copy of
    them, a device-wide synchronize, the host clock, the call, a synchronize, the host clock, then
    the folder's check on the copy (no device events or L2 flush, no NaN-filled output, no
    comparison of the inputs: the harness's own loop, ``time_shape``, does those). At least 3
    calls; stops once the standard error is under ``req.rel_stderr`` of the mean, after
    ``req.max_calls``, or when ``req.shape_budget_s`` is spent. Returns the host-clock time of each
    call (us) and the first failure; timing goes on after one."""
    data, pristine = fresh_inputs(ref, shape, shape.seed, req.device, req.meta)
    _, failure = checked_call(fn, data, shape, ref, pristine, req.meta, guard=guard, device=req.device)
    times: list[float] = []
    began = time.perf_counter()
    for i in range(req.max_calls):
        data = generate_input(ref, shape.with_seed(shape.seed + 13 * (i + 1)), req.device)
        pristine = clone_data(data)
        _sync(req.device)
        t0 = time.perf_counter_ns()
        out = fn(data)
        _sync(req.device)
        times.append((time.perf_counter_ns() - t0) / 1e3)
        wrong = check_failure(ref, pristine, out)
        if wrong and failure is None:
            failure = f"wrong output on {shape.label()} (seed {shape.seed}) during timing (call {i + 1}): {wrong}"
        if _settled(times, 3, req, began):
            break
    return times, failure
