"""Never surprise a user: read commands never write, failed starts leave nothing, every user error
is one line with exit code 2, and Ctrl-C is one line with exit code 130 and a campaign that resumes.

File changes are checked on bytes and modification times, and on the folder's listing (so a file
created beside the blackboard, such as SQLite's ``-wal`` and ``-shm``, counts as a change).
"""

import argparse
import gzip
import os
import re
import shutil
import signal
import sqlite3
import time
from importlib.metadata import version

import pytest
from _support import ROOT, SCENARIOS, cli, popen, smoke_run
from _watch_campaign import smoke_campaign  # noqa: F401  (a session fixture)
from kernel_scientist.blackboard import open_existing

from kernel_scientist import cli as ks_cli

SMOKE = SCENARIOS / "smoke.toml"
READERS = {  # every command that reads a blackboard, with what else it needs
    "status": [],
    "logs": [],
    "watch": ["--once"],
    "export": ["--out", "{tmp}/out.py"],
    "report": ["--out", "{tmp}/report"],
    "resume": ["--quiet"],
}


def tree(folder):
    """Every file under ``folder`` with its bytes and modification time."""
    return {
        str(p.relative_to(folder)): (p.read_bytes(), p.stat().st_mtime_ns) if p.is_file() else "folder"
        for p in sorted(folder.rglob("*"))
    }


def main(capsys, *argv):
    """The console entry point in-process: (exit code, stdout, stderr). Any exception escapes,
    which is what a traceback would have been."""
    try:
        code = ks_cli.main([str(a) for a in argv])
    except SystemExit as exc:  # argparse's own exits
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


def one_line(err):
    return err.count("\n") == 1 and err.startswith("kernel-scientist: ") and "Traceback" not in err


def _not_blackboards(folder):
    """What a user might point --db at by mistake, by name."""
    other = folder / "other.db"
    conn = sqlite3.connect(other)
    conn.execute("CREATE TABLE contacts (name TEXT, phone TEXT)")
    conn.execute("INSERT INTO contacts VALUES ('ada', '123')")
    conn.commit()
    conn.close()
    (folder / "empty.db").write_bytes(b"")
    (folder / "binary.db").write_bytes(bytes(range(256)) * 8)
    (folder / "packed.sqlite.gz").write_bytes(gzip.compress(b"SQLite format 3\x00" + bytes(4080)))
    (folder / "folder.db").mkdir()
    return {
        "another program's SQLite database": (other, "not a kernel-scientist blackboard"),
        "an empty file": (folder / "empty.db", "an empty file"),
        "a binary file": (folder / "binary.db", "not an SQLite file"),
        "a gzipped blackboard": (folder / "packed.sqlite.gz", "a gzip file; unpack it first (gunzip -k"),
        "a folder": (folder / "folder.db", "is a folder"),
        "a missing file": (folder / "missing.db", "no such blackboard file"),
    }


@pytest.mark.parametrize("command", sorted(READERS))
def test_read_commands_refuse_what_is_not_a_blackboard_and_change_nothing(tmp_path, capsys, command):
    cases = _not_blackboards(tmp_path)
    before = tree(tmp_path)
    for what, (db, says) in cases.items():
        extra = [a.format(tmp=tmp_path) for a in READERS[command]]
        code, out, err = main(capsys, command, "--db", db, *extra)
        assert code == 2 and one_line(err) and says in err, (what, err)
        assert tree(tmp_path) == before, f"{command} on {what} changed the folder"


def test_a_foreign_database_through_the_real_console_command(tmp_path):
    db, _ = _not_blackboards(tmp_path)["another program's SQLite database"]
    before = tree(tmp_path)
    proc = cli("status", "--db", str(db))
    assert proc.returncode == 2 and one_line(proc.stderr), proc.stderr
    assert "other.db: an SQLite database (its tables: contacts), not a kernel-scientist blackboard" in proc.stderr
    conn = sqlite3.connect(f"{db.as_uri()}?mode=ro", uri=True)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 0  # never migrated
    assert [t for (t,) in conn.execute("SELECT name FROM sqlite_master")] == ["contacts"]
    conn.close()
    assert tree(tmp_path) == before


def test_read_commands_leave_a_finished_campaign_as_it_was(smoke_campaign, tmp_path):
    db = smoke_campaign.copy(tmp_path / "done.sqlite")
    before = tree(tmp_path)
    outputs = {"out.py", "report"}
    for command in ("status", "logs", "watch", "export", "report", "resume"):
        extra = [a.format(tmp=tmp_path) for a in READERS[command]]
        proc = cli(command, "--db", str(db), *extra, env={"COLUMNS": "80"})
        assert proc.returncode == 0 and "Traceback" not in proc.stderr, (command, proc.stderr[-2000:])
        now = {k: v for k, v in tree(tmp_path).items() if k.split("/")[0] not in outputs}
        assert now == before, f"{command} changed the blackboard or created a file beside it"
        if command == "resume":  # the campaign had closed: it says so and writes nothing
            assert "already finished at 01:00" in proc.stdout and "nothing to resume" in proc.stdout
            assert "--set campaign.hours=" in proc.stdout
        if command == "status":  # the table fits the terminal and marks what it cut
            table = proc.stdout.split("change\n", 1)[1].split("\n\n", 1)[0].splitlines()
            assert table and all(len(line) <= 80 for line in table)
            assert any(line.endswith("…") for line in table)
        if command == "watch":  # a finished campaign is drawn as one, with no countdown
            assert "FINISHED" in proc.stdout and "next start in" not in proc.stdout
            assert "campaign finished" in proc.stdout
    with open_existing(db) as board:
        closing = [m for m in board.messages() if m.text.startswith("campaign over")]
    assert len(closing) == 1


