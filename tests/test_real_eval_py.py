"""scripts/real_eval_py.py, which runs GPU MODE's own eval.py on a submission for the benchmark
script: the run directory, the POPCORN output read back, and every way eval.py can fail. GPU
MODE's eval.py needs a GPU; here a stand-in with its command line and output format runs on the
CPU, on a small folder written for the test."""

from __future__ import annotations

import sys

from _support import ROOT, script

sys.path.insert(0, str(ROOT / "scripts"))

import real_eval_py  # noqa: E402
from kernel_scientist.blackboard.records import Shape  # noqa: E402

_STAND_IN = """
import os, sys, time
from reference import check_implementation, generate_input
from submission import custom_kernel

assert sys.argv[1] == "leaderboard"
out = os.fdopen(int(os.environ["POPCORN_FD"]), "w")
{before}
for i, line in enumerate(open(sys.argv[2]).read().splitlines()):
    args = {{k.strip(): int(v) for k, v in (part.split(":") for part in line.split(";"))}}
    print(f"benchmark.{{i}}.spec: {{line}}", file=out)
    data = generate_input(**args)
    t0 = time.perf_counter_ns()
    output = custom_kernel(data)
    t = time.perf_counter_ns() - t0
    good, message = check_implementation(data, output)
    if not good:
        print(f"benchmark.{{i}}.status: fail", file=out)
        print(f"benchmark.{{i}}.error: {{message}}", file=out)
        break
    print(f"benchmark.{{i}}.runs: 1", file=out)
    print(f"benchmark.{{i}}.mean: {{t + 1000}}", file=out)
print("check: pass", file=out)
"""

_REFERENCE = """
import torch

def generate_input(size, seed):
    return (torch.full((size,), float(seed)),)

def check_implementation(data, output):
    ok = bool(torch.equal(output, data[0] * 2))
    return ok, "" if ok else f"size {data[0].numel()}: wrong"
"""

SHAPES = [Shape(args=(("size", n),), seed=n) for n in (4, 8, 16)]


def _folder(tmp_path, before=""):
    (tmp_path / "eval.py").write_text(_STAND_IN.format(before=before))
    (tmp_path / "reference.py").write_text(_REFERENCE)
    (tmp_path / "task.py").write_text("input_t = tuple\n")
    modules = {"reference": str(tmp_path / "reference.py"), "task": str(tmp_path / "task.py")}
    return tmp_path / "eval.py", modules


def test_the_shapes_file_is_eval_pys_format():
    assert real_eval_py.shape_lines(SHAPES[:2]) == "size: 4; seed: 4\nsize: 8; seed: 8\n"
    assert real_eval_py.shape_lines([Shape(m=64, n=128, k=256, seed=3)]) == "m: 64; n: 128; k: 256; seed: 3\n"


def test_a_passing_submission_gets_each_shapes_mean(tmp_path):
    eval_py, modules = _folder(tmp_path)
    rows = real_eval_py.run(eval_py, modules, "def custom_kernel(data):\n    return data[0] * 2\n", SHAPES)
    assert [r["failure"] for r in rows] == [None, None, None]
    assert all(r["us"] >= 1.0 and r["runs"] == 1 for r in rows)  # ns read back as us (+1000 ns above)


def test_a_failure_names_its_shape_and_the_rest_have_no_time(tmp_path):
    eval_py, modules = _folder(tmp_path)
    wrong_at_8 = "def custom_kernel(data):\n    return data[0] * (3 if data[0].numel() == 8 else 2)\n"
    first, second, third = real_eval_py.run(eval_py, modules, wrong_at_8, SHAPES)
    assert first["us"] is not None and first["failure"] is None
    assert second["us"] is None and second["failure"] == "size 8: wrong"
    assert third["us"] is None and "stopped before this shape" in third["failure"]


def test_eval_py_crashing_or_hanging_fails_every_shape_without_a_time(tmp_path):
    eval_py, modules = _folder(tmp_path, before="raise RuntimeError('no GPU here')")
    rows = real_eval_py.run(eval_py, modules, "def custom_kernel(data):\n    return data[0] * 2\n", SHAPES)
    assert all(r["us"] is None and "eval.py exited 1" in r["failure"] and "no GPU here" in r["failure"] for r in rows)
    eval_py, modules = _folder(tmp_path, before="time.sleep(30)")
    rows = real_eval_py.run(eval_py, modules, "def custom_kernel(data):\n    return data[0] * 2\n", SHAPES, timeout_s=2)
    assert all(r["us"] is None and "longer than 2 s" in r["failure"] for r in rows)


def test_the_benchmark_refuses_a_missing_eval_py_in_one_line(tmp_path):
    done = script("bench_leaderboard.py", "--eval-py", str(tmp_path / "eval.py"), cwd=tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert f"--eval-py {tmp_path / 'eval.py'}: not a file" in done.stderr
