"""Several rows per program, or a persistent grid, for a kernel launched on a 1-D grid.

A row-wise kernel is launched with one program per row (``kernel[(rows,)]``, ``row =
tl.program_id(0)``); TorchInductor's kernels with one program per XBLOCK rows or elements
(``xoffset = tl.program_id(0) * XBLOCK``) are the same shape. With short rows each program does
little work and pays its start-up, its address arithmetic and a partial last wave; with millions
of rows the launch spends time scheduling programs. Two forms:

- rows per program: the kernel's body runs in a loop over ``ROWS_PER_PROGRAM`` consecutive
  program ids (``for _ks_step in range(ROWS_PER_PROGRAM): _ks_pid = tl.program_id(0) *
  ROWS_PER_PROGRAM + _ks_step; if _ks_pid < _ks_programs: <body>``), on a grid that many times
  smaller;
- a persistent grid: ``min(programs, SMs * k)`` programs, each striding over the program ids
  (``for _ks_pid in range(tl.program_id(0), _ks_programs, tl.num_programs(0))``), so every SM/CU
  gets k programs that live for the whole launch. The SM count is the GPU's where the kernel runs
  on one, and the target's (``KS_SMS``: 132 on NVIDIA, an H100's or H200's; 304 on AMD, an
  MI300X's) where it does not (the CPU check, the meta tensors a simulated evaluation records on),
  so a simulated timing sees the grid a GPU would.

The rewrite is by syntax and exact: the whole body moves into the loop with the program id
replaced by the loop's, so every virtual program does what a program did. Only where that is
plain: the kernel reads ``tl.program_id(0)`` once, in a statement of its own body, never
``tl.num_programs``, has no ``return`` (it would end every later row), no ``while`` loop and no
atomic exchange or compare-and-swap (a spin between programs could wait on one that now runs
later in the same program), and is launched once, on a grid of one dimension written where it is
launched. Otherwise NotApplicable says which.
"""

from __future__ import annotations

import ast
from typing import NamedTuple

from kernel_scientist.blackboard.records import Param
from kernel_scientist.knowledge._base import Form
from kernel_scientist.knowledge._regions import NotApplicable
from kernel_scientist.knowledge.techniques.any_kernel._syntax import (
    Edit,
    Site,
    SyntaxTechnique,
    apply_edits,
    body_start,
    calls,
    dotted,
    insert_helper,
    kernels,
    refuse_gemm_regions,
    replace,
    segment,
    sites,
    tree_of,
)

PROGRAMS = "_ks_programs"  # the kernel's new parameter: how many program ids the launch covers
ROWS = "ROWS_PER_PROGRAM"
_PERSISTENT = "_ks_persistent"  # the host helper that sizes a persistent grid
_ROWS_CHOICES = (4, 2, 8)
_PER_SM_CHOICES = (2, 4)
# Calls a grid's size may make and still be evaluated twice (for the grid, and as an argument).
_PURE_CALLS = {"triton.cdiv", "len", "min", "max", "int", "abs"}
_PURE_METHODS = {"size", "numel", "stride", "dim"}

HELPER = '''

# region-free helper written by the rows_per_program technique (knowledge/techniques/any_kernel/rows.py)
KS_SMS = {sms}  # the target's SM/CU count, for a grid sized off a GPU (the CPU check, recorded launches)


def {helper}(programs, per_sm):
    """A persistent grid's size: ``per_sm`` programs per SM (CU) of the current GPU, at most
    ``programs`` (the program ids they stride over), at least one."""
    sms = KS_SMS
    if torch.cuda.is_available():
        sms = torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count
    return max(1, min(programs, sms * per_sm))
'''


class _Target(NamedTuple):
    kernel: ast.FunctionDef
    site: Site
    size: ast.expr  # the grid's one size: how many program ids the launch covers
    pid: ast.Call  # the kernel's one tl.program_id(0)


