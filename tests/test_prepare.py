"""Compiling ahead (evaluator/sandbox/_prepare.py): the queued candidates' harness processes run a dry pass
while another candidate holds the GPU, each then serves exactly its own candidate. Real harness
processes on the CPU (Triton's interpreter), the task cut down to shapes it runs in a moment."""

from __future__ import annotations

import os
import subprocess
import sys

import msgspec
import pytest
import trio
from _support import ROOT, small_campaign, small_task_folder
from evaluator_kernels import BETTER
from kernel_scientist.blackboard import Outcome, Shape, metrics
from kernel_scientist.evaluator import LocalBackend, load_task
from kernel_scientist.evaluator.backends._local import HarnessProcess, compile_threads
from test_local_backend import _harness_children, _until_blocked

TASK = ROOT / "evaluator" / "tasks" / "amd_fp8_mm"
# The candidate being evaluated when a hint is given: the first source of every hint, never prepared.
CURRENT = "def custom_kernel(data):\n    return data[-1]\n"


@pytest.fixture
def small_task():
    task = load_task(TASK)
    return msgspec.structs.replace(task, tests=task.check_shapes[:2], benchmarks=[Shape(64, 64, 128, 7)])


def _backend(task, ahead=2):
    return LocalBackend(task, device="cpu", timeout_s=60, max_calls=3, shape_budget_s=0.5, prepare_ahead=ahead)


async def _all_waiting(others, count):
    """The ``count`` prepared processes, once each has finished its dry pass and sleeps on its request."""
    for _ in range(400):
        found = _harness_children(others)
        if len(found) >= count:
            break
        await trio.sleep(0.05)
    for pid in found:
        await _until_blocked(pid)
    return found


async def test_a_prepared_candidate_is_evaluated_by_the_process_that_compiled_it(small_task):
    others = _harness_children()
    with _backend(small_task) as backend:
        backend.prepare([CURRENT, small_task.seed_source, BETTER, CURRENT + "# another\n"])
        prepared = await _all_waiting(others, 2)
        assert len(prepared) == 2  # two ahead at most; the third is not started
        seed = await backend.evaluate(small_task.seed_source, submission_id=1, secret_seed=5)
        left = _harness_children(others)
        assert len(set(prepared) - set(left)) == 1  # one of the two served it and is gone
        better = await backend.evaluate(BETTER, submission_id=2, secret_seed=5)
        assert not set(prepared) & set(_harness_children(others))
        cold = await backend.evaluate(small_task.seed_source, submission_id=3, secret_seed=5)
    for report in (seed, better, cold):
        assert report.outcome is Outcome.PASSED, report.reason
    for report in (seed, better):
        assert "compiled ahead in" in report.provenance.notes and "(2 dry calls)" in report.provenance.notes
        assert report.phases["prepare_calls"] == 2 and "before the request" in report.provenance.notes
    # nothing was prepared for the third: a plain run, with the verdict and shapes of the first
    assert "compiled ahead" not in cold.provenance.notes and "prepare_s" not in cold.phases
    assert cold.reason == seed.reason and [s.shape for s in cold.shapes] == [s.shape for s in seed.shapes]
    assert not _harness_children(others)  # closing the backend ends what was left


async def test_a_candidate_nobody_prepared_never_gets_another_ones_process(small_task):
    others = _harness_children()
    with _backend(small_task, ahead=1) as backend:
        backend.prepare([CURRENT, BETTER])
        (pid,) = await _all_waiting(others, 1)
        report = await backend.evaluate(small_task.seed_source, submission_id=1, secret_seed=5)
        assert pid in _harness_children(others)  # still waiting for its own candidate
        # A newer hint without it: with room for one, the stale process gives way to the new one.
        backend.prepare([CURRENT, small_task.seed_source])
        for _ in range(400):
            if pid not in _harness_children(others):
                break
            await trio.sleep(0.05)
        assert pid not in _harness_children(others)
        again = await backend.evaluate(small_task.seed_source, submission_id=2, secret_seed=5)
    assert report.outcome is Outcome.PASSED and "compiled ahead" not in report.provenance.notes
    assert again.outcome is Outcome.PASSED and "compiled ahead" in again.provenance.notes


