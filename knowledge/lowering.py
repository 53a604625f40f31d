"""A PyTorch seed's first Triton kernel: Inductor's output turned into a standalone submission.

``standalone`` takes what Inductor wrote for a seed (``evaluator.sandbox``'s capture: the wrapper
module's text, where each graph input comes from, which graph output the seed returns, each
kernel's candidate launch settings, Inductor's Triton helpers) and writes a submission that
depends on nothing of Inductor at call time:
- the Triton kernels as Inductor wrote them, with ``@triton.jit`` in place of Inductor's autotuning
  decorator, and the helpers they call (``triton_helpers.maximum`` ...) carried as jit functions;
- the launch code of Inductor's ``call`` as plain Python in ``custom_kernel``: allocations with
  ``torch.empty_strided`` on the inputs' device, each kernel launched with its grid computed from
  its sizes and launch settings (the first of Inductor's candidates for the kernel's size hints) as
  module-level literals (``XBLOCK_0 = 1024``) that the any-kernel techniques tune;
- every op Inductor hands to a library (``extern_kernels.convolution``, an ``aten`` fallback such as
  sort) kept as the torch call it is, and named in the header.
What Inductor specialised while tracing one example (a size it saw as a constant, contiguous
layouts) stays specialised: the evaluation of the lowered kernel against the folder's check on
every test is what shows it covers them, as for any other candidate.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping, Sequence
from typing import NamedTuple

_DROPPED_CALLS = {"assert_size_stride", "assert_alignment", "get_raw_stream", "set_device"}
_ALLOCATORS = {"empty_strided_cuda", "empty_strided_cpu", "empty_strided_xpu", "empty_strided"}
_GRIDS = {"Grid1D": ("x",), "Grid2D": ("x", "y"), "Grid3D": ("x", "y", "z")}
_HELPER_PREFIX = "inductor_"
SETTINGS_COMMENT = "# Launch settings of each kernel: the techniques for any Triton kernel tune these literals."


class LoweringError(ValueError):
    """Inductor's output cannot be made a standalone submission (the message says why, in one line)."""


class Setting(NamedTuple):
    """One launch setting: block-size constexprs, warps, stages."""

    blocks: dict[str, int]
    num_warps: int
    num_stages: int


class Lowered(NamedTuple):
    source: str
    kernels: list[str]  # the Triton kernels, in launch order
    library_calls: list[str]  # ops left to a library, as the submission calls them
    provenance: str  # the header's first sentence: from what, by which torch and triton, for what


class _Kernel(NamedTuple):
    name: str
    number: int  # its place in launch order: the suffix of its settings' names
    params: list[str]  # runtime parameters, in order
    constexprs: list[str]  # block-size constexpr parameters
    grid: tuple[str, ...]
    defs: list[ast.FunctionDef]  # its @triton.jit helpers first, then the kernel


def standalone(
    code: str,
    inputs: Sequence[str],
    params: Sequence[str],
    returns: str,
    settings: Mapping[str, Sequence[Setting]],
    helpers: str,
    provenance: str,
) -> Lowered:
    """The submission for Inductor's module ``code`` (see the module docstring); ``provenance`` is
    the header's first line ("Lowered by Inductor from submission.py (torch 2.11.0, ...)")."""
    try:
        tree = ast.parse(code)
    except SyntaxError as exc:
        raise LoweringError(f"Inductor's module does not parse (line {exc.lineno})") from None
    kernels = _kernels(tree, settings)
    body = _call_body(tree)
    launcher = _Launcher(kernels, settings, inputs, params)
    statements = launcher.rewrite(body)
    used_helpers = sorted({h for k in kernels.values() for d in k.defs for h in _helper_refs(d)})
    helper_defs = _helper_defs(helpers, used_helpers)

    out: list[str] = [f'"""{provenance}', ""]
    out.append("Inductor's Triton kernels as it wrote them, its launch code without its runtime, and each")
    out.append("kernel's launch settings as literals below (the first of Inductor's candidates).")
    if launcher.library:
        out.append(
            "Kept as library calls (Inductor hands these ops to a library): " + ", ".join(launcher.library) + "."
        )
    out += ['"""', "", "import math", "", "import torch", "import triton", "import triton.language as tl"]
    text_of_defs = "\n".join(ast.unparse(d) for k in kernels.values() for d in k.defs)
    text_of_defs += "\n".join(ast.unparse(d) for d in helper_defs)
    if "libdevice." in text_of_defs:
        out.append("from triton.language.extra import libdevice")
    if "tl_math." in text_of_defs:
        out.append("from triton.language import math as tl_math")
    if launcher.uses_aten:
        out += ["", "aten = torch.ops.aten"]
    out += ["", SETTINGS_COMMENT]
    for k in kernels.values():
        setting = _first(settings, k)
        for name in k.constexprs:
            out.append(f"{name}_{k.number} = {setting.blocks[name]}")
    for d in helper_defs:
        out += ["", "", ast.unparse(d)]
    for k in kernels.values():
        for d in k.defs:
            out += ["", "", ast.unparse(d)]
    signature = ", ".join(params)
    function = ast.parse(f"def custom_kernel({signature}):\n    pass").body[0]
    assert isinstance(function, ast.FunctionDef)
    function.body = [*statements, ast.Return(_over_params(_parse_expr(returns), params))]
    ast.fix_missing_locations(function)
    out += ["", "", ast.unparse(function), ""]
    source = "\n".join(out)
    _check_names(source, signature)
    return Lowered(source, [k.name for k in kernels.values()], launcher.library, provenance)


