"""Fit the timing model's constants to H200 sweeps and report its fidelity on data not used to fit.

Data: sweeps of launch configurations x the 18 ranked shapes, do_bench medians, JSON or gzipped
JSON: by default ``scripts/calibration/calib-sweep.json.gz`` (one H200, scripts/sweep_h200.py:
forms precise/fp16/bf16/fast, strided and K-contiguous, tiles, BLOCK_K, warps, stages, tile order,
split-K; plus the seed, the reference and a campaign's best kernel, read from the blackboard
beside it, under do_bench and the leaderboard protocol). Every row becomes the ``Launch`` (and torch ops) its kernel would be captured as, so the model is
exercised through the same entry points a campaign uses.

Split: configurations are divided into two halves by a hash of their launch parameters (never by
their times); constants are fitted on the "fit" half of every shape and every figure below is on
the "held-out" half (``--split config2`` halves the configurations by another bit of the hash, a
second split; ``--split shape`` holds out every other shape instead; ``--split none``
validates on every row, for data of another day or another kernel). Per shape it reports
the rank correlation (Spearman) of modelled and measured times over passing configurations, the
regret of the model's pick (measured time of the config it ranks first / the measured best), and
whether its top 16 holds a configuration within 5% of the measured best. Then predicted/measured
for whole submissions (the seed, the reference, campaigns' best) under do_bench and under the
leaderboard protocol, which includes the host path per call.

    python scripts/calibrate_model.py [--data scripts/calibration/calib-sweep.json.gz ...] [--fit] [--write]
        [--split config|config2|shape|none] [--json out.json] [--model evaluator/model/_timing.py]

``--fit`` runs a Nelder-Mead search over the fitted constants (log space, restarted twice from its
best point) minimising the log error on the fit half: soft-L1 within shapes, squared per shape's
bias (``_loss``); ``--write`` puts the result into evaluator/model/_timing.py's ``HOPPER`` and its
``FIT_PROVENANCE`` (``--model`` names another copy of the module). Without ``--fit`` the model's current constants are evaluated.
"""

from __future__ import annotations

import argparse
import ast
import gzip
import hashlib
import json
import math
import re
import sys
import tempfile
from pathlib import Path

import msgspec
import numpy as np
from kernel_scientist.blackboard.records import Shape
from kernel_scientist.evaluator import DEVICES, MODEL_VERSION, Launch, TensorArg, TorchOp, geomean
from kernel_scientist.evaluator.model import PARAMS, ModelInfeasible, Params, launch_time_us, torch_op_time_us

ROOT = Path(__file__).resolve().parents[1]

FITTED = (
    "mma_eff",
    "step_latency_us",
    "vector_ops_scale",
    "convert_ops",
    "transpose",
    "mma_sync_eff",
    "bf16_convert",
    "wgmma_n_half",
    "spill_scalar",
    "spill_tile",
    "load_latency_us",
    "fill_us",
    "tile_us",
    "l2_eff",
    "atomic_eff",
)
FORMS = {"precise", "fp16", "bf16", "fast"}
CALIBRATION = ROOT / "scripts" / "calibration"  # the data the model's fit rests on
DEFAULT_DATA = [CALIBRATION / "calib-sweep.json.gz"]


class Sample(msgspec.Struct, frozen=True):
    source: str
    shape: str
    form: str
    layout: str  # strided | kmajor
    bm: int
    bn: int
    bk: int
    warps: int
    stages: int
    group_m: int
    split_k: int
    copy_in_call: bool  # a K-contiguous row whose timed call includes the copy
    us: float
    passed: bool

    @property
    def config(self) -> str:
        return (
            f"{self.form}/{self.layout}/{self.bm}x{self.bn}x{self.bk}/w{self.warps}s{self.stages}"
            f"/g{self.group_m}/sk{self.split_k}{'/copy' if self.copy_in_call else ''}"
        )


def _read_json(path: Path) -> dict:
    """A sweep's JSON, gzipped (``.gz``) or not."""
    raw = path.read_bytes()
    return json.loads(gzip.decompress(raw) if path.suffix == ".gz" else raw)


