"""The simulated backend: correctness for real on the CPU, time from the analytic model.

``evaluate`` and ``prescreen`` are ``async def`` for the backend interface, but do their real work
inline and blocking, with no ``await`` while a candidate runs. The campaign may run on trio's
MockClock with autojump: a task awaiting a thread or a subprocess counts as idle, so virtual time
would jump past deadlines while the CPU is still busy (docs/stack-pitfalls.md). Blocking keeps
virtual time still; the campaign then charges ``EvalReport.duration_s`` (the modelled time a real
leaderboard service would take) to its clock.

Judging happens here, in the campaign process: the child sends back raw output bytes, and this
process regenerates the inputs, runs the reference and applies the task's check.

The sandbox runs go through a pool of two fork servers (``_pool``): when a kernel's pre-screen
starts, its evaluation's request (its source and the secret seed of the evaluations so far) is
expected, and the second server runs it on the other core while the campaign goes on; the
evaluation then takes that outcome. Each run is still a fresh process on the same request, so the
reports are the ones a run on demand gives.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import math
import platform
import signal
import tempfile
import types
from collections.abc import Iterator, Sequence
from typing import Literal

import msgspec
import numpy as np
from kernel_scientist.blackboard.records import CompileStats, EvalReport, Outcome, Provenance, Shape, ShapeResult
from kernel_scientist.evaluator._rules import rule_verdict
from kernel_scientist.evaluator._task import Task, check_failure, mix_seed, task_flops
from kernel_scientist.evaluator._wire import OUTCOME_OF, CheckOutput, ChildRequest, ChildResult
from kernel_scientist.evaluator.backends._pool import SandboxPool
from kernel_scientist.evaluator.model import (
    DEVICES,
    MODEL_VERSION,
    ModelInfeasible,
    ModelUnsupported,
    capture_time_us,
    is_vector_gemm,
)
from kernel_scientist.evaluator.sandbox import (
    ForkServer,
    JobOutcome,
    decode_output,
    generate_input,
    import_reference,
    last_output,
    recheck_index,
)
from kernel_scientist.evaluator.sandbox._compile_stats import launch_refusal, limits_of

_result_decoder = msgspec.msgpack.Decoder(ChildResult)

# The modelled leaderboard service (deterministic): queue and container start, compile, one
# correctness pass over the tests, then public and secret ranked runs of up to 100 timed calls per
# shape, each with fresh inputs and a re-check by the fp32 reference.
_SERVICE_START_S = 30.0
_COMPILE_S = 20.0
_TEST_S = 1.5
_SHAPE_SETUP_S = 0.5
_CALL_OVERHEAD_S = 2e-4
_REF_TFLOPS = 80.0
_TIMEOUT_PHASE_S = 180.0
Mode = Literal["evaluate", "prescreen"]
_MEAN = {"geom": "geomean", "mean": "mean", "last": "last-shape time"}


def _versions() -> dict[str, str]:
    def v(dist: str) -> str:
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            return "absent"

    return {"python": platform.python_version(), "torch": v("torch"), "triton": v("triton")}


@contextlib.contextmanager
def one_thread() -> Iterator[None]:
    """Torch's intra-op parallelism off while the parent judges. The check shapes are small (a few
    thousand elements): a second thread saves nothing, and while a sandboxed candidate holds the
    other core, every parallel region of the reference waits for a thread that cannot run (the
    main job: 8-15 s of judging on two threads, 1.4-1.6 s on one; docs/evaluator.md#wall-time).
    The main job's values do not depend on it: the reference's outputs are bit-identical on one
    and two threads (checked on the task's check shapes and tests; its blackboard is identical row
    for row). Another task's large reduction may round differently on one thread than on two, as
    it does on two cores against eight: one thread makes the verdict the same on every machine."""
    import torch

    before = torch.get_num_threads()
    if before == 1:
        yield
        return
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _noise(sigma: float, secret_seed: int, submission_id: int, shape: Shape) -> float:
    if sigma <= 0:
        return 1.0
    key = hashlib.blake2b(f"{secret_seed}:{submission_id}:{shape.label()}:{shape.seed}".encode(), digest_size=8)
    rng = np.random.default_rng(int.from_bytes(key.digest(), "little"))
    return float(math.exp(sigma * rng.standard_normal()))


class SimulatedBackend:
    """Evaluate submissions on simulated hardware (the ``Backend`` protocol). Use as a context
    manager: it owns a server."""

    name = "simulated"
    simulated = True

    def __init__(
        self,
        task: Task,
        device: str = "mi300x",
        noise: float = 0.02,
        timeout_s: float = 30.0,
        output_limit: int = 64_000,
        mem_limit_mb: int = 4096,
        own_kernel: bool = False,
        compile_stats: bool = False,
    ) -> None:
        """``own_kernel`` turns on the rules about what the kernel may call (a torch matmul doing
        the task's work is rejected): a campaign's policy; ``evaluate`` leaves it off.
        ``compile_stats``: each evaluation's timed kernels are also compiled for the device's
        architecture (registers, spills, shared memory; ``EvalReport.compile_stats``), with a
        Triton cache this backend keeps for its candidates: 0.1-2 s per kernel the cache has not
        seen (evaluator/sandbox/_compile_stats.py). A kernel whose statistics show that one block
        does not fit an SM (CU) is then a compile error, as its launch fails on the GPU; without
        statistics only the timing model's estimate of a tile's shared memory can say so. Off by
        default: most evaluations (the test suite's) need no statistics."""
        if device not in DEVICES:
            raise ValueError(f"unknown device {device!r}; known: {', '.join(DEVICES)}")
        self.task = task
        self.spec = self.device = DEVICES[device]
        self.device_name = f"{self.device.label} (simulated)"
        spec = self.device
        self._limits = limits_of(spec.vendor, spec.lanes, spec.reg_file_kb, spec.max_waves_per_unit, spec.smem_kb)
        self.noise = noise
        self.timeout_s = timeout_s
        self.output_limit = output_limit
        self.mem_limit_mb = mem_limit_mb
        self.own_kernel = own_kernel
        self._server = ForkServer()  # runs what is needed now; a second one runs ahead (module note)
        self._pool = SandboxPool([self._server, ForkServer()])
        self._secret_seed: int | None = None  # the evaluations' so far: what an expected one will use
        self._reference: types.ModuleType | None = None
        self._versions = _versions()
        # The compiles' Triton cache: the backend's own, shared by its candidates, gone at close.
        self._compile_cache = tempfile.TemporaryDirectory(prefix="ks-compile-") if compile_stats else None

    # -- lifetime --------------------------------------------------------------------------------
    def __enter__(self) -> SimulatedBackend:
        self._pool.launch()  # its preload (seconds) overlaps the caller's own start: wait_started waits
        return self

    def wait_started(self) -> None:
        """Wait until the sandbox takes jobs; raises SandboxError if it cannot start. A campaign
        calls it before its blackboard exists (after the reference report, which runs meanwhile),
        so a sandbox that cannot start still refuses the campaign before anything is written; the
        first pre-screen or evaluation waits too."""
        self._pool.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._pool.close()
        if self._compile_cache is not None:
            self._compile_cache.cleanup()

    # -- the interface ---------------------------------------------------------------------------
    async def evaluate(
        self, source: str, *, submission_id: int = 0, secret_seed: int = 0, baseline: bool = False
    ) -> EvalReport:
        """Check on the task's check shapes, then time the ranked shapes with the model.
        Blocking on purpose (module docstring)."""
        self._secret_seed = secret_seed
        return self._run("evaluate", source, submission_id, secret_seed, self.own_kernel and not baseline)

    async def prescreen(self, source: str, *, baseline: bool = False) -> EvalReport:
        """Rules, import and the smallest check shape, the evaluation's own checks on it: its
        launches recorded again on meta inputs must match (rule meta_consistency), and it is run
        once more after that (correct first, wrong later); no timing. duration_s is 0: it is a
        local pre-screen that never reaches the (simulated) service."""
        return self._run("prescreen", source, 0, 0, self.own_kernel and not baseline)

    def prepare(self, sources: list[str]) -> None:
        """Nothing to compile ahead here (the Backend protocol's hint)."""

    def compiled_ahead(self, source: str) -> bool:
        """Nothing is compiled ahead, so every candidate is as ready as any other."""
        return True

    def reference_report(self) -> EvalReport:
        """The task's own reference implementation, timed by the same model on the ranked shapes:
        the "speed-up over reference" anchor. Its torch work is recorded on meta tensors in this
        process (no candidate code runs, so no sandbox is needed); deterministic, no noise, and
        ``duration_s`` 0 since no service is consulted."""
        from kernel_scientist.evaluator._wire import Capture, Launch, TorchOp
        from kernel_scientist.evaluator.sandbox import capture_launches, meta_inputs

        if self._reference is None:
            self._reference = import_reference(self.task.modules)
        shapes: list[ShapeResult] = []
        for s in self.task.benchmarks:
            data = meta_inputs(self._reference, s)
            launches: list[Launch] = []
            ops: list[TorchOp] = []
            try:
                with capture_launches(launches, ops):
                    self._reference.ref_kernel(data)
            except Exception as exc:  # e.g. a torch op without a meta kernel: no time invented
                return EvalReport(
                    outcome=Outcome.PASSED,
                    reason=f"the task's reference, not timed: on {s.label()} it "
                    f"cannot be recorded on meta tensors ({' '.join(str(exc).split())[:200]})",
                    provenance=self._provenance(0, 0, notes="reference implementation, no sandbox"),
                )
            t, _ = capture_time_us(Capture(shape=s, launches=launches, torch_ops=ops), self.device)
            shapes.append(ShapeResult(shape=s, passed=True, time_us=round(t, 4), sol_us=self._sol(s)))
        score = self.task.score([us for r in shapes if (us := r.time_us) is not None])
        return EvalReport(
            outcome=Outcome.PASSED,
            reason=f"the task's reference, modelled {score:.2f} us",
            provenance=self._provenance(0, 0, notes="reference implementation, no sandbox"),
            score_us=round(score, 4),
            shapes=shapes,
        )

    # -- the work --------------------------------------------------------------------------------
    def _sol(self, shape: Shape) -> float | None:
        sol = self.task.speed_of_light_us(shape, self.device)
        return None if sol is None else round(sol, 4)

    def _provenance(self, submission_id: int, secret_seed: int, notes: str = "") -> Provenance:
        return Provenance(
            backend=self.name,
            simulated=True,
            device=self.device_name,
            timing_method="analytic model",
            versions=self._versions,
            seeds=[secret_seed, submission_id],
            model=MODEL_VERSION,
            notes=notes,
        )

    def _report(
        self,
        mode: Mode,
        outcome: Outcome,
        reason: str,
        prov: Provenance,
        checked: list[Shape],
        duration_s: float,
        score_us: float | None = None,
        shapes: Sequence[ShapeResult] = (),
        compile_stats: Sequence[CompileStats] = (),
    ) -> EvalReport:
        return EvalReport(
            outcome=outcome,
            reason=reason,
            provenance=prov,
            checked_shapes=checked,
            duration_s=0.0 if mode == "prescreen" else round(duration_s, 3),
            score_us=score_us,
            shapes=list(shapes),
            compile_stats=list(compile_stats),
        )

    def _run(self, mode: Mode, source: str, submission_id: int, secret_seed: int, policy: bool) -> EvalReport:
        """``policy``: the rules on what the kernel may call apply (``own_kernel``, not a baseline)."""
        prov = self._provenance(submission_id, secret_seed)
        rejected = rule_verdict(source, own_kernel=policy)
        if rejected:
            return self._report(mode, Outcome.REJECTED_BY_RULE, rejected, prov, [], 0.0)
        request = self._request(mode, source, secret_seed, policy)
        checks = request.check
        if mode == "prescreen" and self._secret_seed is not None:  # a pre-screened kernel is usually evaluated
            self._pool.expect(
                self._request("evaluate", source, self._secret_seed, policy), self.timeout_s, self.output_limit
            )
        job = self._pool.run(request, self.timeout_s, self.output_limit)
        failed = self._failure(job)
        if failed is not None:
            outcome, reason = failed
            return self._report(mode, outcome, reason, prov, [], self._failed_duration(outcome))
        try:
            assert job.finished is not None and job.finished.result is not None  # _failure said so
            result = _result_decoder.decode(job.finished.result)
        except msgspec.DecodeError as exc:
            return self._report(
                mode,
                Outcome.CRASH,
                f"the result channel held no valid result ({exc}); it may have been forged",
                prov,
                [],
                self._failed_duration(Outcome.CRASH),
            )
        if result.status != "ok":
            outcome = OUTCOME_OF[result.status]
            return self._report(
                mode,
                outcome,
                result.reason + last_output(job.finished.output) * (outcome is Outcome.CRASH),
                prov,
                [],
                self._failed_duration(outcome),
            )
        refused = launch_refusal(result.compile_stats, self._limits)
        if refused:  # Triton raises this at the first call on the GPU, before any output is checked
            return self._report(
                mode,
                Outcome.COMPILE_ERROR,
                f"{refused} ({result.compile_stats[0].origin}): the launch fails on the device",
                prov,
                [],
                _SERVICE_START_S + _COMPILE_S,
                compile_stats=result.compile_stats,
            )
        # the child re-checks the smallest check shape after launch capture (sandbox._child._work)
        recheck = [checks[recheck_index(checks)]] if checks else []
        verdict = self._judge(result.checks, checks + recheck)
        if verdict is not None:
            return self._report(
                mode, Outcome.WRONG_OUTPUT, verdict, prov, checks, self._failed_duration(Outcome.WRONG_OUTPUT)
            )
        if mode == "prescreen":
            return self._report(
                mode, Outcome.PASSED, f"passed the pre-screen on {checks[0].label()}", prov, checks, 0.0
            )
        return self._timed(result, prov, checks, submission_id, secret_seed)

    def _request(self, mode: Mode, source: str, secret_seed: int, policy: bool) -> ChildRequest:
        """The child's request. A pre-screen is the child's evaluation without ranked shapes, on the
        smallest check shape: that shape's launches are then probed on meta inputs (the largest
        check shape's are, in the evaluation), so that a kernel our own rule meta_consistency
        would reject is sent back before an evaluation is spent on it; a probe and a re-check of
        the smallest shape cost about 0.1 s."""
        shapes = self.task.check_shapes if mode == "evaluate" else [min(self.task.check_shapes, key=lambda s: s.work())]
        checks = [s.with_seed(mix_seed(s.seed, secret_seed)) for s in shapes]
        return ChildRequest(
            mode="evaluate",
            source=source,
            task_dir=self.task.path,
            modules=self.task.modules,
            check=checks,
            bench=self.task.benchmarks if mode == "evaluate" else [],
            device=self.device.name,
            mem_limit_mb=self.mem_limit_mb,
            meta=self.task.meta,
            own_kernel=policy,
            compile_cache=self._compile_cache.name if self._compile_cache is not None else "",
            compile_by_s=0.6 * self.timeout_s,
        )

    def _failure(self, job: JobOutcome) -> tuple[Outcome, str] | None:
        fin = job.finished
        if job.timed_out:
            return Outcome.TIMEOUT, f"exceeded the {self.timeout_s:g} s limit; its process group was killed"
        if fin is None:
            return Outcome.CRASH, job.note or "the sandbox lost the candidate"
        if fin.signal is not None:
            name = (
                signal.Signals(fin.signal).name if fin.signal in signal.Signals._value2member_map_ else str(fin.signal)
            )
            hint = " (possibly out of memory)" if fin.signal == signal.SIGKILL else ""
            return Outcome.CRASH, f"killed by {name}{hint}{last_output(fin.output)}"
        if fin.result is None:
            return Outcome.CRASH, f"exited with code {fin.exit_code} before reporting a result{last_output(fin.output)}"
        if fin.exit_code != 0:  # the harness exits 0 only after writing its own result: this one is not its
            return Outcome.CRASH, (
                f"exited with code {fin.exit_code} leaving a result the harness did not finish; "
                f"the result channel may have been forged{last_output(fin.output)}"
            )
        return None

    def _judge(self, outputs: list[CheckOutput], expected_shapes: list[Shape]) -> str | None:
        """The verdict, computed here from pristine inputs by the folder's own
        check_implementation. Returns a reason (with the folder's message), or None if all pass."""
        if self._reference is None:
            self._reference = import_reference(self.task.modules)
        ref = self._reference
        if [o.shape for o in outputs] != expected_shapes:
            return "the candidate's process returned outputs for other shapes than were asked"
        with one_thread():
            return self._verdict(ref, outputs, expected_shapes)

    def _verdict(self, ref: types.ModuleType, outputs: list[CheckOutput], expected_shapes: list[Shape]) -> str | None:
        for i, out in enumerate(outputs):
            s = out.shape
            where = f"on check shape {s.label()} (seed {s.seed})"
            if i >= len(set(expected_shapes)):
                where += " on the re-check after launch capture"
            if out.inputs_modified:
                return f"wrong output {where}: the kernel wrote to its inputs ({out.inputs_modified})"
            try:
                output = decode_output(out.value)
            except ValueError as exc:
                return f"wrong output {where}: {exc}"
            failed = check_failure(ref, generate_input(ref, s, "cpu"), output)
            if failed:
                return f"wrong output {where}: {failed}"
        return None

    def _timed(
        self, result: ChildResult, prov: Provenance, checks: list[Shape], submission_id: int, secret_seed: int
    ) -> EvalReport:
        shapes: list[ShapeResult] = []
        service_s = _SERVICE_START_S + _COMPILE_S + _TEST_S * len(self.task.tests)
        for cap in result.captures:
            s = cap.shape
            if cap.untimed:  # correct, but the call cannot run on meta tensors: no time invented
                return self._report(
                    "evaluate",
                    Outcome.PASSED,
                    f"passed {len(checks)} check shapes on the CPU "
                    f"interpreter; not timed: on ranked shape {s.label()} the call cannot be recorded "
                    f"on meta tensors ({cap.untimed})",
                    prov,
                    checks,
                    service_s,
                    compile_stats=result.compile_stats,
                )
            if s.is_mnk() and task_flops(self.task.meta, s):  # a matrix product: the work must show
                has_work = any(x.has_dot or is_vector_gemm(x, s) for x in cap.launches) or any(
                    op.flops for op in cap.torch_ops
                )
                missing = "no matrix work"
            else:
                has_work, missing = bool(cap.launches or cap.torch_ops), "nothing"
            if not has_work:
                return self._report(
                    "evaluate",
                    Outcome.CRASH,
                    f"on ranked shape {s.label()} the call launched {missing} "
                    "during launch capture (meta-device inputs); it cannot be timed",
                    prov,
                    checks,
                    self._failed_duration(Outcome.CRASH),
                    compile_stats=result.compile_stats,
                )
            try:
                t, _parts = capture_time_us(cap, self.device)
            except ModelInfeasible as exc:
                return self._report(
                    "evaluate",
                    Outcome.COMPILE_ERROR,
                    f"on ranked shape {s.label()}: {exc}",
                    prov,
                    checks,
                    _SERVICE_START_S + _COMPILE_S,
                    compile_stats=result.compile_stats,
                )
            except ModelUnsupported as exc:  # correct, but we will not invent a time
                return self._report(
                    "evaluate",
                    Outcome.PASSED,
                    f"passed {len(checks)} check shapes on the CPU "
                    f"interpreter; not timed: on ranked shape {s.label()}: {exc}",
                    prov,
                    checks,
                    service_s,
                    compile_stats=result.compile_stats,
                )
            t *= _noise(self.noise, secret_seed, submission_id, s)
            sol = self._sol(s)
            flag = f"faster than speed of light ({t:.2f} < {sol:.2f} us)" if sol is not None and t < sol else None
            shapes.append(ShapeResult(shape=s, passed=True, time_us=round(t, 4), sol_us=sol, flagged=flag))
            ref_s = (task_flops(self.task.meta, s) or 0.0) / (_REF_TFLOPS * 1e12)
            service_s += 2 * (_SHAPE_SETUP_S + 100 * (t * 1e-6 + ref_s + _CALL_OVERHEAD_S))
        score = self.task.score([us for r in shapes if (us := r.time_us) is not None])
        flagged = sum(1 for r in shapes if r.flagged)
        reason = (
            f"passed {len(checks)} check shapes on the CPU interpreter; modelled {_MEAN[self.task.ranking_by]} "
            f"{score:.2f} us"
        )
        if flagged:
            reason += f"; {flagged} shape(s) flagged faster than speed of light"
        return self._report(
            "evaluate",
            Outcome.PASSED,
            reason,
            prov,
            checks,
            service_s,
            score_us=round(score, 4),
            shapes=shapes,
            compile_stats=result.compile_stats,
        )

    def _failed_duration(self, outcome: Outcome) -> float:
        if outcome is Outcome.TIMEOUT:
            return _SERVICE_START_S + _TIMEOUT_PHASE_S
        if outcome is Outcome.COMPILE_ERROR:
            return _SERVICE_START_S + _COMPILE_S
        return _SERVICE_START_S + _COMPILE_S + _TEST_S * len(self.task.tests)
