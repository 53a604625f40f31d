"""An honest end: a campaign with nothing left to try ends then, says why once, and exits 0.

Each campaign runs as the real command in a subprocess. A plain PyTorch seed (the vecadd test
folder's own correct torch solution as ``campaign.seed_file``) gives the offline catalogue, whose
techniques rewrite Triton kernels, nothing to work on; its scenario spells out every setting that
premise rests on (the offline brain, the simulated backend, and no lowering of the seed by
Inductor, which would give the catalogue Triton: tests/test_lowering.py). The end itself does not rest on
PyTorch seeds: a Triton seed that fails leaves nothing to build on, and a scripted language
model that plans once and then answers every design with no plans runs out on the FP8 Triton seed
with work still in flight, which the campaign must wait for (its new kernels are new bases) before
it ends. A campaign that still has work (the smoke scenario) runs to its deadline as before.
"""

import json
import shutil

from _support import ROOT, SCENARIOS, cli
from kernel_scientist.blackboard import SelectionState, open_existing
from llm_server import ScriptedServer

VECADD = ROOT / "tests" / "problems" / "vecadd"


def _scenario(tmp_path, seed_file, hours=2.0):
    path = tmp_path / "torchseed.toml"
    path.write_text(
        f"""[campaign]
name = "torchseed"
task = "{VECADD}"
seed_file = "{seed_file}"
lower_seed = false
seed = 1
hours = {hours}

[agents]
brain = "offline"

[evaluator]
backend = "simulated"
device = "h200"
"""
    )
    return path


def _closing(db):
    with open_existing(db) as board:
        messages = board.messages()
    assert messages[-1].kind == "closing", messages[-1]
    return messages, messages[-1]


def test_a_torch_seed_ends_the_campaign_early_with_the_reason_once(tmp_path):
    db = tmp_path / "c.sqlite"
    result = cli("run", str(_scenario(tmp_path, "solutions/correct/torch_add.py")), "--db", str(db))
    assert result.returncode == 0, result.stderr[-3000:]
    messages, closing = _closing(db)
    assert closing.at < 0.5 * 3600  # the deadline is 2 h
    reason = (
        "nothing left to try: the offline catalogue has no technique left that makes a new kernel from "
        "kernel 1 (it has no @triton.jit kernel, and the catalogue's techniques rewrite Triton kernels)"
    )
    assert closing.agent == "runner"
    assert (
        closing.text
        == f"campaign over at {closing.at / 3600:.2f} h, before its deadline of 2 h: {reason}; 1 evaluation"
    )
    # Said once: one message, one line of the conversation on stderr, and no deadline line.
    assert [m.text for m in messages if "nothing left to try" in m.text] == [closing.text]
    assert sum("nothing left to try" in line for line in result.stderr.splitlines()) == 1
    assert not any(m.text.startswith("deadline ") for m in messages)
    exhausted = [m for m in messages if m.agent == "theorist" and "marking it exhausted" in m.text]
    assert [m.text for m in exhausted] == [
        "selection 1: no plan for kernel 1; marking it exhausted (the archivist will not pick it again)"
    ]
    assert 0 <= closing.at - exhausted[0].at < 0.1  # it ended then (at the runner's next slot)

    # The blackboard is a closed campaign: status reads it, and resume (even with more hours) has
    # nothing to continue and writes nothing.
    status = json.loads(cli("status", "--db", str(db), "--json").stdout)
    assert status["best"]["kernel_id"] == 1
    for extra in ((), ("--set", "campaign.hours=4")):
        again = cli("resume", "--db", str(db), *extra)
        assert again.returncode == 0 and "nothing to resume" in again.stdout, again.stdout + again.stderr
        assert f"ended at 00:{int(closing.at) // 60 % 60:02d}" in again.stdout
        assert "nothing left to try" in again.stdout
        assert _closing(db)[0] == messages


def test_a_failed_seed_leaves_nothing_to_build_on(tmp_path):
    """A Triton seed whose grid rounds down: wrong output, so the archivist has no base at all."""
    db = tmp_path / "c.sqlite"
    result = cli("run", str(_scenario(tmp_path, "solutions/wrong/drops_tail.py")), "--db", str(db), "--quiet")
    assert result.returncode == 0, result.stderr[-3000:]
    messages, closing = _closing(db)
    assert closing.at < 0.5 * 3600
    assert ": nothing to build on: no kernel passed an evaluation (the seed, kernel 1, wrong_output: " in closing.text
    assert closing.text.endswith("; 1 evaluation")
    assert [m for m in messages if "nothing to build on" in m.text] == [closing]
    again = cli("resume", "--db", str(db))
    assert again.returncode == 0 and "nothing to resume" in again.stdout, again.stdout + again.stderr
    assert "nothing to build on" in again.stdout and _closing(db)[0] == messages


