"""A one-program reduction of a whole vector split over every SM: partials, then one combine
(knowledge/docs/reductions.md).

TorchInductor lowers a full reduction with dynamic sizes (GPU MODE's pmpp_v2/vectorsum_py:
``data.to(torch.float64).sum().to(torch.float32)``) to one kernel with ``xnumel = 1`` on a grid
of one program: a loop over the vector ``R0_BLOCK`` elements at a time into a block-wide
accumulator (``_tmp3 = tl.where(r0_mask, _tmp3 + tmp2, _tmp3)``), then ``tl.sum(_tmp3, 1)``, a
cast and a store of the scalar. One SM streams the whole input: a simulated H200 takes 6.8 ms on
52M float32 elements whose speed of light is 44 us. No setting of that kernel helps. The rewrite
makes it the classic two-pass reduction:

1. ``ceil(n / SPLIT_BLOCK)`` blocks are dealt out as contiguous chunks of whole blocks to at most
   ``SPLIT_PARTIALS_BLOCK`` programs (1024 by default: about one full wave of 8-warp programs on a
   132-SM GPU, every SM streaming; fewer where the vector has fewer blocks). Each program works
   out its chunk from the grid's size in whole steps of its own launch (so a tuner's other step or
   grid still takes every step once), runs the kernel's own loop over it and reduces its
   accumulator to one partial, in the accumulator's dtype;
2. one program combines the partials, in program order, into the accumulator with the kernel's
   own combine, and runs the kernel's own code after its loop: the final reduction, the epilogue
   (a cast, a mean's division, a norm's square root) and the store.

No atomics: the partition depends only on n and the two literals, so a result is the same from
run to run and on every GPU. The input is read once. Both sizes are module literals that
``block_size`` tunes (the number of programs is a block size too: the partials the second phase
reduces in one block).

Exact by construction: both phases keep the kernel's statements, its program id read as 0 (the
one program it had), and every chunk starts at a multiple of the loop's step, so each loop step
sees the offsets and values it saw before; only which program adds which steps changes. That holds
where the loop carries nothing but the accumulator, the accumulator starts at the combine's
identity (0 for a sum; a maximum or minimum forgives any start) and the combine is a sum, or
Inductor's maximum or minimum, the same one the final reduction uses. A float sum then adds in
another order (per chunk, then the partials), which rounds differently, in the kernel's own
accumulation dtype. Anything else is NotApplicable, with the reason: a product (its rounding and
overflow depend on the grouping), two accumulators (argmax's index, Welford's mean and M2), a
reduction per row (``xnumel`` not 1: the rows already spread over programs), stores in the loop.
"""

from __future__ import annotations

import ast
import copy
import textwrap
from typing import NamedTuple

from kernel_scientist.blackboard.records import Param
from kernel_scientist.knowledge._base import Form
from kernel_scientist.knowledge._regions import NotApplicable
from kernel_scientist.knowledge.techniques.any_kernel._syntax import (
    Rebuilt,
    Site,
    SyntaxTechnique,
    dotted,
    kernels,
    rebuild,
    refuse_gemm_regions,
    sites,
    tree_of,
)

BLOCK = "SPLIT_BLOCK"  # elements per loop step of a phase-1 program
PARTIALS_BLOCK = "SPLIT_PARTIALS_BLOCK"  # phase-1 programs at the most: phase 2 reduces them in one block
# Defaults: 2048 elements a step keep 8 float32 loads in flight per thread of 8 warps (a float64
# accumulator of 16 registers); 1024 programs of 8 warps are one wave on a 132-SM Hopper (8 a SM).
_BLOCK_DEFAULT, _PARTIALS_DEFAULT, _WARPS = 2048, 1024, 8
_PHASES = ("split_partials", "split_combine")
# Names the new kernels and launch code introduce (none may be taken in the module).
_LOCALS = ("_ks_start", "_ks_chunk", "_ks_parts", "_ks_partials", "_ks_offset", "_ks_index", "_ks_mask", "_ks_partial")
_HOST = ("_ks_split_numel", "_ks_split_steps", "_ks_split_programs", "_ks_split_partials")
_LAUNCH_OPTIONS = {"num_warps", "num_stages"}
_TORCH_DTYPES = {
    f"tl.{name}": f"torch.{name}"
    for name in ("float16", "bfloat16", "float32", "float64", "int8", "int16", "int32", "int64")
}


