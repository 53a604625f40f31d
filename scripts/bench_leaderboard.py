"""Benchmark submissions on a GPU under a leaderboard's protocol and under do_bench, in one run, on
the task's ranked shapes, with the PyTorch reference, torch's block-scaled ``_scaled_mm`` (after
making a and b K-contiguous) and the seed kernel in the same run. Prints per shape and geometric
mean, pass/fail, and the fraction of the speed of light; writes everything as JSON.

Protocols: ``eval.py`` (the headline) is GPU MODE's eval.py in leaderboard mode, its own loop
(``evaluator.sandbox.time_shape_eval_py``): fresh inputs and a copy of them before every call,
the host clock between two device-wide synchronizes around the call and nothing else in that
window, the folder's check on the copy after it, the mean of up to --max-calls calls (stopping at
a standard error of 0.1% of the mean or when --budget is spent). Then, from the harness's own
timed calls (``time_shape``: fresh inputs and an L2 flush before every call, every output
checked): ``harness clock`` is the host clock around the call with the device events recorded
inside it (24-28 us above eval.py's loop for the best kernel on an H200 in three calls:
docs/results.md#two-protocols-and-why-their-numbers-differ), ``events`` the device events
around the call, as the campaign's harness scores, and ``host work`` the host time until the
call returned. With --do-bench, the published anchors' protocol: the median
of triton.testing.do_bench on one input set (launches queued back to back: GPU time only). A
failed check is recorded and timing goes on, so a fast but wrong method still gets a time. The
methods are timed shape by shape, each in turn on one shape, in the reverse order on every other
shape (the host's speed drifts within a run: timed one method after another, the drift would
show as a difference between methods); each method's first call on a shape, in each loop, is an
untimed warm-up (compilation, first-call tuning), as in the harness.

    python scripts/bench_leaderboard.py [FILE.py ...] [--db runs/x.sqlite ...] [--do-bench] [--out bench.json]
        [--unseen N [--unseen-seed S]] [--eval-py PATH/TO/eval.py]

With --eval-py, each submission (the seed, the files, the blackboards' kernels) is also run under
GPU MODE's own eval.py in leaderboard mode, in its own process and run directory
(``real_eval_py.py``): the public harness itself, reported as ``real eval.py``.

With --unseen N the ranked shapes are replaced by N shapes nobody tuned for, drawn log-uniformly
(m and n multiples of 64 up to 8192 and 32768, k a multiple of 128 up to 16384; GEMM tasks only).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent  # the checkout, for the default task folder


def _kernel_from_source(what: str, source: str, modules: dict[str, str] | None = None):
    """The submission's custom_kernel, imported from its own temporary folder, with the task's own
    modules beside it as in a run directory (a public submission does ``from task import input_t``)."""
    from kernel_scientist.evaluator.sandbox import import_submission, isolate_candidate

    folder = Path(tempfile.mkdtemp())
    isolate_candidate(modules or {}, folder)
    sys.path.insert(0, str(folder))
    try:
        fn = import_submission(source, folder)
    except Exception as exc:  # the submission's own import-time code may raise anything
        raise SystemExit(f"bench_leaderboard: {what} failed to import: {type(exc).__name__}: {exc}") from None
    finally:
        sys.path.remove(str(folder))
    if fn is None:
        raise SystemExit(f"bench_leaderboard: {what} defines no custom_kernel(data)")
    return fn


_LAYOUT: list = []  # the scale layout this torch accepts, found on the first call


def _scaled_mm(data):
    """torch's block-scaled fp8 GEMM: 1x128 scales for a, 128x128 for b, K-contiguous operands.
    torch versions differ in the scale layouts they accept; the first that runs is kept."""
    import torch

    a, b, a_scale, b_scale, c = data
    layouts = _LAYOUT or [
        (lambda s: s, lambda s: s.contiguous().t()),
        (lambda s: s, lambda s: s),
        (lambda s: s, lambda s: s.t()),
        (lambda s: s, lambda s: s.contiguous()),
        (lambda s: s, lambda s: s.t().contiguous()),
        (lambda s: s.contiguous(), lambda s: s.contiguous()),
        (lambda s: s.contiguous(), lambda s: s.t().contiguous()),
    ]
    errors = []
    for fa, fb in layouts:
        try:
            out = torch._scaled_mm(
                a.contiguous(), b.contiguous().t(), scale_a=fa(a_scale), scale_b=fb(b_scale), out_dtype=torch.bfloat16
            )
        except RuntimeError as exc:
            errors.append(str(exc).splitlines()[0])
            continue
        if not _LAYOUT:
            _LAYOUT.append((fa, fb))
        c.copy_(out)
        return c
    raise RuntimeError("no scale layout accepted: " + " | ".join(sorted(set(errors)))[:300])


def _do_bench(fn, ref, shape) -> float:
    """The anchors' protocol: median of triton.testing.do_bench on one input set (it clears a
    256 MB buffer between calls), in us."""
    import triton
    from kernel_scientist.evaluator.sandbox import generate_input

    data = generate_input(ref, shape, "cuda")
    return round(1000 * triton.testing.do_bench(lambda: fn(data), warmup=5, rep=25), 2)


def unseen_shapes(count: int, seed: int, limits=(8192, 32768, 16384)):
    """``count`` (m, n, k): m and n multiples of 64, k of 128, log-uniform up to ``limits``, so
    small and large shapes are drawn alike; reproducible from ``seed``."""
    import math
    import random

    rng = random.Random(seed)

    def draw(step: int, top: int) -> int:
        return step * max(1, round(2 ** rng.uniform(0, math.log2(top // step))))

    return [(draw(64, limits[0]), draw(64, limits[1]), draw(128, limits[2])) for _ in range(count)]


def _with_unseen_shapes(task, count: int, seed: int):
    import msgspec
    from kernel_scientist.blackboard.records import Shape

    if task.kernels() != "gemm":
        raise SystemExit("bench_leaderboard: --unseen draws m, n, k shapes: it needs a GEMM task")
    shapes = [Shape(m=m, n=n, k=k, seed=seed * 1000 + i) for i, (m, n, k) in enumerate(unseen_shapes(count, seed))]
    return msgspec.structs.replace(task, benchmarks=shapes)


def _arguments() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("files", nargs="*", type=Path, help="submission files to benchmark")
    p.add_argument("--task", type=Path, default=ROOT / "evaluator" / "tasks" / "amd_fp8_mm")
    p.add_argument(
        "--db", type=Path, action="append", default=[], help="blackboard whose best kernel to include (repeatable)"
    )
    p.add_argument("--kernel", type=int, help="with one --db: that blackboard's kernel id (default: its best)")
    p.add_argument("--out", type=Path, default=Path("bench.json"))
    p.add_argument("--max-calls", type=int, default=100)
    p.add_argument("--budget", type=float, default=3.0, help="wall seconds per method and shape")
    p.add_argument("--skip", default="", help="comma-separated anchors to leave out (reference, scaled_mm, seed)")
    p.add_argument(
        "--do-bench",
        action="store_true",
        help="also time each method as the published anchors were: median of triton.testing.do_bench "
        "on one input set (no fresh inputs per call, no per-call host synchronisation)",
    )
    p.add_argument(
        "--same-inputs",
        action="store_true",
        help="diagnosis: also time each method with the warm-up's inputs reused for every call",
    )
    p.add_argument(
        "--unseen",
        type=int,
        default=0,
        metavar="N",
        help="time N random shapes nobody tuned for instead of the ranked ones (GEMM tasks)",
    )
    p.add_argument("--unseen-seed", type=int, default=1)
    p.add_argument(
        "--eval-py",
        type=Path,
        metavar="FILE",
        help="GPU MODE's own eval.py (not shipped): also run each submission under it in leaderboard mode",
    )
    args = p.parse_args()
    if args.eval_py is not None and not args.eval_py.is_file():
        p.error(f"--eval-py {args.eval_py}: not a file")
    return args


def _methods(args: argparse.Namespace, task, ref) -> tuple[dict, dict[str, str]]:
    """What to time, by name: the anchors (less --skip), the files, the blackboards' kernels; and
    the source of each that is a submission (for --eval-py)."""
    from kernel_scientist.blackboard import open_existing

    from kernel_scientist import status

    skip = set(filter(None, args.skip.split(",")))
    unknown = sorted(skip - {"reference", "scaled_mm", "seed"})
    if unknown:
        raise SystemExit(f"bench_leaderboard: --skip {unknown[0]}: not an anchor (reference, scaled_mm, seed)")
    methods, sources = {"reference": ref.ref_kernel, "scaled_mm": _scaled_mm}, {}
    if "seed" not in skip:
        if task.seed_source is None:
            raise SystemExit(f"bench_leaderboard: {task.path} has no submission.py to time as the seed; --skip seed")
        sources["seed"] = task.seed_source
        methods["seed"] = _kernel_from_source("the seed", task.seed_source, task.modules)
    for anchor in skip - {"seed"}:
        methods.pop(anchor)
    for path in args.files:
        if not path.is_file():
            raise SystemExit(f"bench_leaderboard: {path} is not a file")
        sources[path.stem] = path.read_text()
        methods[path.stem] = _kernel_from_source(str(path), sources[path.stem], task.modules)
    for db in args.db:
        with open_existing(db) as board:
            kid = (args.kernel if len(args.db) == 1 else None) or status.status(board).best.kernel_id
            label = f"kernel {kid}" if len(args.db) == 1 else f"{db.stem}:{kid}"
            sources[label] = board.kernel(kid).source
            methods[label] = _kernel_from_source(f"{db} kernel {kid}", sources[label], task.modules)
    return methods, sources


def _real_eval_py(rows: dict[str, list[dict]], sources: dict[str, str], task, eval_py: Path) -> None:
    """Each submission under GPU MODE's own eval.py (real_eval_py.py), into its rows."""
    import real_eval_py

    for name, source in sources.items():
        print(f"  {name:>12}: GPU MODE's eval.py, leaderboard mode", flush=True)
        for row, got in zip(rows[name], real_eval_py.run(eval_py, task.modules, source, task.benchmarks), strict=True):
            row["eval_py_real_us"], row["eval_py_real_runs"] = got["us"], got["runs"]
            if got["failure"]:
                row["eval_py_real_failure"] = got["failure"]


