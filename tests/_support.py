"""Helpers shared by the tests (imported as a plain module: pytest puts tests/ on the path)."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCENARIOS = ROOT / "scenarios"
_FP8 = ROOT / "evaluator" / "tasks" / "amd_fp8_mm"
SEED_FILE = _FP8 / "submission.py"


def command(*args: str) -> list[str]:
    """The console command's argv, for a test that starts it itself (``subprocess.Popen``)."""
    return [sys.executable, "-m", "kernel_scientist", *args]


def smoke_run(db, *extra: str) -> list[str]:
    """The arguments of ``run`` of the smoke scenario into the blackboard ``db``."""
    return ["run", str(SCENARIOS / "smoke.toml"), "--db", str(db), *extra]


def _run(argv: list[str], cwd: Path | None, timeout: float, env: dict | None):
    return subprocess.run(
        argv,
        cwd=cwd or ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )


def cli(*args: str, cwd: Path | None = None, timeout: float = 300, env: dict | None = None):
    """Run the real console command in a subprocess, as a user would."""
    return _run(command(*args), cwd, timeout, env)


def script(name: str, *args: str, cwd: Path | None = None, timeout: float = 300, env: dict | None = None):
    """Run ``scripts/<name>`` in a subprocess, as a GPU session would."""
    return _run([sys.executable, str(ROOT / "scripts" / name), *args], cwd, timeout, env)


def interpreted_script(name: str, *args: str, cwd: Path | None = None):
    """``script`` with Triton's interpreter on: a GPU script's dry run on this machine."""
    return script(name, *args, cwd=cwd, env={"TRITON_INTERPRET": "1"})


def popen(*args: str, **kwargs):
    """Start the console command without waiting for it: output piped as text unless told otherwise."""
    return subprocess.Popen(
        command(*args), **{"cwd": ROOT, "stdout": subprocess.PIPE, "stderr": subprocess.PIPE, "text": True, **kwargs}
    )


def llm_call(**fields):
    """An ``LLMCall`` record, a plain successful ask, with the fields a test cares about given."""
    from kernel_scientist.blackboard import LLMCall

    plain = dict(id=0, at=0.0, agent="critic", seq=1, role="review", turn="ask", brain="fake", model="fake-model")
    return LLMCall(**{**plain, "status": "ok", "system": "", "messages": [], "prompt_hash": "h", **fields})


def fingerprint(db):
    """What must be identical between two runs of one scenario and seed: every kernel, evaluation
    and message, in order (wall-clock fields left out)."""
    from kernel_scientist.blackboard import open_existing

    with open_existing(db) as board:
        kernels = [
            (k.id, k.source_hash, k.state, k.author, k.parent_id, k.hypothesis_id, k.created_at)
            for k in board.kernels()
        ]
        evals = [(e.kernel_id, e.started_at, e.report.outcome, e.report.score_us) for e in board.evaluations()]
        msgs = [(m.at, m.agent, m.kind, m.text) for m in board.messages()]
    return kernels, evals, msgs


def small_task_folder(root: Path) -> None:
    """``root/tasks/small``: the FP8 GEMM folder with shapes the interpreter runs in seconds (same
    files, same checks), for campaigns on the CPU mode of the local backend."""
    folder = root / "tasks" / "small"
    folder.mkdir(parents=True)
    for name in ("reference.py", "task.py", "submission.py"):
        shutil.copy(_FP8 / name, folder / name)
    shutil.copy(_FP8.parent / "utils.py", root / "tasks" / "utils.py")
    yml = (_FP8 / "task.yml").read_text()
    head, meta = yml.split("tests:")[0], "# Our metadata" + yml.split("# Our metadata")[1]
    (folder / "task.yml").write_text(
        head
        + """tests:
  - {"m": 64, "n": 64, "k": 128, "seed": 6635}
  - {"m": 96, "n": 192, "k": 256, "seed": 1234}
benchmarks:
  - {"m": 64, "n": 64, "k": 128, "seed": 8135}
  - {"m": 64, "n": 128, "k": 256, "seed": 6251}
"""
        + meta
    )


def small_campaign(name: str, backend: str, hours: float, **evaluator: object) -> str:
    """A scenario for ``small_task_folder``'s task: agents without modelled latency, a harness on
    the CPU with few calls per shape, ``evaluator`` settings added (``in_flight=2``, say)."""
    extra = "".join(f"{key} = {value!r}\n".replace("'", '"') for key, value in evaluator.items())
    return f"""[campaign]
name = "{name}"
task = "tasks/small"
seed = 1
hours = {hours}
[agents]
engineers = 2
max_pending = 3
[agents.latency]
archivist = 0
theorist = 0
engineer = 0
critic = 0
[evaluator]
backend = "{backend}"
harness_device = "cpu"
rate_per_hour = 3600
timeout_s = 60
max_calls = 3
shape_budget_s = 0.2
{extra}"""


# The seeds the any-kernel techniques are screened on: name -> (its folder, its file); a folder's
# name is its task's.
_PROBLEMS = Path(__file__).resolve().parent / "problems"
_ANY = Path(__file__).resolve().parent / "fixtures_any_kernel"
ANY_KERNEL_SEEDS = {
    "vecadd": (_PROBLEMS / "vecadd", "submission.py"),
    "rowstats": (_PROBLEMS / "rowstats", "submission.py"),
    "stencil": (_PROBLEMS / "stencil", "submission.py"),
    "relu": (_ANY / "relu", "submission.py"),
    "relu_fallback": (_ANY / "relu", "fallback.py"),
    "relu_chain": (_ANY / "relu", "chain.py"),
    "inductor_pointwise": (_ANY / "inductor_pointwise", "submission.py"),
    "inductor_reduction": (_ANY / "inductor_reduction", "submission.py"),
    "inductor_reduction_lowered": (_ANY / "inductor_reduction", "lowered.py"),
    "grayscale": (_ANY / "grayscale", "submission.py"),
    "prefixscan_lowered": (_PROBLEMS / "prefixscan", "solutions/correct/inductor_cuda.py"),
    "vectorsum_lowered": (_ANY / "vectorsum_lowered", "submission.py"),
}
