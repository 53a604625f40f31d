"""A newcomer's walk through every command: what it refuses, whether its advice works, how it stops.

Each bad case runs the console entry point on a real folder that is snapshotted (bytes, modification
times, listing) before and after: a refusal is one line with exit code 2 and changes nothing. The
advice in the line is then read out of it and followed as a user would (the path it suggests, the
folder to create, the command to run, the key it names, --force), and the advised command must get
further: a campaign that runs, or the next check down the line. Every interrupt, wherever it lands
(a real subprocess sent SIGINT the way a terminal's Ctrl-C is: the whole process group), is one line
with exit code 130 that is true of what is on disk.
"""

import gzip
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import time

import pytest
from _support import ROOT, SCENARIOS, cli, popen
from _watch_campaign import smoke_campaign  # noqa: F401  (a session fixture)
from kernel_scientist.blackboard import Blackboard, open_existing

from kernel_scientist import cli as ks_cli
from kernel_scientist import report

SMOKE = SCENARIOS / "smoke.toml"
TINY = ("--quiet", "--set", "campaign.hours=0.001")  # ends at its deadline, before any evaluation starts


def tree(folder):
    """Every path under ``folder`` with its bytes and modification time (folders by name)."""
    return {
        str(p.relative_to(folder)): (p.read_bytes(), p.stat().st_mtime_ns) if p.is_file() else "folder"
        for p in sorted(folder.rglob("*"))
    }


def main(capsys, *argv):
    """The console entry point in-process: (exit code, stdout, stderr)."""
    try:
        code = ks_cli.main([str(a) for a in argv])
    except SystemExit as exc:  # argparse's own exits
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


def refused(capsys, folder, *argv, says):
    """Run a command that must refuse: one line, exit code 2, ``says`` in it, nothing under
    ``folder`` changed. Returns the line without the program's name."""
    before = tree(folder)
    code, out, err = main(capsys, *argv)
    assert code == 2 and err.count("\n") == 1 and err.startswith("kernel-scientist: "), (argv, code, err)
    assert "Traceback" not in err and out == "", (argv, err)
    assert says in err, (argv, err)
    assert tree(folder) == before, f"{argv} changed {folder}"
    return err.removeprefix("kernel-scientist: ").rstrip("\n")


def advice(line, pattern):
    """What the refusal advises, read out of its line (the test fails if it advises nothing)."""
    found = re.search(pattern, line)
    assert found, f"no advice matching {pattern!r} in: {line}"
    return found.group(1)


def ran(proc, db=None):
    """A command that got all the way: exit 0 (and, for a campaign, a closed blackboard at ``db``)."""
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    if db is not None:
        with open_existing(db) as board:
            assert board.messages()[-1].kind == "closing"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """A finished campaign, made in a few seconds."""
    db = tmp_path_factory.mktemp("tiny") / "tiny.sqlite"
    ran(cli("run", str(SMOKE), "--db", str(db), *TINY), db)
    return db


def _reopen(src, dest):
    """A copy of a finished blackboard that reads as a campaign stopped before its end."""
    shutil.copy(src, dest)
    with Blackboard(dest) as board:
        board.say(agent="runner", kind="info", at=board.clock(), text="resumed at 0.00 h")
    return dest


def _foreign_files(folder):
    conn = sqlite3.connect(folder / "notes.db")
    conn.execute("CREATE TABLE notes (text TEXT)")
    conn.commit()
    conn.close()
    (folder / "empty.db").write_bytes(b"")
    (folder / "binary.db").write_bytes(bytes(range(256)) * 8)
    (folder / "folder.db").mkdir()
    (folder / "afile").write_text("not a folder")