def _time_all(methods: dict, task, ref, req, flush, args: argparse.Namespace) -> dict[str, list[dict]]:
    """Every method on every ranked shape, shape by shape so that the host's drift during the run
    falls on all methods alike; reversed on every other shape so that no method always goes first
    (each pair of methods swaps places). Rows keyed by method, in ``methods``' order, each in the
    task's shape order."""
    rows: dict[str, list[dict]] = {name: [] for name in methods}
    names = list(methods)
    for i, shape in enumerate(task.benchmarks):
        for name in names if i % 2 == 0 else names[::-1]:
            rows[name].append(_time_one(name, methods[name], shape, ref, req, flush, args))
    return rows


def _time_one(name: str, fn, shape, ref, req, flush, args: argparse.Namespace) -> dict:
    """One method on one ranked shape: the leaderboard protocol, and the diagnoses asked for."""
    from kernel_scientist.evaluator.sandbox import time_shape, time_shape_eval_py

    guard = name not in ("reference", "scaled_mm")
    try:
        loop, failure = time_shape_eval_py(fn, ref, shape, req, guard=guard)
        samples, harness_failure = time_shape(fn, ref, shape, req, flush, stop_on_failure=False, guard=guard)
        failure = failure or harness_failure
        t = sum(samples.event_us) / len(samples.event_us)
        host = sum(samples.host_us) / len(samples.host_us)
        work = sum(samples.call_us) / len(samples.call_us)
        row = {
            "shape": shape.label(),
            "us": round(t, 2),
            "eval_py_us": round(sum(loop) / len(loop), 2),
            "eval_py_calls": len(loop),
            "leaderboard_us": round(host, 2),  # the harness's host clock (events inside the window)
            "host_work_us": round(work, 2),
            # the median too: rare long pauses (a garbage collection) move
            # the mean, a steady per-call cost moves both
            "host_work_median_us": round(statistics.median(samples.call_us), 2),
            "passed": failure is None,
            "calls": len(samples.event_us),
            "failure": failure,
        }
    except Exception as exc:  # a method that cannot run at all on this stack
        row = {
            "shape": shape.label(),
            "us": None,
            "passed": False,
            "calls": 0,
            "failure": f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}",
        }
    if args.same_inputs and row["us"] is not None:
        same, _ = time_shape(
            fn,
            ref,
            shape,
            req,
            flush,
            stop_on_failure=False,
            guard=guard,
            fresh=False,
        )
        row["same_inputs_us"] = round(sum(same.event_us) / len(same.event_us), 2)
    if args.do_bench and row["us"] is not None:
        row["do_bench_us"] = _do_bench(fn, ref, shape)
    print(
        f"  {name:>12} {shape.label():>16}: {row.get('eval_py_us')} us "
        f"(do_bench {row.get('do_bench_us')}) "
        f"{'pass' if row['passed'] else 'FAIL'}",
        flush=True,
    )
    return row


