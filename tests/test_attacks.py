"""The attack suite on the CPU: every submission in tests/attacks/ is stopped with a named reason.

Each attack file's first line names the outcome and a reason substring the simulated backend must
give (docs/evaluator-attacks.md has the table); the second names the GPU defence that stops it
at run time (scripts/gpu_attacks.py runs the same folder through the local backend on a GPU). One
backend serves the whole module, so every fault (segfault, hang, flood, out of memory) is followed
by more candidates on the same sandbox, and the last tests check that honest kernels still pass.
Some runtime defences stand behind static rules; they are tested here with the rules switched off.
"""

from __future__ import annotations

import importlib.util
import os
import time
from pathlib import Path

import kernel_scientist.evaluator.backends._simulated as simulated
import msgspec
import pytest
from evaluator_kernels import BETTER
from kernel_scientist.blackboard.records import EvalReport, Outcome, Provenance, Shape
from kernel_scientist.evaluator import SimulatedBackend, load_task, static_findings
from kernel_scientist.evaluator._wire import ChildRequest

ROOT = Path(__file__).resolve().parents[1]
TASK = load_task(ROOT / "evaluator" / "tasks" / "amd_fp8_mm")
SECRET_SEED = 1234
FAULTS = {Outcome.CRASH, Outcome.TIMEOUT, Outcome.OUT_OF_MEMORY}


