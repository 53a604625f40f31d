"""scripts/probe_host.py, the host-path profiler for a GPU session, in its CPU dry-run mode."""

from __future__ import annotations

import json

from _support import SEED_FILE, interpreted_script


def _probe(*args, cwd):
    return interpreted_script("probe_host.py", *args, cwd=cwd)


def test_it_profiles_the_calls_of_a_submission(tmp_path):
    done = _probe(
        str(SEED_FILE),
        "--device",
        "cpu",
        "--smallest-tests",
        "--calls",
        "2",
        "--shapes",
        "1",
        "--out",
        str(tmp_path / "probe.json"),
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    (row,) = json.loads((tmp_path / "probe.json").read_text())["rows"]
    assert row["shape"] == "64x64x128" and row["calls"] == 2
    assert set(row["modes"]) == {"harness", "no_flush", "reused_inputs", "no_sync_before", "profiled"}
    for mode in row["modes"].values():
        assert 0 < mode["median"] <= mode["max"] and mode["gc_pause_us"] >= 0
    assert "custom_kernel" in row["profile"]


def test_a_missing_file_is_one_line(tmp_path):
    done = _probe(str(tmp_path / "nope.py"), "--device", "cpu", cwd=tmp_path)
    assert done.returncode != 0 and "Traceback" not in done.stderr and "is not a file" in done.stderr
