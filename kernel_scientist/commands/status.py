"""`status`: a campaign's leaderboard, as a table or one JSON object."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import msgspec

from ._args import Subparsers, positive_int


def add(sub: Subparsers) -> None:
    st = sub.add_parser("status", help="print a campaign's leaderboard")
    st.add_argument("--db", type=Path, required=True)
    st.add_argument("--json", action="store_true", help="one JSON object instead of the table")
    st.add_argument("--top", type=positive_int, default=10, help="how many kernels to list (default 10)")
    st.set_defaults(handler=_status)


def terminal_width() -> int | None:
    """The terminal's width (``COLUMNS`` wins), or None when stdout is a pipe or a file."""
    import shutil

    columns = shutil.get_terminal_size(fallback=(0, 0)).columns
    return columns or None


def _status(args: argparse.Namespace) -> int:
    from kernel_scientist import status
    from kernel_scientist.blackboard import open_existing

    with open_existing(args.db) as board:
        if args.json:
            sys.stdout.write(msgspec.json.encode(status.status(board, args.top)).decode() + "\n")
        else:
            print(status.render(board, args.top, terminal_width()))
    return 0
