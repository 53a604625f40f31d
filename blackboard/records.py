"""The blackboard's records: the one schema for rows, messages and results.

Every table row is one of these frozen msgspec Structs; the store encodes them to JSON columns and
decodes them back with ``msgspec.convert``, so a field added here is added everywhere at once.
Nothing in this module imports anything else of ours (the blackboard is the bottom layer).
"""

from __future__ import annotations

import enum
import math
from typing import Literal, cast

import msgspec

# What the package re-exports (``from kernel_scientist.blackboard import Kernel``).
__all__ = [
    "LEARNED",
    "LOWERED_AUTHOR",
    "SEED_AUTHOR",
    "Campaign",
    "CompileStats",
    "EvalReport",
    "Evaluation",
    "Finding",
    "Hypothesis",
    "HypothesisState",
    "Kernel",
    "KernelState",
    "LLMCall",
    "Message",
    "Outcome",
    "Provenance",
    "Review",
    "RunSegment",
    "Selection",
    "SelectionState",
    "Shape",
    "ShapeResult",
    "Submission",
    "SubmissionState",
    "Verdict",
]


class KernelState(enum.StrEnum):
    """A kernel's lifecycle: draft -> reviewed -> queued -> evaluating -> evaluated | failed;
    the critic may send a draft to rejected instead."""

    DRAFT = "draft"
    REVIEWED = "reviewed"
    QUEUED = "queued"
    EVALUATING = "evaluating"
    EVALUATED = "evaluated"
    FAILED = "failed"
    REJECTED = "rejected"


class HypothesisState(enum.StrEnum):
    PROPOSED = "proposed"  # written by the theorist, not chosen to run
    CHOSEN = "chosen"  # waiting for an engineer
    CLAIMED = "claimed"  # an engineer holds a lease on it
    IMPLEMENTED = "implemented"  # a kernel exists for it
    ABANDONED = "abandoned"  # not implemented: the engineer could not, or the plan went stale (why_abandoned)


class Verdict(enum.StrEnum):
    PENDING = "pending"
    CONFIRMED = "confirmed"
    REFUTED = "refuted"
    INCONCLUSIVE = "inconclusive"
    # The kernel did not compile: it says nothing about the idea (schema 3; earlier: refuted).
    BUILD_FAILED = "build_failed"


class SubmissionState(enum.StrEnum):
    QUEUED = "queued"
    LEASED = "leased"
    DONE = "done"


class Outcome(enum.StrEnum):
    """The closed set every evaluation ends in (the evaluator translates all failures into it)."""

    PASSED = "passed"
    WRONG_OUTPUT = "wrong_output"
    COMPILE_ERROR = "compile_error"
    CRASH = "crash"
    TIMEOUT = "timeout"
    OUT_OF_MEMORY = "out_of_memory"
    REJECTED_BY_RULE = "rejected_by_rule"


# One parameter value, wherever one is named: a keyword argument of a task's generate_input, a
# technique's or a plan's parameter.
Param = int | float | bool | str


class Shape(msgspec.Struct, frozen=True):
    """One test or ranked benchmark: the keyword arguments a folder's ``generate_input`` takes.

    A matrix-product folder's ``m, n, k`` keep fields of their own: every record written before
    tasks became general holds exactly those, so old blackboards still read, and the GEMM timing
    model reads them directly. Any other argument lives in ``args``, in the folder's order, as
    (name, value) pairs (a tuple keeps the record hashable). ``seed`` is apart because the
    evaluator mixes its secret seed into it.
    """

    m: int | None = None
    n: int | None = None
    k: int | None = None
    seed: int = 0
    args: tuple[tuple[str, Param], ...] = ()

    @classmethod
    def of(cls, kwargs: dict[str, Param]) -> Shape:
        """From one ``tests:``/``benchmarks:`` entry of task.yml."""
        rest = {k: v for k, v in kwargs.items() if k not in ("m", "n", "k", "seed")}
        seed = kwargs.get("seed", 0)
        # task.yml gives m, n, k as whole numbers
        m, n, k = (cast("int | None", kwargs.get(name)) for name in ("m", "n", "k"))
        return cls(m=m, n=n, k=k, seed=seed if isinstance(seed, int) else 0, args=tuple(rest.items()))

    def kwargs(self) -> dict[str, Param]:
        """The keyword arguments for ``generate_input`` (seed included)."""
        mnk = {name: v for name, v in (("m", self.m), ("n", self.n), ("k", self.k)) if v is not None}
        return {**mnk, **dict(self.args), "seed": self.seed}

    def is_mnk(self) -> bool:
        """Exactly a matrix product's m, n, k (and seed)."""
        return None not in (self.m, self.n, self.k) and not self.args

    def mnk(self) -> tuple[int, int, int]:
        """A matrix product's (m, n, k); a ValueError for a shape that has none (see ``is_mnk``)."""
        if self.m is None or self.n is None or self.k is None:
            raise ValueError(f"shape {self.label()} is not a matrix product's m, n, k")
        return self.m, self.n, self.k

    def work(self) -> int:
        """A size proxy for ordering shapes (which test is the smallest): the product of the
        positive integer arguments, seed apart."""
        out = 1
        for name, v in self.kwargs().items():
            if name != "seed" and isinstance(v, int) and not isinstance(v, bool) and v > 0:
                out *= v
        return out

    def with_seed(self, seed: int) -> Shape:
        return msgspec.structs.replace(self, seed=seed)

    def label(self) -> str:
        if self.is_mnk():
            return f"{self.m}x{self.n}x{self.k}"
        return " ".join(f"{name}={v}" for name, v in self.kwargs().items() if name != "seed")


