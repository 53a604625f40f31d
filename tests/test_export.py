"""`export`: a file a leaderboard user can submit as it is, that says where it came from; and the
critic's verdicts on kernels that did not compile."""

import ast

import pytest
from _support import cli
from _watch_campaign import smoke_campaign  # noqa: F401  (a session fixture)
from kernel_scientist.blackboard import Outcome, Verdict, open_existing

from kernel_scientist.export import leaderboard_gpu


def test_the_exported_best_kernel_is_a_submittable_file_that_names_its_origin(smoke_campaign, tmp_path):
    out = tmp_path / "submission.py"
    proc = cli("export", "--db", str(smoke_campaign.db), "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    with open_existing(smoke_campaign.db) as board:
        best = min((e for e in board.evaluations() if e.report.outcome == "passed"), key=lambda e: e.report.score_us)
        kernel = board.kernel(best.kernel_id)
        chain = [kernel]
        while chain[-1].parent_id is not None:
            chain.append(board.kernel(chain[-1].parent_id))
        seed_doc = ast.get_docstring(ast.parse(board.kernel(1).source))
    text = out.read_text()
    lines = text.splitlines()
    assert lines[0] == "#!POPCORN leaderboard amd-fp8-mm"
    assert lines[1] == "#!POPCORN gpus MI300"  # from the provenance: a simulated MI300X
    header = "\n".join(lines[2:6])
    assert "campaign 'smoke'" in header and f"Kernel {kernel.id} (evaluated)" in header
    assert f"{best.report.score_us:.1f} us" in header and "(simulated on AMD Instinct MI300X)" in header
    assert "Protocol: simulated AMD Instinct MI300X" in header and "ks-analytic" in header
    assert "Lineage: " + " -> ".join(f"kernel {k.id}" for k in reversed(chain)) in header
    assert len(chain) > 1  # an evolved kernel: its docstring tells its changes, not the seed's story
    doc = ast.get_docstring(ast.parse(text))
    assert "Seed submission" not in doc and doc != seed_doc
    for k in chain[:-1]:  # every change on the way from the seed, the kernel's own included
        assert f"kernel {k.id} (H{k.hypothesis_id}" in doc
    # What it computes is the kernel itself: everything below the docstring is unchanged.
    assert kernel.source.split('"""', 2)[2].rstrip("\n") in text
    # And it passes the evaluator as it is.
    judged = cli("evaluate", str(out))
    assert judged.returncode == 0, judged.stdout + judged.stderr


def test_the_exported_seed_keeps_its_own_docstring(smoke_campaign, tmp_path):
    out = tmp_path / "seed.py"
    proc = cli("export", "--db", str(smoke_campaign.db), "--kernel", "1", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "Seed submission" in ast.get_docstring(ast.parse(out.read_text()))
    assert "# Lineage: kernel 1." in out.read_text()


@pytest.mark.parametrize(
    "device, gpu, noted",
    [
        ("AMD Instinct MI300X (simulated)", "MI300", False),
        ("AMD Instinct MI300X", "MI300", False),
        ("NVIDIA H100 80GB HBM3", "H100", False),
        ("NVIDIA H100 (simulated)", "H100", False),
        ("NVIDIA H200", "H200", True),
    ],
)
def test_the_gpu_line_comes_from_the_device_that_produced_the_score(device, gpu, noted):
    name, note = leaderboard_gpu(device)
    assert name == gpu and bool(note) == noted


async def test_a_kernel_that_did_not_compile_is_a_build_failure_not_a_refutation(tmp_path):
    """The critic's verdict on a kernel that did not compile is build_failed (no evidence about the
    idea); a kernel that compiled and computed a wrong answer is refuted."""
    from kernel_scientist.agents._base import CampaignClock, Context
    from kernel_scientist.agents.critic import Critic
    from kernel_scientist.blackboard import Blackboard, HypothesisState, Scenario
    from test_blackboard import _evaluated_kernel, _hyp

    board = Blackboard(tmp_path / "b.sqlite")
    outcomes = (Outcome.PASSED, Outcome.COMPILE_ERROR, Outcome.WRONG_OUTPUT, Outcome.PASSED)
    kernels = [_evaluated_kernel(board, outcome, source=f"kernel {i}") for i, outcome in enumerate(outcomes)]
    sel = board.add_selection(base_id=kernels[0].id, reference_id=None, reason="", at=0)
    hyps = board.add_hypotheses(sel.id, [_hyp(sel.id, kernels[0].id) for _ in kernels[1:]])
    for hyp, kernel in zip(hyps, kernels[1:]):
        board.update_hypothesis(hyp.id, kernel_id=kernel.id, state=HypothesisState.IMPLEMENTED)
    critic = Critic(
        Context(board=board, scenario=Scenario(), clock=CampaignClock(), seed=1, backend=None, task=None, brain=None),
        "critic",
        0,
    )
    for hyp in critic._unjudged():
        critic.judge(hyp)
    verdicts = [h.verdict for h in board.hypotheses()]
    board.close()
    assert verdicts == [Verdict.BUILD_FAILED, Verdict.REFUTED, Verdict.INCONCLUSIVE]
