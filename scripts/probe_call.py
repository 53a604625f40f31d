"""The anatomy of one timed call's host work, in the harness's calling pattern (fresh inputs and a
pristine copy, a NaN-filled output, an L2 flush, a device-wide synchronize, the device events and
host clock around the call, the folder's check after it; `evaluator/_gpu_harness.py`).

A submission with launch replay still measured 70-120 us of host work per call on an H200
(docs/h200.md, bench-15), three to four times what its Python takes in a loop. This times, in
that pattern, a ladder of calls from nothing to the whole submission, so the rung where the time
appears names its cause:

- ``noop``: a Python call that returns the output (the events' record and the call itself);
- ``signature``: the replay's input signature and plan lookup, nothing launched;
- ``empty_jit`` / ``empty_direct`` / ``empty_raw``: an empty Triton kernel through the JIT, through
  the compiled kernel's launcher object, and through the launcher's C function alone;
- ``submission``: the submission's ``custom_kernel``;
- ``stamped``: the submission's replayed launches re-run with a clock read between the parts;
- ``twice``: the submission called twice in a row, the second call's time (a warm host);
- ``spin``: 100 us of busy Python just before the call (a host that was not waiting);
- ``no_sync``: no synchronize before the call;
- ``graph``: the submission's replayed launches captured once into a CUDA graph (on one input
  set) and the graph replayed: what that mechanism's launch costs, not a correct call (its output
  is the captured inputs');
- ``lean``: the replayed call with a leaner guard: each tensor's shape, strides and dtype, and
  its address's 16-byte alignment (the addresses are read anyway), instead of the replay's
  signature (which adds the device index and the storage offset) and its stream check;
- ``graph_lean``: that guard, the addresses written into a pinned host table, and the graph
  replayed: the floor of a graph-replayed call whose kernels read their inputs' addresses from
  such a table (a mechanism's cost again, not a correct call).

With ``--protocol eval_py`` the pattern is GPU MODE eval.py's leaderboard loop instead (no device
events and no L2 flush; the time is the host clock from before the call to its return), and every
rung runs the folder's check after its call, whatever it returned, so that each rung starts from
the same host caches as a real call does (the check between calls evicts them).

    python scripts/probe_call.py FILE.py [--task DIR] [--calls 30] [--shapes 1024x7168x256,...]
        [--protocol harness|eval_py] [--out probe.json]
    TRITON_INTERPRET=1 python scripts/probe_call.py FILE.py --device cpu --calls 3   (a dry run)
"""

from __future__ import annotations

import argparse
import inspect
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent  # the checkout, for the default task folder


def _empty_kernel():
    import triton

    @triton.jit
    def empty(x_ptr):
        pass

    return empty


def _raw_launch(compiled, grid):
    """The compiled kernel's C launch function with everything but the arguments fixed (a kernel
    without scratch memory); None where this Triton's launcher object has neither layout this
    knows: triton 3.6's (the C function takes the kernel's arguments flat) or 3.8's (annotated)."""
    import torch
    import triton

    run = getattr(compiled, "run", None)
    launch = getattr(run, "launch", None)
    if launch is None or getattr(run, "global_scratch_size", 0) or getattr(run, "profile_scratch_size", 0):
        return None
    stream_of = triton.runtime.driver.active.get_current_stream
    device = torch.cuda.current_device()
    g0, g1, g2 = tuple(grid) + (1,) * (3 - len(grid))
    head = (compiled.function, run.launch_cooperative_grid, run.launch_pdl)
    meta = compiled.packed_metadata
    if hasattr(run, "arg_annotations"):  # 3.8: metadata and hooks first, then the arguments as one tuple
        notes, sig = run.arg_annotations, run.kernel_signature
        return lambda *args: launch(
            g0, g1, g2, stream_of(device), *head, meta, None, None, None, None, None, notes, sig, args
        )
    scratch = (
        (None, None) if hasattr(run, "profile_scratch_size") else (None,)
    )  # 3.6 / older: global (and profile) scratch
    return lambda *args: launch(g0, g1, g2, stream_of(device), *head, *scratch, meta, None, None, None, *args)


