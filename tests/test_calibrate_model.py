"""scripts/calibrate_model.py: ``--write`` rewrites the model's fitted constants and their
provenance in place (a multi-line ``FIT_PROVENANCE`` included), leaving a module that imports,
carries the new values and is already in ruff's format."""

from __future__ import annotations

import gzip
import importlib.util
import json
import re
import shutil
import subprocess
import sys

from _support import ROOT, script


def _small_sweep(tmp_path, shapes: int = 2):
    """The calibration sweep cut to its first ``shapes`` shapes: quick to fit."""
    data = json.loads(gzip.decompress((ROOT / "scripts" / "calibration" / "calib-sweep.json.gz").read_bytes()))
    keep = list(dict.fromkeys(r["shape"] for r in data["rows"]))[:shapes]
    out = tmp_path / "small-sweep.json"
    out.write_text(json.dumps({"rows": [r for r in data["rows"] if r["shape"] in keep]}))
    return out


def _load(path):
    spec = importlib.util.spec_from_file_location(f"model_copy_{abs(hash(str(path)))}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_write_rewrites_a_copy_of_the_model_that_still_imports_with_the_fitted_values(tmp_path):
    model = tmp_path / "_model.py"
    shutil.copy(ROOT / "evaluator" / "model" / "_timing.py", model)
    before = _load(model)
    sweep = _small_sweep(tmp_path)
    assert "FIT_PROVENANCE = (\n" in model.read_text()  # the layout the old --write broke: several lines
    for _ in range(2):  # and the second run rewrites what the first one wrote
        done = script(
            "calibrate_model.py",
            "--data",
            str(sweep),
            "--fit",
            "--iters",
            "2",
            "--write",
            "--model",
            str(model),
            "--no-submissions",
            timeout=600,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        after = _load(model)
        fitted = dict(re.findall(r"(\w+)=([0-9.e+-]+)", done.stdout.split("fit: loss")[1].splitlines()[0]))
        assert fitted and all(getattr(after.HOPPER, k) == float(v) for k, v in fitted.items())
        assert after.HOPPER.host_launch_us == before.HOPPER.host_launch_us  # measured, never fitted
        assert "small-sweep.json" in after.FIT_PROVENANCE and "held out" in after.FIT_PROVENANCE
        assert after.MODEL_VERSION in after.FIT_PROVENANCE
    assert after.HOPPER != before.HOPPER
    assert (ROOT / "evaluator" / "model" / "_timing.py").read_text() != model.read_text()  # the package's own untouched
    ruff = [sys.executable, "-m", "ruff", "format", "--check", "--config", str(ROOT / "pyproject.toml"), str(model)]
    fmt = subprocess.run(ruff, capture_output=True, text=True)
    assert fmt.returncode == 0, fmt.stdout + fmt.stderr
