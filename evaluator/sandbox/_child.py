"""The candidate's side of the sandbox: what one forked child does, start to exit.

The fork server calls ``child_main`` right after ``fork()``. The child leaves the server's session
(so a timeout can kill its whole process group), moves into a fresh directory with its own Triton
and torch-extension caches, sends stdout/stderr into the server's output pipe, limits its address
space (CPU only: RLIMIT_AS would break CUDA), then:

1. draws the check inputs with the task's ``generate_input`` and the ranked shapes' inputs as
   ``meta`` tensors, *before* the candidate's module exists, from the reference module the fork
   server imported under a private name (``preload_reference``; else it imports it itself), and
   drops the task's modules from ``sys.modules`` so a plain ``import reference`` finds nothing;
2. imports the candidate from ``submission.py`` in its directory, with every tensor answering
   ``is_cuda`` as it would on the simulated GPU (True): a kernel guarded by
   ``if not x.is_cuda: return <PyTorch>`` takes the path a GPU would take, not its fallback
   (``_as_device_tensors``);
3. on each check shape runs ``custom_kernel`` on clones (a declared output slot pre-filled with
   NaN) under the Triton CPU interpreter, confirms the inputs were not written, and keeps the
   output as plain values and raw bytes (``_values``);
4. (evaluate only) calls ``custom_kernel`` on each ranked shape's meta inputs with launches
   captured instead of run (``_capture``), and, when the backend asks for compile statistics,
   compiles the captured launches' kernels for the simulated device's architecture once the
   checks are done (``_compile_stats``);
5. writes one msgpack ``ChildResult`` to ``.result`` and exits with ``os._exit``.

The verdict is not computed here: the parent regenerates the inputs, runs the reference and judges
the bytes, out of the candidate's reach (docs/evaluator-attacks.md).
"""

from __future__ import annotations

import contextlib
import os
import resource
import sys
import time
import traceback
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

import msgspec
from kernel_scientist.blackboard.records import CompileStats, Shape
from kernel_scientist.evaluator._task import task_flops
from kernel_scientist.evaluator._wire import Capture, CheckOutput, ChildRequest, ChildResult, Launch, TorchOp
from kernel_scientist.evaluator.sandbox._capture import capture_launches, heavy_op_verdict
from kernel_scientist.evaluator.sandbox._compile_stats import (
    LaunchCall,
    compiled_stats,
    limits_of,
    remember_language,
)
from kernel_scientist.evaluator.sandbox._rundir import (
    Kernel,
    generate_input,
    import_reference,
    import_submission,
    isolate_candidate,
)
from kernel_scientist.evaluator.sandbox._values import clone_data, encode_output, modified_inputs, prefill_output

if TYPE_CHECKING:
    from kernel_scientist.evaluator.model import DeviceSpec

RESULT_FILE = ".result"
_encoder = msgspec.msgpack.Encoder()


def preload() -> None:
    """Import everything a child needs, once, in the server (a fork then starts in ~10 ms).

    The fake-tensor warm-up matters: its first use costs about a second of lazy imports. It runs
    no real tensor compute, so the server stays single-threaded and safe to fork.
    """
    import kernel_scientist.evaluator.model._timing  # noqa: F401
    import numpy  # noqa: F401
    import torch
    import triton  # noqa: F401
    import triton.language  # noqa: F401
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.utils._python_dispatch import TorchDispatchMode  # noqa: F401

    try:  # the interpreter imports gluon lazily at the first launch: ~65 ms per child otherwise
        import triton.experimental.gluon.nvidia.hopper  # noqa: F401
    except ImportError:  # older triton (the GPU machine's 3.6) may not have it
        pass

    with FakeTensorMode():
        torch.randn((4, 4), dtype=torch.bfloat16).to(torch.float8_e4m3fn).T.contiguous()
    remember_language()  # before any candidate's kernel runs under the interpreter (_compile_stats)


