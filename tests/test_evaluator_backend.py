"""The simulated backend through its public API, with real sandbox subprocesses."""

from __future__ import annotations

import time
from pathlib import Path

import msgspec
import pytest
from evaluator_kernels import (
    BETTER,
    FLOODS,
    HIDDEN_MATMUL,
    LOOPS,
    RAISES,
    RETURNS_ZEROS,
    SEEDLIKE,
    SKIPS_SCALE,
    SYNTAX_ERROR,
    WRITES_INPUT,
)
from kernel_scientist.blackboard.records import Outcome
from kernel_scientist.evaluator import SimulatedBackend, load_task

TASK = load_task(Path(__file__).resolve().parents[1] / "evaluator" / "tasks" / "amd_fp8_mm")
TIMEOUT_S = 4.0


@pytest.fixture(scope="module")
def backend():
    with SimulatedBackend(
        TASK, device="mi300x", noise=0.02, timeout_s=TIMEOUT_S, output_limit=10_000, own_kernel=True
    ) as b:
        yield b


async def test_the_task_seed_passes_with_a_plausible_simulated_score(backend):
    report = await backend.evaluate(TASK.seed_source, submission_id=7, secret_seed=1234)
    assert report.outcome is Outcome.PASSED, report.reason
    assert 100 < report.score_us < 1000
    assert len(report.shapes) == len(TASK.benchmarks)
    assert all(r.time_us >= r.sol_us and r.flagged is None for r in report.shapes)
    assert report.checked_shapes and report.checked_shapes[0].seed != TASK.check_shapes[0].seed  # secret mixed in
    prov = report.provenance
    assert (prov.backend, prov.simulated, prov.timing_method) == ("simulated", True, "analytic model")
    assert "(simulated)" in prov.device and prov.model and prov.seeds == [1234, 7]
    assert 60 <= report.duration_s <= 300
    assert backend.name == "simulated" and backend.simulated and "MI300X" in backend.device_name


async def test_same_inputs_give_identical_reports(backend):
    one = await backend.evaluate(SEEDLIKE, submission_id=3, secret_seed=99)
    two = await backend.evaluate(SEEDLIKE, submission_id=3, secret_seed=99)
    assert msgspec.json.encode(one) == msgspec.json.encode(two)
    other = await backend.evaluate(SEEDLIKE, submission_id=4, secret_seed=99)
    assert other.outcome is Outcome.PASSED and other.score_us != one.score_us  # noise is seeded per submission


async def test_a_tiled_k_contiguous_design_wins_on_large_shapes_and_no_shape_beats_light(backend):
    seed = await backend.evaluate(SEEDLIKE, submission_id=1, secret_seed=5)
    better = await backend.evaluate(BETTER, submission_id=2, secret_seed=5)
    assert better.outcome is Outcome.PASSED, better.reason
    # K-contiguous operands and 128x128 tiles win where there are tiles enough to fill the machine
    # and lose where there are not (40 tiles for 304 CUs), the pre-pass paying its host path too.
    by_shape = {(r.shape.m, r.shape.n, r.shape.k): r.time_us for r in better.shapes}
    seed_by_shape = {(r.shape.m, r.shape.n, r.shape.k): r.time_us for r in seed.shapes}
    assert by_shape[6144, 4608, 7168] < 0.8 * seed_by_shape[6144, 4608, 7168]
    assert by_shape[1024, 576, 7168] > seed_by_shape[1024, 576, 7168]
    assert all(r.time_us >= r.sol_us for r in better.shapes)


@pytest.mark.parametrize("source", [SKIPS_SCALE, RETURNS_ZEROS], ids=["skips-scale", "returns-zeros"])
async def test_wrong_kernels_are_wrong_output_naming_the_shape(backend, source):
    report = await backend.evaluate(source, submission_id=1, secret_seed=1)
    assert report.outcome is Outcome.WRONG_OUTPUT
    assert TASK.check_shapes[0].label() in report.reason and "mismatch" in report.reason
    assert report.score_us is None and report.shapes == []


async def test_writing_to_the_inputs_is_wrong_output(backend):
    report = await backend.evaluate(WRITES_INPUT, submission_id=1, secret_seed=1)
    assert report.outcome is Outcome.WRONG_OUTPUT and "wrote to its inputs" in report.reason


