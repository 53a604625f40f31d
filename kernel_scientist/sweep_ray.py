"""`sweep --ray`: the sweep's campaigns as Ray tasks spread over a cluster, the same table after.

Each campaign is one Ray task needing one CPU. It runs exactly what a local sweep runs (``sweep
.command``: a ``kernel-scientist run --quiet`` process) on whichever node Ray picks, in a
temporary folder holding the scenario file and its problem folder, which travel by value with
the task (no shared file system). Its blackboard and conversation come back as bytes, are written
where a local sweep would have written them, and are measured by the same ``sweep.measure``, so
the table, ``sweep.json`` and the plot cannot differ from a local sweep's for the same seeds.

A campaign of a sweep is self-contained and only its returned copy is ever read, so here Ray's own
retries are the right tool: a campaign whose node died is started again from scratch elsewhere
(``max_retries``), which cannot count anything twice. Ctrl-C cancels every campaign still running.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from kernel_scientist.blackboard import ScenarioError, load_scenario, open_existing

from . import logs
from .sweep import Run, RunResult, command, measure

if TYPE_CHECKING:
    import ray

_RETRIES = 2  # a campaign whose node died starts again from scratch, at most this many times
_MAX_BYTES = 64 * 1024 * 1024  # what one campaign may carry to its node: the scenario and its folder


# The campaign of a local sweep, run so that it dies with the Ray worker running it: a cancelled or
# killed task (Ctrl-C on the sweep) takes its campaign along instead of leaving it running.
_DIES_WITH_THE_TASK = (
    "import sys; from kernel_scientist.evaluator.sandbox import die_with_parent; die_with_parent(); "
    "from kernel_scientist.cli import main; sys.exit(main(sys.argv[1:]))"
)


class Carried(msgspec.Struct, frozen=True):
    """What a campaign takes to its node: files by relative path, and the run to start."""

    files: dict[str, bytes]
    scenario: str  # the scenario file's path among ``files``
    run: Run
    overrides: list[str]


class Returned(msgspec.Struct, frozen=True):
    exit_code: int
    error: str  # the last line of stderr when the campaign failed
    blackboard: bytes
    conversation: bytes
    wall_s: float
    node: str


def carry(scenario: Path, overrides: list[str]) -> tuple[dict[str, bytes], str, list[str]]:
    """The scenario file and everything its campaign reads (the problem folder, the helper modules
    its files: list names, the seed kernel), keyed by their paths below their common folder, so
    that relative paths in the scenario still resolve on the node; and the override that points an
    absolute ``campaign.task`` at its copy. Raises ScenarioError."""
    from kernel_scientist.evaluator import load_task

    sc = load_scenario(scenario, overrides)
    task = load_task(sc.task_path())
    paths = {scenario.resolve(), sc.seed_path()} | {Path(p) for p in task.modules.values()}
    paths |= {
        p
        for p in sc.task_path().rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and not p.name.startswith(".")
    }
    root = Path(os.path.commonpath([str(p.parent) for p in paths]))
    files = {str(p.relative_to(root)): p.read_bytes() for p in sorted(paths)}
    size = sum(map(len, files.values()))
    if size > _MAX_BYTES:
        raise ScenarioError(
            f"{scenario}: its problem folder {sc.task_path()} holds {size / 2**20:.0f} MiB, more "
            f"than the {_MAX_BYTES / 2**20:.0f} MiB a campaign may carry to a Ray node"
        )
    moved = (
        [f"campaign.task={os.path.relpath(sc.task_path(), scenario.resolve().parent)}"]
        if Path(sc.campaign.task).is_absolute()
        else []
    )
    return files, str(scenario.resolve().relative_to(root)), moved


def run_campaign(carried: bytes) -> bytes:
    """Ray task: one campaign of a sweep in a temporary folder of this node; returns ``Returned``."""
    import ray

    job = msgspec.msgpack.decode(carried, type=Carried)
    ip = ray.util.get_node_ip_address()  # type: ignore[no-untyped-call]  # ray leaves this one unannotated
    node = f"{ip}/{ray.get_runtime_context().get_node_id()[:8]}"
    folder = Path(tempfile.mkdtemp(prefix="ks-sweep-"))
    began = time.perf_counter()
    carried_to = folder / "carried"  # not the working directory: `python -m` imports from there, and a
    try:  # carried evaluator/tasks/... would shadow the installed package
        for rel, data in job.files.items():
            (carried_to / rel).parent.mkdir(parents=True, exist_ok=True)
            (carried_to / rel).write_bytes(data)
        db = folder / "run.sqlite"
        argv = command(carried_to / job.scenario, msgspec.structs.replace(job.run, db=str(db)), job.overrides)
        assert argv[1:3] == ["-m", "kernel_scientist"]
        proc = subprocess.run(
            [argv[0], "-c", _DIES_WITH_THE_TASK, *argv[3:]],
            cwd=folder,
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        if proc.returncode != 0:
            tail = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
            return msgspec.msgpack.encode(
                Returned(
                    exit_code=proc.returncode,
                    error=tail,
                    blackboard=b"",
                    conversation=b"",
                    wall_s=time.perf_counter() - began,
                    node=node,
                )
            )
        with open_existing(db) as board:
            board.copy_to(folder / "copy.sqlite")
        talk = logs.jsonl_path(db)
        return msgspec.msgpack.encode(
            Returned(
                exit_code=0,
                error="",
                blackboard=(folder / "copy.sqlite").read_bytes(),
                conversation=talk.read_bytes() if talk.exists() else b"",
                wall_s=time.perf_counter() - began,
                node=node,
            )
        )
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def join(address: str) -> None:
    """Join the cluster at ``address`` ("" = one on this machine, else a new local one), before
    anything is printed or run. Raises ScenarioError (one line)."""
    from kernel_scientist.evaluator import ClusterError, join_cluster

    try:
        join_cluster(address)
    except ClusterError as exc:
        raise ScenarioError(f"--ray: {exc}") from None


def execute(
    scenario: Path,
    runs: list[Run],
    overrides: list[str],
    address: str,
    jobs: int | None,
    done: Callable[[RunResult], None] = lambda r: None,
) -> list[RunResult]:
    """Every campaign as a Ray task on the cluster at ``address`` (joined here unless ``join``
    was called), at most ``jobs`` at once (None: as many as the cluster's CPUs take); results in the
    order of ``runs``. Raises ScenarioError when the cluster cannot be joined."""
    files, scenario_rel, moved = carry(scenario, overrides)
    join(address)
    import ray

    remote = ray.remote(run_campaign).options(num_cpus=1, max_retries=_RETRIES)
    pending = list(enumerate(runs))
    running: dict[ray.ObjectRef[bytes], int] = {}
    results: dict[int, RunResult] = {}
    try:
        while pending or running:
            while pending and (jobs is None or len(running) < jobs):
                i, run = pending.pop(0)
                job = Carried(files=files, scenario=scenario_rel, run=run, overrides=[*overrides, *moved])
                running[remote.remote(msgspec.msgpack.encode(job))] = i
            finished, _ = ray.wait(list(running), num_returns=1)
            for ref in finished:
                i = running.pop(ref)
                results[i] = _land(runs[i], ref)
                done(results[i])
    except BaseException:  # Ctrl-C: no campaign runs on behind the sweep
        for ref in running:
            ray.cancel(ref, force=True)
        raise
    finally:
        ray.shutdown()
    return [results[i] for i in range(len(runs))]


def _land(run: Run, ref: ray.ObjectRef[bytes]) -> RunResult:
    """A finished task's campaign written where a local sweep writes it, and measured the same way."""
    import ray

    try:
        back = msgspec.msgpack.decode(ray.get(ref), type=Returned)
    except ray.exceptions.RayError as exc:
        why = " ".join(str(exc).split())[:300]
        return RunResult(run=run, ok=False, error=f"the Ray task failed: {type(exc).__name__}: {why}")
    if back.exit_code != 0:
        return RunResult(
            run=run, ok=False, error=f"exit {back.exit_code}: {back.error}", wall_s=back.wall_s, node=back.node
        )
    db = Path(run.db)
    db.parent.mkdir(parents=True, exist_ok=True)
    db.write_bytes(back.blackboard)
    logs.jsonl_path(db).write_bytes(back.conversation)
    return msgspec.structs.replace(measure(run, back.wall_s), node=back.node)
