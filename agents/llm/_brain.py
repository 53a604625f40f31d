"""The LLM brain: the brain protocol spoken to a language model, with record and replay.

One ``LLMService`` per campaign owns what the agents share (the sender, the budget ledger, the
global and per-role capacity limiters, the recorded exchanges when replaying); each agent gets its
own ``LLMBrain`` from it, so every exchange is recorded under the agent's name with a per-agent
sequence number.

Time. A simulated campaign runs on trio's MockClock with autojump, and a task waiting on a real
socket counts as idle there, so the clock would jump past deadlines while a request is on the wire
(docs/stack-pitfalls.md). On a MockClock the service therefore *holds* the clock (autojump off) and
runs the exchange in a worker thread with its own trio loop on the wall clock, where the HTTP
timeouts and retry-after sleeps are real seconds. Virtual time stands still during a call; the
agent's modeled thinking latency is what the campaign clock is charged. Calls are then serialised
(no other agent can reach a later instant while one is in flight), which costs wall time but keeps
a campaign a function of its answers: a replay, which answers instantly, reproduces it exactly.
On the wall clock (a real evaluator) calls run concurrently under the limiters.

Stopping. A worker thread cannot be cancelled, and its loop gets no signals, so a Ctrl-C used to
wait for the request on the wire to end (up to ``llm.timeout_s`` per attempt, times the retries).
The thread's loop therefore runs the request in a cancel scope that the campaign's loop cancels the
moment its own waiting task is cancelled (``_off_loop``): the request is dropped, the thread ends,
and the cancellation goes on its way within a moment.
"""

from __future__ import annotations

import contextlib
import hashlib
import math
import os
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

import anyio
import msgspec
import trio
from kernel_scientist.blackboard import Blackboard, BlackboardError, LLMCall, Scenario, ScenarioError, open_existing
from kernel_scientist.blackboard.config import LLMConfig, RoleConfig
from kernel_scientist.blackboard.records import LLMRole, LLMStatus, LLMTurn
from kernel_scientist.evaluator import load_task

from .. import brain
from ..brain import BrainError, BrainUnavailable, BudgetExhausted
from . import _prompts, _wire
from ._hygiene import clean, truncate
from ._ledger import Ledger
from ._transport import (
    LLMReply,
    LLMRequest,
    Send,
    StopReason,
    TransportError,
    TransportUnavailable,
    Usage,
    anthropic_sender,
    openai_sender,
)

if TYPE_CHECKING:
    from trio.testing import MockClock

ROLES: tuple[LLMRole, ...] = ("select", "design", "implement", "review")
TURNS: tuple[LLMTurn, ...] = ("ask", "repair")  # a question, and at most one repair of its answer
Answer = TypeVar("Answer")


def _hash(system: str, messages: list[dict[str, str]]) -> str:
    return hashlib.sha256(msgspec.json.encode([system, messages])).hexdigest()[:32]


def _task_kind(scenario: Scenario) -> str | None:
    """The task's kind, which picks the digests the design prompt retrieves from; None (every
    digest) when the folder cannot say (the campaign reports a folder it cannot load itself)."""
    try:
        return load_task(scenario.task_path()).kind()
    except Exception:  # noqa: BLE001 - the kind only narrows a search
        return None


