"""What the techniques for any Triton kernel read in a submission's syntax, and how they edit it.

A user's kernel has no regions, so these techniques find what they rewrite by its syntax: the
module's ``@triton.jit`` kernels, each launch of one (``kernel[grid](...)``, or the forms that
``direct_launch`` and ``per_shape_tuning`` turn it into), the integer constant a launch's block
size comes from, which of a kernel's arguments it may store to, and which of its names derive from
the program id. Edits are made to the text at the syntax tree's positions, so the author's
formatting and comments stay where they are; every rewrite is parsed again by its technique.

Where the syntax is not one of the forms read here, the answer is ``NotApplicable`` with the
reason, never a guess: a wrong rewrite costs a scarce evaluation.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Iterator
from typing import ClassVar, Literal, NamedTuple, TypeGuard

from kernel_scientist.knowledge._base import Technique, Variant
from kernel_scientist.knowledge._regions import NotApplicable, has

# A block-size name: BLOCK, BLOCK_M, XBLOCK, R0_BLOCK, XBLOCK_0 (TorchInductor's per-kernel
# constants); not NUM_BLOCKS or BLOCKS_PER_SM, which count blocks rather than size one.
BLOCK_NAME = re.compile(r"BLOCK(?!S)")
# The GEMM seed's regions: a kernel carrying them is rewritten by the GEMM techniques, which know
# the task's constraints (BLOCK_K is the scale block); a syntax-level rewrite would not.
GEMM_REGIONS = ("select_config", "launch")
# Calls inside a kernel that never store through their arguments (besides tl.store and atomics,
# which are read for what they store to): Triton's language, libdevice, Inductor's helpers.
_PURE_PREFIXES = ("tl.", "triton.language.", "triton.", "libdevice.", "triton_helpers.", "math.")
_PURE_BUILTINS = {"range", "min", "max", "abs", "int", "float", "bool", "len", "print", "static_print"}

SiteForm = Literal["jit", "direct", "tuned"]
Positioned = ast.expr | ast.stmt | ast.arg


class SyntaxTechnique(Technique):
    """A technique for any Triton kernel, read by its syntax: it applies to every task's kernels,
    GEMM tasks' included (a user's own matrix product has no regions either), and refuses a kernel
    that carries the GEMM seed's regions (``refuse_gemm_regions``). ``variants`` offers none where
    it does not apply; ``detect``, ``forms`` and ``apply`` say why."""

    kernels: ClassVar[tuple[str, ...]] = ("any", "gemm")

    def variants(self, source: str, reference: str | None = None) -> list[Variant]:
        try:
            return super().variants(source, reference)
        except NotApplicable:
            return []


def tree_of(source: str, technique: str) -> ast.Module:
    try:
        return ast.parse(source)
    except SyntaxError as exc:
        raise NotApplicable(f"{technique}: the source does not parse (line {exc.lineno})") from None


def refuse_gemm_regions(source: str, technique: str) -> None:
    """Refuse a kernel that carries the GEMM seed's regions: the GEMM catalogue rewrites it."""
    if any(has(source, name) for name in GEMM_REGIONS):
        raise NotApplicable(
            f"{technique}: the kernel carries the GEMM seed's regions; the GEMM techniques rewrite it "
            "with the task's constraints in mind"
        )


def is_block_name(name: str) -> bool:
    return BLOCK_NAME.search(name.upper()) is not None


def power_of_two(value: object) -> TypeGuard[int]:
    return type(value) is int and value > 0 and value & (value - 1) == 0


