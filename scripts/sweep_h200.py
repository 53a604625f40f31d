"""Measure what the timing model must predict, in one GPU run: launch configurations of several
forms of the block-scaled fp8 GEMM on the task's 18 ranked shapes, plus the task's seed, its
PyTorch reference and (optionally) a campaign's best kernel, timed in the same run.

It is the calibration data of evaluator/model/_timing.py (scripts/calibrate_model.py fits the model's
constants on part of it and reports its fidelity on the rest). Forms:

  precise  one fp8 ``tl.dot(..., max_num_imprecise_acc=0)`` per K step (the seed's form)
  fp16     fp8 tiles converted to fp16 before the dot (exact for e4m3)
  bf16     fp8 tiles converted to bf16 before the dot (exact)
  fast     fp8 dot with the default (reduced-precision) accumulation: fails the check on Hopper,
           kept as the raw wgmma rate

each with the operands as the task gives them (``strided``: column-major, M- and N-contiguous) or
K-contiguous (``kmajor``: copied before timing, so the row is the GEMM launch alone; the copy is
timed on its own as form ``copy``), in tiles BLOCK_M x BLOCK_N with BLOCK_K 64 or 128 (one scale
block per 128 of K either way), 4 or 8 warps, 2 to 5 stages, grouped (GROUP_M 8) or row-major tile
order, and split-K (SPLIT_K programs per tile adding fp32 partials atomically into a zeroed
buffer, then one cast to bf16: three launches in the timed call).

Every GEMM row is the median of ``triton.testing.do_bench`` (it clears a 256 MB buffer before
each call), the output checked against the reference with the task's tolerance (a failing row
keeps its time, marked). The seed, the reference and the extra kernels are also timed with the
leaderboard protocol (host clock around synchronize + one call + synchronize, L2 flushed before
each call): the difference is the host overhead per call that the model adds. Variants run in a
fixed pseudo-random order interleaved across forms, so a run cut short by ``--deadline`` still
covers every form; the JSON is rewritten after every variant.

    python scripts/sweep_h200.py --out $OUT/calib-sweep.json [--deadline 400]
        [--kernel NAME=FILE.py ...] [--campaign-best FILE.sqlite ...]
    TRITON_INTERPRET=1 python scripts/sweep_h200.py --dry-run --out sweep.json   # CPU, tiny shapes
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch
import triton
from _gemm_forms import ATOL, RTOL, strided_args, strided_gemm

ROOT = Path(__file__).resolve().parents[1]

FORMS = {"precise": 0, "bf16": 3, "fp16": 4, "fast": 5}
DRY_SHAPES = [(64, 128, 256, 11), (128, 192, 384, 12)]


@triton.jit
def empty_kernel(x_ptr):
    pass


def variant_name(v: dict) -> str:
    return (
        f"{v['form']}/{v['layout']}/{v['bm']}x{v['bn']}x{v['bk']}/w{v['warps']}s{v['stages']}"
        f"/g{v['group_m']}/sk{v['split_k']}"
    )


def make_call(v: dict):
    """The timed callable of one variant on prepared data (a, b, a_scale, b_scale, c)."""
    bm, bn, bk, split = v["bm"], v["bn"], v["bk"], v["split_k"]
    scratch: dict = {}

    def call(data):
        a, b, a_s, b_s, c = data
        m, k = a.shape
        n = b.shape[0]
        out = c
        if split > 1:
            if "ws" not in scratch or scratch["ws"].shape != c.shape:
                scratch["ws"] = torch.empty(c.shape, dtype=torch.float32, device=c.device)
            out = scratch["ws"]
            out.zero_()
        grid = (triton.cdiv(m, bm) * triton.cdiv(n, bn), split)
        strided_gemm[grid](
            *strided_args((a, b, a_s, b_s, out)),
            BLOCK_M=bm,
            BLOCK_N=bn,
            BLOCK_K=bk,
            MODE=FORMS[v["form"]],
            GROUP_M=v["group_m"],
            SPLIT_K=split,
            num_warps=v["warps"],
            num_stages=v["stages"],
        )
        if split > 1:
            c.copy_(out)
        return c

    return call


def variants(seed: int = 14) -> list[dict]:
    """The sweep's variants: per form and layout, a fixed pseudo-random sample of the launch grid,
    interleaved across the groups so that any prefix covers every form."""
    rng = random.Random(seed)
    tiles = [(64, 64), (64, 128), (128, 64), (128, 128), (64, 256), (128, 256), (256, 128), (256, 64)]
    grid = [(bm, bn, bk, w, s) for bm, bn in tiles for bk in (64, 128) for w in (4, 8) for s in (2, 3, 4, 5)]
    plan = [
        ("precise", "strided", 36),
        ("fp16", "strided", 24),
        ("precise", "kmajor", 18),
        ("fp16", "kmajor", 14),
        ("bf16", "strided", 12),
        ("bf16", "kmajor", 8),
        ("fast", "kmajor", 8),
    ]
    groups: list[list[dict]] = []
    for form, layout, count in plan:
        picks = rng.sample(grid, count)
        groups.append(
            [
                dict(form=form, layout=layout, bm=bm, bn=bn, bk=bk, warps=w, stages=s, group_m=8, split_k=1)
                for bm, bn, bk, w, s in picks
            ]
        )
    # Tile order (row-major, as the seed) and split-K on the task's layout.
    order = [
        dict(form=f, layout="strided", bm=bm, bn=bn, bk=128, warps=w, stages=s, group_m=1, split_k=1)
        for f, bm, bn, w, s in [
            ("precise", 64, 64, 4, 2),
            ("precise", 128, 128, 8, 3),
            ("precise", 64, 128, 4, 4),
            ("fp16", 64, 128, 4, 3),
            ("fp16", 128, 64, 4, 4),
            ("precise", 128, 64, 4, 3),
        ]
    ]
    splits = [
        dict(form=f, layout="strided", bm=bm, bn=bn, bk=128, warps=w, stages=s, group_m=8, split_k=sk)
        for f, bm, bn, w, s, sk in [
            ("precise", 128, 128, 8, 3, 2),
            ("precise", 64, 128, 4, 4, 4),
            ("precise", 128, 64, 4, 3, 8),
            ("fp16", 64, 128, 4, 3, 2),
            ("fp16", 128, 128, 8, 3, 4),
            ("precise", 64, 64, 4, 2, 3),
            ("fp16", 128, 64, 4, 4, 8),
            ("precise", 128, 256, 8, 3, 2),
        ]
    ]
    groups += [order, splits]
    out: list[dict] = []
    while any(groups):
        for g in groups:
            if g:
                out.append(g.pop(0))
    return out


def leaderboard_us(fn, flush, sync, calls: int) -> dict:
    """The leaderboard's protocol: host clock around synchronize + one call + synchronize, the L2
    flushed before each call. Mean and median over ``calls``."""
    times = []
    for _ in range(calls):
        if flush is not None:
            flush.zero_()
        sync()
        t0 = time.perf_counter()
        fn()
        sync()
        times.append((time.perf_counter() - t0) * 1e6)
    return {"mean_us": round(statistics.fmean(times), 2), "median_us": round(statistics.median(times), 2)}


def _campaign_best(path: Path) -> tuple[str, str, float]:
    """The source of the best measured kernel of a campaign file, its label and its recorded score."""
    db = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)  # writes nothing beside it
    row = db.execute(
        "SELECT e.kernel_id, json_extract(e.body, '$.report.score_us'), json_extract(k.body, '$.source') "
        "FROM evaluation e JOIN kernel k ON k.id = e.kernel_id "
        "WHERE json_extract(e.body, '$.report.score_us') IS NOT NULL "
        "AND json_extract(e.body, '$.report.provenance.simulated') = 0 "
        "ORDER BY json_extract(e.body, '$.report.score_us') LIMIT 1"
    ).fetchone()
    if row is None:
        raise SystemExit(
            f"sweep_h200: {path} holds no measured evaluation with a score; pass a campaign file of a local (GPU) run"
        )
    return f"{path.stem} kernel {row[0]}", row[2], float(row[1])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, default=Path("calib-sweep.json"))
    p.add_argument("--task", type=Path, default=ROOT / "evaluator" / "tasks" / "amd_fp8_mm")
    p.add_argument(
        "--deadline", type=float, default=400.0, help="stop starting new variants this many seconds after the start"
    )
    p.add_argument("--rep-ms", type=float, default=12.0, help="do_bench repetition time per shape")
    p.add_argument(
        "--kernel",
        action="append",
        default=[],
        metavar="NAME=FILE",
        help="a submission file to time like the seed (repeatable)",
    )
    p.add_argument(
        "--campaign-best",
        type=Path,
        action="append",
        help="a campaign .sqlite: time its best measured kernel too (repeatable)",
    )
    p.add_argument("--limit", type=int, help="run only the first N variants")
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="CPU, Triton's interpreter (set TRITON_INTERPRET=1), two tiny shapes, one call per timing",
    )
    args = p.parse_args(argv)
    if args.dry_run and os.environ.get("TRITON_INTERPRET") != "1":
        raise SystemExit(
            "sweep_h200: --dry-run runs the kernels in Triton's interpreter; set TRITON_INTERPRET=1 in the environment"
        )

    from kernel_scientist.evaluator import geomean, load_task
    from kernel_scientist.evaluator.sandbox import import_reference, import_submission

    started = time.monotonic()
    cuda = not args.dry_run
    if cuda and not torch.cuda.is_available():
        raise SystemExit("sweep_h200: no GPU visible; use --dry-run (with TRITON_INTERPRET=1) for a CPU check")
    device = "cuda" if cuda else "cpu"
    task = load_task(args.task)
    ref = import_reference(task.modules)
    shapes = [(s.m, s.n, s.k, s.seed) for s in task.benchmarks] if cuda else DRY_SHAPES
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    flush = torch.empty(64 * 2**20, dtype=torch.float32, device=device) if cuda else None

    def bench(fn) -> float:
        if cuda:
            return float(triton.testing.do_bench(fn, warmup=3, rep=args.rep_ms))
        t0 = time.perf_counter()
        fn()
        return (time.perf_counter() - t0) * 1e3

    inputs = {}
    for m, n, k, seed in shapes:
        data = ref.generate_input(m=m, n=n, k=k, seed=seed, device=device)
        want = ref.ref_kernel(tuple(t.clone() for t in data)).float()
        kmajor = (data[0].contiguous(), data[1].contiguous(), *data[2:])
        inputs[f"{m}x{n}x{k}"] = (data, kmajor, want)
    meta = {
        "gpu": torch.cuda.get_device_name(0) if cuda else "cpu (dry run)",
        "torch": torch.__version__,
        "triton": triton.__version__,
        "date": time.strftime("%Y-%m-%d"),
        "sm_count": torch.cuda.get_device_properties(0).multi_processor_count if cuda else None,
        "method": "GEMM rows: median of triton.testing.do_bench (warmup 3 ms, rep "
        f"{args.rep_ms:g} ms, 256 MB cleared before each call), one input set per shape; "
        "leaderboard rows: host clock around synchronize + call + synchronize, L2 flushed",
        "tolerance": {"rtol": RTOL, "atol": ATOL},
    }
    result: dict = {"meta": meta, "host": {}, "submissions": {}, "copy": {}, "rows": []}

    def save() -> None:
        result["meta"]["elapsed_s"] = round(time.monotonic() - started, 1)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=0))

    # Host floors of the protocol, then the whole submissions (seed, reference, extras).
    x = torch.zeros(1, device=device)
    calls = 200 if cuda else 2
    result["host"] = {
        "empty triton launch": leaderboard_us(lambda: empty_kernel[(1,)](x), flush, sync, calls),
        "torch zero_": leaderboard_us(lambda: x.zero_(), flush, sync, calls),
        "empty call": leaderboard_us(lambda: None, flush, sync, calls),
    }
    subs = {"seed": task.seed_source}
    for spec in args.kernel:
        name, _, path = spec.partition("=")
        subs[name] = Path(path).read_text()
    for db in args.campaign_best or []:
        label, source, score = _campaign_best(db)
        subs[label] = source
        result.setdefault("recorded_scores", {})[label] = score
    fns = {"reference": ref.ref_kernel}
    for name, source in subs.items():
        fn = import_submission(source, Path(tempfile.mkdtemp()))
        if fn is None:
            raise SystemExit(f"sweep_h200: {name} defines no custom_kernel(data)")
        fns[name] = fn
    for name, fn in fns.items():
        per = {}
        for label, (data, _, want) in inputs.items():
            try:
                data[-1].fill_(float("nan"))
                got = fn(data).float()
                ok = bool(((got - want).abs() <= ATOL + RTOL * want.abs()).all())
                us = round(1000 * bench(lambda: fn(data)), 2)  # noqa: B023 - called at once
                lb = leaderboard_us(lambda: fn(data), flush, sync, 10 if name == "reference" else 30) if cuda else {}  # noqa: B023 - called at once
                per[label] = {"do_bench_us": us, "passed": ok, **{f"leaderboard_{k}": v for k, v in lb.items()}}
            except Exception as exc:  # noqa: BLE001 - a submission that fails is a result
                per[label] = {"error": f"{type(exc).__name__}: {str(exc)[:200]}"}
        times = [r["do_bench_us"] for r in per.values() if "do_bench_us" in r]
        result["submissions"][name] = {
            "shapes": per,
            "geomean_do_bench_us": round(geomean(times), 2) if len(times) == len(inputs) else None,
        }
        print(
            f"{name}: geomean {result['submissions'][name]['geomean_do_bench_us']} us [{time.monotonic() - started:.0f} s]",
            flush=True,
        )
    for label, (data, _, _) in inputs.items():  # the K-contiguous pre-pass a kmajor kernel needs
        result["copy"][label] = round(1000 * bench(lambda: (data[0].contiguous(), data[1].contiguous())), 2)  # noqa: B023 - called at once
    save()

    plan = variants()
    if args.limit:
        plan = plan[: args.limit]
    elif not cuda:  # one variant of each kind of launch: forms, layouts, tile order, split-K
        kinds: dict[tuple, dict] = {}
        for v in plan:
            kinds.setdefault((v["form"], v["layout"], v["group_m"], v["split_k"] > 1), v)
        plan = [v for v in kinds.values() if v["form"] != "fast"]
    for i, v in enumerate(plan):
        if time.monotonic() - started > args.deadline:
            print(f"deadline: {len(plan) - i} of {len(plan)} variants not run", flush=True)
            result["meta"]["variants_not_run"] = len(plan) - i
            break
        call = make_call(v)
        error = None
        for label, (data, kdata, want) in inputs.items():
            use = kdata if v["layout"] == "kmajor" else data
            row = {**v, "shape": label, "us": None, "passed": False, "mismatched": None}
            try:
                use[-1].fill_(float("nan"))
                got = call(use).float()
                row["mismatched"] = int((~torch.isclose(got, want, rtol=RTOL, atol=ATOL)).sum())
                row["passed"] = row["mismatched"] == 0
                row["us"] = round(1000 * bench(lambda: call(use)), 2)  # noqa: B023 - called at once
            except Exception as exc:  # noqa: BLE001 - out of shared memory etc.: a result
                error = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"
                row["error"] = error
                result["rows"].append(row)
                break  # a config that cannot compile fails the same way on every shape
            result["rows"].append(row)
        done = [r for r in result["rows"] if variant_name(r) == variant_name(v) and r["us"]]
        gm = geomean([r["us"] for r in done]) if len(done) == len(inputs) else float("nan")
        print(
            f"{i + 1:3d}/{len(plan)} {variant_name(v):42s} geomean {gm:8.1f} us "
            f"passed {sum(r['passed'] for r in done)}/{len(inputs)}{'  ' + error if error else ''} "
            f"[{time.monotonic() - started:.0f} s]",
            flush=True,
        )
        save()
    save()
    return 0


if __name__ == "__main__":
    sys.exit(main())
