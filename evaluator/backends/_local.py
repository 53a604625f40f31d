"""The local backend: real timings on this machine's GPUs (CUDA or ROCm).

One worker per visible GPU: an evaluation takes a free GPU (evaluations run in parallel across
GPUs, each GPU serialised) and runs the candidate in a fresh process (``sandbox._gpu_harness``)
with only that GPU visible, its own temporary working directory and Triton / torch-extension
caches, a scrubbed environment, and a new session whose whole process group is killed on timeout.
The candidate's process is never reused, so a CUDA error cannot leak into the next candidate. The
parent computes every statistic from the raw samples it receives: means, the cross-check of device
events against the host clock, the speed-of-light floor and the geometric mean.

The critic's pre-screen stays on the CPU (the simulated backend's interpreter sandbox): it costs no
GPU time.
"""

from __future__ import annotations

import contextlib
import functools
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from collections.abc import Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Literal

import anyio
import msgspec
from kernel_scientist.blackboard import metrics
from kernel_scientist.blackboard.records import (
    CompileStats,
    EvalReport,
    Outcome,
    Profile,
    Provenance,
    Shape,
    ShapeResult,
)
from kernel_scientist.evaluator._rules import rule_verdict
from kernel_scientist.evaluator._task import Task, mix_seed
from kernel_scientist.evaluator._wire import OUTCOME_OF, PREPARE, PREPARED, GpuRequest, GpuResult
from kernel_scientist.evaluator.model import DeviceSpec, l2_flush_bytes, spec_for
from kernel_scientist.evaluator.sandbox import _ncu, last_output, scrubbed_env

_HOST_SLACK = 1.5  # host time beyond 1.5x the events (+ launch slack) means work the events missed
_HOST_SLACK_US = 300.0
CPU_DEVICE = "CPU (Triton interpreter, test mode)"  # the device name of the CPU mode's reports