def dotted(node: ast.AST) -> str:
    """``tl.program_id`` for the attribute chain ``tl.program_id``; "" for anything else."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return ""
    return ".".join([node.id, *reversed(parts)])


def _names(node: ast.AST | None) -> set[str]:
    if node is None:
        return set()
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


# -- kernels ------------------------------------------------------------------------------------


class Kernel(NamedTuple):
    node: ast.FunctionDef
    plain: bool  # decorated with triton.jit alone (an autotuned kernel takes settings from its decorator)

    @property
    def params(self) -> list[str]:
        return [a.arg for a in self.node.args.args]


def kernels(tree: ast.Module) -> dict[str, Kernel]:
    """The module-level ``@triton.jit`` functions by name."""
    found = {}
    for node in tree.body:
        if not isinstance(node, ast.FunctionDef):
            continue
        decorators = [dotted(d.func if isinstance(d, ast.Call) else d) for d in node.decorator_list]
        if any(d in ("triton.jit", "jit") for d in decorators):
            found[node.name] = Kernel(node, plain=len(decorators) == 1)
    return found


def body_start(kernel: ast.FunctionDef) -> int:
    """Index of the first statement of ``kernel``'s body after its docstring."""
    first = kernel.body[0]
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
        return 1 if len(kernel.body) > 1 else 0
    return 0


def calls(node: ast.AST, name: str) -> list[ast.Call]:
    """Every call of ``name`` (a dotted name such as ``tl.program_id``) inside ``node``."""
    return [c for c in ast.walk(node) if isinstance(c, ast.Call) and dotted(c.func) == name]


def _assignments(scope: ast.AST) -> Iterator[tuple[str, ast.AST | None]]:
    """(name, the expression it is assigned from, or None where that is not one expression) for
    every binding of a name in ``scope``: assignments, loop targets, ``with ... as``, walrus."""
    for node in ast.walk(scope):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Tuple) and isinstance(node.value, ast.Tuple):
                    for t, v in zip(target.elts, node.value.elts, strict=False):
                        yield from ((n, v) for n in _names(t))
                else:
                    yield from ((n, node.value) for n in _names(target))
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            yield from ((n, node.value) for n in _names(node.target))
        elif isinstance(node, (ast.For, ast.comprehension)):
            yield from ((n, node.iter) for n in _names(node.target))
        elif isinstance(node, ast.withitem) and node.optional_vars is not None:
            yield from ((n, node.context_expr) for n in _names(node.optional_vars))
        elif isinstance(node, ast.NamedExpr):
            yield node.target.id, node.value
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            yield from ((a.asname or a.name.split(".")[0], None) for a in node.names)


def derived(scope: ast.AST, roots: dict[str, set[str]]) -> dict[str, set[str]]:
    """For each name in ``scope``, the roots it is computed from (``roots`` maps a root's own names
    to the roots they stand for), through any chain of assignments."""
    found = {name: set(tags) for name, tags in roots.items()}
    pairs = [(name, _names(value)) for name, value in _assignments(scope) if value is not None]
    changed = True
    while changed:
        changed = False
        for name, sources in pairs:
            tags = set().union(*(found.get(s, set()) for s in sources)) if sources else set()
            if not tags <= found.get(name, set()):
                found.setdefault(name, set()).update(tags)
                changed = True
    return found


def pid_derived(kernel: ast.FunctionDef) -> set[str]:
    """Names of ``kernel`` computed from its program id (directly or through other names)."""
    roots = {"__pid__": {"pid"}}
    pairs = []
    for name, value in _assignments(kernel):
        if value is not None and calls(value, "tl.program_id"):
            pairs.append(name)
    for name in pairs:
        roots[name] = {"pid"}
    return {name for name, tags in derived(kernel, roots).items() if tags and name != "__pid__"}