async def test_the_candidate_about_to_start_keeps_its_prepared_process(small_task):
    """The hint before an evaluation names that candidate first: what was compiled for it stays."""
    others = _harness_children()
    with _backend(small_task, ahead=1) as backend:
        backend.prepare([CURRENT, small_task.seed_source])
        (pid,) = await _all_waiting(others, 1)
        backend.prepare([small_task.seed_source, BETTER])  # the seed's turn; BETTER comes next
        both = await _all_waiting(others, 2)
        assert pid in both and len(both) == 2
        report = await backend.evaluate(small_task.seed_source, submission_id=1, secret_seed=5)
    assert report.outcome is Outcome.PASSED and "compiled ahead" in report.provenance.notes


async def test_a_candidate_is_compiled_ahead_once_its_dry_pass_has_ended(small_task):
    others = _harness_children()
    with _backend(small_task, ahead=1) as backend:
        assert not backend.compiled_ahead(BETTER)  # nothing prepared for it yet
        backend.prepare([CURRENT, BETTER])
        for _ in range(600):
            if backend.compiled_ahead(BETTER):
                break
            await trio.sleep(0.05)
        assert backend.compiled_ahead(BETTER) and not backend.compiled_ahead(small_task.seed_source)
        (pid,) = await _all_waiting(others, 1)  # its process is waiting for its request
        report = await backend.evaluate(BETTER, submission_id=1, secret_seed=5)
        assert not backend.compiled_ahead(BETTER)  # its process served it and is gone
    assert report.outcome is Outcome.PASSED and "compiled ahead" in report.provenance.notes
    with LocalBackend(small_task, device="cpu", spare=False) as backend:
        assert backend.compiled_ahead(BETTER)  # compiling nothing ahead, every candidate is as ready


def test_a_process_prepared_for_one_source_refuses_another(small_task):
    backend = _backend(small_task)
    process = HarnessProcess("cpu", "cpu")
    process.prepare(backend.request(BETTER, 0))
    run = process.serve(backend.request(small_task.seed_source, 5), timeout_s=60, output_limit=10_000)
    report = backend.judge(run, 1, 5, backend._here())
    assert report.outcome is Outcome.CRASH and "prepared for another candidate" in report.reason


def test_rejected_sources_and_a_backend_without_spares_prepare_nothing(small_task):
    others = _harness_children()
    cheat = "import os\nKEY = os.environ.get('KEY')\ndef custom_kernel(data):\n    return data[-1]\n"
    with _backend(small_task) as backend:
        backend.prepare([CURRENT, cheat])
        assert not backend._spares._ahead  # the static rules reject it: its code never runs
    with LocalBackend(small_task, device="cpu", spare=False, prepare_ahead=2) as backend:
        backend.prepare([CURRENT, small_task.seed_source])
        assert backend.prepare_ahead == 0 and not _harness_children(others)


_DRY = r"""
import sys, time
import torch
import triton
import triton.language as tl
from kernel_scientist.evaluator.sandbox._prepare import dry_launches, dry_pass

@triton.jit
def add_one(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) + 1, mask=offs < n)

x = torch.zeros(16)
with dry_launches("cpu"):
    add_one[(1,)](x, 16, BLOCK=16)          # a launch: nothing runs
    y = x + 1                                # a kernel of torch's: evaluated on meta
    x.copy_(torch.ones(16))                  # in place: nothing changes
    z = torch.randn(4, 8, device="cpu").t()  # a factory: the right layout, no values drawn
assert torch.equal(x, torch.zeros(16)), x
assert y.shape == (16,) and y.device.type == "cpu" and z.shape == (8, 4) and z.stride() == (1, 8)
add_one[(1,)](x, 16, BLOCK=16)               # and all of it undone afterwards
assert torch.equal(x, torch.ones(16)), x
print("dry ok")
"""


