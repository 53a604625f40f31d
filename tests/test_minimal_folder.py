"""The minimal problem folder of docs/problem-folders.md is complete and works as the page says:
its files, copied from the page's code blocks into a fresh folder, evaluate and run a campaign."""

import re

import pytest
from _support import ROOT, cli
from kernel_scientist.blackboard import open_existing

PAGE = ROOT / "docs" / "problem-folders.md"
SECTION = "## A minimal folder to copy"
# A file of the folder: a paragraph that starts with its path in backticks and a colon, then its
# fenced block. The commands: the section's fenced block without a language.
PATH_LINE = re.compile(r"^`(?P<path>[\w./-]+)`:")
COMMAND_BLOCK = re.compile(r"^```\n(?P<body>kernel-scientist .*?)^```$", re.M | re.S)


def _section() -> str:
    page = PAGE.read_text()
    assert SECTION in page, f"{PAGE.name} lost its section {SECTION!r}"
    return page.split(SECTION, 1)[1].split("\n## ", 1)[0]


def _files() -> dict[str, str]:
    files: dict[str, str] = {}
    path, body = None, None
    for line in _section().splitlines(keepends=True):
        if body is not None:  # inside a block
            if line.rstrip() == "```":
                if path is not None:
                    files[path] = "".join(body)
                path, body = None, None
            else:
                body.append(line)
        elif line.startswith("```"):
            body = []
        elif m := PATH_LINE.match(line):
            path = m["path"]
    return files


def _commands() -> list[list[str]]:
    block = COMMAND_BLOCK.search(_section())
    assert block, "the section lost its block of commands"
    return [line.split()[1:] for line in block["body"].splitlines() if line.strip()]


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """The page's files written out as a user copying them would, in a folder of their own."""
    where = tmp_path_factory.mktemp("copied")
    for path, body in _files().items():
        (where / path).parent.mkdir(parents=True, exist_ok=True)
        (where / path).write_text(body)
    return where


def test_the_page_shows_every_file_of_the_folder():
    files = _files()
    assert set(files) == {
        "relu/task.yml",
        "relu/task.py",
        "relu/utils.py",
        "relu/reference.py",
        "relu/submission.py",
        "relu.toml",
    }
    # Complete: every file task.yml's files: list names is on the page (none comes from elsewhere).
    sources = re.findall(r'"source": "([^"@]+)"', files["relu/task.yml"])
    assert sources and all(f"relu/{s}" in files for s in sources), sources
    assert [c[0] for c in _commands()] == ["evaluate", "run"]


def test_the_copied_folder_evaluates_as_the_page_says(folder):
    evaluate = _commands()[0]
    done = cli(*evaluate, cwd=folder)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith("relu/submission.py: passed")
    assert "(simulated)" in done.stdout and "size=16777216" in done.stdout


def test_the_copied_folders_check_rejects_a_wrong_kernel(folder, tmp_path):
    """The page's check_implementation is a real check: a kernel that skips the max(x, 0) is
    rejected with the folder's own message."""
    seed = (folder / "relu" / "submission.py").read_text()
    wrong = tmp_path / "identity.py"
    wrong.write_text(seed.replace("tl.maximum(x, 0.0)", "x"))
    assert wrong.read_text() != seed
    done = cli("evaluate", str(wrong), "--task", "relu", cwd=folder)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "wrong_output" in done.stdout and "elements differ from the reference" in done.stdout


def test_a_campaign_runs_on_the_copied_folder(folder):
    run = _commands()[1]
    done = cli(*run, "--quiet", cwd=folder)
    assert done.returncode == 0, done.stderr[-3000:]
    db = folder / run[run.index("--db") + 1]
    with open_existing(db) as board:
        campaign = board.campaign()
        passed = [e for e in board.evaluations() if e.report.passed_score() is not None]
    assert campaign.name == "relu" and campaign.task == "relu" and campaign.simulated
    assert passed and all(e.report.provenance.simulated for e in passed)
    assert "simulated on AMD Instinct MI300X" in done.stdout