def stored_params(kernel: ast.FunctionDef) -> set[str]:
    """The parameters ``kernel`` may store to: those that reach the pointer of a ``tl.store`` or an
    atomic, the object of a ``.store(...)`` (a block pointer or descriptor made from them), or any
    argument of a call that is not Triton's language (a helper kernel may store through it)."""
    params = [a.arg for a in kernel.args.args]
    origin = derived(kernel, {p: {p} for p in params})

    def roots(node: ast.AST | None) -> set[str]:
        return set().union(*(origin.get(n, set()) for n in _names(node))) if node is not None else set()

    written: set[str] = set()
    for call in (c for c in ast.walk(kernel) if isinstance(c, ast.Call)):
        name = dotted(call.func)
        attr = call.func.attr if isinstance(call.func, ast.Attribute) else ""
        if attr == "store" or attr.startswith("atomic_"):
            pointer = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "pointer"), None)
            written |= roots(pointer)
            if name not in (f"tl.{attr}", f"triton.language.{attr}"):
                written |= roots(call.func)  # desc.store(...): the descriptor's tensor
        elif not name.startswith(_PURE_PREFIXES) and name not in _PURE_BUILTINS:
            written |= set().union(*(roots(a) for a in [*call.args, *(k.value for k in call.keywords)]))
    constexprs = {
        a.arg for a in kernel.args.args if a.annotation is not None and "constexpr" in ast.unparse(a.annotation)
    }
    return written & set(params) - constexprs


# -- launch sites ----------------------------------------------------------------------------------


class Site(NamedTuple):
    """One launch of a kernel of the module, in one of three forms:

    - ``jit``: ``kernel[grid](args..., KEY=value...)``;
    - ``direct``: ``_ks_launch(kernel, grid, (args...), {"KEY": value...})`` (direct_launch);
    - ``tuned``: ``_ks_tuned(kernel, lambda cfg: grid, (args...), dict(KEY=value...), ...)``
      (per_shape_tuning), whose grid is the lambda's body.
    """

    call: ast.Call
    kernel: str
    form: SiteForm
    grid: ast.expr
    args: tuple[ast.expr, ...]
    keywords: dict[str, ast.expr]
    host: ast.FunctionDef | None  # the function the launch is in (None: module level)
    holder: ast.AST  # the node keywords are added to: the call, the dict literal or dict(...) call

    def keyword_text(self, name: str, value: str) -> str:
        return f"{name!r}: {value}" if self.form == "direct" else f"{name}={value}"

    def add_keywords(self, pairs: list[tuple[str, str]]) -> Edit:
        """The edit that adds ``NAME=value`` keywords to the launch (after its last argument)."""
        text = ", ".join(self.keyword_text(n, v) for n, v in pairs)
        holder = self.holder
        if isinstance(holder, ast.Call):
            last = [*holder.args, *(k.value for k in holder.keywords)]
        else:
            assert isinstance(holder, ast.Dict)
            last = list(holder.values)
        if last:
            end = max(last, key=lambda n: (n.end_lineno or 0, n.end_col_offset or 0))
            return Edit(
                end.end_lineno or 0, end.end_col_offset or 0, end.end_lineno or 0, end.end_col_offset or 0, ", " + text
            )
        # an empty holder: right after its opening parenthesis or brace
        line, col = holder.end_lineno or 0, (holder.end_col_offset or 0) - 1
        return Edit(line, col, line, col, text)


def _parents(tree: ast.AST) -> dict[int, ast.AST]:
    return {id(child): node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}


def _host(node: ast.AST, parents: dict[int, ast.AST]) -> ast.FunctionDef | None:
    while id(node) in parents:
        node = parents[id(node)]
        if isinstance(node, ast.FunctionDef):
            return node
    return None


def sites(tree: ast.Module, technique: str) -> list[Site]:
    """Every launch of a kernel of the module, in source order, outside the kernels themselves.
    A launch whose arguments are not all visible (``*args``, ``**cfg``) is not a site."""
    known = kernels(tree)
    parents = _parents(tree)
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        site = _site(node, known)
        if site is None:
            continue
        host = _host(node, parents)
        if host is not None and host.name in known:
            continue
        found.append(site._replace(host=host))
    return sorted(found, key=lambda s: (s.call.lineno, s.call.col_offset))


