"""`logs` as a conversation viewer: filters, JSON lines, --follow and the hypothesis thread."""

import threading

import msgspec
import pytest
from _support import cli, popen
from _watch_campaign import smoke_campaign  # noqa: F401  (a session fixture)
from kernel_scientist.blackboard import Blackboard, Message, open_existing

from kernel_scientist import conversation as cv


def _json(proc) -> list[Message]:
    assert proc.returncode == 0, proc.stderr
    return [msgspec.json.decode(line, type=Message) for line in proc.stdout.splitlines()]


@pytest.fixture(scope="module")
def everything(smoke_campaign):
    with open_existing(smoke_campaign.db) as board:
        return board.messages()


@pytest.mark.parametrize(
    "flag, value, keep",
    [
        ("--agent", "critic", lambda m: m.agent == "critic"),
        ("--kind", "verdict", lambda m: m.kind == "verdict"),
        ("--kernel", "3", lambda m: m.kernel_id == 3),
        ("--hypothesis", "H2", lambda m: m.hypothesis_id == 2),
        ("--grep", "REFUTED", lambda m: "refuted" in m.text.lower()),
    ],
)
def test_each_filter_keeps_exactly_the_matching_messages(smoke_campaign, everything, flag, value, keep):
    got = _json(cli("logs", "--db", str(smoke_campaign.db), flag, value, "--json"))
    assert got == [m for m in everything if keep(m)] and got


def test_filters_combine_and_text_mode_prints_lines(smoke_campaign, everything):
    proc = cli(
        "logs", "--db", str(smoke_campaign.db), "--agent", "evaluator", "--kind", "evaluation", "--grep", "simulated"
    )
    lines = proc.stdout.splitlines()
    want = [m for m in everything if m.agent == "evaluator" and m.kind == "evaluation" and "simulated" in m.text]
    assert proc.returncode == 0 and len(lines) == len(want) > 0
    assert all("evaluator │ kernel" in line for line in lines)


def test_thread_follows_one_hypothesis_from_proposal_to_verdict(smoke_campaign):
    with open_existing(smoke_campaign.db) as board:
        hyp = next(h for h in board.hypotheses() if h.verdict != "pending" and h.kernel_id is not None)
        th = cv.thread(board, hyp.id)
    stages = [stage for stage, _ in th.messages]
    assert stages[0] == "proposal" and stages.index("verdict") > stages.index("evaluation")
    assert [m.at for _, m in th.messages] == sorted(m.at for _, m in th.messages)
    for needed in ("proposal", "choice", "implementation", "review", "evaluation", "verdict"):
        assert needed in stages
    assert th.missing == []
    proc = cli("logs", "--db", str(smoke_campaign.db), "--thread", f"H{hyp.id}")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert out.startswith(f"H{hyp.id} ") and f"verdict {hyp.verdict}" in out
    positions = [
        out.index(f"── {s}") for s in ("proposal", "choice", "implementation", "review", "evaluation", "verdict")
    ]
    assert positions == sorted(positions)
    same = cli("logs", "--db", str(smoke_campaign.db), "--hypothesis", str(hyp.id), "--thread")
    assert same.stdout == out
    rows = [
        msgspec.json.decode(line)
        for line in cli("logs", "--db", str(smoke_campaign.db), "--thread", f"H{hyp.id}", "--json").stdout.splitlines()
    ]
    assert {r["stage"] for r in rows} >= {"proposal", "verdict"}


def test_thread_of_a_proposed_hypothesis_lists_what_is_not_reached(smoke_campaign):
    with open_existing(smoke_campaign.db) as board:
        hyp = next(h for h in board.hypotheses() if h.state == "proposed")
        th = cv.thread(board, hyp.id)
    assert [s for s, _ in th.messages] == ["proposal"]
    assert th.missing == ["choice", "implementation", "review", "evaluation", "verdict"]


@pytest.mark.parametrize(
    "args, says",
    [
        (("--thread", "Hx"), "expected a hypothesis id"),
        (("--thread", "H9999"), "no hypothesis H9999"),
        (("--thread",), "--thread needs a hypothesis"),
        (("--kernel", "abc"), "'abc' is not a whole number"),
    ],
)
def test_bad_ids_are_one_line_and_exit_2(smoke_campaign, args, says):
    proc = cli("logs", "--db", str(smoke_campaign.db), *args)
    assert proc.returncode == 2 and says in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr


def test_follow_prints_what_another_process_writes(smoke_campaign, tmp_path):
    db = smoke_campaign.copy(tmp_path / "f.sqlite")
    proc = popen("logs", "--db", str(db), "--follow", "--json", "--grep", "hello from the test")
    guard = threading.Timer(30, proc.kill)  # a follower that never prints must not hang the suite
    guard.start()
    try:
        with Blackboard(db) as board:
            board.say(agent="runner", kind="info", at=board.clock(), text="hello from the test")
        line = proc.stdout.readline()  # blocks until the follower prints it
    finally:
        guard.cancel()
        proc.terminate()
        proc.wait(timeout=10)
    assert msgspec.json.decode(line, type=Message).text == "hello from the test"
