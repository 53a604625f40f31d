"""Each folder's PyTorch seed lowered by Inductor on this machine, then the seed, the lowered kernel
and torch.compile of the seed evaluated by the local backend in one run (compile time excluded:
the harness's untimed warm-up call per shape compiles).

    python3 scripts/bench_lowering.py FOLDER... --out DIR [--mode max-autotune-no-cudagraphs]

Writes DIR/lowering.json (per folder: the lowering's outcome and source, each contender's verdict,
score and per-shape times) and DIR/captures.json.gz (what Inductor wrote for each seed: the fixtures the
lowering's CPU tests read) and prints a table. Without a GPU the evaluations use the simulated
backend (modelled times, labelled so).
"""

from __future__ import annotations

import argparse
import gzip
import importlib.metadata
import json
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


def _evaluate(path: Path, folder: Path, backend: str, timeout: float) -> dict[str, object]:
    cmd = [sys.executable, "-P", "-m", "kernel_scientist", "evaluate", str(path), "--task", str(folder)]
    cmd += ["--backend", backend, "--json", "--timeout", str(timeout)]
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


def _label(shape: dict[str, object]) -> str:
    return " ".join(f"{k}={v}" for k, v in sorted(shape.items()) if k != "seed")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("folders", nargs="+", type=Path)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--mode", default="max-autotune-no-cudagraphs", help="torch.compile's mode for the comparison")
    p.add_argument("--timeout", type=float, default=240.0, help="wall seconds per evaluation")
    p.add_argument("--no-compile", action="store_true", help="skip the torch.compile contender")
    p.add_argument("--budget", type=float, default=1e9, help="wall seconds after which no evaluation starts")
    args = p.parse_args()
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

    def save() -> None:  # after every evaluation: a run cut short still brings back what it measured
        (args.out / "lowering.json").write_text(json.dumps({"meta": meta, "folders": results}, indent=1))

    save()
    contenders = ["lowered", "seed"] + ([] if args.no_compile else ["torch.compile"])
    for who in contenders:  # one contender across every folder, then the next: the budget cuts the last
        for folder, low in lowerings.items():
            if time.monotonic() - started > args.budget:
                results[folder.name][who] = {"outcome": "not run (budget)"}
                continue
            seed = folder / "submission.py"
            path = scratch / f"{folder.name}-{who}.py"
            if who == "seed":
                path = seed
            elif who == "lowered":
                if not low.get("lowered"):
                    continue
                path.write_text(str(low["source"]))
            else:
                path.write_text(  # the seed need not import torch itself (GPU MODE's seeds often don't)
                    seed.read_text()
                    + "\n\nimport torch as _torch\n\n"
                    + f"custom_kernel = _torch.compile(custom_kernel, mode={args.mode!r}, dynamic=False)\n"
                )
            results[folder.name][who] = _evaluate(path, folder, backend, args.timeout)
            save()
    for folder, low in lowerings.items():
        row = [f"{folder.name:16s}", f"lowering {'ok' if low.get('lowered') else 'refused'}"]
        for who in contenders:
            r = results[folder.name].get(who)
            if isinstance(r, dict):
                row.append(f"{who} {r.get('outcome')} {r.get('score_us') or float('nan'):.1f} us")
        print(" | ".join(row), flush=True)
        if not low.get("lowered"):
            print(f"  {folder.name}: {low.get('reason')}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
