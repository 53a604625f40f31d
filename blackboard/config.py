"""Scenario files: a strict tree of msgspec Structs decoded from TOML.

Unknown keys are errors (``forbid_unknown_fields``), limits live in ``Meta`` annotations, and every
problem is reported as one line naming the file, the key and what is wrong, so a typo in a scenario
can never silently fall back to a default.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, ClassVar, Literal

import msgspec

from ._keys import explain
from .records import LLMRole

Positive = Annotated[float, msgspec.Meta(gt=0)]
Count = Annotated[int, msgspec.Meta(ge=1, le=64)]  # plans, avenues, queue lengths
ChooseBy = Literal["expected_value", "paper"]  # how a language model's plans are picked (llm.choose_by)


class ScenarioError(Exception):
    """A scenario that cannot be used; the message is one line: file, key, problem."""


class _Strict(msgspec.Struct, forbid_unknown_fields=True, frozen=True, kw_only=True):
    pass


class CampaignConfig(_Strict, frozen=True):
    name: str = "campaign"
    # A problem folder in GPU MODE format, relative to the scenario file (or absolute).
    task: str = "../evaluator/tasks/amd_fp8_mm"
    # The seed kernel: a file of the task folder ("" = its submission.py), relative to the folder.
    seed_file: str = ""
    # A seed with no kernel of its own (plain PyTorch) is lowered by Inductor once it has passed
    # its check, and the lowered Triton kernel evaluated: the catalogue's techniques need Triton.
    # A seed that fails (any seed) gives way to the folder's reference, lowered the same way.
    lower_seed: bool = True
    lower_timeout_s: Positive = 120.0  # wall seconds Inductor may take; past them, the seed alone
    seed: Annotated[int, msgspec.Meta(ge=0)] = 1
    hours: Positive = 24.0  # campaign length on the campaign clock
    # Where `run` puts the blackboard when --db is not given, relative to the working directory.
    out_dir: str = "runs"


class LatencyConfig(_Strict, frozen=True):
    """Modeled thinking time per step, in campaign seconds (an LLM call takes minutes, not zero)."""

    archivist: Annotated[float, msgspec.Meta(ge=0)] = 60.0
    theorist: Annotated[float, msgspec.Meta(ge=0)] = 300.0
    engineer: Annotated[float, msgspec.Meta(ge=0)] = 600.0
    critic: Annotated[float, msgspec.Meta(ge=0)] = 90.0


class AgentsConfig(_Strict, frozen=True):
    # offline: the embedded heuristics (no network). anthropic / openai-compatible: a language
    # model, configured in [llm]. replay: the answers recorded on another blackboard (llm.replay_from).
    brain: Literal["offline", "anthropic", "openai-compatible", "replay"] = "offline"
    engineers: Annotated[int, msgspec.Meta(ge=1, le=32)] = 2  # engineers working at once
    # Back-pressure: the theorist plans new experiments only while fewer than this many kernels are
    # waiting anywhere in the pipeline (chosen hypotheses, drafts, queued submissions).
    max_pending: Count = 6
    avenues: Count = 10  # the paper: 10 avenues ...
    plans: Count = 5  # ... 5 written plans ...
    choose: Count = 3  # ... of which 3 run
    prescreen: bool = True  # the critic's cheap CPU run before a submission is queued
    latency: LatencyConfig = LatencyConfig()


NonNegative = Annotated[float, msgspec.Meta(ge=0)]


class RoleConfig(_Strict, frozen=True):
    """One role's model settings; an empty ``model`` means ``llm.model``."""

    model: str = ""
    # None: the role's default (LLMConfig.ROLE_MAX_TOKENS), also when other keys of the role are set.
    max_tokens: Annotated[int, msgspec.Meta(ge=16, le=128_000)] | None = None
    # None: the provider's default (sent only when set; recent Claude models may fix it themselves).
    temperature: Annotated[float, msgspec.Meta(ge=0, le=2)] | None = None
    concurrency: Annotated[int, msgspec.Meta(ge=1, le=64)] = 2  # this role's calls in flight at once


