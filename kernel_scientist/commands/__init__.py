"""The command line's parser: one module per command, each with ``add(subparsers)``, which
registers its parser and sets ``handler``. ``kernel_scientist.cli.main`` runs the handler and turns
the errors a user can cause into one line and an exit code."""

from __future__ import annotations

import argparse

from . import evaluate, export, logs, lower, report, run, status, sweep, watch
from ._args import EXIT_USAGE, Parser, UsageError, natural_int, positive_float, positive_int, version

COMMANDS = (run, status, logs, watch, report, sweep, evaluate, lower, export)  # in the order --help lists them

__all__ = ["COMMANDS", "EXIT_USAGE", "UsageError", "natural_int", "parser", "positive_float", "positive_int", "version"]


def parser() -> argparse.ArgumentParser:
    p = Parser(
        prog="kernel-scientist",
        description="Agents that optimise GPU kernels through a scarce, rate-limited evaluator.",
    )
    p.add_argument("--version", action="version", version=f"kernel-scientist {version()}")
    sub = p.add_subparsers(dest="command", required=True, parser_class=Parser)
    for command in COMMANDS:
        command.add(sub)
    return p
