"""Compile statistics of the Triton kernels a candidate launches (``CompileStats``).

Two sources, one record:

- On a GPU (``loaded_stats``, in the harness process after the candidate's calls): every
  ``JITFunction`` keeps the kernels it compiled in its per-device cache, and a ``CompiledKernel``
  the driver has loaded carries ``n_regs`` and ``n_spills`` (the driver's NUM_REGS and
  LOCAL_SIZE_BYTES / 4) beside the metadata's shared memory, warps and stages. The functions are
  found by one walk over the garbage collector's objects (about 40 ms with torch loaded), after
  the timing: nothing wraps the launch path, so the timed calls are the same with or without it.
- On the simulated backend (``compiled_stats``, in the sandbox child after launch capture): each
  timed launch's kernel is compiled ahead of time for the simulated device's architecture
  (``GPUTarget("cuda", 90, 32)`` for the Hopper devices, ``GPUTarget("hip", "gfx942", 64)`` for
  the MI300X) with the arguments it was captured with, through Triton's own binder, so its
  specialisation (16-byte divisibility, arguments equal to 1) is the one a GPU run would make.
  No GPU is needed: ptxas and the AMDGPU back end ship with Triton. Registers and spills are then
  read from the binary: cuobjdump's resource usage of the cubin (REG, STACK), or the AMDGPU
  assembly's own notes (TotalNumVgprs, ScratchSize). A new kernel setting costs 0.15-0.6 s, a
  large fp8 tile or one that spills up to 2.2 s (triton 3.8 on a two-core CPU machine); the
  compiles go to a Triton cache the backend keeps for its candidates, so a kernel seen before
  costs milliseconds.

Triton's attribute names move between versions (3.6 on the GPU machine, 3.8 here), so every read
is defensive: a figure that cannot be read is left unknown, and nothing here fails an evaluation.
"""

from __future__ import annotations

import contextlib
import gc
import os
import re
import signal
import subprocess
import tempfile
import time
from collections.abc import Collection, Iterator, Sequence
from types import FrameType
from typing import Any, Literal

import msgspec
from kernel_scientist.blackboard.records import CompileStats
from kernel_scientist.evaluator._wire import Launch

# One launch the simulated backend may compile: its record and the call as the candidate made it.
LaunchCall = tuple[Launch, object, tuple[object, ...], dict[str, Any]]

# The most one evaluation spends compiling for statistics (a cache miss each), within 60% of its
# timeout. Generous: a compile cut short changes what a language model is shown, so a loaded
# machine would make a campaign's prompts, and so its replay, depend on its speed.
BUDGET_S = 60.0
MOST = 8  # kernels (with their settings) compiled per evaluation at most
_GRANULE = 8  # registers are allocated per thread (lane) in multiples of 8, on Hopper and CDNA3


class Limits(msgspec.Struct, frozen=True):
    """What one SM (CU) holds, for the occupancy a kernel's figures allow. AMD splits its
    register file over four SIMDs, each of which holds whole wavefronts."""

    simds: int  # 1 on NVIDIA, 4 on AMD CDNA
    regs_per_lane: int  # 32-bit registers per lane of one SIMD (Hopper: 65536 / 32; MI300X: 512)
    max_warps: int  # resident warps (wavefronts) per SM (CU)
    smem_bytes: int  # shared memory (LDS) per SM (CU)
    smem_reserved: int = 0  # bytes the system takes per block (1 KiB on NVIDIA)
    max_blocks: int = 0  # resident blocks per SM; 0: no limit of its own is known


def limits_of(vendor: str, lanes: int, reg_file_kb: int, max_warps: int, smem_kb: int) -> Limits:
    """The limits of a device from its spec sheet (``DeviceSpec``'s figures): Hopper's 228 KiB
    per SM is its 227 KiB per block plus the 1 KiB reserved for the block."""
    simds = 4 if vendor == "amd" else 1
    nvidia = vendor != "amd"
    return Limits(
        simds=simds,
        regs_per_lane=reg_file_kb * 1024 // 4 // lanes // simds,
        max_warps=max_warps,
        smem_bytes=(smem_kb + (1 if nvidia else 0)) * 1024,
        smem_reserved=1024 if nvidia else 0,
        max_blocks=32 if nvidia else 0,
    )


Bound = Literal["", "registers", "shared memory", "warps", "blocks"]  # CompileStats.limited_by