# The task's reference module per files: list, imported by the fork server before it forks (trusted
# task code, no candidate exists yet), so a child draws its inputs from its inherited copy instead
# of compiling reference.py and utils.py again (about 9 ms of each run). Never in sys.modules, so
# still unimportable by name; a child gets its own copy-on-write view, so nothing it does to it
# reaches the server or the next child. (Its import runs in the server's directory and
# environment, not the child's: a reference reads neither at import.) None: the server's import
# failed or started a thread; each child imports it itself.
_references: dict[tuple[tuple[str, str], ...], ModuleType | None] = {}


def _threads() -> int:
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return -1


def preload_reference(modules: dict[str, str]) -> None:
    """Import the task's reference in the fork server, once per files: list. One that fails to
    import, or that started a thread (a fork then copies only the forking thread), is left to
    each child to import."""
    key = tuple(sorted(modules.items()))
    if key in _references:
        return
    _references[key] = None  # tried: a failure is not retried in the server
    threads = _threads()
    try:
        module = import_reference(modules)
    except BaseException:  # noqa: BLE001 - the child imports it again and reports the failure
        return
    if threads != -1 and _threads() == threads:
        _references[key] = module


def _reference(modules: dict[str, str]) -> ModuleType:
    """The server's import of the task's reference, else a fresh one."""
    return _references.get(tuple(sorted(modules.items()))) or import_reference(modules)


def _one_line(text: object, limit: int = 400) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _where(exc: BaseException) -> str:
    """The most telling frame: the last one in the candidate's file, else the last one."""
    frames = traceback.extract_tb(exc.__traceback__)
    if exc.__cause__ is not None and exc.__cause__.__traceback__ is not None:
        frames += traceback.extract_tb(exc.__cause__.__traceback__)
    mine = [f for f in frames if f.filename.endswith("submission.py")]
    if not frames:
        return ""
    f = (mine or frames)[-1]
    return f" (submission.py line {f.lineno}, in {f.name})" if mine else f" ({Path(f.filename).name}:{f.lineno})"


def _classify(exc: BaseException, phase: str) -> ChildResult:
    """Map an exception to the child's status. Under the interpreter, Triton's front-end errors
    (type or shape errors inside ``triton.language``) surface as ``InterpreterError`` at call time;
    on a GPU they would fail compilation, so they count as compile errors."""
    from triton.compiler.errors import CompilationError
    from triton.runtime.errors import InterpreterError

    if isinstance(exc, MemoryError):
        return ChildResult("oom", f"MemoryError during {phase}")
    inner = exc.__cause__ if isinstance(exc, InterpreterError) and exc.__cause__ is not None else exc
    where = "" if isinstance(inner, SyntaxError) else _where(exc)  # a SyntaxError names its own line
    msg = f"{type(inner).__name__}: {_one_line(inner)}{where}"
    if isinstance(inner, MemoryError):
        return ChildResult("oom", f"MemoryError during {phase}")
    if isinstance(inner, RuntimeError) and "can't allocate memory" in str(inner):  # torch's CPU allocator
        return ChildResult("oom", f"out of memory during {phase}: {msg}")
    if isinstance(inner, (SyntaxError, CompilationError)) or (phase == "import" and isinstance(inner, ImportError)):
        return ChildResult("compile_error", msg)
    if isinstance(exc, InterpreterError):
        frames = traceback.extract_tb(inner.__traceback__)
        if frames and "triton/language" in frames[-1].filename.replace(os.sep, "/"):
            return ChildResult("compile_error", f"Triton would not compile this: {msg}")
    return ChildResult("crash", f"{msg} during {phase}")


