"""scripts/sweep_h200.py, the calibration sweep for one GPU session (its kernel forms in scripts/_gemm_forms.py), in
its CPU dry-run mode."""

from __future__ import annotations

import json

from _support import script


def _sweep(*args, cwd, interpret: bool = True):
    return script("sweep_h200.py", *args, cwd=cwd, timeout=600, env={"TRITON_INTERPRET": "1" if interpret else "0"})


def test_a_dry_run_times_every_kind_of_launch_and_the_submissions(tmp_path):
    out = tmp_path / "sweep.json"
    done = _sweep("--dry-run", "--out", str(out), cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    data = json.loads(out.read_text())
    assert set(data["submissions"]) == {"reference", "seed"}
    seed = data["submissions"]["seed"]
    assert all(r["passed"] for r in seed["shapes"].values()) and seed["geomean_do_bench_us"] > 0
    rows = data["rows"]
    kinds = {(r["form"], r["layout"], r["group_m"], r["split_k"] > 1) for r in rows}
    assert {
        ("precise", "strided", 8, False),
        ("precise", "kmajor", 8, False),
        ("fp16", "strided", 8, False),
        ("fp16", "kmajor", 8, False),
        ("precise", "strided", 1, False),
    } <= kinds
    assert any(sk for _, _, _, sk in kinds)
    # fp8 precise and fp16 forms are exact enough in the interpreter to pass the task's check.
    assert all(r["passed"] and r["us"] > 0 for r in rows if r["form"] in ("precise", "fp16"))
    assert set(data["copy"]) == {r["shape"] for r in rows} and set(data["host"]) >= {"empty call"}


def test_a_dry_run_without_the_interpreter_says_how_to_fix_it(tmp_path):
    done = _sweep("--dry-run", "--out", str(tmp_path / "x.json"), cwd=tmp_path, interpret=False)
    assert done.returncode != 0 and "TRITON_INTERPRET=1" in done.stderr and "Traceback" not in done.stderr