HOST_BOUND = 0.6  # share of a call's time spent in host work above which a shape counts as host-bound


class ShapeResult(msgspec.Struct, frozen=True):
    """One ranked shape's outcome. ``time_us`` is the mean time of one call (simulated or measured,
    as the evaluation's provenance says); ``sol_us`` the shape's speed of light on that device."""

    shape: Shape
    passed: bool
    time_us: float | None = None
    sol_us: float | None = None
    error: str | None = None
    flagged: str | None = None  # e.g. "faster than speed of light"
    # Measured on a real GPU only: host time inside the call (Python and launches, from the call
    # until custom_kernel returns). A leaderboard times calls one at a time, so where this is most
    # of time_us the GPU waits on the host and only a leaner host path helps.
    host_us: float | None = None

    def sol_fraction(self) -> float | None:
        """How close to the speed of light: sol_us / time_us (1.0 = at the limit)."""
        return self.sol_us / self.time_us if self.sol_us and self.time_us else None

    def bound(self) -> Literal["host", "device"] | None:
        """'host' when the host's work inside the call is at least HOST_BOUND of its time, else
        'device'; None where the host time was not measured (simulated backends)."""
        if self.host_us is None or not self.time_us:
            return None
        return "host" if self.host_us >= HOST_BOUND * self.time_us else "device"


class Provenance(msgspec.Struct, frozen=True):
    """What produced a number. A simulated evaluation says so here, and every report repeats it."""

    backend: str
    simulated: bool
    device: str
    timing_method: str
    versions: dict[str, str] = {}
    seeds: list[int] = []
    model: str | None = None  # the timing model's name and version, when simulated
    notes: str = ""

    # Every surface that shows a time labels it from here (log, status, watch, report, export):
    # never from the campaign's settings or the backend's name.
    @property
    def kind(self) -> str:
        """ "simulated" or "measured"."""
        return "simulated" if self.simulated else "measured"

    @property
    def hardware(self) -> str:
        """The device's name without the "(simulated)" a simulated backend appends."""
        return self.device.replace("(simulated)", "").strip()

    def label(self) -> str:
        """ "simulated on AMD Instinct MI300X" / "measured on NVIDIA H200"."""
        return f"{self.kind} on {self.hardware}"

    def protocol(self) -> str:
        """How the time was produced, in one line."""
        if self.simulated:
            model = f" {self.model}" if self.model else ""
            return (
                f"simulated {self.hardware}: time from the analytic model{model}, correctness run "
                f"under Triton's CPU interpreter"
            )
        return f"measured on {self.hardware} ({self.timing_method})"