def meta_inputs(ref: ModuleType, shape: Shape) -> object:
    """Ranked-shape inputs with layout and no data. A generator that cannot run on ``meta``
    (one that computes on its data) runs under FakeTensorMode instead, and its fake CPU tensors
    are rebuilt as meta tensors with the same shapes, strides and dtypes."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode

    try:
        return generate_input(ref, shape, "meta")
    except Exception:
        with FakeTensorMode():
            fake = generate_input(ref, shape, "cpu")

    def rebuild(x: object) -> object:
        if isinstance(x, torch.Tensor):
            return torch.empty_strided(x.shape, x.stride(), dtype=x.dtype, device="meta")
        if isinstance(x, (tuple, list)):
            return type(x)(rebuild(v) for v in x)
        return x

    return rebuild(fake)


def _check_one(
    fn: Kernel, shape: Shape, data: object, req: ChildRequest, launches: list[Launch] | None = None
) -> CheckOutput | ChildResult:
    clones = clone_data(data)
    prefill_output(clones, req.meta)  # stale or skipped writes cannot pass as zeros
    ops: list[TorchOp] = []
    with capture_launches([] if launches is None else launches, ops, execute=True):
        out = fn(clones)
    value = encode_output(out)
    if isinstance(value, str):
        return ChildResult("crash", f"{value} on {shape.label()}")
    heavy = heavy_op_verdict(ops, shape, task_flops(req.meta, shape)) if req.own_kernel else None
    if heavy:
        return ChildResult("rejected", heavy)
    modified = modified_inputs(data, clones, req.meta, out)
    return CheckOutput(shape=shape, value=value, inputs_modified=", ".join(modified) or None)


def probe_index(shapes: list[Shape]) -> int:
    """The check shape that is probed on meta inputs and re-checked after capture: the largest, so
    that a cheat which launches fewer tiles shows in its grid."""
    return max(range(len(shapes)), key=lambda i: (shapes[i].work(), -i))


def recheck_index(shapes: list[Shape]) -> int:
    """The check shape run again after launch capture ("correct first, wrong later"): the smallest,
    which costs the interpreter least; any shape catches a kernel that changes its answers."""
    return min(range(len(shapes)), key=lambda i: (shapes[i].work(), i))


def _no_meta_kernel(exc: BaseException) -> bool:
    """A torch op that cannot run on meta tensors (no meta kernel, or ``.item()`` on one): the
    call cannot be recorded, which is the model's limit, not the candidate's fault."""
    text = str(exc).lower()
    return "meta" in text and ("kernel" in text or "item()" in text or "meta tensors" in text)


_Plan = tuple[str, tuple[int, ...], int, int, list[tuple[str, int | bool | float]]]


def _launch_plan(launches: list[Launch]) -> list[_Plan]:
    """What must not depend on whether the data is real: which kernels, on which grids, how."""
    return [(x.kernel, tuple(x.grid), x.num_warps, x.num_stages, sorted(x.constexprs.items())) for x in launches]


def _as_device_tensors(torch: Any) -> None:
    """Every tensor of this child answers ``is_cuda`` with True, as the simulated GPU's would
    (ROCm's tensors say True as well). The inputs are CPU tensors for the interpreter (and meta
    tensors for the timing, which must take the same path); a kernel that asked where they live
    would otherwise time its PyTorch fallback, a path the GPU never takes. ``x.device`` stays
    true: allocations must land where the interpreter can run."""
    torch.Tensor.is_cuda = property(lambda self: True)


def _work(req: ChildRequest, workdir: Path) -> ChildResult:
    import torch

    began = time.monotonic()
    torch.set_num_threads(1)
    phase = _Phase("input generation")
    ref = _reference(req.modules)
    checks_in = [(s, generate_input(ref, s, "cpu")) for s in req.check]
    bench_in = [(s, meta_inputs(ref, s)) for s in req.bench]
    # The first check shape again on meta inputs: its recorded launches must match the real run's, or
    # the timing (recorded on meta) would be of work the checked run did not do.
    probe = probe_index(req.check) if req.mode == "evaluate" and req.check else None
    probe_in = meta_inputs(ref, req.check[probe]) if probe is not None else None
    del ref
    isolate_candidate(req.modules, workdir)
    _as_device_tensors(torch)

    try:
        phase.now = "import"
        fn = import_submission(req.source, workdir)
        if fn is None:
            return ChildResult("compile_error", "submission defines no custom_kernel(data) function")
        checks: list[CheckOutput] = []
        real_launches: list[Launch] = []
        for i, (shape, data) in enumerate(checks_in):
            phase.now = f"the correctness run on {shape.label()}"
            got = _check_one(fn, shape, data, req, real_launches if i == probe else None)
            if isinstance(got, ChildResult):
                return got
            checks.append(got)
        unrecordable = None  # why the calls cannot run on meta tensors: then nothing is timed
        if probe is not None and probe_in is not None:
            probed = _probe_on_meta(fn, req.check[probe], probe_in, real_launches, phase)
            if isinstance(probed, ChildResult):
                return probed
            unrecordable = probed
        captures: list[Capture] = []
        calls: dict[int, LaunchCall] | None = {} if req.compile_cache else None
        if req.mode == "evaluate":
            captures = _capture_ranked(fn, bench_in, req.device, unrecordable, phase, calls)
            if probe is not None:  # re-check after capture: correct during the checks, wrong later is caught
                shape, data = checks_in[recheck_index(req.check)]
                phase.now = f"the re-check on {shape.label()} after launch capture"
                got = _check_one(fn, shape, data, req)
                if isinstance(got, ChildResult):
                    return got
                checks.append(got)
        stats = _compile_stats(req, captures, calls, req.compile_by_s - (time.monotonic() - began))
        return ChildResult("ok", checks=checks, captures=captures, compile_stats=stats)
    except BaseException as exc:  # the candidate may raise anything, SystemExit included
        return _classify(exc, phase.now)


class _Phase:
    """What the candidate's process is doing, named in the reason when the candidate fails."""

    def __init__(self, now: str) -> None:
        self.now = now


