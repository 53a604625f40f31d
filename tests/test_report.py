"""`report`: the HTML page and its plots, checked on disk and in a real headless browser."""

import re
import sqlite3
import subprocess
import tempfile
from pathlib import Path

import msgspec
import pytest
from _support import cli, llm_call
from _watch_campaign import chromium, smoke_campaign  # noqa: F401  (a session fixture)
from kernel_scientist.blackboard import Blackboard, open_existing

from kernel_scientist import report

PNG = b"\x89PNG\r\n\x1a\n"
BROWSER_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


@pytest.fixture(scope="module")
def page(smoke_campaign, tmp_path_factory):
    out = tmp_path_factory.mktemp("report")
    proc = cli("report", "--db", str(smoke_campaign.db), "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert f"report: {out / 'index.html'}" in proc.stdout
    return out / "index.html"


def _images(html: str) -> list[str]:
    return re.findall(r"<img src='([^']+)'", html)


def test_every_plot_is_referenced_present_and_a_real_png(page):
    html = page.read_text()
    images = _images(html)
    assert images == ["best_score.png", "per_shape.png", "lineage.png", "hypotheses.png", "evaluator.png"]
    for name in images:
        data = (page.parent / name).read_bytes()
        assert data.startswith(PNG) and len(data) > 10_000, name
    assert sorted(p.name for p in page.parent.glob("*.png")) == sorted(images)  # nothing orphaned


def test_the_page_labels_every_number_simulated_and_has_the_ledger(page, smoke_campaign):
    html = page.read_text()
    assert "campaign report (simulated)" in html and "vs seed (simulated)" in html
    assert "observed (simulated)" in html and "Overall utilisation" in html
    with open_existing(smoke_campaign.db) as board:
        implemented = [h for h in board.hypotheses() if h.kernel_id is not None]
    for h in implemented:
        assert f"<td>H{h.id}</td>" in html
    assert "LLM" not in html  # no LLM brain ran: the section is left out


def test_the_page_renders_in_headless_chromium(page, tmp_path):
    browser = chromium()
    if browser is None:
        pytest.skip("chromium is not installed (`apt-get install -y chromium`; .ci/run does it)")
    shot = tmp_path / "shot.png"
    run = lambda *args: subprocess.run(  # noqa: E731
        [browser, *BROWSER_FLAGS, f"--user-data-dir={tempfile.mkdtemp(dir=tmp_path)}", *args],
        capture_output=True,
        text=True,
        timeout=90,
    )
    proc = run(f"--screenshot={shot}", "--window-size=1280,2000", page.as_uri())
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert shot.read_bytes().startswith(PNG) and shot.stat().st_size > 50_000
    dom = run("--dump-dom", page.as_uri()).stdout
    assert _images(dom.replace('"', "'")) == _images(page.read_text())
    # Did the browser decode every image? A page beside the report loads each one and writes the
    # decoded width into the DOM once all have loaded.
    names = _images(page.read_text())
    probe = page.parent / "probe.html"
    probe.write_text(
        "<html><body>"
        + "".join(f"<img src='{n}'>" for n in names)
        + "<script>window.onload = () => { document.body.setAttribute('data-widths', "
        "[...document.images].map(i => i.naturalWidth).join(',')); };</script></body></html>"
    )
    try:
        dom = run("--virtual-time-budget=5000", "--dump-dom", probe.as_uri()).stdout
    finally:
        probe.unlink()
    widths = re.search(r'data-widths="([^"]*)"', dom)
    assert widths, dom[:500]
    assert all(int(w) > 100 for w in widths.group(1).split(",")) and len(widths.group(1).split(",")) == len(names)


def _usage_rows(db: Path) -> None:
    """Three LLM exchanges, through the store's API when it has one, else as a bare table."""
    rows = [("theorist", 1200, 300, 0.01), ("engineer-1", 5000, 2000, 0.05), ("theorist", 800, 100, 0.005)]
    with Blackboard(db) as board:
        if callable(getattr(board, "add_llm_call", None)):
            for seq, (agent, tin, tout, cost) in enumerate(rows, 1):
                usage = {"input_tokens": tin, "output_tokens": tout, "cost_usd": cost}
                board.add_llm_call(llm_call(at=60.0 * seq, agent=agent, seq=seq, role="design", **usage))
            return
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE llm_usage_fixture (id INTEGER PRIMARY KEY, body BLOB NOT NULL)")
    for i, (agent, tin, tout, cost) in enumerate(rows):
        body = msgspec.json.encode(
            {
                "agent": agent,
                "input_tokens": tin,
                "output_tokens": tout,
                "cost_usd": cost,
                "model": "fake",
                "extra": [1, 2],
            }
        )
        con.execute("INSERT INTO llm_usage_fixture VALUES (?, ?)", (i + 1, body))
    con.commit()
    con.close()


def test_llm_section_appears_only_when_usage_rows_exist(smoke_campaign, tmp_path):
    db = smoke_campaign.copy(tmp_path / "llm.sqlite")
    with open_existing(db) as board:
        assert report.llm_usage(board) is None  # the offline brain asked no LLM
    _usage_rows(db)
    with Blackboard(db) as board:
        rows = report.llm_usage(board)
    assert [r.agent for r in rows] == ["theorist", "engineer-1", "theorist"]
    out = tmp_path / "r"
    proc = cli("report", "--db", str(db), "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    html = (out / "index.html").read_text()
    assert "LLM tokens and cost" in html and "<td>theorist</td><td>2</td><td>2000</td><td>400</td>" in html
    assert (out / "llm.png").read_bytes().startswith(PNG)


def test_lineage_layout_puts_parents_over_their_children(smoke_campaign):
    with open_existing(smoke_campaign.db) as board:
        kernels = board.kernels()
    pos = report.lineage_layout(kernels)
    assert set(pos) == {k.id for k in kernels}
    for k in kernels:
        if k.parent_id is not None:
            assert pos[k.id][1] == pos[k.parent_id][1] + 1


def test_report_on_a_missing_file_is_one_line_and_exit_2(tmp_path):
    proc = cli("report", "--db", str(tmp_path / "no.sqlite"), "--out", str(tmp_path / "o"))
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1
