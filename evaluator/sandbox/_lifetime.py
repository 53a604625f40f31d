"""Tie a sandbox process's life to its parent's: no candidate outlives the evaluator that started it.

On Linux ``prctl(PR_SET_PDEATHSIG, SIGKILL)`` has the kernel kill this process when its parent
dies, however the parent died (``kill -9`` and ``timeout`` included). Without it a fork server, or
a candidate spinning in an infinite loop, would be reparented and run on for ever. Elsewhere this
is a no-op: the parent's own clean-up is then the only guard.
"""

from __future__ import annotations

import os
import signal
import sys

_PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    if not sys.platform.startswith("linux"):
        return
    parent = os.getppid()
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0) != 0:
            return
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # the parent died before the request took effect
        os.kill(os.getpid(), signal.SIGKILL)