class _Done(NamedTuple):
    """A kernel this technique rewrote: its mode, and the launch's count literal (rows per program
    or programs per SM)."""

    mode: str  # "rows" or "per_sm"
    value: ast.Constant

    @property
    def number(self) -> int:
        count = self.value.value
        assert type(count) is int  # _count_literal keeps integer literals only
        return count


def _axis_zero(call: ast.Call) -> bool:
    axis = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "axis"), None)
    return isinstance(axis, ast.Constant) and axis.value == 0


def _pure(node: ast.expr) -> bool:
    """Whether ``node`` may be evaluated twice: names, numbers, arithmetic, attributes, indexing,
    and a few calls that only read sizes."""
    for sub in ast.walk(node):
        if isinstance(sub, ast.Call):
            name = dotted(sub.func)
            method = sub.func.attr if isinstance(sub.func, ast.Attribute) else ""
            if name not in _PURE_CALLS and method not in _PURE_METHODS:
                return False
        elif isinstance(sub, (ast.Lambda, ast.NamedExpr, ast.Await, ast.Yield, ast.YieldFrom)):
            return False
    return True


def _refusal(kernel: ast.FunctionDef, launches: list[Site]) -> str | None:
    """Why ``kernel`` (launched at ``launches``) cannot take the loop, or None."""
    name = kernel.name
    arguments = kernel.args
    if arguments.vararg or arguments.kwarg or arguments.kwonlyargs or arguments.defaults or arguments.posonlyargs:
        return f"{name}'s parameters have defaults or are not plain"
    pids = calls(kernel, "tl.program_id")
    statements = kernel.body[body_start(kernel) :]
    if len(pids) != 1 or not _axis_zero(pids[0]):
        return f"{name} does not read tl.program_id(0) exactly once (and no other axis)"
    if not any(pids[0] in list(ast.walk(s)) and isinstance(s, ast.Assign) for s in statements):
        return f"{name} reads its program id inside a nested statement, not one of its own"
    if calls(kernel, "tl.num_programs"):
        return f"{name} reads tl.num_programs"
    if any(isinstance(n, (ast.Return, ast.While)) for n in ast.walk(kernel)):
        return f"{name} has a return or a while loop"
    if any(dotted(c.func).endswith(("atomic_xchg", "atomic_cas")) for c in ast.walk(kernel) if isinstance(c, ast.Call)):
        return f"{name} exchanges atomically (a spin between programs could wait forever)"
    if len(launches) != 1:
        return f"{name} is launched {len(launches)} times, not once"
    site = launches[0]
    if site.form == "tuned" or not isinstance(site.grid, ast.Tuple) or len(site.grid.elts) != 1:
        return f"{name}'s grid is not one dimension written at its launch"
    if not _pure(site.grid.elts[0]):
        return f"{name}'s grid size calls something besides size reads"
    if {PROGRAMS, ROWS} & set(site.keywords):
        return f"{name}'s launch already passes {PROGRAMS} or {ROWS}"
    return None


def _scan(source: str, technique: str) -> tuple[ast.Module, dict[str, _Target], dict[str, _Done], str]:
    """The kernels the loop can go into, those it is in already, and why none can where so."""
    refuse_gemm_regions(source, technique)
    tree = tree_of(source, technique)
    found = kernels(tree)
    every = sites(tree, technique)
    targets: dict[str, _Target] = {}
    done: dict[str, _Done] = {}
    why = "no kernel launched on a 1-D grid"
    for name, kernel in found.items():
        launches = [s for s in every if s.kernel == name]
        if PROGRAMS in [a.arg for a in kernel.node.args.args]:
            mode = "rows" if ROWS in [a.arg for a in kernel.node.args.args] else "per_sm"
            value = _count_literal(launches, mode)
            if value is not None:
                done[name] = _Done(mode, value)
            continue
        if not kernel.plain:
            why = f"{name} is autotuned (its decorator launches it)"
            continue
        refusal = _refusal(kernel.node, launches)
        if refusal is not None:
            why = refusal
            continue
        site = launches[0]
        assert isinstance(site.grid, ast.Tuple)  # _refusal checked it
        targets[name] = _Target(kernel.node, site, site.grid.elts[0], calls(kernel.node, "tl.program_id")[0])
    return tree, targets, done, why


