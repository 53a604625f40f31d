"""`kernel-scientist`: the command line.

Each command lives in ``commands/<name>.py`` with ``add(subparsers)``, which registers its parser
and sets ``handler``. Usage errors (a broken scenario, an unknown option, a missing file) print one
line and exit with code 2, never a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

EXIT_USAGE = 2
COMMANDS = ("run", "status", "logs", "watch", "report", "sweep", "evaluate", "export")  # modules under kernel_scientist/commands/


class UsageError(Exception):
    """Bad input from the user; the message is one line saying what is wrong."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # argparse's default prints the whole usage block
        self.exit(EXIT_USAGE, f"kernel-scientist: {message} (see --help)\n")


def parser() -> argparse.ArgumentParser:
    p = _Parser(prog="kernel-scientist", description="Agents that optimise GPU kernels through a "
                "scarce, rate-limited evaluator.")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for name in COMMANDS:
        importlib.import_module(f"kernel_scientist.commands.{name}").add(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    from blackboard import BlackboardError, ScenarioError
    from evaluator import TaskError

    args = parser().parse_args(argv)
    try:
        return args.handler(args)
    except (UsageError, ScenarioError, BlackboardError, TaskError) as exc:
        print(f"kernel-scientist: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:  # `kernel-scientist logs ... | head`: the reader has all it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        print("kernel-scientist: interrupted; a campaign continues with `kernel-scientist resume --db ...`",
              file=sys.stderr)
        return 130


if __name__ == "__main__":
    # Run the imported module's main, not __main__'s: commands raise kernel_scientist.cli.UsageError,
    # which under `python -m` would otherwise be a different class from this file's copy.
    sys.exit(importlib.import_module("kernel_scientist.cli").main())
