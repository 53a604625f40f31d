"""Fuse two launches of 1-D elementwise kernels over the same elements into one launch.

A chain of elementwise kernels (TorchInductor's unfused ``triton_poi_...`` steps, or a user's own
``scale`` then ``relu``) pays one launch per step, and each program of the second step reads back
what the same program of the first just wrote. Fused, one launch runs both bodies in each program:
the first kernel's body, ``tl.debug_barrier()`` (the program's stores are visible to all of its
threads after it), then the second's, its names renamed apart. The intermediate buffer is still
written and read back, now from L1/L2 by the program that wrote it; dropping it is another step.

Exact only where the second kernel reads nothing another program of the first writes, so the
rewrite asks for all of this, read from the syntax, and is otherwise ``NotApplicable``:

- two plain ``@triton.jit`` kernels, each 1-D elementwise (``vector.block_parameter``) without a
  ``return``, launched one after the other as statements of one function body, with equal block
  sizes and the same grid (the same text once each block constant is read as its value);
- between the launches, only assignments to new names that neither launch's arguments use, with
  no in-place call (``x.add_(...)``, ``out=``) and no read of what the first launch writes: the
  fused launch takes the second's place, so the first's work moves after them;
- every load of the second kernel from a buffer the first writes uses the same offset as the
  first's stores to it, computed by the same statements from the program id, ``tl.arange`` and
  the block size alone (each program reads what it wrote); the second writes nothing the first
  launch is passed.

Host names bound to one another (``buf1 = buf0``) count as one buffer. The kernels stay in the
module (other launches may use them); the fused one is defined after them.
"""

from __future__ import annotations

import ast
import copy
from typing import NamedTuple

from kernel_scientist.blackboard.records import Param
from kernel_scientist.knowledge._base import Form
from kernel_scientist.knowledge._regions import NotApplicable
from kernel_scientist.knowledge.techniques.any_kernel._syntax import (
    Edit,
    Kernel,
    Site,
    SyntaxTechnique,
    apply_edits,
    binding,
    body_start,
    dotted,
    kernels,
    refuse_gemm_regions,
    replace,
    segment,
    sites,
    stored_params,
    tree_of,
)
from kernel_scientist.knowledge.techniques.any_kernel.vector import block_parameter

SUFFIX = "_k1"  # added to the second kernel's names inside the fused kernel
_LAUNCH_OPTIONS = ("num_warps", "num_stages")
_OFFSET_CALLS = {"tl.program_id", "tl.arange"}


class _Pair(NamedTuple):
    first: Site
    second: Site
    statement: ast.stmt  # the first launch's statement, removed
    kernels: tuple[Kernel, Kernel]
    blocks: tuple[str, str]  # each kernel's block parameter

    @property
    def label(self) -> str:
        return f"{self.first.kernel}+{self.second.kernel}"


def _passed(site: Site, kernel: Kernel) -> dict[str, ast.expr]:
    """Each parameter of ``kernel`` -> the expression the launch passes for it (positional and by
    keyword; launch options left out)."""
    out = dict(zip(kernel.params, site.args))
    out.update({k: v for k, v in site.keywords.items() if k not in _LAUNCH_OPTIONS})
    return out


def _aliases(host: ast.FunctionDef) -> dict[str, str]:
    """Host name -> the name it stands for, through assignments of one name to another."""
    parent: dict[str, str] = {}
    for node in ast.walk(host):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Name):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    parent[target.id] = node.value.id

    def root(name: str) -> str:
        seen = set()
        while name in parent and name not in seen:
            seen.add(name)
            name = parent[name]
        return name

    return {name: root(name) for name in parent}


def _buffers(passed: dict[str, ast.expr], params: set[str], aliases: dict[str, str]) -> dict[str, str]:
    """Parameter -> the host buffer (a name, aliases resolved) passed for it, for ``params``."""
    out = {}
    for param in params:
        value = passed.get(param)
        if isinstance(value, ast.Name):
            out[param] = aliases.get(value.id, value.id)
        elif value is not None:
            out[param] = ast.unparse(value)
    return out


def _definitions(kernel: ast.FunctionDef) -> dict[str, list[ast.AST]]:
    """Each name bound in ``kernel`` -> every node that binds it (assignments at any depth, the
    parameters), so a name bound once is bound by its one entry."""
    out: dict[str, list[ast.AST]] = {a.arg: [a] for a in kernel.args.args}
    for node in ast.walk(kernel):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            out.setdefault(node.id, []).append(_statement_of(kernel, node))
    return out


def _statement_of(kernel: ast.FunctionDef, name: ast.Name) -> ast.AST:
    """The statement of ``kernel``'s own body that binds ``name`` where it is a plain assignment
    there; else the name itself (a binding the offset chain does not follow)."""
    for statement in kernel.body:
        if isinstance(statement, ast.Assign) and any(name is n for t in statement.targets for n in ast.walk(t)):
            return statement
    return name


