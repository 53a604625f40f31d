"""Docs that cannot go stale: every example output in README.md and docs/ is marked with the command
that produces it (scripts/doc_examples.py), the cheap ones are re-run here and must read as the page
says, and the expensive ones carry the date they were made."""

from __future__ import annotations

import re

from _support import ROOT, script

# A block shows output when it has a shell prompt line or a line of the agents' conversation.
OUTPUT = re.compile(r"^\$ |^\d\d:\d\d:\d\d +\w+ │")


def _blocks(page):
    lines = page.read_text().splitlines()
    fences = [i for i, line in enumerate(lines) if line.startswith("```")]
    for start, end in zip(fences[::2], fences[1::2]):
        yield start, lines[start - 1] if start else "", lines[start + 1 : end]


def test_every_block_that_shows_output_names_the_command_that_made_it():
    unmarked = [
        f"{page.relative_to(ROOT)}:{start + 1}"
        for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
        for start, before, body in _blocks(page)
        if any(OUTPUT.match(line) for line in body) and not before.startswith("<!-- example")
    ]
    assert not unmarked, f"example output with no <!-- example: COMMAND --> marker: {unmarked}"


def test_every_cheap_example_reads_as_its_command_gives_it_now():
    done = script("doc_examples.py", "--check", timeout=900)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]


def test_the_examples_are_listed_and_the_expensive_ones_are_dated():
    done = script("doc_examples.py", "--list")
    assert done.returncode == 0, done.stderr
    rows = [line.split("\t") for line in done.stdout.splitlines()]
    assert rows and all(len(row) == 3 for row in rows)
    assert all(re.fullmatch(r"cheap|\d{4}-\d{2}-\d{2}", kind) for _, kind, _ in rows)
    assert any(kind == "cheap" for _, kind, _ in rows)


def test_a_stale_example_is_caught_and_rewritten(tmp_path):
    page = tmp_path / "page.md"
    command = "kernel-scientist run scenarios/smoke.toml --set agents.engineers=four"
    page.write_text(f"# a page\n<!-- example $: {command} -->\n```\n$ {command}\nsomething else\n```\n")
    stale = script("doc_examples.py", "--check", str(page))
    assert stale.returncode == 1 and "something else" in stale.stdout
    assert script("doc_examples.py", "--write", str(page)).returncode == 0
    text = page.read_text()
    assert "agents.engineers: expects a whole number from 1 to 32; got 'four' (text)" in text
    assert "something else" not in text
    assert script("doc_examples.py", "--check", str(page)).returncode == 0


def test_a_marker_without_its_block_is_refused_in_one_line(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("<!-- example: echo hi -->\nno block here\n")
    done = script("doc_examples.py", "--check", str(page))
    assert done.returncode != 0 and len(done.stderr.strip().splitlines()) == 1
    assert "a marker must precede a ``` block" in done.stderr
