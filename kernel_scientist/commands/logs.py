"""`logs`: replay or follow the agents' conversation from a blackboard file."""

from __future__ import annotations

from pathlib import Path


def add(sub) -> None:
    lg = sub.add_parser("logs", help="replay or follow the agents' conversation")
    lg.add_argument("--db", type=Path, required=True)
    lg.add_argument("--agent", help="only this agent (e.g. critic, engineer-1)")
    lg.add_argument("--follow", "-f", action="store_true", help="keep printing as the campaign writes")
    lg.set_defaults(handler=_logs)


def _logs(args) -> int:
    from blackboard import open_existing
    from kernel_scientist import logs

    with open_existing(args.db) as board:
        logs.replay(board, args.agent, args.follow)
    return 0
