"""A one-program 1-D scan made block-parallel: reduce, then scan (knowledge/docs/scans.md).

TorchInductor lowers ``torch.cumsum(x, dim=0)`` of a vector to one kernel on a grid of one
program: a loop over the vector R0_BLOCK elements at a time, ``tl.associative_scan`` within the
block and a carry between blocks (``tmp3 = tl.where(roffset > 0, tmp3 + last, last)``). One SM
then does all the work while the others idle: on an H100 such a lowering of GPU MODE's
pmpp_v2/prefixsum_py took 35 times as long as the PyTorch seed it came from. No setting of that
kernel helps; its structure has to change. The rewrite replaces it with three launches:

1. every program reduces its block of ``SCAN_BLOCK`` elements to one total (``tl.reduce`` with
   the kernel's own combine function);
2. one program scans the totals in place, ``SCAN_TOTALS_BLOCK`` at a time with a carry (a few
   thousand totals for a vector of millions: a few steps);
3. every program scans its block again and adds the scanned total of the blocks before it.

The input is read twice and the output written once (3n, against 2n for a single pass with
decoupled look-back, which needs ordered programs and spinning on flags: more to get wrong in a
rewrite); on a vector of millions of elements every SM streams. Both block sizes are module
literals, so ``block_size`` tunes them.

The rewrite is exact in what it computes: the combine function, the conversion of the loaded
values (Inductor's ``.to(tl.float32)``: the accumulation dtype) and the output's dtype stay the
kernel's; only the order of the additions changes (a tree per block and over the block totals
instead of a running carry), which for a float sum rounds differently but no less accurately. It
is taken only where the kernel is Inductor's form exactly: one loop ``for OFF in tl.range(0, N,
B)``, one load ``in_ptr + OFF + tl.arange(0, B)`` and one store to ``out_ptr`` at the same index
(so every program of the launch touches the same elements: a 1-D scan, not one per row), the
stored value ``tl.where(OFF > 0, carry + scan, scan)``, the carry updated by the block's last
element, and a combine function that adds its two arguments. Anything else is NotApplicable,
with the reason: a wrong rewrite costs an evaluation.
"""

from __future__ import annotations

import ast
import copy
from typing import NamedTuple

from kernel_scientist.blackboard.records import Param
from kernel_scientist.knowledge._base import Form
from kernel_scientist.knowledge._regions import NotApplicable
from kernel_scientist.knowledge.techniques.any_kernel._syntax import (
    Rebuilt,
    Site,
    SyntaxTechnique,
    calls,
    dotted,
    kernels,
    rebuild,
    refuse_gemm_regions,
    segment,
    sites,
    tree_of,
)

BLOCK = "SCAN_BLOCK"  # elements per program of phases 1 and 3
TOTALS_BLOCK = "SCAN_TOTALS_BLOCK"  # totals per step of phase 2's one program
# Defaults: 2048 elements per program keep 128 programs busy from 2^18 elements up (the smallest
# of GPU MODE's prefix-sum benchmarks); 4096 totals per step scan 2^28 elements' totals in 32 steps.
_BLOCK_DEFAULT, _TOTALS_DEFAULT, _WARPS = 2048, 4096, 8
_PHASES = ("block_totals", "block_offsets", "block_scan")
# Triton dtypes an accumulation may have, and torch's name for each (the totals' buffer).
_TORCH_DTYPES = {
    f"tl.{name}": f"torch.{name}"
    for name in ("float16", "bfloat16", "float32", "float64", "int8", "int16", "int32", "int64")
}
_SELECT = "inductor_select_one"  # Inductor's helper that picks one element of a block


class _Scan(NamedTuple):
    """A looping one-program scan found in the source, and what the rewrite keeps of it."""

    kernel: ast.FunctionDef
    site: Site
    combine: str  # the combine function's name
    conversions: list[str]  # the dtypes the loaded values are converted to, in order (".to(X)")
    other: str | None  # the load's value for masked lanes
    source: str  # the launch's argument for the input pointer
    target: str  # for the output pointer
    numel: str  # for the loop's bound