class LLMService:
    """What every agent's LLM brain shares. Build it inside the campaign's event loop."""

    def __init__(self, scenario: Scenario, board: Blackboard, now: Callable[[], float]) -> None:
        self.cfg: LLMConfig = scenario.llm
        ev = scenario.evaluator
        # A local backend times on whatever GPU the machine has; the simulated one on its model.
        device = "the local GPU" if ev.backend == "local" else _prompts.DEVICE_WORDS.get(ev.device, ev.device)
        self.system = _prompts.system(
            scenario.task_path().name,
            device,
            _prompts.evaluator_text(ev.backend, ev.device, ev.harness_device, ev.noise),
        )
        self.kind = scenario.agents.brain
        self.task_kind = _task_kind(scenario)
        self.board = board
        self.now = now
        spent_usd, spent_tokens = board.llm_spend()
        self.ledger = Ledger(self.cfg, spent_usd, spent_tokens, enforce=self.kind != "replay")
        self.limit = anyio.CapacityLimiter(self.cfg.concurrency)
        self.role_limits = {r: anyio.CapacityLimiter(self.role(r).concurrency) for r in ROLES}
        self._held = 0
        self._saved_threshold = 0.0
        self.recorded: dict[tuple[str, int], LLMCall] = {}
        self.send: Send | None = None
        if self.kind == "replay":
            with open_existing(scenario.replay_path()) as source:
                self.recorded = {(c.agent, c.seq): c for c in source.llm_calls()}
        else:
            key = os.environ.get(self.cfg.api_key_env, "") if self.cfg.api_key_env else ""
            self.send = (anthropic_sender if self.kind == "anthropic" else openai_sender)(self.cfg, key)

    @staticmethod
    def preflight(scenario: Scenario) -> None:
        """Fail before a campaign starts when it could not ask anything (one line: what to fix)."""
        cfg, kind = scenario.llm, scenario.agents.brain
        if kind == "anthropic" and not os.environ.get(cfg.api_key_env or "ANTHROPIC_API_KEY"):
            raise ScenarioError(
                f"agents.brain = 'anthropic' needs an API key in the environment "
                f"variable {cfg.api_key_env or 'ANTHROPIC_API_KEY'} (llm.api_key_env)"
            )
        if kind == "replay" and not scenario.replay_path().is_file():
            raise ScenarioError(f"llm.replay_from: no recorded blackboard at {scenario.replay_path()}")
        if kind == "replay":  # read-only: a foreign file is refused before the campaign's file exists
            try:
                open_existing(scenario.replay_path()).close()
            except BlackboardError as exc:
                raise ScenarioError(f"llm.replay_from: {exc}") from None

    def role(self, role: LLMRole) -> RoleConfig:
        return self.cfg.role(role)

    def brain(self, agent: str) -> LLMBrain:
        return LLMBrain(self, agent)

    async def exchange(self, req: LLMRequest) -> LLMReply:
        """Send off the virtual clock when there is one (module note)."""
        assert self.send is not None
        clock = _mock_clock()
        if clock is None:
            return await self.send(req)
        if self._held == 0:
            self._saved_threshold = clock.autojump_threshold
            clock.autojump_threshold = math.inf
        self._held += 1
        try:
            return await _off_loop(self.send, req)
        finally:
            self._held -= 1
            if self._held == 0:
                clock.autojump_threshold = self._saved_threshold


class _RemoteScope:
    """The cancel scope of a worker thread's trio loop, cancellable from the campaign's loop, even
    before the worker's loop has started (then it is cancelled the moment it attaches)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._token: trio.lowlevel.TrioToken | None = None
        self._scope: trio.CancelScope | None = None
        self._cancelled = False

    def attach(self, scope: trio.CancelScope) -> None:
        """Called on the worker's loop, inside ``scope``."""
        with self._lock:
            self._token, self._scope = trio.lowlevel.current_trio_token(), scope
            if self._cancelled:
                scope.cancel()

    def cancel(self) -> None:
        """Called from any thread; a loop that has already finished needs nothing."""
        with self._lock:
            self._cancelled = True
            if self._token is not None and self._scope is not None:
                with contextlib.suppress(trio.RunFinishedError):
                    self._token.run_sync_soon(self._scope.cancel)


async def _off_loop(send: Send, req: LLMRequest) -> LLMReply:
    """``send(req)`` on a trio loop of its own in a worker thread (the wall clock), cancelled as
    soon as the calling task is (module note: Stopping)."""
    remote = _RemoteScope()

    async def worker() -> LLMReply | None:
        with trio.CancelScope() as scope:
            remote.attach(scope)
            return await send(req)
        return None  # cancelled: only ever because the caller was

    def thread() -> LLMReply | BaseException | None:
        # The outcome is returned, not raised, so that an error reaches the caller as itself
        # rather than wrapped in the task group's exception group.
        try:
            return trio.run(worker)
        except BaseException as exc:
            return exc

    async def relay() -> None:
        try:
            await anyio.sleep_forever()
        finally:  # the caller was cancelled, or the reply is in: either way the worker may stop
            remote.cancel()

    async with anyio.create_task_group() as group:
        group.start_soon(relay)
        reply = await anyio.to_thread.run_sync(thread)  # waits for the thread, which ends soon
        group.cancel_scope.cancel()
    if isinstance(reply, BaseException):
        raise reply
    if reply is None:  # the request was dropped for a cancellation that is now due here
        await anyio.lowlevel.checkpoint()
        raise RuntimeError("an LLM request was cancelled while its caller was not")
    return reply


