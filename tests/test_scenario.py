"""Scenario files and the command line's handling of bad input: one line, exit code 2."""

import pytest
from _support import SCENARIOS, cli
from kernel_scientist.blackboard import ScenarioError, load_scenario


def test_shipped_scenarios_load():
    main = load_scenario(SCENARIOS / "amd_fp8_mm_mi300x.toml")
    assert main.campaign.hours == 24 and main.evaluator.backend == "simulated"
    assert main.task_path().joinpath("task.yml").is_file()
    smoke = load_scenario(SCENARIOS / "smoke.toml", ["agents.engineers=3", "campaign.name=other"])
    assert smoke.agents.engineers == 3 and smoke.campaign.name == "other"


@pytest.mark.parametrize(
    "body, key, problem",
    [
        ("[agents]\nenginers = 2\n", "agents.enginers", "unknown key; did you mean agents.engineers?"),
        ("[agent]\nengineers = 2\n", "agent.engineers", "unknown table agent; did you mean agents.engineers?"),
        ("[evaluator]\nengineers = 2\n", "evaluator.engineers", "unknown key; did you mean agents.engineers?"),
        ("[agents]\nfoo = 2\n", "agents.foo", "unknown key; the keys of [agents]: brain, engineers, max_pending"),
        ("[campaign]\nhours = -1\n", "campaign.hours", "expects a number more than 0; got -1"),
        (
            "[evaluator]\nbackend = 'cloud'\n",
            "evaluator.backend",
            "expects one of 'local', 'ray', 'simulated'; got 'cloud' (text)",
        ),
        ("[agents]\nengineers = 'two'\n", "agents.engineers", "expects a whole number from 1 to 32; got 'two' (text)"),
        ("[agents]\nlatency = 3\n", "agents.latency", "expects a table of keys; got 3 (a whole number)"),
        ("[llm.select]\nmax_tokens = 2\n", "llm.select.max_tokens", "expects a whole number from 16 to 128000; got 2"),
        ("surprise = 1\n", "surprise", "unknown key; a scenario's tables: campaign, agents, evaluator, llm"),
        ("[agnets]\n", "agnets", "unknown table; did you mean agents?"),
        ("[campaign]\ntask = 'nowhere'\n", "campaign.task", "no problem folder"),
        ("[campaign\n", "", "not valid TOML"),
    ],
)
def test_bad_scenario_is_one_clear_line(tmp_path, body, key, problem):
    path = tmp_path / "bad.toml"
    path.write_text(body)
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    message = str(info.value)
    assert "\n" not in message and str(path) in message and key in message and problem in message
    result = cli("run", str(path), "--db", str(tmp_path / "x.sqlite"))
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert key in result.stderr and not (tmp_path / "x.sqlite").exists()


def test_bad_override_and_unknown_option(tmp_path):
    result = cli("run", str(SCENARIOS / "smoke.toml"), "--set", "agents.nope=1", "--db", str(tmp_path / "a.sqlite"))
    assert result.returncode == 2 and "agents.nope: unknown key" in result.stderr
    result = cli("run", str(SCENARIOS / "smoke.toml"), "--set", "agents.engineer=4", "--db", str(tmp_path / "a.sqlite"))
    assert result.returncode == 2 and "agents.engineer: unknown key; did you mean agents.engineers?" in result.stderr
    result = cli("run", str(SCENARIOS / "smoke.toml"), "--set", "justakey")
    assert result.returncode == 2 and "expected key=value" in result.stderr
    result = cli("run", str(SCENARIOS / "smoke.toml"), "--frobnicate")
    assert result.returncode == 2 and "unrecognized arguments: --frobnicate" in result.stderr
    assert result.stderr.count("\n") == 1
    result = cli("run", str(tmp_path / "missing.toml"))
    assert result.returncode == 2 and "missing.toml: cannot read scenario" in result.stderr


def test_status_and_logs_on_missing_or_foreign_files(tmp_path):
    assert cli("status", "--db", str(tmp_path / "none.sqlite")).returncode == 2
    junk = tmp_path / "junk.sqlite"
    junk.write_text("hello")
    result = cli("logs", "--db", str(junk))
    assert result.returncode == 2 and "junk.sqlite" in result.stderr and "Traceback" not in result.stderr