class PriceConfig(_Strict, frozen=True):
    """USD per million tokens (defaults: Claude Sonnet list prices; set 0 for a local server)."""

    input: NonNegative = 3.0
    output: NonNegative = 15.0
    cache_write: NonNegative = 3.75
    cache_read: NonNegative = 0.30


class LLMConfig(_Strict, frozen=True):
    """The language-model brains (``agents.brain`` = anthropic, openai-compatible or replay)."""

    model: str = "claude-sonnet-4-6"
    # "" = the provider's default (api.anthropic.com); required for openai-compatible, e.g.
    # "http://127.0.0.1:8000/v1" (vLLM), "http://127.0.0.1:11434/v1" (Ollama).
    base_url: str = ""
    api_key_env: str = "ANTHROPIC_API_KEY"  # the *name* of the variable; keys never enter a scenario
    timeout_s: Positive = 600.0  # one HTTP attempt
    max_retries: Annotated[int, msgspec.Meta(ge=0, le=10)] = 4  # after the first attempt
    backoff_s: Positive = 1.0  # first retry delay when the server gives no retry-after (doubles)
    max_backoff_s: Positive = 60.0
    # After 3 failed brain steps in a row an agent pauses this many campaign seconds before asking
    # again, doubling with every further failure up to max_pause_s (an outage is outlived, not fatal).
    pause_s: Positive = 300.0
    max_pause_s: Positive = 3600.0
    concurrency: Annotated[int, msgspec.Meta(ge=1, le=256)] = 4  # all calls in flight at once
    budget_usd: NonNegative | None = None  # a hard cap, never exceeded (worst case reserved per call)
    budget_tokens: Annotated[int, msgspec.Meta(ge=0)] | None = None
    stream_above: Annotated[int, msgspec.Meta(ge=0)] = 8192  # stream answers allowed more tokens
    source_chars: Annotated[int, msgspec.Meta(ge=200)] = 24_000  # per kernel source in a prompt
    text_chars: Annotated[int, msgspec.Meta(ge=100)] = 2_000  # per evaluator output / error text
    knowledge_passages: Annotated[int, msgspec.Meta(ge=0, le=50)] = 6
    # How the designer picks the plans that run: "expected_value" (each plan valued, with its
    # reason; the highest run) or "paper" (the most innovative, the highest maximum and the
    # highest minimum uplift: the paper's rule, mechanical and steerable by self-given scores).
    choose_by: ChooseBy = "expected_value"
    # brain = "replay": the blackboard whose exchanges are replayed (relative to the working directory,
    # like --db).
    replay_from: str = ""
    prices: PriceConfig = PriceConfig()
    select: RoleConfig = RoleConfig()
    design: RoleConfig = RoleConfig()
    implement: RoleConfig = RoleConfig()
    review: RoleConfig = RoleConfig()

    ROLE_MAX_TOKENS: ClassVar[dict[LLMRole, int]] = {
        "select": 1024,
        "design": 6000,
        "implement": 16_000,
        "review": 1024,
    }

    def role(self, role: LLMRole) -> RoleConfig:
        """The settings of one role (its table: ``[llm.design]`` and so on)."""
        roles = {"select": self.select, "design": self.design, "implement": self.implement, "review": self.review}
        return roles[role]

    def max_tokens(self, role: LLMRole) -> int:
        return self.role(role).max_tokens or self.ROLE_MAX_TOKENS[role]


