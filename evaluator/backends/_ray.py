"""The Ray backend: each evaluation a Ray task on some GPU of a cluster, judged in the campaign.

- **Same harness, same verdicts.** A task needs one GPU (one CPU in CPU mode) and runs the local
  backend's harness process (``run_harness``: fresh process, scrubbed environment, token on the
  result pipe, process group killed on timeout) on whichever node Ray picks. It returns what the
  process left behind (``HarnessRun``: the raw samples) and where it ran; the campaign's process
  computes the verdict and every statistic with the local backend's own code, so a worker is
  trusted to run the harness, never to judge.
- **By value.** The request (source, shapes with their seeds already mixed with the secret seed)
  and the text of the task's module files travel in the task's one argument, msgpack-encoded. No
  shared file system; the blackboard never leaves the campaign's process.
- **Retries are ours.** Ray's are off (``max_retries=0``, no exception retries), so Ray never
  re-runs an evaluation behind the evaluator agent's back. An attempt whose node or worker died is
  re-submitted here (at most ``ATTEMPTS`` in all, wherever Ray places it) and named in the one
  report that comes back, which the agent records once. Three lost attempts in a row are the
  candidate's crash (a kernel that kills its worker or the host's memory), not an outage.
- **Cancellation.** The waiting coroutine polls ``ray.wait`` from a worker thread in half-second
  steps, so no thread is ever abandoned; when its scope is cancelled it force-cancels the task
  (which kills the worker and, through its parent-death signal, the harness) and waits, shielded
  and bounded, until Ray confirms it (the processes are gone milliseconds later; a test checks).
- **Losing the cluster.** Ray's driver ends its whole process 60 s after it loses the cluster's
  head (the GCS), and a GCS call made meanwhile blocks. So while it waits the backend knocks on the
  head's port every few seconds and raises ``ClusterLost`` first (a GCS call has a deadline of
  its own: the head may die between the knock and the call): the campaign stops cleanly with every
  finished evaluation recorded, the command ends its process at once rather than let Ray's exit
  handler wait on the dead head, and ``resume`` continues once the cluster is back.

The remote functions are module-level and are imported by reference on the workers, so every host
needs this package installed (docs/ray.md). ``ray`` is imported lazily: it is an optional extra.
"""

from __future__ import annotations

import logging
import os
import shutil
import socket
import tempfile
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
import msgspec
from kernel_scientist.blackboard.records import EvalReport, Outcome
from kernel_scientist.evaluator._rules import rule_verdict
from kernel_scientist.evaluator._task import Task
from kernel_scientist.evaluator._wire import GpuRequest
from kernel_scientist.evaluator.backends._local import CPU_DEVICE, HarnessRun, LocalBackend, Where, run_harness, smi
from kernel_scientist.evaluator.model import l2_flush_bytes, spec_for

if TYPE_CHECKING:
    from ray import ObjectRef

T = TypeVar("T")

ATTEMPTS = 3  # submissions of one evaluation whose node or worker died, before it counts as a crash
_POLL_S = 0.5  # how long one ray.wait blocks a worker thread
_PROBE_S = 2.0  # how often a waiting evaluation checks that the cluster's head still answers
_CANCEL_GRACE_S = 15.0  # how long a cancelled evaluation waits for Ray to confirm the task ended
_GCS_CALL_S = 10.0  # the longest a call to the cluster's head may take before the head counts as lost


class ClusterError(Exception):
    """The Ray cluster cannot run evaluations (not reachable, too small, workers without this
    package); the message is one line that says what to do."""


class ClusterLost(ClusterError):
    """The cluster went away during a campaign; nothing of the evaluation in flight was recorded."""


class RayJob(msgspec.Struct, frozen=True):
    """One evaluation as it travels to a worker: everything by value."""

    request: GpuRequest  # its ``modules`` are filled in on the worker, from ``sources``
    sources: dict[str, str]  # the task's module files: import name -> text
    timeout_s: float
    output_limit: int


class RayRun(msgspec.Struct, frozen=True):
    run: HarnessRun
    where: Where


# ---- on the worker ---------------------------------------------------------------------------
def _gpu() -> str:
    """The GPU Ray gave this task, as the harness's CUDA_VISIBLE_DEVICES needs it."""
    import ray

    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "")
    return visible.split(",")[0] if visible else ",".join(str(g) for g in ray.get_gpu_ids()[:1])


def _here(device: str) -> Where:
    import ray

    ctx = ray.get_runtime_context()
    ip = ray.util.get_node_ip_address()  # type: ignore[no-untyped-call]  # ray leaves it unannotated
    node = f"{ip}/{ctx.get_node_id()[:8]}"
    if device == "cpu":
        return Where(device=CPU_DEVICE, node=node)
    gpu = _gpu()
    name = smi("name", gpu)
    if not name:  # ROCm, or no nvidia-smi: torch names it (in this short-lived worker only)
        import torch

        name = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "GPU"
    return Where(device=name, driver=smi("driver_version", gpu), sm_clock=smi("clocks.sm", gpu), node=node)


