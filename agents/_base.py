"""What every agent shares: the blackboard, the campaign clock, its voice, its own random stream.

Determinism in virtual time. trio randomises the order in which tasks that become runnable at the
same instant are resumed, so two agents acting at the same virtual instant could interleave their
writes differently from run to run. Each agent therefore acts only on its own *slot* of a
millisecond grid (``act()``): agent ``rank`` r may read-and-write only at times t with
``round(t * 1000) % SLOTS == r``. No two agents ever act at the same instant, and between ``act()``
and the next ``await`` an agent's step runs to completion, so the same scenario and seed give the
same records in the same order. On the wall clock the same code costs at most ``SLOTS`` ms.
"""

from __future__ import annotations

import random
import zlib
from dataclasses import dataclass, field
from typing import Any

import anyio
from loguru import logger

from blackboard import Blackboard, KernelState, HypothesisState, Scenario, SubmissionState

SLOTS = 64
SEED_PRIORITY = 1e6  # the seed is every prediction's baseline: first in the evaluation queue
MAX_BRAIN_FAILURES = 3  # consecutive failed brain steps after which an agent stops asking


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
    backend: Any  # evaluator backend (evaluate / prescreen); only the critic and evaluator use it
    task: Any  # evaluator.Task
    brain: Any  # agents.brain.Brain


@dataclass
class Agent:
    """Base class: ``name`` is how the agent appears in the logs, ``rank`` its slot."""

    ctx: Context
    name: str
    rank: int
    rng: random.Random = field(init=False)

    def __post_init__(self) -> None:
        # zlib.crc32, not hash(): str hashes are salted per process.
        self.rng = random.Random(zlib.crc32(f"{self.ctx.seed}:{self.name}".encode()))
        self.log = logger.bind(agent=self.name)
        self.retired = False  # set when the brain can no longer be asked (budget, repeated failure)
        self._failures = 0

    async def ask(self, step: str, call, view):
        """Ask the brain; a failed step is recorded as a warning and returns None.

        A spent budget retires the agent (it stops asking; the work it already handed on
        continues); so do ``MAX_BRAIN_FAILURES`` failures in a row, so that a model that keeps
        answering nonsense cannot loop forever.
        """
        from .brain import BrainError, BudgetExhausted

        try:
            answer = await call(view)
        except BudgetExhausted as exc:
            self.retired = True
            self.say("warning", f"{step}: {exc}; no more LLM work from {self.name}")
            return None
        except BrainError as exc:
            self._failures += 1
            self.say("warning", f"{step} failed: {exc}")
            if self._failures >= MAX_BRAIN_FAILURES:
                self.retired = True
                self.say("error", f"{self._failures} failed brain steps in a row; {self.name} stops asking")
            return None
        self._failures = 0
        return answer

    @property
    def board(self) -> Blackboard:
        return self.ctx.board

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

    def say(self, kind: str, text: str, **ids: int | None) -> None:
        self.board.say(agent=self.name, kind=kind, text=text, at=self.now(), **ids)

    def pending(self) -> int:
        """Work waiting anywhere in the pipeline: the theorist's back-pressure signal."""
        board = self.board
        return (len(board.hypotheses(HypothesisState.CHOSEN, HypothesisState.CLAIMED))
                + len(board.kernels(KernelState.DRAFT))
                + len(board.submissions(SubmissionState.QUEUED, SubmissionState.LEASED)))


def score(board: Blackboard, kernel_id: int) -> float | None:
    """A kernel's score in us when its evaluation passed every check, else None."""
    ev = board.evaluation_for(kernel_id)
    if ev is None or ev.report.score_us is None or ev.report.outcome != "passed":
        return None
    return ev.report.score_us
