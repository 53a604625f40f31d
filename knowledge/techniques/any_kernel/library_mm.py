"""A library matrix product made a Triton kernel of the submission's own (knowledge/docs/gemm-techniques.md).

TorchInductor hands a matrix product to the vendor's library: a seed's ``c[...] = a @ b`` lowers
to ``torch.mm(a, b, out=buf)`` followed by a Triton kernel that copies ``buf`` into ``c``. Under a
campaign's policy (``evaluator.own_kernel``) no kernel built on that lowering may keep the library
call, so until it is replaced nothing can be tuned. The rewrite replaces the one call by a tiled
Triton GEMM placed in the file: one program per ``MM_BLOCK_M`` x ``MM_BLOCK_N`` tile of the
output, in grouped order (``MM_GROUP_M`` rows of tiles share their B columns in L2), a loop over K
``MM_BLOCK_K`` at a time with masked loads (any m, n, k and any strides), ``tl.dot`` into an fp32
accumulator, the result cast to the output's dtype once. A float32 product is computed in IEEE
precision (``input_precision="ieee"``), as the reference's is, not in TF32. The tile sizes,
warps and stages are module literals, so ``block_size`` and ``per_shape_tuning`` tune them.

Two forms. ``into="buffer"`` keeps everything else as it was. ``into="output"`` also writes the
product straight into the tensor Inductor's copy kernel fills afterwards, and drops that copy's
launch and the buffer's allocation: one launch, one allocation and one pass over the output
fewer, which on small, host-bound shapes is most of the call. It is offered only where the copy is exactly that: the next launch that reads
the buffer is of a kernel that loads ``in_ptr + x`` and stores the value to ``out_ptr + x`` at the
same index and nothing else, and the buffer is used nowhere after it.
"""

from __future__ import annotations

import ast
import re
from typing import NamedTuple

from kernel_scientist.blackboard.records import Param
from kernel_scientist.knowledge._base import Form
from kernel_scientist.knowledge._regions import NotApplicable
from kernel_scientist.knowledge.lowering import SETTINGS_COMMENT
from kernel_scientist.knowledge.techniques.any_kernel._syntax import (
    Edit,
    Site,
    SyntaxTechnique,
    apply_edits,
    calls,
    dead_constants,
    dotted,
    insert_helper,
    kernels,
    refuse_gemm_regions,
    replace,
    sites,
    tree_of,
)

HELPER = '''

# library_mm: the matrix product in a Triton kernel of this file (the library call it replaced
# was torch.mm). Tile sizes, warps and stages are literals the tuning techniques find.
MM_BLOCK_M = 128
MM_BLOCK_N = 128
MM_BLOCK_K = 32
MM_GROUP_M = 8


@triton.jit
def _ks_mm_kernel(
    a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    IEEE: tl.constexpr,
):
    pid = tl.program_id(0)
    tiles_m = tl.cdiv(M, BLOCK_M)
    tiles_n = tl.cdiv(N, BLOCK_N)
    group = GROUP_M * tiles_n
    first_m = (pid // group) * GROUP_M
    rows = tl.minimum(tiles_m - first_m, GROUP_M)
    pid_m = first_m + (pid % group) % rows
    pid_n = (pid % group) // rows
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        kk = k0 + rk
        a = tl.load(a_ptr + rm[:, None] * sam + kk[None, :] * sak, mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0)
        b = tl.load(b_ptr + kk[:, None] * sbk + rn[None, :] * sbn, mask=(kk[:, None] < K) & (rn[None, :] < N), other=0.0)
        if IEEE:
            acc += tl.dot(a, b, input_precision="ieee")
        else:
            acc += tl.dot(a, b)
    c = acc.to(c_ptr.dtype.element_ty)
    tl.store(c_ptr + rm[:, None] * scm + rn[None, :] * scn, c, mask=(rm[:, None] < M) & (rn[None, :] < N))


def _ks_mm(a, b, out):
    """out = a @ b for 2-D a (m x k) and b (k x n), out (m x n), any strides."""
    m, k = a.shape
    n = b.shape[1]
    grid = (triton.cdiv(m, MM_BLOCK_M) * triton.cdiv(n, MM_BLOCK_N),)
    _ks_mm_kernel[grid](
        a, b, out, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1), out.stride(0), out.stride(1),
        BLOCK_M=MM_BLOCK_M, BLOCK_N=MM_BLOCK_N, BLOCK_K=MM_BLOCK_K, GROUP_M=MM_GROUP_M,
        IEEE=a.dtype == torch.float32, num_warps=4, num_stages=3,
    )
    return out
'''


class _Product(NamedTuple):
    statement: ast.Expr  # torch.mm(a, b, out=buf)
    a: str
    b: str
    buffer: str
    copy: Site | None  # the copy of the buffer into the output that ``into="output"`` folds


