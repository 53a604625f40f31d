"""Techniques for any Triton kernel: block sizes, warps and pipeline stages, found where they are.

The GEMM techniques rewrite the matrix-product seed's marked regions; a user's own kernel has no
regions. These read the source's syntax instead: a power of two assigned to a name that holds
``BLOCK`` (``BLOCK = 256``, ``BLOCK_H, BLOCK_W = 16, 32``, TorchInductor's per-kernel ``XBLOCK_0 =
1024`` and ``R0_BLOCK_1 = 64``; not ``NUM_BLOCKS``) is a block size, and one form changes one such
constant; a ``num_warps=`` or ``num_stages=`` keyword with an integer is a launch setting. They
change only such literals, so the kernel's logic, masks included, stays the author's; a kernel
whose correctness depends on one block size is caught by the pre-screen and the evaluation, like
any other wrong candidate.

They apply to every task, GEMM folders included (a user's own matrix-product kernel has no
regions either), but not to a kernel that carries the GEMM seed's regions: there the region-aware
tile and launch techniques do the same job with the task's constraints in mind (BLOCK_K must stay
the scale block), which a syntax-level rewrite cannot know.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from typing import TypeGuard, cast

from kernel_scientist.blackboard.records import Param
from kernel_scientist.knowledge._base import Form
from kernel_scientist.knowledge._regions import NotApplicable
from kernel_scientist.knowledge.techniques.any_kernel._syntax import (
    SyntaxTechnique,
    apply_edits,
    is_block_name,
    power_of_two,
    refuse_gemm_regions,
    replace,
)


def _sites(source: str, want: Callable[[str, str], bool]) -> list[tuple[str, ast.Constant]]:
    """(name, literal) for each integer literal that ``want(name, parent)`` accepts."""
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        raise NotApplicable(f"the source does not parse (line {exc.lineno})") from None
    found: list[tuple[str, ast.Constant]] = []
    for node in ast.walk(tree):
        pairs: list[tuple[ast.AST, ast.AST]] = []
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            if isinstance(target, ast.Tuple) and isinstance(node.value, ast.Tuple):
                pairs = list(zip(target.elts, node.value.elts))
            else:
                pairs = [(target, node.value)]
            found += [(t.id, v) for t, v in pairs if isinstance(t, ast.Name) and _int(v) and want(t.id, "assign")]
        elif isinstance(node, ast.keyword) and node.arg and _int(node.value) and want(node.arg, "keyword"):
            found.append((node.arg, node.value))
    return sorted(found, key=lambda s: (s[1].lineno, s[1].col_offset))


def _int(node: ast.AST) -> TypeGuard[ast.Constant]:
    return isinstance(node, ast.Constant) and type(node.value) is int


def _value(site: ast.Constant) -> int:
    """The integer a site holds (``_sites`` keeps integer constants only)."""
    return cast(int, site.value)


def _rewrite(source: str, sites: list[ast.Constant], value: int) -> str:
    """Replace each literal in place (at its line and column)."""
    return apply_edits(source, [replace(node, str(value)) for node in sites])


class BlockSize(SyntaxTechnique):
    name = "block_size"
    title = "Block size of a Triton kernel (any BLOCK* constant)"
    category = "tiling"
    prose = (
        "Each program of a Triton kernel handles one block of elements. Small blocks mean many "
        "programs, each paying its start-up and load latency, and short vectors; large blocks mean "
        "fewer programs (too few to keep every SM/CU busy on small inputs) and more registers per "
        "thread. Memory-bound kernels usually want blocks of 1024-4096 elements per program, or "
        "a 2-D tile wide along the contiguous dimension. Powers of two only (tl.arange needs them)."
    )
    prior_min, prior_max = -0.05, 0.4
    novelty = 0.1

    def forms(self, source: str) -> list[Form]:
        current = self.detect(source) or {}
        out = []
        for factor in (4, 2, 8, 0.5):
            for name, value in current.items():
                new = int(int(value) * factor)
                if _smallest(int(value)) <= new <= 16384:
                    out.append(
                        Form({"name": name, "value": new}, f"{name}={new}", [f"set {name} = {new} (was {value})"])
                    )
        return out

    def detect(self, source: str) -> dict[str, Param] | None:
        refuse_gemm_regions(source, self.name)
        sites = _sites(source, lambda name, kind: kind == "assign" and is_block_name(name))
        sites = [(n, c) for n, c in sites if power_of_two(_value(c))]
        if not sites:
            raise NotApplicable(f"{self.name}: no *BLOCK* constant assigned a power of two")
        return {name: _value(c) for name, c in sites}

    def apply(self, source: str, params: dict[str, Param], reference: str | None = None) -> str:
        name, value = params.get("name"), params.get("value")
        current = self.detect(source) or {}
        if name not in current:
            raise NotApplicable(f"{self.name}: no power-of-two constant {name!r} (have {', '.join(current)})")
        now = current[name]
        assert isinstance(now, int)  # detect keeps powers of two
        least = _smallest(now)
        if not power_of_two(value) or not least <= value <= 16384:
            raise NotApplicable(f"{self.name}: {name}={value!r} is not a power of two in {least}..16384")
        sites = [c for n, c in _sites(source, lambda n, kind: kind == "assign" and n == name)]
        return _rewrite(source, sites, value)


def _smallest(current: int) -> int:
    """The smallest block size offered for a constant now at ``current``: 16, or less for one that
    is already smaller (TorchInductor gives a row reduction XBLOCK 1: one row per program)."""
    return min(16, current)


class _LaunchKeyword(SyntaxTechnique):
    """One launch keyword with an integer value (every launch that passes it)."""

    key: str
    choices: tuple[int, ...]

    def detect(self, source: str) -> dict[str, Param] | None:
        refuse_gemm_regions(source, self.name)
        sites = _sites(source, lambda name, kind: kind == "keyword" and name == self.key)
        if not sites:
            raise NotApplicable(f"{self.name}: no launch passes {self.key}=<integer>")
        return {self.key: _value(sites[0][1])}

    def forms(self, source: str) -> list[Form]:
        return [Form({self.key: v}, f"{self.key}={v}", [f"launch with {self.key}={v}"]) for v in self.choices]

    def apply(self, source: str, params: dict[str, Param], reference: str | None = None) -> str:
        self.detect(source)
        value = self._param(params, self.key, self.choices)
        sites = [c for _, c in _sites(source, lambda name, kind: kind == "keyword" and name == self.key)]
        return _rewrite(source, sites, int(value))


class LaunchWarps(_LaunchKeyword):
    name = "launch_warps"
    title = "Warps per program of a Triton launch"
    category = "tiling"
    prose = (
        "num_warps sets the threads per program. A memory-bound block of B elements wants about "
        "B / (32 * 8) warps, so each thread moves 8-16 bytes per load; too few warps leave loads "
        "serialised, too many leave threads idle and cut the programs resident per SM/CU. A "
        "kernel whose block has too few elements for more warps gains nothing from them."
    )
    prior_min, prior_max = -0.05, 0.2
    novelty = 0.05
    key = "num_warps"
    choices = (1, 2, 4, 8, 16)


class LaunchStages(_LaunchKeyword):
    name = "launch_stages"
    title = "Software-pipelining stages of a Triton launch"
    category = "schedule"
    prose = (
        "num_stages sets how many iterations of a kernel's loop are in flight: loads of the next "
        "blocks overlap the current one's arithmetic. It matters for kernels that loop (a "
        "reduction over long rows), and costs shared memory per stage. A kernel without a loop "
        "ignores it."
    )
    prior_min, prior_max = -0.05, 0.15
    novelty = 0.05
    key = "num_stages"
    choices = (1, 2, 3, 4)
