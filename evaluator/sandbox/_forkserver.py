"""The campaign-process side of the sandbox: owns the fork server and runs one job at a time.

Every wait is a blocking ``select`` with a wall-clock deadline (see ``_framing`` for why not async).
The parent, not the server, enforces the candidate's timeout, by killing the child's process group
(the child called ``setsid``, so its group id is its pid): a hung candidate cannot delay that, and
a hung server is itself killed and replaced. A server that died for any reason is restarted on the
next job.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from kernel_scientist.evaluator._wire import ChildRequest, Finished, Job, Ready, Started
from kernel_scientist.evaluator.sandbox._framing import ChannelClosed, FrameTimeout, read_frame, write_frame

_SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH|COOKIE", re.IGNORECASE)
_DROP_PREFIXES = ("KS_", "ANTHROPIC", "OPENAI", "AWS_", "GOOGLE_", "AZURE_", "HF_", "GITHUB_", "SSH_")
_STARTUP_S = 120.0  # preloading torch + triton takes ~2 s, far longer on a loaded 2-core box
_KILL_GRACE_S = 10.0


class SandboxError(Exception):
    """The sandbox itself failed (not the candidate): the server died or would not start."""


def scrubbed_env() -> dict[str, str]:
    """The server's environment: ours minus anything that looks like a credential or points at
    the campaign's database, plus the interpreter switch and single-threaded math libraries."""
    env = {
        k: v for k, v in os.environ.items() if not _SECRET_NAME.search(k) and not k.upper().startswith(_DROP_PREFIXES)
    }
    # The folder that holds the kernel_scientist package as this process imported it (a checkout,
    # site-packages, or a laid-out tree of links): not a resolved path, which for a tree of links
    # would name the checkout, whose kernel_scientist/ lacks the subpackages and shadows the tree.
    spec = importlib.util.find_spec("kernel_scientist")  # imported already: its spec, no import
    repo_root = str(Path(spec.origin).parent.parent) if spec and spec.origin else ""
    # Our packages first; keep a path the user set up for carried dependencies (e.g. wheels).
    path = os.pathsep.join(p for p in (repo_root, os.environ.get("PYTHONPATH", "")) if p)
    env.update(
        TRITON_INTERPRET="1",
        OMP_NUM_THREADS="1",
        MKL_NUM_THREADS="1",
        PYTHONPATH=path,
        PYTHONDONTWRITEBYTECODE="1",
        PYTHONHASHSEED="0",
    )
    return env


def last_output(output: str) -> str:
    """The tail of a failure's reason: the candidate's last non-blank line of output ("" when it
    printed nothing). What a crashed candidate said last is usually why it crashed."""
    lines = [ln.strip() for ln in output.strip().splitlines() if ln.strip()]
    return f"; last output: {lines[-1][:200]}" if lines else ""


class JobOutcome:
    """What the parent learned about one job: the server's report, or that it timed out."""

    def __init__(self, finished: Finished | None, timed_out: bool, wall_s: float, note: str = ""):
        self.finished = finished
        self.timed_out = timed_out
        self.wall_s = wall_s
        self.note = note


class ForkServer:
    def __init__(self) -> None:
        self._proc: subprocess.Popen[bytes] | None = None
        self._cwd: str | None = None  # made on start, removed on close
        self._ready = False  # its Ready frame was read: it takes jobs

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def launch(self) -> None:
        """Start the server's process and return at once: its preload (seconds) overlaps whatever
        the caller does next; ``start`` (or the first ``run``) then waits for it to be ready."""
        if self.running:
            return
        self.stop()
        if self._cwd is None or not os.path.isdir(self._cwd):
            self._cwd = tempfile.mkdtemp(prefix="ks-server-")
        with self._log().open("ab") as err:  # the child keeps its own copy of the descriptor
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "kernel_scientist.evaluator.sandbox._server"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=err,
                cwd=self._cwd,
                env=scrubbed_env(),
                start_new_session=True,
                close_fds=True,
                bufsize=0,
            )

    def _log(self) -> Path:
        assert self._cwd is not None  # made by launch
        return Path(self._cwd) / "server.log"

    def start(self) -> None:
        """Launch the server if it is not running, and wait until it is ready for jobs."""
        if self.running and self._ready:
            return
        self.launch()
        assert self._proc is not None and self._proc.stdout is not None  # launch made them
        try:
            frame = read_frame(self._proc.stdout.fileno(), time.monotonic() + _STARTUP_S)
        except (FrameTimeout, ChannelClosed):
            log = self._log()
            tail = log.read_text(errors="replace")[-500:] if log.exists() else ""
            self.stop()
            raise SandboxError(f"the fork server did not start within {_STARTUP_S:.0f} s: {tail.strip()}") from None
        if not isinstance(frame, Ready):
            self.stop()
            raise SandboxError(f"the fork server sent {type(frame).__name__} instead of Ready")
        self._ready = True

    def stop(self) -> None:
        proc, self._proc, self._ready = self._proc, None, False
        if proc is None:
            return
        try:
            if proc.stdin is not None:
                proc.stdin.close()
            proc.wait(timeout=3)
        except (subprocess.TimeoutExpired, OSError):
            pass
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()

    def close(self) -> None:
        """Stop the server and remove its working directory (and log)."""
        self.stop()
        if self._cwd is not None:
            shutil.rmtree(self._cwd, ignore_errors=True)
            self._cwd = None

    def run(self, request: ChildRequest, timeout_s: float, output_limit: int) -> JobOutcome:
        """Run one job; restarts a dead server first. Raises SandboxError only when the server
        fails in a way that says nothing about the candidate (it would not start)."""
        self.start()
        t0 = time.monotonic()
        proc = self._proc
        assert proc is not None and proc.stdout is not None and proc.stdin is not None  # start() made them
        out = proc.stdout.fileno()
        try:
            write_frame(proc.stdin.fileno(), Job(request=request, output_limit=output_limit))
            started = read_frame(out, time.monotonic() + 30.0)
            if not isinstance(started, Started):
                raise ChannelClosed()
        except (OSError, FrameTimeout, ChannelClosed):
            self.stop()
            return JobOutcome(
                None, False, time.monotonic() - t0, "the sandbox server died before the candidate started"
            )
        pid = started.pid
        timed_out = False
        try:
            finished = read_frame(out, t0 + timeout_s)
        except FrameTimeout:
            timed_out = True
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            try:
                finished = read_frame(out, time.monotonic() + _KILL_GRACE_S)
            except (FrameTimeout, ChannelClosed):
                self.stop()
                finished = None
        except ChannelClosed:
            # The candidate killed the server (it can see its parent pid) or the server crashed.
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.stop()
            return JobOutcome(None, False, time.monotonic() - t0, "the sandbox server died during the run")
        return JobOutcome(finished if isinstance(finished, Finished) else None, timed_out, time.monotonic() - t0)
