"""Helpers shared by the tests (imported as a plain module: pytest puts tests/ on the path)."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCENARIOS = ROOT / "scenarios"


def cli(*args: str, cwd: Path | None = None, timeout: float = 300, env: dict | None = None):
    """Run the real console command in a subprocess, as a user would."""
    return subprocess.run(
        [sys.executable, "-m", "kernel_scientist", *args],
        cwd=cwd or ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )


def fingerprint(db):
    """What must be identical between two runs of one scenario and seed: every kernel, evaluation
    and message, in order (wall-clock fields left out)."""
    from kernel_scientist.blackboard import open_existing

    with open_existing(db) as board:
        kernels = [
            (k.id, k.source_hash, k.state, k.author, k.parent_id, k.hypothesis_id, k.created_at)
            for k in board.kernels()
        ]
        evals = [(e.kernel_id, e.started_at, e.report.outcome, e.report.score_us) for e in board.evaluations()]
        msgs = [(m.at, m.agent, m.kind, m.text) for m in board.messages()]
    return kernels, evals, msgs
