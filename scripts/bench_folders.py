"""Each folder's seed against what kernel-scientist and PyTorch make of it, evaluated by the local
backend in one run: the best kernel of a fresh offline campaign from the seed (``--campaign-seconds``),
the seed lowered by Inductor, the seed itself, and ``torch.compile`` of the folder's reference (its
``ref_kernel``, the harness's deterministic settings included; compile time excluded:
the harness's untimed warm-up call per shape compiles). With ``--eval-py``, the campaign's best kernel
also under the folders' own eval.py in leaderboard mode.

    python3 scripts/bench_folders.py FOLDER... --out DIR [--campaign-seconds 300] [--eval-py EVAL_PY]

Writes DIR/folders.json (per folder: the lowering's outcome and source, each contender's verdict,
score and per-shape times, the campaign's evaluations and its closing line; saved after every
step, so a run cut short keeps what it measured), DIR/<folder>.sqlite (each campaign's blackboard),
DIR/captures.json.gz (what Inductor wrote for each seed: the fixtures the lowering's CPU tests
read), and prints a table. Without a GPU the campaigns and evaluations use the simulated backend
(modelled times, labelled so).
"""

from __future__ import annotations

import argparse
import gzip
import importlib.metadata
import json
import math
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import msgspec


def _lower(folder: Path) -> dict[str, object]:
    from kernel_scientist.evaluator import load_task
    from kernel_scientist.knowledge.lowering import is_pytorch_only

    from kernel_scientist.lower import LoweringError, capture_seed, from_capture

    task = load_task(folder)
    source = (folder / "submission.py").read_text()
    if not is_pytorch_only(source):
        return {"lowered": False, "reason": "the seed has a kernel of its own"}
    started = time.monotonic()
    try:
        capture = capture_seed(task, source)
    except LoweringError as exc:
        return {"lowered": False, "reason": str(exc), "seconds": time.monotonic() - started}
    record: dict[str, object] = {"seconds": time.monotonic() - started, "capture": msgspec.to_builtins(capture)}
    try:
        lowered = from_capture(capture)
    except LoweringError as exc:
        return {"lowered": False, "reason": str(exc), **record}
    return {
        "lowered": True,
        "kernels": lowered.kernels,
        "library_calls": lowered.library_calls,
        "source": lowered.source,
        **record,
    }


CONTENDERS = ("campaign", "lowered", "seed", "torch.compile")
SCENARIO = """[campaign]
name = "{name}"
task = "{task}"
hours = {hours}

[agents]
engineers = 2
max_pending = 3

[agents.latency]       # the offline brain thinks in microseconds
archivist = 0
theorist = 0
engineer = 0
critic = 0

[evaluator]
backend = "{backend}"
{device}rate_per_hour = 3600   # the GPU itself is the scarce resource
in_flight = 1
timeout_s = 300
max_calls = 20
shape_budget_s = 1.0
"""


def _campaign(folder: Path, seconds: float, backend: str, out: Path, scratch: Path) -> dict[str, object]:
    """A fresh offline campaign of ``seconds`` (wall seconds on a GPU, virtual when simulated) from
    the folder's submission.py; its blackboard kept as DIR/<folder>.sqlite. Returns the best
    kernel's id, author, summary and source, the evaluations and the closing line."""
    from kernel_scientist.blackboard import metrics, open_existing

    scenario = scratch / f"{folder.name}.toml"
    device = 'device = "h200"\n' if backend == "simulated" else ""
    scenario.write_text(
        SCENARIO.format(name=folder.name, task=folder.resolve(), hours=seconds / 3600, backend=backend, device=device)
    )
    db = out / f"{folder.name}.sqlite"
    db.unlink(missing_ok=True)
    cmd = [sys.executable, "-P", "-m", "kernel_scientist", "run", str(scenario), "--db", str(db), "--quiet"]
    started = time.monotonic()
    try:  # the deadline, then the evaluation in flight: a few minutes past it at most
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds + 420, check=False)
        rc, err = done.returncode, done.stderr
    except subprocess.TimeoutExpired:
        rc, err = None, "killed past its deadline"
    record: dict[str, object] = {"rc": rc, "wall_s": round(time.monotonic() - started, 1), "stderr": err[-600:]}
    if not db.exists():
        return record
    with open_existing(db) as board:
        evals = board.evaluations()
        best = metrics.leader(evals)
        closing = board.last_message()
        record["evaluations"] = len(evals)
        record["passed"] = sum(e.report.passed() for e in evals)
        record["closing"] = closing.text if closing else ""
        if best is not None:
            kernel = board.kernel(best.kernel_id)
            record.update(
                best_id=kernel.id,
                author=kernel.author,
                summary=kernel.summary,
                score_us=best.report.passed_score(),
                source=kernel.source,
            )
    return record