def _single(kernel: ast.FunctionDef) -> dict[str, ast.expr]:
    """The kernel's names bound exactly once, each by a plain assignment, to its value; parameters
    and loop variables are never included (they vary)."""
    counts: dict[str, int] = {a.arg: 2 for a in kernel.args.args}
    values: dict[str, ast.expr] = {}
    for node in ast.walk(kernel):
        targets: list[ast.expr] = []
        value: ast.expr | None = None
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
            targets, value = [node.target], node.value
        elif isinstance(node, ast.For):
            targets = [node.target]
        for target in targets:
            names = [n.id for n in ast.walk(target) if isinstance(n, ast.Name)]
            for name in names:
                counts[name] = counts.get(name, 0) + (1 if isinstance(target, ast.Name) else 2)
                if isinstance(target, ast.Name) and value is not None and not isinstance(node, ast.AugAssign):
                    values[name] = value
    return {name: value for name, value in values.items() if counts.get(name) == 1}


def _inlined(node: ast.expr, single: dict[str, ast.expr], keep: set[str]) -> ast.expr:
    """``node`` with every name bound once replaced by its value, recursively (``keep`` stays)."""

    class Inline(ast.NodeTransformer):
        def __init__(self) -> None:
            self.depth = 0

        def visit_Name(self, name: ast.Name) -> ast.expr:
            if name.id in keep or name.id not in single or self.depth > 50:
                return name
            self.depth += 1
            out = self.visit(copy.deepcopy(single[name.id]))
            self.depth -= 1
            assert isinstance(out, ast.expr)
            return out

    out = Inline().visit(copy.deepcopy(node))
    assert isinstance(out, ast.expr)
    return out


def _unbroadcast(node: ast.expr) -> ast.expr:
    while isinstance(node, ast.Call) and dotted(node.func) == "tl.broadcast_to" and node.args:
        node = node.args[0]
    return node


def _adds(function: ast.FunctionDef) -> bool:
    """Whether a combine function returns the sum of its two parameters (through plain names)."""
    params = [a.arg for a in function.args.args]
    returns = [n for n in ast.walk(function) if isinstance(n, ast.Return)]
    if len(params) != 2 or len(returns) != 1 or returns[0].value is None:
        return False
    value = _inlined(returns[0].value, _single(function), set())
    return (
        isinstance(value, ast.BinOp)
        and isinstance(value.op, ast.Add)
        and {ast.unparse(value.left), ast.unparse(value.right)} == set(params)
    )


def _argument(site: Site, kernel: ast.FunctionDef, param: str) -> ast.expr | None:
    names = [a.arg for a in kernel.args.args]
    index = names.index(param)
    if index < len(site.args):
        return site.args[index]
    return site.keywords.get(param)


def _pointer(call: ast.Call) -> ast.expr | None:
    return call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "pointer"), None)


def _keyword(call: ast.Call, name: str, position: int) -> ast.expr | None:
    if len(call.args) > position:
        return call.args[position]
    return next((k.value for k in call.keywords if k.arg == name), None)


