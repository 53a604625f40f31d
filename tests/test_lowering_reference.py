"""A seed that fails its check: the campaign starts from the folder's reference lowered by Inductor.

The folder is tests/fixtures_any_kernel/vectorsum (GPU MODE's vectorsum_py, small): its seed is a
Triton kernel whose grid rounds down, its reference plain PyTorch inside the harness's
DeterministicContext. Campaigns and `kernel-scientist lower --reference` run as the real command
in subprocesses; Inductor really runs (code for Triton's CPU backend on this machine).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import sqlite3
import time
from pathlib import Path

import pytest
from _support import ROOT, cli, popen
from kernel_scientist.blackboard import LOWERED_AUTHOR, Blackboard, open_existing
from kernel_scientist.knowledge.lowering import LoweringError, is_pytorch_only, reference_submission

FOLDER = ROOT / "tests" / "fixtures_any_kernel" / "vectorsum"
FAILED = "submission.py failed its check (wrong_output)"


def _scenario(where: Path, folder: Path = FOLDER, hours: float = 0.12) -> Path:
    scenario = where / "vs.toml"
    scenario.write_text(
        f'[campaign]\nname = "vs"\ntask = "{folder}"\nhours = {hours}\n\n'
        '[agents]\nbrain = "offline"\nengineers = 2\nmax_pending = 3\n\n'
        "[agents.latency]\narchivist = 0\ntheorist = 0\nengineer = 0\ncritic = 0\n\n"
        '[evaluator]\nbackend = "simulated"\ndevice = "h200"\nrate_per_hour = 3600\nin_flight = 1\n'
    )
    return scenario


def _runner_lines(board: Blackboard) -> list[str]:
    return [m.text for m in board.messages(agent="runner") if "reference.py" in m.text]


@pytest.fixture(scope="module")
def campaign(tmp_path_factory):
    """One simulated campaign from the failing seed (one lowering, shared by the tests below)."""
    where = tmp_path_factory.mktemp("vectorsum")
    db = where / "vs.sqlite"
    done = cli("run", str(_scenario(where)), "--db", str(db), "--quiet", cwd=where, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return db


def test_a_failed_seed_gives_way_to_the_references_lowering(campaign):
    with open_existing(campaign) as board:
        kernels = board.kernels()
        evals = {e.kernel_id: e for e in board.evaluations()}
        lines = _runner_lines(board)
        reviews = [m.text for m in board.messages(agent="critic") if m.text.startswith("kernel 2 approved")]
        closing = board.messages()[-1]
    seed, lowered = kernels[:2]
    assert not evals[seed.id].report.passed()
    # The reference, lowered once the seed had failed: a baseline (parent: the seed), said in one line.
    assert lowered.author == LOWERED_AUTHOR and lowered.parent_id == seed.id and lowered.is_baseline()
    assert lowered.summary.startswith("Lowered by Inductor from reference.py (torch ")
    assert lowered.created_at >= evals[seed.id].finished_at
    assert "DeterministicContext" not in lowered.source and "utils" not in lowered.source
    assert lines == [
        f"{FAILED}: kernel 2 is the folder's reference.py lowered by Inductor (1 Triton kernel), "
        f"the campaign's start in its place; {lowered.summary}"
    ]
    assert len(reviews) == 1 and "the folder's reference lowered by Inductor" in reviews[0]
    # The critic queued it, the evaluator evaluated it (it passes), and the offline brain built on it.
    assert evals[lowered.id].report.passed_score() is not None
    children = [k for k in kernels if k.parent_id == lowered.id and k.id in evals]
    assert children and any(evals[k.id].report.passed() for k in children)
    assert closing.kind == "closing" and "nothing to build on" not in closing.text


def test_lower_reference_writes_what_the_campaign_lowered(campaign, tmp_path):
    out = tmp_path / "ref.py"
    done = cli("lower", str(FOLDER), "--reference", "--out", str(out), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stderr.startswith(f"lowered reference.py into {out}: 1 Triton kernel(s) (triton_")
    with open_existing(campaign) as board:
        assert out.read_text() == board.kernel(2).source  # one function for both


def _copy(folder: Path, where: Path) -> Path:
    target = where / folder.name
    shutil.copytree(folder, target)
    return target


def test_a_reference_that_cannot_be_lowered_ends_the_campaign_with_its_reason(tmp_path):
    folder = _copy(FOLDER, tmp_path)
    with (folder / "utils.py").open("a") as f:
        f.write("\n\ndef in_float64(x):\n    return x.to(torch.float64)\n")
    reference = folder / "reference.py"
    reference.write_text(
        reference.read_text()
        .replace("DeterministicContext, make_match_reference", "DeterministicContext, in_float64, make_match_reference")
        .replace("data.to(torch.float64)", "in_float64(data)")
    )
    db = tmp_path / "vs.sqlite"
    done = cli("run", str(_scenario(tmp_path, folder)), "--db", str(db), "--quiet", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    with open_existing(db) as board:
        authors = [k.author for k in board.kernels()]
        lines = _runner_lines(board)
        closing = board.messages()[-1]
        count = len(board.evaluations())
    assert authors == ["seed"] and count == 1
    assert lines == [
        f"{FAILED} and the folder's reference.py was not lowered in its place: "
        "reference.py's ref_kernel uses in_float64 of the harness's utils"
    ]
    assert closing.text.startswith("campaign over at 0.0")
    assert ": nothing to build on: no kernel passed an evaluation (the seed, kernel 1, wrong_output: " in closing.text


def test_a_seed_the_critic_sends_back_gives_way_too(tmp_path):
    folder = _copy(FOLDER, tmp_path)
    (folder / "peek.py").write_text(
        "import sys\n\n\ndef custom_kernel(data):\n    sys._getframe(1)\n    return data[0].sum()\n"
    )
    scenario = _scenario(tmp_path, folder, hours=0.02)
    scenario.write_text(scenario.read_text().replace('name = "vs"', 'name = "vs"\nseed_file = "peek.py"'))
    db = tmp_path / "vs.sqlite"
    done = cli("run", str(scenario), "--db", str(db), "--quiet", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    with open_existing(db) as board:
        lines = _runner_lines(board)
        evaluations = [(e.kernel_id, e.report.passed()) for e in board.evaluations()]
    assert len(lines) == 1 and lines[0].startswith("peek.py was sent back by the critic: kernel 2 is the folder's ")
    assert evaluations[0] == (2, True)


def test_a_campaign_killed_while_lowering_the_reference_lowers_it_once(tmp_path):
    """kill -9 while Inductor works on the reference (the seed's failure on file, no lowering yet):
    resume lowers it; a later resume, with more hours, does not lower again."""
    db = tmp_path / "vs.sqlite"
    proc = popen("run", str(_scenario(tmp_path, hours=0.05)), "--db", str(db), "--quiet", cwd=tmp_path)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:  # until the seed's evaluation is on file
            if db.exists():
                with contextlib.suppress(sqlite3.Error), contextlib.closing(sqlite3.connect(db)) as con:
                    if con.execute("SELECT count(*) FROM evaluation").fetchone()[0]:
                        break
            time.sleep(0.05)
        assert proc.poll() is None, "the campaign ended before the kill"
        os.kill(proc.pid, signal.SIGKILL)  # Inductor takes seconds: it is at work now
    finally:
        proc.communicate(timeout=30)
    with open_existing(db) as board:
        assert [k.author for k in board.kernels()] == ["seed"] and _runner_lines(board) == []
    for runs, extra in enumerate(((), ("--set", "campaign.hours=0.12")), start=1):
        done = cli("resume", "--db", str(db), "--quiet", *extra, cwd=tmp_path)
        assert done.returncode == 0, done.stderr[-3000:]
        with open_existing(db) as board:
            lowered = [k for k in board.kernels() if k.author == LOWERED_AUTHOR]
            lines = _runner_lines(board)
            resumed = [m for m in board.messages(agent="runner") if m.text.startswith("resumed at")]
            evaluated = [board.evaluation_for(k.id) is not None for k in lowered]
        assert len(resumed) == runs
        assert len(lowered) == 1 and len(lines) == 1 and lines[0].startswith(f"{FAILED}: kernel 2 is ")
        assert evaluated == [True]


# ---- `kernel-scientist lower --reference`: bad input ------------------------------------------
def test_bad_reference_input_is_one_line_and_writes_nothing(tmp_path):
    no_ref = _copy(FOLDER, tmp_path / "a")
    (no_ref / "reference.py").write_text((no_ref / "reference.py").read_text().replace("ref_kernel", "reference"))
    triton_ref = _copy(FOLDER, tmp_path / "b")
    (triton_ref / "reference.py").write_text("import triton\n" + (triton_ref / "reference.py").read_text())
    out = tmp_path / "out.py"
    cases = {
        (str(FOLDER), "--reference", "--seed", str(FOLDER / "submission.py")): (
            "argument --seed: not allowed with argument --reference"
        ),
        (str(no_ref), "--reference"): f"{no_ref}: reference.py defines no ref_kernel; nothing to lower",
        (str(triton_ref), "--reference"): "reference.py has a kernel of its own (Triton or an extension)",
        (str(tmp_path / "nofolder"), "--reference"): "nofolder",
    }
    procs = {args: popen("lower", *args, "--out", str(out)) for args in cases}
    for args, proc in procs.items():
        stdout, err = proc.communicate(timeout=120)
        assert proc.returncode == 2 and stdout == "", (args, err)
        assert err.count("\n") == 1 and cases[args] in err and "Traceback" not in err, err
    assert not out.exists()


# ---- reference_submission ---------------------------------------------------------------------
REFERENCE = """import torch
from task import input_t, output_t
from utils import DeterministicContext, make_match_reference

SCALE = 2.0


def _scaled(x):
    return x * SCALE


def ref_kernel(data: input_t) -> output_t:
    with DeterministicContext():
        x, _ = data
        return _scaled(x).sum(), torch.are_deterministic_algorithms_enabled()


def generate_input(size: int, seed: int) -> input_t:
    return torch.ones(size), torch.empty(1)


check_implementation = make_match_reference(ref_kernel)
"""


def _run(source: str) -> tuple[float, bool]:
    """``custom_kernel`` of ``source`` on four ones (``task`` stood in for: the folder's types)."""
    import sys
    import types

    import torch

    task = types.ModuleType("task")
    vars(task).update(input_t=object, output_t=object)
    sys.modules["task"] = task
    try:
        namespace: dict = {}
        exec(compile(source, "submission.py", "exec"), namespace)
        total, deterministic = namespace["custom_kernel"]((torch.ones(4), torch.empty(1)))
    finally:
        del sys.modules["task"]
    assert not torch.are_deterministic_algorithms_enabled()  # put back after the call
    return float(total), bool(deterministic)


@pytest.mark.parametrize("deterministic", [True, False])
def test_a_reference_becomes_a_submission(deterministic):
    source = reference_submission(REFERENCE, deterministic=deterministic)
    assert is_pytorch_only(source) and source.rstrip().endswith("custom_kernel = ref_kernel")
    # The input generator, the check and the harness's utils are gone; the module's constants and
    # helpers stay.
    assert "generate_input" not in source and "check_implementation" not in source
    assert "utils" not in source and "make_match_reference" not in source
    assert "SCALE = 2.0" in source and "def _scaled(x)" in source
    # The harness's deterministic settings restated, or (for a lowering) a no-op.
    assert ("DeterministicContext = contextlib.nullcontext" in source) is not deterministic
    assert _run(source) == (8.0, deterministic)


def test_a_reference_that_needs_more_of_the_harness_is_refused_in_one_line():
    needs = REFERENCE.replace("make_match_reference\n", "make_match_reference, verbose_sum\n").replace(
        "_scaled(x).sum()", "verbose_sum(_scaled(x))"
    )
    cases = {
        needs: "reference.py's ref_kernel uses verbose_sum of the harness's utils",
        REFERENCE.replace("def ref_kernel", "def reference"): "reference.py defines no ref_kernel",
        REFERENCE.replace("SCALE = 2.0", "SCALE = = 2.0"): "reference.py does not parse: invalid syntax (line 5)",
    }
    for text, why in cases.items():
        with pytest.raises(LoweringError) as caught:
            reference_submission(text)
        assert str(caught.value) == why and "\n" not in why
