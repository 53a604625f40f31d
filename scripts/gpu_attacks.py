"""Run the whole attack suite (tests/attacks/) through the local GPU backend in one call.

    python scripts/gpu_attacks.py --out attacks-h200.json [--timeout 120] [--task DIR]

Each file in the attack folder is one submission whose first line reads
``# attack: NAME — expected: OUTCOME REASON-SUBSTRING`` (the outcome and reason the simulated
backend gives on the CPU, asserted by tests/test_attacks.py); an optional second line
``# gpu-defence: ...`` names what in ``_gpu_harness``/``_local`` stops it at run time. On a GPU the
reason may differ (no meta-device probe there; a rule-rejected file is rejected before any GPU
work), so the pass criterion here is that every attack is *stopped* (any outcome but passed) and
the honest controls pass. The table goes to stdout and the rows, with device provenance, to --out.
Exit code 0 when every attack is stopped and every control passes, 1 otherwise.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path

import anyio
import msgspec
from kernel_scientist.blackboard import EvalReport, Outcome

ROOT = Path(__file__).resolve().parents[1]

_HEADER = re.compile(r"#\s*attack:\s*(?P<name>\S+)\s+—\s+expected:\s*(?P<outcome>\w+)\s*(?P<reason>.*)")
_GPU_LINE = re.compile(r"#\s*gpu-defence:\s*(?P<text>.*)")


class Attack(msgspec.Struct, frozen=True):
    name: str
    path: str
    outcome: Outcome  # what the simulated backend gives on the CPU
    reason: str  # a substring of its reason
    gpu_defence: str
    source: str


class AttackRow(msgspec.Struct, frozen=True):
    name: str
    expected_outcome: str
    expected_reason: str
    outcome: str
    reason: str
    stopped: bool  # any outcome but passed (for a control: passed)
    as_expected: bool  # the CPU expectation held here too (informational on a GPU)
    control: bool = False
    score_us: float | None = None
    wall_s: float = 0.0


def parse_attack(path: Path) -> Attack:
    """Read one attack file's header. Raises ValueError naming the file when the header is malformed."""
    source = path.read_text()
    lines = source.splitlines()
    match = _HEADER.fullmatch(lines[0].strip()) if lines else None
    if match is None:
        raise ValueError(f"{path}: the first line must read '# attack: NAME — expected: OUTCOME REASON'")
    try:
        outcome = Outcome(match["outcome"])
    except ValueError:
        raise ValueError(f"{path}: unknown outcome {match['outcome']!r}; one of {[o.value for o in Outcome]}") from None
    gpu = _GPU_LINE.fullmatch(lines[1].strip()) if len(lines) > 1 else None
    return Attack(
        name=match["name"],
        path=str(path),
        outcome=outcome,
        reason=match["reason"].strip(),
        gpu_defence=gpu["text"].strip() if gpu else "",
        source=source,
    )


def load_attacks(folder: Path) -> list[Attack]:
    return [parse_attack(p) for p in sorted(folder.glob("*.py"))]


def verdict_row(attack: Attack, report: EvalReport, control: bool = False, wall_s: float = 0.0) -> AttackRow:
    passed = report.outcome is Outcome.PASSED
    return AttackRow(
        name=attack.name,
        expected_outcome=attack.outcome.value,
        expected_reason=attack.reason,
        outcome=report.outcome.value,
        reason=" ".join(report.reason.split()),
        stopped=passed if control else not passed,
        as_expected=report.outcome is attack.outcome and attack.reason in report.reason,
        control=control,
        score_us=report.score_us,
        wall_s=round(wall_s, 2),
    )


def build_table(rows: list[AttackRow], reason_width: int = 90) -> str:
    """A fixed-width table, attack -> outcome -> reason, with a summary line."""
    name_w = max([len("attack")] + [len(r.name) for r in rows])
    out_w = max([len("outcome")] + [len(r.outcome) for r in rows])
    lines = [f"{'attack':<{name_w}}  {'outcome':<{out_w}}  ok   reason", "-" * (name_w + out_w + reason_width + 9)]
    for r in rows:
        reason = r.reason if len(r.reason) <= reason_width else r.reason[: reason_width - 3] + "..."
        mark = "yes" if r.stopped else "NO "
        lines.append(f"{r.name:<{name_w}}  {r.outcome:<{out_w}}  {mark}  {reason}")
    attacks = [r for r in rows if not r.control]
    controls = [r for r in rows if r.control]
    lines.append(
        f"{sum(r.stopped for r in attacks)}/{len(attacks)} attacks stopped; "
        f"{sum(r.stopped for r in controls)}/{len(controls)} honest controls passed"
    )
    return "\n".join(lines)


