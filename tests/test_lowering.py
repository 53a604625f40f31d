"""A PyTorch seed lowered by Inductor into a Triton submission, through `kernel-scientist lower`.

Inductor really runs (a process of its own, code generation for Triton's CPU backend on this
machine); the lowered submissions are then judged by the evaluator like any other kernel. The
three PyTorch seeds cover the kinds the lowering must handle: elementwise (vecadd), a reduction with
two outputs (rowstats) and a scan (rowscan, whose folder seed is plain PyTorch).
"""

from __future__ import annotations

import ast
import contextlib
import gzip
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest
from kernel_scientist.blackboard.records import Outcome
from kernel_scientist.evaluator import LocalBackend, SimulatedBackend, load_task
from kernel_scientist.evaluator.sandbox import InductorCapture

from kernel_scientist.lower import from_capture

ROOT = Path(__file__).resolve().parents[1]
PROBLEMS = ROOT / "tests" / "problems"

SEEDS = {  # folder: its PyTorch seed
    "vecadd": PROBLEMS / "vecadd" / "solutions" / "correct" / "torch_add.py",
    "rowstats": PROBLEMS / "rowstats" / "solutions" / "correct" / "torch_rows.py",
    "rowscan": PROBLEMS / "rowscan" / "submission.py",
}


def _lower(*args: str | Path, cwd: Path) -> subprocess.Popen[str]:
    cmd = [sys.executable, "-m", "kernel_scientist", "lower", *map(str, args)]
    return subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _finish(proc: subprocess.Popen[str]) -> tuple[int, str, str]:
    out, err = proc.communicate(timeout=600)
    return proc.returncode, out, err


@pytest.fixture(scope="module")
def lowered(tmp_path_factory):
    """Each seed lowered into a file (the three Inductor processes at once)."""
    where = tmp_path_factory.mktemp("lowered")
    procs = {
        name: _lower(PROBLEMS / name, "--seed", seed, "--out", where / f"{name}.py", cwd=where)
        for name, seed in SEEDS.items()
    }
    out = {}
    for name, proc in procs.items():
        code, _, err = _finish(proc)
        assert code == 0, err
        out[name] = ((where / f"{name}.py").read_text(), err)
    return out


@pytest.mark.parametrize("name", sorted(SEEDS))
def test_the_lowered_submission_stands_alone(lowered, name):
    source, err = lowered[name]
    seed = SEEDS[name].name
    assert f"lowered {seed} into " in err and "library calls kept: none" in err
    assert source.startswith(f'"""Lowered by Inductor from {seed} (torch ')
    tree = ast.parse(source)
    imports = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imports |= {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert imports <= {"math", "torch", "triton", "triton.language"}, imports  # no Inductor at call time
    jitted = [
        f.name
        for f in tree.body
        if isinstance(f, ast.FunctionDef) and any("triton.jit" in ast.unparse(d) for d in f.decorator_list)
    ]
    assert any(k.startswith("triton_") for k in jitted)
    # The launch settings are module literals the catalogue's techniques find and tune.
    constants = {
        t.id: n.value.value
        for n in tree.body
        if isinstance(n, ast.Assign) and isinstance(n.value, ast.Constant)
        for t in n.targets
        if isinstance(t, ast.Name)
    }
    assert "XBLOCK_0" in constants and all(isinstance(v, int) and v > 0 for v in constants.values())
    launch = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "custom_kernel")
    assert "XBLOCK=XBLOCK_0" in ast.unparse(launch) and "num_warps=" in ast.unparse(launch)


@pytest.mark.parametrize("name", sorted(SEEDS))
async def test_the_lowered_submission_passes_the_folders_check(lowered, name):
    task = load_task(PROBLEMS / name)
    source, _ = lowered[name]
    with SimulatedBackend(task, device="h200", noise=0.0, timeout_s=120) as sim:
        report = await sim.evaluate(source, submission_id=1, secret_seed=3)
        seed = await sim.evaluate(SEEDS[name].read_text(), submission_id=2, secret_seed=3)
    assert report.outcome is Outcome.PASSED, report.reason
    assert seed.outcome is Outcome.PASSED and report.score_us is not None
    # Under Triton's interpreter, the real processes and protocol, on the folder's smallest test.
    small = msgspec.structs.replace(task, benchmarks=[min(task.tests, key=lambda s: s.work())])
    local = LocalBackend(small, device="cpu", timeout_s=120, max_calls=3, shape_budget_s=0.3)
    report = await local.evaluate(source, submission_id=3, secret_seed=4)
    assert report.outcome is Outcome.PASSED, report.reason