def _summary(r: list[dict]) -> dict:
    """One method's geometric means (None where a shape has no time) and how many shapes passed."""
    from kernel_scientist.evaluator import geomean

    times = [x["us"] for x in r if x["us"]]
    quick = [x["do_bench_us"] for x in r if x.get("do_bench_us")]
    loops = [x["eval_py_us"] for x in r if x.get("eval_py_us")]
    real = [x["eval_py_real_us"] for x in r if x.get("eval_py_real_us")]
    hosts = [x["leaderboard_us"] for x in r if x.get("leaderboard_us")]
    works = [x["host_work_us"] for x in r if x.get("host_work_us")]
    sames = [x["same_inputs_us"] for x in r if x.get("same_inputs_us")]
    return {
        "geomean_us": round(geomean(times), 2) if len(times) == len(r) else None,
        "eval_py_geomean_us": round(geomean(loops), 2) if len(loops) == len(r) else None,
        "eval_py_real_geomean_us": round(geomean(real), 2) if len(real) == len(r) else None,
        "leaderboard_geomean_us": round(geomean(hosts), 2) if len(hosts) == len(r) else None,
        "host_work_geomean_us": round(geomean(works), 2) if len(works) == len(r) else None,
        "same_inputs_geomean_us": round(geomean(sames), 2) if len(sames) == len(r) else None,
        "do_bench_geomean_us": round(geomean(quick), 2) if quick and len(quick) == len(r) else None,
        "passed_shapes": sum(x["passed"] for x in r),
        "shapes": len(r),
    }