def _count_literal(launches: list[Site], mode: str) -> ast.Constant | None:
    """The launch's literal count of a kernel rewritten already: ROWS_PER_PROGRAM=k, or the k of
    ``_ks_persistent(programs, k)`` in its grid."""
    if len(launches) != 1:
        return None
    site = launches[0]
    if mode == "rows":
        value = site.keywords.get(ROWS)
        return value if isinstance(value, ast.Constant) and type(value.value) is int else None
    for call in calls(site.grid, _PERSISTENT):
        if len(call.args) == 2 and isinstance(call.args[1], ast.Constant) and type(call.args[1].value) is int:
            return call.args[1]
    return None


class RowsPerProgram(SyntaxTechnique):
    name = "rows_per_program"
    title = "Several rows per program, or a persistent grid (kernels on a 1-D grid)"
    category = "parallelism"
    prose = (
        "A row-wise kernel launched with one program per row (or TorchInductor's one program per "
        "XBLOCK rows) gives each program little work when rows are short: each pays its start-up "
        "and address arithmetic, and the last wave leaves SMs/CUs idle. Looping each program over "
        "ROWS_PER_PROGRAM consecutive rows amortises that and lets loads of the next row overlap "
        "the current one; a persistent grid of a few programs per SM/CU, each striding over the "
        "rows, removes the scheduling of millions of programs and the tail wave. Long rows gain "
        "nothing (each program is busy already), and too few programs leave SMs idle on small "
        "inputs. The rewrite is exact: the body runs unchanged for each row the loop visits."
    )
    prior_min, prior_max = -0.1, 0.25
    novelty = 0.35
    sms = 132  # the target's SM count off a GPU: an H100's or H200's (AMD below)

    def detect(self, source: str) -> dict[str, Param] | None:
        _, targets, done, why = _scan(source, self.name)
        if not targets and not done:
            raise NotApplicable(f"{self.name}: {why}")
        return {name: f"{d.mode}={d.number}" for name, d in done.items()} or None

    def forms(self, source: str) -> list[Form]:
        _, targets, done, why = _scan(source, self.name)
        if not targets and not done:
            raise NotApplicable(f"{self.name}: {why}")
        order = [("rows", _ROWS_CHOICES[0]), ("per_sm", _PER_SM_CHOICES[0])]
        order += [("rows", k) for k in _ROWS_CHOICES[1:]] + [("per_sm", k) for k in _PER_SM_CHOICES[1:]]
        out = []
        for mode, count in order:
            for name in [*targets, *done]:
                if name in done and (done[name].mode != mode or done[name].number == count):
                    continue
                label = f"{name}: {count} rows per program" if mode == "rows" else f"{name}: persistent, {count} per SM"
                change = (
                    f"loop each program of {name} over {count} consecutive program ids (grid {count}x smaller)"
                    if mode == "rows"
                    else f"launch {name} on min(programs, SMs x {count}) programs striding over the program ids"
                )
                out.append(Form({"kernel": name, mode: count}, label, [change]))
        return out

    def apply(self, source: str, params: dict[str, Param], reference: str | None = None) -> str:
        tree, targets, done, why = _scan(source, self.name)
        name = params.get("kernel")
        modes = [m for m in ("rows", "per_sm") if m in params]
        if not isinstance(name, str) or len(modes) != 1 or len(params) != 2:
            raise NotApplicable(f"{self.name}: parameters are kernel and one of rows, per_sm; got {sorted(params)}")
        mode = modes[0]
        count = self._param(params, mode, _ROWS_CHOICES if mode == "rows" else _PER_SM_CHOICES)
        if name in done:
            if done[name].mode != mode:
                raise NotApplicable(f"{self.name}: {name} already has the {done[name].mode} form")
            return apply_edits(source, [replace(done[name].value, str(count))])
        if name not in targets:
            raise NotApplicable(f"{self.name}: {name!r} cannot take the loop ({why})")
        out = _install(source, targets[name], mode, count)
        if mode == "per_sm" and f"def {_PERSISTENT}(" not in out:
            imported = {a.name for n in tree.body if isinstance(n, ast.Import) for a in n.names if a.asname is None}
            helper = ("\nimport torch" if "torch" not in imported else "") + HELPER.format(
                sms=self.sms, helper=_PERSISTENT
            )
            out = insert_helper(out, tree_of(out, self.name), helper, self.name)
        tree_of(out, self.name)
        return out