def test_a_library_call_is_kept_and_named(tmp_path):
    seed = tmp_path / "seed_mm.py"
    seed.write_text(
        "import torch\n\n\ndef custom_kernel(x):\n"
        "    ones = torch.ones(x.shape[1], 2, device=x.device, dtype=x.dtype)\n"
        "    return (x @ ones)[:, 0], x.amax(dim=1)\n"
    )
    code, out, err = _finish(_lower(PROBLEMS / "rowstats", "--seed", seed, cwd=tmp_path))
    assert code == 0, err
    assert "library calls kept: torch.mm" in err
    assert "Kept as library calls (Inductor hands these ops to a library): torch.mm." in out
    assert "torch.mm(" in out and list(tmp_path.iterdir()) == [seed]  # printed, nothing written


def test_a_seed_inductor_specialises_is_refused_in_one_line(tmp_path):
    seed = tmp_path / "seed_branch.py"
    seed.write_text(
        "def custom_kernel(x):\n"
        "    if x.shape[1] > 500:\n"
        "        return x.sum(dim=1), x.amax(dim=1)\n"
        "    return x.double().sum(dim=1).float(), x.amax(dim=1)\n"
    )
    out = tmp_path / "out.py"
    code, stdout, err = _finish(_lower(PROBLEMS / "rowstats", "--seed", seed, "--out", out, cwd=tmp_path))
    assert code == 1 and stdout == "" and not out.exists()
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith("kernel-scientist: seed_branch.py was not lowered: Inductor specialised the lowering")
    assert "> 500" in err


def test_bad_usage_is_one_line_and_writes_nothing(tmp_path):
    existing = tmp_path / "out.py"
    existing.write_text("mine\n")
    cases = {
        # A Triton seed has nothing to lower.
        (PROBLEMS / "vecadd",): "has a kernel of its own (Triton or an extension); only a PyTorch seed is lowered",
        (PROBLEMS / "rowscan", "--seed", tmp_path / "nope.py"): "nope.py: no such file",
        (tmp_path / "nofolder",): "nofolder",
        (PROBLEMS / "rowscan", "--out", existing): "--force",
    }
    procs = {args: _lower(*args, cwd=tmp_path) for args in cases}
    for args, proc in procs.items():
        code, out, err = _finish(proc)
        assert code == 2 and out == "", (args, err)
        assert err.count("\n") == 1 and cases[args] in err and "Traceback" not in err, err
    assert existing.read_text() == "mine\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.py"]