def load_samples(paths: list[Path]) -> list[Sample]:
    out: list[Sample] = []
    for path in paths:
        if not path.exists():
            continue
        data = _read_json(path)
        for r in data.get("rows", []):
            if not r.get("us"):
                continue
            if "form" in r:  # scripts/sweep_h200.py
                out.append(
                    Sample(
                        path.name,
                        r["shape"],
                        r["form"],
                        r["layout"],
                        r["bm"],
                        r["bn"],
                        r["bk"],
                        r["warps"],
                        r["stages"],
                        r["group_m"],
                        r["split_k"],
                        False,
                        r["us"],
                        bool(r["passed"]),
                    )
                )
            elif r.get("mode") in FORMS:  # scripts/explore_kernels.py
                bm, bn, w, st = (int(x) for x in r["cfg"].split("x"))
                out.append(
                    Sample(
                        path.name,
                        r["shape"],
                        r["mode"],
                        r["layout"],
                        bm,
                        bn,
                        128,
                        w,
                        st,
                        8,
                        1,
                        r["layout"] == "kmajor",
                        r["us"],
                        bool(r["passed"]),
                    )
                )
    return out


def held_out(sample: Sample, split: str, shapes: list[str]) -> bool:
    if split == "none":  # validation only: every row is held out (another day's or another kernel's data)
        return True
    if split == "shape":
        return shapes.index(sample.shape) % 2 == 1
    digest = hashlib.sha256(sample.config.encode()).digest()
    return digest[1 if split == "config2" else 0] % 2 == 1  # config2: another, independent halving


def _parse(label: str) -> Shape:
    m, n, k = (int(x) for x in label.split("x"))
    return Shape(m, n, k)


