"""scripts/probe_spread.py, every call of eval.py's leaderboard loop with what happened inside it,
in its CPU dry-run mode (Triton's interpreter, real subprocesses)."""

from __future__ import annotations

import json
import math
import shutil
import statistics

import pytest
from _support import SEED_FILE, interpreted_script

SHAPE = "64x64x128"  # the smallest of the FP8 task's test shapes: a couple of seconds in the interpreter
VARIANTS = ("eval_py", "no_gc", "reuse", "no_check")
ROW_FIELDS = {
    "file", "variant", "shape", "calls", "mean_us", "median_us", "best_us", "worst_us", "call_median_us",
    "cpu_median_us", "slow", "slow_excess_us", "slow_with_gc", "slow_with_switch", "slow_in_host", "gc_inside",
    "records",
}  # fmt: skip


def _spread(*args, cwd):
    return interpreted_script("probe_spread.py", *args, cwd=cwd)


def _dry_run(files, calls, variants, out, cwd, shapes=SHAPE):
    return _spread(
        *map(str, files), "--device", "cpu", "--calls", str(calls), "--shapes", shapes, "--variants", variants,
        "--out", str(out), cwd=cwd,
    )  # fmt: skip


def _check_row(row, calls):
    """One file/variant/shape row: its per-call records and the summary made of them."""
    assert set(row) == ROW_FIELDS
    assert row["shape"] == SHAPE and row["calls"] == calls == len(row["records"])
    for r in row["records"]:
        assert set(r) == {"us", "call_us", "cpu_us", "gc", "ivcsw"}
        # the host part (until custom_kernel returned) lies inside the whole call
        assert 0 < r["call_us"] <= r["us"] and r["cpu_us"] >= 0 and r["ivcsw"] >= 0
        assert isinstance(r["gc"], list) and all(g in (0, 1, 2) for g in r["gc"])
    times = [r["us"] for r in row["records"]]
    assert row["best_us"] == round(min(times), 2) and row["worst_us"] == round(max(times), 2)
    assert row["mean_us"] == round(statistics.fmean(times), 2)
    assert row["median_us"] == round(statistics.median(times), 2)
    assert row["gc_inside"] == sum(len(r["gc"]) for r in row["records"])
    assert 0 <= row["slow"] <= calls
    assert max(row["slow_with_gc"], row["slow_with_switch"], row["slow_in_host"]) <= row["slow"]


