"""Labels from provenance: a measured evaluation is called measured, on the device that measured
it, on every surface that shows its time (the log, status, watch, report, the exported file); a
simulated one is called simulated on every line of the evaluator's that states a time."""

from __future__ import annotations

import re
from pathlib import Path

from _support import ROOT, SCENARIOS, cli
from _watch_campaign import smoke_campaign  # noqa: F401  (a session fixture)
from kernel_scientist.agents._base import CampaignClock, Context
from kernel_scientist.agents.archivist import Archivist
from kernel_scientist.agents.evaluator_agent import evaluation_text
from kernel_scientist.blackboard import (
    Blackboard,
    Campaign,
    EvalReport,
    KernelState,
    Outcome,
    Provenance,
    Scenario,
    ShapeResult,
    load_scenario,
    open_existing,
    scenario_json,
)
from kernel_scientist.evaluator import load_task

TASK = load_task(ROOT / "evaluator" / "tasks" / "amd_fp8_mm")


def _measured_campaign(db: Path) -> None:
    """A campaign of the local backend with one measured evaluation of the task's seed, its messages
    written by the evaluator agent's and the archivist's own code."""
    scenario = load_scenario(SCENARIOS / "amd_fp8_mm_h200.toml")
    prov = Provenance(
        backend="local",
        simulated=False,
        device="NVIDIA H200",
        timing_method="device events per call; L2 flushed and fresh inputs before every call",
        versions={"torch": "2.11.0+cu130", "triton": "3.6.0"},
        seeds=[1, 1],
    )
    shapes = [ShapeResult(shape=s, passed=True, time_us=100.0 + i, sol_us=10.0) for i, s in enumerate(TASK.benchmarks)]
    phases = {"preload_s": 3.2, "idle_s": 9.0, "setup_s": 0.1, "tests_s": 18.5, "timing_s": 1.6}
    report = EvalReport(
        outcome=Outcome.PASSED, reason="passed", provenance=prov, score_us=108.0, shapes=shapes, phases=phases
    )
    reference = EvalReport(
        outcome=Outcome.PASSED,
        reason="the task's reference",
        provenance=prov,
        score_us=1133.5,
        shapes=[ShapeResult(shape=s, passed=True, time_us=1000.0) for s in TASK.benchmarks],
    )
    with Blackboard(db) as board:
        board.create_campaign(
            Campaign(
                name="measured",
                seed=1,
                task=TASK.name,
                backend="local",
                simulated=False,
                config_json=scenario_json(scenario),
                created_wall=0.0,
                virtual_time=False,
                reference=reference,
            )
        )
        kernel = board.add_kernel(source=TASK.seed_source, author="seed", at=0.0, state=KernelState.DRAFT)
        board.review(kernel_id=kernel.id, reviewer="critic", approved=True, reasons=[], at=1.0, expected_value=1.0)
        sub = board.lease_submission("evaluator/0", now=2.0, lease_s=100.0)
        board.record_evaluation(
            submission_id=sub.id, owner="evaluator/0", started_at=2.0, finished_at=60.0, report=report
        )
        board.say(
            agent="evaluator", kind="evaluation", at=60.0, kernel_id=kernel.id, text=evaluation_text(kernel.id, report)
        )
        archivist = Archivist(
            Context(
                board=board, scenario=Scenario(), clock=CampaignClock(), seed=1, backend=None, task=None, brain=None
            ),
            "archivist",
            0,
        )
        archivist.digest(board.evaluations()[0])


def _clean(text: str, where: str) -> None:
    lowered = text.lower()
    assert "simulated" not in lowered and "mi300" not in lowered, f"{where} mislabels a measured time:\n{text[:3000]}"


async def test_a_measured_evaluation_is_labelled_measured_everywhere(tmp_path):
    db = tmp_path / "measured.sqlite"
    _measured_campaign(db)

    logs = cli("logs", "--db", str(db))
    assert logs.returncode == 0, logs.stderr
    assert "kernel 1: 108.0 us (measured on NVIDIA H200)" in logs.stdout
    assert "scores 108.0 us (measured on NVIDIA H200)" in logs.stdout  # the archivist's finding
    _clean(logs.stdout, "logs")

    status = cli("status", "--db", str(db))
    assert status.returncode == 0, status.stderr
    assert "measured on NVIDIA H200" in status.stdout
    assert (
        "median evaluation: tests (compiles, first-call tuning) 18.5 s, timing 1.6 s, set-up 0.1 s; "
        "start-up 3.2 s (before the request: a spare process)" in status.stdout
    )
    _clean(status.stdout, "status")

    watch = cli("watch", "--db", str(db), "--once", "--width", "160")
    assert watch.returncode == 0, watch.stderr
    assert "measured on NVIDIA H200" in watch.stdout
    _clean(watch.stdout, "watch")

    report = cli("report", "--db", str(db), "--out", str(tmp_path / "report"))
    assert report.returncode == 0, report.stderr
    page = (tmp_path / "report" / "index.html").read_text()
    assert "measured on NVIDIA H200" in page and "campaign report (measured)" in page
    _clean(page, "report")

    out = tmp_path / "submission.py"
    exported = cli("export", "--db", str(db), "--out", str(out))
    assert exported.returncode == 0, exported.stderr
    header = out.read_text().splitlines()[:6]
    assert header[0] == "#!POPCORN leaderboard amd-fp8-mm"  # the task's own leaderboard name
    assert header[1] == "#!POPCORN gpus H200"  # where it was measured, not the task's MI300
    assert "(measured on NVIDIA H200)" in header[3] and "Protocol: measured on NVIDIA H200" in header[4]
    _clean("\n".join(header), "export")
    # Routed elsewhere by the user: the line is theirs, and a note says the score came from the H200.
    routed = tmp_path / "routed.py"
    exported = cli("export", "--db", str(db), "--out", str(routed), "--gpus", "H100")
    assert exported.returncode == 0, exported.stderr
    assert routed.read_text().splitlines()[1] == "#!POPCORN gpus H100"
    assert "note: the score was measured on NVIDIA H200, not on H100 (--gpus)" in exported.stderr


TIME = re.compile(r"\d\.\d us\b")  # a time as the log states one: "187.8 us"


def test_every_evaluator_line_of_a_simulated_campaign_that_states_a_time_says_simulated(smoke_campaign, tmp_path):
    """The interim lines (a would-be leader timed again, a recorded leader timed again on resume)
    are labelled like the evaluation lines they lead to."""
    db = tmp_path / "board.sqlite"
    with open_existing(smoke_campaign.db) as board:
        board.copy_to(db)
    # One more timing wanted than the leader has: the resume times it again and says so first.
    more = ("--set", "evaluator.retime_leaders=2", "--set", "campaign.hours=1.25")
    resumed = cli("resume", "--db", str(db), "--quiet", *more)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    logs = cli("logs", "--db", str(db), "--agent", "evaluator")
    assert logs.returncode == 0, logs.stderr
    timed = [line for line in logs.stdout.splitlines() if TIME.search(line)]
    assert any("would lead" in line for line in timed), logs.stdout[-3000:]
    assert any(" leads (" in line for line in timed), logs.stdout[-3000:]
    unlabelled = [line for line in timed if "simulated on AMD Instinct MI300X" not in line]
    assert not unlabelled, "\n".join(unlabelled)
    assert "measured" not in logs.stdout.lower()