async def test_a_matmul_hidden_from_the_static_rules_is_caught_at_run_time(backend):
    report = await backend.evaluate(HIDDEN_MATMUL, submission_id=1, secret_seed=1)
    assert report.outcome is Outcome.REJECTED_BY_RULE and "heavy_op_runtime" in report.reason


async def test_faults_map_to_outcomes_and_the_next_candidate_runs_cleanly(backend):
    syntax = await backend.evaluate(SYNTAX_ERROR, submission_id=1, secret_seed=1)
    assert syntax.outcome is Outcome.COMPILE_ERROR and "SyntaxError" in syntax.reason and "line" in syntax.reason

    crash = await backend.evaluate(RAISES, submission_id=1, secret_seed=1)
    assert crash.outcome is Outcome.CRASH and "ValueError: boom from the candidate" in crash.reason

    t0 = time.monotonic()
    hung = await backend.evaluate(LOOPS, submission_id=1, secret_seed=1)
    assert hung.outcome is Outcome.TIMEOUT and time.monotonic() - t0 < TIMEOUT_S + 3

    flood = await backend.evaluate(FLOODS, submission_id=1, secret_seed=1)
    assert flood.outcome is Outcome.PASSED  # four megabytes of prints were drained and dropped

    rejected = await backend.evaluate("import ctypes\nctypes.string_at(0)\n", submission_id=1, secret_seed=1)
    assert (
        rejected.outcome is Outcome.REJECTED_BY_RULE
        and "native_code" in rejected.reason
        and "line 1" in rejected.reason
    )

    clean = await backend.evaluate(SEEDLIKE, submission_id=1, secret_seed=1)
    assert clean.outcome is Outcome.PASSED, clean.reason


async def test_prescreen_checks_one_small_shape_without_timing(backend):
    ok = await backend.prescreen(SEEDLIKE)
    assert ok.outcome is Outcome.PASSED and len(ok.checked_shapes) == 1 and ok.score_us is None
    assert ok.duration_s == 0.0
    bad = await backend.prescreen(SKIPS_SCALE)
    assert bad.outcome is Outcome.WRONG_OUTPUT


async def test_outputs_are_judged_on_one_torch_thread_and_the_callers_count_is_restored(backend, monkeypatch):
    """The parent judges with torch's intra-op threads off (a busy second core made every parallel
    region of the reference wait), and gives the caller its own thread count back, also after a
    wrong output; the verdicts are the ones a judge on two threads gives."""
    import torch
    from kernel_scientist.evaluator.backends import _simulated

    threads_seen: list[int] = []
    check = _simulated.check_failure

    def recording(ref, data, output):
        threads_seen.append(torch.get_num_threads())
        return check(ref, data, output)

    monkeypatch.setattr(_simulated, "check_failure", recording)
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        ok = await backend.evaluate(SEEDLIKE, submission_id=1, secret_seed=3)
        assert torch.get_num_threads() == 2
        wrong = await backend.evaluate(SKIPS_SCALE, submission_id=1, secret_seed=3)
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
    assert ok.outcome is Outcome.PASSED, ok.reason
    assert wrong.outcome is Outcome.WRONG_OUTPUT and "mismatch" in wrong.reason
    assert threads_seen and set(threads_seen) == {1}


async def test_an_oversized_tile_is_a_compile_error_on_the_device(backend):
    from evaluator_kernels import tiled_source

    report = await backend.evaluate(tiled_source(bm=256, bn=256, warps=8, stages=3), submission_id=1, secret_seed=1)
    assert report.outcome is Outcome.COMPILE_ERROR and "shared memory" in report.reason


_BRANCHES = """
import triton
import triton.language as tl


@triton.jit
def kernel(a_ptr, c_ptr, MODE: tl.constexpr, FLIP: tl.constexpr, IMPRECISE: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    a = tl.load(a_ptr + offs[:, None] * BLOCK + offs[None, :])
    if MODE == 0:
        b = a if FLIP == 0 else a.to(tl.float16)
        acc = tl.dot(a, b, max_num_imprecise_acc=IMPRECISE)
    elif MODE == 1:
        acc = tl.dot(a.to(tl.float16), a.to(tl.float16))
    else:
        a16 = a.to(tl.bfloat16)
        acc = triton.language.dot(a16, a16)
        triton.language.atomic_add(c_ptr + offs, 1.0)
    tl.store(c_ptr + offs[:, None] * BLOCK + offs[None, :], acc)
"""