# ---- the kernels --------------------------------------------------------------------------------
def _kernels(tree: ast.Module, settings: Mapping[str, Sequence[Setting]]) -> dict[str, _Kernel]:
    found: dict[str, _Kernel] = {}
    for node in tree.body:
        call = node.value if isinstance(node, ast.Assign) else None
        if not (
            isinstance(call, ast.Call)
            and isinstance(call.func, ast.Attribute)
            and call.func.attr == "triton"
            and isinstance(call.func.value, ast.Name)
            and call.func.value.id == "async_compile"
        ):
            continue
        name, src = (a.value if isinstance(a, ast.Constant) else None for a in call.args[:2])
        if not isinstance(name, str) or not isinstance(src, str):
            raise LoweringError("an async_compile.triton call without a literal name and source")
        found[name] = _kernel(name, src, len(found), settings)
    if not found:
        raise LoweringError("Inductor's module has no Triton kernel")
    return found


def _kernel(name: str, src: str, index: int, settings: Mapping[str, Sequence[Setting]]) -> _Kernel:
    defs: list[ast.FunctionDef] = []
    kernel: ast.FunctionDef | None = None
    grid_type = ""
    for node in ast.parse(src).body:
        if not isinstance(node, ast.FunctionDef):
            continue  # imports and Inductor's runtime set-up: the submission has its own
        autotuned = [d for d in node.decorator_list if _is_heuristics(d)]
        if autotuned:
            grid_type = _grid_type(autotuned[0])
            node.decorator_list = [d for d in node.decorator_list if not _is_heuristics(d)]
        if node.name == name:
            kernel = node
        defs.append(node)
    if kernel is None:
        raise LoweringError(f"Inductor's source of {name} does not define it")
    # A kernel's own helpers get the kernel's name: two kernels may each have `_triton_helper_fn_add0`.
    local = {d.name: f"{name}__{d.name.lstrip('_')}" for d in defs if d is not kernel}
    for d in defs:
        for ref in ast.walk(d):
            if isinstance(ref, ast.Name) and ref.id in local:
                ref.id = local[ref.id]
        if d.name in local:
            d.name = local[d.name]
        _rename_helper_refs(d)
    if grid_type not in _GRIDS:
        raise LoweringError(f"{name}: Inductor's grid {grid_type or '(none)'} is not one the lowering writes")
    args = kernel.args.args
    constexprs = [a.arg for a in args if _is_constexpr(a.annotation)]
    runtime = [a.arg for a in args if not _is_constexpr(a.annotation)]
    k = _Kernel(name, index, runtime, constexprs, _GRIDS[grid_type], defs)
    setting = _first(settings, k)
    missing = [c for c in constexprs if c not in setting.blocks]
    if missing:
        raise LoweringError(f"{name}: no launch setting gives {', '.join(missing)}")
    return k


def _rename_helper_refs(fn: ast.FunctionDef) -> None:
    """``triton_helpers.maximum`` -> ``inductor_maximum`` (carried below as a jit function)."""

    class Rename(ast.NodeTransformer):
        def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
            if isinstance(node.value, ast.Name) and node.value.id == "triton_helpers":
                return ast.copy_location(ast.Name(_HELPER_PREFIX + node.attr, ast.Load()), node)
            return self.generic_visit(node)

    Rename().visit(fn)


def _helper_refs(fn: ast.FunctionDef) -> set[str]:
    return {
        n.id[len(_HELPER_PREFIX) :] for n in ast.walk(fn) if isinstance(n, ast.Name) and n.id.startswith(_HELPER_PREFIX)
    }