class _Renamed(ast.NodeTransformer):
    """Names read as other names, or as integer constants."""

    def __init__(self, names: dict[str, str | int]) -> None:
        self.names = names

    def visit_Name(self, node: ast.Name) -> ast.expr:
        new = self.names.get(node.id)
        if new is None:
            return node
        return ast.Constant(new) if isinstance(new, int) else ast.Name(new, node.ctx)


def _text(node: ast.AST, names: dict[str, str | int]) -> str:
    """``node``'s text with ``names`` read as their replacements."""
    return ast.unparse(_Renamed(names).visit(copy.deepcopy(node)))


def _offset_chain(kernel: ast.FunctionDef, block: str, offset: ast.expr) -> list[str] | None:
    """The statements ``offset`` is computed by (their text, the block parameter read as one name
    for every kernel), where it is computed from the program id, ``tl.arange`` and the block size
    alone (each name assigned once); else None."""
    defs = _definitions(kernel)
    chain: list[str] = []
    pending = [offset]
    seen: set[str] = set()
    while pending:
        node = pending.pop()
        for sub in ast.walk(node):
            if isinstance(sub, ast.Call) and dotted(sub.func) not in _OFFSET_CALLS:
                return None
            if not isinstance(sub, ast.Name) or sub.id in seen or sub.id in ("tl", block):
                continue
            seen.add(sub.id)
            if len(defs.get(sub.id, [])) != 1:
                return None  # a name bound more than once
            statement = defs[sub.id][0]
            if not isinstance(statement, ast.Assign):
                return None
            chain.append(_text(statement, {block: "__block__"}))
            pending.append(statement.value)
    return sorted(chain)


def _split(pointer: ast.expr | None, param: str) -> ast.expr | None:
    """The offset of ``param + offset``; None for any other pointer."""
    if isinstance(pointer, ast.BinOp) and isinstance(pointer.op, ast.Add):
        if isinstance(pointer.left, ast.Name) and pointer.left.id == param:
            return pointer.right
    return None


def _accesses(kernel: ast.FunctionDef, param: str, attr: str) -> list[ast.expr]:
    """The pointer of every ``tl.<attr>`` call (load or store) whose pointer reads ``param``."""
    out = []
    for call in (c for c in ast.walk(kernel) if isinstance(c, ast.Call) and dotted(c.func) == f"tl.{attr}"):
        pointer = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "pointer"), None)
        if pointer is not None and param in {n.id for n in ast.walk(pointer) if isinstance(n, ast.Name)}:
            out.append(pointer)
    return out


def _same_offsets(first: Kernel, second: Kernel, blocks: tuple[str, str], written: str, read: str) -> bool:
    """Whether every load of ``read`` in the second kernel and every store to ``written`` in the
    first is ``pointer + offset`` with one offset, computed by the same statements from the
    program id alone."""
    stores = [_split(p, written) for p in _accesses(first.node, written, "store")]
    loads = [_split(p, read) for p in _accesses(second.node, read, "load")]
    if not stores or not loads or any(o is None for o in [*stores, *loads]):
        return False
    texts = {_text(o, {blocks[0]: "__block__"}) for o in stores if o is not None}
    texts |= {_text(o, {blocks[1]: "__block__"}) for o in loads if o is not None}
    if len(texts) != 1:
        return False
    store, load = stores[0], loads[0]
    assert store is not None and load is not None
    chain = _offset_chain(first.node, blocks[0], store)
    return chain is not None and chain == _offset_chain(second.node, blocks[1], load)


def _between_is_harmless(statements: list[ast.stmt], first_names: set[str], written: set[str]) -> bool:
    for statement in statements:
        if not isinstance(statement, ast.Assign) or not all(isinstance(t, ast.Name) for t in statement.targets):
            return False
        targets = {t.id for t in statement.targets if isinstance(t, ast.Name)}
        if targets & first_names:
            return False
        read = {n.id for n in ast.walk(statement.value) if isinstance(n, ast.Name)}
        if read & written:
            return False
        for call in (c for c in ast.walk(statement.value) if isinstance(c, ast.Call)):
            method = call.func.attr if isinstance(call.func, ast.Attribute) else ""
            if method.endswith("_") or any(k.arg == "out" for k in call.keywords):
                return False
    return True


def _grid_text(tree: ast.Module, site: Site) -> str | None:
    """The grid's text with each block constant read as its value (None: not a literal tuple)."""
    if not isinstance(site.grid, ast.Tuple) or len(site.grid.elts) != 1:
        return None
    values: dict[str, str | int] = {}
    for value in site.keywords.values():
        bound = binding(tree, site.host, value)
        if bound is not None and bound.name is not None:
            values[bound.name] = bound.value
    return _text(site.grid.elts[0], values)