def describe(device: str) -> bytes:
    """Ray task: the machine a task of this kind lands on (the backend's start-up check)."""
    return msgspec.msgpack.encode(_here(device))


def evaluate_remote(job: bytes) -> bytes:
    """Ray task: run one ``RayJob`` in a fresh harness process on this node; return a ``RayRun``."""
    decoded = msgspec.msgpack.decode(job, type=RayJob)
    req = decoded.request
    where = _here(req.device)
    folder = tempfile.mkdtemp(prefix="ks-task-")
    try:
        modules = {}
        for name, text in decoded.sources.items():
            path = os.path.join(folder, f"{name}.py")
            with open(path, "w") as f:
                f.write(text)
            modules[name] = path
        flush = req.l2_flush_bytes if req.device == "cpu" else l2_flush_bytes(spec_for(where.device))
        req = msgspec.structs.replace(req, modules=modules, l2_flush_bytes=flush)
        run = run_harness(req, "" if req.device == "cpu" else _gpu(), decoded.timeout_s, decoded.output_limit)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return msgspec.msgpack.encode(RayRun(run=run, where=where))


# ---- in the campaign's process ---------------------------------------------------------------
def join_cluster(address: str) -> str:
    """Make this process a driver of the Ray cluster at ``address`` (once per process) and return
    its head's (GCS) address. "" joins a cluster started on this machine, else starts a new local
    one; "auto" insists on an existing one. A HOST:PORT that nothing answers on is refused at once
    (Ray itself would retry for a minute, logging). Raises ClusterError (one line)."""
    try:
        import ray
    except ImportError:
        raise ClusterError(
            "Ray is not installed here; pip install -e '.[ray]' (on this host and every worker host)"
        ) from None
    if not ray.is_initialized():
        if address not in ("", "auto") and not address.startswith("ray://"):
            host, _, port = address.rpartition(":")
            if not host or not port.isdigit():
                raise ClusterError(
                    f"ray address {address!r}: expected HOST:PORT (the head's, e.g. 10.0.0.5:6379), "
                    "'auto', or nothing for this machine"
                )
            try:
                socket.create_connection((host, int(port)), timeout=5).close()
            except OSError as exc:
                raise ClusterError(
                    f"nothing answers at {address} ({exc.strerror or exc}); start the head there "
                    "with `ray start --head`, or give its address"
                ) from None
        try:
            ray.init(address=address or None, log_to_driver=False, logging_level=logging.WARNING)
        except Exception as exc:  # ConnectionError, ValueError, RuntimeError: Ray's words, one line
            where = f"at {address}" if address else "on this machine"
            raise ClusterError(f"cannot join the Ray cluster {where}: {' '.join(str(exc).split())[:300]}") from None
    return str(ray.get_runtime_context().gcs_address)


class _Lost(Exception):
    """One attempt's node or worker died (Ray's error, in words)."""