class EvaluatorConfig(_Strict, frozen=True):
    # simulated: CPU correctness + analytic timing model, virtual time. local: this machine's GPUs.
    # ray: the GPUs of a Ray cluster (docs/ray.md), each evaluation a Ray task on some GPU host.
    backend: Literal["simulated", "local", "ray"] = "simulated"
    # ray backend: the cluster to join ("auto", "10.0.0.5:6379", "ray://..."); "" = a cluster already
    # started on this machine, else a new local one. Not fixed on resume (a restarted head may move).
    ray_address: str = ""
    # local and ray backends: "cpu" runs the same harness processes under Triton's interpreter, timed by
    # the host clock (tests and dry runs without a GPU; Ray then schedules on CPUs).
    harness_device: Literal["cuda", "cpu"] = "cuda"
    device: Literal["mi300x", "h200", "h100"] = "mi300x"
    rate_per_hour: Positive = 6.0  # submissions started per campaign hour (sliding window)
    in_flight: Annotated[int, msgspec.Meta(ge=1, le=16)] = 1  # evaluations running at once
    noise: Annotated[float, msgspec.Meta(ge=0, le=0.5)] = 0.02  # simulated timing noise (sigma)
    timeout_s: Positive = 60.0  # wall-clock limit for one candidate's sandboxed run
    lease_s: Positive = 3600.0  # campaign seconds a claimed submission stays claimed
    # A candidate whose first score would lead the campaign (the seed's included) is timed this
    # many more times, with new inputs, before it is recorded: its score is then the geometric mean
    # (one timing's luck would otherwise crown it; docs/evaluator.md, "Re-timing a new leader").
    # A run that starts with a leader recorded on fewer timings (an older blackboard) times it first.
    retime_leaders: Annotated[int, msgspec.Meta(ge=0, le=4)] = 1
    # local and ray backends: between min_calls and max_calls timed calls per ranked shape, fewer
    # than max_calls once the standard error of the device times is under rel_stderr of their mean
    # or the shape's budget of wall seconds is spent.
    min_calls: Annotated[int, msgspec.Meta(ge=3, le=1000)] = 3
    max_calls: Annotated[int, msgspec.Meta(ge=3, le=1000)] = 100
    rel_stderr: Annotated[float, msgspec.Meta(ge=0, le=0.5)] = 0.001
    shape_budget_s: Positive = 5.0
    # local backend: start each GPU's next harness process while the current one runs, so its
    # start-up is not on the GPU's critical path (each candidate still gets a fresh process).
    spare_process: bool = True
    # local backend: how many queued candidates are compiled ahead, each in the harness process that
    # will evaluate it, while another candidate holds the GPU (a dry pass that runs nothing on the
    # GPU; evaluator/sandbox/_prepare.py). 0 turns it off.
    prepare_ahead: Annotated[int, msgspec.Meta(ge=0, le=8)] = 2
    # The rules on what the kernel may call (a torch matmul doing the task's work is rejected,
    # statically and at run time). A campaign's goal is a custom kernel, so on by default;
    # `evaluate` judges as a leaderboard does and leaves them off.
    own_kernel: bool = True
    # simulated backend: also compile each evaluation's Triton kernels for the device's architecture
    # (ptxas for sm_90, the AMDGPU back end for gfx942) and record registers, spills and shared
    # memory (a GPU reports them always). "auto": with an LLM brain, which reads them; the offline
    # brain does not, and each new kernel setting costs 0.1-2 s of CPU.
    compile_stats: Literal["auto", "on", "off"] = "auto"
    # GPU backends: a new leader is profiled once, one call of its farthest shape from the speed
    # of light under Nsight Compute (ncu), and the designer shown the counters. "auto": with an LLM
    # brain (the offline brain does not read them); each profile costs its run's wall time.
    profile: Literal["auto", "on", "off"] = "auto"

    def __post_init__(self) -> None:
        if self.min_calls > self.max_calls:
            raise ValueError(
                f"evaluator.min_calls ({self.min_calls}) must not exceed evaluator.max_calls ({self.max_calls})"
            )


class Scenario(_Strict, frozen=True):
    campaign: CampaignConfig = CampaignConfig()
    agents: AgentsConfig = AgentsConfig()
    evaluator: EvaluatorConfig = EvaluatorConfig()
    llm: LLMConfig = LLMConfig()
    # Where the scenario came from; task paths are resolved against it. Not read from TOML.
    source: str = ""

    def __post_init__(self) -> None:
        if self.agents.brain == "openai-compatible" and not self.llm.base_url:
            raise ValueError(
                "llm.base_url: required with agents.brain = 'openai-compatible' (e.g. 'http://127.0.0.1:8000/v1')"
            )
        if self.agents.brain == "replay" and not self.llm.replay_from:
            raise ValueError(
                "llm.replay_from: required with agents.brain = 'replay' (the path of the recorded blackboard)"
            )

    def replay_path(self) -> Path:
        return Path(self.llm.replay_from).resolve()

    def seed_path(self) -> Path:
        return self.task_path() / (self.campaign.seed_file or "submission.py")

    def task_path(self) -> Path:
        task = Path(self.campaign.task)
        if not task.is_absolute() and self.source:
            task = Path(self.source).parent / task
        return task.resolve()