class _AmdRows(RowsPerProgram, replaces_on="amd"):
    sms = 304  # an MI300X's CUs


def _install(source: str, target: _Target, mode: str, count: int) -> str:
    """``source`` with ``target``'s kernel looping over its program ids and its launch sized for it."""
    kernel, site = target.kernel, target.site
    programs = segment(source, target.size)
    new_params = f", {PROGRAMS}" + (f", {ROWS}: tl.constexpr" if mode == "rows" else "")
    last = kernel.args.args[-1]
    edits: list[Edit] = [
        Edit(
            last.end_lineno or last.lineno,
            last.end_col_offset or 0,
            last.end_lineno or last.lineno,
            last.end_col_offset or 0,
            new_params,
        ),
        replace(target.pid, "_ks_pid"),
    ]
    if mode == "rows":
        edits.append(replace(target.size, f"triton.cdiv({programs}, {count})"))
        edits.append(site.add_keywords([(PROGRAMS, programs), (ROWS, str(count))]))
    else:
        edits.append(replace(target.size, f"{_PERSISTENT}({programs}, {count})"))
        edits.append(site.add_keywords([(PROGRAMS, programs)]))
    # Edits on the body keep its line numbers (none adds a line): indent it afterwards.
    out = apply_edits(source, edits)
    statements = kernel.body[body_start(kernel) :]
    first, end = statements[0].lineno, max(s.end_lineno or s.lineno for s in statements)
    lines = out.splitlines(keepends=True)
    indent = lines[first - 1][: len(lines[first - 1]) - len(lines[first - 1].lstrip())]
    if mode == "rows":
        head = [
            f"{indent}for _ks_step in range({ROWS}):\n",
            f"{indent}    _ks_pid = tl.program_id(0) * {ROWS} + _ks_step\n",
            f"{indent}    if _ks_pid < {PROGRAMS}:\n",
        ]
        deeper = "        "
    else:
        head = [f"{indent}for _ks_pid in range(tl.program_id(0), {PROGRAMS}, tl.num_programs(0)):\n"]
        deeper = "    "
    hoisted = _constexpr_lines(statements)
    kept = [line for number, line in enumerate(lines[first - 1 : end], first) if number in hoisted]
    moved = [
        deeper + line if line.strip() else line
        for number, line in enumerate(lines[first - 1 : end], first)
        if number not in hoisted
    ]
    return "".join(lines[: first - 1] + kept + head + moved + lines[end:])


def _constexpr_lines(statements: list[ast.stmt]) -> set[int]:
    """The lines of the body's ``NAME: tl.constexpr = ...`` statements, which stay before the loop:
    Triton lets a constexpr be bound once per kernel, and a loop body is traced more than once
    (TorchInductor writes ``RBLOCK: tl.constexpr = R0_BLOCK``). A constexpr depends on nothing
    per program, so binding it before the loop changes nothing. One sharing a line with another
    statement moves with it."""
    spans = [(s, set(range(s.lineno, (s.end_lineno or s.lineno) + 1))) for s in statements]
    out: set[int] = set()
    for statement, span in spans:
        constexpr = isinstance(statement, ast.AnnAssign) and "constexpr" in ast.unparse(statement.annotation)
        if constexpr and not any(other is not statement and span & lines for other, lines in spans):
            out |= span
    return out