class _Reduction(NamedTuple):
    """A looping one-program full reduction found in the source, and what the rewrite keeps of it."""

    kernel: ast.FunctionDef
    site: Site
    prologue: list[ast.stmt]  # the statements before the loop (the accumulator's start among them)
    loop: ast.For
    after: list[ast.stmt]  # the statements after it: the final reduction, the epilogue, the store
    reduced: ast.Assign  # R = REDUCE(ACC, 1)[:, None]
    accumulator: str
    update: ast.expr  # the combine of the accumulator with one step's value, as the loop writes it
    value: str  # the step's value in ``update``
    dtype: str  # the accumulator's Triton dtype
    x_block: str  # the kernel's x block (one row) and r block (the loop's step) parameters
    r_block: str
    numel: str  # the loop's bound parameter
    arguments: dict[str, str]  # each parameter but the blocks -> the launch's argument
    output: str  # the launch's argument for the stored pointer: a tensor, for the partials' device


def _constexprs(kernel: ast.FunctionDef) -> list[str]:
    return [a.arg for a in kernel.args.args if a.annotation is not None and "constexpr" in ast.unparse(a.annotation)]


def _reads(nodes: list[ast.stmt] | ast.AST) -> set[str]:
    found = nodes if isinstance(nodes, list) else [nodes]
    return {n.id for s in found for n in ast.walk(s) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def _assigned(statement: ast.stmt) -> set[str]:
    targets: list[ast.expr] = []
    if isinstance(statement, ast.Assign):
        targets = statement.targets
    elif isinstance(statement, (ast.AugAssign, ast.AnnAssign)):
        targets = [statement.target]
    return {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}


def _carried(loop: ast.For) -> list[str]:
    """The names a loop step reads from the step before: read in the body before the body assigns them."""
    written = set().union(*(_assigned(s) for s in loop.body))
    carried: list[str] = []
    done: set[str] = set()
    for statement in loop.body:
        carried += sorted((_reads(statement) & written) - done - set(carried))
        done |= _assigned(statement)
    return carried


def _plain_assignment(statement: ast.stmt) -> tuple[str, ast.expr] | None:
    """(name, value) of ``name = value``; None for any other statement."""
    if isinstance(statement, ast.Assign) and len(statement.targets) == 1 and isinstance(statement.targets[0], ast.Name):
        return statement.targets[0].id, statement.value
    return None


def _compares(function: ast.FunctionDef) -> str | None:
    """ "max" or "min" where ``function(a, b)`` is Inductor's maximum or minimum (``mask = a > b``,
    then perhaps ``mask |= a != a`` for NaNs, ``return tl.where(mask, a, b)``); None otherwise."""
    params = [a.arg for a in function.args.args]
    returns = [n for n in ast.walk(function) if isinstance(n, ast.Return)]
    where = returns[0].value if len(returns) == 1 else None
    if len(params) != 2 or not isinstance(where, ast.Call) or dotted(where.func) != "tl.where":
        return None
    mask = where.args[0] if len(where.args) == 3 else None
    if not isinstance(mask, ast.Name) or [ast.unparse(a) for a in where.args[1:]] != params or where.keywords:
        return None
    first = next((s for s in function.body if mask.id in _assigned(s)), None)
    others = [s for s in ast.walk(function) if isinstance(s, ast.stmt) and _assigned(s) and s is not first]
    if not isinstance(first, ast.Assign) or any(
        _assigned(s) != {mask.id} or not (isinstance(s, ast.AugAssign) and isinstance(s.op, ast.BitOr)) for s in others
    ):
        return None  # after the comparison, only lanes or-ed in (NaNs) may change the mask
    a, b = params
    kinds = {f"{a} > {b}": "max", f"{b} < {a}": "max", f"{a} < {b}": "min", f"{b} > {a}": "min"}
    return kinds.get(ast.unparse(first.value))


def _loop(name: str, kernel: ast.FunctionDef) -> tuple[ast.For, str, str]:
    """(the kernel's one loop, its bound parameter, its step's constexpr)."""
    loops = [n for n in ast.walk(kernel) if isinstance(n, (ast.For, ast.While))]
    if len(loops) != 1 or not isinstance(loops[0], ast.For) or loops[0] not in kernel.body:
        raise NotApplicable(f"{name} is not one loop over the reduced elements")
    loop = loops[0]
    params, constexprs = [a.arg for a in kernel.args.args], _constexprs(kernel)
    bounds = loop.iter.args if isinstance(loop.iter, ast.Call) else []
    if (
        not isinstance(loop.iter, ast.Call)
        or dotted(loop.iter.func) not in ("tl.range", "range")
        or len(bounds) != 3
        or not isinstance(loop.target, ast.Name)
        or ast.unparse(bounds[0]) != "0"
        or not (isinstance(bounds[1], ast.Name) and bounds[1].id in params and bounds[1].id not in constexprs)
        or not (isinstance(bounds[2], ast.Name) and bounds[2].id in constexprs)
    ):
        raise NotApplicable(f"{name}'s loop is not `for OFF in tl.range(0, N, BLOCK)` over parameters")
    return loop, bounds[1].id, bounds[2].id


def _statements(name: str, kernel: ast.FunctionDef, loop: ast.For) -> tuple[ast.Expr, dict[str, ast.expr]]:
    """(the kernel's one store, after its loop; each name the loop assigns -> its value): Inductor
    writes plain assignments around one store, and nothing that writes from inside the loop."""
    calls = [dotted(c.func) for c in ast.walk(kernel) if isinstance(c, ast.Call)]
    if any(c.startswith("tl.atomic") for c in calls) or "tl.num_programs" in calls:
        raise NotApplicable(f"{name} makes atomic updates or reads tl.num_programs")
    at = kernel.body.index(loop)
    stores = [
        s
        for s in kernel.body[at + 1 :]
        if isinstance(s, ast.Expr) and isinstance(s.value, ast.Call) and dotted(s.value.func) == "tl.store"
    ]
    if calls.count("tl.store") != 1 or len(stores) != 1:
        raise NotApplicable(f"{name} does not make one store, after its loop")
    around = [s for s in kernel.body if s is not loop and s is not stores[0]]
    steps = [_plain_assignment(s) for s in loop.body]
    values = dict(step for step in steps if step is not None)
    docstring = [s for s in around if isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant)]
    if None in steps or not all(isinstance(s, (ast.Assign, ast.AnnAssign)) or s in docstring for s in around):
        raise NotApplicable(f"{name}'s statements are not plain assignments around one store")
    if len(values) != len(steps):
        raise NotApplicable(f"{name}'s loop assigns a name twice")
    return stores[0], values


