"""scripts/ holds maintained tools only: each is named by a test, the device-session shell scripts
parse and refuse a call without their arguments, and the main-job benchmark prints its figures with
their anchors from the same run."""

from __future__ import annotations

import json
import re
import subprocess

import pytest
from _support import ROOT, SCENARIOS, script

SCRIPTS = sorted(p for p in (ROOT / "scripts").iterdir() if p.is_file())
SHELL = ["gpu_env.sh", "gpu_folders.sh", "gpu_ray.sh", "gpu_session.sh"]  # the device sessions


def test_every_script_is_a_maintained_tool_named_by_a_test():
    tests = "\n".join(p.read_text() for p in (ROOT / "tests").glob("*.py"))
    unnamed = [p.name for p in SCRIPTS if not re.search(rf"\b{re.escape(p.name)}\b|\b{re.escape(p.stem)}\b", tests)]
    assert not unnamed, f"scripts no test names (a one-off exploration leaves the repository): {unnamed}"


def test_the_device_sessions_listed_here_are_the_shell_scripts():
    assert sorted(p.name for p in SCRIPTS if p.suffix == ".sh") == SHELL


@pytest.mark.parametrize("name", SHELL)
def test_each_device_script_parses(name):
    done = subprocess.run(["bash", "-n", str(ROOT / "scripts" / name)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize(
    "name, says",
    [("gpu_session.sh", "out dir"), ("gpu_folders.sh", "out dir"), ("gpu_ray.sh", "out dir")],
)
def test_a_device_session_without_its_arguments_refuses_and_writes_nothing(tmp_path, name, says):
    done = subprocess.run(["bash", str(ROOT / "scripts" / name)], cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode != 0 and says in done.stderr, done.stderr
    assert not any(tmp_path.iterdir())


def test_the_main_job_benchmark_prints_its_figures_with_their_anchors(tmp_path):
    done = script(
        "bench_main_job.py",
        "--scenario",
        str(SCENARIOS / "smoke.toml"),
        "--set",
        "campaign.hours=0.25",
        "--json",
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    figures = json.loads(done.stdout)
    assert figures["evaluations"] > 0 and figures["wall_s"] > 0
    assert figures["best_us"] <= figures["seed_us"]
    assert set(figures["anchors_s"]) >= {"python -c 'import torch, triton'", "one pre-screen of the seed"}
    assert sum(figures["phases_s"].values()) > 0 and figures["machine"]["cpus"] >= 1


def test_the_main_job_benchmark_refuses_a_missing_scenario_in_one_line(tmp_path):
    done = script("bench_main_job.py", "--scenario", str(tmp_path / "none.toml"))
    assert done.returncode == 2, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "none.toml" in done.stderr
