"""`kernel-scientist`: the command line.

Each command lives in ``commands/<name>.py`` with ``add(subparsers)``, which registers its parser
and sets ``handler``. Usage errors (a broken scenario, an unknown option, a missing or foreign
file, a backend this machine cannot run) print one line and exit with code 2, never a traceback;
Ctrl-C prints one line (for a campaign: where it stopped and how to continue) and exits with 130,
the shell's code for SIGINT; a campaign whose Ray cluster went away does the same with exit code 3.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

EXIT_USAGE = 2
EXIT_STOPPED = 3  # the backend went away mid-campaign (a lost Ray cluster); `resume` continues
EXIT_INTERRUPTED = 130  # 128 + SIGINT, what a shell reports for Ctrl-C
COMMANDS = ("run", "status", "logs", "watch", "report", "sweep", "evaluate", "export")  # modules under kernel_scientist/commands/


class UsageError(Exception):
    """Bad input from the user; the message is one line saying what is wrong."""


def _number(kind, low: float, strict: bool):
    """An argparse type: a finite ``kind`` (int or float) above ``low`` (``strict``) or at least it."""
    words = {int: "a whole number", float: "a number"}[kind]
    bound = f"more than {low:g}" if strict else f"at least {low:g}"

    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {words}") from None
        if value != value or value in (float("inf"), float("-inf")) or value < low or (strict and value == low):
            raise argparse.ArgumentTypeError(f"{text!r}: must be {words}, {bound}")
        return value

    parse.__name__ = f"{kind.__name__} {bound}"  # what argparse names in its own messages
    return parse


positive_int = _number(int, 1, strict=False)
natural_int = _number(int, 0, strict=False)
positive_float = _number(float, 0, strict=True)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # argparse's default prints the whole usage block
        self.exit(EXIT_USAGE, f"kernel-scientist: {message} (see --help)\n")


def parser() -> argparse.ArgumentParser:
    p = _Parser(prog="kernel-scientist", description="Agents that optimise GPU kernels through a "
                "scarce, rate-limited evaluator.")
    p.add_argument("--version", action="version", version=f"kernel-scientist {_version()}")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for name in COMMANDS:
        importlib.import_module(f"kernel_scientist.commands.{name}").add(sub)
    return p


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("kernel-scientist")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown (not installed)"


def main(argv: list[str] | None = None) -> int:
    try:
        args = parser().parse_args(argv)
    except KeyboardInterrupt:  # Ctrl-C while the commands import
        return _interrupted("interrupted")
    try:
        return _handle(args)
    except BaseException as exc:
        if isinstance(exc, KeyboardInterrupt) or (
                isinstance(exc, BaseExceptionGroup) and exc.subgroup(KeyboardInterrupt) is not None):
            return _interrupted("interrupted")
        raise


def _handle(args) -> int:
    from blackboard import BlackboardError, ScenarioError
    from evaluator import ClusterError, TaskError
    from kernel_scientist.backends import BackendUnavailable
    from kernel_scientist.campaign import Interrupted, Stopped

    try:
        return args.handler(args)
    except (UsageError, ScenarioError, BlackboardError, TaskError, BackendUnavailable, ClusterError) as exc:
        print(f"kernel-scientist: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except Interrupted as exc:
        return _interrupted(str(exc))
    except Stopped as exc:
        print(f"kernel-scientist: {exc}", file=sys.stderr)
        return EXIT_STOPPED
    except BrokenPipeError:  # `kernel-scientist logs ... | head`: the reader has all it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except OSError as exc:  # a path the user gave that cannot be read or written
        if exc.filename is None:
            raise
        print(f"kernel-scientist: {exc.filename}: {exc.strerror}", file=sys.stderr)
        return EXIT_USAGE


def _interrupted(text: str) -> int:
    print(f"kernel-scientist: {text}", file=sys.stderr)
    return EXIT_INTERRUPTED


if __name__ == "__main__":
    # Run the imported module's main, not __main__'s: commands raise kernel_scientist.cli.UsageError,
    # which under `python -m` would otherwise be a different class from this file's copy.
    sys.exit(importlib.import_module("kernel_scientist.cli").main())