def _script():
    spec = importlib.util.spec_from_file_location("gpu_attacks", ROOT / "scripts" / "gpu_attacks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


gpu_attacks = _script()
ATTACKS = {a.name: a for a in gpu_attacks.load_attacks(Path(__file__).parent / "attacks")}


@pytest.fixture(scope="module")
def backend():
    with SimulatedBackend(TASK, device="mi300x", noise=0.0, timeout_s=5.0, output_limit=10_000, own_kernel=True) as b:
        yield b


def test_the_suite_covers_the_attack_table():
    assert len(ATTACKS) >= 12
    stopped_by = {a.outcome for a in ATTACKS.values()}
    assert Outcome.PASSED not in stopped_by
    assert {
        Outcome.WRONG_OUTPUT,
        Outcome.REJECTED_BY_RULE,
        Outcome.CRASH,
        Outcome.TIMEOUT,
        Outcome.OUT_OF_MEMORY,
    } <= stopped_by
    assert all(a.reason for a in ATTACKS.values()), "every attack names the reason it is stopped with"


@pytest.mark.parametrize("name", sorted(ATTACKS))
async def test_each_attack_is_stopped_with_its_named_reason(backend, name):
    attack = ATTACKS[name]
    report = await backend.evaluate(attack.source, submission_id=7, secret_seed=SECRET_SEED)
    assert report.outcome is not Outcome.PASSED, report.reason
    assert report.outcome is attack.outcome, report.reason
    assert attack.reason in report.reason, report.reason
    assert len(report.reason) < 2000  # a flood of output never reaches the blackboard
    if report.outcome in FAULTS:  # the fault is contained: the next candidate runs cleanly
        after = await backend.prescreen(TASK.seed_source)
        assert after.outcome is Outcome.PASSED, after.reason


@pytest.mark.parametrize(
    "name",
    sorted(
        n
        for n, a in ATTACKS.items()
        if a.outcome is Outcome.REJECTED_BY_RULE and any(f.severity == "reject" for f in static_findings(a.source))
    ),
)
async def test_rule_rejected_attacks_fail_the_prescreen_too(backend, name):
    attack = ATTACKS[name]
    report = await backend.prescreen(attack.source)
    assert report.outcome is Outcome.REJECTED_BY_RULE and f"rule {attack.reason}" in report.reason


# -- runtime defences behind the static rules ---------------------------------------------------
_FORGE = """
import os
import posix


def custom_kernel(data):
    fd = os.open(".result", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    os.write(fd, BLOB)
    os.close(fd)
    posix._exit(CODE)
"""


@pytest.mark.parametrize(
    ("blob", "code", "reason"),
    [
        ("b'not msgpack at all'", 0, "no valid result"),
        ("bytes([0x81, 0xa6]) + b'status' + bytes([0xa2]) + b'ok'", 5, "may have been forged"),
    ],
    ids=["garbage-exit-0", "result-exit-5"],
)
async def test_a_forged_result_file_never_passes_even_without_the_rules(backend, monkeypatch, blob, code, reason):
    monkeypatch.setattr(simulated, "rule_verdict", lambda source, own_kernel=True: None)  # the rules switched off
    source = _FORGE.replace("BLOB", blob).replace("CODE", str(code))
    report = await backend.evaluate(source, submission_id=1, secret_seed=SECRET_SEED)
    assert report.outcome is Outcome.CRASH and reason in report.reason


def _alive_in_group(pgid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == pgid and fields[0] != "Z":
                found.append(int(entry.name))
    return found


@pytest.mark.parametrize("name", ["fork_bomb_bounded", "pool_fork_bomb"])
def test_a_bounded_fork_bomb_dies_with_its_process_group(backend, name):
    """Without the process_control rule, the sleepers are still killed with the candidate's group."""
    request = ChildRequest(
        mode="prescreen",
        source=ATTACKS[name].source,
        task_dir=TASK.path,
        modules=TASK.modules,
        check=[Shape(64, 64, 128, 1)],
        bench=[],
        device="mi300x",
    )
    job = backend._server.run(request, 10.0, 1000)
    assert job.finished is not None and not job.timed_out
    deadline = time.monotonic() + 3
    while _alive_in_group(job.finished.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _alive_in_group(job.finished.pid) == []


# -- the GPU script's table ---------------------------------------------------------------------
def _report(outcome: Outcome, reason: str) -> EvalReport:
    return EvalReport(
        outcome=outcome,
        reason=reason,
        provenance=Provenance(backend="local", simulated=False, device="fake", timing_method="events"),
    )


def test_the_gpu_script_builds_its_table_from_reports():
    zero = ATTACKS["zero_inputs"]
    hang = ATTACKS["infinite_loop"]
    seed = gpu_attacks.Attack(
        name="control:seed", path="", outcome=Outcome.PASSED, reason="", gpu_defence="", source=""
    )
    rows = [
        gpu_attacks.verdict_row(zero, _report(Outcome.WRONG_OUTPUT, "the kernel wrote to input 2 on 1024x1536x7168")),
        gpu_attacks.verdict_row(hang, _report(Outcome.PASSED, "passed " + "x" * 300)),
        gpu_attacks.verdict_row(seed, _report(Outcome.PASSED, "passed 4 tests"), control=True),
    ]
    assert [(r.stopped, r.as_expected) for r in rows] == [(True, False), (False, False), (True, True)]
    table = gpu_attacks.build_table(rows, reason_width=60)
    lines = table.splitlines()
    assert lines[0].split() == ["attack", "outcome", "ok", "reason"]
    assert "zero_inputs" in lines[2] and "wrong_output" in lines[2] and "yes" in lines[2]
    assert "infinite_loop" in lines[3] and "NO" in lines[3] and lines[3].endswith("...")
    assert lines[-1] == "1/2 attacks stopped; 1/1 honest controls passed"
    assert not gpu_attacks.all_good(rows) and gpu_attacks.all_good([rows[0], rows[2]])


class _ScriptedBackend:
    """Stands in for one GPU's LocalBackend: the reports are canned, the calls are recorded."""

    def __init__(self, name: str, log: list):
        self.name, self.log = name, log

    async def evaluate(self, source: str, *, submission_id: int, secret_seed: int) -> EvalReport:
        self.log.append((self.name, source))
        if source == "seed":
            return _report(Outcome.PASSED, "passed 11 tests")
        return (
            _report(Outcome.CRASH, "killed by SIGSEGV")
            if "segfault" in source
            else _report(Outcome.WRONG_OUTPUT, "wrong output")
        )


async def test_the_gpu_script_reruns_the_seed_on_the_same_gpu_after_each_fault():
    def attack(name: str) -> gpu_attacks.Attack:
        return gpu_attacks.Attack(name=name, path="", outcome=Outcome.CRASH, reason="", gpu_defence="", source=name)

    log: list = []
    seed = msgspec.structs.replace(attack("control:seed"), source="seed", outcome=Outcome.PASSED)
    rows = await gpu_attacks.run_all(
        [_ScriptedBackend("gpu0", log), _ScriptedBackend("gpu1", log)],
        [attack("segfault"), attack("constant_output"), attack("segfault")],
        [seed],
    )
    assert [r.name for r in rows] == [
        "segfault",
        "control:seed after segfault",
        "constant_output",
        "segfault",
        "control:seed after segfault",
        "control:seed",
    ]
    assert gpu_attacks.all_good(rows)
    for i, (gpu, source) in enumerate(log):  # each fault's seed ran next on that fault's GPU
        if source == "segfault":
            assert next(s for g, s in log[i + 1 :] if g == gpu) == "seed"


def test_a_malformed_attack_header_is_named(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("# attack: x — expected: vanished into thin air\n")
    with pytest.raises(ValueError, match="bad.py: unknown outcome 'vanished'"):
        gpu_attacks.parse_attack(bad)


# -- honest kernels, last: the backend is clean after every attack -------------------------------
@pytest.mark.parametrize("source", [TASK.seed_source, BETTER], ids=["seed", "better"])
async def test_honest_kernels_pass_on_the_same_backend_after_every_attack(backend, source):
    report = await backend.evaluate(source, submission_id=3, secret_seed=SECRET_SEED)
    assert report.outcome is Outcome.PASSED, report.reason
    assert all(r.flagged is None for r in report.shapes)
    roots = [d for d in os.listdir(backend._server._cwd) if d.startswith("ks-sandbox-")]
    assert roots and all(os.listdir(os.path.join(backend._server._cwd, d)) == [] for d in roots)  # no leftovers


# ---- every folder, not only amd-fp8-mm --------------------------------------------------
# The attacks that do not depend on the fp8 task's data (forged channels, faults, the harness's
# modules, secrets) and every attack a static rule stops must be stopped the same way on any
# problem folder: the sandbox and the rules do not depend on the task.
FOLDERS = ROOT / "tests" / "problems"
_ANY_TASK = sorted(
    n
    for n, a in ATTACKS.items()
    if ("= data" not in a.source and "data[" not in a.source)
    or (a.outcome is Outcome.REJECTED_BY_RULE and any(f.severity == "reject" for f in static_findings(a.source)))
)


@pytest.fixture(scope="module")
def other_folders():
    backends = {
        name: SimulatedBackend(
            load_task(FOLDERS / name), noise=0.0, timeout_s=5.0, output_limit=10_000, own_kernel=True
        )
        for name in ("vecadd", "rowstats", "stencil")
    }
    for b in backends.values():
        b.__enter__()
    yield backends
    for b in backends.values():
        b.close()


@pytest.mark.parametrize("folder", ["vecadd", "rowstats", "stencil"])
@pytest.mark.parametrize("name", _ANY_TASK)
async def test_attacks_are_stopped_on_every_folder(other_folders, folder, name):
    attack, backend = ATTACKS[name], other_folders[folder]
    report = await backend.evaluate(attack.source, submission_id=7, secret_seed=SECRET_SEED)
    assert report.outcome is attack.outcome and attack.reason in report.reason, report.reason
    if report.outcome in FAULTS:
        after = await backend.prescreen(backend.task.seed_source)
        assert after.outcome is Outcome.PASSED, after.reason


def test_the_any_folder_attacks_are_many():
    assert len(_ANY_TASK) >= 30
