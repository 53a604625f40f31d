"""Launch capture: record what a submission would launch instead of running it.

Runs inside the candidate's child process only. ``capture_launches`` patches Triton's launch path
(``JITFunction.run`` for compiled mode, ``InterpretedFunction.run`` for the CPU interpreter, and
``Autotuner.run``) so that ``kernel[grid](...)`` records a ``Launch`` and returns, and wraps the call
in a ``TorchDispatchMode`` that records torch work (pre-passes, allocations, fallbacks) with its
bytes and flops. The inputs live on the ``meta`` device: right shapes, strides and dtypes, no data,
so capturing a 6144x4608x7168 call costs microseconds.

Static features come from the kernel's source (``JITFunction.src`` or the interpreted function's
source) read with the launch's constexpr values, so that only the branches the launch compiles
count: the model needs to know whether a launch does matrix work and at what precision, which the
launch arguments alone do not say.
"""

from __future__ import annotations

import ast
import contextlib
import inspect
import re
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from kernel_scientist.blackboard.records import Shape
from kernel_scientist.evaluator._wire import Launch, TensorArg, TorchOp
from kernel_scientist.evaluator.sandbox._hooks import dispatch_mode, swapped

if TYPE_CHECKING:
    import torch
    from torch._ops import OpOverload
    from torch.utils._python_dispatch import TorchDispatchMode

_Const = int | bool | float  # a constexpr's value

_LAUNCH_OPTIONS = {
    "num_warps",
    "num_stages",
    "num_ctas",
    "maxnreg",
    "enable_fp_fusion",
    "waves_per_eu",
    "matrix_instr_nonkdim",
    "kpack",
    "launch_cooperative_grid",
    "launch_pdl",
    "debug",
}
_AMD_KNOBS = ("waves_per_eu", "matrix_instr_nonkdim", "kpack")
_features_cache: dict[tuple[int, tuple[tuple[str, _Const], ...]], dict[str, Any]] = {}
# Per kernel function (by id; _signature_cache keeps the function alive): its source, parsed tree,
# that tree unparsed, and the names its features can depend on (``_deciding``), read once however
# many constexpr settings it is launched with.
_parsed_cache: dict[int, tuple[str, ast.Module | None, str | None, frozenset[str]]] = {}
# Keyed by the function itself (which the entry keeps alive), per process: a call is captured up to
# 23 times per evaluation, and inspect.signature read per launch costs a fifth of launch capture.
_signature_cache: dict[Callable[..., object], inspect.Signature] = {}


class _Unknown(Exception):
    """An expression whose value is not fixed by the launch's constexprs."""


_CMP: dict[type[ast.cmpop], Callable[[_Const, _Const], bool]] = {
    ast.Eq: lambda a, b: a == b,
    ast.NotEq: lambda a, b: a != b,
    ast.Lt: lambda a, b: a < b,
    ast.LtE: lambda a, b: a <= b,
    ast.Gt: lambda a, b: a > b,
    ast.GtE: lambda a, b: a >= b,
}
_BIN: dict[type[ast.operator], Callable[[_Const, _Const], _Const]] = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.FloorDiv: lambda a, b: a // b,
    ast.Mod: lambda a, b: a % b,
}


def _static_value(node: ast.expr, env: dict[str, _Const]) -> _Const:
    """The value of a constexpr expression (names, literals, comparisons, and/or/not, arithmetic)
    under one launch's constexprs; raises _Unknown for anything that depends on runtime values."""
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float, bool)):
        return node.value
    if isinstance(node, ast.Name) and node.id in env:
        return env[node.id]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return not _static_value(node.operand, env)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_static_value(node.operand, env)
    if isinstance(node, ast.BoolOp):
        values = [_static_value(v, env) for v in node.values]
        return all(values) if isinstance(node.op, ast.And) else any(values)
    if isinstance(node, ast.BinOp) and type(node.op) in _BIN:
        return _BIN[type(node.op)](_static_value(node.left, env), _static_value(node.right, env))
    if isinstance(node, ast.Compare) and all(type(op) in _CMP for op in node.ops):
        left = _static_value(node.left, env)
        for op, right_node in zip(node.ops, node.comparators):
            right = _static_value(right_node, env)
            if not _CMP[type(op)](left, right):
                return False
            left = right
        return True
    raise _Unknown


class _TakeBranches(ast.NodeTransformer):
    """Keep only the branches a launch takes: an ``if`` (or ``x if c else y``) whose condition the
    constexprs decide is replaced by the taken side, as Triton's own compiler does for constexpr
    conditions. Branches on runtime values stay, both sides."""

    def __init__(self, env: dict[str, _Const]) -> None:
        self.env = env

    def visit_If(self, node: ast.If) -> ast.stmt | list[ast.stmt]:
        self.generic_visit(node)
        try:
            taken = node.body if _static_value(node.test, self.env) else node.orelse
        except _Unknown:
            return node
        return taken or ast.Pass()

    def visit_IfExp(self, node: ast.IfExp) -> ast.expr:
        self.generic_visit(node)
        try:
            return node.body if _static_value(node.test, self.env) else node.orelse
        except _Unknown:
            return node


