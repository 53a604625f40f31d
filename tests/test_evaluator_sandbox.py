"""The sandbox layer on its own (no static rules in front), with real processes."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import msgspec
import pytest
from kernel_scientist.blackboard.records import Outcome, Shape
from kernel_scientist.evaluator import SimulatedBackend, load_task
from kernel_scientist.evaluator._wire import ChildRequest, ChildResult
from kernel_scientist.evaluator.sandbox._forkserver import ForkServer

TASK = load_task(Path(__file__).resolve().parents[1] / "evaluator" / "tasks" / "amd_fp8_mm")


def request(source: str) -> ChildRequest:
    return ChildRequest(
        mode="prescreen",
        source=source,
        task_dir=TASK.path,
        modules=TASK.modules,
        check=[Shape(64, 64, 128, 1)],
        bench=[],
        device="mi300x",
    )


def alive_in_group(pgid: int) -> list[int]:
    """Processes of a process group that are still running (zombies do not count: in a container
    nobody may reap an orphan, but it runs no code)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[2]) == pgid and fields[0] != "Z":
            found.append(int(entry.name))
    return found


@pytest.fixture(scope="module")
def server():
    os.environ["KS_DB"] = "/tmp/secret-board.sqlite"
    os.environ["SOME_API_KEY"] = "sk-do-not-leak"
    s = ForkServer()
    try:
        s.start()
        yield s
    finally:
        s.close()
        os.environ.pop("KS_DB", None)
        os.environ.pop("SOME_API_KEY", None)


def test_a_segfault_is_reported_as_the_signal(server):
    job = server.run(request("import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n"), 10.0, 1000)
    assert job.finished is not None and job.finished.signal == signal.SIGSEGV
    backend = SimulatedBackend(TASK)
    outcome, reason = backend._failure(job)
    assert outcome is Outcome.CRASH and "SIGSEGV" in reason


