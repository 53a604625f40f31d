"""The seam every evaluator backend fits, and the one place a backend is built from a scenario.

The agents, the runner and the CLI see a backend only through ``Backend``: the simulated backend
(CPU correctness, modelled time) and the local one (this machine's GPUs) both satisfy it, so a
caller written against one runs against the other. ``make_backend`` turns the scenario's
``[evaluator]`` table into one; the ``evaluate`` command builds that table from its options, so
a campaign and a one-off evaluation choose and configure backends the same way.

The local backend refuses to start on a machine without a GPU (its constructor raises
``RuntimeError`` with the reason). That is the user's choice of backend, not a bug, so it becomes a
``BackendUnavailable`` naming the setting that asked for it (``--backend local`` or
``evaluator.backend = "local"``) before any file is created.
"""

from __future__ import annotations

from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from kernel_scientist.blackboard.config import EvaluatorConfig
from kernel_scientist.blackboard.records import EvalReport, Profile

if TYPE_CHECKING:
    from kernel_scientist.evaluator._task import Task
    from kernel_scientist.evaluator.model import DeviceSpec


class Backend(Protocol):
    """What the campaign needs of a backend. Use it as a context manager (it may own processes)."""

    name: str  # "simulated" or "local", as recorded in every provenance
    simulated: bool  # True: virtual time and modelled timings; False: the wall clock and measurements
    device_name: str  # what reports print, e.g. "AMD Instinct MI300X (simulated)"
    spec: DeviceSpec  # the device optimised for (its vendor picks the technique catalogue)

    def __enter__(self) -> Backend: ...

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None: ...

    async def evaluate(
        self, source: str, *, submission_id: int = 0, secret_seed: int = 0, baseline: bool = False
    ) -> EvalReport:
        """The full judgement: correctness on the task's tests, then the ranked shapes' times.
        ``baseline``: the campaign's seed or its lowering, where it starts from: the policy on
        what a kernel may call (``own_kernel``) binds the kernels a campaign writes, not those."""
        ...

    async def prescreen(self, source: str, *, baseline: bool = False) -> EvalReport:
        """A cheap check before an evaluation is spent (never reaches the scarce service)."""
        ...

    def reference_report(self) -> EvalReport:
        """The task's own reference implementation, timed the same way: the anchor of speed-ups."""
        ...

    def prepare(self, sources: list[str]) -> None:
        """A hint, never blocking: the source about to be evaluated, then those the next
        evaluations will probably be, most likely first. A backend may compile them ahead (the
        local one does); others ignore it."""
        ...

    def compiled_ahead(self, source: str) -> bool:
        """Whether ``source`` could start now without compiling first: its dry pass has ended
        (the local backend), or this backend compiles nothing ahead, so no candidate waits less
        than another. The evaluator prefers such a candidate, so the GPU does not wait on a
        compile while a ready one is queued."""
        ...


@runtime_checkable
class StartsInBackground(Protocol):
    """An optional capability of a backend: ``with backend`` only launches its workers (the
    simulated backend's sandbox preloads for seconds meanwhile), and ``wait_started`` waits until
    they take jobs, raising if they cannot start. A campaign calls it before its blackboard file
    exists, so a backend that cannot start refuses the campaign before anything is written."""

    def wait_started(self) -> None: ...


@runtime_checkable
class Profiles(Protocol):
    """An optional capability of a backend on real GPUs (the local one): one call of a candidate
    on one ranked shape under a profiler, read into a ``Profile`` (evaluator/sandbox/_ncu.py).
    Never raises for the candidate's or the tool's sake: a Profile without launches says why."""

    async def profile(self, source: str, shape: int, *, secret_seed: int = 0, baseline: bool = False) -> Profile: ...


class BackendUnavailable(Exception):
    """The chosen backend cannot run on this machine; the message says which setting and why."""


def make_backend(
    cfg: EvaluatorConfig,
    task: Task,
    *,
    setting: str | None = None,
    instead: str = "evaluator.backend = 'simulated'",
    llm: bool = False,
) -> Backend:
    """The backend ``cfg`` asks for, for ``task``. ``setting`` names where the choice was made and
    ``instead`` what to use on a machine without a GPU, for the error message; ``llm``: a language
    model reads the reports (``evaluator.compile_stats = "auto"`` turns the statistics on)."""
    from kernel_scientist.evaluator.backends._local import LocalBackend
    from kernel_scientist.evaluator.backends._ray import ClusterError, RayBackend
    from kernel_scientist.evaluator.backends._simulated import SimulatedBackend

    where = setting or f"evaluator.backend = '{cfg.backend}'"
    if cfg.backend == "simulated":
        return SimulatedBackend(
            task,
            device=cfg.device,
            noise=cfg.noise,
            timeout_s=cfg.timeout_s,
            own_kernel=cfg.own_kernel,
            compile_stats=cfg.compile_stats == "on" or (cfg.compile_stats == "auto" and llm),
        )
    # The harness's settings, the same for the local backend and for every GPU host of a Ray cluster.
    harness: dict[str, Any] = dict(
        timeout_s=cfg.timeout_s,
        min_calls=cfg.min_calls,
        max_calls=cfg.max_calls,
        rel_stderr=cfg.rel_stderr,
        shape_budget_s=cfg.shape_budget_s,
        device=cfg.harness_device,
        own_kernel=cfg.own_kernel,
    )
    if cfg.backend == "ray":  # the cluster's own checks (reachable, big enough for in_flight) in one line
        try:
            return RayBackend(task, address=cfg.ray_address, in_flight=cfg.in_flight, **harness)
        except ClusterError as exc:
            raise BackendUnavailable(f"{where}: {exc}") from None
    try:
        return LocalBackend(task, spare=cfg.spare_process, prepare_ahead=cfg.prepare_ahead, **harness)
    except RuntimeError as exc:  # no GPU visible: the constructor's reason, then our own advice
        reason = str(exc).split(";")[0]
        raise BackendUnavailable(f"{where}: {reason}; use {instead} on this machine") from None
