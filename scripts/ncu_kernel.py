"""Run one submission on one shape under a profiler's range, for Nsight Compute: its first calls
(compiles, first-call tuning) run outside the range, then one call inside it, so that
``ncu --profile-from-start off`` sees exactly one call's kernels.

    ncu --profile-from-start off --clock-control none --section WarpStateStats ... \\
        python scripts/ncu_kernel.py FILE.py --shape 1024x1536x7168
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("file")
    p.add_argument("--shape", default="1024x1536x7168", help="MxNxK")
    p.add_argument("--task", default=str(ROOT / "evaluator" / "tasks" / "amd_fp8_mm"))
    p.add_argument("--warm-calls", type=int, default=3)
    args = p.parse_args()
    try:
        m, n, k = (int(x) for x in args.shape.lower().split("x"))
    except ValueError:
        print(f"ncu_kernel: --shape must be MxNxK, not {args.shape!r}", file=sys.stderr)
        return 2
    if not Path(args.file).is_file():
        print(f"ncu_kernel: no such file: {args.file}", file=sys.stderr)
        return 2
    import torch

    if not torch.cuda.is_available():
        print("ncu_kernel: no GPU visible; it runs one call on a GPU for Nsight Compute", file=sys.stderr)
        return 2
    from kernel_scientist.evaluator import load_task
    from kernel_scientist.evaluator.sandbox import generate_input, import_reference, import_submission

    task = load_task(Path(args.task))
    ref = import_reference(task.modules)
    fn = import_submission(Path(args.file).read_text(), Path(tempfile.mkdtemp()))
    shape = task.benchmarks[0].__class__(m, n, k, 7)
    data = generate_input(ref, shape, "cuda")
    for _ in range(args.warm_calls):
        fn(data)
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStart()
    fn(data)
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
