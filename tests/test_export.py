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
    # A simulated score is no leaderboard GPU's: no `gpus` line; the one in its place says so and how to choose.
    assert not [line for line in lines if line.startswith("#!POPCORN gpus")]
    assert lines[1].startswith("# Simulated score: the analytic model's prediction for AMD Instinct MI300X")
    assert "`#!POPCORN gpus MI300`" in lines[1] and "--gpus NAME" in lines[1]
    assert "simulated score: no #!POPCORN gpus line" in proc.stdout
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


def test_gpus_routes_a_simulated_score_and_the_file_still_says_simulated(smoke_campaign, tmp_path):
    out = tmp_path / "submission.py"
    proc = cli("export", "--db", str(smoke_campaign.db), "--out", str(out), "--gpus", "H100")
    assert proc.returncode == 0, proc.stderr
    lines = out.read_text().splitlines()
    assert lines[:2] == ["#!POPCORN leaderboard amd-fp8-mm", "#!POPCORN gpus H100"]
    assert lines[2].startswith("# Simulated score: the analytic model's prediction for AMD Instinct MI300X")
    assert "--gpus" in lines[2] and "(simulated on AMD Instinct MI300X)" in "\n".join(lines[3:7])
    assert "(#!POPCORN gpus H100)" in proc.stdout and not proc.stderr


def test_export_never_overwrites_a_file_without_force(smoke_campaign, tmp_path):
    out = tmp_path / "notes.py"
    out.write_text("my own notes\n")
    proc = cli("export", "--db", str(smoke_campaign.db), "--out", str(out))
    assert proc.returncode == 2 and not proc.stdout
    assert proc.stderr.count("\n") == 1 and str(out) in proc.stderr and "--force" in proc.stderr, proc.stderr
    assert out.read_text() == "my own notes\n"
    # A link to a file is refused as the file is, and nothing is written through it.
    link = tmp_path / "link.py"
    link.symlink_to(out)
    assert cli("export", "--db", str(smoke_campaign.db), "--out", str(link)).returncode == 2
    assert out.read_text() == "my own notes\n"
    forced = cli("export", "--db", str(smoke_campaign.db), "--out", str(out), "--force")
    assert forced.returncode == 0, forced.stderr
    assert out.read_text().startswith("#!POPCORN leaderboard amd-fp8-mm\n")


def test_export_refuses_bad_targets_and_names_without_writing(smoke_campaign, tmp_path):
    db = tmp_path / "board.sqlite"
    with open_existing(smoke_campaign.db) as board:
        board.copy_to(db)
    before = db.read_bytes()
    for extra in ((), ("--force",)):  # the blackboard itself, even with --force
        proc = cli("export", "--db", str(db), "--out", str(db), *extra)
        assert proc.returncode == 2 and "is the blackboard --db reads" in proc.stderr, proc.stderr
        assert proc.stderr.count("\n") == 1
    assert db.read_bytes() == before
    out = tmp_path / "submission.py"
    # Only a GPU the leaderboard has: a typo, a list or a second header line is refused, not written.
    for name in ("H300", "H100 A100", "MI300\n#!POPCORN leaderboard other", ""):
        proc = cli("export", "--db", str(db), "--out", str(out), "--gpus", name)
        assert proc.returncode == 2 and "--gpus" in proc.stderr and "'H100'" in proc.stderr, proc.stderr
        assert proc.stderr.count("\n") == 1
    assert not out.exists()


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