def test_an_llm_brain_with_nothing_left_ends_it_after_the_work_in_flight(tmp_path):
    """The model plans for the first selection only. The second selection (kernel 1 again, while
    the first's three plans are still being written and evaluated) exhausts kernel 1, but the
    campaign goes on: the plans' kernels are evaluated, and each that passed becomes a base that
    the model is asked about. Only when every kernel that passed is exhausted and nothing is left
    in the pipeline does it end, saying so once, naming the model."""
    db = tmp_path / "llm.sqlite"
    with ScriptedServer() as server:
        server.script.design_plans = 1
        overrides = (
            "agents.brain=openai-compatible",
            f"llm.base_url={server.url}/v1",
            "llm.model=local-coder",
            "llm.prices.input=0",
            "llm.prices.output=0",
        )
        args = [a for o in overrides for a in ("--set", o)]
        result = cli("run", str(SCENARIOS / "smoke.toml"), "--db", str(db), "--quiet", *args)
    assert result.returncode == 0, result.stderr[-3000:]
    messages, closing = _closing(db)
    with open_existing(db) as board:
        evals = board.evaluations()
        selections = board.selections()
        kernels = board.kernels()
    passed = sorted({e.kernel_id for e in evals if e.report.passed_score() is not None})
    exhausted = sorted({s.base_id for s in selections if s.state == SelectionState.EXHAUSTED})
    assert exhausted == passed and len(passed) >= 2  # new kernels were new bases, each tried in turn
    first_exhausted = next(m.at for m in messages if "marking it exhausted" in m.text)
    assert any(e.finished_at > first_exhausted for e in evals)  # it did not end with work in flight
    assert closing.at >= max(e.finished_at for e in evals) and closing.at < 3 * 3600
    assert all(k.state.value in ("evaluated", "failed", "rejected") for k in kernels)
    which = ", ".join(map(str, passed))
    assert closing.text.startswith(f"campaign over at {closing.at / 3600:.2f} h, before its deadline of 3 h: ")
    assert f"nothing left to try: the openai-compatible model local-coder proposed no plan for kernels {which}; " in (
        closing.text
    )
    assert [m for m in messages if "nothing left to try" in m.text] == [closing]


def test_a_campaign_with_work_left_runs_to_its_deadline(tmp_path):
    db = tmp_path / "smoke.sqlite"
    result = cli("run", str(SCENARIOS / "smoke.toml"), "--db", str(db), "--quiet", "--set", "campaign.hours=1")
    assert result.returncode == 0, result.stderr[-3000:]
    messages, closing = _closing(db)
    assert any(m.text.startswith("deadline 1 h reached: nothing new starts") for m in messages)
    assert closing.text.startswith(("campaign over at its deadline, 1 h", "campaign over: deadline 1 h"))
    assert not any("nothing left to try" in m.text for m in messages)


def test_a_seed_that_passes_untimed_is_named_so(tmp_path):
    """A seed the simulated device cannot time (an op with no meta kernel: GPU MODE's histogram
    seed calls torch.bincount) passes untimed; the end says no kernel has a time, not that none
    passed."""
    folder = tmp_path / "vecadd"
    shutil.copytree(VECADD, folder)
    for shared in VECADD.parent.iterdir():  # what its task.yml names with ../
        if shared.is_file():
            shutil.copy(shared, tmp_path)
    seed = (folder / "solutions" / "correct" / "torch_add.py").read_text()
    body = "    torch.bincount(torch.zeros(1, dtype=torch.long, device=a.device))  # no meta kernel\n"
    untimed = "import torch\n" + seed.replace("    return ", body + "    return ", 1)
    assert untimed != seed
    (folder / "untimed.py").write_text(untimed)
    scenario = _scenario(tmp_path, "untimed.py").read_text().replace(str(VECADD), str(folder))
    (tmp_path / "untimed.toml").write_text(scenario)
    db = tmp_path / "c.sqlite"
    result = cli("run", str(tmp_path / "untimed.toml"), "--db", str(db), "--quiet")
    assert result.returncode == 0, result.stderr[-3000:]
    _, closing = _closing(db)
    assert "nothing to build on: no kernel passed an evaluation with a time (the seed, kernel 1, passed untimed: " in (
        closing.text
    ), closing.text