def _probe_on_meta(
    fn: Kernel, shape: Shape, data: object, real_launches: list[Launch], phase: _Phase
) -> ChildResult | str | None:
    """Run the first check shape again on meta inputs: its recorded launches must match the checked
    run's, or the timing (recorded on meta) would be of work the checked run did not do. Returns a
    rejection, or why the call cannot run on meta tensors (then nothing is timed), or None."""
    phase.now = f"launch capture on meta tensors ({shape.label()})"
    probed: list[Launch] = []
    try:
        with capture_launches(probed, [], choose=lambda opts: 0):  # execute=True runs configs[0] too
            fn(data)
    except (NotImplementedError, RuntimeError) as exc:
        if not _no_meta_kernel(exc):
            raise
        return f"{type(exc).__name__}: {_one_line(exc, 200)}"
    meta, checked = _launch_plan(probed), _launch_plan(real_launches)
    if meta != checked:
        return ChildResult("rejected", f"rule meta_consistency: on {shape.label()} {_plan_difference(meta, checked)}")
    return None


def _plan_text(plan: _Plan) -> str:
    """One launch as a sentence names it: "fp8_gemm_kernel on a 4x1x1 grid, 4 warps, 2 stages,
    BLOCK_K=128, BLOCK_M=64"."""
    kernel, grid, warps, stages, constexprs = plan
    settings = "".join(f", {name}={value}" for name, value in constexprs)
    return f"{kernel} on a {'x'.join(map(str, grid))} grid, {warps} warps, {stages} stages{settings}"


def _plan_difference(meta: list[_Plan], checked: list[_Plan]) -> str:
    """Why a call on meta inputs is not the checked call, in a sentence: how many launches each
    made and the first launch where they part."""
    counts = f"the call made {len(meta)} launch(es) on meta inputs and {len(checked)} when it was checked"
    at = next((i for i, (a, b) in enumerate(zip(meta, checked)) if a != b), min(len(meta), len(checked)))
    if at < len(meta) and at < len(checked):
        part = f"launch {at + 1} was {_plan_text(meta[at])} on meta inputs but {_plan_text(checked[at])} when checked"
    else:
        longer, where = (checked, "when checked") if len(checked) > len(meta) else (meta, "on meta inputs")
        part = f"launch {at + 1}, {_plan_text(longer[at])}, came only {where}"
    return (
        f"{counts}; {part}. The time recorded on meta inputs would be of work the checked call did not "
        "do: launch the same work whatever the device, and on the first call as on every other"
    )


