"""Does a submission's in-submission tuner pick the same setting in every process, and how far is
its pick from the fastest one? Each of --processes fresh processes imports the submission, makes
its first (tuning) call on each ranked shape, reads the settings the tuner kept, then times every
setting the tuner could have kept with do_bench (the kernel launch the tuner timed) and the whole
call with do_bench. A spread between processes that follows the picks is the tuner's noise; one
with the same picks is the process's (placement, clocks).

    python scripts/probe_tuner.py FILE.py --processes 3 --out probe-tuner.json

Only submissions with the catalogue's tuner (``tuned``, ``TUNING_SPACE``, ``TUNING_SWITCHES``)
can be probed; any other gets one line and exit 1. The first process compiles into Triton's cache,
so the later processes' first calls time the tuning itself. Figures stay in its output.
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _child(path: Path, only: list[str]) -> dict:
    import torch
    import triton
    from kernel_scientist.evaluator import load_task
    from kernel_scientist.evaluator.harness import generate_input, import_reference

    sys.path.insert(0, str(ROOT / "scripts"))
    from bench_leaderboard import _kernel_from_source

    task = load_task(ROOT / "evaluator" / "tasks" / "amd_fp8_mm")
    ref = import_reference(task.modules)
    fn = _kernel_from_source(str(path), path.read_text(), task.modules)
    names = fn.__globals__
    seen: list = []
    original = names["tuned"]

    def spy(key, cfg, launch):
        seen.append((key, cfg, launch))
        return original(key, cfg, launch)

    names["tuned"] = spy
    out = {}
    for shape in task.benchmarks:
        if only and shape.label() not in only:
            continue
        data = generate_input(ref, shape, "cuda")
        del seen[:]
        began = time.perf_counter()
        fn(data)  # the untimed first call: compiles and tunes (and asks again for each launch)
        torch.cuda.synchronize()
        first_s = time.perf_counter() - began
        first = {key: (cfg, launch) for key, cfg, launch in seen}
        picks = []
        for key, (cfg, launch) in first.items():
            kept = names["_TUNED"][key]
            switches = [[(n, v) for v in vs] for n, vs in names["TUNING_SWITCHES"].items() if n in cfg]
            timed = []
            for (bm, bn, w, s), choice in itertools.product(names["TUNING_SPACE"], itertools.product(*switches)):
                trial = dict(cfg, BLOCK_M=bm, BLOCK_N=bn, num_warps=w, num_stages=s, **dict(choice))
                try:
                    us = 1000 * triton.testing.do_bench(lambda t=trial, go=launch: go(t), warmup=5, rep=50)
                except Exception:  # noqa: BLE001 - a setting this GPU cannot run is not a candidate
                    continue
                timed.append((us, _label(trial)))
            timed.sort()
            kept_us = next((us for us, label in timed if label == _label(kept)), None)
            picks.append(
                {
                    "kept": _label(kept),
                    "kept_us": kept_us,
                    "fastest": timed[0][1] if timed else None,
                    "fastest_us": timed[0][0] if timed else None,
                    "all": timed,
                }
            )
        call_us = 1000 * triton.testing.do_bench(lambda d=data: fn(d), warmup=5, rep=50)
        out[shape.label()] = {"call_us": call_us, "first_call_s": first_s, "launches": picks}
    return out


_TUNER_NAMES = ("tuned", "TUNING_SPACE", "TUNING_SWITCHES", "_TUNED")


def _label(trial: dict) -> str:
    keys = ("BLOCK_M", "BLOCK_N", "num_warps", "num_stages", "STREAM_K", "WS_LOOP")
    return "x".join(str(trial[k]) for k in keys if k in trial)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("file", type=Path)
    p.add_argument("--processes", type=int, default=3)
    p.add_argument("--shapes", default="", help="comma-separated shape labels (default: every ranked shape)")
    p.add_argument("--out", type=Path, default=Path("probe-tuner.json"))
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if not args.file.is_file():
        raise SystemExit(f"probe_tuner: no such file: {args.file}")
    text = args.file.read_text(errors="replace")
    if not all(f"{name} =" in text or f"def {name}(" in text for name in _TUNER_NAMES):
        raise SystemExit(f"probe_tuner: {args.file} carries no in-submission tuner ({', '.join(_TUNER_NAMES)})")
    only = [s for s in args.shapes.split(",") if s]
    if args.child:
        print(json.dumps(_child(args.file, only)))
        return 0
    import torch

    if not torch.cuda.is_available():
        raise SystemExit("probe_tuner: no CUDA or ROCm GPU here (torch.cuda.is_available() is False)")
    runs = []
    for i in range(args.processes):
        cmd = [sys.executable, __file__, str(args.file), "--child", "--shapes", args.shapes]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            last = (done.stderr.strip().splitlines() or ["no message"])[-1]
            raise SystemExit(f"probe_tuner: process {i} failed: {last}")
        runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
    args.out.write_text(json.dumps(runs, indent=1))
    for label in runs[0]:
        calls = " / ".join(f"{r[label]['call_us']:.1f}" for r in runs)
        firsts = " / ".join(f"{r[label]['first_call_s']:.2f}" for r in runs)
        print(f"{label}: call do_bench {calls} us; first call {firsts} s")
        for j in range(len(runs[0][label]["launches"])):
            for r in runs:
                pick = r[label]["launches"][j]
                loss = (
                    pick["kept_us"] / pick["fastest_us"] - 1 if pick["kept_us"] and pick["fastest_us"] else float("nan")
                )
                print(
                    f"    kept {pick['kept']:>16} {pick['kept_us'] or 0:8.1f} us   fastest {pick['fastest']:>16} "
                    f"{pick['fastest_us'] or 0:8.1f} us   kept is {100 * loss:+.1f}%"
                )
    losses = [
        r[lab]["launches"][j]["kept_us"] / r[lab]["launches"][j]["fastest_us"]
        for r in runs
        for lab in r
        for j in range(len(r[lab]["launches"]))
        if r[lab]["launches"][j]["kept_us"] and r[lab]["launches"][j]["fastest_us"]
    ]
    if losses:
        print(
            f"kept against fastest, geomean over shapes and processes: "
            f"{100 * (statistics.geometric_mean(losses) - 1):+.2f}%"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
