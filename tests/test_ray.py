"""The Ray backend and `sweep --ray` on a real local Ray cluster of three nodes (Ray's own cluster
utilities: a head that takes no work and two one-CPU workers), with the harness in its CPU mode.

Nothing of Ray is faked: the campaigns are the real command in a subprocess joining the cluster,
the node is killed the way a host dies (its raylet and workers, SIGKILL, mid-evaluation), and the
lost cluster is the whole cluster shut down under a running campaign.
"""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import msgspec
import pytest
from _support import ROOT, SCENARIOS, cli, script, small_campaign, small_task_folder
from kernel_scientist.blackboard import BlackboardError, open_existing

ray_cluster_utils = pytest.importorskip("ray.cluster_utils")

TASK = ROOT / "evaluator" / "tasks" / "amd_fp8_mm"


@pytest.fixture
def workdir(tmp_path):
    small_task_folder(tmp_path)
    (tmp_path / "ray.toml").write_text(small_campaign("ray-small", "ray", 0.006, in_flight=2))  # about 22 wall seconds
    return tmp_path


def _cluster():
    cluster = ray_cluster_utils.Cluster(initialize_head=True, head_node_args={"num_cpus": 0})
    for _ in range(2):
        cluster.add_node(num_cpus=1)
    cluster.wait_for_nodes()
    return cluster


@pytest.fixture(scope="module")
def cluster():
    cluster = _cluster()
    yield cluster
    cluster.shutdown()


def _run(workdir: Path, address: str, *args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "kernel_scientist", *args, "--quiet", "--set", f"evaluator.ray_address={address}"],
        cwd=workdir,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _harness_node(cluster, timeout: float = 120.0):
    """The worker node on which a harness process is running now (found through /proc: harness ->
    Ray worker -> that node's raylet)."""
    raylets = {node.all_processes["raylet"][0].process.pid: node for node in cluster.worker_nodes}
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
            except OSError:
                continue
            if b"evaluator.sandbox._gpu_harness" not in cmd:
                continue
            ancestor = int(pid)
            for _ in range(4):
                try:
                    ancestor = int(Path(f"/proc/{ancestor}/stat").read_text().rsplit(")", 1)[1].split()[1])
                except (OSError, IndexError, ValueError):
                    break
                if ancestor in raylets:
                    return raylets[ancestor]
        time.sleep(0.2)
    raise AssertionError("no harness process appeared on a worker node")


def _wait_for(db: Path, evaluations: int = 0, timeout: float = 180.0) -> None:
    """Until the campaign has started (its blackboard exists) and recorded ``evaluations``."""
    deadline = time.monotonic() + timeout
    while not (db.exists() and _recorded(db) >= evaluations):
        assert time.monotonic() < deadline, f"{db} did not reach {evaluations} evaluations"
        time.sleep(0.3)


def _recorded(db: Path) -> int:
    """Evaluations on the blackboard; -1 while the campaign is still creating the file (it exists
    a moment before its schema does)."""
    try:
        return len(_evaluations(db)[0])
    except BlackboardError:
        return -1


def _evaluations(db: Path):
    with open_existing(db) as board:
        return board.evaluations(), board.submissions(), board.messages()


def test_a_campaign_on_three_nodes_survives_a_killed_node_and_records_every_evaluation_once(cluster, workdir):
    # 54 s rather than the scenario's 22: the killed evaluation's retry alone can outlast 22 s on a
    # loaded machine, leaving no time for the evaluations this test counts.
    proc = _run(workdir, cluster.address, "run", "ray.toml", "--db", "c.sqlite", "--set", "campaign.hours=0.015")
    _wait_for(workdir / "c.sqlite")
    victim = _harness_node(cluster)  # mid-evaluation: its harness is running
    cluster.remove_node(victim, allow_graceful=False)
    cluster.add_node(num_cpus=1)  # the cluster stays three nodes, as a restarted host would
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err[-3000:]
    evals, subs, messages = _evaluations(workdir / "c.sqlite")
    assert len(evals) >= 3
    assert len({e.submission_id for e in evals}) == len(evals)  # recorded once, never twice
    done = [s for s in subs if s.state == "done"]
    assert len(done) == len(evals) and not [s for s in subs if s.state == "leased"]
    assert all(e.report.provenance.backend == "ray" and not e.report.provenance.simulated for e in evals)
    retried = [e for e in evals if "attempt 1 lost (NodeDiedError" in e.report.provenance.notes]
    assert len(retried) == 1 and retried[0].report.outcome == "passed", [e.report.provenance.notes for e in evals]
    assert next(s for s in subs if s.id == retried[0].submission_id).attempts == 1  # our retry, not a new lease
    nodes = {e.report.provenance.notes.split("ray node ")[1].split(",")[0] for e in evals}
    assert len(nodes) >= 2  # spread over the workers
    said = [m for m in messages if m.agent == "evaluator" and m.kind == "evaluation"]
    assert len(said) == len(evals)
    assert "backend ray" in out or "backend ray" in err or "ray" in out