def test_a_timeout_kills_the_whole_process_group(server):
    source = "import os, time\nif os.fork() == 0:\n    while True: time.sleep(0.01)\nwhile True: pass\n"
    t0 = time.monotonic()
    job = server.run(request(source), 1.5, 1000)
    assert job.timed_out and time.monotonic() - t0 < 5
    assert job.finished is not None
    deadline = time.monotonic() + 2
    while alive_in_group(job.finished.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert alive_in_group(job.finished.pid) == []


def test_a_flood_of_output_is_truncated(server):
    job = server.run(request("import sys\nfor _ in range(200):\n    sys.stdout.write('y' * 50000)\n"), 20.0, 5000)
    assert len(job.finished.output) == 5000 and job.finished.output_dropped == 200 * 50000 - 5000


def test_the_environment_is_scrubbed_and_the_directory_is_fresh(server):
    source = (
        "import os\nprint(sorted(os.environ))\nprint('CWD', os.getcwd(), sorted(os.listdir('.')))\n"
        "print('INTERP', os.environ.get('TRITON_INTERPRET'), os.environ['TRITON_CACHE_DIR'].startswith(os.getcwd()))\n"
    )
    out = server.run(request(source), 20.0, 100_000).finished.output
    assert "KS_DB" not in out and "SOME_API_KEY" not in out and "INTERP 1 True" in out
    assert "'submission.py'" in out and "'task.py'" in out and "reference.py" not in out


def test_a_candidate_cannot_import_the_reference(server):
    job = server.run(request("import reference\n"), 20.0, 1000)
    result = msgspec.msgpack.decode(job.finished.result, type=ChildResult)
    assert result.status == "compile_error" and "reference" in result.reason


def test_what_a_candidate_does_to_the_servers_reference_stays_in_its_own_process(server):
    """The fork server imports the task's reference once and every child draws its inputs from
    its inherited copy: a candidate that reaches that copy and rewrites it (or empties the server's
    table) changes nothing for the next candidate, whose result is byte for byte the one before."""
    before = server.run(request(TASK.seed_source), 20.0, 1000).finished
    poison = (
        "import sys\n"
        "child = sys.modules['kernel_scientist.evaluator.sandbox._child']\n"
        "print('preloaded', sum(ref is not None for ref in child._references.values()))\n"
        "for ref in child._references.values():\n"
        "    if ref is not None:\n"
        "        ref.generate_input = lambda **kw: None\n"
        "child._references.clear()\n"
        "print('poisoned')\n"
    )
    out = server.run(request(poison), 20.0, 1000).finished.output
    assert "preloaded 1" in out and "poisoned" in out
    after = server.run(request(TASK.seed_source), 20.0, 1000).finished
    result = msgspec.msgpack.decode(after.result, type=ChildResult)
    assert result.status == "ok" and after.result == before.result


def test_a_killed_server_is_replaced(server):
    job = server.run(
        request("import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\nwhile True: pass\n"), 10.0, 1000
    )
    assert job.finished is None and "server died" in job.note
    again = server.run(request("print('fine')\n"), 60.0, 1000)
    assert again.finished is not None and again.finished.exit_code == 0 and "fine" in again.finished.output


_ORPHAN_SCRIPT = """
import sys
from pathlib import Path
from kernel_scientist.evaluator import SimulatedBackend, load_task
import anyio
root = Path(sys.argv[1])
task = load_task(root / "evaluator" / "tasks" / "amd_fp8_mm")
hang = (root / "tests" / "attacks" / "infinite_loop.py").read_text()
backend = SimulatedBackend(task, timeout_s=600).__enter__()
print(backend._server._proc.pid, flush=True)
anyio.run(backend.evaluate, hang)
"""


def _children(pid: int) -> list[int]:
    try:
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


@pytest.mark.skipif(
    not Path(f"/proc/{os.getpid()}/task/{os.getpid()}/children").exists(),
    reason="needs /proc/PID/task/PID/children (Linux with CONFIG_PROC_CHILDREN)",
)
def test_nothing_outlives_a_killed_evaluator(tmp_path):
    """kill -9 of the process that owns the backend takes its fork server and the hanging candidate
    with it (PR_SET_PDEATHSIG), instead of leaving them spinning for ever."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[1]
    owner = subprocess.Popen(
        [sys.executable, "-c", _ORPHAN_SCRIPT, str(root)], stdout=subprocess.PIPE, cwd=tmp_path, text=True
    )
    server = int(owner.stdout.readline())
    deadline = time.monotonic() + 60
    while not _children(server) and time.monotonic() < deadline:  # the candidate is running
        time.sleep(0.05)
    candidates = _children(server)
    assert candidates, "the candidate never started"
    owner.kill()
    owner.wait()
    deadline = time.monotonic() + 10
    alive = [server, *candidates]
    while alive and time.monotonic() < deadline:
        alive = [
            p
            for p in alive
            if Path(f"/proc/{p}").exists() and "Z" not in Path(f"/proc/{p}/stat").read_text().split(")")[-1][:3]
        ]
        time.sleep(0.05)
    assert not alive, f"still running after their owner was killed: {alive}"


async def test_a_backend_launches_its_server_on_entry_and_the_first_run_waits_for_it():
    """``with backend`` only launches the fork server (its preload overlaps the caller's start);
    a pre-screen right after entry waits for it and passes."""
    with SimulatedBackend(TASK, noise=0.0) as backend:
        server = backend._server
        assert server.running  # launched, perhaps not ready yet
        report = await backend.prescreen(TASK.seed_source)
        assert report.outcome is Outcome.PASSED, report.reason
        backend.wait_started()  # ready already: returns at once
        assert server.running


_NO_SERVER = """
import sys
from pathlib import Path
from kernel_scientist import campaign
from kernel_scientist.blackboard import load_scenario
from kernel_scientist.evaluator import SandboxError, SimulatedBackend
from kernel_scientist.evaluator.sandbox import _forkserver as _sandbox

_sandbox._STARTUP_S = 0.0  # no server is ready within no time
scenario = load_scenario(Path(sys.argv[1]), [])
db = Path(sys.argv[2])
try:
    campaign.start(scenario, db)
except SandboxError as exc:
    print("refused:", exc)
print("exists:", db.exists())
"""


def test_a_sandbox_that_cannot_start_refuses_a_campaign_before_its_blackboard_exists(tmp_path, monkeypatch):
    """The fork server's Ready wait moved from ``with backend`` to after the reference report;
    a server that does not start still stops a new campaign before its file is written. (The
    campaign runs in a child process: its reference report imports Triton, which this process
    must not do before tests/test_task.py sets TRITON_INTERPRET.)"""
    import subprocess
    import sys

    from kernel_scientist.evaluator import SandboxError
    from kernel_scientist.evaluator.sandbox import _forkserver as _sandbox

    monkeypatch.setattr(_sandbox, "_STARTUP_S", 0.0)
    with SimulatedBackend(TASK) as backend:
        with pytest.raises(SandboxError, match="did not start"):
            backend.wait_started()
    scenario = Path(__file__).resolve().parents[1] / "scenarios" / "smoke.toml"
    db = tmp_path / "board.sqlite"
    done = subprocess.run(
        [sys.executable, "-c", _NO_SERVER, str(scenario), str(db)], capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "refused: the fork server did not start" in done.stdout and "exists: False" in done.stdout
    assert not db.exists()
