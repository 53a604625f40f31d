"""`kernel-scientist`: the command line.

The parser lives in the ``commands`` package (one module per command). Usage errors (a broken
scenario, an unknown option, a missing or foreign file, a backend this machine cannot run) print
one line and exit with code 2, never a traceback; Ctrl-C prints one line (for a campaign: where it
stopped and how to continue) and exits with 130, the shell's code for SIGINT; a campaign whose Ray
cluster went away does the same with exit code 3.

SIGTERM (``kill``, a job scheduler's time limit, a container stopping) stops a command the way
Ctrl-C does, through the same path, so that what is written stays as consistent and the campaign's
line still says how to continue; the line begins "terminated by SIGTERM" instead of "interrupted"
and the exit code is 143 (128 + SIGTERM). Without this, SIGTERM's default ended the process
mid-write with no line at all.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import threading
import types
from collections.abc import Callable, Iterator

from kernel_scientist.commands import EXIT_USAGE, UsageError, parser

EXIT_STOPPED = 3  # the backend went away mid-campaign (a lost Ray cluster); `resume` continues
EXIT_INTERRUPTED = 130  # 128 + SIGINT, what a shell reports for Ctrl-C
EXIT_TERMINATED = 143  # 128 + SIGTERM, what a shell reports for `kill`


class _Termination:
    """SIGTERM taken as Ctrl-C (module note): the handler hands the signal to whatever handles
    SIGINT at that moment, trio's inside a campaign's event loop (which raises KeyboardInterrupt
    only where that is safe, else delivers it to the main task) and Python's default elsewhere,
    and remembers that it came, for the line and the exit code."""

    def __init__(self) -> None:
        self.received = False

    def __call__(self, signum: int, frame: types.FrameType | None) -> None:
        self.received = True
        handler = signal.getsignal(signal.SIGINT)
        if callable(handler):
            handler(signal.SIGINT, frame)
        else:  # SIGINT ignored (a background job of a script): no handler to borrow, stop anyway
            raise KeyboardInterrupt

    @contextlib.contextmanager
    def installed(self) -> Iterator[None]:
        """Handle SIGTERM while the command runs (only the main thread may set handlers: a
        ``main`` called from another thread keeps the default)."""
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        previous = signal.signal(signal.SIGTERM, self)
        try:
            yield
        finally:
            signal.signal(signal.SIGTERM, previous)

    def line(self, text: str) -> tuple[str, int]:
        """The stop line and exit code: Ctrl-C's, or SIGTERM's with its first word changed."""
        if not self.received:
            return text, EXIT_INTERRUPTED
        return "terminated by SIGTERM" + text.removeprefix("interrupted"), EXIT_TERMINATED


def main(argv: list[str] | None = None) -> int:
    args: argparse.Namespace | None = None
    termination = _Termination()
    with termination.installed():
        try:
            args = parser().parse_args(argv)
            code = _handle(args, termination)
        except BaseException as exc:
            # Ctrl-C lands anywhere: in an import, in a command, while a campaign closes its file.
            # Each command that keeps something going names what stopped (``on_interrupt``).
            if not isinstance(exc, KeyboardInterrupt) and not (
                isinstance(exc, BaseExceptionGroup) and exc.subgroup(KeyboardInterrupt) is not None
            ):
                raise
            code = _interrupted(_interrupt_line(args), termination)
    if code in (EXIT_INTERRUPTED, EXIT_TERMINATED) and argv is None:  # the program itself (both entry points)
        # CPython remembers a KeyboardInterrupt that passed through code an extension ran with
        # PyRun_String and, at exit, kills itself with SIGINT instead of exiting with our code,
        # after our line (about one interrupt in twenty). Everything this command opened is
        # closed by now: leave with the code.
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError):  # a reader that has gone (`logs -f | head`)
                stream.flush()
        os._exit(code)
    return code


def _interrupt_line(args: argparse.Namespace | None) -> str:
    if args is None:  # still reading the command line: no command has begun
        return "interrupted while starting; nothing was written"
    line: Callable[[argparse.Namespace], str] | None = getattr(args, "on_interrupt", None)
    if line is None:
        return "interrupted"
    try:
        return line(args)
    except KeyboardInterrupt:  # a second Ctrl-C while the line was being worked out
        return "interrupted"


def _handle(args: argparse.Namespace, termination: _Termination) -> int:
    from kernel_scientist.blackboard import BlackboardError, ScenarioError
    from kernel_scientist.campaign import Interrupted, Stopped
    from kernel_scientist.evaluator import BackendUnavailable, ClusterError, TaskError

    handler: Callable[[argparse.Namespace], int] = args.handler  # set by each command's parser
    try:
        return handler(args)
    except (UsageError, ScenarioError, BlackboardError, TaskError, BackendUnavailable, ClusterError) as exc:
        print(f"kernel-scientist: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except Interrupted as exc:
        return _interrupted(str(exc), termination)
    except Stopped as exc:
        print(f"kernel-scientist: {exc}", file=sys.stderr)
        if "ray" in sys.modules:  # a driver of a lost cluster: Ray's exit handler would wait on the
            sys.stdout.flush()  # dead head until Ray's own 60 s deadline ended us with status 1;
            sys.stderr.flush()  # the blackboard and the log are closed by now
            os._exit(EXIT_STOPPED)
        return EXIT_STOPPED
    except BrokenPipeError:  # `kernel-scientist logs ... | head`: the reader has all it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except OSError as exc:  # a path the user gave that cannot be read or written
        if exc.filename is None:
            raise
        print(f"kernel-scientist: {exc.filename}: {exc.strerror}", file=sys.stderr)
        return EXIT_USAGE


def _interrupted(text: str, termination: _Termination) -> int:
    line, code = termination.line(text)
    print(f"kernel-scientist: {line}", file=sys.stderr)
    return code
