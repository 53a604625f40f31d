"""`run --learn-from`: earlier blackboards seed a new campaign's findings and priors, with their
provenance; a bad one is refused in one line before any file is created."""

from __future__ import annotations

import pytest
from _support import SCENARIOS, cli
from kernel_scientist.blackboard import LEARNED, open_existing


@pytest.fixture(scope="module")
def earlier(tmp_path_factory):
    db = tmp_path_factory.mktemp("earlier") / "earlier.sqlite"
    done = cli("run", str(SCENARIOS / "smoke.toml"), "--db", str(db), "--quiet")
    assert done.returncode == 0, done.stderr[-2000:]
    return db


def _first_predictions(db):
    with open_existing(db) as board:
        return {(h.technique, h.label): (h.min_uplift, h.max_uplift) for h in board.hypotheses() if h.selection_id == 1}


def test_lessons_become_findings_and_move_the_priors(earlier, tmp_path):
    with open_existing(earlier) as board:
        measured = [h for h in board.hypotheses() if h.observed_uplift is not None]
    assert measured
    plain, learned = tmp_path / "plain.sqlite", tmp_path / "learned.sqlite"
    for db, extra in ((plain, []), (learned, ["--learn-from", str(earlier)])):
        done = cli(
            "run", str(SCENARIOS / "smoke.toml"), "--db", str(db), "--quiet", "--set", "campaign.hours=0.2", *extra
        )
        assert done.returncode == 0, done.stderr[-2000:]
    with open_existing(learned) as board:
        lessons = [f for f in board.findings() if f.scope == LEARNED]
        said = [m.text for m in board.messages() if m.text.startswith("learned ")]
    assert len(lessons) == len(measured) and not lessons[0].evidence
    assert "earlier.sqlite (campaign 'smoke' seed 7, amd-fp8-mm, simulated on" in lessons[0].text
    assert said == [
        f"learned {len(measured)} measured trials from " + lessons[0].text.split("learned from ")[1].split(": ")[0]
    ]
    # The same first design, pulled towards what the earlier campaign measured.
    before, after = _first_predictions(plain), _first_predictions(learned)
    observed = {h.technique for h in measured}
    moved = [key for key in before.keys() & after.keys() if key[0] in observed and before[key] != after[key]]
    assert moved, (before, after)
    with open_existing(plain) as board:
        assert not [f for f in board.findings() if f.scope == LEARNED]


def test_a_bad_source_is_refused_before_anything_is_created(tmp_path):
    db = tmp_path / "new.sqlite"
    foreign = tmp_path / "foreign.sqlite"
    foreign.write_bytes(b"not a database at all, just bytes" * 10)
    for source in (tmp_path / "missing.sqlite", foreign):
        done = cli("run", str(SCENARIOS / "smoke.toml"), "--db", str(db), "--learn-from", str(source))
        assert done.returncode == 2 and "Traceback" not in done.stderr
        assert done.stderr.count("\n") == 1 and str(source) in done.stderr and "blackboard" in done.stderr
        assert not list(tmp_path.glob("new*"))
    assert foreign.read_bytes() == b"not a database at all, just bytes" * 10
