"""Time the main job (a scenario's whole campaign) and say where its wall time went.

Runs the campaign in this process, into a blackboard in a temporary folder, with timers around
its phases: start-up (imports, the task, the fork server, the reference), the waits for the
sandbox (pre-screens and evaluations, which run candidates under Triton's CPU interpreter), the
judging of outputs and the timing model in this process, the static rules, the offline brain,
and the rest (agents and blackboard). Before it, two anchors measured on the same machine in the
same run, so a reader can judge the figure: one bare ``python -c "import torch, triton"`` and one
pre-screen of the task's seed on a started backend. The load average before and after says
whether something else shared the cores.

    python scripts/bench_main_job.py [--scenario scenarios/amd_fp8_mm_mi300x.toml] [--seed N]
        [--set key=value ...] [--db KEEP.sqlite] [--json]

Speed targets are measured with this script, never by timed assertions in tests.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


class Phases:
    """Wall seconds spent inside wrapped functions, by phase (an outer phase excludes the inner
    ones it calls, so the phases add up)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)
        self._stack: list[list] = []  # [phase, started, seconds of inner phases]

    def _enter(self, label: str) -> None:
        self._stack.append([label, time.perf_counter(), 0.0])

    def _leave(self) -> None:
        label, started, inner = self._stack.pop()
        spent = time.perf_counter() - started
        self.seconds[label] += spent - inner
        self.calls[label] += 1
        if self._stack:
            self._stack[-1][2] += spent

    def wrap(self, owner, name: str, phase) -> None:
        """Time ``owner.name``; ``phase`` is its label, or a function of its arguments giving one."""
        original = getattr(owner, name)

        def timed(*args, **kwargs):
            self._enter(phase(*args, **kwargs) if callable(phase) else phase)
            try:
                return original(*args, **kwargs)
            finally:
                self._leave()

        setattr(owner, name, timed)

    def wrap_async(self, owner, name: str, phase: str) -> None:
        """An ``async def`` whose real work is blocking (the offline brain): timed around its await."""
        original = getattr(owner, name)

        async def timed(*args, **kwargs):
            self._enter(phase)
            try:
                return await original(*args, **kwargs)
            finally:
                self._leave()

        setattr(owner, name, timed)


def bare_import_s() -> float:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import torch, triton"], check=True)
    return time.perf_counter() - t0


def one_prescreen_s(scenario) -> tuple[float, float]:
    """(seconds to start a backend, seconds of one pre-screen of the seed on it)."""
    import anyio
    from kernel_scientist.evaluator import StartsInBackground, load_task, make_backend

    task = load_task(scenario.task_path())
    t0 = time.perf_counter()
    with make_backend(scenario.evaluator, task) as backend:
        if isinstance(backend, StartsInBackground):  # the fork server's preload, which ``with`` only launches
            backend.wait_started()
        started = time.perf_counter() - t0
        source = scenario.seed_path().read_text()
        anyio.run(backend.prescreen, source)  # the first also imports the reference: not the anchor
        t1 = time.perf_counter()
        report = anyio.run(backend.prescreen, source)
        once = time.perf_counter() - t1
    if not report.passed():
        raise SystemExit(f"the anchor's pre-screen of the seed did not pass: {report.reason}")
    return started, once


