"""`export`: write a campaign's kernel as a submission file for the public leaderboard."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ._args import Subparsers, UsageError, positive_int, version


def add(sub: Subparsers) -> None:
    ex = sub.add_parser("export", help="write a kernel as a leaderboard submission file")
    ex.add_argument("--db", type=Path, required=True)
    ex.add_argument("--kernel", type=positive_int, help="kernel id (default: the best that passed)")
    ex.add_argument("--out", type=Path, required=True, help="the file to write, e.g. submission.py")
    ex.set_defaults(handler=_export)


def _export(args: argparse.Namespace) -> int:
    from kernel_scientist import export, status
    from kernel_scientist.blackboard import open_existing

    if args.out.is_dir():
        raise UsageError(f"--out {args.out}: is a folder; name the file to write, e.g. {args.out / 'submission.py'}")
    if not args.out.parent.is_dir():
        raise UsageError(f"--out {args.out}: no folder {args.out.parent} to write it in")
    with open_existing(args.db) as board:
        kernel_id = args.kernel
        if kernel_id is None:
            best = status.status(board).best
            if best is None:
                raise UsageError(f"{args.db}: no kernel has passed an evaluation yet; name one with --kernel")
            kernel_id = best.kernel_id
        try:
            result = export.export(board, kernel_id, args.db.name, version())
        except KeyError:
            raise UsageError(f"{args.db}: no kernel {kernel_id} (kernels 1 to {len(board.kernels())})") from None
    args.out.write_text(result.text)
    print(f"kernel {kernel_id} -> {args.out}  (#!POPCORN gpus {result.gpu})")
    if result.note:
        print(f"kernel-scientist: note: {result.note}", file=sys.stderr)
    return 0