def _read(source: str, tree: ast.Module, name: str, kernel: ast.FunctionDef, launches: list[Site]) -> _Scan | str:
    """The scan ``kernel`` computes, or why it is not a looping one-program 1-D scan."""
    loops = [n for n in ast.walk(kernel) if isinstance(n, (ast.For, ast.While))]
    if len(loops) != 1 or not isinstance(loops[0], ast.For) or loops[0] not in kernel.body:
        return f"{name} is not one loop over a vector"
    loop = loops[0]
    params = [a.arg for a in kernel.args.args]
    constexprs = {
        a.arg for a in kernel.args.args if a.annotation is not None and "constexpr" in ast.unparse(a.annotation)
    }
    bounds = loop.iter.args if isinstance(loop.iter, ast.Call) else []
    if (
        not isinstance(loop.iter, ast.Call)
        or dotted(loop.iter.func) not in ("tl.range", "range")
        or len(bounds) != 3
        or not isinstance(loop.target, ast.Name)
        or ast.unparse(bounds[0]) != "0"
        or not (isinstance(bounds[1], ast.Name) and bounds[1].id in params)
        or not (isinstance(bounds[2], ast.Name) and bounds[2].id in constexprs)
    ):
        return f"{name}'s loop is not `for OFF in tl.range(0, N, BLOCK)` over parameters"
    offset, bound, block = loop.target.id, bounds[1].id, bounds[2].id
    scans = calls(kernel, "tl.associative_scan")
    loads, stores = calls(kernel, "tl.load"), calls(kernel, "tl.store")
    if len(scans) != 1 or len(loads) != 1 or len(stores) != 1:
        return f"{name} does not make one scan, one load and one store"
    if any(dotted(c.func).startswith("tl.atomic") for c in ast.walk(kernel) if isinstance(c, ast.Call)):
        return f"{name} makes atomic updates"
    scan_statement = next((s for s in loop.body if scans[0] in list(ast.walk(s))), None)
    if not isinstance(scan_statement, ast.Assign) or len(scan_statement.targets) != 1:
        return f"{name}'s scan is not assigned in the loop's own body"
    target = scan_statement.targets[0]
    if isinstance(target, ast.Tuple) and len(target.elts) == 1:
        target = target.elts[0]
    operand = scans[0].args[0] if scans[0].args else None
    if isinstance(operand, ast.Tuple) and len(operand.elts) == 1:
        operand = operand.elts[0]
    combine = scans[0].args[2] if len(scans[0].args) == 3 else None
    found = kernels(tree)
    if not isinstance(target, ast.Name) or operand is None or not isinstance(combine, ast.Name):
        return f"{name}'s scan is not of one value with a named combine function"
    if combine.id not in found or not _adds(found[combine.id].node):
        return f"{name}'s combine function is not a sum of its two arguments"
    scanned = target.id
    single = _single(kernel)
    carries = [
        s
        for s in loop.body
        if isinstance(s, ast.Assign) and any(isinstance(t, ast.Name) and t.id not in single for t in s.targets)
    ]
    carry_names = {t.id for s in carries for t in s.targets if isinstance(t, ast.Name)} - {scanned}
    if len(carry_names) != 1:
        return f"{name} does not carry one value from block to block"
    carry = carry_names.pop()
    keep = {scanned, carry, offset}
    block_index = f"tl.arange(0, {block})"
    indices = {f"{offset} + {block_index}", f"{offset} + {block_index}[None, :]"}

    def indexed(call: ast.Call) -> tuple[str, ast.expr] | None:
        """(the pointer parameter, the mask) of a load or store at ``ptr + OFF + arange``."""
        pointer = _pointer(call)
        if not (isinstance(pointer, ast.BinOp) and isinstance(pointer.op, ast.Add)):
            return None
        base, index = pointer.left, _unbroadcast(_inlined(pointer.right, single, keep))
        mask = _keyword(call, "mask", 2 if dotted(call.func) == "tl.store" else 1)
        if not (isinstance(base, ast.Name) and base.id in params and ast.unparse(index) in indices and mask):
            return None
        if {ast.unparse(_unbroadcast(_inlined(mask, single, keep)))} != {f"{ast.unparse(index)} < {bound}"}:
            return None
        return base.id, mask

    load, store = indexed(loads[0]), indexed(stores[0])
    if load is None or store is None:
        return f"{name} does not load and store at OFF + tl.arange(0, {block}) below {bound} (one vector)"
    conversions: list[str] = []
    value = _unbroadcast(_inlined(operand, single, keep))
    while not (isinstance(value, ast.Call) and dotted(value.func) == "tl.load"):  # the one load
        if not (isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr == "to"):
            return f"{name} scans something other than its loaded values converted"
        if len(value.args) != 1 or value.keywords:  # a bitcast, or a rounding mode
            return f"{name} converts its loaded values other than plainly"
        conversions.insert(0, ast.unparse(value.args[0]))
        value = _unbroadcast(value.func.value)
    if conversions and conversions[-1] not in _TORCH_DTYPES:
        return f"{name} accumulates in {conversions[-1]}, not a dtype the rewrite knows"
    stored = _keyword(stores[0], "value", 1)
    last = f"{_SELECT}({scanned}, {block_index}[None, :] == {block} - 1, dim=-1, keep_dims=True)"
    if stored is None or ast.unparse(_inlined(stored, single, keep)) not in _carried(offset, carry, scanned):
        return f"{name} does not store tl.where({offset} > 0, carry + scan, scan)"
    updates = [s.value for s in carries if any(isinstance(t, ast.Name) and t.id == carry for t in s.targets)]
    if len(updates) != 1 or ast.unparse(_inlined(updates[0], single, keep)) not in _carried(offset, carry, last):
        return f"{name} does not carry the block's last element"
    # The texts above read the carry as it was when the block began: no statement after its update
    # may read it (the stored value would then hold this block twice).
    update = next(i for i, s in enumerate(loop.body) if s in carries and s.value is updates[0])
    if any(isinstance(n, ast.Name) and n.id == carry for s in loop.body[update + 1 :] for n in ast.walk(s)):
        return f"{name} reads its carry after updating it"
    if _SELECT not in found:
        return f"{name} uses {_SELECT} without defining it"
    if len(launches) != 1 or launches[0].form != "jit":
        return f"{name} is not launched once as kernel[grid](...)"
    site = launches[0]
    # Each is read more than once by the new launches: names only, so nothing is evaluated twice.
    passed = [_argument(site, kernel, p) for p in (load[0], store[0], bound)]
    names = [a.id for a in passed if isinstance(a, ast.Name)]
    if len(names) != 3:
        return f"{name}'s launch passes its pointers or length as expressions, not names"
    other = _keyword(loads[0], "other", 2)
    return _Scan(kernel, site, combine.id, conversions, segment(source, other) if other else None, *names)


