"""The LLM brains against a real HTTP server on 127.0.0.1, one fault at a time (wall clock)."""

import io
import time

import anyio
import pytest
from _support import SCENARIOS
from kernel_scientist.agents import BrainError, BudgetExhausted
from kernel_scientist.agents.brain import KernelView, SelectionView
from kernel_scientist.agents.llm import LLMService, TransportError
from kernel_scientist.blackboard import Blackboard, load_scenario
from llm_server import ScriptedServer
from loguru import logger

SECRET = "sk-ant-test-SECRET-0815"
VIEW = SelectionView(
    kernels=[
        KernelView(id=i, parent_id=None, author="seed", summary=f"k{i}", score_us=100.0 + i, shape_us=[1.0, 2.0])
        for i in (1, 2)
    ],
    exhausted=[],
    shapes=["1024x1536x7168", "6144x4608x7168"],
)


@pytest.fixture
def server():
    with ScriptedServer() as s:
        s.script.slow_s = 1.0
        yield s


def _service(tmp_path, server, brain, *extra):
    base = server.url if brain == "anthropic" else server.url + "/v1"
    scenario = load_scenario(
        SCENARIOS / "smoke.toml",
        [
            f"agents.brain={brain}",
            f"llm.base_url={base}",
            "llm.backoff_s=0.05",
            "llm.timeout_s=0.5",
            "llm.max_retries=2",
            *extra,
        ],
    )
    tmp_path.mkdir(exist_ok=True)
    board = Blackboard(tmp_path / "b.sqlite")
    return LLMService(scenario, board, lambda: 0.0), board


BRAINS = ["anthropic", "openai-compatible"]


def _prompt_bytes(service):
    from kernel_scientist.agents.llm import _prompts

    return len(service.system.encode()) + len(_prompts.select(VIEW, service.cfg).encode())


RECOVERED = ["429", "529", "500", "drop", "slow", "malformed"]


@pytest.mark.parametrize("brain", BRAINS)
@pytest.mark.parametrize("fault", RECOVERED)
async def test_transient_faults_are_retried(tmp_path, server, brain, fault, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET)
    service, board = _service(tmp_path, server, brain)
    server.script.faults = [("select", fault)]
    start = time.perf_counter()
    choice = await service.brain("archivist").select(VIEW)
    assert choice.base_id == 1 and choice.reference_id == 2
    [call] = board.llm_calls()
    assert call.status == "ok" and call.attempts == 2 and call.request_id == "req_2"
    assert len(server.script.seen) == 2
    if fault == "429":  # the server's retry-after (0.2 s) beats our own backoff (0.05 s)
        assert time.perf_counter() - start >= 0.2


@pytest.mark.parametrize("brain", BRAINS)
@pytest.mark.parametrize("fault", ["spend429", "401"])
async def test_permanent_errors_are_not_retried(tmp_path, server, brain, fault, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET)
    service, board = _service(tmp_path, server, brain)
    server.script.faults = [("select", fault)]
    with pytest.raises(TransportError) as info:
        await service.brain("archivist").select(VIEW)
    assert len(server.script.seen) == 1 and "not retried" in str(info.value) or fault == "401"
    [call] = board.llm_calls()
    assert call.status == "error" and call.attempts == 1 and call.cost_usd == 0


@pytest.mark.parametrize("brain", BRAINS)
async def test_retries_give_up_after_max_retries(tmp_path, server, brain, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET)
    service, board = _service(tmp_path, server, brain)
    server.script.faults = [("select", "500")] * 5
    with pytest.raises(TransportError, match="after 3 attempts"):
        await service.brain("archivist").select(VIEW)
    assert len(server.script.seen) == 3