def _site(node: ast.Call, known: dict[str, Kernel]) -> Site | None:
    func = node.func
    if isinstance(func, ast.Subscript) and isinstance(func.value, ast.Name) and func.value.id in known:
        if any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords):
            return None
        keywords = {k.arg: k.value for k in node.keywords if k.arg is not None}
        return Site(node, func.value.id, "jit", func.slice, tuple(node.args), keywords, None, node)
    if not isinstance(func, ast.Name) or func.id not in ("_ks_launch", "_ks_tuned") or len(node.args) < 4:
        return None
    kernel, grid, args, options = node.args[:4]
    if not (isinstance(kernel, ast.Name) and kernel.id in known and isinstance(args, ast.Tuple)):
        return None
    if any(isinstance(a, ast.Starred) for a in args.elts):
        return None
    if func.id == "_ks_launch" and isinstance(options, ast.Dict):
        keywords = {}
        for key, value in zip(options.keys, options.values, strict=True):
            if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
                return None
            keywords[key.value] = value
        return Site(node, kernel.id, "direct", grid, tuple(args.elts), keywords, None, options)
    if (
        func.id == "_ks_tuned"
        and isinstance(grid, ast.Lambda)
        and isinstance(options, ast.Call)
        and dotted(options.func) == "dict"
        and not options.args
        and all(k.arg is not None for k in options.keywords)
    ):
        keywords = {k.arg: k.value for k in options.keywords if k.arg is not None}
        return Site(node, kernel.id, "tuned", grid.body, tuple(args.elts), keywords, None, options)
    return None


# -- what a launch setting is bound to ------------------------------------------------------------


class Binding(NamedTuple):
    """Where a launch keyword's integer value is written: ``literal``, in the constant ``name``'s
    one assignment, or in the keyword itself (``name`` None)."""

    literal: ast.Constant
    name: str | None

    @property
    def value(self) -> int:
        value = self.literal.value
        assert type(value) is int  # binding() keeps integer literals only
        return value


def _int_literal(node: ast.AST | None) -> ast.Constant | None:
    return node if isinstance(node, ast.Constant) and type(node.value) is int else None


def _bindings_of(scope: ast.AST, name: str, top_level: bool) -> list[tuple[str, ast.AST | None]]:
    if not top_level:
        return [(n, v) for n, v in _assignments(scope) if n == name]
    assert isinstance(scope, ast.Module)
    out: list[tuple[str, ast.AST | None]] = []
    for statement in scope.body:
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out += [(statement.name, None)] if statement.name == name else []
            continue
        out += [(n, v) for n, v in _assignments(statement) if n == name]
    return out


def binding(tree: ast.Module, host: ast.FunctionDef | None, value: ast.expr) -> Binding | None:
    """Where ``value`` (a launch keyword's value) gets its integer from: an integer literal, or a
    name assigned exactly once, to an integer literal, in the launching function or else at module
    level (and nowhere in a function through ``global``). None for anything else (a value computed
    per call, a parameter, a name assigned twice)."""
    literal = _int_literal(value)
    if literal is not None:
        return Binding(literal, None)
    if not isinstance(value, ast.Name):
        return None
    name = value.id
    if host is not None:
        if name in [a.arg for a in host.args.args + host.args.kwonlyargs]:
            return None
        local = _bindings_of(host, name, top_level=False)
        if local:
            literal = _int_literal(local[0][1]) if len(local) == 1 else None
            return Binding(literal, name) if literal is not None else None
    if any(isinstance(n, ast.Global) and name in n.names for n in ast.walk(tree)):
        return None
    found = _bindings_of(tree, name, top_level=True)
    literal = _int_literal(found[0][1]) if len(found) == 1 else None
    return Binding(literal, name) if literal is not None else None


