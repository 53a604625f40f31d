"""Two fork servers, one thread each: the simulated backend's sandbox jobs on both CPU cores.

The simulated backend blocks while a candidate runs (``_simulated``'s module note: virtual time must
stand still), so with one fork server a campaign used one core: its agents waited for every
sandboxed run, and the run waited for the agents. Most runs can be known before they are asked
for: a kernel that reaches the pre-screen is almost always evaluated later (the main job: 148 of
153), and its evaluation's request depends only on its source and the campaign's secret seed. So
the backend ``expect``s that request when the pre-screen starts, and an idle server runs it in
the background while the agents go on; when ``run`` is asked for it, its outcome is taken instead
of running the candidate again (the main job's wall time: docs/evaluator.md#wall-time).

Each job still runs in a fresh process forked for it, under the same limits; only *when* it runs
changes. What the candidate sees does not: the request is the same bytes, so a deterministic
candidate gives the same outcome whenever it runs. A result is handed out once (``run`` removes
it), and only for the request it was run for, byte for byte. A speculative run that timed out or
lost its server is not trusted (two jobs shared the cores then): the job is run again when needed.

Threads only wait on pipes (``ForkServer.run``); no candidate code runs in them. Each thread owns
its server: it starts it (a second server's ``PR_SET_PDEATHSIG`` then belongs to the thread that
outlives it) and closes it when the pool closes.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field

import msgspec
from kernel_scientist.evaluator._wire import ChildRequest
from kernel_scientist.evaluator.sandbox import ForkServer, JobOutcome, SandboxError

_encoder = msgspec.msgpack.Encoder()
_KEEP = 32  # finished speculative outcomes kept for a later ``run``; the oldest goes first
_CLOSE_WAIT_S = 5.0  # at close, how long a running job may finish before its server is stopped


@dataclass
class _Job:
    request: ChildRequest
    timeout_s: float
    output_limit: int
    needed: bool  # asked for by ``run`` (else only expected)
    done: threading.Event = field(default_factory=threading.Event)
    started_needed: bool = False  # it was needed when a server took it (not speculative)
    outcome: JobOutcome | None = None
    error: SandboxError | None = None


@dataclass
class PoolStats:
    """What the pool did: jobs expected, how many of those ``run`` took (started or finished
    before it was asked), and runs of candidates (expected ones included)."""

    expected: int = 0
    taken: int = 0
    runs: int = 0


def job_key(request: ChildRequest, timeout_s: float, output_limit: int) -> bytes:
    """What makes two jobs the same job: the request's bytes and the limits it runs under."""
    return _encoder.encode((request, timeout_s, output_limit))