@pytest.mark.parametrize("brain", BRAINS)
@pytest.mark.parametrize("fault", ["missing_fields", "not_json", "truncated"])
async def test_invalid_answer_gets_one_repair_turn(tmp_path, server, brain, fault, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET)
    service, board = _service(tmp_path, server, brain)
    server.script.faults = [("select", fault)]
    choice = await service.brain("archivist").select(VIEW)
    assert choice.base_id == 1
    ask, repair = board.llm_calls()
    assert (ask.turn, repair.turn) == ("ask", "repair") and repair.status == "ok"
    assert ask.status == ("truncated" if fault == "truncated" else "ok")
    assert "could not be used" in repair.messages[-1]["content"]


@pytest.mark.parametrize("brain", BRAINS)
async def test_second_invalid_answer_fails_the_step(tmp_path, server, brain, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET)
    service, board = _service(tmp_path, server, brain)
    server.script.faults = [("select", "missing_fields"), ("select", "not_json")]
    with pytest.raises(BrainError, match="after one repair turn: no JSON"):
        await service.brain("archivist").select(VIEW)
    assert len(board.llm_calls()) == 2


@pytest.mark.parametrize("brain", BRAINS)
async def test_refusal_fails_the_step_without_repair(tmp_path, server, brain, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET)
    service, board = _service(tmp_path, server, brain)
    server.script.faults = [("select", "refusal")]
    with pytest.raises(BrainError, match="refused"):
        await service.brain("archivist").select(VIEW)
    [call] = board.llm_calls()
    assert call.status == "refused"


async def test_concurrent_calls_never_exceed_the_budget(tmp_path, server, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET)
    probe, _ = _service(tmp_path / "probe", server, "anthropic")
    worst = probe.ledger.reserve(_prompt_bytes(probe), 1024).usd
    budget = 2.5 * worst  # room for two calls in flight at once, not three
    service, board = _service(
        tmp_path, server, "anthropic", f"llm.budget_usd={budget}", "llm.concurrency=8", "llm.select.concurrency=8"
    )
    outcomes = []

    async def one(i):
        try:
            await service.brain(f"agent-{i}").select(VIEW)
            outcomes.append("ok")
        except BudgetExhausted:
            outcomes.append("budget")

    async with anyio.create_task_group() as tg:
        for i in range(8):
            tg.start_soon(one, i)
    spent, _ = board.llm_spend()
    assert 0 < spent <= budget, (outcomes, budget, worst, [c.status for c in board.llm_calls()])
    assert outcomes.count("ok") == 2 and outcomes.count("budget") >= 1
    assert len(server.script.seen) == outcomes.count("ok")
    assert service.ledger.held_usd == pytest.approx(0) and service.ledger.held_tokens == 0


async def test_token_budget(tmp_path, server, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET)
    probe, _ = _service(tmp_path / "probe", server, "openai-compatible")
    cap = _prompt_bytes(probe) + 1024 + 100  # one call's worst case fits, two do not
    service, board = _service(tmp_path, server, "openai-compatible", f"llm.budget_tokens={cap}")
    await service.brain("archivist").select(VIEW)
    with pytest.raises(BudgetExhausted, match="budget_tokens"):
        await service.brain("archivist").select(VIEW)
    assert board.llm_spend()[1] <= cap
    assert [c.status for c in board.llm_calls()] == ["ok", "budget"]


async def test_api_key_never_logged_nor_recorded(tmp_path, server, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET)
    sink = io.StringIO()
    handle = logger.add(sink, level="DEBUG", serialize=True)
    try:
        service, board = _service(tmp_path, server, "anthropic")
        server.script.faults = [("select", "401")]
        with pytest.raises(TransportError, match="401"):
            await service.brain("archivist").select(VIEW)
        await service.brain("archivist").select(VIEW)
    finally:
        logger.remove(handle)
    board.close()
    assert SECRET in str(server.script.seen[-1].headers)  # the key went where it belongs
    assert "401" in sink.getvalue() and SECRET not in sink.getvalue()
    raw = b"".join(p.read_bytes() for p in tmp_path.glob("b.sqlite*"))
    assert SECRET.encode() not in raw
