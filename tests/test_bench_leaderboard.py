"""scripts/bench_leaderboard.py's shapes nobody tuned for, and its timing order (the script needs a GPU; its
timing loop runs here on the CPU)."""

from __future__ import annotations

import sys

from _support import ROOT, script

sys.path.insert(0, str(ROOT / "scripts"))

import bench_leaderboard  # noqa: E402


def test_unseen_shapes_cover_the_promised_range_reproducibly():
    shapes = bench_leaderboard.unseen_shapes(200, seed=7)
    assert shapes == bench_leaderboard.unseen_shapes(200, seed=7) != bench_leaderboard.unseen_shapes(200, seed=8)
    assert all(m % 64 == 0 and n % 64 == 0 and k % 128 == 0 for m, n, k in shapes)
    assert all(64 <= m <= 8192 and 64 <= n <= 32768 and 128 <= k <= 16384 for m, n, k in shapes)
    small = sum(m * n * k < 1024 * 1024 * 1024 for m, n, k in shapes)
    assert 0.2 < small / len(shapes) < 0.9  # log-uniform: small and large shapes alike


def test_unseen_shapes_need_a_gemm_task(tmp_path):
    done = script(
        "bench_leaderboard.py", "--unseen", "3", "--task", str(ROOT / "tests" / "problems" / "stencil"), cwd=tmp_path
    )
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert "--unseen draws m, n, k shapes: it needs a GEMM task" in done.stderr


_LOGGING_KERNEL = """
def custom_kernel(data):
    a, b = data
    with open({log!r}, "a") as f:
        f.write("{name} " + str(a.numel()) + "\\n")
    return (a.float() + b.float()).to(a.dtype)
"""


_ORDER_CHECK = r"""
import argparse, itertools, sys
from pathlib import Path
root, tmp = Path(sys.argv[1]), Path(sys.argv[2])
sys.path.insert(0, str(root / "scripts"))
import bench_leaderboard
import msgspec
from kernel_scientist.blackboard.records import Shape
from kernel_scientist.evaluator import load_task
from kernel_scientist.evaluator.sandbox import GpuRequest, import_reference

log = tmp / "calls.log"
files = [tmp / f"{name}.py" for name in ("a", "b", "c")]
task = load_task(root / "tests" / "problems" / "vecadd")
sizes = (64, 100, 300, 500)
task = msgspec.structs.replace(task, benchmarks=[Shape(args=(("size", n),), seed=n) for n in sizes])
ref = import_reference(task.modules)
# the files loaded as _methods loads them (not _methods itself: vecadd's seed imports task.py)
methods = {path.stem: bench_leaderboard._kernel_from_source(str(path), path.read_text()) for path in files}
args = argparse.Namespace(same_inputs=True, do_bench=False)
req = GpuRequest(source="", modules=task.modules, tests=[], benchmarks=task.benchmarks, max_calls=3, device="cpu",
                 meta=task.meta)
rows = bench_leaderboard._time_all(methods, task, ref, req, None, args)

calls = [tuple(line.split()) for line in log.read_text().splitlines()]
runs = [key for key, _ in itertools.groupby(calls)]  # one entry per unbroken run of calls
order = ["a", "b", "c"]
assert runs == [(name, str(n)) for i, n in enumerate(sizes) for name in (order if i % 2 == 0 else order[::-1])], runs
assert len(calls) == len(sizes) * 3 * 3 * (1 + 3)  # warm-up + 3 timed calls: eval.py's loop, fresh, same inputs
assert list(rows) == ["a", "b", "c"]  # the JSON's and table's layout: by method, shapes in order
for r in rows.values():
    assert [x["shape"] for x in r] == [s.label() for s in task.benchmarks]
    assert all(x["passed"] and x["calls"] == 3 == x["eval_py_calls"] and "same_inputs_us" in x for x in r)
"""