def _evaluate(path: Path, folder: Path, backend: str, timeout: float) -> dict[str, object]:
    cmd = [sys.executable, "-P", "-m", "kernel_scientist", "evaluate", str(path), "--task", str(folder)]
    cmd += ["--backend", backend, "--json", "--timeout", str(timeout)]
    cmd += ["--device", "h200"] if backend == "simulated" else []  # the campaigns' simulated device
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout + 60, check=False)
    except subprocess.TimeoutExpired:
        return {"outcome": "timeout"}
    try:
        report = json.loads(done.stdout.strip().splitlines()[-1])
    except (json.JSONDecodeError, IndexError):
        return {"outcome": "no report", "stderr": done.stderr[-400:]}
    out: dict[str, object] = {k: report.get(k) for k in ("outcome", "score_us", "reason")}
    out["device"] = report["provenance"]["device"]
    out["simulated"] = report["provenance"]["simulated"]
    out["shapes"] = {_label(r["shape"]): r.get("time_us") for r in report.get("shapes") or []}
    return out


def _real_eval_py(folder: Path, record: dict[str, object], eval_py: Path) -> None:
    """The campaign's best kernel under the folders' own eval.py, leaderboard mode
    (real_eval_py.py): the public harness's verdict and times, into ``record``."""
    sys.path.insert(0, str(Path(__file__).parent))
    import real_eval_py
    from kernel_scientist.evaluator import load_task

    run = record.get("campaign_run")
    if not isinstance(run, dict) or "source" not in run:
        return
    task = load_task(folder)
    rows = real_eval_py.run(eval_py, task.modules, str(run["source"]), task.benchmarks, timeout_s=300)
    record["eval_py"] = {
        "passed": all(r["us"] is not None for r in rows),
        "shapes": {s.label(): r for s, r in zip(task.benchmarks, rows, strict=True)},
    }


def _contender(
    folder: Path, who: str, low: dict[str, object], record: dict[str, object], scratch: Path, mode: str
) -> Path | None:
    """The file that holds contender ``who`` of ``folder``, or None where there is none (no
    lowering, no campaign kernel)."""
    seed = folder / "submission.py"
    path = scratch / f"{folder.name}-{who}.py"
    if who == "seed":
        return seed
    if who == "lowered":
        if not low.get("lowered"):
            return None
        path.write_text(str(low["source"]))
    elif who == "campaign":
        run = record.get("campaign_run")
        if not isinstance(run, dict) or "source" not in run:
            return None
        path.write_text(str(run["source"]))
    else:  # what a user would pick instead: PyTorch's compiler on the folder's own reference
        from kernel_scientist.knowledge.lowering import reference_submission

        path.write_text(
            reference_submission((folder / "reference.py").read_text())
            + "\n\nimport torch as _torch\n\n"
            + f"custom_kernel = _torch.compile(custom_kernel, mode={mode!r}, dynamic=False)\n"
        )
    return path


