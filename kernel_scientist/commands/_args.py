"""What every command shares: the parser class, the usage error, the number types of its options,
the version."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn, TypeAlias

EXIT_USAGE = 2


class Parser(argparse.ArgumentParser):
    """The command line's parser and every command's: a usage error is one line, not the usage block."""

    def error(self, message: str) -> NoReturn:  # argparse's default prints the whole usage block
        self.exit(EXIT_USAGE, f"kernel-scientist: {message} (see --help)\n")


# What each command's ``add`` registers its parser with (argparse's class is generic only to a checker).
Subparsers: TypeAlias = "argparse._SubParsersAction[Parser]"


class UsageError(Exception):
    """Bad input from the user; the message is one line saying what is wrong (exit code 2)."""


def _number(kind: type[int] | type[float], low: float, strict: bool) -> Callable[[str], float]:
    """An argparse type: a finite ``kind`` (int or float) above ``low`` (``strict``) or at least it."""
    words = {int: "a whole number", float: "a number"}[kind]
    bound = f"more than {low:g}" if strict else f"at least {low:g}"

    def parse(text: str) -> float:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {words}") from None
        if value != value or value in (float("inf"), float("-inf")) or value < low or (strict and value == low):
            raise argparse.ArgumentTypeError(f"{text!r}: must be {words}, {bound}")
        return value

    parse.__name__ = f"{kind.__name__} {bound}"  # what argparse names in its own messages
    return parse


def add_overrides(parser: argparse.ArgumentParser, help: str) -> None:
    """``--set KEY=VALUE`` (repeatable) into ``args.overrides``: scenario keys changed for this run."""
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE", help=help)


def check_output(option: str, path: Path, force: bool, folder: bool = False) -> None:
    """An output the user named (``folder``: a folder the command fills): its parent folder must
    exist (nothing is created where the user did not ask), and an existing file is replaced only
    with --force. Raises UsageError naming the path and what to do instead."""
    if folder and path.exists() and not path.is_dir():
        raise UsageError(f"{option} {path}: exists and is not a folder; name a folder to write into")
    if not folder and path.is_dir():
        raise UsageError(f"{option} {path}: is a folder; name the file to write")
    if not path.parent.is_dir():
        raise UsageError(
            f"{option} {path}: no folder {path.parent} to write it in; "
            f"create it first (mkdir -p {path.parent}) or pass another {option}"
        )
    if not folder and path.exists() and not force:
        raise UsageError(f"{option} {path}: already exists; pass --force to replace it, or another {option}")


def add_force(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument("--force", action="store_true", help=f"replace {what} (default: refuse, naming it)")


positive_int = _number(int, 1, strict=False)
natural_int = _number(int, 0, strict=False)
positive_float = _number(float, 0, strict=True)


def version() -> str:
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        return installed("kernel-scientist")
    except PackageNotFoundError:  # a source tree never installed (scripts/installed_layout.py's links)
        return f"{_source_version()} (source tree, not installed)"


def _source_version() -> str:
    """The version in the pyproject.toml of the checkout this file really lives in (links resolved)."""
    import tomllib

    try:
        with open(Path(__file__).resolve().parents[2] / "pyproject.toml", "rb") as f:
            return str(tomllib.load(f)["project"]["version"])
    except (OSError, KeyError, tomllib.TOMLDecodeError):
        return "unknown"