def test_methods_are_timed_shape_by_shape_in_alternating_order(tmp_path):
    """The host's speed drifts within a run: every method is timed on a shape before the next
    shape, the order reversed on every other shape, and each method's calls on a shape (warm-up,
    timed calls, the same-inputs diagnosis) stay together. In its own process: the harness's
    imports there must not change how later tests' kernels run in Triton's interpreter."""
    import subprocess

    log = tmp_path / "calls.log"
    for name in ("a", "b", "c"):
        (tmp_path / f"{name}.py").write_text(_LOGGING_KERNEL.format(log=str(log), name=name))
    done = subprocess.run(
        [sys.executable, "-c", _ORDER_CHECK, str(ROOT), str(tmp_path)], capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]


_EVAL_PY_LOOP = r"""
import sys
from pathlib import Path
root = Path(sys.argv[1])
import msgspec
from kernel_scientist.blackboard.records import Shape
from kernel_scientist.evaluator import load_task
from kernel_scientist.evaluator.sandbox import GpuRequest, import_reference, time_shape_eval_py

task = load_task(root / "tests" / "problems" / "vecadd")
ref = import_reference(task.modules)
shape = Shape(args=(("size", 300),), seed=5)
calls = []

def right(data):
    calls.append(1)
    a, b = data
    return (a.float() + b.float()).to(a.dtype)

def wrong_from_third(data):  # right on the warm-up and the first two timed calls
    calls.append(1)
    a, b = data
    return (a.float() + b.float() + (len(calls) > 3)).to(a.dtype)

def req(**kw):
    return GpuRequest(source="", modules=task.modules, tests=[], benchmarks=[shape], device="cpu", meta=task.meta, **kw)

times, failure = time_shape_eval_py(right, ref, shape, req(max_calls=50, rel_stderr=1.0))
assert failure is None and len(times) == 3 and len(calls) == 4, (failure, times)  # warm-up + the fewest calls
assert all(t > 0 for t in times)
calls.clear()
times, failure = time_shape_eval_py(right, ref, shape, req(max_calls=7, rel_stderr=0.0))
assert failure is None and len(times) == 7  # no stop rule met: every call
calls.clear()
times, failure = time_shape_eval_py(wrong_from_third, ref, shape, req(max_calls=6, rel_stderr=0.0))
assert len(times) == 6, times  # timing goes on after a failure
assert failure.startswith("wrong output on") and "during timing (call 3)" in failure, failure
"""


def test_eval_py_loop_times_every_call_and_names_the_first_failure():
    """The benchmark's headline loop (GPU MODE eval.py's leaderboard mode) on the CPU: the fewest
    calls when the stop rule is met at once, every call when it never is, and a wrong output on a
    later call named with its call number while the timing goes on."""
    import subprocess

    done = subprocess.run([sys.executable, "-c", _EVAL_PY_LOOP, str(ROOT)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]


def test_a_submission_importing_the_tasks_own_module_loads_and_a_broken_one_is_one_line(tmp_path):
    """A public folder's submission does ``from task import input_t``: the benchmark serves the
    task's modules beside it, as a run directory does. A file that raises on import, or a --skip
    of no anchor, ends the run with one line naming it."""
    code = (
        "import sys; sys.path.insert(0, sys.argv[1] + '/scripts'); import bench_leaderboard as b\n"
        "from kernel_scientist.evaluator import load_task\n"
        "task = load_task(sys.argv[1] + '/tests/problems/vecadd')\n"
        "fn = b._kernel_from_source('t', 'from task import input_t\\ndef custom_kernel(data):\\n    return data\\n', task.modules)\n"
        "print(fn((1, 2)))\n"
    )
    import subprocess

    done = subprocess.run([sys.executable, "-c", code, str(ROOT)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.strip() == "(1, 2)", done.stderr[-2000:]
    broken = tmp_path / "broken.py"
    broken.write_text("raise RuntimeError('not on this machine')\n")
    done = script("bench_leaderboard.py", str(broken), cwd=tmp_path)
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert f"{broken} failed to import: RuntimeError: not on this machine" in done.stderr
    done = script("bench_leaderboard.py", "--skip", "nope", cwd=tmp_path)
    assert done.returncode != 0 and "Traceback" not in done.stderr and "--skip nope: not an anchor" in done.stderr
    done = script("bench_leaderboard.py", "--skip", "reference,scaled_mm", cwd=tmp_path)  # fine, but no GPU here
    assert done.returncode != 0 and "Traceback" not in done.stderr and "no CUDA or ROCm GPU here" in done.stderr
