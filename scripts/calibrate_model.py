"""Honesty check of the timing model: the task's seed kernel on the H200 spec vs measured anchors.

Prints, per ranked shape, the "plain Triton precise" time measured on a real H200
(docs/task-facts.md: best of 48 configs per shape, strided loads or a .contiguous() pre-pass,
200.1 us geomean) next to two model figures: the task's seed submission as it is (one fixed
config, strided loads; run through the simulated backend with noise off), and the model's best
over a comparable family of plain precise kernels (tiles, warps, stages, strided or pre-pass).
The family figure is the like-for-like comparison. Nothing is fitted to these numbers: a ratio far
from 1 is a finding about the model, to be read, not tuned away.

Usage: python scripts/calibrate_model.py [--device h200] [--task evaluator/tasks/amd_fp8_mm]
"""

from __future__ import annotations

import argparse
import itertools
import math
import sys
from pathlib import Path

import trio

from blackboard import Shape
from evaluator import DEVICES, Launch, SimulatedBackend, TensorArg, TorchOp, geomean, load_task
from evaluator.harness import ModelInfeasible, launch_time_us, torch_op_time_us

# docs/task-facts.md, "plain Triton precise" column (us), keyed by (m, n, k).
ANCHOR_US = {
    (1024, 1536, 7168): 166, (1024, 3072, 1536): 62, (1024, 576, 7168): 108, (1024, 7168, 256): 33,
    (1024, 7168, 2048): 171, (1024, 4608, 7168): 410, (1024, 7168, 2304): 190, (1024, 512, 7168): 74,
    (1024, 4096, 512): 32, (6144, 1536, 7168): 694, (6144, 3072, 1536): 264, (6144, 576, 7168): 336,
    (6144, 7168, 256): 124, (6144, 7168, 2048): 678, (6144, 4608, 7168): 1585, (6144, 7168, 2304): 776,
    (6144, 512, 7168): 278, (6144, 4096, 512): 132,
}
ANCHOR_GEOMEAN_US = 200.1
REFERENCE_GEOMEAN_US = 1133.5  # the PyTorch reference (fp32 dequantize + fp32 matmul) on the H200


def family_best_us(shape: Shape, device: str) -> float:
    """The model's best plain precise kernel for one shape, over a family like the anchor's."""
    dev = DEVICES[device]
    m, n, k = shape.m, shape.n, shape.k
    best = math.inf
    for bm, bn, warps, stages, prepass in itertools.product((64, 128), (64, 128, 256), (4, 8), (2, 3, 4), (False, True)):
        launch = Launch(
            kernel="plain", grid=[-(-m // bm) * -(-n // bn), 1, 1], num_warps=warps, num_stages=stages,
            constexprs={"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": 128, "GROUP_M": 8}, extra={},
            tensors=[TensorArg("a", [m, k], [k, 1] if prepass else [1, m], "float8", 1),
                     TensorArg("b", [n, k], [k, 1] if prepass else [1, n], "float8", 1),
                     TensorArg("c", [m, n], [n, 1], "bfloat16", 2)],
            has_dot=True, precise_acc=True, upcast_bf16=False, upcast_fp32=False, atomic=False)
        try:
            t = launch_time_us(launch, shape, dev).time_us
        except ModelInfeasible:
            continue
        if prepass:
            t += sum(torch_op_time_us(TorchOp("aten.clone", r * k, r * k), dev).time_us for r in (m, n))
        best = min(best, t)
    return best


async def main(task_dir: str, device: str) -> int:
    task = load_task(task_dir)
    if task.seed_source is None:
        print(f"{task_dir} has no submission.py seed", file=sys.stderr)
        return 1
    with SimulatedBackend(task, device=device, noise=0.0, timeout_s=120.0) as backend:
        report = await backend.evaluate(task.seed_source, submission_id=0, secret_seed=0)
    if report.score_us is None:
        print(f"the seed did not pass: {report.outcome}: {report.reason}", file=sys.stderr)
        return 1
    print(f"model {report.provenance.model} on {report.provenance.device}; seed kernel, noise off")
    if device != "h200":
        print(f"note: the anchors were measured on an H200, not on {device}")
    print(f"{'shape':>16} {'anchor us':>10} {'seed us':>9} {'seed/anc':>9} {'family us':>10} {'fam/anc':>8} {'SoL us':>8}")
    seed_r, fam_r, fams = [], [], []
    for r in report.shapes:
        anchor = ANCHOR_US[(r.shape.m, r.shape.n, r.shape.k)]
        fam = family_best_us(r.shape, device)
        fams.append(fam)
        seed_r.append(r.time_us / anchor)
        fam_r.append(fam / anchor)
        print(f"{r.shape.label():>16} {anchor:>10.1f} {r.time_us:>9.1f} {seed_r[-1]:>9.2f} {fam:>10.1f} "
              f"{fam_r[-1]:>8.2f} {r.sol_us:>8.1f}")
    print(f"{'geomean':>16} {ANCHOR_GEOMEAN_US:>10.1f} {report.score_us:>9.1f} {report.score_us / ANCHOR_GEOMEAN_US:>9.2f} "
          f"{geomean(fams):>10.1f} {geomean(fams) / ANCHOR_GEOMEAN_US:>8.2f}")
    with SimulatedBackend(task, device=device, noise=0.0) as backend:
        ref = backend.reference_report()
    print(f"{'reference':>16} {REFERENCE_GEOMEAN_US:>10.1f} {ref.score_us:>9.1f} {ref.score_us / REFERENCE_GEOMEAN_US:>9.2f}"
          "   (the task's PyTorch reference, modelled vs measured)")
    print(f"ratio ranges: seed {min(seed_r):.2f}..{max(seed_r):.2f}, family {min(fam_r):.2f}..{max(fam_r):.2f} "
          "(1.00 = the model matches the H200)")
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="h200")
    parser.add_argument("--task", default=str(Path(__file__).resolve().parents[1] / "evaluator" / "tasks" / "amd_fp8_mm"))
    args = parser.parse_args()
    sys.exit(trio.run(main, args.task, args.device))
