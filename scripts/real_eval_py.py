"""GPU MODE's own eval.py, run on one submission in leaderboard mode (for scripts/bench_leaderboard.py
--eval-py): the public harness itself, where our reimplementation of its loop could drift.

eval.py is not shipped here (it is GPU MODE's); pass its path. The run directory gets the task
folder's helper modules as task.yml lists them (reference.py, task.py, utils.py, ...), the
submission, that eval.py and the shapes in its test-file format (``m: 1024; n: 1536; ...``);
eval.py runs in its own process with ``POPCORN_FD`` pointing at a file, and its
``benchmark.N.mean`` lines (nanoseconds) are read back.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

_LINE = re.compile(r"^benchmark\.(\d+)\.(\w+): (.*)$")


def shape_lines(shapes) -> str:
    """eval.py's test file for ``shapes``: one line per shape, ``name: value`` pairs split by ``;``."""
    return "".join("; ".join(f"{k}: {v}" for k, v in s.kwargs().items()) + "\n" for s in shapes)


def parse(text: str, count: int) -> list[dict]:
    """Per shape, from eval.py's POPCORN output: the mean in us and its runs, or the failure.
    Leaderboard mode stops at the first failure: the shapes after it have no time and say so."""
    fields: dict[int, dict[str, str]] = {}
    for line in text.splitlines():
        m = _LINE.match(line.strip())
        if m:
            fields.setdefault(int(m[1]), {})[m[2]] = m[3]
    rows = []
    for i in range(count):
        f = fields.get(i, {})
        if "mean" in f:
            rows.append({"us": round(float(f["mean"]) / 1e3, 2), "runs": int(f.get("runs", 0)), "failure": None})
        elif f.get("status") == "fail":
            rows.append({"us": None, "runs": 0, "failure": f.get("error", "failed")[:300]})
        else:
            rows.append({"us": None, "runs": 0, "failure": "no result (eval.py stopped before this shape)"})
    return rows


def run(eval_py: Path, modules: dict[str, str], source: str, shapes, timeout_s: float = 900.0) -> list[dict]:
    """eval.py's leaderboard mode on ``source`` and ``shapes``; per shape as ``parse`` returns it,
    every shape failed with the reason where eval.py did not finish (its last output lines)."""
    with tempfile.TemporaryDirectory(prefix="ks-eval-py-") as tmp:
        folder = Path(tmp)
        for name, path in modules.items():
            shutil.copyfile(path, folder / f"{name}.py")
        (folder / "submission.py").write_text(source)
        shutil.copyfile(eval_py, folder / "eval.py")
        (folder / "shapes.txt").write_text(shape_lines(shapes))
        popcorn = folder / "popcorn.txt"
        with popcorn.open("w") as out:
            env = {**os.environ, "POPCORN_FD": str(out.fileno())}
            try:
                done = subprocess.run(
                    [sys.executable, "eval.py", "leaderboard", "shapes.txt"],
                    cwd=folder,
                    env=env,
                    pass_fds=(out.fileno(),),
                    capture_output=True,
                    text=True,
                    timeout=timeout_s,
                )
                why = None if done.returncode == 0 else f"eval.py exited {done.returncode}: {_tail(done.stderr)}"
            except subprocess.TimeoutExpired:
                why = f"eval.py took longer than {timeout_s:g} s"
        rows = parse(popcorn.read_text(), len(shapes))
    if why:
        rows = [r if r["us"] is not None else {**r, "failure": r["failure"] + f"; {why}"} for r in rows]
    return rows


def _tail(text: str) -> str:
    lines = [line for line in (text or "").strip().splitlines() if line.strip()]
    return " | ".join(lines[-2:])[:300] if lines else "no output"