def all_good(rows: list[AttackRow]) -> bool:
    return all(r.stopped for r in rows)


# The faults of the list (and the candidates that end their own process): after each, the
# seed is evaluated again on the same GPU and must pass, which shows the fault was contained.
FAULTS = frozenset(
    {
        "segfault",
        "infinite_loop",
        "kernel_infinite_loop",
        "illegal_memory_access",
        "device_assert",
        "giant_allocation",
        "memory_error",
        "output_flood",
        "compile_hang",
        "forge_sys_exit",
    }
)


async def _evaluate(backend, attack: Attack, control: bool, number: int) -> AttackRow:
    t0 = time.monotonic()
    report = await backend.evaluate(attack.source, submission_id=number, secret_seed=20261130)
    row = verdict_row(attack, report, control=control, wall_s=time.monotonic() - t0)
    print(f"{row.name}: {row.outcome} ({row.wall_s:.1f} s)", file=sys.stderr, flush=True)
    return row


async def run_all(backends: list, attacks: list[Attack], controls: list[Attack]) -> list[AttackRow]:
    """Evaluate every attack, then every control, with one worker per GPU (each backend holds one
    GPU, so a fault and the seed evaluated after it share the GPU). Rows come back in input order."""
    seed = next(c for c in controls if c.name == "control:seed")
    items = [(a, False) for a in attacks] + [(c, True) for c in controls]
    rows: dict[int, list[AttackRow]] = {}
    send, receive = anyio.create_memory_object_stream(len(items))
    for index, item in enumerate(items):
        send.send_nowait((index, item))
    send.close()

    async def worker(backend) -> None:
        async for index, (attack, control) in receive:
            done = [await _evaluate(backend, attack, control, index + 1)]
            if attack.name in FAULTS:
                after = msgspec.structs.replace(seed, name=f"control:seed after {attack.name}")
                done.append(await _evaluate(backend, after, True, index + 1))
            rows[index] = done

    async with anyio.create_task_group() as group:
        for backend in backends:
            group.start_soon(worker, backend)
    return [row for index in sorted(rows) for row in rows[index]]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--task", type=Path, default=ROOT / "evaluator" / "tasks" / "amd_fp8_mm")
    parser.add_argument("--attacks", type=Path, default=ROOT / "tests" / "attacks")
    parser.add_argument("--out", type=Path, required=True, help="where to write the rows as JSON")
    parser.add_argument("--timeout", type=float, default=60.0, help="per-candidate limit in seconds")
    parser.add_argument("--max-calls", type=int, default=5, help="timed calls per shape (verdicts, not speed)")
    parser.add_argument("--shape-budget", type=float, default=0.3, help="seconds of timing per shape")
    args = parser.parse_args(argv)

    from kernel_scientist.evaluator import LocalBackend, load_task  # needs a GPU at construction, not at import

    task = load_task(args.task)
    attacks = load_attacks(args.attacks)
    controls = [
        Attack(
            name="control:seed",
            path=str(args.task / "submission.py"),
            outcome=Outcome.PASSED,
            reason="",
            gpu_defence="",
            source=task.seed_source or "",
        )
    ]
    kernels = ROOT / "tests" / "evaluator_kernels.py"
    if kernels.exists():  # the fast honest variant the evaluator tests use
        namespace: dict = {}
        exec(compile(kernels.read_text(), str(kernels), "exec"), namespace)
        controls.append(
            Attack(
                name="control:better",
                path=str(kernels),
                outcome=Outcome.PASSED,
                reason="",
                gpu_defence="",
                source=namespace["BETTER"],
            )
        )
    one = LocalBackend(
        task, timeout_s=args.timeout, max_calls=args.max_calls, shape_budget_s=args.shape_budget, own_kernel=True
    )
    backends = [
        LocalBackend(
            task,
            timeout_s=args.timeout,
            max_calls=args.max_calls,
            shape_budget_s=args.shape_budget,
            gpus=[gpu],
            own_kernel=True,
        )
        for gpu in one.gpus
    ]
    rows = anyio.run(run_all, backends, attacks, controls)
    print(build_table(rows))
    args.out.write_bytes(
        msgspec.json.format(
            msgspec.json.encode(
                {
                    "device": one.device_name,
                    "driver": one.driver,
                    "gpus": len(backends),
                    "date": time.strftime("%Y-%m-%d"),
                    "rows": rows,
                }
            ),
            indent=2,
        )
    )
    return 0 if all_good(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
