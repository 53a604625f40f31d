"""`watch` and `run --watch`: the live dashboard, drawn from a real blackboard file."""

import io
import re
import subprocess
import sys
import time

from _support import ROOT, cli
from _watch_campaign import smoke_campaign  # noqa: F401  (a session fixture)
from kernel_scientist.blackboard import Blackboard, open_existing
from rich.console import Console

from kernel_scientist import dashboard

AGENTS = ("archivist", "theorist", "engineer-1", "engineer-2", "critic", "evaluator")


def test_run_watch_draws_the_dashboard_instead_of_the_conversation(smoke_campaign):
    err = smoke_campaign.proc.stderr
    assert "kernel-scientist watch" in err and "FINISHED" in err
    assert "rate limit 12/h" in err
    assert not re.search(r"^\d\d:\d\d:\d\d +[\w-]+ │ ", err, re.M)  # no scrolling conversation lines
    assert "best kernel" in smoke_campaign.proc.stdout  # the leaderboard still follows


def test_watch_once_shows_agents_queue_limits_and_progress(smoke_campaign, tmp_path):
    svg = tmp_path / "frame.svg"
    proc = cli("watch", "--db", str(smoke_campaign.db), "--once", "--width", "140", "--svg", str(svg))
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    for name in AGENTS:
        assert name in out
    assert "campaign time 01:00" in out and "virtual clock" in out
    assert "rate limit 12/h" in out and "utilisation" in out and "in flight ≤ 2" in out
    assert "x the seed" in out and "(simulated on AMD Instinct MI300X)" in out
    assert "latest messages" in out and "campaign over" in out
    assert svg.stat().st_size > 5000 and svg.read_text().lstrip().startswith("<svg")


def test_snapshot_matches_the_blackboard(smoke_campaign):
    with open_existing(smoke_campaign.db) as board:
        snap = dashboard.snapshot(board, messages=5)
        evals = board.evaluations()
        passed = [e.report.score_us for e in evals if e.report.outcome == "passed"]
    assert snap.evaluations == len(evals) and snap.best_us == min(passed)
    assert snap.simulated and snap.over and len(snap.messages) == 5
    assert [a.name for a in snap.agents] == list(AGENTS) and all(a.state == "done" for a in snap.agents)
    assert 0 < snap.utilisation <= 1 and snap.starts_last_hour <= 12
    assert [b for _, b in snap.best_over_time] == sorted((b for _, b in snap.best_over_time), reverse=True)


def test_a_snapshot_is_one_moment_even_when_the_campaign_commits_mid_read(smoke_campaign, tmp_path):
    db = smoke_campaign.copy(tmp_path / "mid.sqlite")
    with Blackboard(db) as writer:  # a campaign that is still running
        writer.say(agent="runner", kind="info", at=writer.clock(), text="resumed at 1.00 h")
        with open_existing(db) as board:
            read_messages = board.messages

            def messages_then_a_commit():  # the campaign closes right after the messages were read
                seen = read_messages()
                writer.say(agent="runner", kind="closing", at=writer.clock(), text="campaign over: done")
                return seen

            board.messages = messages_then_a_commit
            snap = dashboard.snapshot(board, messages=3)
            assert not snap.over and snap.messages[-1].text == "resumed at 1.00 h"
            board.messages = read_messages
            snap = dashboard.snapshot(board, messages=3)
            assert snap.over and snap.messages[-1].text == "campaign over: done"


def test_sparkline_and_time_sampling():
    assert dashboard.sparkline([1, 2, 3]) == "▁▅█"
    assert dashboard.sparkline([5, 5]) == "▁▁"
    assert dashboard.over_time([(10.0, 3.0), (50.0, 1.0)], now=100.0, width=10) == [3.0] * 4 + [1.0] * 6


def test_watch_follows_another_process_and_exits_when_the_campaign_ends(smoke_campaign, tmp_path):
    db = smoke_campaign.copy(tmp_path / "live.sqlite")
    with Blackboard(db) as board:  # make it look unfinished: a later message than the closing one
        board.say(agent="runner", kind="info", at=board.clock(), text="resumed at 1.00 h")
    proc = subprocess.Popen(
        [sys.executable, "-m", "kernel_scientist", "watch", "--db", str(db), "--interval", "0.1", "--exit-when-done"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        time.sleep(2.0)
        assert proc.poll() is None, proc.communicate()  # still following
        with Blackboard(db) as board:
            board.say(agent="runner", kind="closing", at=board.clock(), text="campaign over at 1.00 h: done")
        out, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert "campaign over at 1.00 h: done" in out and "FINISHED" in out


def test_live_listener_redraws_at_most_a_few_times_per_second(smoke_campaign, tmp_path):
    db = smoke_campaign.copy(tmp_path / "l.sqlite")
    t = [0.0]
    buf = io.StringIO()
    view = dashboard.LiveListener(db, Console(file=buf, force_terminal=True, width=120), max_hz=4, now=lambda: t[0])
    with open_existing(db) as board:
        msg = board.messages()[-1]
    for step in range(20):  # 20 messages within one wall second
        t[0] = step * 0.05
        view(msg)
    view.close()
    frames = buf.getvalue().count("kernel-scientist watch")
    assert 4 <= frames <= 6, frames  # 0.0, 0.25, 0.5, 0.75 (+ the final frame)


def test_watch_on_a_missing_file_is_one_line_and_exit_2(tmp_path):
    proc = cli("watch", "--db", str(tmp_path / "nope.sqlite"), "--once")
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "no such blackboard" in proc.stderr