def _harnesses() -> set[int]:
    pids = set()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if b"evaluator.sandbox._gpu_harness" in Path(f"/proc/{pid}/cmdline").read_bytes():
                pids.add(int(pid))
        except OSError:
            pass
    return pids


async def test_a_cancelled_evaluation_leaves_nothing_running_on_the_cluster(cluster, workdir):
    """This test's process is the Ray driver: the backend's own cancellation path, for real."""
    import trio
    from kernel_scientist.evaluator import RayBackend, load_task

    backend = RayBackend(
        load_task(workdir / "tasks" / "small"),
        address=cluster.address,
        timeout_s=120,
        max_calls=3,
        shape_budget_s=0.2,
        device="cpu",
    )
    with backend:
        hang = (ROOT / "tests" / "attacks" / "infinite_loop.py").read_text()
        with trio.move_on_after(60) as scope:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(lambda: backend.evaluate(hang, submission_id=1, secret_seed=2))
                while not _harnesses():  # the candidate spins in its harness on some worker
                    await trio.sleep(0.2)
                spinning = _harnesses()
                nursery.cancel_scope.cancel()
        assert not scope.cancelled_caught  # the nursery ended because we cancelled it, well within 60 s
        # Ray confirms the force-cancel once the kill is under way; the worker and its harness (by
        # their parent-death signal) are gone a few milliseconds later: killed, not abandoned.
        with trio.move_on_after(5):
            while _harnesses() & spinning:
                await trio.sleep(0.05)
        assert not (_harnesses() & spinning)
        report = await backend.evaluate(
            load_task(workdir / "tasks" / "small").seed_source, submission_id=3, secret_seed=2
        )
        assert report.outcome == "passed" and report.provenance.backend == "ray"  # the cluster is fine after


def test_in_flight_beyond_the_clusters_cpus_is_one_line_and_no_file(cluster, workdir):
    proc = cli(
        "run",
        "ray.toml",
        "--db",
        "x.sqlite",
        "--set",
        "evaluator.in_flight=5",
        "--set",
        f"evaluator.ray_address={cluster.address}",
        cwd=workdir,
    )
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert "evaluator.in_flight = 5 is more than the 2 CPUs the Ray cluster" in proc.stderr
    assert not (workdir / "x.sqlite").exists()


def _stopped_line(proc: subprocess.Popen) -> str:
    """The stopped campaign's last line, after checking it is the one-line stop (exit code 3)."""
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 3, err[-3000:]
    line = err.strip().splitlines()[-1]
    assert line.startswith("kernel-scientist: ") and "Ray cluster" in line and "Traceback" not in err, err[-3000:]
    assert "the campaign stopped at" in line and "kernel-scientist resume --db c.sqlite" in line
    return line


def _resume_continues(workdir: Path, cluster) -> None:
    """`resume` on ``cluster`` adds evaluations, each recorded once, and leaves no claim behind.
    It gets a minute more than the 22 s campaign: on a loaded machine the stop can come so near
    the deadline that the resumed run would have no time left to evaluate anything."""
    before, _, _ = _evaluations(workdir / "c.sqlite")
    again = _run(workdir, cluster.address, "resume", "--db", "c.sqlite", "--set", "campaign.hours=0.025")
    out, err = again.communicate(timeout=300)
    assert again.returncode == 0, err[-3000:]
    after, subs, _ = _evaluations(workdir / "c.sqlite")
    with open_existing(workdir / "c.sqlite") as board:
        said = [f"{m.at:.1f} {m.agent}: {m.text}" for m in board.messages()][-12:]
    assert len(after) > len(before), "\n".join(said)
    assert len({e.submission_id for e in after}) == len(after)
    assert not [s for s in subs if s.state == "leased"]
    assert len([s for s in subs if s.state == "done"]) == len(after)


def test_a_lost_cluster_stops_the_campaign_cleanly_and_resume_continues(workdir):
    first = _cluster()
    try:
        proc = _run(workdir, first.address, "run", "ray.toml", "--db", "c.sqlite")
        _wait_for(workdir / "c.sqlite", evaluations=1)  # one evaluation recorded, another running
        _harness_node(first)
    finally:
        first.shutdown()
    _stopped_line(proc)  # "does not answer", or "no node ... any more" if the head outlived its workers
    second = _cluster()
    try:
        _resume_continues(workdir, second)
    finally:
        second.shutdown()