class RayBackend:
    name = "ray"
    simulated = False

    def __init__(self, task: Task, address: str = "", in_flight: int = 1, **harness: Any) -> None:
        """Join the cluster at ``address`` ("" = one already started on this machine, else a new
        local one) and check that it can take ``in_flight`` evaluations at once. Raises
        ClusterError (one line) before anything is written. ``harness``: the local backend's
        settings and defaults (``timeout_s``, ``output_limit``, ``max_calls``, ``shape_budget_s``,
        ``device``, ``own_kernel``), under which every worker's harness runs."""
        # The parent side of the local backend: requests, verdicts and statistics (no GPU needed).
        # Built first, so that a wrong setting is refused before the cluster is joined.
        self._parent = LocalBackend(task, gpus=["ray"], spare=False, **harness)  # the workers start the processes
        self.gcs = join_cluster(address)
        import ray

        self.task = task
        self.device = self._parent.device
        self.timeout_s = self._parent.timeout_s
        cpu = self.device == "cpu"
        self.unit = "CPU" if cpu else "GPU"
        self._sources = {name: open(path).read() for name, path in task.modules.items()}
        try:
            self._check_size(in_flight)
            need = {"num_cpus": 1} if cpu else {"num_cpus": 1, "num_gpus": 1}
            self._evaluate = ray.remote(evaluate_remote).options(max_retries=0, retry_exceptions=False, **need)
            first = self._start_up_check(ray.remote(describe).options(max_retries=0, **need).remote(self.device))
        except ClusterError:
            ray.shutdown()  # a refused start leaves nothing behind, a local Ray instance included
            raise
        self.device_name = first.device
        # The first node's GPU stands for the cluster's (the catalogue's vendor; one kind of GPU
        # per cluster is the supported set-up, docs/ray.md).
        self.spec = self._parent.spec if first.device == CPU_DEVICE else spec_for(first.device)
        self.driver = first.driver

    # ---- joining the cluster --------------------------------------------------------------
    def _check_size(self, in_flight: int) -> None:
        """The in-flight limit holds across the cluster, so it may not exceed what the cluster has."""
        import ray

        resources = ray.cluster_resources()  # type: ignore[no-untyped-call]  # ray leaves it unannotated
        have = int(resources.get(self.unit, 0))
        join = f"`ray start --address={self.gcs}`"
        if have == 0:
            raise ClusterError(
                f"the Ray cluster at {self.gcs} reports no {self.unit}; join a host that has one with {join}"
            )
        if in_flight > have:
            raise ClusterError(
                f"evaluator.in_flight = {in_flight} is more than the {have} {self.unit}"
                f"{'s' if have > 1 else ''} the Ray cluster at {self.gcs} reports; set "
                f"evaluator.in_flight to at most {have}, or join more hosts with {join}"
            )

    def _start_up_check(self, ref: ObjectRef[bytes]) -> Where:
        """One small task (``describe``): that the workers can import this package, and what they run on."""
        import ray

        try:
            return msgspec.msgpack.decode(ray.get(ref, timeout=120), type=Where)
        except ray.exceptions.GetTimeoutError:
            ray.cancel(ref, force=True)
            raise ClusterError(
                f"no {self.unit} of the Ray cluster at {self.gcs} took a task within 120 s; see `ray status`"
            ) from None
        except ray.exceptions.RayError as exc:
            raise ClusterError(
                f"the Ray workers cannot run the harness: {_cause(exc)}; install "
                "kernel-scientist (the same version) on every host"
            ) from None

    def _check_cluster(self) -> None:
        """Raise ClusterLost when the head no longer answers or no node offers our resource. The
        port knock comes first, and the GCS call after it has a deadline of its own: a head that
        dies between the two would hold the call (and this thread) until Ray ends the process."""
        import ray

        host, _, port = self.gcs.rpartition(":")
        try:
            socket.create_connection((host, int(port)), timeout=3).close()
        except OSError:
            raise ClusterLost(f"the Ray cluster's head at {self.gcs} does not answer") from None
        try:
            resources = _within(_GCS_CALL_S, ray.cluster_resources)
        except TimeoutError:
            raise ClusterLost(f"the Ray cluster's head at {self.gcs} stopped answering") from None
        if not resources.get(self.unit, 0):
            raise ClusterLost(f"no node of the Ray cluster at {self.gcs} offers a {self.unit} any more")

    def __enter__(self) -> RayBackend:
        return self

    def __exit__(self, *exc: object) -> None:
        import ray

        try:
            self._check_cluster()
            _within(_GCS_CALL_S, ray.shutdown)
        except (ClusterLost, TimeoutError):
            pass  # shutting down would wait on the dead head: the command ends the process (cli.py)

    # ---- the backend's interface (the same as the local backend's) -------------------------
    async def prescreen(self, source: str, *, baseline: bool = False) -> EvalReport:
        return await self._parent.prescreen(source, baseline=baseline)

    def prepare(self, sources: list[str]) -> None:
        """The cluster's workers start their own harness processes: nothing is compiled ahead."""

    def compiled_ahead(self, source: str) -> bool:
        """Nothing is compiled ahead, so every candidate is as ready as any other."""
        return True

    def reference_report(self) -> EvalReport:
        """The task's PyTorch reference timed on some GPU of the cluster (the campaign's anchor),
        with the same retries as an evaluation; called before the campaign's loop starts."""
        req = self._parent.request("", 0, reference=True)
        return anyio.run(self._attempts, req, 0, 0, backend="trio")

    async def evaluate(
        self, source: str, *, submission_id: int = 0, secret_seed: int = 0, baseline: bool = False
    ) -> EvalReport:
        rejected = rule_verdict(source, own_kernel=self._parent.own_kernel and not baseline)
        if rejected:
            return self._parent.report(
                Outcome.REJECTED_BY_RULE, rejected, submission_id, secret_seed, where=self._cluster(), backend="ray"
            )
        return await self._attempts(
            self._parent.request(source, secret_seed, baseline=baseline), submission_id, secret_seed
        )

    async def _attempts(self, req: GpuRequest, submission_id: int, secret_seed: int) -> EvalReport:
        """One evaluation: re-submitted when its node or worker dies, judged here once."""
        lost: list[str] = []
        for attempt in range(1, ATTEMPTS + 1):
            began = time.perf_counter()
            try:
                data = await self._wait(self._submit(req))
            except _Lost as exc:
                lost.append(f"attempt {attempt} lost ({exc})")
                await anyio.to_thread.run_sync(self._check_cluster)
                continue
            return self._judge(data, submission_id, secret_seed, time.perf_counter() - began, lost)
        return self._parent.report(
            Outcome.CRASH,
            f"every one of {ATTEMPTS} attempts lost its Ray worker ({'; '.join(lost)}): a "
            "kernel that kills its worker or exhausts the host's memory, or a failing cluster",
            submission_id,
            secret_seed,
            where=self._cluster(),
            backend="ray",
        )

    def _cluster(self) -> Where:
        """Where a report that no worker produced (a rule, lost attempts) comes from."""
        return Where(device=self.device_name, driver=self.driver, node=f"the cluster at {self.gcs}")

    # ---- one attempt -----------------------------------------------------------------------
    def _submit(self, req: GpuRequest) -> ObjectRef[bytes]:
        job = RayJob(
            request=msgspec.structs.replace(req, modules={}),
            sources=self._sources,
            timeout_s=self.timeout_s,
            output_limit=self._parent.output_limit,
        )
        return self._evaluate.remote(msgspec.msgpack.encode(job))

    async def _wait(self, ref: ObjectRef[bytes]) -> bytes:
        """The task's result; raises _Lost when its node or worker died, ClusterLost when the
        cluster did. A cancelled wait cancels the task and returns only once Ray says it ended."""
        import ray

        probed = time.monotonic()
        try:
            while True:
                done, _ = await anyio.to_thread.run_sync(lambda: ray.wait([ref], timeout=_POLL_S))
                if done:
                    break
                if time.monotonic() - probed > _PROBE_S:
                    await anyio.to_thread.run_sync(self._check_cluster)
                    probed = time.monotonic()
        except BaseException:  # cancelled, or the cluster is gone: the task must not run on
            with anyio.CancelScope(shield=True), anyio.move_on_after(_CANCEL_GRACE_S):
                await anyio.to_thread.run_sync(self._cancel, ref, abandon_on_cancel=True)
            raise
        try:
            return ray.get(ref)
        except ray.exceptions.RayTaskError as exc:  # our own code failed on the worker: a broken host
            raise ClusterError(
                f"a Ray worker could not run the harness: {_cause(exc)}; install "
                "kernel-scientist (the same version) on every host"
            ) from None
        except ray.exceptions.RayError as exc:  # NodeDied, WorkerCrashed, ObjectLost, OutOfMemory...
            raise _Lost(_cause(exc)) from None

    def _cancel(self, ref: ObjectRef[bytes]) -> None:
        import ray

        try:
            ray.cancel(ref, force=True)
            while not ray.wait([ref], timeout=_POLL_S)[0]:
                pass
        except ray.exceptions.RayError:
            pass

    def _judge(self, data: bytes, submission_id: int, secret_seed: int, elapsed: float, lost: list[str]) -> EvalReport:
        got = msgspec.msgpack.decode(data, type=RayRun)
        overhead = max(0.0, elapsed - got.run.wall_s)
        notes = f"ray node {got.where.node}, overhead {overhead:.2f} s" + "".join(f"; {x}" for x in lost)
        if got.where.device != self.device_name:  # a mixed cluster: scores of two GPU models side by side
            notes += f"; not the campaign's GPU model ({self.device_name})"
        return self._parent.judge(got.run, submission_id, secret_seed, got.where, backend="ray", notes=notes)


def _within(seconds: float, call: Callable[[], T]) -> T:
    """``call()`` in a daemon thread, or TimeoutError after ``seconds``: a Ray call to a head that
    went away blocks until Ray's own 60 s deadline ends the whole process, so the thread is left
    behind rather than joined."""
    box: list[tuple[T] | BaseException] = []

    def run() -> None:
        try:
            box.append((call(),))
        except BaseException as exc:  # handed to the caller's thread
            box.append(exc)

    thread = threading.Thread(target=run, name="ray-call", daemon=True)
    thread.start()
    thread.join(seconds)
    if not box:
        raise TimeoutError(f"no answer within {seconds:g} s")
    got = box[0]
    if isinstance(got, BaseException):
        raise got
    return got[0]


def _cause(exc: BaseException) -> str:
    """Ray's error in one line: its class and first sentence, without the traceback it carries."""
    text = " ".join(str(exc).split())
    cause = getattr(exc, "cause", None)
    if cause is not None and not isinstance(cause, type(exc)):
        text = f"{type(cause).__name__}: {' '.join(str(cause).split())}"
    return f"{type(exc).__name__}: {text[:240]}" if not text.startswith(type(exc).__name__) else text[:240]
