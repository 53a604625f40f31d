"""What every agent shares: the blackboard, the campaign clock, its voice, its own random stream.

Determinism in virtual time. trio randomises the order in which tasks that become runnable at the
same instant are resumed, so two agents acting at the same virtual instant could interleave their
writes differently from run to run. Each agent therefore acts only on its own *slot* of a
millisecond grid (``act()``): agent ``rank`` r may read-and-write only at times t with
``round(t * 1000) % SLOTS == r``. No two agents ever act at the same instant, and between ``act()``
and the next ``await`` an agent's step runs to completion, so the same scenario and seed give the
same records in the same order. On the wall clock the same code costs at most ``SLOTS`` ms.

Outages are outlived. A brain step can fail for reasons that heal (a server down for an hour, an
overloaded API): after ``PAUSE_AFTER`` failures in a row the agent says so and pauses, ``llm.pause_s``
campaign seconds at first and twice as long after every further failure, up to ``llm.max_pause_s``,
then asks again; its first success says the brain is back. Giving up after a few failures would
turn a five-minute outage into a silent rest of the campaign. Only what waiting cannot heal retires
an agent: a spent budget, or a ``BrainUnavailable`` (a bad key, an unknown model, a diverged
replay); the campaign's closing lines say so.
"""

from __future__ import annotations

import random
import zlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TypeVar

import anyio
from kernel_scientist.blackboard import Blackboard, HypothesisState, KernelState, Scenario, SubmissionState, metrics
from kernel_scientist.blackboard.records import MessageKind
from kernel_scientist.evaluator import Backend, Task

from .brain import Brain, BrainError, BrainUnavailable, BudgetExhausted

SLOTS = 64
SEED_PRIORITY = 1e6  # the seed is every prediction's baseline: first in the evaluation queue
PAUSE_AFTER = 3  # consecutive failed brain steps after which an agent pauses before asking again

View = TypeVar("View")
Answer = TypeVar("Answer")


@dataclass
class CampaignClock:
    """Campaign time = the event loop's clock + the time a resumed campaign had already run."""

    offset: float = 0.0
    origin: float = 0.0
    deadline: float = float("inf")  # campaign time at which agents stop starting new work

    def now(self) -> float:
        return anyio.current_time() - self.origin + self.offset

    def to_loop(self, campaign_time: float) -> float:
        return campaign_time - self.offset + self.origin

    def over(self) -> bool:
        return self.now() >= self.deadline


@dataclass
class Context:
    """Everything an agent is given by the campaign runner (no agent sees another agent)."""

    board: Blackboard
    scenario: Scenario
    clock: CampaignClock
    seed: int
    backend: Backend  # only the critic (pre-screen) and the evaluator agent use it
    task: Task
    brain: Brain