def _carried(offset: str, carry: str, value: str) -> set[str]:
    """``tl.where(OFF > 0, carry + value, value)`` in either order of the sum (floats add
    commutatively, exactly)."""
    return {f"tl.where({offset} > 0, {a} + {b}, {value})" for a, b in ((carry, value), (value, carry))}


def _scan(source: str, technique: str) -> tuple[ast.Module, dict[str, _Scan], set[str], str]:
    """The looping one-program scans of ``source``, the kernels rewritten already, and why none."""
    refuse_gemm_regions(source, technique)
    tree = tree_of(source, technique)
    found = kernels(tree)
    every = sites(tree, technique)
    targets: dict[str, _Scan] = {}
    why = "no kernel makes a tl.associative_scan in a loop"
    for name, kernel in found.items():
        if not calls(kernel.node, "tl.associative_scan"):
            continue
        if not kernel.plain:
            why = f"{name} is autotuned (its decorator launches it)"
            continue
        read = _read(source, tree, name, kernel.node, [s for s in every if s.kernel == name])
        if isinstance(read, str):
            why = read
        else:
            targets[name] = read
    done = {name.removesuffix("_" + _PHASES[0]) for name in found if name.endswith("_" + _PHASES[0])}
    done = {name for name in done if all(f"{name}_{phase}" in found for phase in _PHASES)}
    return tree, targets, done, why


def _kernels_text(scan: _Scan, name: str) -> str:
    convert = "".join(f".to({dtype})" for dtype in scan.conversions)
    other = f", other={scan.other}" if scan.other is not None else ""
    fn = scan.combine
    return f'''

@triton.jit
def {name}_block_totals(in_ptr, totals_ptr, numel, BLOCK: tl.constexpr):
    """Block-parallel scan (block_scan), phase 1: each program's block total."""
    block = tl.program_id(0)
    index = block.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    values = tl.load(in_ptr + index, index < numel{other}){convert}
    tl.store(totals_ptr + block, tl.reduce(values, 0, {fn}))


@triton.jit
def {name}_block_offsets(totals_ptr, blocks, BLOCK: tl.constexpr):
    """Phase 2: one program scans the block totals in place, BLOCK at a time with a carry."""
    carry = tl.zeros((), totals_ptr.dtype.element_ty)
    for start in range(0, blocks, BLOCK):
        index = start + tl.arange(0, BLOCK)
        mask = index < blocks
        totals = tl.load(totals_ptr + index, mask, other=0)
        tl.store(totals_ptr + index, carry + tl.associative_scan(totals, 0, {fn}), mask)
        carry += tl.reduce(totals, 0, {fn})


@triton.jit
def {name}_block_scan(in_ptr, out_ptr, totals_ptr, numel, BLOCK: tl.constexpr):
    """Phase 3: each program scans its block again and adds the total of the blocks before it."""
    block = tl.program_id(0)
    index = block.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = index < numel
    values = tl.load(in_ptr + index, mask{other}){convert}
    scanned = tl.associative_scan(values, 0, {fn})
    before = tl.load(totals_ptr + tl.maximum(block - 1, 0))
    tl.store(out_ptr + index, tl.where(block > 0, before + scanned, scanned), mask)'''