class SandboxPool:
    """Runs sandbox jobs on ``servers``, needed ones first, expected ones when a server is idle.

    ``servers[0]`` is started by ``start`` (or the first ``run``) in the caller's thread, so a
    server that cannot start is the caller's ``SandboxError``, as with one server (``launch`` starts its
    process earlier, without waiting). The others start in their own threads at the first
    ``expect`` (a one-off evaluation never pays for them) and, if they cannot, leave the pool one
    server smaller.
    """

    def __init__(self, servers: list[ForkServer]) -> None:
        self._servers = servers
        self._lock = threading.Condition()
        self._queue: list[bytes] = []  # keys not yet taken by a server: needed first, then expected
        self._jobs: dict[bytes, _Job] = {}  # queued, running, and finished but not yet handed out
        self._finished: OrderedDict[bytes, None] = OrderedDict()  # finished expected jobs, oldest first
        self._threads: list[threading.Thread] = []
        self._closing = False
        self._running = 0
        self.stats = PoolStats()

    def launch(self) -> None:
        """Start the first server's process without waiting for it (``start`` waits): what the
        caller does next overlaps its preload."""
        if not self._threads:
            self._servers[0].launch()

    def start(self) -> None:
        if self._threads:
            return
        self._servers[0].start()  # in the caller's thread, before any pool thread touches it
        self._closing = False
        self._add_thread()

    def _add_thread(self) -> None:
        i = len(self._threads)
        thread = threading.Thread(
            target=self._serve, args=(self._servers[i], i > 0), name=f"ks-sandbox-{i}", daemon=True
        )
        thread.start()
        self._threads.append(thread)

    def close(self) -> None:
        """Drop what is queued, let running jobs finish (briefly), then close every server."""
        with self._lock:
            self._closing = True
            self._queue.clear()
            self._lock.notify_all()
        for thread in self._threads:
            thread.join(_CLOSE_WAIT_S)
        for server, thread in zip(self._servers, self._threads):
            if thread.is_alive():  # a long job: stopping its server ends it (the thread sees a dead channel)
                server.stop()
            thread.join()
        for server in self._servers:
            server.close()
        self._threads.clear()
        with self._lock:
            for job in self._jobs.values():
                job.done.set()
            self._jobs.clear()
            self._finished.clear()

    def wait_idle(self, timeout_s: float) -> bool:
        """Wait until no job is queued or running; False if that took longer than ``timeout_s``
        (for a caller that needs what was expected to have run, such as a test)."""
        with self._lock:
            return self._lock.wait_for(lambda: not self._queue and not self._running, timeout_s)

    def expect(self, request: ChildRequest, timeout_s: float, output_limit: int) -> None:
        """``request`` will probably be ``run`` soon: run it when a server is idle."""
        key = job_key(request, timeout_s, output_limit)
        with self._lock:
            if self._closing or not self._threads or key in self._jobs:
                return
            while len(self._threads) < len(self._servers):
                self._add_thread()
            self._jobs[key] = _Job(request, timeout_s, output_limit, needed=False)
            self._queue.append(key)
            self.stats.expected += 1
            self._lock.notify_all()

    def run(self, request: ChildRequest, timeout_s: float, output_limit: int) -> JobOutcome:
        """Run one job and wait for its outcome; an expected job's outcome is taken if it has
        one. Raises SandboxError when no server can run it (as ``ForkServer.run`` does)."""
        self.start()
        key = job_key(request, timeout_s, output_limit)
        job = self._wait(key, request, timeout_s, output_limit)
        if not job.started_needed and (job.error is not None or (job.outcome is not None and _untrusted(job.outcome))):
            job = self._wait(key, request, timeout_s, output_limit)  # again, needed this time
        if job.error is not None:
            raise job.error
        if job.outcome is None:
            raise SandboxError("the sandbox pool closed before the job ran")
        return job.outcome

    def _wait(self, key: bytes, request: ChildRequest, timeout_s: float, output_limit: int) -> _Job:
        """The job for ``key`` (an expected one, or a new one ahead of every expected job),
        finished and handed out: removed from the pool."""
        with self._lock:
            if self._closing:
                raise SandboxError("the sandbox pool is closing")
            job = self._jobs.get(key)
            if job is None:
                job = self._jobs[key] = _Job(request, timeout_s, output_limit, needed=True)
                self._queue.insert(self._needed_count(), key)
            elif not job.needed:
                job.needed = True
                self.stats.taken += key not in self._queue
                self._finished.pop(key, None)  # no longer the oldest to drop
                if key in self._queue:  # not started yet: ahead of every expected job
                    self._queue.remove(key)
                    self._queue.insert(self._needed_count(), key)
            self._lock.notify_all()
        job.done.wait()
        with self._lock:
            if self._jobs.get(key) is job:
                del self._jobs[key]
        return job

    def _needed_count(self) -> int:
        return sum(1 for k in self._queue if self._jobs[k].needed)

    def _serve(self, server: ForkServer, ahead: bool) -> None:
        """One server's thread: needed jobs first; expected ones only with ``ahead`` (the first
        server keeps to needed ones, so that what the campaign waits for starts at once)."""
        if ahead:
            try:
                server.start()
            except SandboxError:
                return  # the pool runs on with the other servers
        while True:
            with self._lock:
                while not self._closing and not (self._queue and (ahead or self._jobs[self._queue[0]].needed)):
                    self._lock.wait()
                if self._closing:
                    return
                key = self._queue.pop(0)
                job = self._jobs[key]
                job.started_needed = job.needed
                self._running += 1
                self.stats.runs += 1
            try:
                outcome = server.run(job.request, job.timeout_s, job.output_limit)
            except SandboxError as exc:
                outcome, job.error = None, exc
            with self._lock:
                self._running -= 1
                job.outcome = outcome
                if not job.needed and self._jobs.get(key) is job:
                    self._finished[key] = None
                    while len(self._finished) > _KEEP:
                        old, _ = self._finished.popitem(last=False)
                        self._jobs.pop(old, None)
                job.done.set()
                self._lock.notify_all()  # wait_idle


def _untrusted(outcome: JobOutcome) -> bool:
    """A speculative outcome that may say more about the moment than the candidate."""
    return outcome.timed_out or outcome.finished is None
