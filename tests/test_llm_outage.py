"""LLM outages are outlived, and only what cannot heal stops a brain.

An 8-hour simulated campaign (virtual time) whose language-model server fails every request for
long stretches: the agents pause (growing, capped pauses, each said in the conversation), ask again,
and are still asking in the campaign's last hours. A bad key, by contrast, stops them at once, and
the campaign says so plainly at its end.
"""

from _support import SCENARIOS, cli
from kernel_scientist.blackboard import open_existing
from llm_server import ScriptedServer

HOURS = 8


def _run(tmp_path, name, url, *extra, key="sk-test"):
    db = tmp_path / f"{name}.sqlite"
    sets = [
        "agents.brain=openai-compatible",
        f"llm.base_url={url}/v1",
        f"campaign.hours={HOURS}",
        "llm.max_retries=0",
        "llm.timeout_s=5",
        "agents.engineers=1",
        "evaluator.rate_per_hour=3",
        "llm.pause_s=600",
        "llm.max_pause_s=3600",
        *extra,
    ]
    proc = cli(
        "run",
        str(SCENARIOS / "smoke.toml"),
        "--db",
        str(db),
        "--quiet",
        *(a for s in sets for a in ("--set", s)),
        env={"OPENAI_API_KEY": key},
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return db


def test_an_eight_hour_campaign_outlives_long_outages(tmp_path):
    with ScriptedServer() as server:
        # Two stretches of 503s, each hours long in campaign time: the first stops the archivist's
        # selections, the second (from a design on) the theorist's designs.
        server.script.down = [(12, 21), (42, 47)]
        db = _run(tmp_path, "outage", server.url)
    with open_existing(db) as board:
        calls = board.llm_calls()
        messages = board.messages()
    failed = [c for c in calls if c.status == "error"]
    assert failed and all("HTTP 503" in c.error and not c.permanent for c in failed)
    # The outages were long on the campaign clock, and the agents paused rather than gave up.
    assert max(c.at for c in failed) - min(c.at for c in failed) >= 2 * 3600
    pauses = [m for m in messages if m.kind == "warning" and "before asking again" in m.text]
    assert {m.agent for m in pauses} >= {"archivist", "critic"} or len({m.agent for m in pauses}) >= 2
    said = [m.text.split(" pauses ")[1].split(" ")[0] for m in pauses]
    assert "00:10:00" in said and "00:20:00" in said  # growing ...
    assert all(s <= "01:00:00" for s in said)  # ... and capped
    assert any(m.kind == "info" and "brain answers again" in m.text for m in messages)
    assert not any("stops asking" in m.text for m in messages)
    # Still asking, and answered, in the campaign's last hours.
    late = [c for c in calls if c.status == "ok" and c.at >= (HOURS - 2) * 3600]
    assert len({c.agent for c in late}) >= 2, sorted({(c.agent, round(c.at / 3600, 1)) for c in calls})
    assert messages[-1].text.startswith("campaign over")


def test_a_bad_key_stops_the_brain_for_good_and_the_campaign_says_so(tmp_path):
    with ScriptedServer() as server:
        server.script.faults = [(None, "401")] * 200
        db = _run(tmp_path, "badkey", server.url, "campaign.hours=2")
        asked = len(server.script.seen)
    with open_existing(db) as board:
        calls = board.llm_calls()
        messages = board.messages()
    assert calls and all(c.status == "error" and c.permanent for c in calls)
    stopped = {m.agent for m in messages if m.kind == "error" and "waiting will not fix this" in m.text}
    assert stopped and len(calls) == asked == len(stopped)  # each agent asked once, then never again
    closing = [m for m in messages if m.agent == "runner" and "stopped asking the brain" in m.text]
    assert closing and "HTTP 401" in closing[0].text and messages[-1].text.startswith("campaign over")