def _is_heuristics(node: ast.expr) -> bool:
    func = node.func if isinstance(node, ast.Call) else node
    return isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "triton_heuristics"


def _grid_type(decorator: ast.expr) -> str:
    if not isinstance(decorator, ast.Call):
        return ""
    for kw in decorator.keywords:
        if kw.arg == "inductor_meta" and isinstance(kw.value, ast.Dict):
            for key, value in zip(kw.value.keys, kw.value.values):
                if isinstance(key, ast.Constant) and key.value == "grid_type" and isinstance(value, ast.Constant):
                    return str(value.value)
    return ""


def _is_constexpr(annotation: ast.expr | None) -> bool:
    return annotation is not None and ast.unparse(annotation) in {"tl.constexpr", "triton.language.constexpr"}


def _first(settings: Mapping[str, Sequence[Setting]], kernel: _Kernel) -> Setting:
    candidates = settings.get(kernel.name) or []
    if not candidates:
        if kernel.constexprs:
            raise LoweringError(f"{kernel.name}: Inductor's heuristics gave no launch setting")
        return Setting({}, 4, 1)
    return candidates[0]


# ---- Inductor's helpers -------------------------------------------------------------------------
def _helper_defs(helpers: str, wanted: list[str]) -> list[ast.FunctionDef]:
    """The jit functions of Inductor's triton_helpers that the kernels call, and those they call."""
    if not wanted:
        return []
    module = ast.parse(helpers)
    defs = {n.name: n for n in module.body if isinstance(n, ast.FunctionDef)}
    chosen: dict[str, ast.FunctionDef] = {}
    todo = list(wanted)
    while todo:
        name = todo.pop()
        if name in chosen:
            continue
        fn = defs.get(name)
        if fn is None or not any(ast.unparse(d) == "triton.jit" for d in fn.decorator_list):
            raise LoweringError(f"the kernels call triton_helpers.{name}, which is not a Triton function there")
        for node in ast.walk(fn):
            if isinstance(node, ast.Name) and node.id in defs and node.id != name:
                todo.append(node.id)
                node.id = _HELPER_PREFIX + node.id
            elif isinstance(node, ast.Name) and node.id == "math":  # triton_helpers' name for tl.math
                node.id = "tl_math"
        fn.name = _HELPER_PREFIX + name
        chosen[name] = fn
    return [chosen[n] for n in sorted(chosen)]


