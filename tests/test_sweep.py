"""`sweep`: every combination of some limits x seeds, in parallel processes, in virtual time."""

import msgspec
import pytest
from _support import SCENARIOS, cli
from kernel_scientist.blackboard import ScenarioError, open_existing

from kernel_scientist import sweep

SMOKE = SCENARIOS / "smoke.toml"


def test_a_small_sweep_runs_every_combination_and_writes_table_json_and_plot(tmp_path):
    out = tmp_path / "sw"
    proc = cli(
        "sweep",
        str(SMOKE),
        "--vary",
        "agents.engineers=1,2",
        "--seeds",
        "1",
        "--jobs",
        "2",
        "--set",
        "campaign.hours=1",
        "--out",
        str(out),
        timeout=240,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "2 campaigns (2 settings x 1 seeds)" in proc.stderr
    assert "engineers=1" in proc.stdout and "engineers=2" in proc.stdout and "simulated" in proc.stdout
    summary = msgspec.json.decode((out / "sweep.json").read_bytes(), type=sweep.SweepSummary)
    assert summary.simulated and [s.setting for s in summary.settings] == [
        {"agents.engineers": "1"},
        {"agents.engineers": "2"},
    ]
    assert all(r.ok and r.best_us and r.evaluations > 0 and 0 < r.utilisation <= 1 for r in summary.runs)
    for r in summary.runs:  # each run is a real campaign with the setting applied, in virtual time
        with open_existing(r.run.db) as board:
            config = board.campaign().config_json
            assert f'"engineers":{r.run.setting["agents.engineers"]}' in config and '"hours":1.0' in config
            assert board.campaign().virtual_time
    assert (out / "sweep.png").read_bytes().startswith(b"\x89PNG") and (out / "sweep.png").stat().st_size > 10_000
    again = cli("sweep", str(SMOKE), "--vary", "agents.engineers=1", "--out", str(out))
    assert again.returncode == 2 and "already holds a sweep" in again.stderr


@pytest.mark.parametrize(
    "vary, says",
    [
        ("agents.enginers=1,2", "agents.enginers: unknown key"),
        ("agents.engineers=1,x", "--vary agents.engineers=x"),
        ("evaluator.rate_per_hour=0", "evaluator.rate_per_hour"),
        ("agents.engineers", "expected KEY=V1,V2"),
    ],
)
def test_bad_vary_is_one_line_and_exit_2(tmp_path, vary, says):
    proc = cli("sweep", str(SMOKE), "--vary", vary, "--out", str(tmp_path / "x"))
    assert proc.returncode == 2 and says in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr
    assert not (tmp_path / "x").exists()  # nothing ran


def test_plan_is_the_cross_product_times_seeds(tmp_path):
    axes = sweep.parse_vary(["agents.engineers=1,2,4", "evaluator.rate_per_hour=6,12"], SMOKE, [])
    runs, seeds = sweep.plan(SMOKE, axes, 3, tmp_path, [])
    assert seeds == [7, 8, 9] and len(runs) == 18 and len({r.db for r in runs}) == 18
    assert runs[0].setting == {"agents.engineers": "1", "evaluator.rate_per_hour": "6"}
    cmd = sweep.command(SMOKE, runs[0], ["campaign.hours=1"])
    assert (
        cmd[-6:] == ["--set", "agents.engineers=1", "--set", "evaluator.rate_per_hour=6", "--set", "campaign.seed=7"]
        and "--quiet" in cmd
    )
    with pytest.raises(ScenarioError, match="given twice"):
        sweep.parse_vary(["agents.engineers=1", "agents.engineers=2"], SMOKE, [])


def test_summary_reports_mean_and_spread_over_seeds():
    def result(engineers, seed, best, util):
        run = sweep.Run(setting={"agents.engineers": engineers}, seed=seed, db="x")
        return sweep.RunResult(run=run, ok=True, best_us=best, evaluations=4, utilisation=util, rate_used=1.0)

    rows = sweep.summarise(
        [
            result("1", 1, 100.0, 0.2),
            result("1", 2, 110.0, 0.4),
            result("2", 1, 90.0, 0.5),
            sweep.RunResult(run=sweep.Run(setting={"agents.engineers": "2"}, seed=2, db="y"), ok=False, error="exit 1"),
        ]
    )
    one, two = rows
    assert (one.seeds, one.best_us_mean, one.best_us_min, one.best_us_max) == (2, 105.0, 100.0, 110.0)
    assert one.utilisation_mean == pytest.approx(0.3) and (one.utilisation_min, one.utilisation_max) == (0.2, 0.4)
    assert two.seeds == 1 and two.best_us_mean == 90.0  # the failed run is not averaged in
