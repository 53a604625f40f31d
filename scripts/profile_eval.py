"""Where one evaluation's time goes inside the harness: the local backend's protocol (the same
request a campaign sends) run in this process under cProfile, for a trusted file. It prints the
harness's phases and the functions with the most cumulative time (Triton's compiler, ptxas, the
submission's first-call tuning, its launch recording), so that evaluations per GPU-hour can be
improved where the time is.

    python scripts/profile_eval.py FILE.py [--top 30] [--out profile.txt]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("file")
    p.add_argument("--task", default=str(ROOT / "evaluator" / "tasks" / "amd_fp8_mm"))
    p.add_argument("--top", type=int, default=30)
    p.add_argument("--max-calls", type=int, default=20)
    p.add_argument("--out", default="")
    args = p.parse_args()
    if not Path(args.file).is_file():
        print(f"profile_eval: no such file: {args.file}", file=sys.stderr)
        return 2
    import torch

    if not torch.cuda.is_available():
        print("profile_eval: no GPU visible; it profiles an evaluation on a GPU", file=sys.stderr)
        return 2
    from kernel_scientist.evaluator import LocalBackend, load_task
    from kernel_scientist.evaluator import _gpu_harness as harness

    task = load_task(Path(args.task))
    backend = LocalBackend(task, gpus=["0"], max_calls=args.max_calls, shape_budget_s=1.0, own_kernel=True, spare=False)
    req = backend.request(Path(args.file).read_text(), secret_seed=1)
    os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix="ks-profile-")  # a cold cache, as in a campaign
    os.chdir(tempfile.mkdtemp(prefix="ks-profile-run-"))
    profile = cProfile.Profile()
    result = profile.runcall(harness.run, req)
    text = io.StringIO()
    print(f"{result.status}: {result.reason or 'ok'}; phases {result.phases}", file=text)
    stats = pstats.Stats(profile, stream=text).sort_stats("cumulative")
    stats.print_stats(args.top)
    stats.sort_stats("tottime").print_stats(15)
    print(text.getvalue())
    if args.out:
        Path(args.out).write_text(text.getvalue())
    return 0


if __name__ == "__main__":
    sys.exit(main())
