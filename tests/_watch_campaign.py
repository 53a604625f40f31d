"""One small simulated campaign shared by the watch, logs-viewer and report tests (session scope).

It is made with ``run --watch`` so that the inline dashboard is exercised end to end too; its
output is kept for the tests to read. Import the fixture into a test module to use it.
"""

import shutil
import sqlite3
import subprocess

import pytest
from _support import cli, smoke_run


class Made:
    def __init__(self, db, proc: subprocess.CompletedProcess):
        self.db, self.proc = db, proc

    def copy(self, dest):
        """A private copy of the blackboard (checkpointed) that a test may change."""
        src = sqlite3.connect(self.db)
        out = sqlite3.connect(dest)
        src.backup(out)
        src.close()
        out.close()
        return dest


_made: list[Made] = []  # a fixture imported into several modules is several fixtures: share the run


@pytest.fixture(scope="session")
def smoke_campaign(tmp_path_factory):
    if _made:
        return _made[0]
    root = tmp_path_factory.mktemp("watched")
    db = root / "smoke.sqlite"
    proc = cli(
        *smoke_run(db, "--watch", "--set", "campaign.hours=1"),
        timeout=240,
        env={"COLUMNS": "140"},
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    _made.append(Made(db, proc))
    return _made[0]


def chromium():
    return shutil.which("chromium") or (shutil.which("chromium-browser"))