def test_a_head_that_stops_answering_stops_the_campaign_before_rays_deadline(workdir):
    """The head frozen (SIGSTOP: its port still takes connections, its calls never return) is the
    race of a head that dies between the port knock and the call after it: the call's own deadline
    stops the campaign (exit code 3, not Ray's status 1 a minute later), and once the head answers
    again `resume` continues on the same cluster."""
    cluster = _cluster()
    gcs = cluster.head_node.all_processes["gcs_server"][0].process
    try:
        proc = _run(workdir, cluster.address, "run", "ray.toml", "--db", "c.sqlite")
        _wait_for(workdir / "c.sqlite", evaluations=1)
        os.kill(gcs.pid, signal.SIGSTOP)
        try:
            line = _stopped_line(proc)
        finally:
            os.kill(gcs.pid, signal.SIGCONT)
        assert "head at" in line and "stopped answering" in line, line
        _resume_continues(workdir, cluster)
    finally:
        cluster.shutdown()


def test_sweep_on_ray_gives_the_local_sweeps_table(cluster, tmp_path):
    args = ("sweep", str(SCENARIOS / "smoke.toml"), "--vary", "agents.engineers=1,2", "--set", "campaign.hours=0.5")
    local = cli(*args, "--out", str(tmp_path / "local"), "--jobs", "2", timeout=300)
    spread = cli(*args, "--out", str(tmp_path / "ray"), "--ray", cluster.address, timeout=300)
    assert local.returncode == 0, local.stderr[-2000:]
    assert spread.returncode == 0, spread.stderr[-2000:]
    table = [ln for ln in spread.stdout.splitlines() if not ln.startswith(("summary:", "plot:"))]
    assert table == [ln for ln in local.stdout.splitlines() if not ln.startswith(("summary:", "plot:"))]
    from kernel_scientist.sweep import SweepSummary

    a, b = (
        msgspec.json.decode((tmp_path / d / "sweep.json").read_bytes(), type=SweepSummary) for d in ("local", "ray")
    )
    assert a.settings == b.settings and [r.best_us for r in a.runs] == [r.best_us for r in b.runs]
    assert all(r.node == "" for r in a.runs) and len({r.node for r in b.runs}) == 2  # one campaign per worker
    assert (tmp_path / "ray" / "sweep.png").read_bytes().startswith(b"\x89PNG")
    for r in b.runs:  # the campaigns came back as whole blackboards where a local sweep puts them
        with open_existing(r.run.db) as board:
            assert board.campaign().virtual_time and board.evaluations()


def test_ray_compare_runs_the_same_kernels_on_both_backends(cluster, tmp_path):
    """scripts/ray_compare.py, the GPU session's comparison, in its CPU dry-run mode."""
    out = tmp_path / "compare.json"
    proc = script(
        "ray_compare.py",
        "--device",
        "cpu",
        "--small",
        "--address",
        cluster.address,
        "--kernels",
        "1",
        "--max-calls",
        "3",
        "--shape-budget",
        "0.2",
        "--out",
        str(out),
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    summary = msgspec.json.decode(out.read_bytes())
    assert summary["verdicts_agree"] == 1 and [r["backend"] for r in summary["rows"]] == ["local", "ray"]
    assert 0 <= summary["ray_overhead_recorded_mean_s"] < 5
    assert "verdicts agree on 1 of 1 kernels" in proc.stdout


def test_slim_wheel_drops_folders_and_their_record_lines(tmp_path):
    import zipfile

    wheel = tmp_path / "pkg-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        for name in ("pkg/__init__.py", "pkg/jars/big.jar", "pkg/core.py"):
            z.writestr(name, "x")
        z.writestr(
            "pkg-1.0.dist-info/RECORD",
            "pkg/__init__.py,sha256=a,1\npkg/jars/big.jar,sha256=b,1\n"
            "pkg/core.py,sha256=c,1\npkg-1.0.dist-info/RECORD,,\n",
        )
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "slim_wheel.py"),
            str(wheel),
            "--out",
            str(tmp_path / "slim"),
            "--drop",
            "pkg/jars",
        ],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    with zipfile.ZipFile(tmp_path / "slim" / wheel.name) as z:
        assert sorted(z.namelist()) == ["pkg-1.0.dist-info/RECORD", "pkg/__init__.py", "pkg/core.py"]
        assert "jars" not in z.read("pkg-1.0.dist-info/RECORD").decode()


def test_a_sweep_carries_the_scenario_and_its_folder_by_value(tmp_path):
    from kernel_scientist.sweep_ray import carry

    small_task_folder(tmp_path / "b")
    (tmp_path / "a").mkdir()
    scenario = tmp_path / "a" / "s.toml"
    scenario.write_text(f'[campaign]\ntask = "{tmp_path / "b" / "tasks" / "small"}"\n')
    files, where, moved = carry(scenario, [])
    assert where == "a/s.toml" and moved == ["campaign.task=../b/tasks/small"]  # an absolute path, re-pointed
    assert {"b/tasks/small/task.yml", "b/tasks/small/reference.py", "b/tasks/utils.py"} <= set(files)
    assert files["b/tasks/utils.py"] == (tmp_path / "b" / "tasks" / "utils.py").read_bytes()