def _mock_clock() -> MockClock | None:
    try:
        import sniffio
        import trio.testing

        if sniffio.current_async_library() != "trio":
            return None
        clock = trio.lowlevel.current_clock()
    except Exception:
        return None
    return clock if isinstance(clock, trio.testing.MockClock) else None


class LLMBrain:
    """One agent's brain (the ``Brain`` protocol of agents/brain.py)."""

    def __init__(self, service: LLMService, agent: str) -> None:
        self.service = service
        self.name = service.kind
        self.agent = agent
        self.seq = len(service.board.llm_calls(agent))  # a resumed campaign continues the numbering

    # ---- the protocol ------------------------------------------------------------------
    async def select(self, view: brain.SelectionView) -> brain.Choice:
        return await self._ask("select", _prompts.select(view, self.service.cfg), lambda text: _wire.choice(text, view))

    async def design(self, view: brain.DesignView) -> brain.Design:
        return await self._ask(
            "design",
            _prompts.design(view, self.service.cfg, self.service.task_kind),
            lambda text: _wire.design(text, view, self.service.cfg.choose_by),
        )

    async def implement(self, view: brain.ImplementView) -> brain.Draft:
        return await self._ask("implement", _prompts.implement(view, self.service.cfg), _wire.draft)

    async def review(self, view: brain.ReviewView) -> brain.Critique:
        return await self._ask("review", _prompts.review(view, self.service.cfg), _wire.critique)

    # ---- one question: an ask and at most one repair ------------------------------------
    async def _ask(self, role: LLMRole, prompt: str, decode: Callable[[str], Answer]) -> Answer:
        system = self.service.system
        messages = [{"role": "user", "content": prompt}]
        for turn in TURNS:
            reply = await self._exchange(role, turn, system, messages)
            if reply.stop == "refusal":
                raise BrainError(
                    f"{role}: the model refused ({reply.stop_reason}): {truncate(clean(reply.text), 200) or 'no text'}"
                )
            if reply.stop == "max_tokens":
                limit = self.service.cfg.max_tokens(role)
                problem = f"the answer was cut off at max_tokens = {limit} (llm.{role}.max_tokens); answer more briefly"
            else:
                try:
                    return decode(reply.text)
                except _wire.AnswerInvalid as exc:
                    problem = str(exc)
            if turn == "repair":
                raise BrainError(f"{role}: no usable answer after one repair turn: {problem}")
            messages = [
                *messages,
                {"role": "assistant", "content": truncate(clean(reply.text), 20_000) or "(empty)"},
                {"role": "user", "content": _prompts.repair(problem)},
            ]
        raise AssertionError("unreachable")

    async def _exchange(self, role: LLMRole, turn: LLMTurn, system: str, messages: list[dict[str, str]]) -> LLMReply:
        service, cfg = self.service, self.service.cfg
        rc = service.role(role)
        self.seq += 1
        seq, at = self.seq, service.now()
        model = rc.model or cfg.model
        phash = _hash(system, messages)
        # The turn as recorded; each outcome below fills in its status and what it has.
        base = LLMCall(
            id=0,
            at=at,
            agent=self.agent,
            seq=seq,
            role=role,
            turn=turn,
            brain=service.kind,
            model=model,
            status="ok",
            system=system,
            messages=messages,
            prompt_hash=phash,
        )
        async with service.limit, service.role_limits[role]:
            recorded = service.recorded.get((self.agent, seq)) if service.kind == "replay" else None
            if service.kind == "replay":
                reply = self._replayed(recorded, seq, phash, base)
                reservation = service.ledger.reserve(0, 0)
            else:
                size = len(system.encode()) + sum(len(m["content"].encode()) for m in messages)
                try:
                    reservation = service.ledger.reserve(size, cfg.max_tokens(role))
                except BudgetExhausted as exc:
                    self._record(msgspec.structs.replace(base, status="budget", error=str(exc)))
                    raise
                req = LLMRequest(
                    model=model,
                    system=system,
                    messages=messages,
                    max_tokens=cfg.max_tokens(role),
                    temperature=rc.temperature,
                    stream=cfg.max_tokens(role) > cfg.stream_above,
                )
                try:
                    reply = await service.exchange(req)
                except TransportError as exc:
                    service.ledger.settle(reservation, Usage())
                    self._record(
                        msgspec.structs.replace(
                            base,
                            status="error",
                            error=str(exc),
                            request_id=exc.request_id,
                            attempts=exc.attempts,
                            permanent=isinstance(exc, TransportUnavailable),
                        )
                    )
                    raise
            cost = service.ledger.settle(reservation, reply.usage)
        statuses: dict[StopReason, LLMStatus] = {"refusal": "refused", "max_tokens": "truncated"}
        status = statuses.get(reply.stop, "ok")
        u = reply.usage
        self._record(
            msgspec.structs.replace(
                base,
                status=status,
                answer=reply.text,
                stop_reason=reply.stop_reason,
                request_id=reply.request_id,
                attempts=reply.attempts,
                input_tokens=u.input_tokens,
                output_tokens=u.output_tokens,
                cache_read_tokens=u.cache_read_tokens,
                cache_write_tokens=u.cache_write_tokens,
                cost_usd=cost,
                wall_s=reply.wall_s,
                replayed=service.kind == "replay",
            )
        )
        cached = f", {u.cache_read_tokens} cached" if u.cache_read_tokens else ""
        service.board.say(
            agent=self.agent,
            kind="llm",
            at=service.now(),
            text=f"{role} {turn} -> {status}: {model}, {u.input_tokens}+{u.output_tokens} tokens{cached}, "
            f"${cost:.4f}; {service.ledger.describe()}; request {reply.request_id or '-'}",
        )
        return reply

    def _replayed(self, recorded: LLMCall | None, seq: int, phash: str, base: LLMCall) -> LLMReply:
        if recorded is None:  # a replay cannot heal: no later turn will match either
            raise BrainUnavailable(
                f"replay: the recording has no turn {seq} for {self.agent} (the "
                "campaign diverged from the recorded one or ran longer)"
            )
        if recorded.prompt_hash != phash:
            raise BrainUnavailable(
                f"replay diverged: {self.agent}'s turn {seq} asks something else than the recorded campaign did"
            )
        if recorded.status == "budget":
            self._record(msgspec.structs.replace(base, status="budget", error=recorded.error, replayed=True))
            raise BudgetExhausted(recorded.error)
        if recorded.status == "error":
            self._record(
                msgspec.structs.replace(
                    base,
                    status="error",
                    error=recorded.error,
                    request_id=recorded.request_id,
                    attempts=recorded.attempts,
                    permanent=recorded.permanent,
                    replayed=True,
                )
            )
            error = TransportUnavailable if recorded.permanent else TransportError
            raise error(recorded.error, recorded.request_id, recorded.attempts)
        stops: dict[str, StopReason] = {"refused": "refusal", "truncated": "max_tokens"}
        stop = stops.get(recorded.status, "end")
        return LLMReply(
            text=recorded.answer,
            stop=stop,
            stop_reason=recorded.stop_reason,
            usage=Usage(
                recorded.input_tokens, recorded.output_tokens, recorded.cache_read_tokens, recorded.cache_write_tokens
            ),
            request_id=recorded.request_id,
            attempts=recorded.attempts,
            wall_s=recorded.wall_s,
        )

    def _record(self, call: LLMCall) -> None:
        self.service.board.add_llm_call(call)