def _launch_lines(scan: _Scan, name: str) -> list[str]:
    dtype = _TORCH_DTYPES[scan.conversions[-1]] if scan.conversions else f"{scan.source}.dtype"
    return [
        f"_ks_numel = {scan.numel}",
        f"_ks_blocks = max(1, triton.cdiv(_ks_numel, {BLOCK}))",
        f"_ks_totals = torch.empty(_ks_blocks, device={scan.source}.device, dtype={dtype})",
        f"{name}_block_totals[(_ks_blocks,)]({scan.source}, _ks_totals, _ks_numel, BLOCK={BLOCK}, num_warps={_WARPS})",
        f"{name}_block_offsets[(1,)](_ks_totals, _ks_blocks, BLOCK={TOTALS_BLOCK}, num_warps={_WARPS})",
        f"{name}_block_scan[(_ks_blocks,)]({scan.source}, {scan.target}, _ks_totals, _ks_numel, "
        f"BLOCK={BLOCK}, num_warps={_WARPS})",
    ]


def _install(source: str, tree: ast.Module, name: str, scan: _Scan, technique: str) -> str:
    """``source`` with ``name``'s kernel and launch replaced by the three phases."""
    settings = f"{BLOCK} = {_BLOCK_DEFAULT}  # elements per program of the block-parallel scan\n"
    settings += f"{TOTALS_BLOCK} = {_TOTALS_DEFAULT}  # block totals per step of its one-program phase\n"
    names = {BLOCK, TOTALS_BLOCK, "_ks_numel", "_ks_blocks", "_ks_totals", *(f"{name}_{p}" for p in _PHASES)}
    new = Rebuilt(_kernels_text(scan, name), _launch_lines(scan, name), settings, names)
    return rebuild(source, tree, scan.kernel, scan.site, new, technique)


class BlockScan(SyntaxTechnique):
    name = "block_scan"
    title = "Block-parallel scan for a one-program looping 1-D scan (reduce, then scan)"
    category = "parallelism"
    prose = (
        "TorchInductor lowers a cumsum over a whole vector to one program that loops over it with "
        "a running carry: one SM does all the work, at a small fraction of the GPU's bandwidth, "
        "however its block or warps are set. Reduce-then-scan spreads it over every SM: each "
        "program reduces its block to a total, one small program scans the totals, and each "
        "program scans its block again adding the total of the blocks before it. The input is "
        "read twice and the output written once (3n bytes against 2n for a single-pass scan), in "
        "three launches: on vectors of millions of elements it runs near bandwidth, many times "
        "faster than the loop; on a few thousand elements the extra launches cost more than the "
        "loop did. The combine function and accumulation dtype stay the kernel's; a float sum "
        "adds in a different order (a tree per block), which rounds differently, usually less."
    )
    prior_min, prior_max = -0.2, 0.95
    novelty = 0.5
    kernels = ("any",)  # a matrix-product task has no cumsum to rewrite

    def detect(self, source: str) -> dict[str, Param] | None:
        _, targets, done, why = _scan(source, self.name)
        if not targets and not done:
            raise NotApplicable(f"{self.name}: {why}")
        return {"kernel": sorted(done)[0]} if done and not targets else None

    def forms(self, source: str) -> list[Form]:
        _, targets, done, why = _scan(source, self.name)
        if not targets and not done:
            raise NotApplicable(f"{self.name}: {why}")
        return [
            Form(
                {"kernel": name},
                f"{name}: block-parallel scan",
                [
                    f"replace the one-program loop of {name} by three launches: block totals on "
                    f"ceil(n / {BLOCK}) programs, one program scanning the totals, each block scanned "
                    "again plus the totals before it",
                    f"{BLOCK} = {_BLOCK_DEFAULT} and {TOTALS_BLOCK} = {_TOTALS_DEFAULT}, module literals",
                ],
            )
            for name in targets
        ]

    def apply(self, source: str, params: dict[str, Param], reference: str | None = None) -> str:
        tree, targets, _, why = _scan(source, self.name)
        name = params.get("kernel")
        if set(params) != {"kernel"} or not isinstance(name, str) or name not in targets:
            known = ", ".join(targets) or why
            raise NotApplicable(f"{self.name}: no looping one-program scan {name!r} to rewrite ({known})")
        return _install(source, tree, name, targets[name], self.name)