def _accumulator(name: str, loop: ast.For) -> str:
    carried = _carried(loop)
    if len(carried) != 1:
        raise NotApplicable(
            f"{name} carries {len(carried)} values from step to step ({', '.join(carried)}): one accumulator only"
        )
    return carried[0]


def _update(name: str, loop: ast.For, accumulator: str, values: dict[str, ast.expr]) -> ast.expr:
    """NEW of the loop's ``ACC = tl.where(MASK, NEW, ACC)``, followed to its one assignment; the
    accumulator, and NEW where it is a name, read nowhere else in the loop."""
    where = values.get(accumulator)
    if not (
        isinstance(where, ast.Call)
        and dotted(where.func) == "tl.where"
        and len(where.args) == 3
        and not where.keywords
        and ast.unparse(where.args[2]) == accumulator
        and accumulator not in _reads(where.args[0])
    ):
        raise NotApplicable(f"{name} does not update its accumulator as tl.where(MASK, NEW, {accumulator})")
    new = where.args[1]
    through = new.id if isinstance(new, ast.Name) and new.id in values else None
    update = values[through] if through else new
    combining = {id(where), id(update)}
    if any(accumulator in _reads(value) and id(value) not in combining for value in values.values()):
        raise NotApplicable(f"{name} reads its accumulator in its loop other than to combine a value into it")
    if through and any(through in _reads(value) for value in values.values() if value is not where):
        raise NotApplicable(f"{name} reads its combined value other than to keep it in the accumulator")
    return update


def _combine(name: str, update: ast.expr, accumulator: str, found: dict[str, ast.FunctionDef]) -> tuple[str, str]:
    """(the combine: "sum", "max" or "min"; the name ``update`` combines the accumulator with)."""
    operands: list[ast.expr] = []
    kind: str | None = None
    if isinstance(update, ast.BinOp) and isinstance(update.op, ast.Add):
        operands, kind = [update.left, update.right], "sum"
    elif isinstance(update, ast.Call) and isinstance(update.func, ast.Name) and update.func.id in found:
        operands, kind = ([*update.args] if not update.keywords else []), _compares(found[update.func.id])
    names = [o.id for o in operands if isinstance(o, ast.Name)]
    if kind is None or len(names) != 2 or names.count(accumulator) != 1:
        raise NotApplicable(
            f"{name} combines its accumulator by `{ast.unparse(update)}`, not a sum, maximum or minimum of it and a value"
        )
    return kind, next(n for n in names if n != accumulator)


