"""The brain protocol: what each thinking agent asks, and the Structs it gets back.

One small async method per role, in the order of the paper's stages. An agent builds a *view*
(plain data read from the blackboard) and asks its brain; the answer is a Struct that the agent
checks and records. The offline brain answers from the history and the technique catalogue; an
LLM brain renders the same views into prompts and decodes the same answer Structs.

Nothing left to try. A design with no plans is how any brain says that it has nothing (more) to
try on a base: the theorist marks the base exhausted and the archivist never picks it again. When
every kernel that passed is exhausted and no work is left anywhere, the campaign ends early and its
closing line says so once (``no_plan_text`` words it, per brain).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import msgspec
from kernel_scientist.blackboard import Kernel, Outcome, Scenario
from kernel_scientist.blackboard.records import Param
from kernel_scientist.evaluator import RuleFinding

Params = dict[str, Param]


class CannotImplement(Exception):
    """The writer could not turn a plan into a kernel; the message says why."""


class BrainError(Exception):
    """A brain could not answer (the model refused, the answer stayed invalid after its repair
    turn, the server kept failing). The agent records the step as failed and carries on."""


class BudgetExhausted(BrainError):
    """The campaign's LLM budget cannot cover another call: the agent stops asking (the
    evaluator still finishes its queue)."""


class BrainUnavailable(BrainError):
    """The brain cannot answer and waiting will not change that (a bad API key, a model the server
    does not know, a spent quota, a replay that diverged from its recording): the agent stops
    asking. Any other BrainError may heal (an outage, an overloaded server), and the agent pauses
    and asks again."""


# ---- views (what a brain sees) -------------------------------------------------------------
class KernelView(msgspec.Struct, frozen=True):
    id: int
    parent_id: int | None
    author: str
    summary: str
    score_us: float | None  # None: not evaluated or failed
    shape_us: list[float | None]  # per ranked shape, in the task's order
    shape_notes: list[str] = []  # per ranked shape where measured: "host-bound", "12% of SoL"
    deviations: str = ""  # where its writer departed from the plan (Kernel.deviations)
    compile_stats: str = ""  # its evaluation's compile statistics as a table (compile_stats_table); "" = none
    profile: str = ""  # its evaluation's profile on a GPU as a table (profile_table); "" = none


def faster_reference(base: KernelView, kernels: Sequence[KernelView]) -> tuple[KernelView | None, str]:
    """The kernel of ``kernels`` faster than ``base`` on the most shapes (the earlier in
    ``kernels`` on a tie), if one is faster anywhere: the reference a selection borrows from, with
    the reason's clause ("; reference 4 is faster on 7 of 18 shapes", or "")."""
    reference, wins = None, 0
    for other in kernels:
        if other.id == base.id:
            continue
        n = sum(1 for a, b in zip(other.shape_us, base.shape_us) if a is not None and b is not None and a < b)
        if n > wins:
            reference, wins = other, n
    if reference is None:
        return None, ""
    return reference, f"; reference {reference.id} is faster on {wins} of {len(base.shape_us)} shapes"


class PendingView(msgspec.Struct, frozen=True):
    """A trial with no result yet: a chosen plan waiting for an engineer, being written, in
    review, queued or being evaluated (``stage`` says which, in words)."""

    hypothesis_id: int
    base_id: int
    label: str
    stage: str
    plan: str
    min_uplift: float
    max_uplift: float


class FailureView(msgspec.Struct, frozen=True):
    """A kernel that failed its evaluation or was sent back in review, with the error text."""

    kernel_id: int
    parent_id: int | None
    what: str  # the plan's label and technique, or the kernel's summary
    outcome: str  # an evaluation's Outcome, or "sent back in review"
    error: str  # the evaluator's reason (and a failing shape's error), or the review's reasons


class SelectionView(msgspec.Struct, frozen=True):
    kernels: list[KernelView]  # every evaluated kernel that passed
    exhausted: list[int]  # bases for which the theorist found nothing left to try
    shapes: list[str] = []  # the ranked shapes' labels (m x n x k), in shape_us order
    pending: list[PendingView] = []
    failures: list[FailureView] = []  # the latest failed or sent-back kernels
    evaluations_left: int | None = None  # starts the rate limit allows before the deadline (None: none)


class TrialView(msgspec.Struct, frozen=True):
    """One earlier experiment: what was tried on which base and what came of it."""

    base_id: int
    technique: str
    label: str
    observed_uplift: float | None  # None: failed, rejected or not yet evaluated
    verdict: str
    note: str = ""  # why an abandoned plan has no kernel (Hypothesis.why_abandoned)


class TaskView(msgspec.Struct, frozen=True):
    """The task as a kernel's designer and writer need it: its prose (task.yml's description), its
    reference.py (what a submission computes, its inputs and the check with its tolerance), and the
    static rules a submission must keep (``rules_text``)."""

    description: str = ""
    reference_impl: str = ""
    rules: str = ""


