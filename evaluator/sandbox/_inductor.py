"""PyTorch's own compiler on a folder's seed: what Inductor writes for it, captured as text.

``python -m kernel_scientist.evaluator.sandbox._inductor`` reads an ``InductorRequest`` on stdin
and writes one ``InductorCapture`` (or a one-line failure) on stdout. It is a process of its own
because it runs the seed (the user's own file, never a candidate's) and torch.compile, whose
caches and configuration must not leak into the campaign.

Dynamo traces the seed's ``custom_kernel`` as one graph with every size symbolic (one lowering
serves every shape); Inductor generates its wrapper module and Triton kernels for this machine's
device (CUDA or ROCm on a GPU; without one, Inductor's Triton CPU backend, which writes the same
device-independent Triton the interpreter runs). Only code generation runs: nothing is compiled
for the device here, so the capture is the same on a machine with no GPU driver. What the
standalone submission needs besides the text is recorded beside it: which graph input is which
part of the call's arguments (Dynamo's sources), which part of the result is which graph output,
each kernel's candidate launch settings (Inductor's own heuristics for its size hints), and the
source of Inductor's Triton helpers (the submission carries those it uses).
"""

from __future__ import annotations

import ast
import contextlib
import copy
import inspect
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
from kernel_scientist.blackboard.records import Shape
from kernel_scientist.evaluator.sandbox._forkserver import scrubbed_env


class InductorRequest(msgspec.Struct, frozen=True):
    modules: dict[str, str]  # the folder's run-directory modules (``Task.modules``)
    source: str  # the seed
    shape: Shape  # the example shape: its inputs are traced, every size symbolic
    others: list[Shape] = []  # shapes the one lowering must also cover (checked on meta tensors)
    seed_name: str = "submission.py"


class LaunchSetting(msgspec.Struct, frozen=True):
    """One candidate launch setting of a kernel: its block-size constexprs, warps and stages."""

    blocks: dict[str, int]
    num_warps: int
    num_stages: int


class InductorCapture(msgspec.Struct, frozen=True, tag="capture"):
    """What Inductor wrote for a seed, and what turning it into a submission needs."""

    code: str  # Inductor's wrapper module, kernels included as strings
    inputs: list[str]  # each graph input (``call``'s args, in order) as an expression over ``L``
    params: list[str]  # custom_kernel's parameter names (``L`` maps them to the arguments)
    returns: str  # the seed's result as an expression over ``L`` and ``outs`` (call's outputs)
    settings: dict[str, list[LaunchSetting]]  # kernel -> Inductor's candidates, its preferred first
    helpers: str  # torch._inductor.runtime.triton_helpers, as this torch has it
    torch: str
    triton: str
    target: str  # "cuda", "hip" or "cpu": the device Inductor generated code for
    shape: Shape
    seed_name: str


class InductorFailure(msgspec.Struct, frozen=True, tag="failure"):
    reason: str


class _Captured(Exception):
    """Raised inside Inductor once the code is generated: nothing is compiled or run (Inductor
    re-raises it wrapped in its own error)."""


def _walk_inputs(value: object, path: str, out: dict[int, str]) -> None:
    """Map each tensor in the call's arguments to the expression that reaches it."""
    import torch

    if isinstance(value, torch.Tensor):
        out.setdefault(id(value), path)
    elif isinstance(value, (tuple, list)):
        for i, item in enumerate(value):
            _walk_inputs(item, f"{path}[{i}]", out)
    elif isinstance(value, dict):
        for key, item in value.items():
            if isinstance(key, str):
                _walk_inputs(item, f"{path}[{key!r}]", out)


def _result_expr(value: object, graph_outputs: list[object], inputs: dict[int, str]) -> str:
    """The seed's result over the graph's outputs (``outs[i]``) and its arguments (``L[...]``)."""
    import torch

    if isinstance(value, torch.Tensor):
        for i, out in enumerate(graph_outputs):
            if out is value:
                return f"outs[{i}]"
        if id(value) in inputs:
            return inputs[id(value)]
        raise ValueError("the seed returns a tensor that is neither a graph output nor one of its arguments")
    if isinstance(value, tuple):
        parts = [_result_expr(v, graph_outputs, inputs) for v in value]
        return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"
    if isinstance(value, list):
        return "[" + ", ".join(_result_expr(v, graph_outputs, inputs) for v in value) + "]"
    raise ValueError(f"the seed returns a {type(value).__name__}, not tensors in a tuple or list")