class CompileStats(msgspec.Struct, frozen=True):
    """What the compiler made of one Triton kernel a candidate launched, at one setting: the
    figures an engineer reads first when a kernel is slower than its plan (registers, spills,
    shared memory, and the occupancy they allow). Every figure is optional: a Triton that keeps
    one under another name, or a kernel that failed to compile, leaves it unknown.

    ``origin`` says where the figures come from: read from the kernel as the driver loaded it on
    a GPU, or compiled here for the simulated device's architecture by Triton's own toolchain
    (ptxas for sm_90, the LLVM AMDGPU back end for gfx942), never run on a device.
    ``spills`` is Triton's ``n_spills``: the kernel's local (scratch) memory per thread in 4-byte
    words, which is where spilled registers go. ``blocks_per_unit`` is how many blocks (CTAs,
    workgroups) of this kernel one SM or CU can hold at once by these figures, and
    ``limited_by`` what bounds it ("registers", "shared memory", "warps", "blocks").
    """

    kernel: str
    settings: str = ""  # the constexprs it was compiled with, "BLOCK_M=128, BLOCK_N=64"
    num_warps: int | None = None
    num_stages: int | None = None
    registers: int | None = None  # per thread (NVIDIA) or per lane (AMD: VGPRs, AGPRs included)
    spills: int | None = None
    shared_bytes: int | None = None  # per block
    blocks_per_unit: int | None = None
    limited_by: Literal["", "registers", "shared memory", "warps", "blocks"] = ""
    origin: str = ""
    error: str = ""  # why the kernel could not be compiled for the target (the figures are then unknown)


class KernelProfile(msgspec.Struct, frozen=True):
    """Nsight Compute's reading of one kernel launch in one call of a candidate on a GPU: where
    its time went, as the percentages an engineer reads first. Every figure is optional (a
    counter the GPU or the tool did not give is unknown)."""

    kernel: str
    grid: str = ""  # "(528, 1, 1)"
    block: str = ""  # threads per block, "(128, 1, 1)"
    time_us: float | None = None  # the launch's duration (gpu__time_duration)
    sm_pct: float | None = None  # compute (SM) throughput, % of its peak
    memory_pct: float | None = None  # memory throughput, the busiest of DRAM, L2 and L1/shared: % of peak
    dram_pct: float | None = None  # DRAM throughput, % of peak
    l2_hit_pct: float | None = None  # L2 hit rate
    occupancy_pct: float | None = None  # achieved occupancy: active warps over the SM's maximum
    registers: int | None = None  # per thread


class Profile(msgspec.Struct, frozen=True):
    """One call of a kernel on one ranked shape under Nsight Compute (``evaluator.profile``): every
    launch of that call, in order. ``error`` says why there is none (no ncu, no counters)."""

    shape: Shape
    launches: list[KernelProfile] = []
    tool: str = ""  # "Nsight Compute 2025.3.1"
    error: str = ""


