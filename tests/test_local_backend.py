"""The local GPU backend without a GPU: statistics in the parent, the pre-screen, the ROCm code
path of the kernels, the one-file `evaluate` / `export` commands, and the whole protocol end to end
in its CPU mode (real harness processes under Triton's interpreter)."""

import importlib.util
import math
import os
import signal

import msgspec
import pytest
import torch
import trio
from _support import ROOT, SCENARIOS, cli, script
from evaluator_kernels import BETTER
from kernel_scientist.blackboard import Outcome, Shape
from kernel_scientist.evaluator import LocalBackend, load_task, speed_of_light_us
from kernel_scientist.evaluator._wire import GpuResult, ShapeSamples

from kernel_scientist import knowledge

TASK = ROOT / "evaluator" / "tasks" / "amd_fp8_mm"


@pytest.fixture(scope="module")
def local():
    return LocalBackend(load_task(TASK), gpus=["0"])  # named GPUs: no detection, nothing started


def test_statistics_floor_and_flag_in_the_parent(local):
    a, b = local.task.benchmarks[:2]
    sol = speed_of_light_us(a, local.spec)
    result = GpuResult(
        "ok",
        samples=[
            ShapeSamples(shape=a, event_us=[sol / 10] * 5, host_us=[sol / 10 + 20] * 5),  # impossibly fast
            ShapeSamples(shape=b, event_us=[100.0, 102.0, 98.0], host_us=[900.0, 905.0, 910.0]),  # side work
        ],
        device="test",
    )
    report = local._timed(result, submission_id=1, secret_seed=2, wall=1.0)
    first, second = report.shapes
    assert first.time_us == pytest.approx(sol, rel=1e-3) and "speed of light" in first.flagged
    assert second.time_us == pytest.approx(905.0) and "host clock" in second.flagged
    assert report.score_us == pytest.approx(math.sqrt(first.time_us * second.time_us))
    assert report.provenance.simulated is False and report.provenance.backend == "local"


def test_host_work_and_distance_to_the_limit_per_shape(local):
    """Each measured shape says how much of a call was host work and how far it is from the speed
    of light; the archivist's finding and the prompts' per-shape notes say it in words."""
    from kernel_scientist.agents._views import bounds_summary, shape_note

    a, b, c = local.task.benchmarks[:3]
    result = GpuResult(
        "ok",
        samples=[
            ShapeSamples(shape=a, event_us=[100.0] * 3, host_us=[104.0] * 3, call_us=[90.0] * 3),  # waits on the host
            ShapeSamples(shape=b, event_us=[400.0] * 3, host_us=[404.0] * 3, call_us=[20.0] * 3),
            ShapeSamples(shape=c, event_us=[300.0] * 3, host_us=[303.0] * 3),  # an older harness: no call times
        ],
        device="test",
    )
    first, second, third = local._timed(result, submission_id=1, secret_seed=2, wall=1.0).shapes
    assert (first.host_us, first.bound()) == (90.0, "host") and second.bound() == "device" and third.bound() is None
    assert second.sol_fraction() == pytest.approx(speed_of_light_us(b, local.spec) / 400.0, rel=1e-3)
    assert shape_note(first).startswith("host-bound (90 of 100 us in host work)")
    assert "of speed of light" in shape_note(second) and "host" not in shape_note(second)
    summary = bounds_summary(local._timed(result, submission_id=1, secret_seed=2, wall=1.0))
    assert summary.startswith(f"host-bound on 1 of 3 shapes ({a.label()})")
    assert f"farthest from the speed of light: {b.label()}" in summary


async def test_prescreen_is_rules_and_syntax_only(local):
    assert (await local.prescreen(local.task.seed_source)).outcome == "passed"
    assert (await local.prescreen("def custom_kernel(data):\n    return (\n")).outcome == "compile_error"
    cheat = "import torch\ndef custom_kernel(data):\n    a, b, sa, sb, c = data\n    return torch.matmul(a.float(), b.float().T)\n"
    # the matmul rule is a campaign's policy (own_kernel), off for a plain evaluation
    assert (await local.prescreen(cheat)).outcome == "passed"
    strict = LocalBackend(local.task, gpus=["0"], own_kernel=True)
    assert (await strict.prescreen(cheat)).outcome == "rejected_by_rule"