def _product(source: str, technique: str) -> tuple[ast.Module, _Product]:
    refuse_gemm_regions(source, technique)
    tree = tree_of(source, technique)
    if "_ks_mm_kernel" in kernels(tree):
        raise NotApplicable(f"{technique}: the product is already a kernel of the file (_ks_mm_kernel)")
    found = [
        s
        for s in ast.walk(tree)
        if isinstance(s, ast.Expr)
        and isinstance(s.value, ast.Call)
        and dotted(s.value.func) in ("torch.mm", "extern_kernels.mm")
    ]
    if not found:
        raise NotApplicable(f"{technique}: no library matrix product `torch.mm(a, b, out=buf)` to replace")
    if len(found) > 1:
        raise NotApplicable(f"{technique}: {len(found)} library matrix products; one is rewritten at a time only")
    statement = found[0]
    call = statement.value
    assert isinstance(call, ast.Call)
    out = {k.arg: k.value for k in call.keywords}
    names = [*call.args, out.get("out")]
    if len(call.args) != 2 or set(out) != {"out"} or not all(isinstance(n, ast.Name) for n in names):
        raise NotApplicable(f"{technique}: the product is not `torch.mm(a, b, out=buf)` with plain names")
    a, b, buffer = (n.id for n in names if isinstance(n, ast.Name))
    return tree, _Product(statement, a, b, buffer, _copy_of(tree, statement, buffer))


def _copy_of(tree: ast.Module, after: ast.Expr, buffer: str) -> Site | None:
    """The launch that copies ``buffer`` into another tensor right after the product (module
    note), when it is exactly that; None otherwise."""
    known = kernels(tree)
    later = [s for s in sites(tree, "library_mm") if s.call.lineno > (after.end_lineno or after.lineno)]
    reads = [s for s in later if any(isinstance(a, ast.Name) and a.id == buffer for a in s.args)]
    if not reads or not isinstance(reads[0].args[0], ast.Name) or reads[0].args[0].id != buffer:
        return None
    site = reads[0]
    if len(site.args) < 2 or not isinstance(site.args[1], ast.Name) or site.form != "jit":
        return None
    kernel = known[site.kernel].node
    params = [p.arg for p in kernel.args.args]
    loads, stores = calls(kernel, "tl.load"), calls(kernel, "tl.store")
    if len(loads) != 1 or len(stores) != 1 or len(params) < 2:
        return None
    load_at, store_at = ast.unparse(loads[0].args[0]), ast.unparse(stores[0].args[0])
    load_root, _, load_index = load_at.partition(" + ")
    store_root, _, store_index = store_at.partition(" + ")
    if (load_root, store_root) != (params[0], params[1]) or not load_index or load_index != store_index:
        return None
    if not _is_loaded_value(kernel, stores[0], loads[0]) or _used_after(tree, site, buffer):
        return None
    return site


def _is_loaded_value(kernel: ast.FunctionDef, store: ast.Call, load: ast.Call) -> bool:
    """The store writes the loaded value itself (``x = tl.load(...)`` or ``tl.load(...).to(T)``),
    no arithmetic on it."""
    if len(store.args) < 2 or not isinstance(store.args[1], ast.Name):
        return False
    name = store.args[1].id
    for node in ast.walk(kernel):
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            value = node.value
            if isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr == "to":
                value = value.func.value
            return value is load
    return False


def _drop_allocation(tree: ast.Module, p: _Product) -> list[Edit]:
    """The buffer's own allocation (``buf = torch.empty...(...)`` on one line), once nothing but
    the product and its copy used it; none where it is used anywhere else."""
    uses = [n for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id == p.buffer and isinstance(n.ctx, ast.Load)]
    if len(uses) != 2:  # the product's out= and the copy's first argument
        return []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Assign)
            and [ast.unparse(t) for t in node.targets] == [p.buffer]
            and isinstance(node.value, ast.Call)
            and dotted(node.value.func) in ("torch.empty", "torch.empty_strided")
            and node.lineno == node.end_lineno
        ):
            return [Edit(node.lineno, 0, node.lineno + 1, 0, "")]
    return []