def grid_expression(tree: ast.Module, site: Site) -> tuple[ast.expr | None, bool]:
    """(the expression a launch's grid is computed by, whether the grid is a function of the
    launch's settings). A grid named by a variable is followed to its one assignment in the
    launching function when none of the names it reads is assigned again in that function; a
    lambda or a function is a callable grid (Triton calls it with the launch's settings). (None,
    False) where the grid cannot be read."""
    grid = site.grid
    if isinstance(grid, ast.Lambda):
        return None, True
    if not isinstance(grid, ast.Name) or site.form == "tuned":
        return grid, False
    if any(isinstance(n, ast.FunctionDef) and n.name == grid.id for n in tree.body):
        return None, True
    if site.host is None:
        return None, False
    assigned = _bindings_of(site.host, grid.id, top_level=False)
    if len(assigned) != 1 or not isinstance(assigned[0][1], ast.expr):
        return None, False
    value = assigned[0][1]
    if isinstance(value, ast.Lambda):
        return None, True
    counts: dict[str, int] = {}
    for name, _ in _assignments(site.host):
        counts[name] = counts.get(name, 0) + 1
    if any(counts.get(name, 0) > 1 for name in _names(value)):
        return None, False
    return value, False


def depends_on(scope: ast.AST | None, node: ast.AST, name: str) -> bool:
    """Whether ``node`` reads a name other than ``name`` that ``scope`` computes from ``name``."""
    if scope is None:
        return False
    origin = derived(scope, {name: {name}})
    return any(name in origin.get(n, set()) for n in _names(node) - {name})


def literal_reaches(scope: ast.AST | None, node: ast.AST, value: int) -> bool:
    """Whether ``node`` reads a name that ``scope`` computes (through any chain of assignments)
    from an expression holding the integer literal ``value``."""
    if scope is None:
        return False
    roots = {
        name: {"literal"}
        for name, source in _assignments(scope)
        if source is not None and any(isinstance(c, ast.Constant) and c.value == value for c in ast.walk(source))
    }
    origin = derived(scope, roots)
    return any(origin.get(n) for n in _names(node))


# -- text edits ----------------------------------------------------------------------------------


class Edit(NamedTuple):
    """Replace the text from (line, column) to (end line, end column) with ``text``; lines count
    from 1 and columns are UTF-8 byte offsets, as the syntax tree's positions are."""

    line: int
    col: int
    end_line: int
    end_col: int
    text: str


def replace(node: Positioned, text: str) -> Edit:
    return Edit(node.lineno, node.col_offset, node.end_lineno or node.lineno, node.end_col_offset or 0, text)


def apply_edits(source: str, edits: Iterable[Edit]) -> str:
    """``source`` with every edit made (they may not overlap)."""
    lines = source.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))

    def offset(line: int, col: int) -> int:
        return starts[line - 1] + len(lines[line - 1].encode()[:col].decode(errors="replace"))

    out = source
    last = len(source) + 1
    for edit in sorted(edits, key=lambda e: (e.line, e.col, e.end_line, e.end_col), reverse=True):
        start, end = offset(edit.line, edit.col), offset(edit.end_line, edit.end_col)
        assert end <= last, "overlapping edits"
        out = out[:start] + edit.text + out[end:]
        last = start
    return out


def segment(source: str, node: ast.AST) -> str:
    """The author's own text of ``node``."""
    text = ast.get_source_segment(source, node)
    return text if text is not None else ast.unparse(node)


def substituted(source: str, node: ast.expr, replacements: dict[int, str]) -> str:
    """The text of ``node`` with the nodes whose ids are keys of ``replacements`` replaced."""
    inner = [n for n in ast.walk(node) if id(n) in replacements and isinstance(n, ast.expr)]
    text = segment(source, node)
    if not inner:
        return text
    # Re-base the edits onto the node's own text, its first line padded to the node's column (the
    # segment's later lines are whole lines of the source).
    prefix = " " * node.col_offset
    shifted = [
        Edit(
            n.lineno - node.lineno + 1,
            n.col_offset,
            (n.end_lineno or n.lineno) - node.lineno + 1,
            n.end_col_offset or 0,
            replacements[id(n)],
        )
        for n in inner
    ]
    return apply_edits(prefix + text, shifted)[len(prefix) :]