def _gpu_here():
    return shutil.which("nvidia-smi") is not None or shutil.which("rocm-smi") is not None


@pytest.mark.parametrize(
    "why, overrides, env, says",
    [
        ("no API key", ["agents.brain=anthropic"], {"ANTHROPIC_API_KEY": ""}, "needs an API key"),
        ("local backend without a GPU", ["evaluator.backend=local"], {}, "found no GPU"),
        (
            "replay of a missing recording",
            ["agents.brain=replay", "llm.replay_from=gone.sqlite"],
            {},
            "no recorded blackboard",
        ),
        (
            "replay of a file that is not a blackboard",
            ["agents.brain=replay", "llm.replay_from={tmp}/notes.db"],
            {},
            "llm.replay_from: ",
        ),
        ("a bad value", ["evaluator.rate_per_hour=fast"], {}, "evaluator.rate_per_hour"),
    ],
)
def test_a_failed_start_leaves_nothing_behind(tmp_path, why, overrides, env, says):
    if why.startswith("local") and _gpu_here():
        pytest.skip("this machine has a GPU: the local backend would start")
    _not_blackboards(tmp_path)  # other.db, empty.db, ... beside (not in) the working folder
    (tmp_path / "other.db").rename(tmp_path / "notes.db")
    work = tmp_path / "work"
    work.mkdir()
    sets = [a for o in overrides for a in ("--set", o.format(tmp=tmp_path))]
    proc = cli("run", str(SMOKE), *sets, cwd=work, env=env)  # default --db: runs/smoke-seed7.sqlite
    assert proc.returncode == 2 and one_line(proc.stderr) and says in proc.stderr, proc.stderr
    assert list(work.iterdir()) == [], f"{why}: a failed start left {list(work.rglob('*'))}"
    proc = cli("run", str(SMOKE), *sets, "--db", str(work / "named.sqlite"), cwd=work, env=env)
    assert proc.returncode == 2 and list(work.iterdir()) == []


def test_evaluate_with_the_local_backend_without_a_gpu_is_one_line(tmp_path):
    if _gpu_here():
        pytest.skip("this machine has a GPU")
    submission = ROOT / "evaluator" / "tasks" / "amd_fp8_mm" / "submission.py"
    proc = cli("evaluate", str(submission), "--backend", "local")
    assert proc.returncode == 2 and one_line(proc.stderr) and "--backend local" in proc.stderr
    assert "use --backend simulated" in proc.stderr


def _evaluations(jsonl):
    if not jsonl.exists():
        return 0
    return sum(1 for line in jsonl.read_text().splitlines() if '"kind":"evaluation"' in line)


