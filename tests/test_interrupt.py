"""Ctrl-C and SIGTERM end a campaign within seconds whatever its brain is doing.

A campaign with the openai-compatible brain runs as a real subprocess against the scripted server
on 127.0.0.1, which takes the first request and never answers it (or answers 503 and the brain
waits out a long retry delay). Once the server has seen the request, the campaign's process group
gets SIGINT (a terminal's Ctrl-C) or SIGTERM (``kill``); it must be gone within 5 s, with exactly one
line on stderr saying where it stopped and how to continue, and exit code 130 or 143 (128 plus the
signal's number). The advice in the line is then followed, and the campaign resumes and finishes.
Before the fix the request on the wire held the campaign for ``llm.timeout_s`` (and every retry),
and SIGTERM ended the process with no line at all.
"""

import os
import re
import signal
import subprocess
import time
from collections import Counter

import pytest
from _support import SCENARIOS, cli, popen, small_campaign, small_task_folder
from kernel_scientist.blackboard import Blackboard, open_existing
from llm_server import ScriptedServer

STOP_WITHIN_S = 5.0
CODES = {signal.SIGINT: 130, signal.SIGTERM: 143}
FIRST_WORDS = {signal.SIGINT: "interrupted", signal.SIGTERM: "terminated by SIGTERM"}


def _llm_run(db, url, *extra):
    """``run`` of the smoke scenario (short) with the openai-compatible brain at ``url``; the
    default ``llm.timeout_s`` (600 s): a stop that waited for the request would fail the test."""
    overrides = (
        "agents.brain=openai-compatible",
        f"llm.base_url={url}/v1",
        "llm.prices.input=0",
        "llm.prices.output=0",
        "campaign.hours=0.25",
        *extra,
    )
    return (
        "run",
        str(SCENARIOS / "smoke.toml"),
        "--db",
        str(db),
        "--quiet",
        *(a for o in overrides for a in ("--set", o)),
    )


def _start(argv, cwd, **kwargs):
    """The command in its own process group with SIGINT at its default disposition, as a
    terminal's foreground job (tests/test_walkthrough.py, "interrupts")."""
    return popen(
        *argv,
        cwd=cwd,
        start_new_session=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        **kwargs,
    )


def _stop(proc, signum, group=True):
    """Send ``signum`` to the process group (or the command alone, as ``kill PID`` does); (exit
    code, stderr, seconds it took to end)."""
    sent = time.monotonic()
    (os.killpg if group else os.kill)(proc.pid, signum)
    try:
        proc.wait(timeout=STOP_WITHIN_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        err = proc.communicate()[1]
        pytest.fail(f"{signal.Signals(signum).name}: still running {STOP_WITHIN_S:g} s later; it said: {err[-3000:]}")
    took = time.monotonic() - sent
    _, err = proc.communicate()
    return proc.returncode, err, took


def _wait_for(ready, proc, what, within_s=120):
    give_up = time.monotonic() + within_s
    while not ready():
        if proc.poll() is not None:
            pytest.fail(f"the campaign ended before {what}: {proc.communicate()[1][-2000:]}")
        if time.monotonic() > give_up:
            proc.kill()
            pytest.fail(f"no {what} within {within_s} s")
        time.sleep(0.02)


def _check_line(err, signum, db):
    """Exactly one line, that names the stop and the campaign time, and advises a resume that works."""
    assert err.count("\n") == 1 and "Traceback" not in err, err
    line = err.removeprefix("kernel-scientist: ").rstrip("\n")
    assert err.startswith("kernel-scientist: ") and line.startswith(FIRST_WORDS[signum]), err
    assert re.search(r" at \d\d:\d\d:\d\d campaign time; continue with ", line), line
    resume = re.search(r"`kernel-scientist (resume --db \S+)`", line)
    assert resume and resume.group(1) == f"resume --db {db}", line
    return resume.group(1).split()


def _resumes(db, argv):
    """The interrupted campaign is consistent: ``status`` reads it, the advised ``resume`` runs it
    to its end, and every recorded exchange is numbered without a gap (the dropped request left
    none behind)."""
    assert cli("status", "--db", str(db)).returncode == 0
    done = cli(*argv, "--quiet")
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-3000:]
    with open_existing(db) as board:
        messages, calls = board.messages(), board.llm_calls()
    assert messages[-1].kind == "closing" and any(m.text.startswith("resumed at") for m in messages)
    for agent, n in Counter(c.agent for c in calls).items():
        assert sorted(c.seq for c in calls if c.agent == agent) == list(range(1, n + 1)), agent
    assert cli("status", "--db", str(db)).returncode == 0


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_stop_during_a_request_that_never_answers(tmp_path, signum):
    db = tmp_path / "c.sqlite"
    with ScriptedServer() as server:
        server.script.faults = [(None, "hang")]  # the first request, whichever agent asks it
        proc = _start(_llm_run(db, server.url), tmp_path)
        _wait_for(server.script.hanging.is_set, proc, "request on the wire")
        time.sleep(0.3)  # well into the wait for an answer
        code, err, took = _stop(proc, signum)
        assert code == CODES[signum], (code, err)
        assert took < STOP_WITHIN_S
        argv = _check_line(err, signum, db)
        _resumes(db, argv)  # the server answers from here on


