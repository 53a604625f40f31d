"""library_mm: the library matrix product Inductor keeps (``torch.mm(a, b, out=buf)``) made a
tiled Triton GEMM of the submission (knowledge/techniques/any_kernel/library_mm.py).

The kernel rewritten is Inductor's own: its CUDA lowering of GPU MODE's pmpp_v2/matmul_py seed,
recorded on an H100 (tests/fixtures_any_kernel/matmul/submission.py); in the campaign, what
Inductor writes on this machine from the same seed. Every verdict is the folder's own check, with
the campaign's policy on (no torch matmul may do the task's work), on shapes that are multiples
of no tile size.
"""

from __future__ import annotations

import sys

import anyio
import pytest
from _support import ROOT
from kernel_scientist.blackboard.records import Outcome
from kernel_scientist.evaluator import load_task, rule_verdict
from kernel_scientist.evaluator.backends import SimulatedBackend
from kernel_scientist.knowledge import NotApplicable

from kernel_scientist import knowledge

FOLDER = ROOT / "tests" / "fixtures_any_kernel" / "matmul"
LOWERED = (FOLDER / "submission.py").read_text()
MM = knowledge.technique("library_mm")


def _evaluate(source: str):
    with SimulatedBackend(load_task(FOLDER), device="h200", noise=0.0, timeout_s=120, own_kernel=True) as backend:
        return anyio.run(lambda: backend.evaluate(source, submission_id=1, secret_seed=5), backend="trio")


def test_both_forms_are_offered_on_inductors_lowering_the_output_one_first():
    assert rule_verdict(LOWERED, own_kernel=True) is not None  # torch.mm: no kernel of the campaign may keep it
    assert [v.params for v in MM.variants(LOWERED)] == [{"into": "output"}, {"into": "buffer"}]
    assert MM.variants(LOWERED)[0].label == "torch.mm -> Triton GEMM straight into arg5_1"


@pytest.mark.parametrize("into", ["output", "buffer"])
def test_each_form_passes_the_folders_check_under_the_campaigns_policy(into):
    source = MM.rewrite(LOWERED, {"into": into})
    assert "torch.mm(" not in source and rule_verdict(source, own_kernel=True) is None
    assert ("triton_poi_fused_copy__0[" in source) == (into == "buffer")  # the copy's launch goes,
    # and with it the kernel, its settings and its size: nothing a later technique could tune in vain
    for left in ("def triton_poi_fused_copy__0", "XBLOCK_0", "triton_poi_fused_copy__0_xnumel", "Launch settings"):
        assert (left in source) == (into == "buffer"), left
    assert ("buf0 = torch.empty_strided" in source) == (into == "buffer")  # and its buffer
    report = _evaluate(source)
    assert report.outcome is Outcome.PASSED, report.reason
    assert report.score_us is not None and report.compile_stats == []
    with pytest.raises(NotApplicable, match="already a kernel of the file"):
        MM.variants(source) or MM.apply(source, {"into": into})


def test_a_copy_that_changes_the_values_is_not_folded_into_the_product():
    scaled = LOWERED.replace("tl.store(out_ptr0 + x0, tmp0, xmask)", "tl.store(out_ptr0 + x0, tmp0 * 2, xmask)")
    assert scaled != LOWERED
    assert [v.params for v in MM.variants(scaled)] == [{"into": "buffer"}]
    with pytest.raises(NotApplicable, match="no copy of buf0 into the output"):
        MM.apply(scaled, {"into": "output"})


@pytest.mark.parametrize(
    ("source", "why"),
    [
        (LOWERED.replace("torch.mm(arg2_1, arg4_1, out=buf0)", "buf0.copy_(arg2_1)"), "no library matrix product"),
        (
            LOWERED.replace(
                "torch.mm(arg2_1, arg4_1, out=buf0)",
                "torch.mm(arg2_1, arg4_1, out=buf0)\n    torch.mm(arg2_1, arg4_1, out=buf0)",
            ),
            "2 library matrix products",
        ),
        (
            LOWERED.replace("torch.mm(arg2_1, arg4_1, out=buf0)", "torch.mm(arg2_1.t(), arg4_1, out=buf0)"),
            "plain names",
        ),
    ],
    ids=["none", "two", "expression"],
)
def test_what_it_cannot_rewrite_it_refuses_with_the_reason(source, why):
    with pytest.raises(NotApplicable, match=why):
        MM.forms(source)
    assert MM.variants(source) == []


def test_a_campaign_from_the_pytorch_matmul_seed_gets_a_triton_product_of_its_own(tmp_path):
    """The seed (a @ b) and its lowering (torch.mm kept) are evaluated as the campaign's baseline;
    library_mm then gives the first kernel the policy lets through, and it passes."""
    import subprocess

    from kernel_scientist.blackboard import open_existing

    scenario = tmp_path / "mm.toml"
    scenario.write_text(
        f'[campaign]\nname = "mm"\ntask = "{FOLDER}"\nseed_file = "seed.py"\nhours = 1.0\n\n'
        '[agents]\nbrain = "offline"\n\n[evaluator]\nbackend = "simulated"\ndevice = "h200"\n'
    )
    db = tmp_path / "mm.sqlite"
    cmd = [sys.executable, "-m", "kernel_scientist", "run", str(scenario), "--db", str(db), "--quiet"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=900, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    with open_existing(db) as board:
        hypotheses = {h.id: h for h in board.hypotheses()}
        kernels = {k.id: k for k in board.kernels()}
        evals = {e.kernel_id: e for e in board.evaluations()}
    taken = [k for k in kernels.values() if k.hypothesis_id and hypotheses[k.hypothesis_id].technique == "library_mm"]
    assert taken, [h.technique for h in hypotheses.values()]
    for kernel in taken:
        assert rule_verdict(kernel.source, own_kernel=True) is None
    assert any(k.id in evals and evals[k.id].report.passed() for k in taken)