def _start(name: str, prologue: list[ast.stmt], accumulator: str, kind: str, x: str, r: str) -> str:
    """The accumulator's dtype, from its one start ``ACC = tl.full([X, R], INIT, tl.DTYPE)``; a
    sum's INIT 0 (a maximum or minimum forgives any start: combining it again changes nothing)."""
    starts = [_plain_assignment(s) for s in prologue if accumulator in _assigned(s)]
    start = starts[0][1] if len(starts) == 1 and starts[0] is not None else None
    if not (
        isinstance(start, ast.Call)
        and dotted(start.func) == "tl.full"
        and len(start.args) == 3
        and not start.keywords
        and ast.unparse(start.args[0]) == f"[{x}, {r}]"
    ):
        raise NotApplicable(f"{name} does not start its accumulator once, as tl.full([{x}, {r}], INIT, DTYPE)")
    init, dtype = start.args[1:]
    if dotted(dtype) not in _TORCH_DTYPES:
        raise NotApplicable(f"{name} accumulates in {ast.unparse(dtype)}, not a dtype the rewrite knows")
    if kind == "sum" and not (isinstance(init, ast.Constant) and init.value == 0):
        raise NotApplicable(f"{name} starts its sum at {ast.unparse(init)}, not 0: every partial would add it again")
    return dotted(dtype)


def _final(
    name: str, after: list[ast.stmt], accumulator: str, kind: str, update: ast.expr, found: dict[str, ast.FunctionDef]
) -> ast.Assign:
    """The one statement after the loop that reads the accumulator: Inductor's final reduction with
    the loop's own combine, ``R = tl.sum(ACC, 1)[:, None]`` for a sum, ``R = G(ACC, 1)[:, None]``
    where G returns ``tl.reduce(a, dim, F)`` with the loop's F for a maximum or minimum."""
    finals = [s for s in after if accumulator in _reads(s) | _assigned(s)]
    reduced = finals[0] if len(finals) == 1 and isinstance(finals[0], ast.Assign) else None
    assigned = _plain_assignment(reduced) if reduced is not None else None
    value = assigned[1] if assigned is not None else None
    call = value.value if isinstance(value, ast.Subscript) and ast.unparse(value.slice) == "(:, None)" else None
    if (
        reduced is None
        or not isinstance(call, ast.Call)
        or call.keywords
        or [ast.unparse(a) for a in call.args] != [accumulator, "1"]
        or not (dotted(call.func) == "tl.sum" if kind == "sum" else _reduces_by(call.func, update, found))
    ):
        raise NotApplicable(f"{name} does not reduce its accumulator once after the loop, by its own combine")
    return reduced