def test_a_stop_during_a_request_on_the_wall_clock(tmp_path):
    """On the local backend (the wall clock) the brain asks on the campaign's own loop, not in a
    worker thread: Ctrl-C drops that request the same way."""
    small_task_folder(tmp_path)
    (tmp_path / "local.toml").write_text(small_campaign("local-small", "local", 0.05))
    db = tmp_path / "l.sqlite"
    with ScriptedServer() as server:
        server.script.faults = [(None, "hang")]
        argv = ("run", "local.toml", "--db", str(db), "--quiet")
        overrides = ("agents.brain=openai-compatible", f"llm.base_url={server.url}/v1", "llm.prices.input=0")
        proc = _start((*argv, *(a for o in overrides for a in ("--set", o))), tmp_path)
        _wait_for(server.script.hanging.is_set, proc, "request on the wire")
        time.sleep(0.3)
        code, err, took = _stop(proc, signal.SIGINT)
    assert code == 130 and took < STOP_WITHIN_S, (code, err)
    _check_line(err, signal.SIGINT, db)
    assert cli("status", "--db", str(db)).returncode == 0


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_stop_while_the_brain_waits_to_retry(tmp_path, signum):
    db = tmp_path / "c.sqlite"
    with ScriptedServer() as server:
        server.script.faults = [(None, "503")]  # retried after llm.backoff_s: ten minutes
        proc = _start(_llm_run(db, server.url, "llm.backoff_s=600", "llm.max_backoff_s=600"), tmp_path)
        _wait_for(lambda: bool(server.script.seen), proc, "first request")
        time.sleep(0.5)  # the 503 is in and the retry delay has begun
        code, err, took = _stop(proc, signum)
        assert code == CODES[signum] and took < STOP_WITHIN_S, (code, err)
        # Before the stop, the failed attempt's warning (logged as every failed attempt is).
        warning, stop = err.splitlines(keepends=True)
        assert "attempt 1 failed" in warning and "HTTP 503" in warning, err
        _check_line(stop, signum, db)
        assert len(server.script.seen) == 1  # no retry went out after the stop


def test_sigterm_before_the_campaign_starts_writes_nothing(tmp_path):
    """SIGTERM while the command is still loading (imports, the task, the backend): the same line
    as Ctrl-C there, with its own first words and exit code, and no file left behind."""
    folder = tmp_path / "work"
    folder.mkdir()
    proc = _start(("run", str(SCENARIOS / "smoke.toml"), "--db", str(folder / "c.sqlite"), "--quiet"), folder)
    time.sleep(0.5)
    code, err, _ = _stop(proc, signal.SIGTERM)
    assert code == 143 and err.count("\n") == 1, (code, err)
    assert err.startswith("kernel-scientist: terminated by SIGTERM") and err.rstrip().endswith("nothing was written")
    assert list(folder.iterdir()) == []


def test_sigterm_stops_a_follower_with_its_line(tmp_path):
    """Commands other than a campaign take SIGTERM as they take Ctrl-C: `logs --follow` says what
    it stopped following."""
    db = tmp_path / "c.sqlite"
    done = cli("run", str(SCENARIOS / "smoke.toml"), "--db", str(db), "--quiet", "--set", "campaign.hours=0.001")
    assert done.returncode == 0, done.stderr[-2000:]
    with Blackboard(db) as board:  # a campaign still running elsewhere, as far as a follower can tell
        board.say(agent="runner", kind="info", at=board.clock(), text="resumed at 0.00 h")
    out = tmp_path / "follow.out"
    with out.open("w") as sink:
        proc = _start(("logs", "--follow", "--db", str(db)), tmp_path, stdout=sink)
        _wait_for(lambda: out.stat().st_size > 0, proc, "first line of the log")
        code, err, _ = _stop(proc, signal.SIGTERM)
    assert code == 143, (code, err)
    assert err == (
        f"kernel-scientist: terminated by SIGTERM; stopped following {db} "
        "(a campaign writing it goes on in its own process)\n"
    )


def test_sigterm_stops_a_ray_campaign_with_its_line(tmp_path):
    """``ray.init`` installs its own SIGTERM handler (``sys.exit``), which ended a Ray campaign
    with exit code 15 and tracebacks; the campaign puts the command line's back. The signal goes
    to the command alone (``kill PID``): sent to the group, it also stops the local Ray instance,
    and the backend's goodbye to a head that is dying may wait its 10 s deadline."""
    pytest.importorskip("ray")
    small_task_folder(tmp_path)
    (tmp_path / "ray.toml").write_text(small_campaign("ray-small", "ray", 0.05, in_flight=1))
    db = tmp_path / "r.sqlite"
    proc = _start(("run", "ray.toml", "--db", str(db), "--quiet"), tmp_path)  # a local Ray instance of its own
    jsonl = db.with_suffix(".jsonl")
    _wait_for(lambda: jsonl.exists() and '"kind":"evaluation"' in jsonl.read_text(), proc, "first evaluation", 300)
    code, err, _ = _stop(proc, signal.SIGTERM, group=False)
    assert code == 143 and "Traceback" not in err, (code, err)
    _check_line(err.splitlines(keepends=True)[-1], signal.SIGTERM, db)  # after Ray's own start-up warnings
