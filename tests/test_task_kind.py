"""What a task computes (``Task.kind``): declared, else read from ref_kernel's syntax; and the
knowledge a task of that kind is shown (digests tagged by kind, retrieval and prompts that follow)."""

from __future__ import annotations

import textwrap
import typing
from pathlib import Path

import pytest
from _support import ROOT
from kernel_scientist.agents.brain import DesignView, KernelView, SelectionView
from kernel_scientist.agents.llm import _prompts
from kernel_scientist.blackboard.config import LLMConfig
from kernel_scientist.evaluator import TaskError, load_task
from kernel_scientist.evaluator._task import TaskKind

from kernel_scientist import knowledge

PROBLEMS = ROOT / "tests" / "problems"
FP8 = ROOT / "evaluator" / "tasks" / "amd_fp8_mm"


def _folder(tmp_path: Path, ref_body: str, meta: str = "") -> Path:
    """A folder whose reference's ref_kernel is ``ref_body`` (over ``data``), with ``meta`` as its
    kernel_scientist: block."""
    folder = tmp_path / "prob"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "task.py").write_text("input_t = object\noutput_t = object\n")
    reference = (
        "import torch\nimport torch.nn.functional as F\n\n\n"
        "def generate_input(size, seed):\n    x = torch.randn(size, size)\n    return x / x.sum()\n\n\n"
        f"{textwrap.dedent(ref_body)}\n\n"
        "def check_implementation(data, output):\n    return True, ''\n"
    )
    (folder / "reference.py").write_text(reference)
    yml = "tests:\n  - {size: 8, seed: 1}\nbenchmarks:\n  - {size: 8, seed: 1}\n  - {size: 256, seed: 2}\n"
    (folder / "task.yml").write_text(yml + (f"kernel_scientist:\n{textwrap.indent(meta, '  ')}" if meta else ""))
    return folder


def test_the_bundled_folders_are_of_their_kinds():
    assert load_task(FP8).kind() == "matrix product"
    assert load_task(PROBLEMS / "vecadd").kind() == "elementwise"
    assert load_task(PROBLEMS / "rowstats").kind() == "reduction"  # sum and amax along dim 1
    assert load_task(PROBLEMS / "stencil").kind() == "elementwise"  # pad, slices, arithmetic


@pytest.mark.parametrize(
    "body, kind",
    [
        ("def ref_kernel(data):\n    return torch.cumsum(data, dim=0)", "scan"),
        ("def ref_kernel(data):\n    return data.cumprod(0)", "scan"),
        ("def ref_kernel(data):\n    return data.sum(dim=1)", "reduction"),
        ("def ref_kernel(data):\n    return data.sum()", "reduction"),
        ("def ref_kernel(data):\n    return torch.amax(data, dim=-1)", "reduction"),
        ("def ref_kernel(data):\n    return F.softmax(data, dim=-1)", "reduction"),
        ("def ref_kernel(data):\n    return data / data.norm(dim=1, keepdim=True)", "reduction"),
        ("def ref_kernel(data):\n    return torch.max(data, -1).values", "reduction"),
        ("def ref_kernel(data):\n    return data.max(dim=0)", "reduction"),
        ("def ref_kernel(data):\n    return torch.max(data, data.T)", "elementwise"),
        ("def ref_kernel(data):\n    return data.min(data * 2)", "elementwise"),
        ("def ref_kernel(data):\n    return torch.maximum(data, torch.zeros_like(data))", "elementwise"),
        ("def ref_kernel(data):\n    return data @ data", "matrix product"),
        ("def ref_kernel(data):\n    return torch.mm(data, data)", "matrix product"),
        ("def ref_kernel(data):\n    return F.linear(data, data)", "matrix product"),
        ("def ref_kernel(data):\n    return torch.softmax(data @ data.T, -1) @ data", "matrix product"),
        ("def ref_kernel(data):\n    return torch.sort(data, dim=-1).values", "sort"),
        ("def ref_kernel(data):\n    return torch.bincount(data.flatten().long())", "reduction"),
        ("def ref_kernel(data):\n    return sum([data, data]) * 2", "elementwise"),  # Python's sum
        ("def ref_kernel(data):\n    return (data * 0.5).clamp(0, 1).to(torch.float16)", "elementwise"),
        ("def _scan(x):\n    return x.cumsum(0)\n\n\ndef ref_kernel(data):\n    return _scan(data) + 1", "scan"),
        ("ref_kernel = None", "elementwise"),  # nothing to read: the plainest kind
    ],
)
def test_the_kind_is_read_from_ref_kernel(tmp_path, body, kind):
    """Only ref_kernel and the reference's own functions it calls count: generate_input's
    ``x.sum()`` does not make every folder a reduction."""
    assert load_task(_folder(tmp_path, body)).kind() == kind