def _parse(src: str) -> ast.Module | None:
    try:
        return ast.parse(inspect.cleandoc(src) if src.startswith((" ", "\t")) else src)
    except SyntaxError:
        return None


def kernel_features(
    src: str, constexprs: dict[str, _Const] | None = None, tree: ast.Module | None = None
) -> dict[str, Any]:
    """What one launch of the kernel does in its matrix work (see ``Launch``).

    The source is read as the launch compiles it: ``if`` branches on constexprs (``if MODE == 0``,
    ``if CONVERT:``, ``x if SPLIT_K > 1 else y``) are decided with the launch's constexpr values
    first, so a kernel with a precise fp8 branch and a bf16 branch counts as precise only for the
    launches that take the first. ``max_num_imprecise_acc`` may itself be a constexpr.

    Upcasts are found through the AST: a ``tl.dot`` operand counts as upcast when its expression,
    or the assignment of the name it uses, contains ``.to(tl.bfloat16)`` (or float16/float32). A
    plain text search would also catch the epilogue's ``acc.to(tl.bfloat16)``, which is no upcast.
    Code inside helper ``@triton.jit`` functions the kernel calls is not followed.
    """
    tree = tree if tree is not None else _parse(src)
    return _features(src, constexprs, tree, None if tree is None else ast.unparse(tree))


def _features(
    src: str, constexprs: dict[str, _Const] | None, tree: ast.Module | None, text: str | None
) -> dict[str, Any]:
    """``kernel_features`` with ``text``, ``ast.unparse(tree)``, given: a kernel launched with
    several constexpr settings is unparsed once, not once per setting."""
    env = dict(constexprs or {})
    if tree is None or text is None:
        return {
            "has_dot": bool(re.search(r"\btl\.dot(_scaled)?\s*\(", src)),
            "precise_acc": bool(re.search(r"max_num_imprecise_acc\s*=\s*0\b", src)),
            "atomic": bool(re.search(r"\btl\.atomic_\w+\s*\(", src)),
            "upcast_bf16": False,
            "upcast_fp32": False,
            "upcast_to": "",
        }
    tree = _TakeBranches(env).visit(ast.parse(text))  # a copy: the cached tree stays whole
    feats: dict[str, Any] = {
        "has_dot": False,
        "precise_acc": False,
        "atomic": False,
        "upcast_bf16": False,
        "upcast_fp32": False,
        "upcast_to": "",
    }
    # Each name's assigned expressions, in walk order, unparsed only for a name a dot uses.
    assigned: dict[str, list[ast.expr]] = {}
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                if isinstance(t, ast.Name) and node.value is not None:
                    assigned.setdefault(t.id, []).append(node.value)
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = _callee(node.func)
        if re.fullmatch(r"(tl|triton\.language)\.atomic_\w+", func):
            feats["atomic"] = True
        if func not in ("tl.dot", "triton.language.dot", "tl.dot_scaled", "triton.language.dot_scaled"):
            continue
        feats["has_dot"] = True
        for kw in node.keywords:
            if kw.arg == "max_num_imprecise_acc":
                try:
                    feats["precise_acc"] |= _static_value(kw.value, env) == 0
                except _Unknown:
                    pass
        for arg in node.args[:2]:
            texts = [ast.unparse(arg)]
            if isinstance(arg, ast.Name):
                texts += [ast.unparse(v) for v in assigned.get(arg.id, [])]
            joined = " ".join(texts)
            if cast := re.search(r"\.to\(\s*tl\.(bfloat16|float16)", joined):
                feats["upcast_bf16"] = True
                feats["upcast_to"] = feats["upcast_to"] or cast.group(1)
            if re.search(r"\.to\(\s*tl\.float32", joined):
                feats["upcast_fp32"] = True
                feats["upcast_to"] = "float32"
    return feats


def _deciding(tree: ast.Module | None) -> frozenset[str]:
    """The names a launch's constexprs can change the features through: ``_static_value`` reads
    the constexprs only for names inside an ``if`` or ``x if c else y`` condition (which decide the
    branches) and inside a ``max_num_imprecise_acc=`` value, and deciding branches only ever keeps
    parts of those expressions. Two settings that agree on these names have the same features."""
    if tree is None:
        return frozenset()
    exprs: list[ast.AST] = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.If, ast.IfExp)):
            exprs.append(node.test)
        elif isinstance(node, ast.keyword) and node.arg == "max_num_imprecise_acc":
            exprs.append(node.value)
    return frozenset(n.id for e in exprs for n in ast.walk(e) if isinstance(n, ast.Name))


