"""Direct launch for any Triton kernel: the JIT's launch path once, the compiled kernel afterwards.

A leaderboard times each call alone, between two device-wide synchronisations, so the Python that
runs before the GPU gets its launch is part of the score. For a memory-bound kernel on a few
megabytes that Python is most of it: one launch through Triton's JIT made 65-96 us of host work in
a call of the GEMM seed on an H200 (docs/results.md#host-work-inside-a-call), more than a small
memory-bound kernel's whole GPU time. Triton's JIT path binds every argument, computes its
specialisation and looks up its cache on every call; once a launch has compiled, the compiled
kernel can be called directly with the same arguments.

This is the GEMM catalogue's ``lean_host`` for kernels without the seed's regions: it reads the
source's syntax and routes each ``kernel[grid](...)`` launch through ``_ks_launch``. The cache key
holds what Triton specialises on (each tensor's dtype and 16-byte alignment, each integer's value,
each keyword's value; never a tensor's address), so a call that would compile differently takes
the JIT path again. Where the direct call is unavailable (Triton's interpreter, autotuned or
heuristic kernels whose settings the call does not name, a grid given as a function, an argument
of another type) every call takes the JIT path, which is what the source did before.
"""

from __future__ import annotations

import ast

from kernel_scientist.blackboard.records import Param
from kernel_scientist.knowledge._base import Form, Technique
from kernel_scientist.knowledge._regions import NotApplicable

HELPER = '''

# region-free helper written by the direct_launch technique (knowledge/techniques/host/direct.py)
_KS_COMPILED = {}


def _ks_key(value):
    """What Triton specialises a launch on, for one argument: a tensor's dtype and 16-byte
    alignment (torch allocates storage at 512-byte boundaries, so the offset into it decides);
    an int's value (a superset of Triton's == 1, multiple of 16 and width); a float's type.
    Anything else returns None: that launch always takes the JIT path."""
    if hasattr(value, "storage_offset") and hasattr(value, "dtype"):
        return (value.dtype, value.storage_offset() * value.element_size() % 16 == 0)
    if isinstance(value, float):  # floats are not specialised: their value must not grow the cache
        return (float,)
    if isinstance(value, (int, bool, str)) or value is None:
        return (type(value), value)
    return None


def _ks_launch(kernel, grid, args, kwargs):
    """Launch ``kernel[grid](*args, **kwargs)``; after the first launch with the same
    specialisation, through the compiled kernel directly (no binding, no cache lookup)."""
    if callable(grid):
        return kernel[grid](*args, **kwargs)
    parts = [_ks_key(a) for a in args] + [_ks_key(v) for v in kwargs.values()]
    if None in parts:
        return kernel[grid](*args, **kwargs)
    key = (kernel, tuple(grid), tuple(kwargs), tuple(parts))
    runner = _KS_COMPILED.get(key)
    if runner is not None:
        names, launch = runner
        return launch(*args, *(kwargs[n] for n in names))
    compiled = kernel[grid](*args, **kwargs)
    names = getattr(kernel, "arg_names", None)
    if compiled is not None and hasattr(compiled, "__getitem__") and names is not None:
        rest = list(names[len(args):])
        if all(n in kwargs for n in rest):  # else (defaults, autotuned settings) the JIT path for good
            _KS_COMPILED[key] = (rest, compiled[tuple(grid) + (1,) * (3 - len(grid))])
    return compiled
'''


def _jit_functions(tree: ast.Module) -> set[str]:
    """Names of module-level functions decorated with ``triton.jit`` (or ``@jit``)."""
    names = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            for dec in node.decorator_list:
                target = dec.func if isinstance(dec, ast.Call) else dec
                text = ast.unparse(target)
                if text in ("triton.jit", "jit"):
                    names.add(node.name)
    return names


