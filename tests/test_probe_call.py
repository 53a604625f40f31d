"""scripts/probe_call.py, the ladder of a timed call's host work, in its CPU dry-run mode."""

from __future__ import annotations

import json

from _support import SEED_FILE, interpreted_script


def _probe(*args, cwd):
    return interpreted_script("probe_call.py", *args, cwd=cwd)


def test_it_times_each_rung_in_the_harness_pattern(tmp_path):
    done = _probe(
        str(SEED_FILE),
        "--device",
        "cpu",
        "--calls",
        "2",
        "--shapes",
        "64x64x128",
        "--out",
        str(tmp_path / "p.json"),
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    (row,) = json.loads((tmp_path / "p.json").read_text())["rows"]
    assert row["shape"] == "64x64x128" and row["calls"] == 2
    # no compiled launchers in the interpreter: the direct and C rungs and the stamped replay need a GPU
    assert set(row["rungs"]) == {"noop", "signature", "empty_jit", "submission", "twice", "spin", "no_sync"}
    for rung in row["rungs"].values():
        assert 0 < rung["median_us"] and 0 < rung["mean_us"]
    assert row["rungs"]["noop"]["median_us"] < row["rungs"]["submission"]["median_us"]


def test_bad_input_is_one_line(tmp_path):
    done = _probe(str(tmp_path / "nope.py"), "--device", "cpu", cwd=tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr and "is not a file" in done.stderr
    done = _probe(str(SEED_FILE), "--device", "cpu", "--shapes", "1x2x3", cwd=tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr and "no shape 1x2x3" in done.stderr


def test_eval_py_protocol_checks_after_every_rung(tmp_path):
    """In eval.py's pattern every rung, the no-op too, is followed by the folder's check (the
    host caches then start each call as cold as a real call's); no rung fails the probe."""
    done = _probe(
        str(SEED_FILE), "--device", "cpu", "--calls", "2", "--shapes", "64x64x128", "--protocol", "eval_py",
        "--out", str(tmp_path / "p.json"), cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads((tmp_path / "p.json").read_text())
    assert result["protocol"] == "eval_py"
    (row,) = result["rows"]
    assert set(row["rungs"]) == {"noop", "signature", "empty_jit", "submission", "twice", "spin", "no_sync"}
    assert row["rungs"]["noop"]["median_us"] < row["rungs"]["submission"]["median_us"]
