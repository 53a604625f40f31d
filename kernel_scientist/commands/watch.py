"""`watch`: a live dashboard of a campaign, following it from another process."""

from __future__ import annotations

import argparse
from pathlib import Path

from ._args import Subparsers, UsageError, add_force, check_output, positive_float, positive_int


def add(sub: Subparsers) -> None:
    w = sub.add_parser("watch", help="live dashboard of a campaign (agents, queue, limits, progress)")
    w.add_argument("--db", type=Path, required=True)
    w.add_argument("--once", action="store_true", help="draw one frame and exit")
    w.add_argument(
        "--interval",
        type=positive_float,
        default=0.5,
        metavar="SECONDS",
        help="how often to check the file for changes (default 0.5)",
    )
    w.add_argument(
        "--exit-when-done", action="store_true", help="stop following once the campaign's closing message is drawn"
    )
    w.add_argument("--messages", type=positive_int, default=12, help="how many latest messages to show")
    w.add_argument(
        "--svg", type=Path, metavar="FILE", help="with --once: also save the frame as SVG (in a folder that exists)"
    )
    add_force(w, "an existing --svg file")
    w.add_argument("--width", type=positive_int, help="terminal width to draw for (default: the terminal's)")
    w.set_defaults(handler=_watch, on_interrupt=_interrupted)


def _watch(args: argparse.Namespace) -> int:
    from rich.console import Console

    from kernel_scientist import dashboard

    if args.svg and not args.once:
        raise UsageError("--svg needs --once (it saves one frame)")
    if args.svg:
        check_output("--svg", args.svg, args.force)
    console = Console(width=args.width, record=bool(args.svg))
    dashboard.watch(  # without --once it ends with Ctrl-C (_interrupted) or --exit-when-done
        args.db,
        once=args.once,
        poll_s=args.interval,
        console=console,
        stop_when_over=args.exit_when_done,
        messages=args.messages,
    )
    if args.svg:
        console.save_svg(str(args.svg), title="kernel-scientist watch")
    return 0


def _interrupted(args: argparse.Namespace) -> str:
    if args.once:
        return "interrupted"
    return f"interrupted; stopped watching {args.db} (a campaign writing it goes on in its own process)"
