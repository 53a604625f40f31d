"""One candidate on one GPU: ``python -m kernel_scientist.evaluator.sandbox._gpu_harness RESULT_FD``
(a fresh process each; with ``GpuRequest.device == "cpu"`` the same protocol runs under Triton's
interpreter, for tests).

The trusted parent (``backends._local.LocalBackend``) sends a ``GpuRequest`` on stdin (the seeds are already
mixed with its secret seed, so nothing secret is in the environment) and reads one ``GpuResult``
from the result pipe, which this process writes together with the per-run token it was given.
Output the candidate prints goes to stdout/stderr, which the parent truncates.

The protocol, per the public harness hardened against docs/evaluator-attacks.md:
- the reference module is loaded under a private name and removed from ``sys.modules`` before the
  candidate is imported; the candidate runs in its own temporary working directory, beside a copy
  of the task's ``task.py`` (submissions do ``from task import input_t``);
- with the own-kernel policy (a campaign's), every test call and each ranked shape's warm-up call
  run under a torch dispatch recorder: a candidate whose torch ops did a quarter of the task's
  multiply-adds is rejected (heavy_op_runtime);
- tests: fresh inputs per shape from the folder's ``generate_input`` (whatever its arguments), the
  declared output slot pre-filled with NaN, inputs verified unchanged, the verdict from the
  folder's own ``check_implementation`` on a pristine copy;
- ranked shapes: one untimed warm-up call, then between ``min_calls`` and ``max_calls`` timed calls
  until the standard error is under ``rel_stderr`` of the mean or the shape's budget is spent;
  before every timed call fresh inputs (seed + 13 i), a NaN-filled output and an L2 flush (a write
  of twice the L2 size); around it device events and, between device-wide synchronizes, the host
  clock; after it a full re-check. The first failure ends the run.
- asked to profile (``profile_shape``; the parent runs this process under ncu), one checked
  warm-up call and one call of that ranked shape inside the profiler's range, and no timing;
- after the last call, whatever the outcome: the compile statistics of every Triton kernel the
  process loaded (``_compile_stats.loaded_stats``), read from Triton's caches, not the GPU.
The raw samples go back; statistics, the speed-of-light floor and the score are computed by the
parent. A CUDA error ends this process: the next candidate gets a fresh one.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
import traceback
from pathlib import Path
from types import ModuleType

import msgspec
from kernel_scientist.blackboard.records import CompileStats
from kernel_scientist.evaluator._wire import PREPARE, PREPARED, GpuRequest, GpuResult, GpuStatus
from kernel_scientist.evaluator.sandbox._calls import (
    Rejected,
    checked_call,
    fresh_inputs,
    profile_call,
    time_shape,
    toolchain_versions,
)
from kernel_scientist.evaluator.sandbox._compile_stats import device_limits, loaded_stats
from kernel_scientist.evaluator.sandbox._lifetime import die_with_parent
from kernel_scientist.evaluator.sandbox._prepare import dry_pass
from kernel_scientist.evaluator.sandbox._rundir import (
    import_reference,
    import_submission,
    isolate_candidate,
)


def run(req: GpuRequest, phases: dict[str, float] | None = None, ref: ModuleType | None = None) -> GpuResult:
    """The protocol on ``req``; ``phases`` (the start-up's, from ``main``) gains this run's
    phases and comes back in the result. ``ref``: the task's reference as a dry pass loaded it
    (before the candidate's code first ran), else it is loaded here."""
    phases = dict(phases or {})
    began = time.perf_counter()
    result = _run(req, phases, ref)
    phases.setdefault("setup_s", time.perf_counter() - began)
    return msgspec.structs.replace(
        result, phases={k: round(v, 3) for k, v in phases.items()}, compile_stats=_compile_stats(req, result.device)
    )


def _compile_stats(req: GpuRequest, device: str) -> list[CompileStats]:
    """What the driver loaded for every Triton kernel that ran, read after the last timed call
    (the task's own modules' kernels left out); empty in CPU mode, where the interpreter
    compiles nothing."""
    if req.device != "cuda":
        return []
    return loaded_stats(f"loaded by the driver on {device or 'the GPU'}", device_limits(), req.modules.values())


def _run(req: GpuRequest, phases: dict[str, float], ref: ModuleType | None = None) -> GpuResult:
    import torch

    began = time.perf_counter()

    def lap(name: str) -> None:  # the wall time since the previous lap goes to phase ``name``
        nonlocal began
        now = time.perf_counter()
        phases[name] = now - began
        began = now

    ref = ref or import_reference(req.modules)
    device = torch.cuda.get_device_name(0) if req.device == "cuda" else "cpu (Triton interpreter)"
    versions = toolchain_versions()
    isolate_candidate(req.modules, Path.cwd())  # the working directory is the candidate's own
    phase = "import"
    try:
        fn = ref.ref_kernel if req.time_reference else import_submission(req.source, Path.cwd())
        guard = req.own_kernel and not req.time_reference  # the policy on what the kernel may call
        if fn is None:
            return GpuResult("compile_error", "submission defines no custom_kernel(data) function", device=device)
        lap("setup_s")
        for shape in req.tests:
            phase = f"test {shape.label()}"
            data, pristine = fresh_inputs(ref, shape, shape.seed, req.device, req.meta)
            _, reason = checked_call(fn, data, shape, ref, pristine, req.meta, guard=guard, device=req.device)
            if reason:
                return GpuResult("wrong_output", reason, device=device, versions=versions)
        lap("tests_s")  # the first calls: compilation and any first-call tuning land here
        if req.profile_shape >= 0:  # under ncu (evaluator/sandbox/_ncu.py): one profiled call, no timing
            shape = req.benchmarks[req.profile_shape]
            phase = f"profiled {shape.label()}"
            reason = profile_call(fn, ref, shape, req, guard=guard)
            lap("profile_s")
            if reason:
                return GpuResult("wrong_output", reason, device=device, versions=versions)
            return GpuResult("ok", device=device, versions=versions)
        flush = (
            torch.empty(req.l2_flush_bytes // 4, dtype=torch.float32, device="cuda") if req.device == "cuda" else None
        )
        samples = []
        for shape in req.benchmarks:
            phase = f"ranked {shape.label()}"
            timed, reason = time_shape(fn, ref, shape, req, flush, guard=guard)
            if reason:
                return GpuResult("wrong_output", reason, device=device, versions=versions)
            assert timed is not None  # no failure, so the shape was timed
            samples.append(timed)
        lap("timing_s")
        return GpuResult("ok", samples=samples, device=device, versions=versions)
    except Rejected as exc:
        return GpuResult("rejected", str(exc), device=device, versions=versions)
    except torch.cuda.OutOfMemoryError as exc:
        return GpuResult("oom", f"out of memory during {phase}: {str(exc).splitlines()[0][:300]}", device=device)
    except BaseException as exc:  # the candidate may raise anything
        frames = traceback.extract_tb(exc.__traceback__)
        where = next(
            (
                f"{os.path.basename(fr.filename)}:{fr.lineno}"
                for fr in reversed(frames)
                if fr.filename.endswith("submission.py")
            ),
            "",
        )
        text = " ".join(f"{type(exc).__name__}: {exc}".split())[:400]
        kind: GpuStatus = "compile_error" if "CompilationError" in type(exc).__name__ or phase == "import" else "crash"
        return GpuResult(
            kind, f"{text} during {phase}{' at ' + where if where else ''}", device=device, versions=versions
        )


def _preload() -> None:
    """Import what every run needs before the request arrives: a process the parent starts early
    (``backends._local``'s spare) spends its start-up while the GPU serves the previous candidate. Nothing
    here touches the GPU: CUDA starts with the request's first tensor."""
    import torch  # noqa: F401
    import triton  # noqa: F401
    import triton.language  # noqa: F401

    # A Triton launch under a torch dispatch mode (the recorder of the test calls, a submission's
    # launch replay) makes torch import its Triton wrapper, which pulls in torch._dynamo, sympy
    # and FSDP: 5.2 s of an evaluation's tests phase where torch's sources had no bytecode cache
    # (profile-eval-k40.txt in docs/results/explorations.tar.gz). Imported here it is part of
    # the spare's start-up.
    with contextlib.suppress(ImportError):
        import torch._higher_order_ops.triton_kernel_wrap  # noqa: F401
    if os.environ.get("TRITON_INTERPRET") == "1":  # the CPU mode: the fork server's interpreter shortcuts
        from kernel_scientist.evaluator.sandbox import _interpreter

        _interpreter.remove_repeated_work()


def main() -> None:
    began = time.perf_counter()
    die_with_parent()  # a hung kernel must not outlive the evaluator that started it
    fd = int(sys.argv[1])
    _preload()
    ready = time.perf_counter()
    phases = {"preload_s": ready - began}
    line, ahead, ref = sys.stdin.buffer.readline(), None, None
    if line == PREPARE:  # a dry pass first (evaluator/sandbox/_prepare.py), then the real request
        ahead = msgspec.msgpack.decode(sys.stdin.buffer.read(int(sys.stdin.buffer.readline())), type=GpuRequest)
        try:
            done, ref = dry_pass(ahead, Path.cwd())
            phases.update(done)
        except BaseException:  # noqa: BLE001 - a pass cut short leaves the real run to compile
            pass
        with contextlib.suppress(OSError):  # tells the evaluator this one can start without compiling
            Path(PREPARED).touch()
        ready = time.perf_counter()
        line = sys.stdin.buffer.readline()
    token = line.strip()
    req = msgspec.msgpack.decode(sys.stdin.buffer.read(), type=GpuRequest)
    phases["idle_s"] = time.perf_counter() - ready
    os.set_inheritable(fd, False)
    channel = os.fdopen(fd, "wb")
    if ahead is not None and ahead.source != req.source:  # one process, one candidate: never another's
        result = GpuResult("crash", "the harness process was prepared for another candidate")
    else:
        if ahead is None and req.compile_workers > 1 and not req.time_reference:
            # Nothing compiled ahead: the same dry pass now, so that the candidate's settings still
            # compile side by side rather than one by one in its tests.
            with contextlib.suppress(BaseException):
                done, ref = dry_pass(req, Path.cwd())
                phases.update(compile_s=done["prepare_s"], compile_calls=done["prepare_calls"])
        result = run(req, phases, ref)
    channel.write(token + b"\n" + msgspec.msgpack.encode(result))
    channel.close()
    os._exit(0)  # skip interpreter teardown: a broken CUDA context can hang at exit


if __name__ == "__main__":
    main()
