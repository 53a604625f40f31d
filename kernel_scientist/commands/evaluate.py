"""`evaluate`: one submission file, outside any campaign, as a leaderboard would judge it.

Exit code 0 when it passes, 1 when it is rejected (any outcome but passed), 2 on bad usage.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from ._args import Subparsers, UsageError, natural_int, positive_float

if TYPE_CHECKING:
    from kernel_scientist.blackboard import EvalReport


def _evaluator_folder() -> Path:
    """Where the evaluator package's files are, however it was installed (a checkout's editable
    install maps it to evaluator/, a wheel to kernel_scientist/evaluator/), without importing it."""
    spec = importlib.util.find_spec("kernel_scientist.evaluator")
    assert spec is not None and spec.submodule_search_locations  # a subpackage of this package
    return Path(next(iter(spec.submodule_search_locations)))


DEFAULT_TASK = _evaluator_folder() / "tasks" / "amd_fp8_mm"


def add(sub: Subparsers) -> None:
    from kernel_scientist.blackboard.config import EvaluatorConfig

    # A scenario's evaluator defaults are evaluate's too: a hanging file holds `evaluate` no longer than
    # it would hold a campaign, and the simulated device is the one a campaign models.
    defaults = EvaluatorConfig()
    ev = sub.add_parser("evaluate", help="evaluate one submission file and print the verdict")
    ev.add_argument("file", type=Path, help="the submission: a .py file that defines custom_kernel(data)")
    ev.add_argument(
        "--task",
        type=Path,
        default=DEFAULT_TASK,
        help="problem folder in GPU MODE's format (docs/problem-folders.md; default: the bundled amd-fp8-mm "
        "task, %(default)s)",
    )
    ev.add_argument(
        "--backend",
        choices=("simulated", "local"),
        default="simulated",
        help="simulated: CPU checks and a timing model, no GPU; local: this machine's GPU (default: %(default)s)",
    )
    ev.add_argument(
        "--device",
        choices=("mi300x", "h200", "h100"),
        default=defaults.device,
        help="the simulated device (simulated backend only; default: %(default)s)",
    )
    ev.add_argument("--seed", type=natural_int, default=0, help="mixed into every test seed (default: %(default)s)")
    ev.add_argument(
        "--timeout",
        type=positive_float,
        default=defaults.timeout_s,
        help="wall seconds for the candidate's run (default: a scenario's evaluator.timeout_s default, %(default)g s)",
    )
    ev.add_argument("--json", action="store_true", help="print the full report as one JSON object")
    ev.add_argument(
        "--own-kernel",
        action="store_true",
        help="also reject a torch matmul doing the task's work (a campaign's policy; a leaderboard accepts it)",
    )
    ev.add_argument(
        "--profile",
        action="store_true",
        help="local backend: after a pass, profile one call of the ranked shape farthest from the speed of "
        "light under Nsight Compute (ncu) and print its counters per launch",
    )
    ev.set_defaults(handler=_evaluate)


def _evaluate(args: argparse.Namespace) -> int:
    import anyio

    from kernel_scientist.blackboard.config import EvaluatorConfig
    from kernel_scientist.blackboard.profile import profile_target
    from kernel_scientist.evaluator import Profiles, load_task, make_backend

    if args.profile and args.backend != "local":
        raise UsageError("--profile needs --backend local: a profiler reads a GPU's counters")
    source = read_source(args.file, "submission")
    task = load_task(args.task)
    cfg = EvaluatorConfig(
        backend=args.backend,
        device=args.device,
        noise=0.0,
        timeout_s=args.timeout,
        own_kernel=args.own_kernel,
    )
    backend = make_backend(cfg, task, setting="--backend local", instead="--backend simulated")

    async def go() -> EvalReport:
        report = await backend.evaluate(source, submission_id=0, secret_seed=args.seed)
        if args.profile and report.passed() and report.shapes and isinstance(backend, Profiles):
            profile = await backend.profile(source, profile_target(report), secret_seed=args.seed)
            report = msgspec.structs.replace(report, profile=profile)
        return report

    with backend:
        report = anyio.run(go, backend="trio")
    if args.json:
        sys.stdout.write(msgspec.json.encode(report).decode() + "\n")
    else:
        print(render(report, args.file))
    return 0 if report.passed() else 1


def read_source(path: Path, what: str) -> str:
    """A Python source file the user named, or one line saying why it is not one."""
    if path.is_dir():
        raise UsageError(f"{path}: is a folder; name the {what} file (a .py file)")
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise UsageError(f"{path}: cannot read {what} ({exc.strerror})") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(
            f"{path}: not a text file (byte {exc.start} is not UTF-8); a {what} is Python source"
        ) from None
    if not text.strip():
        raise UsageError(f"{path}: an empty file; a {what} is Python source")
    return text


def render(report: EvalReport, file: Path) -> str:
    from kernel_scientist.blackboard.profile import profile_table

    prov = report.provenance
    label = "simulated" if prov.simulated else "measured"
    lines = [
        f"{file}: {report.outcome} — {report.reason}",
        f"  backend {prov.backend} on {prov.device}{'' if label in prov.device else f' ({label})'}; "
        f"timing: {prov.timing_method}",
    ]
    score = report.passed_score()
    if score is not None:
        lines.append(f"  score {score:.1f} us (over {len(report.shapes)} ranked shapes, {label})")
        for s in report.shapes:
            flag = f"  [{s.flagged}]" if s.flagged else ""
            sol = f"  (speed of light {s.sol_us:.1f} us)" if s.sol_us is not None else ""
            lines.append(f"    {s.shape.label():>16}: {s.time_us:9.1f} us{sol}{flag}")
    if report.profile is not None:
        lines += ["", profile_table(report.profile)]
    return "\n".join(lines)
