"""`kernel-scientist`: run, resume, status, logs.

Usage errors (a broken scenario, an unknown option, a missing file) print one line and exit with
code 2, never a traceback.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import msgspec

EXIT_USAGE = 2


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # argparse's default prints the whole usage block
        self.exit(EXIT_USAGE, f"kernel-scientist: {message} (see --help)\n")


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="kernel-scientist", description="Agents that optimise GPU kernels through a "
                "scarce, rate-limited evaluator.")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)
    run = sub.add_parser("run", help="start a campaign from a scenario file")
    run.add_argument("scenario", type=Path)
    run.add_argument("--db", type=Path, help="blackboard file to create (default: <out_dir>/<name>-seed<N>.sqlite)")
    run.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                     help="override a scenario key, e.g. --set agents.engineers=4 (repeatable)")
    run.add_argument("--quiet", action="store_true", help="do not print the conversation")
    res = sub.add_parser("resume", help="continue a campaign from its blackboard file")
    res.add_argument("--db", type=Path, required=True)
    res.add_argument("--quiet", action="store_true")
    st = sub.add_parser("status", help="print a campaign's leaderboard")
    st.add_argument("--db", type=Path, required=True)
    st.add_argument("--json", action="store_true", help="one JSON object instead of the table")
    st.add_argument("--top", type=int, default=10)
    lg = sub.add_parser("logs", help="replay or follow the agents' conversation")
    lg.add_argument("--db", type=Path, required=True)
    lg.add_argument("--agent", help="only this agent (e.g. critic, engineer-1)")
    lg.add_argument("--follow", "-f", action="store_true", help="keep printing as the campaign writes")
    return p


def main(argv: list[str] | None = None) -> int:
    from blackboard import BlackboardError, ScenarioError

    args = _parser().parse_args(argv)
    try:
        return _COMMANDS[args.command](args)
    except (ScenarioError, BlackboardError) as exc:
        print(f"kernel-scientist: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("kernel-scientist: interrupted; resume with `kernel-scientist resume --db ...`", file=sys.stderr)
        return 130


def _default_db(scenario) -> Path:
    safe = "".join(c if c.isalnum() or c in "-_." else "-" for c in scenario.campaign.name)
    return Path(scenario.campaign.out_dir) / f"{safe}-seed{scenario.campaign.seed}.sqlite"


def _listeners(db: Path, quiet: bool):
    from . import logs

    jsonl = logs.JsonlLog(logs.jsonl_path(db))
    if quiet:
        return jsonl, [jsonl]
    logs.setup_console()
    return jsonl, [logs.to_console, jsonl]


def _finish(outcome, jsonl) -> int:
    from blackboard import open_existing

    from . import logs, status

    jsonl.close()
    with open_existing(outcome.db) as board:
        print("\n" + status.render(board))
    db = outcome.db
    print(f"\nblackboard: {db}\nconversation: {logs.jsonl_path(db)}  ({outcome.wall_s:.1f} s wall)")
    print(f"next: kernel-scientist logs --db {db} --agent critic | kernel-scientist status --db {db} --json"
          f" | kernel-scientist run <scenario> --set agents.engineers=4 --set evaluator.rate_per_hour=12")
    return 0


def _run(args) -> int:
    from blackboard import load_scenario

    from . import campaign

    scenario = load_scenario(args.scenario, args.overrides)
    db = args.db or _default_db(scenario)
    campaign.check_new(db)
    db.parent.mkdir(parents=True, exist_ok=True)
    jsonl, listeners = _listeners(db, args.quiet)
    return _finish(campaign.start(scenario, db, listeners), jsonl)


def _resume(args) -> int:
    from blackboard import open_existing

    from . import campaign

    open_existing(args.db).close()  # a clear error before any output
    jsonl, listeners = _listeners(args.db, args.quiet)
    return _finish(campaign.resume(args.db, listeners), jsonl)


def _status(args) -> int:
    from blackboard import open_existing

    from . import status

    with open_existing(args.db) as board:
        if args.json:
            sys.stdout.write(msgspec.json.encode(status.status(board, args.top)).decode() + "\n")
        else:
            print(status.render(board, args.top))
    return 0


def _logs(args) -> int:
    from blackboard import open_existing

    from . import logs

    with open_existing(args.db) as board:
        logs.replay(board, args.agent, args.follow)
    return 0


_COMMANDS = {"run": _run, "resume": _resume, "status": _status, "logs": _logs}

if __name__ == "__main__":
    sys.exit(main())