@contextlib.contextmanager
def _codegen_only(codes: list[str]) -> Iterator[None]:
    """Let Inductor generate its module, keep the text, and stop before anything is compiled."""
    from torch._inductor.graph import GraphLowering

    def capture(self: GraphLowering) -> object:
        wrapper, _ = self.codegen_with_cpp_wrapper() if self.cpp_wrapper else self.codegen()
        codes.append(wrapper.value if hasattr(wrapper, "value") else str(wrapper))
        raise _Captured

    saved = GraphLowering.compile_to_module
    GraphLowering.compile_to_module = capture  # type: ignore[method-assign,assignment]
    try:
        yield
    finally:
        GraphLowering.compile_to_module = saved  # type: ignore[method-assign]


def _triton_target() -> str:
    import torch

    if torch.cuda.is_available():
        return "hip" if torch.version.hip else "cuda"
    return "cpu"


def _settings(code: str, folder: Path) -> dict[str, list[LaunchSetting]]:
    """Each kernel's candidate launch settings, as Inductor's heuristics list them for its size
    hints: the kernel's source is executed with the autotuner replaced by a recorder."""
    from kernel_scientist.evaluator.sandbox._rundir import _new_module
    from torch._inductor.runtime import triton_heuristics

    found: dict[str, list[LaunchSetting]] = {}
    recorded: list[Any] = []

    def record(size_hints: object, configs: list[Any], **_: object) -> object:
        recorded[:] = list(configs)
        return lambda fn: fn

    saved = triton_heuristics.cached_autotune
    triton_heuristics.cached_autotune = record  # type: ignore[assignment]
    try:
        for name, src in kernel_sources(code):
            recorded.clear()
            # @triton.jit reads its function's source back from a file, so the kernel gets one
            path = folder / f"_ks_{name}.py"
            path.write_text(src.replace("triton_helpers.set_driver_to_cpu()", ""))
            module, loader = _new_module(f"_ks_inductor_{name}", path)
            loader.exec_module(module)
            found[name] = [
                LaunchSetting(
                    blocks={k: int(v) for k, v in c.kwargs.items() if isinstance(v, int)},
                    num_warps=int(c.num_warps),
                    num_stages=int(c.num_stages),
                )
                for c in recorded
            ]
    finally:
        triton_heuristics.cached_autotune = saved
    return found


def kernel_sources(code: str) -> list[tuple[str, str]]:
    """(name, source) of each ``async_compile.triton(name, source, ...)`` in Inductor's module."""
    out = []
    for node in ast.walk(ast.parse(code)):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "triton"
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "async_compile"
            and len(node.args) >= 2
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[1], ast.Constant)
        ):
            out.append((str(node.args[0].value), str(node.args[1].value)))
    return out


