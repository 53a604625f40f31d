"""Helpers shared by the tests (imported as a plain module: pytest puts tests/ on the path)."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCENARIOS = ROOT / "scenarios"


def cli(*args: str, cwd: Path | None = None, timeout: float = 300, env: dict | None = None):
    """Run the real console command in a subprocess, as a user would."""
    return subprocess.run([sys.executable, "-m", "kernel_scientist.cli", *args], cwd=cwd or ROOT,
                          capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})