def _module(source, tmp_path):
    path = tmp_path / "k.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("k", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_amd_knobs_are_passed_only_on_rocm(tmp_path, monkeypatch):
    # Triton fixes interpreter-or-compiler state at the first @jit it sees in a process: keep this
    # process on the interpreter, as the other in-process kernel tests expect.
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    seed = load_task(TASK).seed_source
    technique = knowledge.technique("amd_knobs")
    variant = technique.variants(seed)[0]
    mod = _module(technique.apply(seed, variant.params), tmp_path)
    monkeypatch.setattr(torch.version, "hip", None)
    assert "waves_per_eu" not in mod.select_config(1024, 1536, 7168)
    monkeypatch.setattr(torch.version, "hip", "6.4.0")
    cfg = mod.select_config(1024, 1536, 7168)
    assert cfg["waves_per_eu"] == variant.params["waves_per_eu"]
    assert cfg["matrix_instr_nonkdim"] == variant.params["matrix_instr_nonkdim"]


def test_fp8_flavour_follows_the_platform(monkeypatch):
    from kernel_scientist.evaluator.sandbox import import_reference

    ref = import_reference(load_task(TASK).modules)
    monkeypatch.setattr(torch.version, "hip", "6.4.0")
    assert ref.fp8_dtype() == torch.float8_e4m3fnuz
    a = ref.generate_input(m=64, n=64, k=128, seed=1, device="cpu")[0]
    assert a.dtype == torch.float8_e4m3fnuz and a.stride() == (1, 64)
    monkeypatch.setattr(torch.version, "hip", None)
    assert ref.fp8_dtype() == torch.float8_e4m3fn


def test_evaluate_command_exit_codes(tmp_path):
    ok = cli("evaluate", str(TASK / "submission.py"))
    assert ok.returncode == 0 and "passed" in ok.stdout and "simulated" in ok.stdout
    assert "1024x1536x7168" in ok.stdout
    wrong = tmp_path / "zeros.py"
    wrong.write_text("def custom_kernel(data):\n    c = data[-1]\n    c.zero_()\n    return c\n")
    bad = cli("evaluate", str(wrong), "--json")
    assert bad.returncode == 1 and '"outcome":"wrong_output"' in bad.stdout
    assert cli("evaluate", str(tmp_path / "missing.py")).returncode == 2
    assert cli("evaluate", str(wrong), "--backend", "cloud").returncode == 2


def test_export_writes_a_leaderboard_file(tmp_path):
    db = tmp_path / "c.sqlite"
    run = cli("run", str(SCENARIOS / "smoke.toml"), "--db", str(db), "--quiet", "--set", "campaign.hours=1")
    assert run.returncode == 0, run.stderr[-2000:]
    out = tmp_path / "best.py"
    assert cli("export", "--db", str(db), "--out", str(out), "--gpus", "MI300").returncode == 0
    lines = out.read_text().splitlines()
    assert lines[:2] == ["#!POPCORN leaderboard amd-fp8-mm", "#!POPCORN gpus MI300"]
    assert sum(line.startswith("#!POPCORN") for line in lines) == 2
    assert "def custom_kernel" in out.read_text()
    assert cli("export", "--db", str(db), "--kernel", "9999", "--out", str(out)).returncode == 2
    again = cli("evaluate", str(out))
    assert again.returncode == 0


# -- the whole local protocol, end to end, on the CPU ---------------------------------------------
# device="cpu" runs the real processes (fresh harness per candidate, token on the result pipe,
# process-group kill, verdicts and statistics in the parent) under Triton's interpreter. The task is
# cut down to shapes the interpreter runs in a moment; only the speed is not a GPU's.
ATTACKS = ROOT / "tests" / "attacks"