# ---- the launch code ----------------------------------------------------------------------------
def _call_body(tree: ast.Module) -> list[ast.stmt]:
    """The statements of Inductor's ``call(args)`` (a method of its Runner in newer torch)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == "call":
            return node.body
    raise LoweringError("Inductor's module has no call(args)")


def _parse_expr(text: str) -> ast.expr:
    return ast.parse(text, mode="eval").body


def _over_params(expr: ast.expr, params: Sequence[str]) -> ast.expr:
    """``L['data'][0]`` -> ``data[0]``: Dynamo's names for the call's arguments, as the arguments."""

    class Rename(ast.NodeTransformer):
        def visit_Subscript(self, node: ast.Subscript) -> ast.AST:
            if (
                isinstance(node.value, ast.Name)
                and node.value.id == "L"
                and isinstance(node.slice, ast.Constant)
                and node.slice.value in params
            ):
                return ast.copy_location(ast.Name(str(node.slice.value), ast.Load()), node)
            return self.generic_visit(node)

    result = Rename().visit(expr)
    assert isinstance(result, ast.expr)
    return result


class _Launcher(ast.NodeTransformer):
    """Inductor's ``call`` body as plain Python: its runtime's calls replaced by torch's and
    Triton's, each kernel's ``.run`` by a launch with a grid and the module's settings."""

    def __init__(
        self,
        kernels: dict[str, _Kernel],
        settings: Mapping[str, Sequence[Setting]],
        inputs: Sequence[str],
        params: Sequence[str],
    ) -> None:
        self.kernels = kernels
        self.settings = settings
        self.inputs = [_over_params(_parse_expr(e), params) for e in inputs]
        self.tensor_inputs = [i for i, e in enumerate(inputs) if not any(s in e for s in (".size()", ".stride()"))]
        self.library: list[str] = []
        self.uses_aten = False
        self.device_name = ""

    def rewrite(self, body: list[ast.stmt]) -> list[ast.stmt]:
        out: list[ast.stmt] = []
        for stmt in self._flatten(body):
            if isinstance(stmt, ast.Assign) and ast.unparse(stmt.value) == "args":  # arg0_1, ... = args
                targets = stmt.targets[0]
                names = (
                    [t.id for t in targets.elts if isinstance(t, ast.Name)] if isinstance(targets, ast.Tuple) else []
                )
                if len(names) != len(self.inputs):
                    raise LoweringError(f"call takes {len(names)} inputs, the trace has {len(self.inputs)}")
                out += [ast.Assign([ast.Name(n, ast.Store())], e) for n, e in zip(names, self.inputs)]
                if self.tensor_inputs:
                    self.device_name = "device"
                    first = names[self.tensor_inputs[0]]
                    out.append(ast.Assign([ast.Name("device", ast.Store())], _parse_expr(f"{first}.device")))
                continue
            if isinstance(stmt, ast.Return):
                out.append(
                    ast.Assign([ast.Name("outs", ast.Store())], self.visit(stmt.value or ast.Tuple([], ast.Load())))
                )
                continue
            new = self.visit(stmt)
            assert isinstance(new, ast.stmt)
            out.append(new)
        for s in out:
            ast.fix_missing_locations(s)
        return out

    def _flatten(self, body: list[ast.stmt]) -> list[ast.stmt]:
        """Drop what only Inductor's runtime needs: ``args.clear()``, ``del``, the stride asserts,
        stream handles; unwrap its device guards (the tensors are on their device already)."""
        out: list[ast.stmt] = []
        for stmt in body:
            if isinstance(stmt, ast.With) and "DeviceGuard" in ast.unparse(stmt.items[0].context_expr):
                out += self._flatten(stmt.body)
            elif isinstance(stmt, ast.Delete):
                continue
            elif isinstance(stmt, (ast.Expr, ast.Assign)) and isinstance(stmt.value, ast.Call):
                func = stmt.value.func
                name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
                if name in _DROPPED_CALLS or ast.unparse(func) == "args.clear":
                    continue
                out.append(stmt)
            else:
                out.append(stmt)
        return out

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        func = node.func
        if isinstance(func, ast.Name) and func.id in _ALLOCATORS:
            if not self.device_name:
                raise LoweringError("Inductor allocates a buffer but the call has no tensor input to place it by")
            size, stride, dtype = node.args[:3]
            return ast.Call(
                _parse_expr("torch.empty_strided"),
                [size, stride],
                [ast.keyword("dtype", dtype), ast.keyword("device", ast.Name(self.device_name, ast.Load()))],
            )
        if isinstance(func, ast.Name) and func.id == "reinterpret_tensor":
            return ast.Call(_parse_expr("torch.as_strided"), node.args, node.keywords)
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
            owner = func.value.id
            if owner == "extern_kernels":
                self._library(f"torch.{func.attr}")
                return ast.Call(
                    ast.Attribute(ast.Name("torch", ast.Load()), func.attr, ast.Load()), node.args, node.keywords
                )
            if owner in self.kernels and func.attr == "run":
                return self._launch(self.kernels[owner], node)
        text = ast.unparse(func)
        if text.startswith(("aten.", "torch.ops.aten.")):
            self.uses_aten = self.uses_aten or text.startswith("aten.")
            self._library(text)
        return node

    def _library(self, name: str) -> None:
        if name not in self.library:
            self.library.append(name)

    def _launch(self, k: _Kernel, run: ast.Call) -> ast.Call:
        if any(kw.arg == "grid" for kw in run.keywords):
            raise LoweringError(f"{k.name}: a launch with Inductor's grid= (older torch) is not one the lowering reads")
        if len(run.args) != len(k.params):
            raise LoweringError(f"{k.name}: launched with {len(run.args)} arguments, it takes {len(k.params)}")
        given = dict(zip(k.params, run.args))
        grid = []
        for axis in k.grid:
            numel = given.get(f"{axis}numel")
            if numel is None:
                raise LoweringError(f"{k.name}: its {axis} grid has no {axis}numel argument")
            block = f"{axis.upper()}BLOCK"
            if block in k.constexprs:
                grid.append(_parse_expr(f"triton.cdiv({ast.unparse(numel)}, {block}_{k.number})"))
            else:
                grid.append(numel)
        setting = _first(self.settings, k)
        keywords = [ast.keyword(c, ast.Name(f"{c}_{k.number}", ast.Load())) for c in k.constexprs]
        keywords += [ast.keyword("num_warps", ast.Constant(setting.num_warps))]
        keywords += [ast.keyword("num_stages", ast.Constant(setting.num_stages))]
        target = ast.Subscript(ast.Name(k.name, ast.Load()), ast.Tuple(grid, ast.Load()), ast.Load())
        return ast.Call(target, list(run.args), keywords)