def occupancy(
    limits: Limits | None, registers: int | None, num_warps: int | None, shared: int | None
) -> tuple[int | None, Bound]:
    """Resident blocks per SM (CU) the figures allow, and what bounds them (registers first on
    a tie): the rules of CUDA's occupancy calculator, with a register granule of 8 per thread.
    (None, "") where a figure is unknown."""
    if limits is None or registers is None or not num_warps or num_warps <= 0:
        return None, ""
    per_lane = -(-max(registers, 1) // _GRANULE) * _GRANULE
    bounds: dict[Bound, int | None] = {
        "registers": limits.simds * (limits.regs_per_lane // per_lane) // num_warps,
        "shared memory": limits.smem_bytes // (max(shared or 0, 0) + limits.smem_reserved)
        if (shared or limits.smem_reserved)
        else None,
        "warps": limits.max_warps // num_warps,
        "blocks": limits.max_blocks or None,
    }
    known = {k: v for k, v in bounds.items() if v is not None}
    name = min(known, key=lambda k: known[k])
    return known[name], name


def launch_refusal(stats: Sequence[CompileStats], limits: Limits) -> str | None:
    """Why a GPU would refuse to launch one of these kernels: one block of it does not fit an SM
    (CU) by its own figures (``blocks_per_unit`` 0), which Triton reports as "out of resource" at
    the first call. None where every block fits or a figure is unknown."""
    for s in stats:
        if s.blocks_per_unit != 0 or not s.num_warps:
            continue
        what = f"{s.kernel} ({s.settings})" if s.settings else s.kernel
        warps = f"num_warps={s.num_warps}, num_stages={s.num_stages}"
        if s.limited_by == "shared memory":
            limit = limits.smem_bytes - limits.smem_reserved
            why = f"shared memory, required {s.shared_bytes}, hardware limit {limit}"
        elif s.limited_by == "registers":
            limit = limits.regs_per_lane // -(-s.num_warps // limits.simds)  # whole warps per SIMD
            why = f"registers, {s.registers} per thread, hardware limit {limit} at {s.num_warps} warps"
        else:
            why = f"{s.num_warps} warps per block, hardware limit {limits.max_warps}"
        return f"{what}, {warps}: out of resource: {why}"
    return None


def stats_of(kernel: object, name: str, settings: str, origin: str, limits: Limits | None) -> CompileStats:
    """The statistics of one ``CompiledKernel``: the driver's figures where it was loaded, else
    the binary's (cubin or AMDGPU assembly)."""
    meta = getattr(kernel, "metadata", None)
    warps, stages, shared = (_int(getattr(meta, key, None)) for key in ("num_warps", "num_stages", "shared"))
    loaded = getattr(kernel, "__dict__", {})  # set only once the driver has loaded the kernel
    registers, spills = _int(loaded.get("n_regs")), _int(loaded.get("n_spills"))
    if registers is None:
        registers, spills = _binary_figures(getattr(kernel, "asm", None))
    blocks, bound = occupancy(limits, registers, warps, shared)
    return CompileStats(
        kernel=name,
        settings=settings,
        num_warps=warps,
        num_stages=stages,
        registers=registers,
        spills=spills,
        shared_bytes=shared,
        blocks_per_unit=blocks,
        limited_by=bound,
        origin=origin,
    )


def _int(value: object) -> int | None:
    return int(value) if isinstance(value, int) and not isinstance(value, bool) else None


def _binary_figures(asm: object) -> tuple[int | None, int | None]:
    """(registers, spills) from a compiled kernel's binary, with no device: the AMDGPU
    assembly's notes, or cuobjdump's resource usage of a cubin; (None, None) when neither
    can be read."""
    try:
        text = asm.get("amdgcn") if hasattr(asm, "get") else None
        if isinstance(text, str):
            regs = re.search(r"TotalNumVgprs:\s*(\d+)", text) or re.search(r"\.vgpr_count:\s*(\d+)", text)
            scratch = re.search(r"ScratchSize:\s*(\d+)", text)
            return (int(regs.group(1)) if regs else None), (int(scratch.group(1)) // 4 if scratch else None)
        cubin = asm.get("cubin") if hasattr(asm, "get") else None
        if isinstance(cubin, bytes):
            return _cubin_figures(cubin)
    except Exception:  # noqa: BLE001 - a figure that cannot be read is unknown
        pass
    return None, None


def _cubin_figures(cubin: bytes) -> tuple[int | None, int | None]:
    """cuobjdump --dump-resource-usage on a cubin: "REG:40 STACK:0 SHARED:0 LOCAL:0 ..." (a few
    milliseconds). STACK and LOCAL are the per-thread local memory the driver reports as
    LOCAL_SIZE_BYTES, which Triton divides by 4 into its ``n_spills``."""
    from triton import knobs

    tool = knobs.nvidia.cuobjdump.path
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        out = subprocess.run([tool, "--dump-resource-usage", f.name], capture_output=True, text=True, timeout=30)
    regs = re.search(r"\bREG:(\d+)", out.stdout)
    local = sum(int(m) for m in re.findall(r"\b(?:STACK|LOCAL):(\d+)", out.stdout))
    return (int(regs.group(1)) if regs else None), (local // 4 if regs else None)


# ---- on a GPU: the kernels the process loaded ---------------------------------------------------
def loaded_stats(
    origin: str, limits: Limits | None, skip_files: Collection[str] = (), most: int = 32
) -> list[CompileStats]:
    """Every kernel the Triton JIT compiled in this process (one entry per compiled kernel,
    first compiled first; specialisations whose figures are the same, as for an argument that
    is sometimes divisible by 16, are one entry), except those of functions defined in
    ``skip_files`` (the task's own modules); empty where nothing can be read."""
    try:
        from triton.compiler import CompiledKernel
        from triton.runtime.jit import JITFunction
    except ImportError:
        return []
    out: list[CompileStats] = []
    seen: set[object] = set()
    try:
        # type() rather than isinstance(): an object's own __class__ is never consulted
        functions = [o for o in gc.get_objects() if issubclass(type(o), JITFunction)]
        for jit in functions:
            code = getattr(getattr(jit, "fn", None), "__code__", None)
            if code is not None and os.path.abspath(code.co_filename) in {os.path.abspath(p) for p in skip_files}:
                continue
            for kernel in _compiled(jit, CompiledKernel):
                key = getattr(kernel, "hash", None) or id(kernel)
                if key in seen or len(out) >= most:
                    continue
                seen.add(key)
                name = str(getattr(getattr(kernel, "metadata", None), "name", "") or getattr(jit, "__name__", "kernel"))
                stats = stats_of(kernel, name, _settings_of(getattr(kernel, "src", None)), origin, limits)
                if stats not in out:
                    out.append(stats)
    except Exception:  # noqa: BLE001 - statistics are evidence, never a reason to fail
        return out
    return out


def _compiled(jit: object, kind: type) -> Iterator[object]:
    """The compiled kernels in a JITFunction's per-device caches: ``device_caches`` maps a device
    to a tuple whose first item is the kernel cache (Triton 3.2 to 3.8). Kernels still compiling
    (an ``AsyncCompileMode`` future) are left out: reading them would wait for the compile."""
    caches = getattr(jit, "device_caches", None)
    if not isinstance(caches, dict):
        return
    for entry in list(caches.values()):
        cache = entry[0] if isinstance(entry, tuple) and entry else None
        if isinstance(cache, dict):
            yield from (k for k in list(cache.values()) if issubclass(type(k), kind))


def _settings_of(src: object) -> str:
    """The declared constexprs a kernel was compiled with, from its ``ASTSource``."""
    consts = getattr(src, "constants", None) or getattr(src, "constexprs", None)  # 3.8 keeps "constants"
    params = getattr(getattr(src, "fn", None), "params", None)
    if not isinstance(consts, dict) or not isinstance(params, list):
        return ""
    parts = []
    for path, value in consts.items():
        i = path[0] if isinstance(path, tuple) and len(path) == 1 else path
        if isinstance(i, int) and 0 <= i < len(params) and getattr(params[i], "is_constexpr", False):
            if isinstance(value, (int, float, bool, str)):
                parts.append(f"{getattr(params[i], 'name', i)}={value}")
    return ", ".join(parts)


def device_limits() -> Limits | None:
    """The current CUDA device's limits from torch's device properties (NVIDIA); an AMD GPU's
    from the MI300X's spec sheet (ROCm reports no register file per CU); None if unknown."""
    try:
        import torch

        props = torch.cuda.get_device_properties(0)
        if torch.version.hip:
            from kernel_scientist.evaluator.model import spec_for

            spec = spec_for(torch.cuda.get_device_name(0))
            return limits_of(spec.vendor, spec.lanes, spec.reg_file_kb, spec.max_waves_per_unit, spec.smem_kb)
        lanes = int(getattr(props, "warp_size", 32))
        smem = int(props.shared_memory_per_multiprocessor)
        regs = getattr(props, "regs_per_multiprocessor", None)  # not in every torch's properties
        if not isinstance(regs, int):
            return None
        return Limits(
            simds=1,
            regs_per_lane=regs // lanes,
            max_warps=int(props.max_threads_per_multi_processor) // lanes,
            smem_bytes=smem,
            smem_reserved=1024,
            max_blocks=32,
        )
    except Exception:  # noqa: BLE001 - no occupancy then, the other figures stay
        return None


# ---- on the simulated backend: compiled ahead of time for the device's architecture ----------
class _OutOfTime(Exception):
    pass


@contextlib.contextmanager
def _deadline(seconds: float) -> Iterator[None]:
    """Raise _OutOfTime in this thread after ``seconds``: a compile past the budget (ptxas
    included: ``subprocess.run`` kills its process when interrupted) ends there."""

    def ring(signum: int, frame: FrameType | None) -> None:
        raise _OutOfTime

    previous = signal.signal(signal.SIGALRM, ring)
    signal.setitimer(signal.ITIMER_REAL, max(seconds, 0.001))
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _target(arch: str) -> Any:
    from triton.backends.compiler import GPUTarget

    if arch.startswith("sm_"):
        return GPUTarget("cuda", int(arch.removeprefix("sm_")), 32)
    return GPUTarget("hip", arch, 64)


def origin_of(arch: str) -> str:
    tool = "ptxas" if arch.startswith("sm_") else "Triton's AMDGPU back end"
    return f"compiled for {arch} by {tool}, not run on a device"


def compiled_stats(
    calls: Sequence[LaunchCall], arch: str, cache_dir: str, limits: Limits | None, seconds: float
) -> list[CompileStats]:
    """Each distinct kernel setting among ``calls`` compiled for ``arch`` (at most ``MOST``,
    first launched first, within ``seconds``), with Triton's cache in ``cache_dir``. A kernel
    Triton refuses to compile for the target gets an entry with the error's first line."""
    out: list[CompileStats] = []
    seen: set[tuple[object, ...]] = set()
    began = time.monotonic()
    try:
        target = _target(arch)
    except Exception:  # noqa: BLE001 - a Triton without this target: no statistics
        return out
    for launch, kernel, args, kwargs in calls:
        key = (
            id(getattr(kernel, "fn", kernel)),
            tuple(sorted(launch.constexprs.items())),
            launch.num_warps,
            launch.num_stages,
            tuple(sorted(launch.extra.items())),
            tuple(t.dtype for t in launch.tensors),
        )
        if key in seen:
            continue
        left = min(seconds, BUDGET_S) - (time.monotonic() - began)
        if len(out) >= MOST or left <= 0:
            break
        seen.add(key)
        settings = ", ".join(f"{k}={v}" for k, v in launch.constexprs.items())
        try:
            with _deadline(left):
                compiled = _compile(kernel, args, kwargs, target, cache_dir)
            out.append(stats_of(compiled, launch.kernel, settings, origin_of(arch), limits))
        except _OutOfTime:
            break
        except Exception as exc:  # noqa: BLE001 - the candidate's kernel may fail to compile for the target
            error = _first_words(exc)
            out.append(
                CompileStats(
                    kernel=launch.kernel,
                    settings=settings,
                    num_warps=launch.num_warps,
                    num_stages=launch.num_stages,
                    origin=origin_of(arch),
                    error=error,
                )
            )
    return out


def _first_words(exc: Exception) -> str:
    """An error in one line: a CompilationError's position and its last line (its middle is the
    kernel's source, which the reader has)."""
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    where = lines[0].rstrip(":") + ": " if len(lines) > 1 and lines[0].startswith("at ") else ""
    return f"{type(exc).__name__}: {where}{lines[-1] if lines else ''}"[:300]


def _compile(kernel: object, args: tuple[object, ...], kwargs: dict[str, Any], target: Any, cache_dir: str) -> object:
    """One launch compiled as ``JITFunction.run`` would compile it on ``target``: Triton's binder
    specialises the captured arguments, ``_pack_args`` turns them into the compiler's signature.
    Under the CPU interpreter ``@triton.jit`` made InterpretedFunctions, which the code generator
    does not call: for the compile, the kernel, the jitted helpers in its module and those of
    ``triton.language`` itself (``tl.cdiv`` is one) are JITFunctions again (``_compilable``)."""
    from triton.compiler import ASTSource, compile, make_backend
    from triton.runtime.jit import JITFunction, create_function_from_signature

    pyfn: Any = getattr(kernel, "fn", kernel)
    saved = os.environ.get("TRITON_CACHE_DIR")
    try:
        os.environ["TRITON_CACHE_DIR"] = cache_dir
        with _compilable(getattr(pyfn, "__globals__", {})):
            jit = kernel if isinstance(kernel, JITFunction) else _as_jit(kernel)
            backend = make_backend(target)
            binder = create_function_from_signature(jit.signature, jit.params, backend)
            bound, specialization, options = binder(*args, **kwargs)
            options, signature, constexprs, attrs = jit._pack_args(backend, kwargs, bound, specialization, options)[:4]
            return compile(ASTSource(jit, signature, constexprs, attrs), target=target, options=options.__dict__)
    finally:
        if saved is None:
            os.environ.pop("TRITON_CACHE_DIR", None)
        else:
            os.environ["TRITON_CACHE_DIR"] = saved


_jitted: dict[int, tuple[object, Any]] = {}  # an InterpretedFunction's JITFunction (holding both)


def _as_jit(interpreted: Any) -> Any:
    """The JITFunction ``@triton.jit`` would have made of an InterpretedFunction's function,
    with the same options (``noinline``, ``do_not_specialize``...)."""
    from triton.runtime.jit import JITFunction

    made = _jitted.get(id(interpreted))
    if made is None or made[0] is not interpreted:
        made = _jitted[id(interpreted)] = (
            interpreted,
            JITFunction(interpreted.fn, **getattr(interpreted, "kwargs", {})),
        )
    return made[1]


# ``triton.language`` as it was before any kernel ran under the interpreter: each namespace the
# interpreter patches (its modules; the tensor, descriptor and dtype classes) and its contents.
_pristine: list[tuple[object, dict[str, object]]] = []


def _language_spaces() -> list[object]:
    import sys

    import triton.language as tl

    classes = {c for base in (tl.tensor, tl.core.tensor_descriptor_base, tl.dtype) for c in base.__mro__}
    classes.discard(object)
    modules = [m for name, m in list(sys.modules.items()) if name.startswith("triton.language") and m is not None]
    return [*modules, *classes]


def remember_language() -> None:
    """Keep ``triton.language`` as it is now (the fork server calls this before any candidate
    runs). The interpreter points the language's builtins at itself while a kernel runs and
    undoes it after, but a ``@triton.jit`` helper of Triton's own (``tl.cdiv``) patches
    ``triton.language.core`` again when it is called, and nothing undoes that: the code
    generator would then call the interpreter's builtins. ``_compilable`` puts this back."""
    if not _pristine:
        _pristine.extend((space, dict(vars(space))) for space in _language_spaces())


@contextlib.contextmanager
def _pristine_language() -> Iterator[None]:
    """``triton.language`` as ``remember_language`` kept it while the block runs; as it was after."""
    remember_language()
    now = [(space, dict(vars(space))) for space, _ in _pristine]

    def put(space: object, before: dict[str, object], want: dict[str, object]) -> None:
        for name in [n for n in before if n not in want]:
            with contextlib.suppress(AttributeError, TypeError):
                delattr(space, name)
        for name, value in want.items():
            if before.get(name, _pristine) is not value:
                with contextlib.suppress(AttributeError, TypeError):
                    setattr(space, name, value)

    for (space, then), (_, current) in zip(_pristine, now, strict=True):
        put(space, current, then)
    try:
        yield
    finally:
        for (space, then), (_, current) in zip(_pristine, now, strict=True):
            put(space, then, current)


@contextlib.contextmanager
def _compilable(scope: dict[str, Any]) -> Iterator[None]:
    """While the block runs, ``triton.language`` is unpatched (``remember_language``), and every
    InterpretedFunction in ``scope`` (a kernel's globals) and in the ``triton.language`` modules
    is its JITFunction; all put back after."""
    with _pristine_language(), _interpreted_as_jit(scope):
        yield


@contextlib.contextmanager
def _interpreted_as_jit(scope: dict[str, Any]) -> Iterator[None]:
    import sys

    spaces = [scope, *(vars(m) for name, m in list(sys.modules.items()) if name.startswith("triton.language") and m)]
    swaps = [
        (space, name, value)
        for space in spaces
        for name, value in list(space.items())
        if type(value).__name__ == "InterpretedFunction" and hasattr(value, "fn")
    ]
    try:
        for space, name, value in swaps:
            space[name] = _as_jit(value)
        yield
    finally:
        for space, name, value in swaps:
            space[name] = value