# ---- run: where it writes -------------------------------------------------------------------
def test_run_writes_only_where_asked_and_every_refusal_says_what_to_do(tiny, tmp_path, capsys, monkeypatch):
    work = tmp_path / "work"
    work.mkdir()
    _foreign_files(work)
    shutil.copy(tiny, work / "done.sqlite")
    _reopen(tiny, work / "open.sqlite")
    (work / "stray.jsonl").write_text('{"a user\'s": "file"}\n')
    monkeypatch.chdir(work)

    def run(db, says):
        return refused(capsys, tmp_path, "run", SMOKE, "--db", db, *TINY, says=says)

    def follow(db):  # the advised --db, run for real in the same folder
        proc = cli("run", str(SMOKE), "--db", db, *TINY, cwd=work)
        ran(proc, work / db)

    # A folder that does not exist is never created: create it as told, and the same command runs.
    line = run("no/such/dir/x.sqlite", "no folder no/such/dir to write it in")
    assert not (work / "no").exists()
    os.makedirs(work / advice(line, r"mkdir -p (\S+)\)"))
    follow("no/such/dir/x.sqlite")

    # What is not a blackboard is named as what it is, and a new path offered instead.
    for name, what in (
        ("notes.db", "an SQLite database (its tables: notes), not a kernel-scientist blackboard"),
        ("empty.db", "an empty file"),
        ("binary.db", "not an SQLite file"),
        ("folder.db", "is a folder"),
    ):
        line = run(name, what)
        assert "resume" not in line  # resuming what is not a campaign cannot work
        follow(advice(line, r"e\.g\. --db (\S+)$"))

    line = run("afile/x.sqlite", "afile is a file, not a folder")
    assert "--db" in line

    # An existing campaign: resume it when it stopped early, see it when it finished, or a new path.
    line = run("open.sqlite", "open.sqlite already holds a campaign; continue it with")
    ran(cli(*advice(line, r"`kernel-scientist (resume --db \S+)`").split(), "--quiet", cwd=work), work / "open.sqlite")
    line = run("done.sqlite", "done.sqlite already holds a campaign; it finished at")
    ran(cli(*advice(line, r"`kernel-scientist (status --db \S+)`").split(), cwd=work))
    follow(advice(line, r"or start a new one with --db (\S+)$"))

    # A conversation log of the same name would be appended to: refused, another path offered.
    line = run("stray.sqlite", "stray.jsonl already exists")
    assert (work / "stray.jsonl").read_text() == '{"a user\'s": "file"}\n'
    follow(advice(line, r"e\.g\. --db (\S+)$"))


def test_without_db_run_creates_the_default_folder(tmp_path):
    """The user asked for the default: runs/ under the current folder is created."""
    ran(cli("run", str(SMOKE), *TINY, cwd=tmp_path), tmp_path / "runs" / "smoke-seed7.sqlite")
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == ["smoke-seed7.jsonl", "smoke-seed7.sqlite"]


# ---- the other commands ---------------------------------------------------------------------
def test_readers_name_what_they_were_given(tiny, tmp_path, capsys):
    _foreign_files(tmp_path)
    packed = tmp_path / "tiny.sqlite.gz"
    packed.write_bytes(gzip.compress(tiny.read_bytes()))
    for command in ("resume", "status", "logs", "watch"):
        for db, says in (
            (tmp_path / "no" / "such.sqlite", "no such blackboard file"),
            (tmp_path / "notes.db", "not a kernel-scientist blackboard"),
            (tmp_path / "folder.db", "is a folder, not a blackboard file"),
        ):
            refused(capsys, tmp_path, command, "--db", db, says=says)
        line = refused(capsys, tmp_path, command, "--db", packed, says="a gzip file; unpack it first")
        subprocess.run(advice(line, r"\((gunzip -k \S+)\)").split(), check=True)
        unpacked = tmp_path / "tiny.sqlite"
        ran(cli(command, "--db", str(unpacked), *(["--once"] if command == "watch" else [])))
        unpacked.unlink()