@pytest.fixture(scope="module")
def on_cpu():
    task = load_task(TASK)
    small = msgspec.structs.replace(
        task, tests=task.check_shapes[:2], benchmarks=[Shape(64, 64, 128, 7), Shape(64, 128, 256, 8)]
    )
    return LocalBackend(small, device="cpu", timeout_s=20, max_calls=3, shape_budget_s=0.5, own_kernel=True)


async def test_the_cpu_mode_runs_the_whole_protocol(on_cpu):
    report = await on_cpu.evaluate(on_cpu.task.seed_source, submission_id=1, secret_seed=99)
    assert report.outcome is Outcome.PASSED, report.reason
    assert report.reason == "passed 2 tests and 2 ranked shapes (6 timed calls, each re-checked)"
    assert [s.shape.label() for s in report.shapes] == ["64x64x128", "64x128x256"]
    assert all(s.passed and s.time_us > 0 and s.flagged is None for s in report.shapes)
    assert all(0 < s.host_us <= s.time_us * 1.01 for s in report.shapes)  # the call's own host time
    assert report.provenance.device.startswith("CPU") and "test mode" in report.provenance.timing_method
    assert report.provenance.versions["triton"] and not report.provenance.simulated


async def test_a_kernel_that_imports_task_finds_it(on_cpu):
    report = await on_cpu.evaluate(BETTER, submission_id=2, secret_seed=99)
    assert report.outcome is Outcome.PASSED, report.reason


@pytest.mark.parametrize(
    "attack, outcome, reason",
    [
        ("dunder_matmul_fallback", Outcome.REJECTED_BY_RULE, "rule heavy_op_runtime"),
        ("segfault", Outcome.CRASH, "killed by SIGSEGV"),
        ("infinite_loop", Outcome.TIMEOUT, "exceeded the 20 s limit"),
        ("forge_stdout", Outcome.WRONG_OUTPUT, "wrong output"),
        ("zero_inputs", Outcome.WRONG_OUTPUT, "wrote to input"),
    ],
)
async def test_attacks_and_faults_through_the_local_protocol(on_cpu, attack, outcome, reason):
    source = (ATTACKS / f"{attack}.py").read_text()
    report = await on_cpu.evaluate(source, submission_id=3, secret_seed=99)
    assert report.outcome is outcome and reason in report.reason, report.reason
    after = await on_cpu.evaluate(on_cpu.task.seed_source, submission_id=4, secret_seed=99)
    assert after.outcome is Outcome.PASSED, after.reason  # the fault cost one evaluation, nothing more


def test_an_unknown_device_is_refused():
    with pytest.raises(ValueError, match="device must be 'cuda' or 'cpu'"):
        LocalBackend(load_task(TASK), device="tpu")