def test_ctrl_c_is_one_line_exit_130_and_the_campaign_resumes(tmp_path):
    db = tmp_path / "stopped.sqlite"
    # Its own session, SIGINT at its default disposition (a shell's background job, a CI runner
    # for one, may hand it down ignored, and Python then keeps it ignored, as it should), and
    # SIGINT to the whole group: what a terminal does for its foreground job on Ctrl-C.
    proc = popen(
        *smoke_run(db, "--quiet", "--set", "campaign.hours=2"),
        start_new_session=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        deadline = time.time() + 180
        while _evaluations(db.with_suffix(".jsonl")) < 3 and time.time() < deadline and proc.poll() is None:
            time.sleep(0.05)
        assert proc.poll() is None, proc.communicate()
        os.killpg(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err[-3000:]
    assert re.fullmatch(
        r"kernel-scientist: interrupted at \d\d:\d\d:\d\d campaign time; continue with "
        rf"`kernel-scientist resume --db {re.escape(str(db))}`\n",
        err,
    ), err[-3000:]
    with open_existing(db) as board:
        stopped_at = board.clock()
        assert not any(m.text.startswith("campaign over") for m in board.messages())
    assert err.split(" at ")[1].split(" ")[0] == time.strftime("%H:%M:%S", time.gmtime(int(stopped_at)))
    resumed = cli("resume", "--db", str(db), "--quiet")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    with open_existing(db) as board:
        assert board.clock() >= 2 * 3600
        assert board.messages()[-1].kind == "closing" and board.messages()[-1].text.startswith("campaign over")


def test_version():
    proc = cli("--version")
    assert proc.returncode == 0 and proc.stdout == f"kernel-scientist {version('kernel-scientist')}\n"


def test_version_of_a_source_tree_never_installed(monkeypatch):
    """The GPU sessions run a linked layout with no package metadata: exports still name the version."""
    import importlib.metadata
    import tomllib

    from kernel_scientist.commands._args import version as ks_version

    def missing(name):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", missing)
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert ks_version() == f"{declared} (source tree, not installed)"


# ---- the walk: every command, every option, bad values --------------------------------------
OUTPUTS = {
    ("run", "--db"),
    ("export", "--out"),
    ("report", "--out"),
    ("sweep", "--out"),
    ("watch", "--svg"),
    ("lower", "--out"),
}
ACCEPTED = {("logs", "--grep")}  # any text is a valid search; it just matches nothing


def _bad_values(command, action, files):
    option = action.option_strings[0] if action.option_strings else action.dest
    if (command, option) in OUTPUTS:  # report and sweep create their folder; the others write a file
        return {
            "run": [files["foreign"], files["folder"], files["missing_parent"], files["binary"], files["empty"]],
            "report": [files["binary"], files["missing_parent"]],
            "sweep": [files["binary"], files["missing_parent"]],
        }.get(command, [files["folder"], files["missing_parent"]])
    if action.choices:
        return ["bogus"]
    kind = getattr(action.type, "__name__", "")  # cli.positive_int is "int at least 1", and so on
    if kind.startswith("int"):
        return ["x", "1.5", "-1"] + (["0"] if kind == "int at least 1" else [])
    if kind.startswith("float"):
        return ["x", "-1", "0", "nan", "inf"]
    if action.type is not None and getattr(action.type, "__name__", "") in ("Path", "PosixPath"):
        return [files["missing"], files["binary"], files["folder"], files["foreign"], files["empty"]]
    return ["bogus", "=", "agents.engineers=four"]


def _walk(board, files, tmp):
    """(command, option, argv) for every command's every option with each bad value, from the parser."""
    base = {  # what each command needs to get past its required arguments
        "run": {"scenario": [SMOKE], "--db": ["--db", tmp / "new.sqlite"]},
        "resume": {"--db": ["--db", board]},
        "status": {"--db": ["--db", board]},
        "logs": {"--db": ["--db", board]},
        "watch": {"--db": ["--db", board]},
        "report": {"--db": ["--db", board], "--out": ["--out", tmp / "report"]},
        "export": {"--db": ["--db", board], "--out": ["--out", tmp / "x.py"]},
        "sweep": {"scenario": [SMOKE], "--out": ["--out", tmp / "sweep"]},
        "evaluate": {"file": [ROOT / "evaluator" / "tasks" / "amd_fp8_mm" / "submission.py"]},
        "lower": {"task": [ROOT / "tests" / "problems" / "rowscan"], "--out": ["--out", tmp / "lowered.py"]},
    }
    parser = ks_cli.parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices
    assert set(commands) == set(base), "a new command: say what it needs to start"
    for name, sub in commands.items():
        yield name, "(none)", [name]
        yield name, "--no-such-option", [name, *(t for ts in base[name].values() for t in ts), "--no-such-option"]
        for action in sub._actions:
            if isinstance(action, argparse._HelpAction) or action.nargs == 0:
                continue
            option = action.option_strings[0] if action.option_strings else action.dest
            for bad in _bad_values(name, action, files):
                args = dict(base[name])
                args[option] = [bad] if not action.option_strings else [option, bad]
                yield name, option, [name, *(t for ts in args.values() for t in ts)]


def test_every_command_with_bad_arguments_is_one_line_and_exit_2(smoke_campaign, tmp_path, capsys):
    board = smoke_campaign.copy(tmp_path / "board.sqlite")
    odd = tmp_path / "odd"
    odd.mkdir()
    foreign = _not_blackboards(odd)
    files = {
        "missing": odd / "missing.db",
        "binary": foreign["a binary file"][0],
        "folder": foreign["a folder"][0],
        "foreign": foreign["another program's SQLite database"][0],
        "empty": foreign["an empty file"][0],
        "missing_parent": odd / "no" / "such" / "folder" / "f",
    }
    before = tree(tmp_path)
    walked = 0
    for command, option, argv in _walk(board, files, tmp_path):
        code, out, err = main(capsys, *argv)
        if (command, option) in ACCEPTED:
            assert code == 0, (argv, err)
        else:
            assert code == 2 and one_line(err), (argv, code, err)
        assert tree(tmp_path) == before, f"{argv} changed a file"
        walked += 1
    assert walked > 100


def test_evaluate_defaults_to_the_scenario_timeout():
    """A hanging file holds `evaluate` no longer than a campaign's default would (not ten minutes)."""
    from kernel_scientist.blackboard.config import EvaluatorConfig

    proc = cli("evaluate", "--help")
    assert proc.returncode == 0
    assert f"{EvaluatorConfig().timeout_s:g} s" in " ".join(proc.stdout.split()) and EvaluatorConfig().timeout_s < 600
