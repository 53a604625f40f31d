"""Whole campaigns with the LLM brains against the scripted server on 127.0.0.1, and their replay.

Each campaign is short (one simulated hour, virtual time) and meets faults on the way; it must
finish, record every exchange, duplicate no step, keep its budget and never write the API key.
"""

from collections import Counter

import pytest
from _support import SCENARIOS, cli, fingerprint
from kernel_scientist.blackboard import KernelState, open_existing
from llm_server import INJECTION, ScriptedServer

SECRET = "sk-ant-test-SECRET-4711"
FAULTS = [
    ("review", "429"),
    ("select", "529"),
    ("design", "missing_fields"),
    ("implement", "drop"),
    ("review", "500"),
    ("select", "not_json"),
    ("design", "malformed"),
    ("implement", "inject"),
    ("review", "refusal"),
    ("design", "truncated"),
]


def _scenario(brain, url, *extra):
    """The smoke scenario's overrides for an LLM brain (a campaign runs in its own process, as a
    user runs it: the simulated evaluator leaves Triton's interpreter state behind in-process)."""
    base = url if brain == "anthropic" else url + "/v1"
    return [
        f"agents.brain={brain}",
        f"llm.base_url={base}",
        "campaign.hours=1",
        "llm.backoff_s=0.05",
        "llm.timeout_s=5",
        *extra,
    ]


def _run(tmp_path, name, overrides, env_key=SECRET):
    db = tmp_path / f"{name}.sqlite"
    args = [a for o in overrides for a in ("--set", o)]
    result = cli("run", str(SCENARIOS / "smoke.toml"), "--db", str(db), *args, env={"ANTHROPIC_API_KEY": env_key})
    assert result.returncode == 0, result.stderr[-3000:]
    assert env_key == "" or env_key not in result.stdout + result.stderr
    return db


def _check_campaign(db, server):
    with open_existing(db) as board:
        calls = board.llm_calls()
        kernels = board.kernels()
        evals = board.evaluations()
        messages = board.messages()
        hyps = board.hypotheses()
    # It finished, and LLM-written kernels really evaluated.
    assert messages[-1].text.startswith("campaign over")
    llm_kernels = [k for k in kernels if k.author.startswith("engineer")]
    assert any(board_k.state == KernelState.EVALUATED for board_k in llm_kernels)
    assert len(evals) >= 4
    # Every exchange is recorded once per (agent, seq), numbered without gaps.
    per_agent = Counter(c.agent for c in calls)
    for agent, n in per_agent.items():
        assert sorted(c.seq for c in calls if c.agent == agent) == list(range(1, n + 1))
    assert {c.role for c in calls} == {"select", "design", "implement", "review"}
    # No step duplicated: one kernel per implemented hypothesis, one hypothesis batch per selection.
    assert len({k.hypothesis_id for k in llm_kernels}) == len(llm_kernels)
    assert len({(h.selection_id, h.label) for h in hyps}) == len(hyps)
    # The faults were met and survived: retried, repaired, or recorded as a failed step.
    assert not server.script.faults, f"faults never served: {server.script.faults}"
    statuses = Counter(c.status for c in calls)
    assert statuses["refused"] >= 1 and statuses["truncated"] >= 1
    assert any(c.turn == "repair" and c.status == "ok" for c in calls)
    assert any(c.attempts >= 2 for c in calls)
    assert any(m.kind == "warning" and "refused" in m.text for m in messages)
    # The injected kernel: the model was talked into approving it, the rules were not.
    injected = [k for k in kernels if INJECTION in k.source]
    assert injected and all(k.state == KernelState.REJECTED for k in injected)
    assert all("\u202e" not in k.source for k in kernels)
    assert all("\u202e" not in m["content"] for c in calls for m in c.messages)
    # Cost is visible as it goes and adds up.
    assert sum(1 for m in messages if m.kind == "llm") == sum(1 for c in calls if c.status != "budget")
    # The key went to the server and nowhere else.
    for seen in server.script.seen:
        headers = {k.lower(): v for k, v in seen.headers.items()}
        assert SECRET in headers.get("x-api-key", "") + headers.get("authorization", "")
    raw = b"".join(p.read_bytes() for p in db.parent.glob(db.stem + ".*"))
    assert SECRET.encode() not in raw
    return calls


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """An Anthropic campaign with every fault on the way, recorded for the replay test."""
    tmp = tmp_path_factory.mktemp("claude")
    with ScriptedServer() as server:
        server.script.faults = list(FAULTS)
        db = _run(tmp, "claude", _scenario("anthropic", server.url))
    return db, server


def test_anthropic_campaign_survives_faults(recorded):
    db, server = recorded
    calls = _check_campaign(db, server)
    assert any(s.body.get("stream") for s in server.script.seen if s.stage == "implement")
    assert all(s.body["system"][0]["cache_control"] == {"type": "ephemeral"} for s in server.script.seen)
    assert all(c.request_id.startswith("req_") for c in calls if c.status == "ok")


def test_openai_compatible_campaign_survives_faults(tmp_path):
    with ScriptedServer() as server:
        server.script.faults = list(FAULTS)
        db = _run(tmp_path, "local", _scenario("openai-compatible", server.url))
    _check_campaign(db, server)
    assert all(s.path == "/v1/chat/completions" for s in server.script.seen)


def test_replay_reproduces_the_recorded_campaign_without_network(recorded, tmp_path):
    db, _ = recorded
    # No key, and a base URL where nothing listens: a replay that touched the network would fail.
    again = _run(tmp_path, "replay", _scenario("replay", "http://127.0.0.1:9", f"llm.replay_from={db}"), env_key="")
    assert fingerprint(again) == fingerprint(db)
    with open_existing(again) as board:
        replayed = board.llm_calls()
    with open_existing(db) as board:
        original = board.llm_calls()
    assert all(c.replayed for c in replayed)
    assert [(c.agent, c.seq, c.prompt_hash, c.answer, c.cost_usd) for c in replayed] == [
        (c.agent, c.seq, c.prompt_hash, c.answer, c.cost_usd) for c in original
    ]


def test_budget_stops_llm_work_and_is_never_exceeded(tmp_path):
    with ScriptedServer() as server:
        db = _run(
            tmp_path,
            "capped",
            _scenario("anthropic", server.url, "llm.budget_usd=0.25", "campaign.hours=0.6", "agents.engineers=3"),
        )
    with open_existing(db) as board:
        spent, _ = board.llm_spend()
        calls = board.llm_calls()
        messages = board.messages()
        evals = board.evaluations()
    assert 0 < spent <= 0.25
    assert any(c.status == "budget" for c in calls)
    assert any(m.kind == "warning" and "no more LLM work" in m.text for m in messages)
    assert messages[-1].text.startswith("campaign over") and evals  # the queue still drained
    # Once an agent was refused it never asked again.
    for agent in {c.agent for c in calls}:
        mine = [c.status for c in calls if c.agent == agent]
        if "budget" in mine:
            assert mine.index("budget") == len(mine) - 1