def instrument(phases: Phases) -> dict:
    from kernel_scientist.agents import critic, offline_brain
    from kernel_scientist.evaluator.backends import _simulated

    from kernel_scientist import campaign

    seen: dict = {}
    phases.wrap(_simulated.SimulatedBackend, "reference_report", "start-up: the reference on meta tensors")
    # What _run spends outside the phases inside it (rules, judging, timing model) is the wait
    # for the sandboxed run: the same for a backend with one fork server or with a pool.
    phases.wrap(_simulated.SimulatedBackend, "_run", lambda self, mode, *a: f"waiting for the sandbox: {mode}")
    phases.wrap(_simulated.SimulatedBackend, "_judge", "judging outputs (reference on CPU)")
    phases.wrap(_simulated.SimulatedBackend, "_timed", "timing model")
    phases.wrap(_simulated, "rule_verdict", "static rules")
    phases.wrap(critic, "static_findings", "static rules")
    for step in ("select", "design", "implement", "review"):
        phases.wrap_async(offline_brain.OfflineBrain, step, "offline brain")
    close = _simulated.SimulatedBackend.close

    def closing(self):
        seen["pool"] = getattr(self, "_pool", None) and self._pool.stats  # absent before the pool
        seen["closed_at"] = time.perf_counter()
        close(self)
        seen["close_s"] = time.perf_counter() - seen["closed_at"]

    _simulated.SimulatedBackend.close = closing
    agents = campaign._agents

    async def timed_agents(*args):
        seen["agents_from"] = time.perf_counter()
        try:
            await agents(*args)
        finally:
            seen["agents_to"] = time.perf_counter()

    campaign._agents = timed_agents
    return seen


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenario", type=Path, default=ROOT / "scenarios" / "amd_fp8_mm_mi300x.toml")
    parser.add_argument("--seed", type=int, help="campaign.seed (default: the scenario's)")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--db", type=Path, help="keep the blackboard here (default: a temporary folder)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    args = parser.parse_args(argv)
    overrides = [*args.overrides, *([f"campaign.seed={args.seed}"] if args.seed is not None else [])]

    from kernel_scientist.blackboard import ScenarioError, load_scenario, open_existing

    from kernel_scientist import campaign

    try:
        scenario = load_scenario(args.scenario, overrides)
    except ScenarioError as exc:
        print(f"bench_main_job: {exc}", file=sys.stderr)
        return 2
    load_before = os.getloadavg()[0]
    anchor_import = bare_import_s()
    anchor_start, anchor_prescreen = one_prescreen_s(scenario)

    phases = Phases()
    seen = instrument(phases)
    usage0 = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    with tempfile.TemporaryDirectory(prefix="ks-bench-") as tmp:
        db = args.db or Path(tmp) / "main-job.sqlite"
        t0 = time.perf_counter()
        campaign.start(scenario, db)
        wall = time.perf_counter() - t0
        usage1 = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        with open_existing(db) as board:
            evaluations = board.evaluations()
            seed_score = evaluations[0].report.passed_score() if evaluations else None
            scores = [s for e in evaluations if (s := e.report.passed_score()) is not None]
    cpu = {
        which: round((after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime), 1)
        for which, before, after in zip(("campaign process", "sandbox processes"), usage0, usage1, strict=True)
    }
    startup = seen["agents_from"] - t0 - phases.seconds.get("start-up: the reference on meta tensors", 0.0)
    closing = t0 + wall - seen["agents_to"]
    accounted = dict(phases.seconds)
    accounted["start-up: imports, task, fork server, blackboard"] = startup
    accounted["closing: final pass, fork servers stopped"] = closing
    inside = sum(v for k, v in phases.seconds.items() if not k.startswith("start-up"))
    accounted["agents and blackboard (the rest)"] = seen["agents_to"] - seen["agents_from"] - inside
    pool = seen.get("pool")
    result = {
        "scenario": str(args.scenario),
        "seed": scenario.campaign.seed,
        "wall_s": round(wall, 1),
        "evaluations": len(evaluations),
        "best_us": min(scores) if scores else None,
        "seed_us": seed_score,
        "beats_seed": bool(scores and seed_score and min(scores) < seed_score),
        "phases_s": {k: round(v, 1) for k, v in sorted(accounted.items(), key=lambda kv: -kv[1])},
        "calls": dict(phases.calls),
        "cpu_s": cpu,
        "pool": None if pool is None else {"expected": pool.expected, "taken": pool.taken, "runs": pool.runs},
        "anchors_s": {
            "python -c 'import torch, triton'": round(anchor_import, 2),
            "backend start (fork server preload)": round(anchor_start, 2),
            "one pre-screen of the seed": round(anchor_prescreen, 3),
        },
        "machine": {"cpus": os.cpu_count(), "load_before": round(load_before, 2), "load_after": os.getloadavg()[0]},
    }
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(
        f"main job {args.scenario.name}, seed {result['seed']}: {result['wall_s']} s wall, {result['evaluations']} evaluations,"
    )
    print(
        f"  best {result['best_us']} us against the seed's {result['seed_us']} us (beats the seed: {result['beats_seed']})"
    )
    print("where the wall time went (s):")
    for name, secs in result["phases_s"].items():
        calls = phases.calls.get(name)
        print(f"  {secs:7.1f}  {name}" + (f"  ({calls} calls)" if calls else ""))
    print(
        f"CPU seconds: {cpu['campaign process']} in the campaign process, {cpu['sandbox processes']} in sandbox processes"
    )
    if pool is not None:
        print(f"sandbox runs: {pool.runs}; evaluations expected ahead: {pool.expected}, taken: {pool.taken}")
    print("anchors, same machine, same run:")
    for name, secs in result["anchors_s"].items():
        print(f"  {secs:7.3f}  {name}")
    m = result["machine"]
    print(f"machine: {m['cpus']} CPUs, load average {m['load_before']} before, {m['load_after']:.2f} after")
    return 0


if __name__ == "__main__":
    sys.exit(main())
