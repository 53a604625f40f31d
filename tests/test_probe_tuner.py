"""scripts/probe_tuner.py, which checks a submission's in-submission tuner on a GPU: its refusals,
each one line, on this machine (the probe itself needs a GPU)."""

from __future__ import annotations

from _support import SEED_FILE, script

from kernel_scientist import knowledge


def _refused(done, words: str) -> None:
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("probe_tuner: ") and words in done.stderr


def test_a_missing_file_a_kernel_without_a_tuner_and_no_gpu_are_one_line_each(tmp_path):
    _refused(script("probe_tuner.py", str(tmp_path / "nope.py"), cwd=tmp_path), "no such file")
    _refused(script("probe_tuner.py", str(SEED_FILE), cwd=tmp_path), "carries no in-submission tuner")
    tuner = {t.name: t for t in knowledge.catalogue("nvidia")}["in_submission_tuning"]
    tuned = tmp_path / "tuned.py"
    tuned.write_text(tuner.apply(SEED_FILE.read_text(), {"space": "tiles3"}))
    _refused(
        script("probe_tuner.py", str(tuned), "--out", str(tmp_path / "p.json"), cwd=tmp_path), "no CUDA or ROCm GPU"
    )
    assert not (tmp_path / "p.json").exists()