def capture(request: InductorRequest) -> InductorCapture:
    """Trace and lower the seed on this machine's device; raise ValueError with the reason when
    Inductor cannot give one Triton module for it."""
    import torch
    import torch._inductor.config as inductor_config
    import triton
    from kernel_scientist.evaluator.sandbox._rundir import (
        generate_input,
        import_reference,
        import_submission,
        isolate_candidate,
    )
    from torch._inductor.compile_fx import compile_fx
    from torch._inductor.runtime import triton_helpers

    target = _triton_target()
    if target == "cpu":
        # Inductor's Triton CPU backend writes the Triton kernels; its code generation asks the
        # active driver only for a cache key, which a machine with no GPU driver cannot give.
        import torch.utils._triton as torch_triton

        inductor_config.cpu_backend = "triton"
        torch_triton.triton_hash_with_backend = lambda: "cpu"  # type: ignore[assignment]
    inductor_config.fallback_random = True
    # Without duck sizing, two sizes equal in the example are not assumed equal everywhere.
    torch.fx.experimental._config.use_duck_shape = False
    device = "cuda" if target != "cpu" else "cpu"

    ref = import_reference(request.modules)
    folder = Path(tempfile.mkdtemp(prefix="ks-lower-"))
    isolate_candidate(request.modules, folder)
    sys.path.insert(0, str(folder))
    fn = import_submission(request.source, folder)
    if fn is None:
        raise ValueError(f"{request.seed_name} defines no custom_kernel")
    params = list(inspect.signature(fn).parameters)
    data = generate_input(ref, request.shape, device)
    args = (data,) if len(params) == 1 else tuple(data) if isinstance(data, tuple) else (data,)
    inputs: dict[int, str] = {}
    for name, value in zip(params, args):
        _walk_inputs(value, f"L[{name!r}]", inputs)

    codes: list[str] = []
    sources: list[str] = []
    graph_outputs: list[object] = []
    static: dict[str, tuple[str, list[int | None]]] = {}  # tensor input -> dtype, sizes left constant
    symbols: dict[str, str] = {}  # a symbolic size's name -> the graph input that holds it
    guards: list[Any] = []  # sympy relations Dynamo and Inductor assumed of the symbolic sizes

    def backend(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> object:
        for node in gm.graph.nodes:
            if node.op == "placeholder":
                arg = node.meta.get("grapharg")
                if arg is None or arg.source is None:
                    raise ValueError(f"graph input {node.name} has no source Dynamo can name")
                sources.append(arg.source.name)
                value = node.meta.get("example_value")
                if isinstance(value, torch.Tensor):
                    static[arg.source.name] = (
                        str(value.dtype),
                        [d if isinstance(d, int) else None for d in value.size()],
                    )
        with _codegen_only(codes):
            try:
                compile_fx(copy.deepcopy(gm), example_inputs)
            except Exception:
                if not codes:  # Inductor's own failure; else our stop, which Inductor wraps
                    raise
        context = torch._guards.TracingContext.try_get()
        shape_env = context.fake_mode.shape_env if context and context.fake_mode else None
        if shape_env is not None:  # what Dynamo and Inductor assumed of the symbolic sizes
            guards.extend(g.expr for g in shape_env.guards)
            for symbol, where in shape_env.var_to_sources.items():
                if where:
                    symbols[str(symbol)] = where[0].name

        def eager(*call_args: object) -> object:
            result = gm(*call_args)
            graph_outputs[:] = list(result) if isinstance(result, (tuple, list)) else [result]
            return result

        return eager

    torch._dynamo.reset()
    compiled = torch.compile(fn, backend=backend, dynamic=True, fullgraph=True)
    try:
        result = compiled(*args)
    except torch._dynamo.exc.Unsupported as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ValueError(f"Dynamo cannot trace {request.seed_name} as one graph: {first}") from None
    if len(codes) != 1:
        raise ValueError(f"Inductor wrote {len(codes)} modules for {request.seed_name}, not one")
    code = codes[0]
    if not kernel_sources(code):
        raise ValueError(f"Inductor wrote no Triton kernel for {request.seed_name} (every op went to a library)")
    for other in request.others:
        _check_covers(ref, request, other, params, sources, static, symbols, guards)
    return InductorCapture(
        code=code,
        inputs=[_source_expr(s) for s in sources],
        params=params,
        returns=_result_expr(result, graph_outputs, inputs),
        settings=_settings(code, folder),
        helpers=inspect.getsource(triton_helpers),
        torch=torch.__version__.split("+")[0],
        triton=triton.__version__,
        target=target,
        shape=request.shape,
        seed_name=request.seed_name,
    )


def _check_covers(
    ref: Any,
    request: InductorRequest,
    other: Shape,
    params: list[str],
    sources: list[str],
    static: dict[str, tuple[str, list[int | None]]],
    symbols: dict[str, str],
    guards: list[Any],
) -> None:
    """Dynamo keeps a size it could not leave symbolic (a convolution's channels, a size of 1) as a
    constant: one lowering covers ``other`` only if its inputs have the same constants and dtypes
    (drawn on meta tensors: nothing is allocated)."""
    from kernel_scientist.evaluator.sandbox._rundir import generate_input

    data = generate_input(ref, other, "meta")
    args = (data,) if len(params) == 1 else tuple(data) if isinstance(data, tuple) else (data,)
    scope = {"L": dict(zip(params, args))}
    for source in sources:
        if source not in static:
            continue
        tensor = eval(source, {}, scope)  # Dynamo's own name for an argument: indexing only
        dtype, sizes = static[source]
        got = list(tensor.size())
        if (
            str(tensor.dtype) != dtype
            or len(got) != len(sizes)
            or any(want is not None and want != have for want, have in zip(sizes, got))
        ):
            raise ValueError(
                f"Inductor specialised the lowering to {request.shape.label()} ({source} of sizes "
                f"{[s if s is not None else '*' for s in sizes]}, {dtype}); {other.label()} would need another"
            )
    import sympy

    values = {
        sympy.Symbol(name, integer=True, positive=True): int(eval(source, {}, scope))
        for name, source in symbols.items()
    }
    by_name = {str(k): v for k, v in values.items()}
    for guard in guards:
        held = guard.xreplace({s: by_name[str(s)] for s in guard.free_symbols if str(s) in by_name})
        if held.free_symbols or not bool(held):
            raise ValueError(
                f"Inductor specialised the lowering to {request.shape.label()} (it assumed {guard}); "
                f"{other.label()} would need another"
            )


def _source_expr(name: str) -> str:
    """Dynamo names the call's locals ``L['data'][0]``: the same expression, over ``L``."""
    if not name.startswith("L["):
        raise ValueError(f"a graph input comes from {name}, not from custom_kernel's arguments")
    return name


def run_capture(request: InductorRequest, timeout_s: float = 300.0) -> InductorCapture:
    """Lower in a process of its own (the seed and torch.compile never run in the campaign's);
    ValueError with one line when it cannot."""
    # The sandbox's environment (our packages on the path, no credentials) without the Triton
    # interpreter, run from a folder of its own: from the repository root, ``-m`` would find the
    # checkout's kernel_scientist/ before the installed tree's.
    env = scrubbed_env()
    env.pop("TRITON_INTERPRET", None)
    work = Path(tempfile.mkdtemp(prefix="ks-inductor-"))
    env["TORCHINDUCTOR_CACHE_DIR"] = str(work / "cache")
    env["TORCHINDUCTOR_COMPILE_THREADS"] = "1"  # no worker pool to outlive a timeout's kill
    try:
        done = subprocess.run(
            [sys.executable, "-m", "kernel_scientist.evaluator.sandbox._inductor"],
            input=msgspec.json.encode(request),
            capture_output=True,
            timeout=timeout_s,
            env=env,
            cwd=work,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise ValueError(f"Inductor took longer than {timeout_s:g} s") from None
    finally:
        shutil.rmtree(work, ignore_errors=True)
    decoded = None
    if done.stdout:
        lines = done.stdout.strip().splitlines()
        with contextlib.suppress(msgspec.DecodeError):
            decoded = msgspec.json.decode(lines[-1], type=InductorCapture | InductorFailure)
    if isinstance(decoded, InductorCapture):
        return decoded
    if isinstance(decoded, InductorFailure):
        raise ValueError(decoded.reason)
    tail = [line for line in done.stderr.decode(errors="replace").splitlines() if line.strip()]
    raise ValueError(tail[-1] if tail else f"the lowering process ended with code {done.returncode}")


def main() -> int:
    request = msgspec.json.decode(sys.stdin.buffer.read(), type=InductorRequest)
    out = sys.stdout
    with contextlib.redirect_stdout(sys.stderr):  # whatever the seed or torch print stays off the record
        try:
            answer: InductorCapture | InductorFailure = capture(request)
        except ValueError as exc:
            answer = InductorFailure(str(exc))
        except Exception as exc:  # Inductor's own errors: one line, the last of its message
            text = [line for line in str(exc).splitlines() if line.strip()]
            answer = InductorFailure(f"Inductor failed: {type(exc).__name__}: {text[-1] if text else ''}".rstrip(": "))
    out.write(msgspec.json.encode(answer).decode() + "\n")
    out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