class DesignView(msgspec.Struct, frozen=True):
    base: KernelView
    base_source: str
    reference: KernelView | None
    reference_source: str | None
    trials: list[TrialView]
    findings: list[str]
    written: list[str]  # source hashes of every kernel already written: do not plan a twin
    avenues: int
    plans: int
    choose: int
    noise: float = 0.0  # the evaluator's timing noise (lognormal sigma): how sharp a prediction can be
    parent: KernelView | None = None  # the base's parent: per-shape change of the base against it
    shapes: list[str] = []  # the ranked shapes' labels, in shape_us order
    pending: list[PendingView] = []
    failures: list[FailureView] = []
    task: TaskView = TaskView()
    evaluations_left: int | None = None  # starts the rate limit allows before the deadline (None: none)
    own_kernel: bool = False  # the policy on what a kernel may call binds the campaign's kernels


class ImplementView(msgspec.Struct, frozen=True):
    base_source: str
    reference_source: str | None
    technique: str
    params: Params
    plan: str
    changes: list[str]
    task: TaskView = TaskView()


class ReviewView(msgspec.Struct, frozen=True):
    source: str
    base_source: str | None
    plan: str | None
    min_uplift: float
    max_uplift: float
    innovation: float
    static_findings: list[RuleFinding]
    prescreen: Prescreen | None  # None when not run
    deviations: str = ""  # where the writer departed from the plan, in its words
    queued: list[float] = []  # expected values of the kernels already waiting for the evaluator
    evaluations_left: int | None = None  # starts the rate limit allows before the deadline


class Prescreen(msgspec.Struct, frozen=True):
    """The cheap CPU pre-screen's outcome, as the reviewer sees it."""

    outcome: Outcome
    reason: str

    @property
    def passed(self) -> bool:
        return self.outcome == Outcome.PASSED

    def text(self) -> str:
        return "passed" if self.passed else f"{self.outcome}: {self.reason}"


# ---- answers ---------------------------------------------------------------------------------
class Choice(msgspec.Struct, frozen=True):
    base_id: int
    reference_id: int | None
    reason: str


class Plan(msgspec.Struct, frozen=True):
    technique: str
    params: Params
    label: str
    plan: str
    changes: list[str]
    min_uplift: float
    max_uplift: float
    innovation: float
    # Whether the plan borrows from the selection's reference kernel: only then is the reference
    # sent to its writer (a plan that does not use it costs no tokens for it).
    uses_reference: bool = True


class Design(msgspec.Struct, frozen=True):
    avenues: list[str]
    plans: list[Plan]
    chosen: list[int]  # indices into plans, the first to run first
    why: list[str]  # one reason per chosen plan


class Draft(msgspec.Struct, frozen=True):
    source: str
    summary: str
    deviations: str = ""  # where the writer departed from the plan in detail, and why ("" = none)


class Critique(msgspec.Struct, frozen=True):
    approve: bool
    reasons: list[str]
    expected_value: float  # the queue's priority: predicted gain plus a price for exploration


class Brain(Protocol):
    @property
    def name(self) -> str:
        """Which brain answers: "offline", "anthropic", "openai-compatible" or "replay"."""
        ...

    async def select(self, view: SelectionView) -> Choice: ...

    async def design(self, view: DesignView) -> Design: ...

    async def implement(self, view: ImplementView) -> Draft: ...

    async def review(self, view: ReviewView) -> Critique: ...


@runtime_checkable
class CalibratedRanges(Protocol):
    """An optional capability of a brain: with ``calibrates`` true, its plans' predicted ranges are
    already recalibrated on the campaign's trials (agents._calibration), so the theorist keeps them
    as they are. The offline brain ranks its plans on those ranges; a language model's are its own
    guesses, which the theorist calibrates."""

    calibrates: bool


def no_plan_text(scenario: Scenario, bases: Sequence[Kernel]) -> str:
    """Why the design brain gave no plan for ``bases`` (one or more exhausted kernels), naming the
    brain: "the offline catalogue has no technique left that makes a new kernel from kernel 1 (...)"
    or "the openai-compatible model M proposed no plan for kernels 1, 4"."""
    ids = [k.id for k in bases]
    which = f"kernel {ids[0]}" if len(ids) == 1 else "kernels " + ", ".join(map(str, ids))
    brain = scenario.agents.brain
    if brain == "offline":
        # Every technique of the catalogue rewrites a Triton kernel (knowledge/techniques): a seed
        # in plain PyTorch (or CUDA through load_inline) gives it nothing to work on.
        plain = [k for k in bases if "@triton.jit" not in k.source]
        why = ""
        if plain and len(plain) == len(bases):
            it = "it has" if len(bases) == 1 else "they have"
            why = f" ({it} no @triton.jit kernel, and the catalogue's techniques rewrite Triton kernels)"
        return f"the offline catalogue has no technique left that makes a new kernel from {which}{why}"
    model = scenario.llm.role("design").model or scenario.llm.model
    who = f"the recorded answers of {model}" if brain == "replay" else f"the {brain} model {model}"
    return f"{who} proposed no plan for {which}"
