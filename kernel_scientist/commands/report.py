"""`report`: an HTML page with PNG plots of a campaign, written from its blackboard file."""

from __future__ import annotations

import argparse
from pathlib import Path

from ._args import Subparsers, UsageError, add_force, check_output


def add(sub: Subparsers) -> None:
    r = sub.add_parser("report", help="write an HTML report with plots of a campaign")
    r.add_argument("--db", type=Path, required=True)
    r.add_argument(
        "--out",
        type=Path,
        required=True,
        help="folder for index.html and the PNG plots, created if missing (its parent folder must exist)",
    )
    add_force(r, "a report's files already in --out")
    r.set_defaults(handler=_report)


def _report(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from kernel_scientist import report
    from kernel_scientist.blackboard import open_existing

    check_output("--out", args.out, args.force, folder=True)
    there = [args.out / name for name in report.FILES if (args.out / name).exists()]
    if there and not args.force:
        more = f" (and {len(there) - 1} more of a report's files)" if len(there) > 1 else ""
        them = "them" if more else "it"
        raise UsageError(
            f"--out {args.out}: {there[0]} already exists{more}; pass --force to replace {them}, or another --out"
        )
    console = Console(stderr=True)
    with (
        open_existing(args.db) as board,
        Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            TextColumn("{task.completed}/{task.total}"),
            TimeElapsedColumn(),
            console=console,
            transient=True,
            disable=not console.is_terminal,
        ) as bar,
    ):
        task = bar.add_task("report", total=report.STEPS + 1)

        def step(name: str) -> None:
            bar.update(task, description=f"plotting {name}", advance=1)

        built = report.build(board, args.out, step)
        page = report.write_html(built)
        bar.update(task, advance=1)
    print(f"report: {page}  ({len(built.images())} plots)")
    print(f"open:   file://{page.resolve()}")
    return 0