def test_a_reduction_over_fewer_elements_than_a_warp_is_elementwise(tmp_path):
    """Read on meta tensors at the largest benchmark: a grayscale conversion sums three channels
    per pixel; the same sum over rows of 256 is a reduction."""
    folder = _folder(tmp_path, "def ref_kernel(data):\n    return data.sum(dim=-1)")
    (folder / "reference.py").write_text(
        "import torch\n\n\n"
        "def generate_input(size, seed):\n"
        "    return torch.rand(size, size, 3, device='cuda'), torch.empty(size, size, device='cuda')\n\n\n"
        "def ref_kernel(data):\n    rgb, out = data\n"
        "    w = torch.tensor([0.2989, 0.5870, 0.1140], device=rgb.device)\n"
        "    out[...] = torch.sum(rgb * w, dim=-1)\n    return out\n\n\n"
        "def check_implementation(data, output):\n    return True, ''\n"
    )
    task = load_task(folder)
    assert task.kind() == "elementwise" and task.io_bytes(task.benchmarks[-1]).widest_reduction == 3
    assert (
        load_task(_folder(tmp_path / "rows", "def ref_kernel(data):\n    return data.sum(dim=1)")).kind() == "reduction"
    )


def test_a_declared_kind_wins_and_a_gemm_folder_is_a_matrix_product(tmp_path):
    body = "def ref_kernel(data):\n    return data @ data"
    assert load_task(_folder(tmp_path, body, 'kind: "scan"\n')).kind() == "scan"
    elementwise = "def ref_kernel(data):\n    return data + 1"
    assert load_task(_folder(tmp_path, elementwise, "gemm: true\n")).kind() == "matrix product"


def test_an_unknown_declared_kind_is_one_clear_error(tmp_path):
    folder = _folder(tmp_path, "def ref_kernel(data):\n    return data", 'kind: "stencil"\n')
    with pytest.raises(TaskError) as err:
        load_task(folder)
    assert "task.yml" in str(err.value) and "kind" in str(err.value) and "\n" not in str(err.value)


def test_unparsable_reference_source_reads_as_elementwise(tmp_path):
    folder = _folder(tmp_path, "def ref_kernel(data):\n    return data")
    (folder / "reference.py").write_text("def ref_kernel(data:\n")
    assert load_task(folder).kind() == "elementwise"


# ---- the knowledge a kind is shown ----------------------------------------------------------------
def test_the_digests_name_kinds_the_evaluator_knows_and_cover_every_kind():
    assert knowledge.KINDS == typing.get_args(TaskKind)
    docs = knowledge.documents()
    assert all(set(d.kinds) <= set(knowledge.KINDS) and d.kinds for d in docs)
    for kind in knowledge.KINDS:
        assert knowledge.documents(kind), f"no digest serves {kind}"
    assert all(not d.text.startswith("<!--") for d in docs)  # the tag is metadata, not a passage


def test_gemm_digests_only_for_matrix_products():
    gemm = {d.name for d in knowledge.documents("matrix product")}
    assert {"gemm-techniques", "mi300x-architecture", "fp8-block-scaling"} <= gemm
    for kind in ("elementwise", "reduction", "scan", "sort"):
        names = {d.name for d in knowledge.documents(kind)}
        assert not names & gemm, kind
    assert "memory-bound-kernels" in {d.name for d in knowledge.documents("elementwise")}
    assert "reductions" in {d.name for d in knowledge.documents("reduction")}
    assert "scans" in {d.name for d in knowledge.documents("scan")}


def test_retrieval_filters_by_kind():
    query = "tile block size split-k occupancy grid " + knowledge.kind_terms("elementwise")
    passages = knowledge.retrieve(query, [], 6, kind="elementwise")
    assert passages and all(p.source.startswith("doc:memory-bound-kernels#") for p in passages)
    scans = knowledge.retrieve("prefix sum " + knowledge.kind_terms("scan"), [], 3, kind="scan")
    assert any("look-back" in p.title for p in scans)


def _design(kind: str | None) -> str:
    seed = (PROBLEMS / "vecadd" / "submission.py").read_text()
    kv = KernelView(id=1, parent_id=None, author="seed", summary="seed", score_us=30.0, shape_us=[30.0])
    view = DesignView(
        base=kv,
        base_source=seed,
        reference=None,
        reference_source=None,
        trials=[],
        findings=[],
        written=[],
        avenues=10,
        plans=5,
        choose=3,
    )
    return _prompts.design(view, LLMConfig(), kind=kind)


def test_the_design_prompt_quotes_the_digests_of_the_tasks_kind():
    elementwise = _design("elementwise")
    assert "[Memory-bound kernels" in elementwise
    assert "MI300X" not in elementwise and "fp8" not in elementwise.lower().split("retrieved knowledge")[1]
    assert "[GEMM optimisation" in _design("matrix product") or "[MI300X" in _design("matrix product")


def test_the_select_prompt_names_shapes_by_the_folders_arguments():
    kv = KernelView(id=1, parent_id=None, author="seed", summary="seed", score_us=30.0, shape_us=[30.0])
    named = _prompts.select(SelectionView(kernels=[kv], exhausted=[], shapes=["size=1048576"]), LLMConfig())
    assert "Ranked shapes (generate_input's arguments), in the column order" in named and "m x n x k" not in named
    gemm = _prompts.select(SelectionView(kernels=[kv], exhausted=[], shapes=["1024x576x7168"]), LLMConfig())
    assert "Ranked shapes (m x n x k), in the column order" in gemm