def _drop_copy_kernel(source: str, tree: ast.Module, site: Site) -> list[Edit]:
    """What only the dropped copy launch used: the copy kernel's definition (where nothing else
    launches it), its block constants (and the lowering's comment over them when they were all
    its settings), and the host's one-line assignments (Inductor's ``..._xnumel = s23 * s63``)
    that only that launch would have read."""
    launch = {id(n) for n in ast.walk(site.call)}
    read_elsewhere = {
        n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and id(n) not in launch
    }
    if site.kernel in read_elsewhere:
        return []
    kernel = kernels(tree)[site.kernel].node
    start = min([kernel.lineno, *(d.lineno for d in kernel.decorator_list)])
    edits = [Edit(start, 0, (kernel.end_lineno or kernel.lineno) + 1, 0, "")]
    dead = dead_constants(tree, site)
    edits += [Edit(c.lineno, 0, c.lineno + 1, 0, "") for c in dead]
    lines = source.splitlines()
    if dead and lines[dead[0].lineno - 2].startswith(SETTINGS_COMMENT):
        after = lines[dead[-1].lineno] if dead[-1].lineno < len(lines) else ""
        if not after.strip() and dead[-1].lineno - dead[0].lineno == len(dead) - 1:  # the whole block
            edits.append(Edit(dead[0].lineno - 1, 0, dead[0].lineno, 0, ""))
    for node in ast.walk(site.host) if site.host is not None else ():
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(target := node.targets[0], ast.Name)
            and target.id.startswith(site.kernel)
            and target.id not in read_elsewhere
            and node.lineno == node.end_lineno
        ):
            edits.append(Edit(node.lineno, 0, node.lineno + 1, 0, ""))
    return edits


def _used_after(tree: ast.Module, site: Site, name: str) -> bool:
    end = site.call.end_lineno or site.call.lineno
    return any(
        isinstance(n, ast.Name) and n.id == name and n.lineno > end
        for n in ast.walk(site.host if site.host is not None else tree)
    )


class LibraryMatmul(SyntaxTechnique):
    name = "library_mm"
    title = "A library matrix product made a Triton kernel of the submission (tiled, grouped order)"
    category = "tiling"
    prose = (
        "Where a lowering hands the matrix product to the vendor's library (torch.mm), the "
        "submission computes nothing of its own there, and no setting of its other kernels moves "
        "that time. A tiled Triton GEMM in the file (one program per output tile in grouped order, "
        "a K loop of tl.dot into fp32, masked edges, the output cast once) puts the product where "
        "the tuning techniques can reach it; writing it straight into the output also drops the "
        "copy Inductor launches after the library call. The library's kernels are tuned per shape "
        "by their vendor: on large shapes a first Triton tile is often slower until its sizes are "
        "tuned; on small, launch-bound shapes the saved launch and copy usually win at once."
    )
    prior_min, prior_max = -0.4, 0.6
    novelty = 0.6

    def detect(self, source: str) -> dict[str, Param] | None:
        _product(source, self.name)
        return None

    def forms(self, source: str) -> list[Form]:
        _, p = _product(source, self.name)
        out = [
            Form(
                {"into": "buffer"},
                f"torch.mm -> Triton GEMM into {p.buffer}",
                [f"replace torch.mm({p.a}, {p.b}, out={p.buffer}) by _ks_mm, a tiled Triton GEMM of the file"],
            )
        ]
        if p.copy is not None:
            target = ast.unparse(p.copy.args[1])
            out.insert(
                0,
                Form(
                    {"into": "output"},
                    f"torch.mm -> Triton GEMM straight into {target}",
                    [
                        f"replace torch.mm({p.a}, {p.b}, out={p.buffer}) by _ks_mm writing into {target}",
                        f"drop the launch of {p.copy.kernel} that copied {p.buffer} into {target}",
                    ],
                ),
            )
        return out

    def apply(self, source: str, params: dict[str, Param], reference: str | None = None) -> str:
        tree, p = _product(source, self.name)
        into = params.get("into")
        if into not in ("buffer", "output") or set(params) != {"into"}:
            raise NotApplicable(f"{self.name}: into must be 'buffer' or 'output', not {into!r}")
        if into == "output" and p.copy is None:
            raise NotApplicable(f"{self.name}: no copy of {p.buffer} into the output right after the product")
        target = p.buffer if into == "buffer" else ast.unparse(p.copy.args[1]) if p.copy else p.buffer
        edits = [replace(p.statement, f"_ks_mm({p.a}, {p.b}, {target})")]
        if into == "output" and p.copy is not None:
            copy = next(s for s in ast.walk(tree) if isinstance(s, ast.Expr) and s.value is p.copy.call)
            end = copy.end_lineno or copy.lineno
            if end >= len(source.splitlines()):
                raise NotApplicable(f"{self.name}: the copy's launch ends the file")
            edits.append(Edit(copy.lineno, 0, end + 1, 0, ""))  # its whole lines
            edits += _drop_allocation(tree, p) + _drop_copy_kernel(source, tree, p.copy)
        out = apply_edits(source, edits)
        if into == "output":  # the dropped kernel's and settings' lines leave a run of blank lines
            out = re.sub(r"\n{4,}", "\n\n\n", out)
        out = insert_helper(out, tree_of(out, self.name), HELPER, self.name)
        tree_of(out, self.name)
        return out
