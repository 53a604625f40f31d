"""The preloaded fork server: ``python -m kernel_scientist.evaluator.sandbox._server``.

Started once per backend with a scrubbed environment and ``TRITON_INTERPRET=1``. It imports torch,
triton and numpy once (about 2 s), then forks one child per job, so a candidate starts in about
10 ms. The server itself never runs tensor compute: forking a process whose thread pools are
running is unsafe (only the forking thread survives in the child).

Protocol (``_framing``): the parent writes ``Job``; the server answers ``Started(pid)`` at once and
``Finished`` when the child is gone. The child's stdout/stderr go into a pipe the server drains
while it waits, keeping the first ``output_limit`` bytes and counting the rest, so a flood of
output can neither fill a disk nor block the child. When the child exits, the server kills its
process group (anything it left behind) before answering. The parent enforces the timeout by
killing that group itself; the server only reports what happened.
"""

from __future__ import annotations

import os
import select
import shutil
import signal
import sys
import tempfile
import time

from kernel_scientist.evaluator._wire import Finished, Job, Ready, Started
from kernel_scientist.evaluator.sandbox._framing import ChannelClosed, read_frame, write_frame
from kernel_scientist.evaluator.sandbox._lifetime import die_with_parent

_MAX_RESULT = 64 * 2**20


def _collect(pid: int, out_r: int, limit: int) -> tuple[int, bytes, int]:
    """Drain the child's output until it exits; returns (wait status, kept bytes, dropped count)."""
    kept = bytearray()
    dropped = 0
    pidfd = os.pidfd_open(pid)
    open_fds = [out_r, pidfd]
    status = None
    while status is None:
        ready, _, _ = select.select(open_fds, [], [])
        if out_r in ready:
            chunk = os.read(out_r, 1 << 16)
            if not chunk:
                open_fds.remove(out_r)
            else:
                room = max(0, limit - len(kept))
                kept += chunk[:room]
                dropped += len(chunk) - min(room, len(chunk))
        if pidfd in ready:
            _, status = os.waitpid(pid, 0)
    os.close(pidfd)
    try:
        os.killpg(pid, signal.SIGKILL)  # whatever the candidate spawned dies with it
    except ProcessLookupError:
        pass
    end = time.monotonic() + 0.5
    while out_r in open_fds and time.monotonic() < end:
        if not select.select([out_r], [], [], max(0.0, end - time.monotonic()))[0]:
            break
        chunk = os.read(out_r, 1 << 16)
        if not chunk:
            break
        room = max(0, limit - len(kept))
        kept += chunk[:room]
        dropped += len(chunk) - min(room, len(chunk))
    os.close(out_r)
    return status, bytes(kept), dropped


def serve() -> None:
    die_with_parent()  # the backend's process: if it is killed, so is this server
    frame_in, frame_out = os.dup(0), os.dup(1)
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(2, 1)  # a stray print in the server must not corrupt the frame channel
    from kernel_scientist.evaluator.sandbox import _bounds, _interpreter
    from kernel_scientist.evaluator.sandbox._child import RESULT_FILE, child_main, preload, preload_reference

    preload()
    _interpreter.remove_repeated_work()  # work the interpreter repeats or drops, removed before any fork
    _bounds.confine_launches()  # a kernel touches only the tensors its launch was given
    root = tempfile.mkdtemp(prefix="ks-sandbox-", dir=os.getcwd())  # inside the parent's dir: it removes both
    write_frame(frame_out, Ready(pid=os.getpid()))
    try:
        while True:
            try:
                job = read_frame(frame_in)
            except ChannelClosed:
                return
            if not isinstance(job, Job):
                continue
            preload_reference(job.request.modules)  # once per task, before this job's fork
            workdir = tempfile.mkdtemp(dir=root)
            out_r, out_w = os.pipe()
            pid = os.fork()
            if pid == 0:
                die_with_parent()  # and a candidate dies with the server
                os.close(out_r)
                os.close(frame_in)
                os.close(frame_out)
                child_main(job.request, workdir, out_w, job.request.mem_limit_mb)
            os.close(out_w)
            write_frame(frame_out, Started(pid=pid))
            status, output, dropped = _collect(pid, out_r, job.output_limit)
            try:
                with open(os.path.join(workdir, RESULT_FILE), "rb") as f:
                    data = f.read(_MAX_RESULT + 1)  # the candidate could have written it: cap it
                result: bytes | None = data if len(data) <= _MAX_RESULT else None
            except OSError:
                result = None
            shutil.rmtree(workdir, ignore_errors=True)
            write_frame(
                frame_out,
                Finished(
                    pid=pid,
                    exit_code=os.WEXITSTATUS(status) if os.WIFEXITED(status) else None,
                    signal=os.WTERMSIG(status) if os.WIFSIGNALED(status) else None,
                    result=result,
                    output=output.decode("utf-8", "replace"),
                    output_dropped=dropped,
                ),
            )
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    try:
        serve()
    except (BrokenPipeError, KeyboardInterrupt):
        sys.exit(0)