def _pattern(fn, data_for, ref, shape, meta, calls, flush, device, mode, stamps=None, protocol="harness"):
    """Host microseconds from the clock read before the start event (eval_py: before the call) to
    the call's return, per call."""
    import torch
    from kernel_scientist.evaluator._gpu_harness import _judge, _sync

    cuda = device == "cuda" and protocol == "harness"
    judged = ("submission", "twice", "spin", "no_sync")
    start = torch.cuda.Event(enable_timing=True) if cuda else None
    end = torch.cuda.Event(enable_timing=True) if cuda else None
    hosts = []
    for i in range(calls):
        data, pristine = data_for(i)
        if flush is not None:
            flush.zero_()
        if mode != "no_sync":
            _sync(device)
        if mode == "spin":
            until = time.perf_counter() + 100e-6
            while time.perf_counter() < until:
                pass
        if stamps is not None:
            stamps.clear()
        t0 = time.perf_counter()
        if cuda:
            start.record()
        out = fn(data)
        if mode == "twice":
            t0 = time.perf_counter()
            out = fn(data)
        returned = time.perf_counter()
        if cuda:
            end.record()
        _sync(device)
        hosts.append(((returned - t0) * 1e6, [(name, (t - t0) * 1e6) for name, t in (stamps or [])]))
        if out is not data[-1] and mode in judged:
            raise SystemExit(f"probe_call: the submission did not return its output slot on {shape.label()}")
        if mode in judged:
            reason = _judge(out, data, pristine, shape, ref, meta)
            if reason:
                raise SystemExit(f"probe_call: {reason}")
        elif protocol == "eval_py":
            _judge(out, data, pristine, shape, ref, meta)  # the same host work as a real call's check
    return hosts


def _stamped(module, stamps):
    """The submission's replayed call, re-run with a clock read after each part."""
    signature, plans = module._ks_signature, module._KS_PLANS
    clock = time.perf_counter

    def call(data):
        key = signature(data)
        stamps.append(("signature", clock()))
        launches, result = plans[key][:2]
        stamps.append(("lookup", clock()))
        for n, (runner, template, slots, *addresses) in enumerate(launches):
            args = list(template)
            for position, index in slots:
                args[position] = data[index]
            for position, index in addresses[0] if addresses else ():  # a C launch's tensors, as addresses
                args[position] = data[index].data_ptr()
            stamps.append((f"args {n}", clock()))
            runner(*args)
            stamps.append((f"launch {n}", clock()))
        return data[result]

    return call


def _graph(module, data):
    """The submission's replayed launches for ``data`` captured into a CUDA graph; the call
    replays it (the mechanism's cost; the output is ``data``'s, whatever the call's inputs).
    None if the plan's launches cannot be captured."""
    import types

    import torch

    launches = module._KS_PLANS[module._ks_signature(data)][0]
    graph = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(graph):
            stream = torch.cuda.current_stream().cuda_stream
            for runner, template, slots, addresses in launches:
                args = template.copy()
                if isinstance(runner, types.BuiltinFunctionType):
                    args[3] = stream  # a C launch's head names its stream: the capture's here
                for position, index in slots:
                    args[position] = data[index]
                for position, index in addresses:
                    args[position] = data[index].data_ptr()
                runner(*args)
    except Exception as exc:  # noqa: BLE001 - the report says why
        print(f"probe_call: no graph rung: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}", flush=True)
        return None
    out = data[-1]
    return lambda d: (graph.replay(), out)[1]


def _lean_key(d):
    return tuple([(t.shape, t.stride(), t.dtype) for t in d])


def _lean(module, data):
    """The replayed call behind the lean guard (module docstring); ``data`` names the plan."""
    plans = {_lean_key(data): module._KS_PLANS[module._ks_signature(data)]}

    def call(d):
        key = _lean_key(d)
        ptrs = [t.data_ptr() for t in d]
        plan = plans.get(key)
        if plan is None or any(p & 15 for p in ptrs):
            raise SystemExit("probe_call: the lean guard found no plan")
        launches, result = plan[0], plan[1]
        for runner, template, slots, addresses in launches:
            args = template.copy()
            for position, index in slots:
                args[position] = d[index]
            for position, index in addresses:
                args[position] = ptrs[index]
            runner(*args)
        return d[result]

    return call