def test_report_watch_and_sweep_never_write_into_a_missing_folder_or_over_a_file(smoke_campaign, tmp_path, capsys):
    db = smoke_campaign.copy(tmp_path / "board.sqlite")
    # report --out: its parent must exist; the folder itself is created.
    line = refused(capsys, tmp_path, "report", "--db", db, "--out", tmp_path / "a" / "b", says="no folder")
    os.makedirs(advice(line, r"mkdir -p (\S+)\)"))
    ran(cli("report", "--db", str(db), "--out", str(tmp_path / "a" / "b")))
    # An existing report is replaced only with --force; a user's own file beside it is left alone.
    out = tmp_path / "a" / "b"
    (out / "index.html").write_text("a page the user edited")
    (out / "notes.txt").write_text("mine")
    line = refused(capsys, tmp_path, "report", "--db", db, "--out", out, says=f"{out / 'index.html'} already exists")
    assert "--force" in line
    ran(cli("report", "--db", str(db), "--out", str(out), "--force"))
    assert (out / "index.html").read_text() != "a page the user edited" and (out / "notes.txt").read_text() == "mine"
    assert {p.name for p in out.iterdir()} <= {*report.FILES, "notes.txt"}
    refused(capsys, tmp_path, "report", "--db", db, "--out", tmp_path / "board.sqlite", says="is not a folder")

    # watch --svg: the same rules for one file.
    svg = tmp_path / "c" / "frame.svg"
    line = refused(capsys, tmp_path, "watch", "--db", db, "--once", "--svg", svg, says="no folder")
    os.makedirs(advice(line, r"mkdir -p (\S+)\)"))
    ran(cli("watch", "--db", str(db), "--once", "--svg", str(svg)))
    line = refused(capsys, tmp_path, "watch", "--db", db, "--once", "--svg", svg, says="already exists")
    assert "--force" in line
    ran(cli("watch", "--db", str(db), "--once", "--svg", str(svg), "--force"))

    # sweep --out: a missing parent is refused, a folder that holds a sweep is not written over.
    vary = ("--vary", "agents.engineers=1", "--set", "campaign.hours=0.001")
    line = refused(capsys, tmp_path, "sweep", SMOKE, *vary, "--out", tmp_path / "d" / "sweep", says="no folder")
    os.makedirs(advice(line, r"mkdir -p (\S+)\)"))
    ran(cli("sweep", str(SMOKE), *vary, "--out", str(tmp_path / "d" / "sweep")))
    held = tmp_path / "held"
    held.mkdir()
    (held / "sweep.json").write_text("{}")
    refused(capsys, tmp_path, "sweep", SMOKE, *vary, "--out", held, says="already holds a sweep")


def test_an_unknown_key_names_the_one_meant_and_that_one_works(tiny, tmp_path, capsys):
    """Following the suggestion gets past the scenario: the next refusal is about --db (a file
    that exists), which is checked only once the scenario has loaded."""
    later = ("--db", str(tiny), "--quiet")
    for wrong, meant in (
        ("agents.engineer=4", "agents.engineers"),
        ("agent.engineers=4", "agents.engineers"),
        ("evaluator.engineers=4", "agents.engineers"),
        ("evaluator.rate=12", "evaluator.rate_per_hour"),
        ("campaign.hour=2", "campaign.hours"),
        ("agents.latency.enginer=5", "agents.latency.engineer"),
    ):
        line = refused(capsys, tmp_path, "run", SMOKE, "--set", wrong, *later, says="did you mean")
        assert advice(line, r"did you mean (\S+)\?$") == meant, line
        fixed = f"{meant}={wrong.split('=')[1]}"
        refused(capsys, tmp_path, "run", SMOKE, "--set", fixed, *later, says="already holds a campaign")

    scenario = tmp_path / "mine.toml"
    scenario.write_text(SMOKE.read_text().replace("[agents]", "[agent]").replace('"..', f'"{ROOT}'))
    line = refused(capsys, tmp_path, "run", scenario, *later, says="unknown table agent")
    table = advice(line, r"did you mean (\S+)\?$").split(".")[0]
    scenario.write_text(scenario.read_text().replace("[agent]", f"[{table}]"))
    refused(capsys, tmp_path, "run", scenario, *later, says="already holds a campaign")

    line = refused(capsys, tmp_path, "resume", "--db", tiny, "--set", "evaluator.inflight=2", says="did you mean")
    assert advice(line, r"did you mean (\S+)\?$") == "evaluator.in_flight"
    line = refused(capsys, tmp_path, "sweep", SMOKE, "--vary", "agents.enginers=1,2", says="did you mean")
    assert advice(line, r"did you mean (\S+)\?$") == "agents.engineers"