def _reduces_by(helper: ast.expr, update: ast.expr, found: dict[str, ast.FunctionDef]) -> bool:
    """Whether ``helper`` names a function of the module that returns ``tl.reduce(a, dim, F)``
    with the function F that ``update`` calls."""
    if not (isinstance(helper, ast.Name) and helper.id in found and isinstance(update, ast.Call)):
        return False
    function = found[helper.id]
    params = [a.arg for a in function.args.args]
    body = [s for s in function.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
    value = body[0].value if len(body) == 1 and isinstance(body[0], ast.Return) else None
    return (
        isinstance(value, ast.Call)
        and dotted(value.func) == "tl.reduce"
        and [ast.unparse(a) for a in value.args] == [*params, ast.unparse(update.func)]
    )


def _one_program(grid: ast.expr) -> bool:
    """A grid of one program: ``(1,)``, ``1`` or Inductor's ``triton.cdiv(1, XBLOCK_0),``."""
    sizes = grid.elts if isinstance(grid, ast.Tuple) else [grid]
    if not sizes or any(ast.unparse(s) != "1" for s in sizes[1:]):
        return False
    first = sizes[0]
    if isinstance(first, ast.Call) and dotted(first.func) == "triton.cdiv" and len(first.args) == 2:
        first = first.args[0]
    return ast.unparse(first) == "1"


def _launched(
    name: str, kernel: ast.FunctionDef, launches: list[Site], blocks: set[str]
) -> tuple[Site, dict[str, str]]:
    """(the kernel's one launch, each parameter but the blocks -> the text of its argument there)."""
    if len(launches) != 1 or launches[0].form != "jit":
        raise NotApplicable(f"{name} is not launched once as kernel[grid](...)")
    site = launches[0]
    if not _one_program(site.grid):
        raise NotApplicable(f"{name} is not launched on a grid of one program")
    params = [a.arg for a in kernel.args.args]
    if set(site.keywords) - set(params) - _LAUNCH_OPTIONS:
        raise NotApplicable(f"{name}'s launch passes options other than num_warps and num_stages")
    passed = dict(zip(params, site.args)) | {k: v for k, v in site.keywords.items() if k in params}
    wanted = [p for p in params if p not in blocks]
    # Each argument may go to both launches: names and literals only, so nothing is evaluated twice.
    if any(not isinstance(passed.get(p), (ast.Name, ast.Constant)) for p in wanted):
        raise NotApplicable(f"{name}'s launch passes its arguments as expressions, not names")
    return site, {p: ast.unparse(passed[p]) for p in wanted}


def _read(tree: ast.Module, name: str, kernel: ast.FunctionDef, launches: list[Site]) -> _Reduction:
    """The full reduction ``kernel`` computes; NotApplicable (its reason without the technique's
    name) where it is not Inductor's looping one-program form exactly."""
    loop, numel, r_block = _loop(name, kernel)
    at = kernel.body.index(loop)
    prologue, after = kernel.body[:at], kernel.body[at + 1 :]
    if not any(ast.unparse(s) == "xnumel = 1" for s in prologue):
        raise NotApplicable(
            f"{name} does not set xnumel = 1: a reduction per row, whose rows already spread over programs"
        )
    others = [c for c in _constexprs(kernel) if c != r_block]
    if len(others) != 1:
        raise NotApplicable(f"{name} has compile-time parameters other than its x block and its loop's step")
    accumulator = _accumulator(name, loop)
    store, values = _statements(name, kernel, loop)
    update = _update(name, loop, accumulator, values)
    found = {k: v.node for k, v in kernels(tree).items()}
    kind, value = _combine(name, update, accumulator, found)
    dtype = _start(name, prologue, accumulator, kind, others[0], r_block)
    reduced = _final(name, after, accumulator, kind, update, found)
    if _reads(after) & ({*values, *_reads(loop.target)} - {accumulator}):
        raise NotApplicable(f"{name} reads its loop's values after the loop")
    site, arguments = _launched(name, kernel, launches, {others[0], r_block})
    pointer = store.value.args[0] if isinstance(store.value, ast.Call) and store.value.args else None
    while isinstance(pointer, ast.BinOp):
        pointer = pointer.left
    if not (isinstance(pointer, ast.Name) and pointer.id in arguments and arguments[pointer.id].isidentifier()):
        raise NotApplicable(f"{name} does not store through a pointer parameter passed by name")
    return _Reduction(
        kernel, site, prologue, loop, after, reduced, accumulator, update, value, dtype,
        others[0], r_block, numel, arguments, arguments[pointer.id],
    )  # fmt: skip


def _find(source: str, technique: str) -> tuple[ast.Module, dict[str, _Reduction], set[str], str]:
    """The looping one-program full reductions of ``source``, the kernels rewritten already, and why none."""
    refuse_gemm_regions(source, technique)
    tree = tree_of(source, technique)
    found = kernels(tree)
    every = sites(tree, technique)
    targets: dict[str, _Reduction] = {}
    why = "no kernel loops over a reduction"
    for name, kernel in found.items():
        if not any(isinstance(n, ast.For) for n in ast.walk(kernel.node)) or name.endswith(_PHASES):
            continue
        if not kernel.plain:
            why = f"{name} is autotuned (its decorator launches it)"
            continue
        try:
            targets[name] = _read(tree, name, kernel.node, [s for s in every if s.kernel == name])
        except NotApplicable as exc:
            why = str(exc)
    done = {n.removesuffix("_" + _PHASES[0]) for n in found if n.endswith("_" + _PHASES[0])}
    done = {n for n in done if f"{n}_{_PHASES[1]}" in found}
    return tree, targets, done, why


# -- the rewrite -----------------------------------------------------------------------------------


class _OneProgram(ast.NodeTransformer):
    """Every ``tl.program_id(...)`` read as 0: what it was in the kernel's grid of one program."""

    def visit_Call(self, node: ast.Call) -> ast.expr:
        if dotted(node.func) == "tl.program_id":
            return ast.Constant(0)
        self.generic_visit(node)
        return node


def _kept(statements: list[ast.stmt]) -> str:
    """The kernel's own statements as a phase's body lines, each program id read as 0."""
    body = [_OneProgram().visit(copy.deepcopy(s)) for s in statements]
    return textwrap.indent("\n".join(ast.unparse(s) for s in body), "    ")


def _chunk_loop(found: _Reduction) -> ast.For:
    """The kernel's loop over one program's chunk: from ``_ks_start``, ``_ks_chunk`` elements, at
    most to the bound. The chunk is a whole number of the launch's steps, so every step is one the
    kernel took, whatever step and grid a tuner picks."""
    loop = copy.deepcopy(found.loop)
    assert isinstance(loop.iter, ast.Call)  # _loop read it so
    stop = ast.parse(f"tl.minimum(_ks_start + _ks_chunk, {found.numel})", mode="eval").body
    loop.iter.args = [ast.Name("_ks_start", ast.Load()), stop, ast.Name(found.r_block, ast.Load())]
    loop.iter.func = ast.parse("tl.range", mode="eval").body  # bounds that are tensors: Triton's range
    return loop


def _signature(found: _Reduction, kept: list[ast.stmt], new: str) -> str:
    """The parameters a phase's kept statements read (in the kernel's order), ``new``, the loop's step."""
    read = _reads(kept)
    return ", ".join([*(p for p in found.arguments if p in read), new, f"{found.r_block}: tl.constexpr"])


def _arguments(found: _Reduction, kept: list[ast.stmt]) -> str:
    read = _reads(kept)
    return "".join(f"{arg}, " for p, arg in found.arguments.items() if p in read)


def _phase_statements(found: _Reduction) -> tuple[list[ast.stmt], list[ast.stmt]]:
    """The kernel's statements each phase keeps: phase 1 its start, its loop over a chunk and the
    final reduction; phase 2 its start and everything after the loop."""
    return [*found.prologue, _chunk_loop(found), found.reduced], [*found.prologue, *found.after]


def _kernels_text(found: _Reduction, name: str) -> str:
    first, second = _phase_statements(found)
    x, r, acc = found.x_block, found.r_block, found.accumulator
    result = ast.unparse(found.reduced.targets[0])
    combine = copy.deepcopy(found.update)
    for node in ast.walk(combine):
        if isinstance(node, ast.Name) and node.id == found.value:
            node.id = "_ks_partial"
    one_row = f"    {x}: tl.constexpr = 1  # one row: the kernel reduced to one value (xnumel = 1)"
    return f'''

@triton.jit
def {name}_{_PHASES[0]}({_signature(found, first, "_ks_partials")}):
    """Split reduction (split_reduction), phase 1: this program's chunk of the loop reduced to one partial."""
{one_row}
{_kept(found.prologue)}
    _ks_chunk = tl.cdiv(tl.cdiv({found.numel}, {r}), tl.num_programs(0)).to(tl.int64) * {r}
    _ks_start = tl.program_id(0) * _ks_chunk
{_kept([_chunk_loop(found), found.reduced])}
    tl.store(_ks_partials + tl.program_id(0) + tl.full([{x}, 1], 0, tl.int32), {result})


@triton.jit
def {name}_{_PHASES[1]}({_signature(found, second, "_ks_partials, _ks_parts")}):
    """Phase 2: one program combines the partials in order, then the kernel's own epilogue and store."""
{one_row}
{_kept(found.prologue)}
    for _ks_offset in tl.range(0, _ks_parts, {r}):
        _ks_index = _ks_offset + tl.arange(0, {r})[None, :]
        _ks_mask = _ks_index < _ks_parts
        _ks_partial = tl.load(_ks_partials + _ks_index, _ks_mask, other=0)
        {acc} = tl.where(_ks_mask, {ast.unparse(combine)}, {acc})
{_kept(found.after)}'''


def _launch_lines(found: _Reduction, name: str) -> list[str]:
    first, second = _phase_statements(found)
    r, options = found.r_block, f"num_warps={_WARPS}, num_stages=1"
    return [
        f"_ks_split_numel = {found.arguments[found.numel]}",
        f"_ks_split_steps = max(1, triton.cdiv(triton.cdiv(_ks_split_numel, {BLOCK}), {PARTIALS_BLOCK}))",
        f"_ks_split_programs = max(1, triton.cdiv(_ks_split_numel, _ks_split_steps * {BLOCK}))",
        f"_ks_split_partials = torch.empty(_ks_split_programs, device={found.output}.device, "
        f"dtype={_TORCH_DTYPES[found.dtype]})",
        f"{name}_{_PHASES[0]}[(_ks_split_programs,)]({_arguments(found, first)}_ks_split_partials, "
        f"{r}={BLOCK}, {options})",
        f"{name}_{_PHASES[1]}[(1,)]({_arguments(found, second)}_ks_split_partials, _ks_split_programs, "
        f"{r}={PARTIALS_BLOCK}, {options})",
    ]


def _install(source: str, tree: ast.Module, name: str, found: _Reduction, technique: str) -> str:
    settings = f"{BLOCK} = {_BLOCK_DEFAULT}  # elements per loop step of each program of the split reduction\n"
    settings += f"{PARTIALS_BLOCK} = {_PARTIALS_DEFAULT}  # its programs at the most: partials combined in one block\n"
    names = {BLOCK, PARTIALS_BLOCK, *_LOCALS, *_HOST, *(f"{name}_{p}" for p in _PHASES)}
    new = Rebuilt(_kernels_text(found, name), _launch_lines(found, name), settings, names)
    return rebuild(source, tree, found.kernel, found.site, new, technique)


class SplitReduction(SyntaxTechnique):
    name = "split_reduction"
    title = "Split a one-program looping full reduction over every SM (partials, then one combine)"
    category = "parallelism"
    prose = (
        "TorchInductor lowers a reduction of a whole tensor to one value (a sum, a mean, a norm, a "
        "maximum) with dynamic sizes to one program that loops over the input: one SM streams it "
        "at a small fraction of the GPU's bandwidth, however its block or warps are set. The "
        "classic two-pass reduction spreads it over every SM: the blocks are dealt out as "
        "contiguous chunks to about one wave of programs, each reducing its chunk to a partial "
        "in the kernel's accumulation dtype, and one small program combines the partials in a "
        "fixed order and applies the kernel's epilogue (the cast and store). No atomics: the "
        "result is the same on every run. The input is read once: on vectors of millions of "
        "elements it runs near bandwidth, many times faster than the loop; on a few thousand "
        "the second launch costs more than it saves. A float sum adds in a different order, "
        "which rounds differently, in the same precision."
    )
    prior_min, prior_max = -0.2, 0.95
    novelty = 0.5
    kernels = ("any",)  # a matrix-product task's kernels have no full reduction to split

    def detect(self, source: str) -> dict[str, Param] | None:
        _, targets, done, why = _find(source, self.name)
        if not targets and not done:
            raise NotApplicable(f"{self.name}: {why}")
        return {"kernel": sorted(done)[0]} if done and not targets else None

    def forms(self, source: str) -> list[Form]:
        _, targets, done, why = _find(source, self.name)
        if not targets and not done:
            raise NotApplicable(f"{self.name}: {why}")
        return [
            Form(
                {"kernel": name},
                f"{name}: split reduction",
                [
                    f"replace the one-program loop of {name} by two launches: at most {PARTIALS_BLOCK} "
                    f"programs each reducing a contiguous chunk of {BLOCK}-element steps to a partial, "
                    "then one program combining the partials and running the kernel's epilogue",
                    f"{BLOCK} = {_BLOCK_DEFAULT} and {PARTIALS_BLOCK} = {_PARTIALS_DEFAULT}, module literals",
                ],
            )
            for name in targets
        ]

    def apply(self, source: str, params: dict[str, Param], reference: str | None = None) -> str:
        tree, targets, _, why = _find(source, self.name)
        name = params.get("kernel")
        if set(params) != {"kernel"} or not isinstance(name, str) or name not in targets:
            known = ", ".join(targets) or why
            raise NotApplicable(f"{self.name}: no looping one-program full reduction {name!r} to rewrite ({known})")
        return _install(source, tree, name, targets[name], self.name)
