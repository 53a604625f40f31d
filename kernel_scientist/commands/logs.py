"""`logs`: replay or follow the agents' conversation from a blackboard file."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from ._args import Subparsers, UsageError, positive_int

if TYPE_CHECKING:
    from kernel_scientist.blackboard import Blackboard


def add(sub: Subparsers) -> None:
    lg = sub.add_parser("logs", help="replay or follow the agents' conversation")
    lg.add_argument("--db", type=Path, required=True)
    lg.add_argument("--agent", help="only this agent (e.g. critic, engineer-1)")
    lg.add_argument("--follow", "-f", action="store_true", help="keep printing as the campaign writes")
    lg.add_argument(
        "--kind",
        help="only this kind of message (plan, choice, kernel, review, queue, evaluation, verdict, finding, ...)",
    )
    lg.add_argument("--kernel", type=positive_int, metavar="ID", help="only messages about this kernel")
    lg.add_argument("--hypothesis", metavar="ID", help="only messages about this hypothesis (H12 or 12)")
    lg.add_argument("--grep", metavar="TEXT", help="only messages containing TEXT (case-insensitive)")
    lg.add_argument("--json", action="store_true", help="one JSON object per line (for jq)")
    lg.add_argument(
        "--thread",
        nargs="?",
        const=True,
        metavar="H<ID>",
        help="one hypothesis from proposal to verdict: --thread H12 (or --hypothesis 12 --thread)",
    )
    lg.set_defaults(handler=_logs, on_interrupt=_interrupted)


def _logs(args: argparse.Namespace) -> int:
    import sys

    import msgspec

    from kernel_scientist import conversation as cv
    from kernel_scientist.blackboard import open_existing

    try:
        hyp = cv.parse_hypothesis_ref(args.hypothesis) if args.hypothesis is not None else None
        if isinstance(args.thread, str):
            hyp = cv.parse_hypothesis_ref(args.thread)
    except ValueError as exc:
        raise UsageError(f"--hypothesis/--thread {exc}") from None
    with open_existing(args.db) as board:
        if args.thread:
            if hyp is None:
                raise UsageError("--thread needs a hypothesis: --thread H12 or --hypothesis 12 --thread")
            try:
                th = cv.thread(board, hyp)
            except KeyError:
                raise UsageError(f"{args.db}: no hypothesis H{hyp} (see `logs --kind plan`)") from None
            if args.json:
                for stage, msg in th.messages:
                    line = msgspec.json.encode({"stage": stage, **msgspec.structs.asdict(msg)})
                    sys.stdout.write(line.decode() + "\n")
            else:
                print(cv.render_thread(th, sys.stdout.isatty()))
            return 0
        _check_filters(board, args, hyp)
        flt = cv.Filter(agent=args.agent, kind=args.kind, kernel_id=args.kernel, hypothesis_id=hyp, grep=args.grep)
        cv.show(board, flt, follow_=args.follow, as_json=args.json)  # --follow ends with Ctrl-C (_interrupted)
    return 0


def _interrupted(args: argparse.Namespace) -> str:
    if not args.follow:
        return "interrupted"
    return f"interrupted; stopped following {args.db} (a campaign writing it goes on in its own process)"


def _check_filters(board: Blackboard, args: argparse.Namespace, hypothesis_id: int | None) -> None:
    """A filter that can never match is a typo: say so, and name what would match."""
    import typing

    from kernel_scientist.blackboard.records import MessageKind

    kinds = typing.get_args(MessageKind)
    if args.kind is not None and args.kind not in kinds:
        raise UsageError(f"--kind {args.kind}: no such kind of message; kinds: {', '.join(kinds)}")
    speakers = board.speakers()
    if args.agent is not None and args.agent not in speakers and not args.follow:
        raise UsageError(f"--agent {args.agent}: no such agent in this campaign; agents: {', '.join(speakers)}")
    count = len(board.kernels())
    if args.kernel is not None and not 1 <= args.kernel <= count and not args.follow:
        raise UsageError(f"--kernel {args.kernel}: no such kernel in this campaign (kernels 1 to {count})")
    hyps = len(board.hypotheses())
    if hypothesis_id is not None and not 1 <= hypothesis_id <= hyps and not args.follow:
        raise UsageError(
            f"--hypothesis H{hypothesis_id}: no such hypothesis in this campaign "
            f"({f'H1 to H{hyps}' if hyps else 'none yet'})"
        )
