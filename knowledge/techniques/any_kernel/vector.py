"""Elements per thread: a 1-D elementwise kernel's block size and warps, set together.

A 1-D elementwise kernel (one program id, one ``tl.arange`` over a block, no loop, no reduction)
gives each thread BLOCK / (32 * num_warps) contiguous elements. Triton turns a thread's contiguous
elements into vector loads and stores, up to 128 bits each (4 fp32 or 8 fp16 values), so a thread
with fewer elements than that issues narrower accesses, and one with many more holds them all in
registers. ``block_size`` and ``launch_warps`` move one of the two; this moves both at once, to a
chosen number of elements per thread at a chosen width, which neither single step reaches when
each alone is worse (more warps on the same block means fewer elements per thread).

Only where the launch's grid follows the block size: the block's constant is written in the grid
(``triton.cdiv(n, BLOCK)``, also through the per-shape tuner's ``cfg``), or a literal block is
written there too (both change); a kernel launched from more than one place, or whose constant
another kernel's launch shares, is left alone (one form changes one kernel).
"""

from __future__ import annotations

import ast
from typing import NamedTuple

from kernel_scientist.blackboard.records import Param
from kernel_scientist.knowledge._base import Form
from kernel_scientist.knowledge._regions import NotApplicable
from kernel_scientist.knowledge.techniques.any_kernel._syntax import (
    Binding,
    Edit,
    Site,
    SyntaxTechnique,
    apply_edits,
    binding,
    calls,
    dotted,
    grid_expression,
    kernels,
    power_of_two,
    refuse_gemm_regions,
    replace,
    sites,
    tree_of,
)

# (elements per thread, warps), the likeliest first: 8 elements per thread is a 128-bit access
# for 16-bit data and two for 32-bit, at the 4 warps most elementwise kernels launch with.
_CHOICES = ((8, 4), (4, 4), (16, 8), (8, 8), (4, 8), (16, 4))
_MOST_BLOCK = 16384
# Calls that make a kernel more than elementwise: reductions, scans, products, sorts.
_NOT_ELEMENTWISE = {
    "sum",
    "max",
    "min",
    "argmax",
    "argmin",
    "reduce",
    "cumsum",
    "cumprod",
    "associative_scan",
    "xor_sum",
    "dot",
    "dot_scaled",
    "histogram",
    "sort",
    "flip",
    "gather",
    "num_programs",
}


class _Target(NamedTuple):
    site: Site
    block: str  # the kernel's block parameter, as the launch names it
    bound: Binding
    grid_copies: list[ast.Constant]  # a literal block's copies in the grid
    warps: int
    warps_node: ast.expr | None


def block_parameter(kernel: ast.FunctionDef) -> str | None:
    """The block parameter of a 1-D elementwise kernel, or None for any other kernel."""
    constexprs = {
        a.arg for a in kernel.args.args if a.annotation is not None and "constexpr" in ast.unparse(a.annotation)
    }
    if any(isinstance(n, (ast.For, ast.While, ast.AsyncFor)) for n in ast.walk(kernel)):
        return None
    if any(isinstance(n, ast.Subscript) and isinstance(n.slice, ast.Tuple) for n in ast.walk(kernel)):
        return None  # a 2-D block ([:, None])
    for call in (c for c in ast.walk(kernel) if isinstance(c, ast.Call)):
        name = dotted(call.func)
        if name.startswith("tl.") and name[3:] in _NOT_ELEMENTWISE:
            return None
    if len(calls(kernel, "tl.program_id")) != 1:
        return None
    ranges = calls(kernel, "tl.arange")
    ends = {ast.unparse(c.args[1]) for c in ranges if len(c.args) == 2}
    if len(ranges) != 1 or len(ends) != 1:
        return None
    end = ranges[0].args[1]
    return end.id if isinstance(end, ast.Name) and end.id in constexprs else None


def _targets(source: str, technique: str) -> dict[str, _Target]:
    """Each 1-D elementwise kernel whose one launch can take another block size and warps."""
    refuse_gemm_regions(source, technique)
    tree = tree_of(source, technique)
    found = kernels(tree)
    every = sites(tree, technique)
    out: dict[str, _Target] = {}
    why = "no 1-D elementwise kernel (one program id, one tl.arange, no loop or reduction)"
    for name, kernel in found.items():
        block = block_parameter(kernel.node)
        if block is None or not kernel.plain:
            continue
        launches = [s for s in every if s.kernel == name]
        if len(launches) != 1 or block not in launches[0].keywords:
            why = f"{name} is not launched once with {block}= as a keyword"
            continue
        site = launches[0]
        bound = binding(tree, site.host, site.keywords[block])
        if bound is None or not power_of_two(bound.value):
            why = f"{name}'s {block} is not a power of two written as a literal or a constant assigned once"
            continue
        shared = [s for s in every if s is not site and bound.name is not None and bound.name in _values(s)]
        if shared:
            why = f"{name}'s {block} constant {bound.name} is shared by another launch"
            continue
        copies = _follows(tree, site, block, bound)
        if copies is None:
            why = f"{name}'s grid does not follow its {block}"
            continue
        warps_node = site.keywords.get("num_warps")
        warps = 4  # Triton's default
        if warps_node is not None:
            if not (isinstance(warps_node, ast.Constant) and type(warps_node.value) is int):
                why = f"{name} is launched with num_warps computed, not written"
                continue
            warps = warps_node.value
        out[name] = _Target(site, block, bound, copies, warps, warps_node)
    if not out:
        raise NotApplicable(f"{technique}: {why}")
    return out