class EvalReport(msgspec.Struct, frozen=True):
    """What a backend returns for one candidate. ``duration_s`` is how long the evaluation takes on
    the (simulated or real) hardware service, which is what the evaluator's clock is charged."""

    outcome: Outcome
    reason: str
    provenance: Provenance
    score_us: float | None = None
    shapes: list[ShapeResult] = []
    checked_shapes: list[Shape] = []  # shapes the correctness check ran on
    duration_s: float = 0.0
    # Wall seconds per phase of a real GPU's harness run: "preload_s" (start-up), "idle_s" (waiting
    # for the request: a process started early), "setup_s", "tests_s" (compiles and first-call
    # tuning land here), "timing_s". Empty for simulated evaluations and older files.
    phases: dict[str, float] = {}
    # When the evaluator timed the candidate more than once (a new leader is re-timed with new
    # inputs: one timing's luck would otherwise crown it), each timing's score, first one first;
    # ``score_us`` and the shapes' times are then their geometric means. Empty: one timing.
    runs_us: list[float] = []
    # What the compiler made of each Triton kernel the candidate launched (``CompileStats``): on a
    # GPU read from the loaded kernels, on the simulated backend compiled for its architecture
    # when the backend is asked to. Empty when unknown, and in files written before it was kept.
    compile_stats: list[CompileStats] = []
    # A new leader on a GPU, profiled once on its slowest ranked shape against the speed of light
    # (``evaluator.profile``); None when not profiled.
    profile: Profile | None = None

    def passed(self) -> bool:
        """The candidate passed every check, timed or not (``passed_score`` says whether it was)."""
        return self.outcome == Outcome.PASSED

    def passed_score(self) -> float | None:
        """The score in us when the candidate passed every check and was timed; None when it
        failed, or passed but could not be timed (``reason`` says why). The one definition of "a
        kernel with a score": rankings, uplifts and plots all ask this."""
        return self.score_us if self.passed() else None

    def timings(self) -> int:
        """How many timings the score is the geometric mean of: 1 for a report never re-timed."""
        return len(self.runs_us) or 1

    def retimed(self, again: EvalReport) -> EvalReport:
        """This report with ``again`` (the same kernel evaluated once more, with new inputs)
        folded in. A kernel that fails its second run fails: its report is that run's, saying it
        passed before; a second run that passed untimed adds nothing."""
        first = self.passed_score()
        if first is None:
            return self
        if not again.passed():
            return msgspec.structs.replace(
                again,
                reason=f"passed its first run ({first:.1f} us), then on re-timing with new inputs: {again.reason}",
                duration_s=self.duration_s + again.duration_s,
            )
        second = again.passed_score()
        if second is None or len(again.shapes) != len(self.shapes):
            return self
        runs = (self.runs_us or [first]) + [second]
        n = len(runs)

        def fold(old: float | None, new: float | None) -> float | None:  # running geometric mean
            if old is None or new is None:
                return old if new is None else new
            return round(math.exp((math.log(old) * (n - 1) + math.log(new)) / n), 4)

        shapes = [
            msgspec.structs.replace(a, time_us=fold(a.time_us, b.time_us), host_us=fold(a.host_us, b.host_us))
            for a, b in zip(self.shapes, again.shapes, strict=True)
        ]
        phases = {
            k: round(self.phases.get(k, 0.0) + again.phases.get(k, 0.0), 3) for k in {*self.phases, *again.phases}
        }
        return msgspec.structs.replace(
            self,
            score_us=fold(first, second),
            shapes=shapes,
            duration_s=self.duration_s + again.duration_s,
            phases=phases,
            runs_us=runs,
            provenance=msgspec.structs.replace(
                self.provenance,
                seeds=self.provenance.seeds + again.provenance.seeds,
                notes="; ".join(
                    x
                    for x in (self.provenance.notes, again.provenance.notes and f"timing {n}: {again.provenance.notes}")
                    if x
                ),
            ),
        )


class RunSegment(msgspec.Struct, frozen=True):
    """One run of a campaign (the first, or a resume) with the limits in force from its start
    until the next segment's: what utilisation and rate-limit use are measured against."""

    started_at: float  # campaign time
    rate_per_hour: float
    in_flight: int
    hours: float  # the campaign's deadline during this run (``resume --set campaign.hours`` moves it)
    settings: list[str] = []  # the ``--set`` overrides that made it differ from the previous run


class Campaign(msgspec.Struct, frozen=True):
    name: str
    seed: int
    task: str
    backend: str
    simulated: bool
    config_json: str  # the full Scenario, so `resume` needs nothing but the database
    created_wall: float
    virtual_time: bool
    # The task's PyTorch reference run through the same backend: the "speed-up over reference" anchor.
    reference: EvalReport | None = None
    segments: list[RunSegment] = []  # every run's limits; empty in files written before they were kept


SEED_AUTHOR = "seed"  # Kernel.author of the kernel a campaign starts from
LOWERED_AUTHOR = "inductor"  # Kernel.author of the seed as Inductor lowered it (campaign.lower_seed)


class Kernel(msgspec.Struct, frozen=True):
    id: int
    source: str
    source_hash: str
    author: str
    state: KernelState
    created_at: float  # campaign clock (virtual seconds in a simulated campaign)
    parent_id: int | None = None
    reference_id: int | None = None
    hypothesis_id: int | None = None
    summary: str = ""
    # Where the writer departed from its plan in detail, and why, in its own words ("" = none, or
    # no plan): shown to the critic and the selector beside the summary.
    deviations: str = ""

    def is_seed(self) -> bool:
        """The campaign's starting kernel (the user's submission), every speed-up's baseline."""
        return self.author == SEED_AUTHOR

    def is_baseline(self) -> bool:
        """The seed or its lowering by Inductor: where the campaign starts, not a kernel it wrote.
        The policy on what a kernel may call (``evaluator.own_kernel``) does not bind these: a
        user's PyTorch seed of a matrix product is the point of the campaign, not a breach."""
        return self.author in (SEED_AUTHOR, LOWERED_AUTHOR)


class SelectionState(enum.StrEnum):
    OPEN = "open"  # waiting for the theorist
    DESIGNED = "designed"  # hypotheses written for it
    EXHAUSTED = "exhausted"  # the theorist found nothing left to try on this base


