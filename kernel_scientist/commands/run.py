"""`run` and `resume`: start a campaign from a scenario, or continue one from its blackboard."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from ._args import Subparsers, add_overrides

if TYPE_CHECKING:
    from kernel_scientist.blackboard import Message, Scenario
    from kernel_scientist.campaign import Outcome


class _Closable(Protocol):
    """What a listener holds open until the campaign ends (the JSONL file, a live view)."""

    def close(self) -> None: ...


def add(sub: Subparsers) -> None:
    run = sub.add_parser(
        "run",
        help="start a campaign from a scenario file",
        description="Start a campaign from a scenario file; Ctrl-C stops it with one line saying how to resume it.",
    )
    run.add_argument("scenario", type=Path, help="the scenario file (TOML), e.g. scenarios/smoke.toml")
    run.add_argument(
        "--db",
        type=Path,
        help="the blackboard file to create, in a folder that exists; the conversation goes beside it as "
        ".jsonl (default: OUT_DIR/NAME-seedSEED.sqlite from the scenario's campaign.out_dir, campaign.name "
        "and campaign.seed, e.g. runs/smoke-seed7.sqlite for scenarios/smoke.toml; OUT_DIR, runs/ under "
        "the current folder unless the scenario says otherwise, is created if missing)",
    )
    add_overrides(
        run, "override a scenario key for this campaign, e.g. --set agents.engineers=4 (repeatable; default: none)"
    )
    _add_views(run)
    run.add_argument(
        "--learn-from",
        type=Path,
        nargs="+",
        default=[],
        metavar="DB",
        help="earlier blackboards whose measured trials seed this campaign's findings and priors "
        "(default: none, the campaign starts from the technique catalogue alone)",
    )
    run.set_defaults(handler=_run, on_interrupt=_interrupted)
    res = sub.add_parser(
        "resume",
        help="continue a campaign from its blackboard file",
        description="Continue a campaign from its blackboard file, with every committed record kept.",
    )
    res.add_argument("--db", type=Path, required=True, help="the campaign's blackboard file")
    add_overrides(
        res,
        "retune a limit for this run, e.g. --set evaluator.in_flight=2 (repeatable; default: the limits "
        "the campaign was started with; the seed, task, backend and brain are fixed)",
    )
    _add_views(res)
    res.set_defaults(handler=_resume, on_interrupt=_interrupted)


def _add_views(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--quiet", action="store_true", help="do not print the conversation (default: it scrolls by on stderr)"
    )
    parser.add_argument(
        "--watch", action="store_true", help="show the live dashboard instead of the conversation (default: off)"
    )


def _interrupted(args: argparse.Namespace) -> str:
    """The line for Ctrl-C wherever it lands (``cli.main`` asks): ``args.blackboard`` is set once
    the file this command writes is known to be its own."""
    db: Path | None = getattr(args, "blackboard", None)
    resume = args.command == "resume"
    if db is None:
        return f"interrupted before the campaign {'resumed' if resume else 'started'}; nothing was written"
    from kernel_scientist import campaign

    return campaign.interrupted_text(db, resume)


def default_db(scenario: Scenario) -> Path:
    safe = "".join(c if c.isalnum() or c in "-_." else "-" for c in scenario.campaign.name)
    return Path(scenario.campaign.out_dir) / f"{safe}-seed{scenario.campaign.seed}.sqlite"


def _listeners(db: Path, quiet: bool, watch: bool = False) -> tuple[_Closable, list[Callable[[Message], None]]]:
    """The campaign's message listeners, and what closes them when it ends."""
    from kernel_scientist import logs

    jsonl = logs.JsonlLog(logs.jsonl_path(db))
    if watch or quiet:  # the dashboard or a TTY spinner (closed with the JSONL log in _finish)
        from kernel_scientist import dashboard

        view = dashboard.LiveListener(db) if watch else dashboard.spinner(db)
        listeners: list[Callable[[Message], None]] = [jsonl, view] if view else [jsonl]
        return _Closing(jsonl, view), listeners
    logs.setup_console()
    return jsonl, [logs.to_console, jsonl]


class _Closing:
    """Closes the JSONL log and the live view together (the view draws its final frame)."""

    def __init__(self, *parts: _Closable | None) -> None:
        self.parts = [p for p in parts if p is not None]

    def close(self) -> None:
        for part in self.parts:
            part.close()


def _finish(outcome: Outcome, jsonl: _Closable) -> int:
    from kernel_scientist import logs, status
    from kernel_scientist.blackboard import open_existing

    jsonl.close()
    from kernel_scientist.commands.status import terminal_width

    with open_existing(outcome.db) as board:
        print("\n" + status.render(board, width=terminal_width()))
    db = outcome.db
    print(f"\nblackboard:   {db}\nconversation: {logs.jsonl_path(db)}   ({outcome.wall_s:.1f} s wall)")
    print("next:")
    print(f"  kernel-scientist logs --db {db} --agent critic      # one agent's side of the conversation")
    print(f"  kernel-scientist status --db {db} --json            # the leaderboard as JSON")
    print("  kernel-scientist run SCENARIO --set agents.engineers=4 --set evaluator.rate_per_hour=12")
    return 0


def _run(args: argparse.Namespace) -> int:
    from kernel_scientist import campaign, learn
    from kernel_scientist.blackboard import load_scenario

    scenario = load_scenario(args.scenario, args.overrides)
    fresh = default_db(scenario)
    db = args.db or fresh
    campaign.check_new(db, fresh.name, named=args.db is not None)
    args.blackboard = db  # from here on a blackboard at db is this campaign's
    lessons = learn.read_all(args.learn_from)  # before any file is created: a bad one leaves none
    jsonl, listeners = _listeners(db, args.quiet, args.watch)
    try:
        outcome = campaign.start(scenario, db, listeners, lessons=lessons)
    finally:
        jsonl.close()
    return _finish(outcome, jsonl)


def _resume(args: argparse.Namespace) -> int:
    from kernel_scientist import campaign
    from kernel_scientist.blackboard import open_existing

    open_existing(args.db).close()  # read-only: a clear error before any output
    args.blackboard = args.db
    jsonl, listeners = _listeners(args.db, args.quiet, args.watch)
    try:
        outcome = campaign.resume(args.db, listeners, args.overrides)
    except campaign.NothingToResume as exc:
        print(exc)
        return 0
    finally:
        jsonl.close()
    return _finish(outcome, jsonl)