def _compile_stats(
    req: ChildRequest, captures: list[Capture], calls: dict[int, LaunchCall] | None, seconds: float
) -> list[CompileStats]:
    """The timed launches' kernels compiled for the simulated device (``_compile_stats``), after
    the verdict's work is done: whatever happens here (the candidate's compile-time code
    included) leaves the checks and captures as they were."""
    if calls is None or seconds <= 0:
        return []
    from kernel_scientist.evaluator.model import DEVICES

    spec = DEVICES[req.device]
    chosen = [c for cap in captures for x in cap.launches if (c := calls.get(id(x))) is not None and c[0] is x]
    limits = limits_of(spec.vendor, spec.lanes, spec.reg_file_kb, spec.max_waves_per_unit, spec.smem_kb)
    try:
        return compiled_stats(chosen, spec.arch, req.compile_cache, limits, seconds)
    except BaseException:  # noqa: BLE001 - statistics are evidence, never a reason to fail
        return []


def _capture_ranked(
    fn: Kernel,
    bench_in: list[tuple[Shape, object]],
    device_name: str,
    unrecordable: str | None,
    phase: _Phase,
    calls: dict[int, LaunchCall] | None = None,
) -> list[Capture]:
    """Each ranked shape's launches, recorded on meta inputs for the timing model (autotuned
    kernels take the config the model ranks fastest, as a real autotuner would); with
    ``calls``, each launch's call is kept too (``capture_launches``)."""
    from kernel_scientist.evaluator.model import DEVICES, launches_time_us

    device = DEVICES[device_name]
    captures: list[Capture] = []
    for shape, data in bench_in:
        if unrecordable is not None:
            captures.append(Capture(shape=shape, untimed=unrecordable))
            continue
        phase.now = f"launch capture on meta tensors ({shape.label()})"
        launches: list[Launch] = []
        ops: list[TorchOp] = []

        def fastest(opts: list[list[Launch]], s: Shape = shape) -> int:  # what an autotuner would keep
            return min(range(len(opts)), key=lambda i: launches_time_us(opts[i], s, device))

        try:
            with _platform(device), capture_launches(launches, ops, choose=fastest, calls=calls):
                fn(data)
        except (NotImplementedError, RuntimeError) as exc:
            if not _no_meta_kernel(exc):
                raise
            captures.append(Capture(shape=shape, untimed=f"{type(exc).__name__}: {_one_line(exc, 200)}"))
            continue
        captures.append(Capture(shape=shape, launches=launches, torch_ops=ops))
    return captures


@contextlib.contextmanager
def _platform(device: DeviceSpec) -> Iterator[None]:
    """While launches are captured for an AMD device, the candidate sees a ROCm torch, so that it
    takes its ROCm branch (``waves_per_eu``, ``matrix_instr_nonkdim``...) and the model times the
    launch the real MI300X would get. The correctness run stays on the CPU's own branch: the
    interpreter knows no AMD launch options."""
    import torch

    saved = torch.version.hip
    if device.vendor == "amd":
        torch.version.hip = "6.4.0 (simulated)"
    try:
        yield
    finally:
        torch.version.hip = saved


def child_main(req: ChildRequest, workdir: str, output_fd: int, mem_limit_mb: int) -> None:
    """Run one candidate in this freshly forked process; never returns."""
    code = 0
    try:
        os.setsid()
        os.dup2(output_fd, 1)
        os.dup2(output_fd, 2)
        os.close(output_fd)
        os.chdir(workdir)
        sys.path[:] = [workdir] + [p for p in sys.path if p not in ("", ".")]
        os.environ["TRITON_CACHE_DIR"] = os.path.join(workdir, "triton-cache")
        os.environ["TORCH_EXTENSIONS_DIR"] = os.path.join(workdir, "torch-extensions")
        with open("/proc/self/statm") as f:
            vm_bytes = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
        limit = vm_bytes + mem_limit_mb * 2**20
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        try:
            result = _work(req, Path(workdir))
        except MemoryError:
            result = ChildResult("oom", "MemoryError while preparing inputs")
        except BaseException as exc:
            result = ChildResult("crash", f"harness failure: {type(exc).__name__}: {_one_line(exc)}")
        blob = _encoder.encode(result)
        tmp = os.path.join(workdir, RESULT_FILE + ".tmp")
        with open(tmp, "wb") as f:
            f.write(blob)
        os.replace(tmp, os.path.join(workdir, RESULT_FILE))
    except BaseException:
        code = 70
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except BaseException:
            pass
        os._exit(code)