def _set(tree: dict[str, object], dotted: str, raw: str, origin: str) -> None:
    """Apply one ``--set key=value`` (value parsed as a TOML value, else taken as a string)."""
    try:
        value = msgspec.toml.decode(f"v = {raw}".encode())["v"]
    except msgspec.DecodeError:
        value = raw
    node = tree
    *parents, leaf = dotted.split(".")
    for part in parents:
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise ScenarioError(f"{origin}: --set {dotted}: '{part}' is a value, not a table")
        node = child
    node[leaf] = value


def parse_overrides(pairs: list[str], origin: str) -> list[tuple[str, str]]:
    out = []
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ScenarioError(f"{origin}: --set {pair!r}: expected key=value, e.g. agents.engineers=4")
        out.append((key.strip(), value.strip()))
    return out


def load_scenario(path: str | Path, overrides: Sequence[str] = ()) -> Scenario:
    """Read a scenario file and apply ``key=value`` overrides. Raises ScenarioError."""
    path = Path(path)
    try:
        text = path.read_bytes()
    except OSError as exc:
        raise ScenarioError(f"{path}: cannot read scenario ({exc.strerror})") from exc
    try:
        tree = msgspec.toml.decode(text)
    except msgspec.DecodeError as exc:
        raise ScenarioError(f"{path}: not valid TOML: {exc}") from exc
    for key, value in parse_overrides(list(overrides), str(path)):
        _set(tree, key, value, str(path))
    scenario = decode_scenario(tree, str(path))
    scenario = msgspec.structs.replace(scenario, source=str(path.resolve()))
    if not scenario.task_path().is_dir():
        raise ScenarioError(f"{path}: campaign.task: no problem folder at {scenario.task_path()}")
    if not scenario.seed_path().is_file():
        raise ScenarioError(
            f"{path}: campaign.seed_file: no seed kernel at {scenario.seed_path()}; name a file "
            "of the task folder, or leave it out to use the folder's submission.py"
        )
    return scenario


# What a resumed campaign may not change: its identity, its problem and who does the work.
FIXED_ON_RESUME = (
    "campaign.name",
    "campaign.seed",
    "campaign.task",
    "campaign.seed_file",
    "campaign.lower_seed",
    "campaign.lower_timeout_s",
    "evaluator.own_kernel",
    "evaluator.backend",
    "evaluator.device",
    "evaluator.harness_device",
    "agents.brain",
)


def retune(scenario: Scenario, overrides: list[str], origin: str) -> Scenario:
    """The scenario of a resumed campaign with ``key=value`` overrides of its limits (concurrency,
    rate, timeouts, hours). Raises ScenarioError for a key that would change what the campaign is."""
    tree = msgspec.to_builtins(scenario)
    source = tree.pop("source", None)
    for key, value in parse_overrides(list(overrides), origin):
        if key in FIXED_ON_RESUME:
            raise ScenarioError(
                f"{origin}: --set {key}: cannot change on resume (the campaign's "
                f"{key.split('.')[-1]} is fixed; start a new campaign instead)"
            )
        _set(tree, key, value, origin)
    return msgspec.structs.replace(decode_scenario(tree, origin), source=source)


def decode_scenario(tree: dict[str, object], origin: str) -> Scenario:
    if "source" in tree:
        raise ScenarioError(f"{origin}: source: not a scenario key (it is set by the loader)")
    try:
        return msgspec.convert(tree, Scenario)
    except msgspec.ValidationError as exc:
        # msgspec says "Expected `int`, got `str` - at `$.agents.engineers`"; the user reads the
        # key, what it accepts and what it got (blackboard/_keys.py).
        raise ScenarioError(f"{origin}: {explain(Scenario, tree, str(exc))}") from None


def scenario_json(scenario: Scenario) -> str:
    return msgspec.json.encode(scenario).decode()


def scenario_from_json(text: str) -> Scenario:
    return msgspec.json.decode(text, type=Scenario)