def _callee(func: ast.expr) -> str:
    """``ast.unparse(func)`` for what a call names: a plain dotted name (``tl.dot``) is written
    as unparse writes it, without its machinery (every call of the kernel is looked at); anything
    else goes through unparse."""
    parts: list[str] = []
    node = func
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return ".".join([node.id, *reversed(parts)])
    return ast.unparse(func)


def _source_of(kernel: Callable[..., object]) -> str:
    src = getattr(kernel, "src", None)
    if isinstance(src, str):
        return src
    try:
        return inspect.getsource(getattr(kernel, "fn", kernel))
    except (OSError, TypeError):
        return ""


def _tensor_arg(name: str, t: torch.Tensor) -> TensorArg:
    return TensorArg(
        name=name,
        shape=list(t.shape),
        stride=list(t.stride()),
        dtype=str(t.dtype).removeprefix("torch."),
        element_size=t.element_size(),
    )


def _record_launch(
    kernel: Callable[..., object], args: tuple[object, ...], grid: Any, kwargs: dict[str, Any]
) -> Launch:
    """The ``Launch`` of one ``kernel[grid](*args, **kwargs)``; ``grid`` and the launch options in
    ``kwargs`` are whatever the candidate passed Triton (a callable grid, ints of any kind)."""
    pyfn: Callable[..., object] = getattr(kernel, "fn", kernel)  # a Triton kernel's Python function
    sig = _signature_cache.get(pyfn)
    if sig is None:
        sig = _signature_cache[pyfn] = inspect.signature(pyfn)
    call_kwargs = {k: v for k, v in kwargs.items() if k not in _LAUNCH_OPTIONS and k in sig.parameters}
    bound = sig.bind_partial(*args, **call_kwargs)
    bound.apply_defaults()
    values = dict(bound.arguments)
    constexprs: dict[str, _Const] = {}
    tensors: list[TensorArg] = []
    for name, param in sig.parameters.items():
        v = values.get(name)
        if "constexpr" in str(param.annotation) and isinstance(v, (int, bool, float)):
            constexprs[name] = v
        elif v is not None and hasattr(v, "stride") and hasattr(v, "dtype") and hasattr(v, "shape"):
            tensors.append(_tensor_arg(name, v))
    meta = {**values, **{k: v for k, v in kwargs.items() if k in _LAUNCH_OPTIONS}}
    g = grid(meta) if callable(grid) else grid
    g = tuple(int(x) for x in (g if isinstance(g, (tuple, list)) else (g,)))
    parsed = _parsed_cache.get(id(pyfn))
    if parsed is None:
        src = _source_of(kernel)
        tree = _parse(src)
        text = None if tree is None else ast.unparse(tree)
        parsed = _parsed_cache[id(pyfn)] = (src, tree, text, _deciding(tree))
    src, tree, text, deciding = parsed
    # Settings that agree on every name a decision reads (BLOCK_M rarely is one) share features.
    key = (id(pyfn), tuple(sorted((k, v) for k, v in constexprs.items() if k in deciding)))
    if key not in _features_cache:
        _features_cache[key] = _features(src, constexprs, tree, text)
    return Launch(
        kernel=getattr(pyfn, "__name__", "kernel"),
        grid=list(g + (1,) * (3 - len(g))),
        num_warps=int(kwargs.get("num_warps", 4)),
        num_stages=int(kwargs.get("num_stages", 2)),
        constexprs=constexprs,
        extra={k: int(kwargs[k]) for k in _AMD_KNOBS if kwargs.get(k) is not None},
        tensors=tensors,
        **_features_cache[key],
    )


_MM_OPS = ("aten.mm", "aten.addmm", "aten.bmm", "aten._scaled_mm", "aten.baddbmm", "aten._scaled_grouped_mm")
# Operations that allocate or alias memory without running a kernel (the dry pass of
# evaluator/sandbox/_prepare.py runs them as they are); the recorder also leaves out reading a scalar and
# rebinding a storage, which move no data worth counting.
ALLOCATION_OPS = (
    "aten.empty",
    "aten.empty_strided",
    "aten.empty_like",
    "aten.detach",
    "aten.alias",
    "aten.lift_fresh",
    "aten.new_empty",
    "aten.new_empty_strided",
)
_FREE_OPS = (*ALLOCATION_OPS, "aten._local_scalar_dense", "aten.set_")


