"""Every example output in README.md and docs/*.md, produced by a real run of the command its marker names.

A fenced block is an example when the line before its opening fence is a marker:

    <!-- example: COMMAND -->                      the block is COMMAND's output (stdout and stderr)
    <!-- example $: COMMAND ;; COMMAND -->         each "$ COMMAND" shown, then its output
    <!-- example 2026-12-07: COMMAND -->           expensive: made on that date, not re-run by --check
    <!-- example width=116: COMMAND -->            longer lines cut there, ending in "…"

A part that starts with ``(setup)`` runs in its turn and is not shown (``(setup) sqlite3 notes.db ...``;
``(setup) cp sweep/sweep.png "$REPO/docs/"`` keeps a figure the command drew).

COMMAND runs in bash (pipes allowed, e.g. ``| head -5`` to pick lines) in a fresh temporary folder
whose ``scenarios`` links to the repository's, so what it writes (``runs/``, ``--out``) lands there
and the shown paths read as a user's would (``COLUMNS=200``: the conversation's own cut).
Figures in prose that come from a run carry their command and date in the text instead.

    python scripts/doc_examples.py --check [PAGE ...]     re-run the cheap examples; exit 1 on a difference
    python scripts/doc_examples.py --write [--all] [PAGE ...]   rewrite them (--all: the dated ones too)
    python scripts/doc_examples.py --list                 every example: page, line, kind, command

tests/test_doc_examples.py runs ``--check``, so a cheap example cannot go stale.
"""

from __future__ import annotations

import argparse
import datetime
import difflib
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MARKER = re.compile(
    r"^<!-- example(?P<dollar> \$)?(?: (?P<date>\d{4}-\d{2}-\d{2}))?(?: width=(?P<width>\d+))?: (?P<command>.+?) -->$"
)
TIMEOUT_S = 600


@dataclass
class Example:
    page: Path
    line: int  # 1-based line of the marker
    command: str
    dollar: bool  # the block shows "$ COMMAND" before the output
    date: str | None  # an expensive example: the day it was made
    width: int | None  # lines longer than this are cut, ending in "…"
    body: list[str]  # the block's lines as the page has them
    start: int  # 0-based index of the block's first line (after the opening fence)

    @property
    def where(self) -> str:
        return f"{_name(self.page)}:{self.line}"


def _name(page: Path) -> str:
    return str(page.relative_to(ROOT)) if page.is_relative_to(ROOT) else str(page)


def pages(names: list[str]) -> list[Path]:
    if names:
        return [Path(n).resolve() for n in names]
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def examples(page: Path) -> list[Example]:
    """The marked blocks of ``page``; a marker not followed by a fenced block is an error."""
    lines = page.read_text().splitlines()
    found = []
    for i, text in enumerate(lines):
        marker = MARKER.match(text)
        if marker is None:
            if text.startswith("<!-- example"):
                raise SystemExit(f"doc_examples: {_name(page)}:{i + 1}: not a marker: {text}")
            continue
        if i + 1 >= len(lines) or not lines[i + 1].startswith("```"):
            raise SystemExit(f"doc_examples: {_name(page)}:{i + 1}: a marker must precede a ``` block")
        end = next((j for j in range(i + 2, len(lines)) if lines[j].startswith("```")), None)
        if end is None:
            raise SystemExit(f"doc_examples: {_name(page)}:{i + 2}: the block never closes")
        found.append(
            Example(
                page,
                i + 1,
                marker["command"],
                bool(marker["dollar"]),
                marker["date"],
                int(marker["width"]) if marker["width"] else None,
                lines[i + 2 : end],
                i + 2,
            )
        )
    return found


def run(example: Example) -> list[str]:
    """The block ``example``'s command gives now."""
    shown: list[str] = []
    with tempfile.TemporaryDirectory(prefix="ks-example-") as tmp:
        (Path(tmp) / "scenarios").symlink_to(ROOT / "scenarios")
        env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1", "PYTHONHASHSEED": "0", "REPO": str(ROOT)}
        for part in example.command.split(" ;; "):
            setup = part.startswith("(setup) ")
            command = part.removeprefix("(setup) ")
            done = subprocess.run(
                ["bash", "-o", "pipefail", "-c", command],
                cwd=tmp,
                capture_output=True,
                text=True,
                env=env,
                timeout=TIMEOUT_S,
            )
            if setup:
                continue
            out = (done.stdout + done.stderr).rstrip("\n").splitlines()
            shown += ([f"$ {command}"] if example.dollar else []) + out
    if example.width is None:
        return shown
    return [line if len(line) <= example.width else line[: example.width - 1] + "…" for line in shown]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--check", action="store_true", help="re-run the cheap examples; exit 1 on a difference")
    mode.add_argument("--write", action="store_true", help="rewrite the cheap examples in place")
    mode.add_argument("--list", action="store_true", help="list every example")
    parser.add_argument("--all", action="store_true", help="with --write: the dated examples too (dated today)")
    parser.add_argument("pages", nargs="*", help="pages to read (default: README.md and docs/*.md)")
    args = parser.parse_args(argv)
    for page in pages(args.pages):
        if not page.is_file():
            print(f"doc_examples: no such page: {page}", file=sys.stderr)
            return 2
    stale = 0
    for page in pages(args.pages):
        found = examples(page)
        if args.list:
            for ex in found:
                print(f"{ex.where}\t{ex.date or 'cheap'}\t{ex.command}")
            continue
        lines = page.read_text().splitlines()
        for ex in reversed(found):  # from the end, so earlier blocks keep their line numbers
            if ex.date and not (args.write and args.all):
                continue
            now = run(ex)
            if args.check and now != ex.body:
                stale += 1
                diff = difflib.unified_diff(ex.body, now, f"{ex.where} (the page)", "now", lineterm="", n=1)
                print("\n".join(diff))
            elif args.write:
                lines[ex.start : ex.start + len(ex.body)] = now
                if ex.date:
                    marker = (
                        "<!-- example" + (" $" if ex.dollar else "") + f" {datetime.date.today()}: {ex.command} -->"
                    )
                    lines[ex.line - 1] = marker
        if args.write:
            page.write_text("\n".join(lines) + "\n")
    if stale:
        print(
            f"doc_examples: {stale} example(s) differ from what their command gives now; "
            "run python scripts/doc_examples.py --write",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