def _pairs(source: str, technique: str) -> tuple[ast.Module, list[_Pair], str]:
    refuse_gemm_regions(source, technique)
    tree = tree_of(source, technique)
    found = kernels(tree)
    every = sites(tree, technique)
    pairs: list[_Pair] = []
    why = "no two launches of 1-D elementwise kernels one after the other in one function"
    for host in {id(s.host): s.host for s in every if s.host is not None}.values():
        assert host is not None
        statements = host.body
        launched = [
            (i, s) for i, stmt in enumerate(statements) for s in every if s.call is getattr(stmt, "value", None)
        ]
        aliases = _aliases(host)
        for (i, first), (j, second) in zip(launched, launched[1:]):
            refusal = _refusal(tree, found, first, second, statements[i + 1 : j], aliases)
            if refusal is not None:
                why = refusal
                continue
            kernel_pair = (found[first.kernel], found[second.kernel])
            blocks = (block_parameter(kernel_pair[0].node), block_parameter(kernel_pair[1].node))
            assert blocks[0] is not None and blocks[1] is not None
            pairs.append(_Pair(first, second, statements[i], kernel_pair, (blocks[0], blocks[1])))
    return tree, pairs, why


def _refusal(
    tree: ast.Module,
    found: dict[str, Kernel],
    first: Site,
    second: Site,
    between: list[ast.stmt],
    aliases: dict[str, str],
) -> str | None:
    """Why the launches ``first`` and then ``second`` cannot become one, or None."""
    a, b = found[first.kernel], found[second.kernel]
    label = f"{first.kernel} then {second.kernel}"
    if first.form != "jit" or second.form != "jit" or not a.plain or not b.plain:
        return f"{label}: not both plain kernel[grid](...) launches of @triton.jit kernels"
    blocks = (block_parameter(a.node), block_parameter(b.node))
    if blocks[0] is None or blocks[1] is None:
        return f"{label}: not both 1-D elementwise kernels"
    if any(isinstance(n, ast.Return) for k in (a, b) for n in ast.walk(k.node)):
        return f"{label}: a kernel returns early"
    values = [s.keywords.get(k) for s, k in ((first, blocks[0]), (second, blocks[1]))]
    bound = [binding(tree, s.host, v) if v is not None else None for s, v in zip((first, second), values)]
    if bound[0] is None or bound[1] is None or bound[0].value != bound[1].value:
        return f"{label}: block sizes not equal constants"
    grids = (_grid_text(tree, first), _grid_text(tree, second))
    if grids[0] is None or grids[0] != grids[1]:
        return f"{label}: not the same 1-D grid"
    passed = (_passed(first, a), _passed(second, b))
    if set(passed[0]) != set(a.params) or set(passed[1]) != set(b.params):
        return f"{label}: a parameter is not passed explicitly"
    first_written = _buffers(passed[0], stored_params(a.node), aliases)
    first_all = _buffers(passed[0], set(a.params), aliases)
    second_written = _buffers(passed[1], stored_params(b.node), aliases)
    if set(second_written.values()) & set(first_all.values()):
        return f"{label}: the second kernel writes a buffer the first is passed"
    first_names = {n.id for v in passed[0].values() for n in ast.walk(v) if isinstance(n, ast.Name)}
    if not _between_is_harmless(between, first_names, set(first_written.values())):
        return f"{label}: the statements between the launches are not only new names"
    for read, buffer in _buffers(passed[1], set(b.params), aliases).items():
        for written, target in first_written.items():
            if buffer == target and not _same_offsets(a, b, (blocks[0], blocks[1]), written, read):
                return f"{label}: the second kernel reads {buffer} at offsets other than where the first wrote it"
    return None


def _renamed_body(source: str, kernel: Kernel, block: str, into_block: str, indent: str) -> list[str]:
    """The lines of ``kernel``'s body with its parameters and locals renamed apart (``SUFFIX``) and
    its block parameter read as ``into_block``, indented by ``indent``."""
    node = kernel.node
    local = set(kernel.params) | {
        n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
    }
    edits = [
        replace(n, into_block if n.id == block else n.id + SUFFIX)
        for n in ast.walk(node)
        if isinstance(n, ast.Name) and n.id in local
    ]
    statements = node.body[body_start(node) :]
    first, end = statements[0].lineno, max(s.end_lineno or s.lineno for s in statements)
    lines = apply_edits(source, edits).splitlines(keepends=True)[first - 1 : end]
    own = lines[0][: len(lines[0]) - len(lines[0].lstrip())]
    return [indent + line[len(own) :] if line.startswith(own) else line for line in lines]