def _mm_flops(name: str, args: tuple[object, ...]) -> int:
    shapes: list[tuple[int, ...]] = [tuple(a.shape) for a in args if hasattr(a, "shape")]
    if name.startswith(("aten.mm", "aten._scaled_mm")) and len(shapes) >= 2:
        (m, k), (_, n) = shapes[0][-2:], shapes[1][-2:]
        return 2 * m * n * k
    if name.startswith("aten.addmm") and len(shapes) >= 3:
        (m, k), (_, n) = shapes[1][-2:], shapes[2][-2:]
        return 2 * m * n * k
    if name.startswith(("aten.bmm", "aten.baddbmm")) and len(shapes) >= 2:
        b, m, k = shapes[-2]
        return 2 * b * m * shapes[-1][-1] * k
    return 0


def heavy_op_verdict(ops: list[TorchOp], shape: Shape, flops: float | None) -> str | None:
    """The rejection when torch itself did a quarter or more of the task's multiply-adds (a
    matmul fallback however it was spelled), else None; None too when the task's flops are
    unknown."""
    heavy = sum(op.flops for op in ops)
    if not heavy or flops is None or heavy < 0.25 * flops:
        return None
    names = sorted({op.op for op in ops if op.flops})
    return (
        f"rule heavy_op_runtime: the task's matrix product ran in torch ({', '.join(names)}) on "
        f"{shape.label()}; write the kernel instead"
    )


def torch_recorder(sink: list[TorchOp]) -> TorchDispatchMode:
    """A dispatch mode that runs each torch op and appends it to ``sink`` with its bytes (and a
    matmul's flops); allocations, views and scalar reads are left out."""
    import torch
    from torch.utils._pytree import tree_leaves

    def record(func: OpOverload, args: tuple[object, ...], kwargs: dict[str, object]) -> object:
        out = func(*args, **kwargs)
        name = str(func)  # e.g. "aten.mm.default"
        if getattr(func, "is_view", False) or name.startswith(_FREE_OPS):
            return out
        ins = [t for t in tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)]
        outs = [t for t in tree_leaves(out) if isinstance(t, torch.Tensor)]
        sink.append(
            TorchOp(
                op=name,
                bytes_read=sum(t.numel() * t.element_size() for t in ins),
                bytes_written=sum(t.numel() * t.element_size() for t in outs),
                flops=_mm_flops(name, tuple(args)) if name.startswith(_MM_OPS) else 0,
                dtype=str(outs[0].dtype).removeprefix("torch.") if outs and name.startswith(_MM_OPS) else "",
            )
        )
        return out

    return dispatch_mode(record)


@contextlib.contextmanager
def capture_launches(
    launches: list[Launch],
    torch_ops: list[TorchOp] | None,
    choose: Callable[[list[list[Launch]]], int] | None = None,
    execute: bool = False,
    calls: dict[int, tuple[Launch, object, tuple[object, ...], dict[str, Any]]] | None = None,
) -> Iterator[None]:
    """Intercept Triton launches (and torch work, when ``torch_ops`` is a list).

    With ``execute=False`` a launch is only recorded. An autotuned kernel records every config's
    launches and ``choose`` picks the one that would win (by the timing model); with
    ``execute=True`` (the correctness run) launches run and an autotuner uses its first config,
    since benchmarking configs under the interpreter would cost seconds and measure nothing real.
    ``calls``, when given, keeps each launch's call by ``id(launch)`` (the launch, the kernel
    object, its arguments and keywords), for compiling the kernels ahead of time
    (``_compile_stats``).
    """
    from triton.runtime import autotuner, interpreter, jit

    def make_run(original: Callable[..., object]) -> Callable[..., object]:
        def run(
            self: jit.JITFunction | interpreter.InterpretedFunction,
            *args: object,
            grid: Any,
            warmup: bool,
            **kwargs: Any,
        ) -> object:
            if warmup:
                return original(self, *args, grid=grid, warmup=warmup, **kwargs)
            launch = _record_launch(self, args, grid, kwargs)
            launches.append(launch)
            if calls is not None:
                calls[id(launch)] = (launch, self, args, dict(kwargs))
            if execute:
                return original(self, *args, grid=grid, warmup=warmup, **kwargs)
            return None

        return run

    def tuned_run(self: autotuner.Autotuner, *args: object, **kwargs: object) -> object:
        configs = list(self.configs)
        if execute or len(configs) == 1 or choose is None:
            return self.fn.run(*args, **kwargs, **configs[0].all_kwargs())
        options: list[list[Launch]] = []
        for cfg in configs:
            start = len(launches)
            self.fn.run(*args, **kwargs, **cfg.all_kwargs())
            options.append(launches[start:])
            del launches[start:]
        launches.extend(options[choose(options)])
        return None

    launch_paths = swapped(
        (jit.JITFunction, "run", make_run(jit.JITFunction.run)),
        (interpreter.InterpretedFunction, "run", make_run(interpreter.InterpretedFunction.run)),
        (autotuner.Autotuner, "run", tuned_run),
    )
    with launch_paths, torch_recorder(torch_ops) if torch_ops is not None else contextlib.nullcontext():
        yield
