"""Evaluate the solutions that ship with problem folders and print each verdict.

    python scripts/check_folders.py FOLDER... [--backend local|simulated] [--device cuda|cpu]

For each GPU MODE format folder (``task.yml``, ``reference.py``...) it evaluates the folder's
``submission.py`` and every file under ``solutions/correct`` (expected to pass) and
``solutions/wrong`` (expected to be rejected), through the same backends ``kernel-scientist
evaluate`` uses, under ``evaluate``'s policy (a torch solution is judged like any other, as a
leaderboard would). It prints one line per solution (expected, outcome, score, the reason) and
exits 0 only when every verdict is the expected one, 1 otherwise, 2 on bad usage.

``--device cpu`` runs the local backend's CPU mode (Triton's interpreter, host clock); with
``--smallest`` the ranked shapes are cut to each folder's smallest test, which the interpreter can
run (the public folders' benchmarks are GPU sizes). Numbers from it are not GPU timings.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import anyio
import msgspec
from kernel_scientist.blackboard import EvalReport, Outcome

ROOT = Path(__file__).resolve().parents[1]


class Row(msgspec.Struct, frozen=True):
    folder: str
    file: str
    expected: str  # "pass" or "reject"
    report: EvalReport
    wall_s: float

    @property
    def as_expected(self) -> bool:
        return (self.report.outcome is Outcome.PASSED) == (self.expected == "pass")


def solutions(folder: Path) -> list[tuple[Path, str]]:
    out = [(folder / "submission.py", "pass")] if (folder / "submission.py").is_file() else []
    out += [(f, "pass") for f in sorted((folder / "solutions" / "correct").glob("*.py"))]
    out += [(f, "reject") for f in sorted((folder / "solutions" / "wrong").glob("*.py"))]
    return out


def backend_for(task, args):
    from kernel_scientist.evaluator import LocalBackend, SimulatedBackend

    if args.smallest:
        task = msgspec.structs.replace(task, benchmarks=[min(task.tests, key=lambda s: s.work())])
    if args.backend == "simulated":
        return SimulatedBackend(task, device=args.sim_device, noise=0.0, timeout_s=args.timeout)
    return LocalBackend(
        task, timeout_s=args.timeout, max_calls=args.max_calls, shape_budget_s=args.shape_budget, device=args.device
    )


def check(folder: Path, args) -> list[Row]:
    from kernel_scientist.evaluator import TaskError, load_task

    try:
        task = load_task(folder)
    except TaskError as exc:
        print(f"{folder}: cannot load: {exc}")
        return []
    rows = []
    with backend_for(task, args) as backend:
        for file, expected in solutions(folder):
            began = time.perf_counter()
            report = anyio.run(
                lambda: backend.evaluate(file.read_text(), submission_id=0, secret_seed=args.seed),  # noqa: B023 (run at once)
                backend="trio",
            )
            row = Row(
                folder=folder.name,
                file=str(file.relative_to(folder)),
                expected=expected,
                report=report,
                wall_s=round(time.perf_counter() - began, 1),
            )
            rows.append(row)
            score = f"{report.score_us:10.1f} us" if report.score_us is not None else " " * 13
            mark = "ok  " if row.as_expected else "MISS"
            print(
                f"{mark} {row.folder:>16} {row.file:<44} expect {expected:<6} {report.outcome:<16} {score} "
                f"{row.wall_s:6.1f} s  {' '.join(report.reason.split())[: args.width]}",
                flush=True,
            )
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("folders", nargs="+", type=Path, help="problem folders (GPU MODE format)")
    ap.add_argument("--backend", choices=("local", "simulated"), default="local")
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda", help="local backend: a GPU, or CPU mode")
    ap.add_argument(
        "--sim-device", choices=("mi300x", "h200", "h100"), default="h200", help="simulated backend's device"
    )
    ap.add_argument("--smallest", action="store_true", help="rank only each folder's smallest test (CPU mode)")
    ap.add_argument("--timeout", type=float, default=600.0, help="wall seconds per solution")
    ap.add_argument("--max-calls", type=int, default=100)
    ap.add_argument("--shape-budget", type=float, default=5.0, help="wall seconds of timed calls per ranked shape")
    ap.add_argument("--seed", type=int, default=0, help="mixed into every test seed")
    ap.add_argument("--width", type=int, default=160, help="characters of each reason to print")
    ap.add_argument("--json", type=Path, help="also write every report here")
    args = ap.parse_args(argv)
    missing = [f for f in args.folders if not (f / "task.yml").is_file()]
    if missing:
        print(f"{missing[0]}: no task.yml there; pass problem folders in GPU MODE format", file=sys.stderr)
        return 2
    try:
        rows = [row for folder in args.folders for row in check(folder.resolve(), args)]
    except RuntimeError as exc:  # the local backend found no GPU: say so in one line
        print(f"check_folders: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    misses = [r for r in rows if not r.as_expected]
    print(
        f"{len(rows)} solutions in {len(args.folders)} folders: {len(rows) - len(misses)} as expected, "
        f"{len(misses)} not"
    )
    if args.json:
        args.json.write_bytes(msgspec.json.format(msgspec.json.encode(rows), indent=2))
    return 0 if rows and not misses else 1


if __name__ == "__main__":
    sys.exit(main())
