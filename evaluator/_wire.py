"""Structs that cross the sandbox boundary (campaign process <-> fork server <-> candidate child).

They are msgpack-encoded; the child never sends Python objects, only these, so a candidate cannot
smuggle live objects (lazy tensors, overridden ``__eq__``) into the process that judges it.
``Launch`` is also what the timing model reads, so it is the contract between launch capture and
the model.
"""

from __future__ import annotations

from typing import Literal

import msgspec
from kernel_scientist.blackboard.records import CompileStats, Outcome, Shape
from kernel_scientist.evaluator._task import TaskMeta


class TensorArg(msgspec.Struct, frozen=True):
    """A tensor passed to a kernel launch: enough to know its size and memory layout."""

    name: str
    shape: list[int]
    stride: list[int]
    dtype: str
    element_size: int

    @property
    def nbytes(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n * self.element_size


class Launch(msgspec.Struct, frozen=True):
    """One intercepted Triton launch: parameters plus static features of the kernel's source."""

    kernel: str
    grid: list[int]  # always three entries, evaluated (a callable grid was called with the meta dict)
    num_warps: int
    num_stages: int
    constexprs: dict[str, int | bool | float]
    extra: dict[str, int]  # AMD knobs when given: waves_per_eu, matrix_instr_nonkdim, kpack
    tensors: list[TensorArg]
    has_dot: bool
    precise_acc: bool  # tl.dot(..., max_num_imprecise_acc=0): fp32 promotion after every MMA
    upcast_bf16: bool  # operands cast to bf16 before tl.dot
    upcast_fp32: bool  # operands cast to fp32 before tl.dot
    atomic: bool  # uses tl.atomic_* (split-K reduction in place)
    upcast_to: str = ""  # the dtype tl.dot's operands are cast to ("float16", "bfloat16", "float32"), if any


class TorchOp(msgspec.Struct, frozen=True):
    """Torch work recorded by a dispatch mode during capture (pre-passes, allocations, fallbacks)."""

    op: str
    bytes_read: int
    bytes_written: int
    flops: int = 0
    dtype: str = ""  # the result's dtype, for matmuls (sets the rate)


class Capture(msgspec.Struct, frozen=True):
    """Everything one ranked shape's call launched, in order."""

    shape: Shape
    launches: list[Launch] = []
    torch_ops: list[TorchOp] = []
    # Why the call could not be recorded on meta tensors (a torch op with no meta kernel, such as
    # bincount): the shape is then not timed, and the report says so instead of inventing a time.
    untimed: str | None = None


class TensorValue(msgspec.Struct, frozen=True, tag="tensor"):
    """One output tensor as raw bytes in logical order."""

    dtype: str
    dims: list[int]
    data: bytes


class ScalarValue(msgspec.Struct, frozen=True, tag="scalar"):
    value: int | float | bool | None


class SeqValue(msgspec.Struct, frozen=True, tag="seq"):
    kind: Literal["tuple", "list"]
    items: list[Value]


Value = TensorValue | ScalarValue | SeqValue  # an output, whatever the folder returns


class CheckOutput(msgspec.Struct, frozen=True):
    """The candidate's output on one check shape, as plain values; the parent judges it."""

    shape: Shape  # with the seed actually used (test seed mixed with the secret seed)
    value: Value
    inputs_modified: str | None = None  # names of inputs the candidate wrote to, if any


ChildStatus = Literal["ok", "compile_error", "crash", "oom", "rejected"]
# The first line of a dry pass's message on a harness process's stdin (evaluator/sandbox/_prepare.py); the
# real request that follows starts with its per-run token (hex), so the two cannot be confused.
PREPARE = b"prepare\n"
PREPARED = ".prepared"  # left in its directory by a harness process whose dry pass has ended
GpuStatus = ChildStatus | Literal["wrong_output"]  # the GPU harness judges its own outputs

# A child's failure status as the outcome both backends report.
OUTCOME_OF: dict[str, Outcome] = {
    "compile_error": Outcome.COMPILE_ERROR,
    "crash": Outcome.CRASH,
    "oom": Outcome.OUT_OF_MEMORY,
    "rejected": Outcome.REJECTED_BY_RULE,
    "wrong_output": Outcome.WRONG_OUTPUT,
}


class ChildRequest(msgspec.Struct, frozen=True):
    mode: Literal["evaluate", "prescreen"]
    source: str
    task_dir: str
    modules: dict[str, str]  # helper modules the reference needs: import name -> file path
    check: list[Shape]  # seeds already mixed with the secret seed
    bench: list[Shape]
    device: str  # device spec name for picking autotune configs by the model
    mem_limit_mb: int = 4096
    meta: TaskMeta = TaskMeta()  # the task's declared output slot and flops (heavy-op rule)
    own_kernel: bool = False  # the policy: a torch matmul doing the task's work is rejected
    # Compile statistics (evaluator/sandbox/_compile_stats.py): the timed launches' kernels are
    # compiled ahead of time for ``device``'s architecture, with Triton's cache in this folder
    # (the backend's own, shared by its candidates). Empty: none are compiled. Compiling stops
    # once the child has run ``compile_by_s`` seconds (well inside the backend's timeout), so that
    # statistics never turn a candidate's evaluation into a timeout.
    compile_cache: str = ""
    compile_by_s: float = 0.0


class ChildResult(msgspec.Struct, frozen=True):
    status: ChildStatus
    reason: str = ""
    checks: list[CheckOutput] = []
    captures: list[Capture] = []
    compile_stats: list[CompileStats] = []


# Frames between the campaign process and the fork server (a tagged union, length-prefixed).
class Job(msgspec.Struct, frozen=True, tag="job"):
    request: ChildRequest
    output_limit: int


class Started(msgspec.Struct, frozen=True, tag="started"):
    pid: int


class Finished(msgspec.Struct, frozen=True, tag="finished"):
    pid: int
    exit_code: int | None  # None when a signal ended the child
    signal: int | None
    result: bytes | None  # an encoded ChildResult, when the child wrote one
    output: str  # the first output_limit bytes of the child's stdout+stderr
    output_dropped: int  # bytes beyond the limit that were read and thrown away


class Ready(msgspec.Struct, frozen=True, tag="ready"):
    """The server has preloaded torch and triton and waits for jobs."""

    pid: int


AnyFrame = Job | Started | Finished | Ready


# ---- the local GPU backend's harness (evaluator/sandbox/_gpu_harness.py) ----------------------------
class GpuRequest(msgspec.Struct, frozen=True):
    """What the trusted parent sends a GPU harness process on its stdin (never in its environment)."""

    source: str
    modules: dict[str, str]
    tests: list[Shape]  # seeds already mixed with the secret seed
    benchmarks: list[Shape]
    min_calls: int = 3
    max_calls: int = 100
    rel_stderr: float = 0.001  # stop when the standard error falls under this share of the mean
    shape_budget_s: float = 5.0  # wall-clock budget per ranked shape
    l2_flush_bytes: int = 2 * 64 * 1024 * 1024
    time_reference: bool = False  # time the task's own ref_kernel (the parent's anchor), no import
    device: Literal["cuda", "cpu"] = "cuda"  # cpu: the protocol under Triton's interpreter, host-clock times (tests)
    meta: TaskMeta = TaskMeta()
    own_kernel: bool = False  # the policy: a torch matmul doing the task's work is rejected
    compile_workers: int = 1  # a dry pass's compile threads (evaluator/sandbox/_prepare.py); 1: in the launching thread
    # Profile instead of timing (evaluator/sandbox/_ncu.py): after the tests, one checked warm-up
    # call and one profiled call of this ranked shape (an index into ``benchmarks``); -1: time.
    profile_shape: int = -1


class ShapeSamples(msgspec.Struct, frozen=True):
    shape: Shape
    event_us: list[float]  # device-event time of each timed call
    host_us: list[float]  # host wall clock around the same call, each between device-wide syncs
    call_us: list[float] = []  # host time until custom_kernel returned (its Python and launch work)


class GpuResult(msgspec.Struct, frozen=True):
    status: GpuStatus
    reason: str = ""
    samples: list[ShapeSamples] = []
    device: str = ""
    versions: dict[str, str] = {}
    # Wall seconds per phase of the process, so a report can say where an evaluation's time went:
    # start-up before the request ("preload_s", hidden when the process was started early),
    # "idle_s" waiting for it, then "setup_s", "tests_s" (compiles, first-call tuning), "timing_s".
    phases: dict[str, float] = {}
    # What the compiler made of every Triton kernel that ran in the process, read from the loaded
    # kernels after the candidate's calls (evaluator/sandbox/_compile_stats.py).
    compile_stats: list[CompileStats] = []