def _check_names(source: str, signature: str) -> None:
    """Every name the submission reads is defined in it or is a builtin: a name of Inductor's
    runtime left behind would fail only when the kernel is called."""
    import builtins

    tree = ast.parse(source)
    defined = set(dir(builtins)) | {"math", "torch", "triton", "tl", "libdevice", "tl_math", "aten"}
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef):
            defined.add(node.name)
            defined.update(a.arg for a in node.args.args)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            defined.add(node.id)
        elif isinstance(node, (ast.For, ast.comprehension)) and isinstance(node.target, ast.Name):
            defined.add(node.target.id)
    missing = sorted(
        {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)} - defined
    )
    if missing:
        raise LoweringError(f"the lowered code still uses Inductor's {', '.join(missing)}")


def is_pytorch_only(source: str) -> bool:
    """True for a submission with no kernel of its own: no Triton function, no inline CUDA/C++
    extension, nothing but torch calls (what the lowering is for)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return False
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and any("jit" in ast.unparse(d) for d in node.decorator_list):
            return False
        if isinstance(node, ast.Attribute) and node.attr in {"jit", "load_inline", "cpp_extension"}:
            return False
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in node.names] + (
                [node.module] if isinstance(node, ast.ImportFrom) and node.module else []
            )
            if any(n.split(".")[0] in {"triton", "cupy", "numba", "cuda", "tilelang", "cutlass"} for n in names):
                return False
            if any("cpp_extension" in n for n in names):
                return False
    return any(isinstance(n, ast.FunctionDef) and n.name == "custom_kernel" for n in tree.body) or any(
        isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "custom_kernel" for t in n.targets)
        for n in tree.body
    )


# GPU MODE's utils.DeterministicContext, as the reference's ``with`` block uses it: cuDNN without
# TF32 and deterministic, torch's deterministic algorithms, the previous settings back after.
_DETERMINISTIC = '''
class DeterministicContext:
    """The reference's numerics: cuDNN without TF32, deterministic algorithms."""

    def __enter__(self):
        self.before = (torch.backends.cudnn.allow_tf32, torch.backends.cudnn.deterministic)
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cudnn.deterministic = True
        torch.use_deterministic_algorithms(True)
        return self

    def __exit__(self, *exc):
        torch.backends.cudnn.allow_tf32, torch.backends.cudnn.deterministic = self.before
        torch.use_deterministic_algorithms(False)
'''
_NOT_A_KERNEL = {"generate_input", "check_implementation"}  # the reference's other duties


def reference_submission(reference: str, deterministic: bool = True) -> str:
    """A folder's ``reference.py`` as a submission: its ``ref_kernel`` as ``custom_kernel``, with the
    helpers and constants it needs, without the input generator, the check and the harness's
    ``utils`` (whose ``DeterministicContext`` is restated here). ``deterministic=False`` makes that
    context a no-op, for the lowering: Dynamo cannot trace the settings it changes as one graph,
    and the lowered kernel is checked against the real reference like any other. LoweringError
    with one line when the reference has no ``ref_kernel`` or needs more of ``utils``."""
    try:
        tree = ast.parse(reference)
    except SyntaxError as exc:
        raise LoweringError(f"reference.py does not parse: {exc.msg} (line {exc.lineno})") from None
    harness: set[str] = set()
    body: list[ast.stmt] = []
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module in {"utils", "reference", "eval"}:
            harness.update(a.asname or a.name for a in node.names)
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name in _NOT_A_KERNEL:
            continue
        elif isinstance(node, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.ClassDef)):
            body.append(node)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names = {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
            if not names & _NOT_A_KERNEL:
                body.append(node)
    if not any(isinstance(n, ast.FunctionDef) and n.name == "ref_kernel" for n in body):
        raise LoweringError("reference.py defines no ref_kernel")
    used = {n.id for stmt in body for n in ast.walk(stmt) if isinstance(n, ast.Name)} & harness
    if used - {"DeterministicContext"}:
        unknown = ", ".join(sorted(used - {"DeterministicContext"}))
        raise LoweringError(f"reference.py's ref_kernel uses {unknown} of the harness's utils")
    shim = ""
    if "DeterministicContext" in used:
        shim = _DETERMINISTIC if deterministic else "\nDeterministicContext = contextlib.nullcontext\n"
    head = "import contextlib\nimport torch\n" if shim else ""
    return head + shim + "\n" + ast.unparse(ast.Module(body=body, type_ignores=[])) + "\n\ncustom_kernel = ref_kernel\n"