def _gpu_ids() -> list[str]:
    """The GPUs visible to this process, as the values a child's CUDA_VISIBLE_DEVICES needs (the
    parent's own list, when it has one, so that `CUDA_VISIBLE_DEVICES=1` still means GPU 1), found
    without creating a CUDA context here."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES") or os.environ.get("HIP_VISIBLE_DEVICES")
    if visible:
        return [v.strip() for v in visible.split(",") if v.strip()]
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=20).stdout
        count = sum(1 for line in out.splitlines() if line.startswith("GPU "))
    except (OSError, subprocess.TimeoutExpired):
        count = 0
    if count == 0:
        import torch  # ROCm, or no nvidia-smi: ask torch (device_count does not initialise CUDA)

        count = torch.cuda.device_count()
    return [str(i) for i in range(count)]


def smi(query: str, gpu: str | None = None) -> str:
    """One ``nvidia-smi --query-gpu`` field of the first GPU (of ``gpu``, when named); "" where
    nvidia-smi is missing or fails (ROCm)."""
    which = [] if gpu is None else ["-i", gpu]
    try:
        out = subprocess.run(
            ["nvidia-smi", *which, f"--query-gpu={query}", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=20,
        ).stdout
        return out.splitlines()[0].strip() if out.strip() else ""
    except (OSError, subprocess.TimeoutExpired):
        return ""


class LocalBackend:
    """Evaluate submissions on this machine's GPUs (the ``Backend`` protocol)."""

    name = "local"
    simulated = False

    def __init__(
        self,
        task: Task,
        timeout_s: float = 600.0,
        output_limit: int = 64_000,
        max_calls: int = 100,
        shape_budget_s: float = 5.0,
        gpus: list[str] | None = None,
        device: Literal["cuda", "cpu"] = "cuda",
        own_kernel: bool = False,
        min_calls: int = 3,
        rel_stderr: float = 0.001,
        spare: bool = True,
        prepare_ahead: int = 0,
        compile_workers: int | None = None,
    ) -> None:
        """``device="cpu"`` runs the same processes and protocol on the CPU under Triton's
        interpreter, timed by the host clock: every guarantee but the speed, for tests.
        ``own_kernel`` turns on the rules about what the kernel may call (a campaign's policy).
        Each ranked shape gets ``min_calls`` to ``max_calls`` timed calls, fewer than the most once
        the standard error of the events is under ``rel_stderr`` of their mean. With ``spare``
        each GPU's next harness process is started while the current one runs (still one fresh
        process per candidate; its start-up is then off the GPU's critical path). With
        ``prepare_ahead`` (and ``spare``) that many candidates named by ``prepare`` are compiled
        ahead, each in the process that will evaluate it (evaluator/sandbox/_prepare.py). A candidate's
        compiles run on ``compile_workers`` threads (by default the host's cores but one, shared by
        the passes that may run at once; 1 under the interpreter, which compiles nothing)."""
        if device not in ("cuda", "cpu"):
            raise ValueError(f"device must be 'cuda' or 'cpu', not {device!r}")
        self.task = task
        self.device = device
        self.timeout_s = timeout_s
        self.output_limit = output_limit
        self.max_calls = max_calls
        self.shape_budget_s = shape_budget_s
        self.own_kernel = own_kernel
        self.min_calls = min_calls
        self.rel_stderr = rel_stderr
        self.gpus = gpus if gpus is not None else (["cpu"] if device == "cpu" else _gpu_ids())
        if not self.gpus:
            raise RuntimeError(
                "the local backend found no GPU (nvidia-smi and torch see none); "
                'use evaluator.backend = "simulated" on this machine'
            )
        cpu = device == "cpu"
        self.device_name = CPU_DEVICE if cpu else (smi("name") or "GPU")
        self.driver = "" if cpu else smi("driver_version")
        self.spec = spec_for(self.device_name)
        self._free = list(self.gpus)
        self._slots = anyio.Semaphore(len(self.gpus))
        self._spares = _Spares(device) if spare else None
        self.prepare_ahead = prepare_ahead if spare else 0
        if compile_workers is None:
            compile_workers = 1 if cpu else compile_threads(self.prepare_ahead + 1)
        self.compile_workers = compile_workers

    def __enter__(self) -> LocalBackend:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._spares is not None:
            self._spares.close()

    async def prescreen(self, source: str, *, baseline: bool = False) -> EvalReport:
        """Static rules and a syntax check only. The CPU interpreter is not a faithful stand-in for
        every Triton version a GPU machine may have (triton 3.6's interpreter rejects the seed's
        tensor-bounded ``range``, which compiles fine), and a pre-screen on the GPU would cost as
        much start-up as the evaluation itself; the GPU's own test phase is the check."""
        try:
            compile(source, "submission.py", "exec")
        except SyntaxError as exc:
            return self.report(Outcome.COMPILE_ERROR, f"syntax error at line {exc.lineno}: {exc.msg}", 0, 0)
        rejected = rule_verdict(source, own_kernel=self.own_kernel and not baseline)
        if rejected:
            return self.report(Outcome.REJECTED_BY_RULE, rejected, 0, 0)
        return self.report(Outcome.PASSED, "static rules and syntax clean", 0, 0)

    def prepare(self, sources: list[str]) -> None:
        """``sources``: the one about to be evaluated, then the next ones. Each of the first
        ``prepare_ahead`` after it (those the static rules pass) gets a harness process of its own
        that runs a dry pass (nothing on the GPU) and then waits for its real request; a process
        already prepared for the first is kept for it. The processes are started for the first
        GPU (with several, the others' evaluations compile in their own runs). Never blocks; a
        candidate evaluated without one is simply compiled in its own run."""
        if self._spares is None or not self.prepare_ahead:
            return
        wanted = [s for s in dict.fromkeys(sources) if rule_verdict(s, own_kernel=self.own_kernel) is None]
        if sources and wanted[:1] == sources[:1]:
            current, wanted = wanted[:1], wanted[1:]
        else:
            current = []
        ahead = [(s, self.request(s, 0)) for s in wanted[: self.prepare_ahead]]
        self._spares.prepare(self.gpus[0], ahead, self.prepare_ahead, keep_also=current)

    def compiled_ahead(self, source: str) -> bool:
        """Whether ``source``'s process on the first GPU has ended its dry pass (the Backend
        protocol's question); True where nothing is compiled ahead."""
        if self._spares is None or not self.prepare_ahead:
            return True
        return self._spares.compiled(self.gpus[0], source)

    def reference_report(self) -> EvalReport:
        """Time the task's own PyTorch reference on the first GPU (the leaderboard's anchor)."""
        return self._evaluate_on(self.gpus[0], "", 0, 0, reference=True)

    async def evaluate(
        self, source: str, *, submission_id: int = 0, secret_seed: int = 0, baseline: bool = False
    ) -> EvalReport:
        rejected = rule_verdict(source, own_kernel=self.own_kernel and not baseline)
        if rejected:
            return self.report(Outcome.REJECTED_BY_RULE, rejected, submission_id, secret_seed)
        async with self._slots:
            gpu = self._free.pop(0)
            try:
                return await anyio.to_thread.run_sync(
                    self._evaluate_on, gpu, source, submission_id, secret_seed, False, baseline
                )
            finally:
                self._free.append(gpu)

    async def profile(self, source: str, shape: int, *, secret_seed: int = 0, baseline: bool = False) -> Profile:
        """One call of ``source`` on ranked shape number ``shape`` under Nsight Compute, on one of
        the GPUs (``Profiles``): the same sandboxed harness process, its tests checked first, then
        a checked warm-up call and the profiled call (evaluator/sandbox/_ncu.py). Never raises for
        the candidate's or the tool's sake: a Profile without launches says why."""
        target = self.task.benchmarks[shape]
        ncu = _ncu.find_ncu()
        if ncu is None:
            return Profile(shape=target, error="Nsight Compute (ncu) is not on this machine (KS_NCU, PATH)")
        async with self._slots:
            gpu = self._free.pop(0)
            try:
                return await anyio.to_thread.run_sync(self._profile_on, gpu, ncu, source, shape, secret_seed, baseline)
            finally:
                self._free.append(gpu)

    def _profile_on(self, gpu: str, ncu: str, source: str, shape: int, secret_seed: int, baseline: bool) -> Profile:
        target = self.task.benchmarks[shape]
        req = msgspec.structs.replace(self.request(source, secret_seed, baseline=baseline), profile_shape=shape)
        with tempfile.TemporaryDirectory(prefix="ks-ncu-") as folder:
            log = Path(folder) / "ncu.csv"  # the candidate could write here too: a profile is evidence only
            run = HarnessProcess(gpu, self.device, prefix=_ncu.command(ncu, log)).serve(
                req, self.timeout_s, self.output_limit
            )
            text = log.read_text(errors="replace") if log.exists() else ""
        failed = _run_failure(run, self.timeout_s)
        if failed:
            return Profile(shape=target, error=f"the profiled run failed: {failed}"[:400])
        try:
            return Profile(shape=target, launches=_ncu.parse(text), tool=_ncu.ncu_version(ncu))
        except _ncu.NcuError as exc:
            return Profile(shape=target, error=f"ncu: {exc}", tool=_ncu.ncu_version(ncu))

    # ---- one candidate in one fresh process -------------------------------------------------
    def _evaluate_on(
        self,
        gpu: str,
        source: str,
        submission_id: int,
        secret_seed: int,
        reference: bool = False,
        baseline: bool = False,
    ) -> EvalReport:
        req = self.request(source, secret_seed, reference=reference, baseline=baseline)
        process = self._spares.take(gpu, source) if self._spares is not None else None
        run = run_harness(req, gpu, self.timeout_s, self.output_limit, process)
        return self.judge(run, submission_id, secret_seed, self._here())

    def request(
        self,
        source: str,
        secret_seed: int,
        reference: bool = False,
        spec: DeviceSpec | None = None,
        baseline: bool = False,
    ) -> GpuRequest:
        """What the harness process is sent: the task's shapes with their seeds mixed with the
        secret seed here, in the trusted parent (the candidate never sees the secret). The policy
        on what a kernel may call binds neither the task's reference nor a ``baseline``."""

        def mixed(s: Shape) -> Shape:
            return s.with_seed(mix_seed(s.seed, secret_seed))

        return GpuRequest(
            source=source,
            modules=self.task.modules,
            tests=[mixed(s) for s in self.task.tests],
            benchmarks=[mixed(s) for s in self.task.benchmarks],
            min_calls=self.min_calls,
            max_calls=self.max_calls,
            rel_stderr=self.rel_stderr,
            shape_budget_s=self.shape_budget_s,
            time_reference=reference,
            l2_flush_bytes=l2_flush_bytes(spec or self.spec),
            device=self.device,
            meta=self.task.meta,
            own_kernel=self.own_kernel and not reference and not baseline,
            compile_workers=self.compile_workers,
        )

    def _here(self) -> Where:
        cpu = self.device == "cpu"
        return Where(device=self.device_name, driver=self.driver, sm_clock="" if cpu else smi("clocks.sm"))

    def judge(
        self,
        run: HarnessRun,
        submission_id: int,
        secret_seed: int,
        where: Where,
        backend: str = "local",
        notes: str = "",
    ) -> EvalReport:
        """The verdict on one harness run, computed here from what the process left behind: its
        token-checked result (statistics from the raw samples), or why there is none."""
        report = self._reporter(submission_id, secret_seed, run.wall_s, where, backend, notes)
        if run.timed_out:
            return report(Outcome.TIMEOUT, f"exceeded the {self.timeout_s:g} s limit; its process group was killed")
        if run.result is None:
            code = run.exit_code
            why = f"killed by {signal.Signals(-code).name}" if code and code < 0 else f"exited with code {code}"
            return report(Outcome.CRASH, f"{why} before reporting a result{run.last_output}")
        try:
            result = msgspec.msgpack.decode(run.result, type=GpuResult)
        except msgspec.DecodeError as exc:
            return report(Outcome.CRASH, f"reported a result that does not decode: {exc}")
        notes = "; ".join(x for x in (phase_note(result.phases), notes) if x)
        report = self._reporter(submission_id, secret_seed, run.wall_s, where, backend, notes)
        if result.status != "ok":
            return report(
                OUTCOME_OF[result.status],
                result.reason,
                versions=result.versions,
                phases=result.phases,
                compile_stats=result.compile_stats,
            )
        return self._timed(result, submission_id, secret_seed, run.wall_s, where=where, backend=backend, notes=notes)

    def _timed(
        self,
        result: GpuResult,
        submission_id: int,
        secret_seed: int,
        wall: float,
        where: Where | None = None,
        backend: str = "local",
        notes: str = "",
    ) -> EvalReport:
        where = where or self._here()
        spec = spec_for(where.device) if where.device != self.device_name else self.spec
        shapes = []
        for s in result.samples:
            sol = self.task.speed_of_light_us(s.shape, spec)
            event = sum(s.event_us) / len(s.event_us)
            host = sorted(s.host_us)[len(s.host_us) // 2]
            flagged = None
            time_us = event
            if host > _HOST_SLACK * sorted(s.event_us)[len(s.event_us) // 2] + _HOST_SLACK_US:
                flagged, time_us = (
                    "device events disagree with the host clock; host time used",
                    sum(s.host_us) / len(s.host_us),
                )
            if sol is not None and time_us < sol:
                flagged, time_us = f"faster than the speed of light ({sol:.1f} us); floored", sol
            host_work = round(sum(s.call_us) / len(s.call_us), 3) if s.call_us else None
            shapes.append(
                ShapeResult(
                    shape=s.shape,
                    passed=True,
                    time_us=round(time_us, 3),
                    sol_us=None if sol is None else round(sol, 3),
                    flagged=flagged,
                    host_us=host_work,
                )
            )
        score = self.task.score([us for x in shapes if (us := x.time_us) is not None])
        calls = sum(len(s.event_us) for s in result.samples)
        report = self._reporter(submission_id, secret_seed, wall, where, backend, notes)
        return report(
            Outcome.PASSED,
            f"passed {len(self.task.tests)} tests and {len(shapes)} ranked "
            f"shapes ({calls} timed calls, each re-checked)",
            score=score,
            shapes=shapes,
            versions=result.versions,
            phases=result.phases,
            compile_stats=result.compile_stats,
        )

    def _reporter(
        self, submission_id: int, secret_seed: int, wall: float, where: Where, backend: str, notes: str
    ) -> functools.partial[EvalReport]:
        """``report`` for one harness run, its context bound: what is left to say is the outcome,
        the reason and what was measured (``score``, ``shapes``, ``versions``, ``phases``,
        ``compile_stats``)."""
        run = functools.partial(self.report, submission_id=submission_id, secret_seed=secret_seed, wall=wall)
        return functools.partial(run, where=where, backend=backend, notes=notes)

    def report(
        self,
        outcome: Outcome,
        reason: str,
        submission_id: int,
        secret_seed: int,
        wall: float = 0.0,
        score: float | None = None,
        shapes: Iterable[ShapeResult] = (),
        versions: dict[str, str] | None = None,
        where: Where | None = None,
        backend: str = "local",
        notes: str = "",
        phases: dict[str, float] | None = None,
        compile_stats: Sequence[CompileStats] = (),
    ) -> EvalReport:
        where = where or Where(device=self.device_name, driver=self.driver, sm_clock="")
        prov = Provenance(
            backend=backend,
            simulated=False,
            device=where.device,
            timing_method=(
                "host clock per call on the CPU (test mode: Triton interpreter, no GPU)"
                if self.device == "cpu"
                else "device events per call, cross-checked with the host clock between device-wide "
                "synchronizes; L2 flushed and fresh inputs before every call; every output re-checked"
            ),
            versions={**(versions or {}), "driver": where.driver, "sm_clock": where.sm_clock},
            seeds=[submission_id],
            notes=f"wall {wall:.1f} s; seeds mixed with the campaign's secret seed" + (f"; {notes}" if notes else ""),
        )
        return EvalReport(
            outcome=outcome,
            reason=reason,
            provenance=prov,
            score_us=score,
            shapes=list(shapes),
            checked_shapes=list(self.task.tests),
            duration_s=0.0,
            phases=dict(phases or {}),
            compile_stats=list(compile_stats),
        )


def compile_threads(passes: int, cpus: int | None = None) -> int:
    """Compile threads per dry pass: the host's cores but one (the candidate being timed keeps
    it), shared by the ``passes`` that may run at once, at most 8 each."""
    cpus = cpus if cpus is not None else (os.cpu_count() or 1)
    return max(1, min(8, (cpus - 1) // max(1, passes)))


def phase_note(phases: dict[str, float]) -> str:
    """Where a harness run's wall time went, for its provenance notes: "start-up 2.6 s, set-up
    0.3 s, tests 9.8 s, timing 4.1 s", or for a process started early, whose start-up the run did
    not wait for, "set-up 0.3 s, tests 9.8 s, timing 4.1 s; start-up 2.6 s before the request".
    A run that compiled nothing ahead but compiles on several threads first has a "compile pass"."""
    early = metrics.started_early(phases)
    names = {"compile_s": "compile pass", "setup_s": "set-up", "tests_s": "tests", "timing_s": "timing"}
    if not early:
        names = {"preload_s": "start-up", **names}
    text = ", ".join(f"{label} {phases[key]:.1f} s" for key, label in names.items() if key in phases)
    if early and "preload_s" in phases:
        text += f"; start-up {phases['preload_s']:.1f} s before the request"
    if "prepare_s" in phases:
        calls = int(phases.get("prepare_calls", 0))
        text += f"; compiled ahead in {phases['prepare_s']:.1f} s ({calls} dry call{'s' * (calls != 1)})"
    return text


# ---- the harness process, wherever it runs ---------------------------------------------------
class Where(msgspec.Struct, frozen=True):
    """The machine an evaluation ran on, as its provenance names it."""

    device: str  # the GPU's name ("CPU (...)" in CPU mode); picks the speed-of-light spec
    driver: str = ""
    sm_clock: str = ""
    node: str = ""  # a Ray node (its address and id), empty for this machine


class HarnessRun(msgspec.Struct, frozen=True):
    """What one harness process left behind, before any verdict: the backend that ran it (local,
    or a Ray worker on another host) returns this, and the campaign's process judges it."""

    timed_out: bool
    result: bytes | None  # the encoded GpuResult, present only when the run's token came with it
    exit_code: int | None
    last_output: str  # "; last output: <the last non-empty line>", or "" (the sandbox's last_output)
    wall_s: float


class HarnessProcess:
    """One started ``evaluator.sandbox._gpu_harness`` process that has not yet been sent a request: it sees
    only its GPU (none in CPU mode) and runs in its own temporary directory and session, with a
    scrubbed environment. It imports torch and Triton, then waits on its stdin."""

    def __init__(self, gpu: str, device: Literal["cuda", "cpu"], prefix: Sequence[str] = ()) -> None:
        """``prefix``: a command the harness runs under (Nsight Compute's, to profile it)."""
        self.gpu, self.device = gpu, device
        self.workdir = tempfile.mkdtemp(prefix="ks-gpu-")
        env = scrubbed_env()
        env.pop("TRITON_INTERPRET", None)
        if device == "cpu":  # no GPU at all: the interpreter runs the kernels
            env["TRITON_INTERPRET"] = "1"
        visible = "" if device == "cpu" else str(gpu)
        env.update(
            CUDA_VISIBLE_DEVICES=visible,
            HIP_VISIBLE_DEVICES=visible,
            TRITON_CACHE_DIR=os.path.join(self.workdir, ".triton"),
            TORCH_EXTENSIONS_DIR=os.path.join(self.workdir, ".torch_ext"),
        )
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = open(os.path.join(self.workdir, ".output"), "w+b")
        self.read_fd, write_fd = os.pipe()
        try:
            self.proc = subprocess.Popen(
                [*prefix, sys.executable, "-m", "kernel_scientist.evaluator.sandbox._gpu_harness", str(write_fd)],
                cwd=self.workdir,
                env=env,
                stdin=subprocess.PIPE,
                stdout=self.log,
                stderr=self.log,
                pass_fds=(write_fd,),
                start_new_session=True,
            )
        except BaseException:
            self.discard()
            raise
        finally:
            os.close(write_fd)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def compiled(self) -> bool:
        """Its dry pass has ended (the harness leaves ``PREPARED`` in its directory). Written where
        the candidate could write too: a forged one only moves that candidate up the queue."""
        return os.path.exists(os.path.join(self.workdir, PREPARED))

    def prepare(self, req: GpuRequest) -> None:
        """Send ``req`` for a dry pass (evaluator/sandbox/_prepare.py): the process compiles the candidate
        ahead, then waits for its real request, which ``serve`` must send for the same source."""
        assert self.proc is not None and self.proc.stdin is not None  # started, stdin=PIPE
        payload = msgspec.msgpack.encode(req)
        self.proc.stdin.write(PREPARE + str(len(payload)).encode() + b"\n" + payload)
        self.proc.stdin.flush()

    def serve(self, req: GpuRequest, timeout_s: float, output_limit: int) -> HarnessRun:
        """Send ``req`` with a fresh per-run token, wait for the process to end or overrun
        ``timeout_s`` (counted from the request), kill its whole process group, and return what
        it left behind. Blocking; the process is used up."""
        token = secrets.token_hex(16).encode()
        began = time.perf_counter()
        assert self.proc is not None and self.proc.stdin is not None  # started, stdin=PIPE
        try:
            try:
                self.proc.stdin.write(token + b"\n" + msgspec.msgpack.encode(req))
                self.proc.stdin.close()
            except BrokenPipeError:  # it died before the request (run_harness then starts another)
                self.proc.wait()
                raise
            try:
                self.proc.wait(timeout=timeout_s)
                timed_out = False
            except subprocess.TimeoutExpired:
                timed_out = True
            _kill_group(self.proc)
            with os.fdopen(self.read_fd, "rb") as channel:
                self.read_fd = -1
                payload = channel.read()
            self.log.seek(0)
            output = self.log.read(output_limit).decode(errors="replace")
        finally:
            self.discard()
        head, _, body = payload.partition(b"\n")
        return HarnessRun(
            timed_out=timed_out,
            result=body if head == token and body else None,
            exit_code=self.proc.returncode,
            last_output=last_output(output),
            wall_s=time.perf_counter() - began,
        )

    def discard(self) -> None:
        """Kill the process group (if any is left) and remove the working directory."""
        if self.proc is not None and self.proc.returncode is None:
            _kill_group(self.proc)  # never after serve: its group is gone and the id may be reused
        if self.read_fd >= 0:
            os.close(self.read_fd)
            self.read_fd = -1
        self.log.close()
        shutil.rmtree(self.workdir, ignore_errors=True)


class _Spares:
    """Each GPU's next harness process, started when the current one is taken, so that its
    start-up (Python, torch, Triton: seconds) overlaps the current candidate's run instead of
    following it; and the processes of candidates compiled ahead (``prepare``), one per source. A
    spare is still a fresh process that serves exactly one candidate; it touches no GPU before its
    request (a prepared one only compiles). The processes are started from one long-lived thread
    because a harness process dies with the thread that started it (``PR_SET_PDEATHSIG`` follows
    the parent thread), and evaluations run in worker threads that may end while a spare waits."""

    def __init__(self, device: Literal["cuda", "cpu"]) -> None:
        self.device = device
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ks-harness-spare")
        self._next: dict[str, Future[HarnessProcess]] = {}
        self._ahead: dict[tuple[str, str], Future[HarnessProcess]] = {}  # (gpu, source) -> prepared, oldest first
        self._lock = threading.Lock()
        self._closed = [False]
        # A backend used without ``with`` (scripts) still leaves no process or directory behind.
        weakref.finalize(self, _close_spares, self._next, self._ahead, self._pool, self._lock, self._closed)

    def take(self, gpu: str, source: str | None = None) -> HarnessProcess | None:
        """The process prepared for ``source`` on ``gpu`` if there is one; else the spare started
        for ``gpu`` (None for the first evaluation, or once closed), and the next one started in
        its place."""
        with self._lock:
            if self._closed[0]:
                return None
            ready = self._ahead.pop((gpu, source), None) if source is not None else None
            if ready is None:
                ready = self._next.pop(gpu, None)
                self._next[gpu] = self._pool.submit(HarnessProcess, gpu, self.device)
        try:
            return ready.result() if ready is not None else None
        except OSError:  # it could not start (no memory, say): the evaluation starts its own
            return None

    def compiled(self, gpu: str, source: str) -> bool:
        """A process prepared for ``source`` on ``gpu`` has started and ended its dry pass."""
        with self._lock:
            future = self._ahead.get((gpu, source))
        if future is None or not future.done():
            return False
        try:
            return future.result().compiled()
        except OSError:
            return False

    def prepare(self, gpu: str, ahead: list[tuple[str, GpuRequest]], keep: int, keep_also: list[str]) -> None:
        """Processes for the sources of ``ahead`` that have none yet, each sent its dry pass; at
        most ``keep`` per GPU besides those of ``keep_also`` (about to be taken), those no longer
        named discarded first (oldest first)."""
        with self._lock:
            if self._closed[0]:
                return
            kept = {(gpu, source) for source in keep_also}
            named = {(gpu, source) for source, _ in ahead} | kept
            for source, req in ahead:
                key = (gpu, source)
                if key in self._ahead:
                    continue
                mine = [k for k in self._ahead if k[0] == gpu and k not in kept]
                stale = [k for k in mine if k not in named]
                if len(mine) >= keep:
                    if not stale:
                        break
                    self._pool.submit(_discard, self._ahead.pop(stale[0]))
                self._ahead[key] = self._pool.submit(_prepared, gpu, self.device, req)

    def close(self) -> None:
        _close_spares(self._next, self._ahead, self._pool, self._lock, self._closed)


def _prepared(gpu: str, device: Literal["cuda", "cpu"], req: GpuRequest) -> HarnessProcess:
    process = HarnessProcess(gpu, device)
    try:
        process.prepare(req)
    except OSError:  # it died at once (BrokenPipeError): serve then finds it dead and starts another
        pass
    return process


def _discard(future: Future[HarnessProcess]) -> None:
    with contextlib.suppress(Exception):
        future.result().discard()


def _close_spares(
    spares: dict[str, Future[HarnessProcess]],
    ahead: dict[tuple[str, str], Future[HarnessProcess]],
    pool: ThreadPoolExecutor,
    lock: threading.Lock,
    closed: list[bool],
) -> None:
    with lock:
        closed[0] = True
        pending = [*spares.values(), *ahead.values()]
        spares.clear()
        ahead.clear()
    for future in pending:
        _discard(future)
    pool.shutdown(wait=True)


def _run_failure(run: HarnessRun, timeout_s: float) -> str | None:
    """Why a harness run that was not timed (a profiled one) failed, in one line; None if it ran."""
    if run.timed_out:
        return f"exceeded the {timeout_s:g} s limit"
    if run.result is None:
        return f"exited with code {run.exit_code} before reporting a result{run.last_output}"
    try:
        result = msgspec.msgpack.decode(run.result, type=GpuResult)
    except msgspec.DecodeError as exc:
        return f"reported a result that does not decode: {exc}"
    return None if result.status == "ok" else f"{OUTCOME_OF[result.status]}: {result.reason}"


def run_harness(
    req: GpuRequest, gpu: str, timeout_s: float, output_limit: int, process: HarnessProcess | None = None
) -> HarnessRun:
    """Run ``req`` in ``process`` (one started earlier for ``gpu`` and still waiting) or else in a
    fresh ``HarnessProcess``; a process serves one request only. Blocking."""
    if process is not None and process.alive():
        try:
            return process.serve(req, timeout_s, output_limit)
        except BrokenPipeError:  # a spare that died before its request says nothing of the candidate
            pass
    elif process is not None:
        process.discard()
    return HarnessProcess(gpu, req.device).serve(req, timeout_s, output_limit)


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()