def _sites(source: str) -> list[ast.Call]:
    """Each ``kernel[grid](...)`` call of a jitted kernel, outside the kernels themselves."""
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        raise NotApplicable(f"direct_launch: the source does not parse (line {exc.lineno})") from None
    kernels = _jit_functions(tree)
    found = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Subscript)
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id in kernels
        ):
            if any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords):
                continue  # *args / **kwargs: the call's arguments are not visible in the source
            found.append(node)
    return found


def _rewritten(source: str, call: ast.Call) -> str:
    """The source text of ``_ks_launch(kernel, grid, (args,), {kwargs})`` for one launch."""

    def segment(node: ast.AST) -> str:  # the author's own text of one node
        return ast.get_source_segment(source, node) or ast.unparse(node)

    func = call.func
    assert isinstance(func, ast.Subscript) and isinstance(func.value, ast.Name)  # _sites found it so
    args = ", ".join(segment(a) for a in call.args)
    kwargs = ", ".join(f"{k.arg!r}: {segment(k.value)}" for k in call.keywords)
    grid = segment(func.slice)
    if isinstance(func.slice, ast.Tuple) and not grid.lstrip().startswith("("):
        grid = f"({grid})"  # ``K[a, b](...)``: a tuple without parentheses, not two arguments
    return f"_ks_launch({func.value.id}, {grid}, ({args}{',' if len(call.args) == 1 else ''}), {{{kwargs}}})"


class DirectLaunch(Technique):
    name = "direct_launch"
    title = "Direct launch: call each compiled Triton kernel directly after its first launch"
    category = "tuning"
    prose = (
        "Under a leaderboard's protocol every call is timed alone between two device-wide "
        "synchronisations, so the Python before the GPU launch is part of the score, and for a "
        "memory-bound kernel on small inputs it is most of it. Triton's JIT binds every argument, "
        "computes its specialisation and looks up its cache on each call; keeping the compiled "
        "kernel per specialisation and calling it directly skips that. Nothing on the GPU changes: "
        "back-to-back timings (do_bench) do not see the gain, single timed calls do."
    )
    prior_min, prior_max = 0.0, 0.3
    novelty = 0.4
    kernels = ("any",)

    def detect(self, source: str) -> dict[str, Param] | None:
        if "def _ks_launch(" in source:
            return {"launch": "direct"}
        if not _sites(source):
            raise NotApplicable(f"{self.name}: no kernel[grid](...) launch of a @triton.jit function")
        return None

    def forms(self, source: str) -> list[Form]:
        self.detect(source)  # a kernel without a launch to route is told so, not offered nothing
        changes = [
            "route every kernel[grid](...) launch through _ks_launch",
            "after the first launch per specialisation, call the compiled kernel directly",
        ]
        return [Form({"launch": "direct"}, "direct compiled launch", changes)]

    def apply(self, source: str, params: dict[str, Param], reference: str | None = None) -> str:
        self._param(params, "launch", ("direct",))
        if self.detect(source) is not None:
            return source
        lines = source.splitlines(keepends=True)
        for call in sorted(_sites(source), key=lambda c: (c.lineno, c.col_offset), reverse=True):
            end, end_col = call.end_lineno or call.lineno, call.end_col_offset or 0
            if call.lineno != end:  # a launch over several lines: join it into one
                first, last = lines[call.lineno - 1], lines[end - 1]
                text = first[: call.col_offset] + _rewritten(source, call) + last[end_col:]
                lines[call.lineno - 1 : end] = [text]
            else:
                line = lines[call.lineno - 1]
                lines[call.lineno - 1] = line[: call.col_offset] + _rewritten(source, call) + line[end_col:]
        out = "".join(lines)
        tree = ast.parse(out)
        imports = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
        if not imports:
            raise NotApplicable(f"{self.name}: no import to place the helper after")
        at = max(n.end_lineno or n.lineno for n in imports)
        body = out.splitlines(keepends=True)
        return "".join(body[:at]) + HELPER + "".join(body[at:])