def insert_helper(source: str, tree: ast.Module, helper: str, technique: str) -> str:
    """``source`` with ``helper`` (module-level code) after its last top-level import."""
    imports = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    if not imports:
        raise NotApplicable(f"{technique}: no import to place the helper after")
    at = max(n.end_lineno or n.lineno for n in imports)
    lines = source.splitlines(keepends=True)
    return "".join(lines[:at]) + helper + "".join(lines[at:])


# -- a kernel and its one launch replaced by new kernels and launches -------------------------------


def dead_constants(tree: ast.Module, site: Site) -> list[ast.Assign]:
    """The module's ``NAME = <int>`` lines that the launch reads and nothing else does."""
    passed = {v.id for v in site.keywords.values() if isinstance(v, ast.Name)}
    launch = {id(n) for n in ast.walk(site.call)}
    read = {
        n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and id(n) not in launch
    }
    out = []
    for statement in tree.body:
        if not (isinstance(statement, ast.Assign) and len(statement.targets) == 1):
            continue
        target = statement.targets[0]
        one_line = statement.lineno == statement.end_lineno
        if isinstance(target, ast.Name) and target.id in passed and target.id not in read and one_line:
            if isinstance(statement.value, ast.Constant) and type(statement.value.value) is int:
                out.append(statement)
    return out


class Rebuilt(NamedTuple):
    """What replaces one kernel and its one launch: the new kernels' text, the launch's statements
    (one a line, indented as the launch was), the module constants they read (lines of
    ``NAME = value  # why``) and every name they introduce (none of which may be taken)."""

    kernels: str
    launch: list[str]
    settings: str
    names: set[str]


def rebuild(source: str, tree: ast.Module, kernel: ast.FunctionDef, site: Site, new: Rebuilt, technique: str) -> str:
    """``source`` with ``kernel`` and its launch ``site`` replaced by ``new``. The launch's own block
    constants (Inductor's ``XBLOCK_0``, ``R0_BLOCK_0``) go with it where nothing else reads them
    (a block_size form on a dead constant would waste an evaluation); the new constants take the
    first one's place, under Inductor's note on the launch settings."""
    taken = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    taken |= {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    if new.names & taken:
        raise NotApplicable(f"{technique}: the names {', '.join(sorted(new.names & taken))} are taken")
    name = kernel.name
    statement = next((s for s in ast.walk(tree) if isinstance(s, ast.Expr) and s.value is site.call), None)
    lines = source.splitlines(keepends=True)
    if statement is None or lines[statement.lineno - 1][: statement.col_offset].strip():
        raise NotApplicable(f"{technique}: {name}'s launch is not a statement on lines of its own")
    end = statement.end_lineno or statement.lineno
    if lines[end - 1].encode()[statement.end_col_offset or 0 :].strip():
        raise NotApplicable(f"{technique}: {name}'s launch shares a line with other code")
    indent = lines[statement.lineno - 1][: statement.col_offset]
    first = min([kernel.lineno, *(d.lineno for d in kernel.decorator_list)])
    last = kernel.end_lineno or kernel.lineno
    edits = [
        Edit(first, 0, last, len(lines[last - 1].rstrip("\n").encode()), new.kernels.strip("\n")),
        Edit(
            statement.lineno, statement.col_offset, end, statement.end_col_offset or 0, ("\n" + indent).join(new.launch)
        ),
    ]
    constants = dead_constants(tree, site)
    for index, constant in enumerate(constants):
        edits.append(Edit(constant.lineno, 0, constant.lineno + 1, 0, new.settings if index == 0 else ""))
    out = apply_edits(source, edits)
    if not constants:
        out = insert_helper(out, tree_of(out, technique), "\n\n" + new.settings, technique)
    imported = {a.name for n in tree.body if isinstance(n, ast.Import) for a in n.names if a.asname is None}
    if "torch" not in imported:
        out = insert_helper(out, tree_of(out, technique), "\nimport torch\n", technique)
    tree_of(out, technique)
    return out