_LOOPS = r"""
import sys, time
import torch  # as the harness process has it before any request (its start-up imports it)
from pathlib import Path
from kernel_scientist.evaluator import LocalBackend, load_task
from kernel_scientist.evaluator.sandbox._prepare import dry_pass
task = load_task(sys.argv[1])
source = "def custom_kernel(data):\n    while True:\n        try:\n            while True:\n                pass\n        except Exception:\n            pass\n"
req = LocalBackend(task, device="cpu", gpus=["cpu"], spare=False).request(source, 0)
began = time.perf_counter()
phases, ref = dry_pass(req, Path(sys.argv[2]), budget_s=1.0)
took = time.perf_counter() - began
assert ref is not None and phases["prepare_calls"] == 0 and 1.0 <= took < 5.0, (phases, took)
print("budget ok")
"""


# A real compile for an H100-class GPU (sm_90, Triton's own ptxas) with no GPU here: Triton is told
# of a CUDA device by a stand-in driver that answers its queries and can load nothing, so every
# compile is real and nothing runs.
_PARALLEL = r"""
import sys, threading
from pathlib import Path
import msgspec, torch
import triton
from triton.backends.compiler import GPUTarget
import triton.compiler
from triton.runtime import driver
from kernel_scientist.blackboard import Shape
from kernel_scientist.evaluator import LocalBackend, load_task
from kernel_scientist.evaluator.sandbox._prepare import dry_pass

class NoGpu:
    def get_current_device(self): return 0
    def get_current_stream(self, device=None): return 0
    def get_current_target(self): return GPUTarget("cuda", 90, 32)
    def get_active_torch_device(self): return torch.device("cpu")
    def map_python_to_cpp_type(self, ty): return ty

driver.set_active(NoGpu())
threads, compile = set(), triton.compiler.compile
def counted(*args, **kwargs):
    threads.add(threading.current_thread().name)
    return compile(*args, **kwargs)
triton.compiler.compile = counted  # where a JITFunction finds its compiler on its first launch
task = load_task(sys.argv[1])
task = msgspec.structs.replace(task, tests=task.check_shapes[:2], benchmarks=[Shape(64, 64, 128, 7)])
source = '''
import triton
import triton.language as tl

@triton.jit
def fill(c_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(c_ptr + offs, tl.zeros((BLOCK,), tl.float32).to(c_ptr.dtype.element_ty), mask=offs < n)

def custom_kernel(data):
    c = data[-1]
    for block in (64, 128, 256, 512):  # four settings, as a per-shape tuning space would have
        fill[(triton.cdiv(c.numel(), block),)](c, c.numel(), BLOCK=block)
    return c
'''
workers = int(sys.argv[3])
req = msgspec.structs.replace(LocalBackend(task, device="cpu", spare=False).request(source, 0), compile_workers=workers)
phases, ref = dry_pass(req, Path(sys.argv[2]))
cubins = sorted(p.name for p in Path(sys.argv[4]).rglob("*.cubin"))
left = [t.name for t in threading.enumerate() if t.name.startswith("ks-compile")]
print(int(phases["prepare_calls"]), len(cubins), ",".join(sorted({t.split("_")[0] for t in threads})), len(left))
"""


def _child(code, *args, cwd, interpret=True, **env_vars):
    env = {**os.environ, **env_vars}
    env.pop("TRITON_INTERPRET", None)
    if interpret:
        env["TRITON_INTERPRET"] = "1"
    return subprocess.run([sys.executable, "-c", code, *args], env=env, cwd=cwd, capture_output=True, text=True)


def test_a_dry_pass_runs_no_kernel_and_changes_no_tensor(tmp_path):
    """In a child process: importing Triton here would break the interpreted kernels of other tests."""
    done = _child(_DRY, cwd=tmp_path)
    assert done.returncode == 0 and done.stdout.split() == ["dry", "ok"], done.stderr[-2000:]