_CAPTURE_SETTINGS = """
import importlib.util, json, sys
import torch
from kernel_scientist.evaluator.sandbox._capture import capture_launches, kernel_features

spec = importlib.util.spec_from_file_location("ks_test_branches", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
settings = json.loads(sys.argv[2])
a = torch.empty((16, 16), dtype=torch.float8_e4m3fn, device="meta")
c = torch.empty((16, 16), dtype=torch.float32, device="meta")
launches = []
with capture_launches(launches, None):
    for setting in settings:
        module.kernel[(1,)](a, c, **setting)
names = ("has_dot", "precise_acc", "atomic", "upcast_bf16", "upcast_fp32", "upcast_to")
print(json.dumps({
    "captured": [{n: getattr(x, n) for n in names} for x in launches],
    "direct": [kernel_features(module.kernel.src, setting) for setting in settings],
}))
"""


def test_a_kernel_launched_with_several_settings_is_read_per_setting(tmp_path):
    """Launch capture reads a kernel's source once, however many constexpr settings launch it, and
    shares features between settings that agree on every name a branch condition or
    ``max_num_imprecise_acc`` reads (BLOCK here): each launch's features still follow the branches
    its own constexprs take, whichever came first, and are those of ``kernel_features`` on the
    source (calls named by a module path count too). In a child process: Triton imported here
    before tests/test_task.py sets TRITON_INTERPRET would break its interpreted kernels."""
    import json
    import subprocess
    import sys

    (tmp_path / "branches.py").write_text(_BRANCHES)
    settings = [
        dict(MODE=1, FLIP=0, IMPRECISE=0, BLOCK=16),
        dict(MODE=0, FLIP=0, IMPRECISE=0, BLOCK=16),
        dict(MODE=2, FLIP=0, IMPRECISE=0, BLOCK=16),
        dict(MODE=1, FLIP=1, IMPRECISE=32, BLOCK=32),
        dict(MODE=0, FLIP=0, IMPRECISE=0, BLOCK=32),
        dict(MODE=0, FLIP=1, IMPRECISE=0, BLOCK=16),
        dict(MODE=0, FLIP=0, IMPRECISE=32, BLOCK=16),
        dict(MODE=0, FLIP=0, IMPRECISE=0, BLOCK=64),
    ]
    done = subprocess.run(
        [sys.executable, "-c", _CAPTURE_SETTINGS, str(tmp_path / "branches.py"), json.dumps(settings)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    got = result["captured"]
    names = ("has_dot", "precise_acc", "atomic", "upcast_bf16", "upcast_fp32", "upcast_to")
    plain = {**dict.fromkeys(names, False), "has_dot": True, "upcast_to": ""}
    fp16 = {**plain, "upcast_bf16": True, "upcast_to": "float16"}
    precise = {**plain, "precise_acc": True}
    assert got[:3] == [fp16, precise, {**plain, "atomic": True, "upcast_bf16": True, "upcast_to": "bfloat16"}]
    assert got[3:] == [fp16, precise, {**fp16, "precise_acc": True}, plain, precise]
    assert got == result["direct"]


async def test_precision_flags_follow_the_branch_a_launch_takes():
    """A kernel with a precise fp8 branch and an fp16 branch is timed as the branch its launch's
    constexpr selects (on Hopper the two cost differently), not as whatever its source mentions."""
    from evaluator_kernels import FP16_UPCAST, branchy_source

    scores = {}
    with SimulatedBackend(TASK, device="h200", noise=0.0, timeout_s=60.0) as hopper:
        for name, source in [
            ("precise", SEEDLIKE),
            ("fp16", FP16_UPCAST),
            ("branch 0", branchy_source(0)),
            ("branch 1", branchy_source(1)),
        ]:
            report = await hopper.evaluate(source, submission_id=1, secret_seed=1)
            assert report.outcome is Outcome.PASSED, (name, report.reason)
            scores[name] = report.score_us
    assert scores["precise"] != pytest.approx(scores["fp16"], rel=0.02)
    assert scores["branch 0"] == pytest.approx(scores["precise"])
    assert scores["branch 1"] == pytest.approx(scores["fp16"])
