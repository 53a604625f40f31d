"""`evaluate`: one submission file, outside any campaign, as a leaderboard would judge it.

Exit code 0 when it passes, 1 when it is rejected (any outcome but passed), 2 on bad usage.
"""

from __future__ import annotations

import sys
from pathlib import Path

import msgspec

DEFAULT_TASK = Path(__file__).resolve().parents[2] / "evaluator" / "tasks" / "amd_fp8_mm"


def add(sub) -> None:
    ev = sub.add_parser("evaluate", help="evaluate one submission file and print the verdict")
    ev.add_argument("file", type=Path)
    ev.add_argument("--task", type=Path, default=DEFAULT_TASK, help="problem folder (GPU MODE format)")
    ev.add_argument("--backend", choices=("simulated", "local"), default="simulated")
    ev.add_argument("--device", choices=("mi300x", "h200", "h100"), default="mi300x",
                    help="the simulated device (simulated backend only)")
    ev.add_argument("--seed", type=int, default=0, help="mixed into every test seed")
    ev.add_argument("--timeout", type=float, default=600.0, help="wall seconds for the candidate's run")
    ev.add_argument("--json", action="store_true", help="print the full report as one JSON object")
    ev.add_argument("--own-kernel", action="store_true",
                    help="also reject a torch matmul doing the task's work (a campaign's policy; a leaderboard accepts it)")
    ev.set_defaults(handler=_evaluate)


def _evaluate(args) -> int:
    import anyio

    from evaluator import LocalBackend, SimulatedBackend, load_task
    from kernel_scientist.cli import UsageError

    try:
        source = args.file.read_text()
    except OSError as exc:
        raise UsageError(f"{args.file}: cannot read submission ({exc.strerror})") from exc
    task = load_task(args.task)
    if args.backend == "local":
        backend = LocalBackend(task, timeout_s=args.timeout, own_kernel=args.own_kernel)
    else:
        backend = SimulatedBackend(task, device=args.device, noise=0.0, timeout_s=args.timeout,
                                   own_kernel=args.own_kernel)

    async def go():
        return await backend.evaluate(source, submission_id=0, secret_seed=args.seed)

    with backend:
        report = anyio.run(go, backend="trio")
    if args.json:
        sys.stdout.write(msgspec.json.encode(report).decode() + "\n")
    else:
        print(render(report, args.file))
    return 0 if report.outcome == "passed" else 1


def render(report, file) -> str:
    prov = report.provenance
    label = "simulated" if prov.simulated else "measured"
    lines = [f"{file}: {report.outcome} — {report.reason}",
             f"  backend {prov.backend} on {prov.device}{'' if label in prov.device else f' ({label})'}; "
             f"timing: {prov.timing_method}"]
    if report.score_us is not None:
        lines.append(f"  score {report.score_us:.1f} us (over {len(report.shapes)} ranked shapes, {label})")
        for s in report.shapes:
            flag = f"  [{s.flagged}]" if s.flagged else ""
            sol = f"  (speed of light {s.sol_us:.1f} us)" if s.sol_us is not None else ""
            lines.append(f"    {s.shape.label():>16}: {s.time_us:9.1f} us{sol}{flag}")
    return "\n".join(lines)