# -- the spare harness process ---------------------------------------------------------------------
def _harness_children(other: dict[int, str] | None = None) -> dict[int, str]:
    """This process's harness processes that are alive, by pid, with their working directories
    (those in ``other``, another backend's, left out)."""
    found, other = {}, other or {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmd = f.read()
            cwd = os.readlink(f"/proc/{entry}/cwd")
        except OSError:
            continue
        state, ppid = stat.rsplit(")", 1)[1].split()[:2]
        if (
            int(ppid) == os.getpid()
            and state != "Z"
            and b"evaluator.sandbox._gpu_harness" in cmd
            and int(entry) not in other
        ):
            found[int(entry)] = cwd
    return found


def _dead(pid: int) -> bool:
    """Exited: a zombie until its parent reaps it (its command line empties before that)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except OSError:
        return True


async def _until_blocked(pid: int, limit_s: float = 120.0) -> None:
    """Wait until a harness process has finished its start-up and sleeps on its request: asleep
    and no CPU time spent over 0.3 s, twice in a row (a process still importing keeps running)."""

    def ticks() -> tuple[str, int]:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return fields[0], int(fields[11]) + int(fields[12])  # state, utime + stime

    quiet, last, waited = 0, ticks(), 0.0
    while quiet < 2 and waited < limit_s:
        await trio.sleep(0.3)
        waited += 0.3
        now = ticks()
        quiet = quiet + 1 if now[0] == "S" and now[1] == last[1] else 0
        last = now


@pytest.fixture
def small_task():
    task = load_task(TASK)
    return msgspec.structs.replace(task, tests=task.check_shapes[:1], benchmarks=[Shape(64, 64, 128, 7)])


async def test_the_next_harness_process_starts_while_the_current_one_runs(small_task):
    others = _harness_children()  # the module's other backends may hold a spare too
    with LocalBackend(small_task, device="cpu", timeout_s=30, max_calls=3, shape_budget_s=0.5) as backend:
        first = await backend.evaluate(small_task.seed_source, submission_id=1, secret_seed=5)
        waiting = _harness_children(others)
        assert len(waiting) == 1  # the spare, started with the first evaluation, waits for a request
        # Its start-up (importing torch and Triton) can outlast a CPU evaluation on a slow machine;
        # the notes say "before the request" only for a spare that was ready and waiting.
        await _until_blocked(next(iter(waiting)))
        second = await backend.evaluate(small_task.seed_source, submission_id=2, secret_seed=5)
        assert not set(waiting) & set(_harness_children(others))  # it served the second and is gone
        left = _harness_children(others)
    for report in (first, second):
        assert report.outcome is Outcome.PASSED, report.reason
        assert "set-up" in report.provenance.notes and "timing" in report.provenance.notes
    assert "before the request" not in first.provenance.notes  # a cold start: its start-up was waited for
    assert "before the request" in second.provenance.notes
    assert set(second.phases) == {"preload_s", "idle_s", "setup_s", "tests_s", "timing_s"}
    assert second.phases["idle_s"] > 0 and first.phases["idle_s"] < second.phases["idle_s"]
    assert len(left) == 1 and not _harness_children(others)  # closing the backend ends the waiting spare
    assert not any(os.path.exists(cwd) for cwd in left.values())  # and removes its directory


async def test_a_spare_that_died_is_replaced_by_a_fresh_process(small_task):
    others = _harness_children()
    with LocalBackend(small_task, device="cpu", timeout_s=30, max_calls=3, shape_budget_s=0.5) as backend:
        await backend.evaluate(small_task.seed_source, submission_id=1, secret_seed=5)
        (spare,) = _harness_children(others)
        os.kill(spare, signal.SIGKILL)
        while not _dead(spare):
            await trio.sleep(0.05)
        report = await backend.evaluate(small_task.seed_source, submission_id=2, secret_seed=5)
    assert report.outcome is Outcome.PASSED, report.reason
    assert "before the request" not in report.provenance.notes


async def test_without_spares_no_process_waits(small_task):
    others = _harness_children()
    with LocalBackend(small_task, device="cpu", timeout_s=30, max_calls=3, shape_budget_s=0.5, spare=False) as b:
        report = await b.evaluate(small_task.seed_source, submission_id=1, secret_seed=5)
        assert not _harness_children(others)
    assert report.outcome is Outcome.PASSED, report.reason


def test_min_calls_above_max_calls_is_refused_in_one_line(tmp_path):
    lines = (SCENARIOS / "smoke.toml").read_text().splitlines()
    at = lines.index("[evaluator]") + 1
    lines[at:at] = ["min_calls = 50", "max_calls = 20"]
    scenario = tmp_path / "bad.toml"
    scenario.write_text("\n".join(lines) + "\n")
    done = cli("run", str(scenario), "--db", str(tmp_path / "x.sqlite"), "--quiet")
    assert done.returncode == 2, done.stderr
    assert "min_calls (50) must not exceed evaluator.max_calls (20)" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and not (tmp_path / "x.sqlite").exists()


@pytest.mark.parametrize(
    "name, args, says",
    [
        ("ncu_kernel.py", ["x.py", "--shape", "12x"], "ncu_kernel: --shape must be MxNxK, not '12x'"),
    ],
)
def test_the_profiler_entry_refuses_bad_usage_in_one_line(name, args, says):
    done = script(name, *args)
    assert done.returncode == 2 and done.stderr.strip().startswith(says), done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