@dataclass
class Agent:
    """Base class: ``name`` is how the agent appears in the logs, ``rank`` its slot."""

    ctx: Context
    name: str
    rank: int
    rng: random.Random = field(init=False)

    async def run(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """The agent's loop, started by the campaign runner with ``task_group.start``."""
        raise NotImplementedError

    def __post_init__(self) -> None:
        # zlib.crc32, not hash(): str hashes are salted per process.
        self.rng = random.Random(zlib.crc32(f"{self.ctx.seed}:{self.name}".encode()))
        self.retired = False  # set when the brain can no longer be asked (budget, an error that cannot heal)
        self.retired_why = ""
        self._failures = 0
        self._pause_due = 0.0  # campaign seconds to wait before the next question (module note)
        self.failed_why = ""  # why the latest brain step failed, for the record of what came of it

    async def ask(self, step: str, call: Callable[[View], Awaitable[Answer]], view: View) -> Answer | None:
        """Ask the brain; a failed step is recorded as a warning and returns None.

        A spent budget or an error that cannot heal retires the agent (it stops asking; the work
        it already handed on continues). Any other failure counts towards a pause (module note).
        """
        await self.rest()
        try:
            answer = await call(view)
        except BudgetExhausted as exc:
            self.failed_why = str(exc)
            self._retire("warning", f"{step}: {exc}; no more LLM work from {self.name}")
            return None
        except BrainUnavailable as exc:
            self.failed_why = str(exc)
            self._retire(
                "error",
                f"{step} failed: {exc}; waiting will not fix this, so {self.name} stops "
                "asking (fix it, then `kernel-scientist resume`)",
            )
            return None
        except BrainError as exc:
            self.failed_why = str(exc)
            self._failures += 1
            self.say("warning", f"{step} failed: {exc}")
            if self._failures >= PAUSE_AFTER:
                cfg = self.ctx.scenario.llm
                self._pause_due = min(cfg.max_pause_s, cfg.pause_s * 2 ** (self._failures - PAUSE_AFTER))
                self.say(
                    "warning",
                    f"{self._failures} failed brain steps in a row; {self.name} pauses "
                    f"{_hms(self._pause_due)} before asking again (pauses double up to "
                    f"{_hms(cfg.max_pause_s)})",
                )
            return None
        if self._failures >= PAUSE_AFTER:
            self.say("info", f"{self.name}'s brain answers again after {self._failures} failed steps")
        self._failures = 0
        return answer

    async def rest(self) -> None:
        """Wait out a pause announced after repeated brain failures (call before taking on work
        that holds a lease, so that a lease never runs out during a pause)."""
        if self._pause_due > 0:
            pause, self._pause_due = self._pause_due, 0.0
            await self.think(pause)

    def _retire(self, kind: MessageKind, text: str) -> None:
        self.retired = True
        self.retired_why = text
        self.say(kind, text)

    @property
    def board(self) -> Blackboard:
        return self.ctx.board

    @property
    def asks_a_model(self) -> bool:
        """Whether the brain is a language model (or its replay), whose every question costs a
        call: then no question is asked whose answer the program already knows, and a plan gone
        stale is dropped before it is written. The offline brain's questions cost nothing, and its
        campaigns (docs/results.md) keep the behaviour they were measured with."""
        return self.ctx.scenario.agents.brain != "offline"

    def now(self) -> float:
        return self.ctx.clock.now()

    async def act(self, rank: int | None = None) -> None:
        """Wait for this agent's next slot (see the module note); ``rank`` overrides the agent's
        own for its worker tasks."""
        rank = self.rank if rank is None else rank
        tick = round(anyio.current_time() * 1000)
        step = (rank - tick) % SLOTS or SLOTS
        await anyio.sleep_until((tick + step) / 1000)

    async def think(self, seconds: float) -> None:
        """Spend modeled thinking time (an LLM call, a human's minutes) on the campaign clock."""
        if seconds > 0:
            await anyio.sleep(seconds)
        await self.act()

    def say(
        self, kind: MessageKind, text: str, *, kernel_id: int | None = None, hypothesis_id: int | None = None
    ) -> None:
        self.board.say(
            agent=self.name, kind=kind, text=text, at=self.now(), kernel_id=kernel_id, hypothesis_id=hypothesis_id
        )

    def starts_left(self) -> int | None:
        """How many more evaluations the rate limit lets start before the deadline (None: no
        deadline). An upper bound: an evaluation that outlasts the spacing delays the next."""
        clock = self.ctx.clock
        if clock.deadline == float("inf"):
            return None
        campaign = self.board.campaign()
        now = self.now()
        left = clock.deadline - now - metrics.headroom_s(campaign, self.board.evaluation_starts(), now)
        spacing = 3600.0 / metrics.limits_at(campaign, now).rate_per_hour
        return 0 if left < 0 else int(left // spacing) + 1

    def pending(self) -> int:
        """Work waiting anywhere in the pipeline: the theorist's back-pressure signal."""
        board = self.board
        return (
            len(board.hypotheses(HypothesisState.CHOSEN, HypothesisState.CLAIMED))
            + len(board.kernels(KernelState.DRAFT))
            + len(board.submissions(SubmissionState.QUEUED, SubmissionState.LEASED))
        )


def _hms(seconds: float) -> str:
    hours, rest = divmod(int(seconds), 3600)
    return f"{hours:02d}:{rest // 60:02d}:{rest % 60:02d}"