class Selection(msgspec.Struct, frozen=True):
    """The archivist's pick: a base to improve and a reference to borrow from."""

    id: int
    base_id: int
    reference_id: int | None
    reason: str
    at: float
    state: SelectionState = SelectionState.OPEN


class Hypothesis(msgspec.Struct, frozen=True):
    id: int
    selection_id: int
    base_id: int
    reference_id: int | None
    avenue: str
    technique: str
    params: dict[str, Param]
    plan: str  # the rubric of code changes, in words
    changes: list[str]
    min_uplift: float  # predicted fractional speed-up of the score, e.g. 0.05 = 5% faster
    max_uplift: float
    innovation: float  # 0..1
    state: HypothesisState
    verdict: Verdict
    author: str
    created_at: float
    why_chosen: str = ""
    label: str = ""  # the variant, e.g. "BLOCK_M=128, BLOCK_N=128"
    observed_uplift: float | None = None
    kernel_id: int | None = None
    lease_owner: str | None = None
    lease_until: float | None = None
    why_abandoned: str = ""  # why an abandoned plan has no kernel (the engineer's error, or why it went stale)


class Review(msgspec.Struct, frozen=True):
    id: int
    kernel_id: int
    reviewer: str
    approved: bool
    reasons: list[str]
    at: float


class Submission(msgspec.Struct, frozen=True):
    id: int
    kernel_id: int
    expected_value: float  # the critic's priority for the queue (highest first)
    state: SubmissionState
    enqueued_at: float  # campaign clock
    lease_owner: str | None = None  # the evaluator holding it while leased
    lease_until: float | None = None
    attempts: int = 0
    starts: list[float] = []  # campaign times of every lease: the rate limiter's memory


class Evaluation(msgspec.Struct, frozen=True):
    id: int
    kernel_id: int
    submission_id: int
    started_at: float
    finished_at: float
    report: EvalReport


# "closing" is the runner's last word when a campaign reaches its end: the campaign is over while
# it is the latest message (a resume that extends the campaign writes after it).
MessageKind = Literal[
    "info",
    "selection",
    "avenues",
    "plan",
    "choice",
    "kernel",
    "review",
    "queue",
    "evaluation",
    "verdict",
    "finding",
    "warning",
    "error",
    "llm",
    "closing",
]


class Message(msgspec.Struct, frozen=True):
    """One line of the agents' conversation (append-only)."""

    id: int
    at: float
    agent: str
    kind: MessageKind
    text: str
    kernel_id: int | None = None
    hypothesis_id: int | None = None


LEARNED = "learned"  # Finding.scope of a trial carried over from an earlier campaign (run --learn-from)


class Finding(msgspec.Struct, frozen=True):
    """A digested lesson, e.g. 'split_k: +31% on shapes with fewer tiles than CUs'."""

    id: int
    at: float
    technique: str
    scope: str  # which shapes it is about ("all", "m=1024", "tiles<CUs", ...)
    uplift: float
    evidence: list[int]  # evaluation ids
    text: str


LLMStatus = Literal["ok", "refused", "truncated", "error", "budget"]
LLMRole = Literal["select", "design", "implement", "review"]  # the brain protocol's four questions
LLMTurn = Literal["ask", "repair"]


class LLMCall(msgspec.Struct, frozen=True):
    """One exchange with a language model (one turn: an ask or its repair), append-only.

    It holds everything a replay needs (the prompt, the answer, the outcome) and everything the
    accounting needs (tokens and the price paid). API keys are never part of it: requests are
    recorded as their content, never their headers. ``seq`` numbers an agent's turns from 1, which
    is how a replay finds the answer to the same question.
    """

    id: int
    at: float  # campaign clock when the turn started
    agent: str
    seq: int
    role: LLMRole
    turn: LLMTurn
    brain: str  # anthropic, openai-compatible, replay
    model: str
    status: LLMStatus
    system: str
    messages: list[dict[str, str]]  # role/content pairs, in order
    prompt_hash: str
    answer: str = ""
    stop_reason: str = ""
    error: str = ""
    request_id: str = ""
    attempts: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cost_usd: float = 0.0
    wall_s: float = 0.0
    replayed: bool = False
    permanent: bool = False  # an error that waiting cannot heal (bad key, unknown model): the agent stopped

    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens + self.cache_read_tokens + self.cache_write_tokens
