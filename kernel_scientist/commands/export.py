"""`export`: write a campaign's kernel as a submission file for the public leaderboard."""

from __future__ import annotations

from pathlib import Path

HEADER = ("#!POPCORN leaderboard amd-fp8-mm", "#!POPCORN gpus MI300")


def add(sub) -> None:
    ex = sub.add_parser("export", help="write a kernel as a leaderboard submission file")
    ex.add_argument("--db", type=Path, required=True)
    ex.add_argument("--kernel", type=int, help="kernel id (default: the best that passed)")
    ex.add_argument("--out", type=Path, required=True)
    ex.set_defaults(handler=_export)


def with_header(source: str, leaderboard: str) -> str:
    """Put the #!POPCORN routing lines first, replacing any the kernel already had."""
    body = [line for line in source.splitlines() if not line.startswith("#!POPCORN")]
    header = [f"#!POPCORN leaderboard {leaderboard}", HEADER[1]]
    return "\n".join(header + body) + "\n"


def _export(args) -> int:
    from blackboard import open_existing
    from kernel_scientist import status
    from kernel_scientist.cli import UsageError

    with open_existing(args.db) as board:
        kernel_id = args.kernel
        if kernel_id is None:
            best = status.status(board).best
            if best is None:
                raise UsageError(f"{args.db}: no kernel has passed an evaluation yet; name one with --kernel")
            kernel_id = best.kernel_id
        try:
            kernel = board.kernel(kernel_id)
        except KeyError as exc:
            raise UsageError(f"{args.db}: no kernel {kernel_id}") from exc
        task = board.campaign().task
    args.out.write_text(with_header(kernel.source, task))
    print(f"kernel {kernel_id} ({kernel.state}) -> {args.out}")
    return 0