def launch_of(s: Sample) -> tuple[Launch, list[TorchOp]]:
    shape = _parse(s.shape)
    m, n, k = shape.m, shape.n, shape.k
    kc = s.layout == "kmajor"
    kb, nb = -(-k // 128), -(-n // 128)
    tiles = -(-m // s.bm) * -(-n // s.bn)
    out = TensorArg("c", [m, n], [n, 1], "float32" if s.split_k > 1 else "bfloat16", 4 if s.split_k > 1 else 2)
    launch = Launch(
        kernel="sweep_gemm",
        grid=[tiles, s.split_k, 1],
        num_warps=s.warps,
        num_stages=s.stages,
        constexprs={"BLOCK_M": s.bm, "BLOCK_N": s.bn, "BLOCK_K": s.bk, "GROUP_M": s.group_m, "SPLIT_K": s.split_k},
        extra={},
        tensors=[
            TensorArg("a", [m, k], [k, 1] if kc else [1, m], "float8_e4m3fn", 1),
            TensorArg("b", [n, k], [k, 1] if kc else [1, n], "float8_e4m3fn", 1),
            TensorArg("a_scale", [m, kb], [1, m], "float32", 4),
            TensorArg("b_scale", [nb, kb], [1, nb], "float32", 4),
            out,
        ],
        has_dot=True,
        precise_acc=s.form == "precise",
        upcast_bf16=s.form in ("fp16", "bf16"),
        upcast_fp32=False,
        atomic=s.split_k > 1,
        upcast_to={"fp16": "float16", "bf16": "bfloat16"}.get(s.form, ""),
    )
    ops: list[TorchOp] = []
    if s.copy_in_call:
        ops += [TorchOp("aten.clone", r * k, r * k) for r in (m, n)]
    if s.split_k > 1:
        ops += [TorchOp("aten.zero_", 0, m * n * 4), TorchOp("aten.copy_", m * n * 4, m * n * 2)]
    return launch, ops


def predict(s: Sample, dev) -> float:
    launch, ops = launch_of(s)
    try:
        t = launch_time_us(launch, _parse(s.shape), dev).time_us
    except ModelInfeasible:
        return math.inf
    return t + sum(torch_op_time_us(op, dev).time_us for op in ops)


def spearman(x: list[float], y: list[float]) -> float:
    rx, ry = np.argsort(np.argsort(x)), np.argsort(np.argsort(y))
    if len(x) < 3:
        return float("nan")
    return float(np.corrcoef(rx, ry)[0, 1])


def per_shape(samples: list[Sample], dev) -> dict[str, dict]:
    """Rank correlation, regret and top-16 hit per shape over passing configurations."""
    out = {}
    for shape in dict.fromkeys(s.shape for s in samples):
        rows = [s for s in samples if s.shape == shape and s.passed]
        preds = [predict(s, dev) for s in rows]
        ok = [(p, s.us) for p, s in zip(preds, rows) if math.isfinite(p)]
        if len(ok) < 3:
            continue
        pred, meas = [p for p, _ in ok], [u for _, u in ok]
        order = sorted(range(len(ok)), key=lambda i: pred[i])
        best = min(meas)
        out[shape] = {
            "configs": len(ok),
            "spearman": round(spearman(pred, meas), 3),
            "regret": round(meas[order[0]] / best, 3),
            "top16_within_5pct": any(meas[i] <= 1.05 * best for i in order[:16]),
            "median_pred_over_meas": round(float(np.median(np.array(pred) / np.array(meas))), 3),
        }
    return out


# The loss is soft-L1 beyond this log error (squared below it): a few configurations whose time a
# catastrophic spill sets (20x) carry log errors past 1 and would otherwise dictate the constants
# that rank all the others; what the model is for is the ranking.
_ROBUST_DELTA = 0.3


def _loss(samples: list[Sample], dev) -> float:
    """Log error, split into its part within each shape (what ranks configurations: soft-L1
    around the shape's median error) and each shape's median bias (what absolute times need),
    weighted 1 : 0.5."""
    by_shape: dict[str, list[float]] = {}
    for s in samples:
        p = predict(s, dev)
        err = max(-3.0, min(3.0, math.log(p / s.us))) if math.isfinite(p) else 3.0
        by_shape.setdefault(s.shape, []).append(err)
    within, bias = [], []
    d = _ROBUST_DELTA
    for errs in by_shape.values():
        mid = float(np.median(errs))
        within += [d * d * (math.sqrt(1 + ((e - mid) / d) ** 2) - 1) for e in errs]
        bias.append(mid**2)
    return float(np.mean(within) + 0.5 * np.mean(bias))


def fit(samples: list[Sample], dev, iters: int) -> Params:
    """Nelder-Mead over log(constants) on the fit rows."""
    base = PARAMS[dev.name]
    x0 = np.log([getattr(base, f) for f in FITTED])

    def make(x) -> Params:
        return msgspec.structs.replace(base, **{f: float(math.exp(v)) for f, v in zip(FITTED, x)})

    def f(x) -> float:
        p = make(x)
        if p.mma_eff > 1 or p.l2_eff > 1 or p.mma_sync_eff > 1 or p.atomic_eff > 1:
            return 1e9
        PARAMS[dev.name] = p
        return _loss(samples, dev)

    n = len(x0)
    best_x = x0
    for restart in range(3):
        best_x = _nelder_mead(f, best_x, n, iters, restart)
    best = make(best_x)
    PARAMS[dev.name] = best
    return best


def _nelder_mead(f, x0, n: int, iters: int, restart: int):
    simplex = [x0] + [x0 + np.eye(n)[i] * 0.3 for i in range(n)]
    values = [f(x) for x in simplex]
    for it in range(iters):
        order = np.argsort(values)
        simplex, values = [simplex[i] for i in order], [values[i] for i in order]
        centroid = np.mean(simplex[:-1], axis=0)
        worst = simplex[-1]
        xr = centroid + (centroid - worst)
        fr = f(xr)
        if fr < values[0]:
            xe = centroid + 2 * (centroid - worst)
            fe = f(xe)
            simplex[-1], values[-1] = (xe, fe) if fe < fr else (xr, fr)
        elif fr < values[-2]:
            simplex[-1], values[-1] = xr, fr
        else:
            xc = centroid + 0.5 * (worst - centroid)
            fc = f(xc)
            if fc < values[-1]:
                simplex[-1], values[-1] = xc, fc
            else:
                simplex = [simplex[0]] + [simplex[0] + 0.5 * (x - simplex[0]) for x in simplex[1:]]
                values = [values[0]] + [f(x) for x in simplex[1:]]
        if it % 50 == 0:
            print(f"  fit round {restart}, iteration {it}: loss {min(values):.4f}", file=sys.stderr, flush=True)
    return simplex[int(np.argmin(values))]


def submissions(data_paths: list[Path], device: str) -> list[dict]:
    """Predicted/measured for the seed, the reference and campaigns' best, where a sweep timed them."""
    import trio
    from kernel_scientist.evaluator import SimulatedBackend, load_task

    task = load_task(ROOT / "evaluator" / "tasks" / "amd_fp8_mm")
    rows = []
    for path in data_paths:
        if not path.exists():
            continue
        data = _read_json(path)
        for name, sub in data.get("submissions", {}).items():
            if name == "reference":
                with SimulatedBackend(task, device=device, noise=0.0) as backend:
                    report = backend.reference_report()
            else:
                source = task.seed_source if name == "seed" else _campaign_source(name)
                if source is None:
                    continue

                async def go(src=source):
                    with SimulatedBackend(task, device=device, noise=0.0, timeout_s=300.0) as backend:
                        return await backend.evaluate(src, submission_id=0, secret_seed=0)

                report = trio.run(go)
            if report.score_us is None:
                continue
            modelled = {r.shape.label(): r.time_us for r in report.shapes}
            measured_lb = {s: r.get("leaderboard_mean_us") for s, r in sub["shapes"].items()}
            measured_db = {s: r.get("do_bench_us") for s, r in sub["shapes"].items()}
            shapes = [s for s in modelled if measured_lb.get(s) and measured_db.get(s)]
            lb = geomean([measured_lb[s] for s in shapes])
            db = geomean([measured_db[s] for s in shapes])
            mod = geomean([modelled[s] for s in shapes])
            rows.append(
                {
                    "submission": name,
                    "source": path.name,
                    "modelled_us": round(mod, 1),
                    "measured_leaderboard_us": round(lb, 1),
                    "measured_do_bench_us": round(db, 1),
                    "pred_over_leaderboard": round(mod / lb, 3),
                    "pred_over_do_bench": round(mod / db, 3),
                }
            )
    return rows


def _campaign_source(label: str) -> str | None:
    m = re.fullmatch(r"(.+) kernel (\d+)", label)
    if not m:
        return None
    import sqlite3

    packed = CALIBRATION / f"{m.group(1)}.sqlite.gz"
    if not packed.exists():
        return None
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "campaign.sqlite"
        path.write_bytes(gzip.decompress(packed.read_bytes()))
        db = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
        row = db.execute(
            "SELECT json_extract(body, '$.source') FROM kernel WHERE id = ?", (int(m.group(2)),)
        ).fetchone()
        db.close()
    return row[0] if row else None


def _write_params(params: Params, provenance: str, path: Path | None = None) -> None:
    """Rewrite the ``HOPPER = Params(...)`` and ``FIT_PROVENANCE = ...`` statements of the model
    module (``path``, by default evaluator/model/_timing.py) with these values, in the layout ruff
    format leaves alone: one field per line, the provenance as one string or, past the line
    length, as parenthesised pieces. The statements are found by parsing the module (their
    lines, however many), so a multi-line provenance is replaced whole."""
    path = path or ROOT / "evaluator" / "model" / "_timing.py"
    lines = path.read_text().splitlines(keepends=True)
    spans = {}
    for node in ast.parse("".join(lines)).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            if node.targets[0].id in ("HOPPER", "FIT_PROVENANCE"):
                spans[node.targets[0].id] = (node.lineno - 1, node.end_lineno or node.lineno)
    if set(spans) != {"HOPPER", "FIT_PROVENANCE"}:
        raise SystemExit(f"calibrate_model: {path} has no HOPPER and FIT_PROVENANCE assignments to rewrite")
    fields = [
        f"    {f}={getattr(params, f):.4g},\n" if f in FITTED else f"    {f}={getattr(params, f)!r},\n"
        for f in params.__struct_fields__
    ]
    text = {
        "HOPPER": ["HOPPER = Params(\n", *fields, ")\n"],
        "FIT_PROVENANCE": _string_statement("FIT_PROVENANCE", provenance),
    }
    for name in sorted(spans, key=lambda k: -spans[k][0]):  # the later statement first: line numbers stay valid
        start, end = spans[name]
        lines[start:end] = text[name]
    path.write_text("".join(lines))


def _string_statement(name: str, value: str, width: int = 120) -> list[str]:
    """``NAME = "value"`` on one line if it fits, else the value in parenthesised pieces of at
    most ``width`` characters, split at spaces."""
    one = f"{name} = {json.dumps(value)}\n"
    if len(one) <= width + 1:
        return [one]
    pieces, piece = [], ""
    for word in value.split(" "):
        if piece and len(json.dumps(piece + word + " ")) + 4 > width:
            pieces.append(piece)
            piece = ""
        piece += word + " "
    pieces.append(piece[:-1])
    return [f"{name} = (\n", *(f"    {json.dumps(p)}\n" for p in pieces), ")\n"]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", type=Path, nargs="*", default=DEFAULT_DATA)
    p.add_argument("--device", default="h200")
    p.add_argument("--split", choices=("config", "config2", "shape", "none"), default="config")
    p.add_argument("--fit", action="store_true")
    p.add_argument("--iters", type=int, default=150)
    p.add_argument("--write", action="store_true")
    p.add_argument(
        "--model",
        type=Path,
        default=ROOT / "evaluator" / "model" / "_timing.py",
        help="the module whose HOPPER and FIT_PROVENANCE --write rewrites (default: the package's own)",
    )
    p.add_argument("--no-submissions", action="store_true")
    p.add_argument("--json", type=Path)
    args = p.parse_args(argv)
    dev = DEVICES[args.device]
    samples = load_samples(args.data)
    if not samples:
        print("no sweep rows found in " + ", ".join(map(str, args.data)), file=sys.stderr)
        return 1
    shapes = list(dict.fromkeys(s.shape for s in samples))
    fit_rows = [s for s in samples if not held_out(s, args.split, shapes)]
    test_rows = [s for s in samples if held_out(s, args.split, shapes)]
    print(
        f"{len(samples)} rows from {', '.join(sorted({s.source for s in samples}))}: {len(fit_rows)} to fit, "
        f"{len(test_rows)} held out (split by {args.split})"
    )
    if args.fit and not fit_rows:
        print("--fit with --split none: nothing to fit on", file=sys.stderr)
        return 2
    if args.fit:
        before = _loss(fit_rows, dev)
        params = fit(fit_rows, dev, args.iters)
        print(
            f"fit: loss {before:.4f} -> {_loss(fit_rows, dev):.4f}; "
            + ", ".join(f"{f}={getattr(params, f):.4g}" for f in FITTED)
        )
        if args.write:
            sources = ", ".join(sorted({s.source for s in fit_rows}))
            _write_params(
                params,
                f"fitted on the {args.split}-split fit half of {sources} "
                f"({len(fit_rows)} rows; held out {len(test_rows)}) by scripts/calibrate_model.py for {MODEL_VERSION}",
                args.model,
            )
    report = {
        "model": MODEL_VERSION,
        "split": args.split,
        "held_out": per_shape(test_rows, dev),
        "fit": per_shape(fit_rows, dev),
        "loss_held_out": round(_loss(test_rows, dev), 4),
    }
    print(f"{'shape (held out)':>16} {'n':>4} {'spearman':>8} {'regret':>7} {'top16':>6} {'pred/meas':>9}")
    for shape, r in report["held_out"].items():
        print(
            f"{shape:>16} {r['configs']:>4} {r['spearman']:>8.3f} {r['regret']:>7.3f} "
            f"{'yes' if r['top16_within_5pct'] else 'NO':>6} {r['median_pred_over_meas']:>9.3f}"
        )
    held = report["held_out"].values()
    if held:
        print(
            f"held out: min spearman {min(r['spearman'] for r in held):.3f}, median "
            f"{float(np.median([r['spearman'] for r in held])):.3f}; top-16 hit on "
            f"{sum(r['top16_within_5pct'] for r in held)}/{len(held)} shapes; worst regret "
            f"{max(r['regret'] for r in held):.2f}; loss {report['loss_held_out']}"
        )
    if not args.no_submissions:
        report["submissions"] = submissions(args.data, args.device)
        for r in report["submissions"]:
            print(
                f"{r['submission']:>24}: modelled {r['modelled_us']:8.1f} us; measured leaderboard "
                f"{r['measured_leaderboard_us']:8.1f} (x{r['pred_over_leaderboard']:.2f}), do_bench "
                f"{r['measured_do_bench_us']:8.1f} (x{r['pred_over_do_bench']:.2f})"
            )
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