def test_the_folders_benchmark_records_each_contender(tmp_path):
    """scripts/bench_folders.py on this machine: a short campaign per folder, Inductor lowers for
    Triton's CPU backend, and the campaigns and evaluations are simulated, labelled so."""
    out = tmp_path / "bench"
    cmd = [sys.executable, str(ROOT / "scripts" / "bench_folders.py"), str(PROBLEMS / "rowscan")]
    done = subprocess.run(
        [
            *cmd,
            str(PROBLEMS / "vecadd"),
            "--out",
            str(out),
            "--contenders",
            "campaign,lowered,seed,torch.compile",
            "--campaign-seconds",
            "900",
        ],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    record = json.loads((out / "folders.json").read_text())
    assert record["meta"]["backend"] == "simulated" and "simulated" in record["meta"]["device"]
    scan = record["folders"]["rowscan"]
    assert scan["lowering"]["lowered"] and scan["lowered"]["outcome"] == scan["seed"]["outcome"] == "passed"
    assert scan["lowered"]["simulated"]
    # torch.compile of the folder's reference (its utils import and check dropped) passes as it is.
    assert scan["torch.compile"]["outcome"] == record["folders"]["vecadd"]["torch.compile"]["outcome"] == "passed"
    assert record["folders"]["vecadd"]["lowering"] == {"lowered": False, "reason": "the seed has a kernel of its own"}
    with gzip.open(out / "captures.json.gz", "rt") as f:
        assert set(json.load(f)) == {"rowscan"}
    assert re.search(
        r"rowscan +\| lowering ok \| campaign passed [\d.]+ us \| lowered passed [\d.]+ us \| seed passed [\d.]+ us "
        r"\| torch.compile passed",
        done.stdout,
    ), done.stdout
    # Each campaign ran from the folder's submission.py; its best kernel was timed again here.
    for name in ("rowscan", "vecadd"):
        run = record["folders"][name]["campaign_run"]
        assert run["rc"] == 0 and run["evaluations"] > 3 and run["closing"].startswith("campaign over"), run
        assert (out / f"{name}.sqlite").is_file() and record["folders"][name]["campaign"]["outcome"] == "passed"
    assert re.search(
        r"campaign against seed: faster on \d of 2 folders \(2 where both passed\), geometric mean", done.stdout
    )


# ---- a campaign from a PyTorch seed -------------------------------------------------------------
def _campaign(
    tmp_path: Path, task: Path, seed_file: str, *settings: str
) -> tuple[subprocess.CompletedProcess[str], Path]:
    scenario = tmp_path / "torch.toml"
    scenario.write_text(
        f'[campaign]\nname = "torch"\ntask = "{task}"\nseed_file = "{seed_file}"\nhours = 2.0\n\n'
        '[agents]\nbrain = "offline"\n\n[evaluator]\nbackend = "simulated"\ndevice = "h200"\n'
    )
    db = tmp_path / "torch.sqlite"
    cmd = [sys.executable, "-m", "kernel_scientist", "run", str(scenario), "--db", str(db), "--quiet"]
    cmd += [arg for setting in settings for arg in ("--set", setting)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=900, cwd=tmp_path), db


def test_a_campaign_lowers_a_pytorch_seed_and_tunes_the_lowering(tmp_path):
    from kernel_scientist.blackboard import LOWERED_AUTHOR, metrics, open_existing

    done, db = _campaign(tmp_path, PROBLEMS / "rowstats", "solutions/correct/torch_rows.py")
    assert done.returncode == 0, done.stderr[-3000:]
    with open_existing(db) as board:
        seed, lowered = board.kernels()[:2]
        messages = board.messages()
        evals = board.evaluations()
        kernels = board.kernels()
    assert lowered.author == LOWERED_AUTHOR and lowered.parent_id == seed.id == 1
    assert lowered.summary.startswith("Lowered by Inductor from torch_rows.py (torch ")
    # Lowered once the seed had passed its check, not before.
    seed_done = next(e for e in evals if e.kernel_id == seed.id)
    assert seed_done.report.passed() and lowered.created_at >= seed_done.finished_at
    line = next(m for m in messages if m.agent == "runner" and m.kernel_id == lowered.id)
    assert line.text.startswith(
        f"torch_rows.py has no Triton kernel and passed its check: kernel {lowered.id} is its lowering by Inductor (1 Triton"
    )
    review = next(m for m in messages if m.agent == "critic" and m.text.startswith(f"kernel {lowered.id} approved"))
    assert "the seed lowered by Inductor" in review.text and "pre-screen passed" in review.text
    # The catalogue works on the lowering's Triton, and the best kernel beats the seed.
    assert any(k.parent_id == lowered.id for k in kernels)
    best = metrics.leader(evals)
    seed_score = next(e.report.passed_score() for e in evals if e.kernel_id == seed.id)
    assert best is not None and best.kernel_id not in (seed.id, lowered.id)
    assert best.report.passed_score() < seed_score


def test_a_campaign_whose_seed_inductor_cannot_lower_starts_from_it_alone(tmp_path):
    folder = tmp_path / "problems" / "rowstats"
    shutil.copytree(PROBLEMS / "rowstats", folder)
    for shared in ("utils.py", "eval.py"):  # task.yml takes them from the parent folder
        shutil.copy(PROBLEMS / shared, folder.parent / shared)
    (folder / "branch.py").write_text(
        "def custom_kernel(x):\n"
        "    if x.shape[1] > 500:\n"
        "        return x.sum(dim=1), x.amax(dim=1)\n"
        "    return x.double().sum(dim=1).float(), x.amax(dim=1)\n"
    )
    from kernel_scientist.blackboard import open_existing

    done, db = _campaign(tmp_path, folder, "branch.py")
    assert done.returncode == 0, done.stderr[-3000:]
    with open_existing(db) as board:
        authors = [k.author for k in board.kernels()]
        texts = [m.text for m in board.messages() if m.agent == "runner"]
    assert authors == ["seed"]
    assert any(
        t.startswith("branch.py has no Triton kernel and was not lowered: Inductor specialised the lowering")
        and t.endswith("; the campaign goes on from it alone")
        for t in texts
    ), texts
    assert "nothing left to try" in texts[-1]  # and, with nothing to rewrite, it ends early


def test_a_seed_that_calls_a_library_matmul_is_the_campaigns_baseline_not_a_breach(tmp_path):
    """The policy on what a kernel may call (evaluator.own_kernel, on in a campaign) binds the
    kernels the campaign writes. The seed, a user's PyTorch code with a matrix product, and its
    lowering (which keeps torch.mm) are where it starts: both are evaluated. Every kernel the
    campaign writes keeps the policy: the offline brain plans no rewrite the rules would send
    back, and library_mm puts the product in a Triton kernel of the file."""
    folder = tmp_path / "problems" / "rowstats"
    shutil.copytree(PROBLEMS / "rowstats", folder)
    for shared in ("utils.py", "eval.py"):
        shutil.copy(PROBLEMS / shared, folder.parent / shared)
    (folder / "seed_mm.py").write_text(
        "import torch\n\n\ndef custom_kernel(x):\n"
        "    ones = torch.ones(x.shape[1], 2, device=x.device, dtype=x.dtype)\n"
        "    return (x @ ones)[:, 0], x.amax(dim=1)\n"
    )
    from kernel_scientist.blackboard import LOWERED_AUTHOR, open_existing
    from kernel_scientist.evaluator import rule_verdict

    done, db = _campaign(tmp_path, folder, "seed_mm.py")
    assert done.returncode == 0, done.stderr[-3000:]
    with open_existing(db) as board:
        kernels = board.kernels()
        evals = {e.kernel_id: e for e in board.evaluations()}
        texts = [m.text for m in board.messages() if m.agent == "runner"]
    seed, lowered = kernels[:2]
    assert lowered.author == LOWERED_AUTHOR and "torch.mm(" in lowered.source
    for kernel in (seed, lowered):  # each breaks the policy, and each was evaluated, and passed
        assert rule_verdict(kernel.source, own_kernel=True) is not None
        assert evals[kernel.id].report.passed(), evals[kernel.id].report.reason
    written = kernels[2:]
    assert written and all(rule_verdict(k.source, own_kernel=True) is None for k in written)
    assert any("_ks_mm_kernel" in k.source for k in written)
    assert texts[-1].startswith("campaign over")


def test_a_lowering_that_outlasts_its_limit_is_cut_and_said_once(tmp_path):
    """A seed that passes its check but whose tracing hangs: Inductor's process is killed at
    campaign.lower_timeout_s and the campaign goes on from the seed alone."""
    folder = tmp_path / "problems" / "rowstats"
    shutil.copytree(PROBLEMS / "rowstats", folder)
    for shared in ("utils.py", "eval.py"):
        shutil.copy(PROBLEMS / shared, folder.parent / shared)
    (folder / "slow.py").write_text(
        "import torch\n\n\ndef custom_kernel(x):\n    n = 0\n"
        "    while torch.compiler.is_compiling():  # Dynamo unrolls this for ever\n        n += 1\n"
        "    return x.sum(dim=1), x.amax(dim=1)\n"
    )
    from kernel_scientist.blackboard import open_existing

    done, db = _campaign(tmp_path, folder, "slow.py", "campaign.lower_timeout_s=8")
    assert done.returncode == 0, done.stderr[-3000:]
    with open_existing(db) as board:
        assert [k.author for k in board.kernels()] == ["seed"] and board.evaluation_for(1).report.passed()
        lines = [m.text for m in board.messages() if "has no Triton kernel" in m.text]
    assert len(lines) == 1 and "Inductor took longer than 8 s" in lines[0], lines


# ---- Inductor's CUDA code, recorded on a GPU ----------------------------------------------------
CUDA_CAPTURES = ROOT / "tests" / "fixtures_lowering" / "pmpp-v2-h100.json.gz"


def _cuda_captures() -> dict[str, InductorCapture]:
    with gzip.open(CUDA_CAPTURES, "rt") as f:
        return {k: msgspec.convert(v, InductorCapture) for k, v in json.load(f).items()}


@pytest.mark.parametrize("folder", ["grayscale_py", "matmul_py", "prefixsum_py", "sort_py", "vectoradd_py"])
def test_inductors_cuda_code_becomes_a_standalone_submission(folder):
    capture = _cuda_captures()[folder]
    assert capture.target == "cuda" and capture.torch.startswith("2.11")
    lowered = from_capture(capture)
    assert lowered.provenance.startswith(f"Lowered by Inductor from submission.py (torch {capture.torch}, ")
    assert "code for CUDA" in lowered.provenance and lowered.source.startswith(f'"""{lowered.provenance}')
    tree = ast.parse(lowered.source)
    defined = {f.name for f in tree.body if isinstance(f, ast.FunctionDef)}
    assert set(lowered.kernels) <= defined and "custom_kernel" in defined
    imports = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    assert imports <= {"math", "torch", "triton", "triton.language"}, imports
    # Ops Inductor hands to a library stay library calls, named in the header.
    kept = {"matmul_py": ["torch.mm"], "sort_py": ["torch.ops.aten.sort.stable"]}.get(folder, [])
    assert lowered.library_calls == kept
    assert ("Kept as library calls" in lowered.source) == bool(kept)
    # The settings Inductor chose for the GPU are the literals, first of its candidates.
    first = capture.settings[lowered.kernels[0]][0]
    for name, value in first.blocks.items():
        assert f"{name}_0 = {value}\n" in lowered.source
    assert f"num_warps={first.num_warps}" in lowered.source


def test_a_campaign_killed_while_lowering_lowers_on_resume(tmp_path):
    """kill -9 while Inductor works (the seed evaluated, no lowering recorded): resume lowers it."""
    import os
    import signal
    import sqlite3
    import time

    from kernel_scientist.blackboard import LOWERED_AUTHOR, open_existing

    scenario = tmp_path / "torch.toml"
    scenario.write_text(
        f'[campaign]\nname = "torch"\ntask = "{PROBLEMS / "rowstats"}"\nseed_file = "solutions/correct/torch_rows.py"\n'
        'hours = 2.0\n\n[agents]\nbrain = "offline"\n\n[evaluator]\nbackend = "simulated"\ndevice = "h200"\n'
    )
    db = tmp_path / "torch.sqlite"
    cmd = [sys.executable, "-m", "kernel_scientist", "run", str(scenario), "--db", str(db), "--quiet"]
    proc = subprocess.Popen(cmd, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and proc.poll() is None:  # until the seed's evaluation is on file
            if db.exists():
                with contextlib.suppress(sqlite3.Error), contextlib.closing(sqlite3.connect(db)) as con:
                    if con.execute("SELECT count(*) FROM evaluation").fetchone()[0]:
                        break
            time.sleep(0.05)
        assert proc.poll() is None, "the campaign ended before the kill"
        os.kill(proc.pid, signal.SIGKILL)  # Inductor takes seconds: it is at work now
    finally:
        proc.wait(timeout=30)
    with open_existing(db) as board:
        assert board.evaluation_for(1) is not None
        assert [k.author for k in board.kernels()] == ["seed"]
    done = subprocess.run(
        [sys.executable, "-m", "kernel_scientist", "resume", "--db", str(db), "--quiet"],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    with open_existing(db) as board:
        lowered = [k for k in board.kernels() if k.author == LOWERED_AUTHOR]
        lines = [m.text for m in board.messages() if "has no Triton kernel" in m.text]
    assert len(lowered) == 1 and len(lines) == 1 and "passed its check" in lines[0]
