"""Drop a PyTorch fallback where the Triton kernel can cover the case.

Submissions often guard their kernel with a branch to PyTorch: ``if not x.is_cuda: return
torch.relu(x)``, ``if n < 4096: return ref(x)``, or the kernel under ``if x.is_cuda:`` and PyTorch
after it. On a GPU such a branch costs a launch of PyTorch's own kernel (or several) on exactly the
shapes it covers, and a guard on where the tensors live can hide the Triton kernel from a check off
the GPU (the sandbox answers ``is_cuda`` as the GPU would, but not every way of asking), which then
proves the fallback, not the kernel. Dropping the branch sends every case through the kernel; the
pre-screen and the evaluation then prove that the kernel covers them (a kernel that cannot, say a
dtype or a layout it was never written for, fails there, and the campaign learns so).

Two forms, read from the syntax of a function that launches a kernel, each statement of its own
body: a guard (``if COND:`` whose body makes no launch and returns, after a call that does the
work), dropped; and a tail (``if COND:`` whose body launches and returns, followed by statements
that make no launch and return), where the tail is dropped and the branch's body runs
unconditionally. Each form drops one branch, named by its condition.
"""

from __future__ import annotations

import ast
from typing import NamedTuple

from kernel_scientist.blackboard.records import Param
from kernel_scientist.knowledge._base import Form
from kernel_scientist.knowledge._regions import NotApplicable
from kernel_scientist.knowledge.techniques.any_kernel._syntax import (
    SyntaxTechnique,
    refuse_gemm_regions,
    sites,
    tree_of,
)


class _Branch(NamedTuple):
    condition: str  # the if's condition, as ast.unparse writes it (the form's parameter)
    kind: str  # "guard" or "tail"
    node: ast.If
    tail: list[ast.stmt]  # a tail's statements after the if


def _launches(node: ast.AST, launch_ids: set[int]) -> bool:
    return any(id(n) in launch_ids for n in ast.walk(node))


def _returns(statements: list[ast.stmt]) -> bool:
    return bool(statements) and isinstance(statements[-1], ast.Return)


def _calls(statements: list[ast.stmt]) -> bool:
    return any(isinstance(n, ast.Call) for s in statements for n in ast.walk(s))


def _branches(source: str, technique: str) -> list[_Branch]:
    refuse_gemm_regions(source, technique)
    tree = tree_of(source, technique)
    launch_ids = {id(s.call) for s in sites(tree, technique)}
    hosts = {id(s.host): s.host for s in sites(tree, technique) if s.host is not None}
    found = []
    for host in hosts.values():
        body = host.body
        for index, statement in enumerate(body):
            if not isinstance(statement, ast.If) or statement.orelse:
                continue
            rest = body[index + 1 :]
            condition = ast.unparse(statement.test)
            if (
                not _launches(statement, launch_ids)
                and _returns(statement.body)
                and _calls(statement.body)
                and any(_launches(s, launch_ids) for s in rest)
            ):
                found.append(_Branch(condition, "guard", statement, []))
            elif (
                _launches(statement, launch_ids)
                and statement.body[0].lineno > statement.lineno  # the body on lines of its own
                and _returns(statement.body)
                and rest
                and not any(_launches(s, launch_ids) for s in rest)
                and _returns(rest)
                and _calls(rest)
            ):
                found.append(_Branch(condition, "tail", statement, rest))
    if not found:
        raise NotApplicable(
            f"{technique}: no branch to PyTorch beside a kernel launch (an `if` without `else` that "
            "returns without launching, or one that launches with PyTorch after it)"
        )
    return found


class DropFallback(SyntaxTechnique):
    name = "drop_fallback"
    title = "Drop a PyTorch fallback branch (the Triton kernel covers the case)"
    category = "schedule"
    prose = (
        "A submission that branches to PyTorch (off a GPU, below a size, for some layout) runs "
        "PyTorch's kernels on the shapes the branch covers, and a branch on where the tensors live "
        "can hide the Triton kernel from a check off the GPU, which then proves the fallback. "
        "Dropping the branch sends every case through the kernel; the pre-screen and the "
        "evaluation prove whether it covers them. Worth it where the kernel is general (masked "
        "loads, strides passed in) and the branch was caution; not where the kernel truly cannot "
        "handle the case (a dtype or layout it was not written for), which then fails its check."
    )
    prior_min, prior_max = -0.1, 0.3
    novelty = 0.3

    def detect(self, source: str) -> dict[str, Param] | None:
        _branches(source, self.name)
        return None  # a dropped branch leaves no trace

    def forms(self, source: str) -> list[Form]:
        return [
            Form(
                {"branch": b.condition},
                f"drop `if {b.condition}:` ({'its PyTorch branch' if b.kind == 'guard' else 'the PyTorch after it'})",
                [
                    f"remove the branch `if {b.condition}: ... return` that bypasses the kernel"
                    if b.kind == "guard"
                    else f"run the body of `if {b.condition}:` always and remove the PyTorch code after it"
                ],
            )
            for b in _branches(source, self.name)
        ]

    def apply(self, source: str, params: dict[str, Param], reference: str | None = None) -> str:
        branches = _branches(source, self.name)
        wanted = params.get("branch")
        branch = next((b for b in branches if b.condition == wanted), None)
        if branch is None:
            known = "; ".join(b.condition for b in branches)
            raise NotApplicable(f"{self.name}: no fallback branch `if {wanted}:` (have: {known})")
        lines = source.splitlines(keepends=True)
        node = branch.node
        start, end = node.lineno - 1, node.end_lineno or node.lineno
        if branch.kind == "guard":
            out = lines[:start] + lines[end:]
        else:
            inner = lines[node.body[0].lineno - 1 : end]
            outer = lines[start][: len(lines[start]) - len(lines[start].lstrip())]
            first = inner[0][: len(inner[0]) - len(inner[0].lstrip())]
            cut = len(first) - len(outer)
            moved = [line[cut:] if line[:cut].strip() == "" else line for line in inner]
            tail_end = max(s.end_lineno or s.lineno for s in branch.tail)
            out = lines[:start] + moved + lines[tail_end:]
        text = "".join(out)
        tree_of(text, self.name)
        return text