def test_a_candidate_that_never_returns_ends_its_dry_pass_at_the_budget(tmp_path):
    done = _child(_LOOPS, str(TASK), str(tmp_path), cwd=tmp_path)
    assert done.returncode == 0 and done.stdout.split() == ["budget", "ok"], done.stderr[-2000:]


@pytest.mark.parametrize("workers", [1, 3])
def test_a_dry_pass_compiles_a_candidates_settings_side_by_side_on_its_threads(tmp_path, workers):
    """Four settings: with three workers each compiles on the pool, and the pass ends only once
    all four have, leaving no thread behind; with one they compile where they are launched (and,
    as loading one needs a GPU, each call ends at its first launch: one setting compiled)."""
    cache = tmp_path / "cache"
    args = (str(TASK), str(tmp_path), str(workers), str(cache))
    done = _child(_PARALLEL, *args, cwd=tmp_path, interpret=False, TRITON_CACHE_DIR=str(cache))
    assert done.returncode == 0, done.stderr[-3000:]
    calls, cubins, threads, left = done.stdout.split()
    if workers == 1:
        assert (calls, cubins, threads, left) == ("0", "1", "MainThread", "0"), done.stdout
    else:
        assert (calls, cubins, threads, left) == ("2", "4", "ks-compile", "0"), done.stdout  # two distinct shapes


async def test_a_candidate_nobody_prepared_has_its_compile_pass_in_its_own_run(small_task):
    """With compile threads and nothing prepared, the run makes the same dry pass first (its
    phase is the run's own, not "ahead"), and the verdict is the plain run's."""
    with LocalBackend(small_task, device="cpu", timeout_s=60, max_calls=3, spare=False, compile_workers=2) as backend:
        passed = await backend.evaluate(small_task.seed_source, submission_id=1, secret_seed=5)
    with _backend(small_task, ahead=0) as backend:
        plain = await backend.evaluate(small_task.seed_source, submission_id=1, secret_seed=5)
    assert passed.outcome is Outcome.PASSED and passed.reason == plain.reason, passed.reason
    assert passed.phases["compile_calls"] == 2 and "compile pass" in passed.provenance.notes
    assert "compiled ahead" not in passed.provenance.notes and not metrics.started_early(passed.phases)
    assert "compile_s" not in plain.phases


def test_the_compile_threads_share_the_hosts_cores_but_one():
    assert compile_threads(3, cpus=16) == 5 and compile_threads(1, cpus=64) == 8
    assert compile_threads(3, cpus=2) == 1 and compile_threads(0, cpus=1) == 1


def test_a_campaign_on_the_local_backend_evaluates_candidates_compiled_ahead(tmp_path, monkeypatch):
    """The whole path: the evaluator agent's hints (at each start and whenever the queue changes),
    the backend's prepared processes, its answer to which queued ones are compiled (asked at each
    lease), and their notes in the blackboard."""
    from kernel_scientist.blackboard import load_scenario, open_existing

    from kernel_scientist import campaign

    asked = []
    compiled_ahead = LocalBackend.compiled_ahead

    def spy(self, source):
        asked.append(compiled_ahead(self, source))
        return asked[-1]

    monkeypatch.setattr(LocalBackend, "compiled_ahead", spy)
    small_task_folder(tmp_path)
    (tmp_path / "local.toml").write_text(small_campaign("prepare-small", "local", 0.008, prepare_ahead=2))
    others = _harness_children()
    campaign.start(load_scenario(tmp_path / "local.toml"), tmp_path / "run.sqlite")
    with open_existing(tmp_path / "run.sqlite") as board:
        reports = [e.report for e in board.evaluations()]
    assert True in asked  # some lease found a queued candidate compiled
    assert len(reports) >= 3 and reports[0].outcome is Outcome.PASSED  # the seed
    ahead = [r for r in reports if "compiled ahead" in r.provenance.notes]
    assert ahead and all(r.phases["prepare_calls"] == 3 for r in ahead)  # 2 tests + 2 ranked, one shared
    assert not _harness_children(others)  # every prepared process ended with the campaign