def _print_table(result: dict, task, sol: dict, args: argparse.Namespace) -> None:
    rows, summary = result["rows"], result["summary"]
    names = list(rows)
    print(
        f"\n{result['gpu']}, torch {result['torch']}, triton {result['triton']} ({result['date']}); "
        "us per call, GPU MODE eval.py's leaderboard loop (host clock)"
    )
    print(f"{'shape':>16} " + " ".join(f"{n:>14}" for n in names) + f" {'SoL':>8}")
    for i, shape in enumerate(task.benchmarks):
        cells = []
        for n in names:
            x = rows[n][i]
            cells.append(
                f"{'n/a' if x['us'] is None else format(x['eval_py_us'], '.1f')}{'' if x['passed'] else ' FAIL':>5}".rjust(
                    14
                )
            )
        print(f"{shape.label():>16} " + " ".join(cells) + f" {sol[shape.label()]:8.1f}")
    sol_geo = result["speed_of_light_geomean_us"]
    for label, key in (
        ("geomean", "eval_py_geomean_us"),
        ("real eval.py", "eval_py_real_geomean_us"),
        ("harness clock", "leaderboard_geomean_us"),
        ("events", "geomean_us"),
        ("host work", "host_work_geomean_us"),
        ("same inputs", "same_inputs_geomean_us"),
        ("do_bench", "do_bench_geomean_us"),
    ):
        if (
            (key == "do_bench_geomean_us" and not args.do_bench)
            or (key == "same_inputs_geomean_us" and not args.same_inputs)
            or (key == "eval_py_real_geomean_us" and args.eval_py is None)
        ):
            continue
        geo = [summary[n][key] for n in names]
        print(
            f"{label:>16} "
            + " ".join(f"{'n/a' if g is None else format(g, '.1f'):>14}" for g in geo)
            + (f" {sol_geo:8.1f}" if label == "geomean" else "")
        )
    best = "do_bench_geomean_us" if args.do_bench else "geomean_us"
    print(
        f"{'% of SoL':>16} "
        + " ".join(
            f"{'n/a' if not summary[n][best] else format(100 * sol_geo / summary[n][best], '.1f'):>14}" for n in names
        )
        + f"   (speed of light / {'do_bench' if args.do_bench else 'events'} geomean)"
    )
    print(f"{'passed':>16} " + " ".join(f"{summary[n]['passed_shapes']:>11}/{summary[n]['shapes']}" for n in names))


def main() -> int:
    import torch
    import triton
    from kernel_scientist.evaluator import geomean, load_task, spec_for, speed_of_light_us
    from kernel_scientist.evaluator.model import l2_flush_bytes
    from kernel_scientist.evaluator.sandbox import GpuRequest, import_reference

    args = _arguments()
    task = load_task(args.task)
    if args.unseen:
        task = _with_unseen_shapes(task, args.unseen, args.unseen_seed)
    ref = import_reference(task.modules)
    methods, sources = _methods(args, task, ref)
    if not torch.cuda.is_available():
        raise SystemExit("bench_leaderboard: no CUDA or ROCm GPU here (torch.cuda.is_available() is False)")
    gpu = torch.cuda.get_device_name(0)
    spec = spec_for(gpu)
    req = GpuRequest(
        source="",
        modules=task.modules,
        tests=[],
        benchmarks=task.benchmarks,
        max_calls=args.max_calls,
        shape_budget_s=args.budget,
        meta=task.meta,
    )
    flush = torch.empty(l2_flush_bytes(spec) // 4, dtype=torch.float32, device="cuda")
    rows = _time_all(methods, task, ref, req, flush, args)
    if args.eval_py is not None:
        _real_eval_py(rows, sources, task, args.eval_py)
    sol = {s.label(): speed_of_light_us(s, spec) for s in task.benchmarks}
    summary = {name: _summary(r) for name, r in rows.items()}
    result = {
        "date": date.today().isoformat(),
        "gpu": gpu,
        "torch": str(torch.__version__),
        "triton": str(triton.__version__),
        "cuda": torch.version.cuda,
        "hip": torch.version.hip,
        "method": __doc__.split("\n\n")[1].replace("\n", " "),
        "speed_of_light_geomean_us": round(geomean(list(sol.values())), 2),
        "summary": summary,
        "rows": rows,
        "at": time.time(),
    }
    args.out.write_text(json.dumps(result, indent=1))
    _print_table(result, task, sol, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