def _label(shape: dict[str, object]) -> str:
    return " ".join(f"{k}={v}" for k, v in sorted(shape.items()) if k != "seed")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("folders", nargs="+", type=Path)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--mode", default="max-autotune-no-cudagraphs", help="torch.compile's mode for the comparison")
    p.add_argument("--timeout", type=float, default=240.0, help="wall seconds per evaluation")
    p.add_argument(
        "--contenders",
        default=",".join(CONTENDERS),
        help=f"which of {', '.join(CONTENDERS)} to time, comma-separated (default: all)",
    )
    p.add_argument("--budget", type=float, default=1e9, help="wall seconds after which no evaluation starts")
    p.add_argument("--campaign-seconds", type=float, default=0.0, help="a fresh campaign per folder (0: none)")
    p.add_argument("--eval-py", type=Path, help="the folders' eval.py: the campaign's best under it too")
    args = p.parse_args()
    unknown = set(args.contenders.split(",")) - set(CONTENDERS)
    if unknown:
        p.error(f"--contenders: unknown {', '.join(sorted(unknown))}")
    if args.eval_py is not None and not args.eval_py.is_file():
        p.error(f"--eval-py {args.eval_py}: not a file")
    args.out.mkdir(parents=True, exist_ok=True)
    import torch

    backend = "local" if torch.cuda.is_available() else "simulated"
    scratch = Path(tempfile.mkdtemp(prefix="ks-bench-lowering-"))  # the contenders' files; the record keeps their text
    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=len(args.folders)) as pool:  # Inductor's code generation is CPU work
        lowerings = dict(zip(args.folders, pool.map(_lower, args.folders)))
    captures = {f.name: low.pop("capture") for f, low in lowerings.items() if "capture" in low}
    with gzip.open(args.out / "captures.json.gz", "wt") as f:
        json.dump(captures, f)
    meta = {
        "backend": backend,
        "torch": torch.__version__,
        "triton": importlib.metadata.version("triton"),
        "device": torch.cuda.get_device_name() if backend == "local" else "cpu (simulated timings)",
        "date": time.strftime("%Y-%m-%d"),
        "mode": args.mode,
        "lowering_s": round(time.monotonic() - started, 1),
    }
    results: dict[str, dict[str, object]] = {f.name: {"lowering": low} for f, low in lowerings.items()}

    def save() -> None:  # after every step: a run cut short still brings back what it measured
        (args.out / "folders.json").write_text(json.dumps({"meta": meta, "folders": results}, indent=1))

    save()
    meta["campaign_seconds"] = args.campaign_seconds
    contenders = [c for c in args.contenders.split(",") if c != "campaign" or args.campaign_seconds > 0]
    for folder, low in lowerings.items():  # one folder whole, then the next: the budget cuts the last folders
        if time.monotonic() - started > args.budget:
            results[folder.name]["skipped"] = "not run (budget)"
            continue
        if args.campaign_seconds > 0:
            results[folder.name]["campaign_run"] = _campaign(folder, args.campaign_seconds, backend, args.out, scratch)
            save()
        for who in contenders:
            path = _contender(folder, who, low, results[folder.name], scratch, args.mode)
            if path is not None:
                results[folder.name][who] = _evaluate(path, folder, backend, args.timeout)
                save()
        if args.eval_py is not None:
            _real_eval_py(folder, results[folder.name], args.eval_py)
            save()
    for folder, low in lowerings.items():
        row = [f"{folder.name:16s}", f"lowering {'ok' if low.get('lowered') else 'refused'}"]
        for who in contenders:
            r = results[folder.name].get(who)
            if isinstance(r, dict):
                row.append(f"{who} {r.get('outcome')} {r.get('score_us') or float('nan'):.1f} us")
        run = results[folder.name].get("campaign_run")
        if isinstance(run, dict):
            row.append(f"campaign {run.get('evaluations', 0)} evaluations")
        real = results[folder.name].get("eval_py")
        if isinstance(real, dict):
            row.append(f"eval.py {'passed' if real['passed'] else 'FAILED'}")
        print(" | ".join(row), flush=True)
        if not low.get("lowered"):
            print(f"  {folder.name}: {low.get('reason')}", flush=True)
    if args.campaign_seconds > 0:
        for rival in ("seed", "torch.compile"):
            print(_against(results, rival), flush=True)
    return 0


def _against(results: dict[str, dict[str, object]], rival: str) -> str:
    """How the campaigns' best kernels fare against ``rival``, timed in this run: on how many
    folders faster, and the geometric mean of the speed-ups where both passed. Where a campaign's
    best is the seed itself, it counts as the seed (1.0x), not as a second timing of it."""

    def score(folder: dict[str, object], who: str) -> float | None:
        r = folder.get(who)
        ok = isinstance(r, dict) and r.get("outcome") == "passed" and r.get("score_us")
        return float(r["score_us"]) if ok else None  # type: ignore[index]

    def best(folder: dict[str, object]) -> float | None:  # a campaign whose best is the seed gained nothing
        run = folder.get("campaign_run")
        if rival == "seed" and isinstance(run, dict) and run.get("author") == "seed":
            return score(folder, "seed")
        return score(folder, "campaign")

    pairs = [(best(f), score(f, rival)) for f in results.values()]
    both = [(a, b) for a, b in pairs if a is not None and b is not None]
    if not both:
        return f"campaign against {rival}: no folder where both passed"
    faster = sum(a < b for a, b in both)
    gmean = math.exp(sum(math.log(b / a) for a, b in both) / len(both))
    return (
        f"campaign against {rival}: faster on {faster} of {len(results)} folders "
        f"({len(both)} where both passed), geometric mean {gmean:.2f}x"
    )


if __name__ == "__main__":
    sys.exit(main())