def test_it_keeps_every_call_of_eval_py_loop(tmp_path):
    out = tmp_path / "spread.json"
    done = _dry_run([SEED_FILE], 2, "eval_py", out, tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(out.read_text())
    assert result["device"] == "cpu (Triton interpreter)" and result["calls"] == 2
    assert {"python", "torch", "triton"} <= set(result)  # the versions, as the harness reports them
    (row,) = result["rows"]
    assert row["file"] == str(SEED_FILE) and row["variant"] == "eval_py"
    _check_row(row, 2)
    # one shape: the geomean over the shapes is that shape's own figures
    assert result["summary"] == {f"{SEED_FILE} eval_py": {k: row[k] for k in ("mean_us", "median_us", "best_us")}}
    lines = done.stdout.splitlines()
    (line,) = [x for x in lines if f" {SHAPE}: mean " in x]
    assert line.split()[:2] == [SEED_FILE.name, "eval_py"] and " gc inside " in line
    assert "geomean over the shapes (us):" in lines
    assert any(x.split(":")[0].strip() == f"{SEED_FILE} eval_py" for x in lines)


def test_every_variant_of_every_file(tmp_path):
    """Two files of one name in two folders, the four variants: a row per file (named by its
    path, so the two stay apart), variant and shape, in that order, and no collection inside any
    call of the variant that disables the collector."""
    second = tmp_path / "other" / SEED_FILE.name
    second.parent.mkdir()
    shutil.copy(SEED_FILE, second)
    out = tmp_path / "spread.json"
    done = _dry_run([SEED_FILE, second], 2, ",".join(VARIANTS), out, tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(out.read_text())
    rows = result["rows"]
    assert [(r["file"], r["variant"]) for r in rows] == [
        (f, v) for f in (str(SEED_FILE), str(second)) for v in VARIANTS
    ]
    for row in rows:
        _check_row(row, 2)
    for row in (r for r in rows if r["variant"] == "no_gc"):
        assert row["gc_inside"] == 0 and all(r["gc"] == [] for r in row["records"])
    assert list(result["summary"]) == [f"{r['file']} {r['variant']}" for r in rows]
    for g in result["summary"].values():
        assert all(math.isfinite(g[k]) and g[k] > 0 for k in ("mean_us", "median_us", "best_us"))
    assert sum(f" {SHAPE}: mean " in x for x in done.stdout.splitlines()) == len(rows)


def _fails_in_one_line(done, *expected, code=2):
    """Exit code ``code``, a single line on stderr naming the problem, no traceback."""
    assert done.returncode == code, (done.returncode, done.stderr[-2000:])
    assert "Traceback" not in done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("probe_spread: ") and all(e in line for e in expected), line


def _no_output(tmp_path, out):
    assert not out.is_file() and not (tmp_path / "probe_spread.json").exists()


@pytest.mark.parametrize(
    "change, expected",
    [
        ({"files": ["nope.py"]}, ("nope.py", "is not a file")),
        ({"variants": "eval_py,bogus"}, ("unknown variant bogus", *VARIANTS)),
        ({"variants": ","}, ("--variants names none", *VARIANTS)),
        ({"shapes": f"{SHAPE},1x2x3"}, ("no shape 1x2x3",)),
        ({"calls": "0"}, ("--calls must be at least 1",)),
        ({"calls": "-1"}, ("--calls must be at least 1",)),
        ({"out": "no/such/dir.json"}, ("cannot write --out", "dir.json", "is not a folder")),
        ({"out": "."}, ("cannot write --out", "it is a folder")),
    ],
    ids=[
        "missing-file",
        "unknown-variant",
        "no-variant",
        "unknown-shape",
        "calls-0",
        "calls-negative",
        "out-folder",
        "out-is-folder",
    ],
)
def test_bad_input_is_one_line_before_any_loop(tmp_path, change, expected):
    given = {"files": [str(SEED_FILE)], "calls": "2", "variants": "eval_py", "shapes": SHAPE, "out": "spread.json"}
    given.update(change)
    done = _dry_run(given["files"], given["calls"], given["variants"], given["out"], tmp_path, given["shapes"])
    _fails_in_one_line(done, *expected)
    assert "geomean" not in done.stdout  # refused before the loops, not after them
    _no_output(tmp_path, tmp_path / given["out"])


@pytest.mark.parametrize(
    "source, expected",
    [
        ('raise RuntimeError("boom at import")\n', ("failed to import", "RuntimeError: boom at import")),
        ("import no_such_module_for_probe_spread\n", ("failed to import", "ModuleNotFoundError")),
        ("def custom_kernel(data:\n", ("failed to import", "SyntaxError")),
        ("import sys\nsys.exit(3)\n", ("failed to import", "SystemExit: 3")),
        ("x = 1\n", ("defines no custom_kernel(data)",)),
    ],
    ids=["raises", "missing-module", "syntax-error", "exits", "no-kernel"],
)
def test_a_submission_that_does_not_load_is_one_line(tmp_path, source, expected):
    bad = tmp_path / "bad.py"
    bad.write_text(source)
    out = tmp_path / "spread.json"
    done = _dry_run([bad], 2, "eval_py", out, tmp_path)
    _fails_in_one_line(done, "bad.py", *expected)
    _no_output(tmp_path, out)


def test_a_wrong_output_is_one_line(tmp_path):
    """The untimed first call is checked as eval.py checks it: a wrong kernel stops the probe."""
    wrong = tmp_path / "wrong.py"
    wrong.write_text("def custom_kernel(data):\n    return data[-1]\n")  # the untouched output buffer
    out = tmp_path / "spread.json"
    done = _dry_run([wrong], 2, "eval_py", out, tmp_path)
    _fails_in_one_line(done, f"wrong output on {SHAPE}", code=1)
    _no_output(tmp_path, out)


def test_no_gpu_is_one_line(tmp_path):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a GPU is here: the default --device cuda would run")
    out = tmp_path / "spread.json"
    done = _spread(str(SEED_FILE), "--calls", "2", "--shapes", SHAPE, "--out", str(out), cwd=tmp_path)
    _fails_in_one_line(done, "no GPU here", "--device cpu")
    _no_output(tmp_path, out)