def _graph_lean(module, data, graphed):
    """The lean guard, the addresses into a pinned table, then the graph (module docstring)."""
    import torch

    table = torch.zeros(len(data), dtype=torch.int64, pin_memory=True).numpy()
    keys = {_lean_key(data)}
    replay = graphed

    def call(d):
        key = _lean_key(d)
        ptrs = [t.data_ptr() for t in d]
        if key not in keys or any(p & 15 for p in ptrs):
            raise SystemExit("probe_call: the lean guard found no plan")
        for i, p in enumerate(ptrs):
            table[i] = p
        return replay(d)

    return call


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("file", type=Path, help="the submission to probe (with launch replay for the 'stamped' rung)")
    p.add_argument("--task", type=Path, default=ROOT / "evaluator" / "tasks" / "amd_fp8_mm")
    p.add_argument("--calls", type=int, default=30)
    p.add_argument("--shapes", default="1024x7168x256,1024x1536x7168,6144x4608x7168")
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    p.add_argument("--protocol", choices=("harness", "eval_py"), default="harness")
    p.add_argument("--out", type=Path, default=Path("probe_call.json"))
    args = p.parse_args()
    if not args.file.is_file():
        print(f"probe_call: {args.file} is not a file", file=sys.stderr)
        return 2

    import torch
    from kernel_scientist.evaluator import load_task
    from kernel_scientist.evaluator._gpu_harness import _fresh
    from kernel_scientist.evaluator._rundir import import_reference, import_submission

    task = load_task(args.task)
    ref = import_reference(task.modules)
    fn = import_submission(args.file.read_text(), Path(tempfile.mkdtemp()))
    if fn is None:
        print(f"probe_call: {args.file} defines no custom_kernel(data)", file=sys.stderr)
        return 2
    module = sys.modules[fn.__module__]
    shapes = {s.label(): s for s in task.benchmarks + task.tests}
    wanted = [s for s in args.shapes.split(",") if s]
    unknown = [s for s in wanted if s not in shapes]
    if unknown:
        print(
            f"probe_call: no shape {unknown[0]} in the task (its labels look like {next(iter(shapes))})",
            file=sys.stderr,
        )
        return 2
    cuda = args.device == "cuda"
    flush = torch.empty(64 * 1024 * 1024, dtype=torch.float32, device=args.device) if cuda else None
    empty = _empty_kernel()
    rows = []
    for label in wanted:
        shape = shapes[label]

        def data_for(i, shape=shape):
            return _fresh(ref, shape, shape.seed + 13 * (i + 1), args.device, task.meta)

        for i in range(4):  # compile, tune, record twice: the replay's plan exists from here
            data, _ = data_for(100 + i)
            fn(data)
        x = data[-1]
        compiled = empty[(1,)](x)
        ladder = {
            "noop": lambda d: d[-1],
            "signature": lambda d: (
                (module._KS_PLANS.get(module._ks_signature(d)), d[-1])[1] if hasattr(module, "_ks_signature") else d[-1]
            ),
            "empty_jit": lambda d: (empty[(1,)](d[-1]), d[-1])[1],
        }
        if cuda and compiled is not None:
            direct = getattr(module, "_direct", None)
            runner = direct(compiled, (1,)) if direct else None
            if runner is not None:
                ladder["empty_direct"] = lambda d, r=runner: (r(d[-1]), d[-1])[1]
            raw = _raw_launch(compiled, (1,))
            if raw is not None:
                ladder["empty_raw"] = lambda d, r=raw: (r(d[-1]), d[-1])[1]
        row = {"shape": label, "calls": args.calls, "rungs": {}}
        stamps: list = []
        runs = [(name, f, "plain") for name, f in ladder.items()]
        runs += [("submission", fn, "submission")]
        if cuda and getattr(module, "_KS_PLANS", None):
            runs += [("stamped", _stamped(module, stamps), "stamped")]
        runs += [("twice", fn, "twice"), ("spin", fn, "spin"), ("no_sync", fn, "no_sync")]
        if cuda and getattr(module, "_KS_PLANS", None):
            graphed = _graph(module, data)
            runs += [("lean", _lean(module, data), "plain")]
            if graphed is not None:
                runs += [("graph", graphed, "plain"), ("graph_lean", _graph_lean(module, data, graphed), "plain")]
        for name, f, mode in runs:
            hosts = _pattern(
                f,
                data_for,
                ref,
                shape,
                task.meta,
                args.calls,
                flush,
                args.device,
                mode,
                stamps if mode == "stamped" else None,
                args.protocol,
            )
            times = [h for h, _ in hosts]
            entry = {"median_us": round(statistics.median(times), 2), "mean_us": round(statistics.fmean(times), 2)}
            if mode == "stamped":
                parts: dict[str, list[float]] = {}
                for _, marks in hosts:
                    for part, at in marks:
                        parts.setdefault(part, []).append(at)
                entry["parts_median_us"] = {part: round(statistics.median(v), 2) for part, v in parts.items()}
            row["rungs"][name] = entry
            print(
                f"{label:>16} {name:>12}: median {entry['median_us']:8.2f} us, mean {entry['mean_us']:8.2f} us"
                + (f"  {entry['parts_median_us']}" if "parts_median_us" in entry else ""),
                flush=True,
            )
        rows.append(row)
    import triton

    launcher = None
    if cuda and compiled is not None and getattr(compiled, "run", None) is not None:
        try:
            launcher = inspect.getsource(type(compiled.run))
        except (OSError, TypeError):
            launcher = None
    args.out.write_text(
        json.dumps(
            {
                "file": str(args.file),
                "device": torch.cuda.get_device_name(0) if cuda else "cpu",
                "torch": str(torch.__version__),
                "triton": str(triton.__version__),
                "protocol": args.protocol,
                "rows": rows,
                "launcher_source": launcher,
            },
            indent=1,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
