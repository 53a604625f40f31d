"""`export`: write a campaign's kernel as a submission file for the public leaderboard."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ._args import Subparsers, UsageError, add_force, check_output, positive_int, version


def add(sub: Subparsers) -> None:
    from kernel_scientist.export import LEADERBOARD_GPUS

    ex = sub.add_parser("export", help="write a kernel as a leaderboard submission file")
    ex.add_argument("--db", type=Path, required=True)
    ex.add_argument("--kernel", type=positive_int, help="kernel id (default: the best that passed)")
    ex.add_argument("--out", type=Path, required=True, help="the file to write, e.g. submission.py")
    add_force(ex, "an existing --out file")
    ex.add_argument(
        "--gpus",
        choices=[name for name, _ in LEADERBOARD_GPUS],
        help="write this `#!POPCORN gpus` line (default: the GPU that measured the score; none for a simulated "
        "score); for a GPU not listed, add the line yourself",
    )
    ex.set_defaults(handler=_export)


def _export(args: argparse.Namespace) -> int:
    from kernel_scientist import export, status
    from kernel_scientist.blackboard import open_existing

    if args.out.resolve() == args.db.resolve():
        raise UsageError(f"--out {args.out}: is the blackboard --db reads; name another file")
    with open_existing(args.db) as board:
        kernel_id = args.kernel
        if kernel_id is None:
            best = status.status(board).best
            if best is None:
                raise UsageError(f"{args.db}: no kernel has passed an evaluation yet; name one with --kernel")
            kernel_id = best.kernel_id
        try:
            result = export.export(board, kernel_id, args.db.name, version(), args.gpus)
        except KeyError:
            raise UsageError(f"{args.db}: no kernel {kernel_id} (kernels 1 to {len(board.kernels())})") from None
    check_output("--out", args.out, args.force)  # after the blackboard's and the kernel's own errors
    _write(args.out, result.text, args.force)
    routed = f"#!POPCORN gpus {result.gpu}" if result.gpu else "simulated score: no #!POPCORN gpus line; see --gpus"
    print(f"kernel {kernel_id} -> {args.out}  ({routed})")
    if result.note:
        print(f"kernel-scientist: note: {result.note}", file=sys.stderr)
    return 0


def _write(out: Path, text: str, force: bool) -> None:
    """Write ``out``; an existing file (a link included) only with ``force``. Without it the file is
    created exclusively, so one that appears after ``check_output`` looked is refused too."""
    try:
        with out.open("w" if force else "x") as f:
            f.write(text)
    except FileExistsError:
        raise UsageError(f"--out {out}: already exists; pass --force to replace it, or another --out") from None
    except OSError as exc:
        raise UsageError(f"--out {out}: cannot write ({exc.strerror})") from None