class FuseLaunches(SyntaxTechnique):
    name = "fuse_launches"
    title = "Fuse two elementwise launches over the same elements into one"
    category = "schedule"
    prose = (
        "A chain of elementwise kernels (TorchInductor's unfused pointwise steps, or a user's "
        "scale then activation) pays a launch per step, a few microseconds of host and GPU "
        "overhead each, and every program of the second step reads back what the same program "
        "of the first just wrote. Running both bodies in one program, with a barrier between "
        "them, saves a launch and reads the intermediate from L1/L2 instead of HBM. It pays on "
        "small and medium inputs, where launches dominate; on large memory-bound inputs the "
        "intermediate's round trip still costs bandwidth (removing that buffer is a further "
        "step), so the gain is small. Exact only where each program reads what it wrote."
    )
    prior_min, prior_max = -0.02, 0.3
    novelty = 0.4

    def detect(self, source: str) -> dict[str, Param] | None:
        _, pairs, why = _pairs(source, self.name)
        if not pairs:
            raise NotApplicable(f"{self.name}: {why}")
        return None  # a fused pair leaves two launches fewer to pair, no setting

    def forms(self, source: str) -> list[Form]:
        _, pairs, why = _pairs(source, self.name)
        if not pairs:
            raise NotApplicable(f"{self.name}: {why}")
        return [
            Form(
                {"pair": p.label},
                f"fuse {p.first.kernel} and {p.second.kernel}",
                [
                    f"one launch runs {p.first.kernel}'s body, a barrier, then {p.second.kernel}'s body",
                    "each program reads back only what it wrote itself",
                ],
            )
            for p in pairs
        ]

    def apply(self, source: str, params: dict[str, Param], reference: str | None = None) -> str:
        tree, pairs, why = _pairs(source, self.name)
        pair = next((p for p in pairs if p.label == params.get("pair")), None)
        if pair is None:
            known = ", ".join(p.label for p in pairs) or why
            raise NotApplicable(f"{self.name}: no launches {params.get('pair')!r} to fuse ({known})")
        a, b = pair.kernels
        fused = f"{a.node.name}_{b.node.name}"
        taken = {n.id for k in (a, b) for n in ast.walk(k.node) if isinstance(n, ast.Name)} | set(a.params + b.params)
        module = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
        module |= {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
        if fused in module or any(SUFFIX in name for name in taken):
            raise NotApplicable(f"{self.name}: the names {fused} or *{SUFFIX} are taken")
        statements = a.node.body[body_start(a.node) :]
        lines = source.splitlines(keepends=True)
        body_a = lines[statements[0].lineno - 1 : max(s.end_lineno or s.lineno for s in statements)]
        indent = body_a[0][: len(body_a[0]) - len(body_a[0].lstrip())]
        body_b = _renamed_body(source, b, pair.blocks[1], pair.blocks[0], indent)
        params_b = [
            arg.arg + SUFFIX + (f": {segment(source, arg.annotation)}" if arg.annotation is not None else "")
            for arg in b.node.args.args
            if arg.arg != pair.blocks[1]
        ]
        signature = ", ".join([segment(source, arg) for arg in a.node.args.args] + params_b)
        decorator = segment(source, a.node.decorator_list[0])
        kernel = (
            f"\n\n@{decorator}\ndef {fused}({signature}):\n"
            + "".join(body_a)
            + f"{indent}tl.debug_barrier()  # the first body's stores are visible to every thread\n"
            + "".join(body_b)
        )
        first, second = pair.first, pair.second
        passed_b = _passed(second, b)
        arguments = [segment(source, v) for v in first.args]
        arguments += [f"{k}={segment(source, v)}" for k, v in first.keywords.items()]
        arguments += [f"{p}{SUFFIX}={segment(source, passed_b[p])}" for p in b.params if p != pair.blocks[1]]
        launch = f"{fused}[{segment(source, first.grid)}]({', '.join(arguments)})"
        after = max(a.node.end_lineno or 0, b.node.end_lineno or 0)
        statement = pair.statement
        end = statement.end_lineno or statement.lineno
        alone = not lines[statement.lineno - 1][: statement.col_offset].strip()
        if not alone or lines[end - 1].encode()[statement.end_col_offset or 0 :].strip():
            raise NotApplicable(f"{self.name}: {first.kernel}'s launch shares a line with other code")
        at = len(lines[after - 1].rstrip("\n").encode())
        edits = [
            Edit(after, at, after, at, kernel.rstrip("\n")),
            Edit(statement.lineno, 0, end + 1, 0, ""),
            replace(second.call, launch),
        ]
        out = apply_edits(source, edits)
        tree_of(out, self.name)
        return out