def _values(site: Site) -> set[str]:
    return {n.id for v in site.keywords.values() for n in ast.walk(v) if isinstance(n, ast.Name)}


def _follows(tree: ast.Module, site: Site, block: str, bound: Binding) -> list[ast.Constant] | None:
    """Where the grid takes the block size from: [] where it reads the block's constant (or the
    tuner's ``cfg[block]``), the grid's copies of a literal block, None where it does not follow."""
    if site.form == "tuned":
        reads = any(isinstance(n, ast.Subscript) and ast.unparse(n) == f"cfg[{block!r}]" for n in ast.walk(site.grid))
        return [] if reads else None
    expression, _ = grid_expression(tree, site)
    if expression is None:
        return None
    if bound.name is not None:
        return [] if any(isinstance(n, ast.Name) and n.id == bound.name for n in ast.walk(expression)) else None
    copies = [n for n in ast.walk(expression) if isinstance(n, ast.Constant) and n.value == bound.value]
    return copies or None


class ElementsPerThread(SyntaxTechnique):
    name = "elements_per_thread"
    title = "Elements per thread of a 1-D elementwise kernel (block size and warps together)"
    category = "memory"
    prose = (
        "A 1-D elementwise kernel gives each thread BLOCK / (32 * num_warps) contiguous elements, "
        "and Triton turns them into vector loads and stores of up to 128 bits (4 fp32 or 8 fp16 "
        "values). Fewer elements per thread than that means narrower accesses and more "
        "instructions per byte; many more means registers held for long and fewer programs to "
        "spread over the SMs/CUs. Memory-bound elementwise kernels usually do best with 4-16 "
        "elements per thread and 4-8 warps. Setting block and warps together reaches a width "
        "that changing either alone (the block_size and launch_warps steps) does not. It changes "
        "nothing for a kernel whose loads cannot be vectorised (strided or gathered addresses)."
    )
    prior_min, prior_max = -0.05, 0.25
    novelty = 0.25

    def detect(self, source: str) -> dict[str, Param] | None:
        return {name: f"{t.bound.value // (32 * t.warps)}x{t.warps}" for name, t in _targets(source, self.name).items()}

    def forms(self, source: str) -> list[Form]:
        targets = _targets(source, self.name)
        out = []
        for per_thread, warps in _CHOICES:
            for name, target in targets.items():
                block = per_thread * 32 * warps
                if block > _MOST_BLOCK or (block == target.bound.value and warps == target.warps):
                    continue
                out.append(
                    Form(
                        {"kernel": name, "elements_per_thread": per_thread, "num_warps": warps},
                        f"{name}: {target.block}={block}, num_warps={warps} ({per_thread} per thread)",
                        [
                            f"launch {name} with {target.block}={block} (was {target.bound.value}) "
                            f"and num_warps={warps} (was {target.warps})",
                            f"each thread handles {per_thread} contiguous elements (vector loads and stores)",
                        ],
                    )
                )
        return out

    def apply(self, source: str, params: dict[str, Param], reference: str | None = None) -> str:
        targets = _targets(source, self.name)
        name = params.get("kernel")
        if not isinstance(name, str) or name not in targets:
            raise NotApplicable(f"{self.name}: no 1-D elementwise kernel {name!r} (have {', '.join(targets)})")
        per_thread = self._param(params, "elements_per_thread", tuple(sorted({c[0] for c in _CHOICES})))
        warps = self._param(params, "num_warps", tuple(sorted({c[1] for c in _CHOICES})))
        target = targets[name]
        block = per_thread * 32 * warps
        if block > _MOST_BLOCK:
            raise NotApplicable(f"{self.name}: a block of {block} elements is more than {_MOST_BLOCK}")
        edits: list[Edit] = [replace(n, str(block)) for n in [target.bound.literal, *target.grid_copies]]
        if target.warps_node is not None:
            edits.append(replace(target.warps_node, str(warps)))
        else:
            edits.append(target.site.add_keywords([("num_warps", str(warps))]))
        out = apply_edits(source, edits)
        tree_of(out, self.name)
        return out
