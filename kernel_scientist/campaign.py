"""The campaign runner: owns the root task group and starts each agent in it.

With a simulated backend the whole campaign runs on trio's MockClock (autojump): modeled thinking
time, evaluation time and the rate limit pass in virtual time, and wall time is spent only on real
work (kernel transformations, the sandboxed CPU checks). With a real backend it would run on the
wall clock; the agents cannot tell the difference.
"""

from __future__ import annotations

import random
import time
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import anyio
import trio.testing

from agents import (
    Archivist, CampaignClock, Context, Critic, Engineer, EvaluatorAgent, OfflineBrain, Theorist,
)
from blackboard import (
    Blackboard, BlackboardError, Campaign, KernelState, Message, Scenario, retune, scenario_from_json,
    scenario_json,
)


@dataclass
class Outcome:
    db: Path
    resumed: bool
    released: int  # leases handed back on resume
    wall_s: float


def _make_backend(scenario: Scenario, task):
    from evaluator import LocalBackend, SimulatedBackend

    cfg = scenario.evaluator
    if cfg.backend == "local":
        return LocalBackend(task, timeout_s=cfg.timeout_s, max_calls=cfg.max_calls,
                            shape_budget_s=cfg.shape_budget_s, own_kernel=cfg.own_kernel)
    return SimulatedBackend(task, device=cfg.device, noise=cfg.noise, timeout_s=cfg.timeout_s,
                            own_kernel=cfg.own_kernel)


def check_new(db: Path) -> None:
    if db.exists():
        raise BlackboardError(f"{db} already exists; resume it with `kernel-scientist resume --db {db}` "
                              "or pass another --db")


def start(scenario: Scenario, db: Path, listeners: list[Callable[[Message], None]] = ()) -> Outcome:
    """Create a campaign in a new blackboard file and run it to its deadline."""
    check_new(db)
    db.parent.mkdir(parents=True, exist_ok=True)
    return _run(scenario, db, listeners, resume=False)


def resume(db: Path, listeners: list[Callable[[Message], None]] = (), overrides: list[str] = ()) -> Outcome:
    """Continue a campaign from its blackboard file (after a crash, kill -9 or Ctrl-C), optionally
    with retuned limits (``evaluator.in_flight=2``) for this run."""
    from blackboard import open_existing

    with open_existing(db) as board:
        scenario = scenario_from_json(board.campaign().config_json)
    if overrides:
        scenario = retune(scenario, list(overrides), str(db))
    return _run(scenario, db, listeners, resume=True, retuned=list(overrides))


def _run(scenario: Scenario, db: Path, listeners, *, resume: bool, retuned: list[str] = ()) -> Outcome:
    from evaluator import load_task

    wall = time.perf_counter()
    if scenario.agents.brain != "offline":
        from agents.llm import LLMService

        LLMService.preflight(scenario)
    task = load_task(scenario.task_path())
    try:  # read before anything is created: a campaign without its seed would be a dead end
        seed_source = "" if resume else scenario.seed_path().read_text()
    except OSError as exc:
        raise BlackboardError(f"{scenario.seed_path()}: cannot read the seed kernel ({exc.strerror}); "
                              "set campaign.seed_file to a file of the task folder") from None
    board = Blackboard(db)
    for listener in listeners:
        board.on_message(listener)
    backend = _make_backend(scenario, task)
    released = 0
    with backend, board:
        if not resume:
            reference = backend.reference_report()
            board.create_campaign(Campaign(
                name=scenario.campaign.name, seed=scenario.campaign.seed, task=task.name,
                backend=backend.name, simulated=backend.simulated, config_json=scenario_json(scenario),
                created_wall=time.time(), virtual_time=backend.simulated, reference=reference))
            seed = board.add_kernel(source=seed_source, author="seed", at=0.0, state=KernelState.DRAFT,
                                    summary=f"seed submission ({scenario.seed_path().name})")
            board.say(agent="runner", kind="info", at=0.0, kernel_id=seed.id,
                      text=f"campaign '{scenario.campaign.name}' on {task.name}: {scenario.campaign.hours:g} h "
                      f"({'virtual' if backend.simulated else 'wall'} clock), backend {backend.name} "
                      f"({backend.device_name}), seed {scenario.campaign.seed}; reference "
                      f"{_reference_text(reference, backend.simulated)}")
        else:
            released = board.release_leases()
            board.say(agent="runner", kind="info", at=board.clock(),
                      text=f"resumed at campaign time {board.clock() / 3600:.2f} h; "
                      f"{released} unfinished claims handed back"
                      + (f"; this run with {', '.join(retuned)}" if retuned else ""))
        clock = CampaignClock(offset=board.clock(), deadline=scenario.campaign.hours * 3600.0)
        options = {"clock": trio.testing.MockClock(autojump_threshold=0)} if backend.simulated else {}
        anyio.run(_agents, board, scenario, clock, backend, task, backend="trio", backend_options=options)
    return Outcome(db=db, resumed=resume, released=released, wall_s=time.perf_counter() - wall)


def _reference_text(reference, simulated: bool) -> str:
    if reference is None or reference.score_us is None:
        return f"n/a ({reference.outcome}: {reference.reason})" if reference else "n/a"
    return f"{reference.score_us:.1f} us ({'simulated' if simulated else 'measured'})"


def _vendor(scenario: Scenario, backend) -> str:
    """Whose GPU is being optimised for: "amd" (simulated MI300X, or a ROCm machine) or "nvidia"."""
    if backend.simulated:
        return "amd" if scenario.evaluator.device == "mi300x" else "nvidia"
    name = backend.device_name.lower()
    return "amd" if "amd" in name or "mi3" in name else "nvidia"


async def _agents(board: Blackboard, scenario: Scenario, clock: CampaignClock, backend, task) -> None:
    clock.origin = anyio.current_time()
    seed = scenario.campaign.seed

    service = None
    if scenario.agents.brain != "offline":  # a language model (or its recording) thinks
        from agents.llm import LLMService

        service = LLMService(scenario, board, clock.now)

    def context(name: str) -> Context:
        if service is not None:
            brain = service.brain(name)
        else:
            brain = OfflineBrain(random.Random(zlib.crc32(f"{seed}:brain:{name}".encode())),
                                 vendor=_vendor(scenario, backend), kernels=task.kernels())
        return Context(board=board, scenario=scenario, clock=clock, seed=seed, backend=backend,
                       task=task, brain=brain)

    cfg = scenario.agents
    archivist = Archivist(context("archivist"), "archivist", rank=1)
    theorist = Theorist(context("theorist"), "theorist", rank=2)
    critic = Critic(context("critic"), "critic", rank=3)
    evaluator = EvaluatorAgent(context("evaluator"), "evaluator", rank=8)
    engineers = [Engineer(context(f"engineer-{i + 1}"), f"engineer-{i + 1}", rank=24 + i)
                 for i in range(cfg.engineers)]
    if clock.over():
        board.say(agent="runner", kind="info", at=clock.now(), text="the campaign is already past its deadline")
    else:
        async with anyio.create_task_group() as root:
            for agent in (evaluator, critic, archivist, theorist, *engineers):
                await root.start(agent.run)
    # The queue has drained: judge and digest what finished after the deadline.
    await critic.final_pass()
    await archivist.final_pass()
    board.say(agent="runner", kind="info", at=clock.now(),
              text=f"campaign over at {clock.now() / 3600:.2f} h: {len(board.evaluations())} evaluations")