def test_run_help_states_every_default():
    parser = ks_cli.parser()
    commands = next(a for a in parser._actions if a.dest == "command").choices
    for command in ("run", "resume"):
        for action in commands[command]._actions:
            if action.dest == "help" or action.required:
                continue  # a required argument has no default to state
            assert "default" in (action.help or ""), f"{command} {action.option_strings} does not state its default"
    proc = cli("run", "--help", env={"COLUMNS": "100"})
    text = " ".join(proc.stdout.split())
    assert proc.returncode == 0
    assert "default: OUT_DIR/NAME-seedSEED.sqlite from the scenario's campaign.out_dir" in text
    assert "runs/smoke-seed7.sqlite" in text and "in a folder that exists" in text


# ---- interrupts ------------------------------------------------------------------------------
def _interrupt_all(starts, within_s=300):
    """Start every (label, argv, cwd, ready) at once, and send each SIGINT once ``ready(t)`` holds
    (t: seconds since it started). Each runs in its own process group with SIGINT at its default
    disposition and gets SIGINT as a group: what a terminal does for its foreground job on Ctrl-C
    (see test_cli_safety). stdout goes to a file beside the test (``<label>.out``), so that a
    ``ready`` can wait for output. Returns {label: (returncode, stdout, stderr, interrupted)};
    interrupted is False for a command that ended before its point came."""
    procs = {}
    for label, argv, cwd, ready in starts:
        out = open(cwd.parent / f"{label.replace(' ', '_')}.out", "w+")
        proc = popen(
            *argv,
            cwd=cwd,
            stdout=out,
            start_new_session=True,
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
        procs[label] = (proc, time.monotonic(), ready, out)
    sent = {}
    give_up = time.monotonic() + within_s
    while len(sent) < len(procs) and time.monotonic() < give_up:
        for label, (proc, t0, ready, _) in procs.items():
            if label in sent:
                continue
            if proc.poll() is not None:
                sent[label] = False
            elif ready(time.monotonic() - t0):
                os.killpg(proc.pid, signal.SIGINT)
                sent[label] = True
        time.sleep(0.005)
    results = {}
    for label, (proc, _, _, out) in procs.items():
        try:
            _, err = proc.communicate(timeout=120)
        finally:
            if proc.poll() is None:
                proc.kill()
        out.seek(0)
        results[label] = (proc.returncode, out.read(), err, sent.get(label, False))
        out.close()
    return results


def _after(seconds):
    return lambda t: t >= seconds


def _when(path, text=None):
    """Ready once ``path`` exists (and holds ``text``)."""
    return lambda t: path.exists() and (text is None or text in path.read_text(errors="replace"))


def _output(path):
    return lambda t: path.exists() and path.stat().st_size > 0


def test_every_interrupt_of_run_is_one_line_exit_130_and_true(tmp_path):
    points = {
        **{f"after {s} s": _after(s) for s in (0.5, 1, 2, 3, 5)},
        "as the blackboard appears": "db",
        "at the first message": "",
        "at the first evaluation": '"kind":"evaluation"',
        "at the deadline": "deadline 0.3 h reached",
        "as the campaign closes": "campaign over",
    }
    starts, dbs = [], {}
    for i, (label, point) in enumerate(points.items()):
        folder = tmp_path / f"p{i}"
        folder.mkdir()
        dbs[label] = db = folder / "x.sqlite"
        if callable(point):
            ready = point
        else:
            ready = _when(db) if point == "db" else _when(db.with_suffix(".jsonl"), point)
        starts.append(
            (label, ("run", str(SMOKE), "--db", str(db), "--quiet", "--set", "campaign.hours=0.3"), folder, ready)
        )
    default = tmp_path / "default"  # no --db: runs/ is created, and removed again when nothing was written
    default.mkdir()
    dbs["default --db"] = db = default / "runs" / "smoke-seed7.sqlite"
    starts.append(("default --db", ("run", str(SMOKE), "--quiet", "--set", "campaign.hours=0.3"), default, _when(db)))

    said = {}
    for (label, _, folder, _), (code, _out, err, interrupted) in zip(
        starts, _interrupt_all(starts).values(), strict=True
    ):
        if not interrupted:  # it finished before the signal could land: a complete run
            assert label == "as the campaign closes" and code == 0, (label, code, err[-2000:])
            continue
        assert code == 130 and err.count("\n") == 1 and err.startswith("kernel-scientist: interrupted"), (label, err)
        said[label] = line = err.strip()
        if "nothing was written" in line:  # and nothing was: not a file, not a folder
            assert list(folder.iterdir()) == [], (label, list(folder.rglob("*")))
            continue
        with open_existing(dbs[label]) as board:
            at, closed = board.clock(), board.messages()[-1].kind == "closing"
        stamp = time.strftime("%H:%M:%S", time.gmtime(int(at)))
        if closed:
            assert f"interrupted after the campaign finished at {stamp} campaign time" in line, (label, line)
            ran(cli(*advice(line, r"`kernel-scientist (status --db \S+)`").split()))
        else:
            assert f"interrupted at {stamp} campaign time; continue with" in line, (label, line)
            ran(cli(*advice(line, r"`kernel-scientist (resume --db \S+)`").split(), "--quiet"), dbs[label])
    for label in ("at the first message", "at the first evaluation"):  # the deadline may be the end
        assert "campaign time; continue with" in said[label], (label, said[label])
    assert said["after 0.5 s"].endswith("nothing was written")


def test_every_interrupt_of_a_follower_is_one_line_exit_130(smoke_campaign, tmp_path):
    db = smoke_campaign.copy(tmp_path / "live.sqlite")
    with Blackboard(db) as board:  # a campaign still running elsewhere, as far as a follower can tell
        board.say(agent="runner", kind="info", at=board.clock(), text="resumed at 1.00 h")
    work = tmp_path / "work"
    work.mkdir()
    before = tree(work)
    starts = [
        (
            "logs at its first output",
            ("logs", "--follow", "--db", str(db)),
            work,
            _output(tmp_path / "logs_at_its_first_output.out"),
        )
    ]
    for command in (("logs", "--follow"), ("watch",)):
        for s in (0.5, 1, 2, 4):
            starts.append((f"{command[0]} after {s} s", (*command, "--db", str(db)), work, _after(s)))
    for label, (code, out, err, interrupted) in _interrupt_all(starts).items():
        assert interrupted and code == 130 and err.count("\n") == 1, (label, code, err)
        verb = "following" if label.startswith("logs") else "watching"
        assert err in (
            f"kernel-scientist: interrupted; stopped {verb} {db} (a campaign writing it goes on in its own process)\n",
            "kernel-scientist: interrupted while starting; nothing was written\n",
        ), (label, err)
        if label == "logs at its first output":
            assert "stopped following" in err and out.startswith("00:00:00      runner │ campaign 'smoke'")
    assert tree(work) == before  # followers write nothing


def test_an_interrupted_sweep_says_where_its_campaigns_are_and_starts_no_more(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    out = work / "sweep"
    argv = ("sweep", str(SMOKE), "--vary", "agents.engineers=1,2,3", "--jobs", "1", "--set", "campaign.hours=0.3")
    first = out / "runs" / "agents.engineers-1-seed7.jsonl"  # its first message is on disk
    [(code, _, err, interrupted)] = _interrupt_all([("sweep", (*argv, "--out", str(out)), work, _when(first))]).values()
    assert interrupted and code == 130, err
    assert err.splitlines()[-1] == (
        f"kernel-scientist: interrupted; the campaigns run so far are in {out / 'runs'} (no sweep.json or "
        "sweep.png was written); to sweep again, pass another --out"
    )
    assert sorted(p.name for p in (out / "runs").iterdir()) == [first.name, first.with_suffix(".sqlite").name]
    assert not (out / "sweep.json").exists()  # and the other two campaigns never started
