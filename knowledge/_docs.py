"""Loader for the markdown digests in knowledge/docs (literature summaries in our own words).

A digest says which kinds of task it serves on its first line, ``<!-- kinds: reduction, scan -->``
(``KINDS``; no such line: every kind), so retrieval hands a grayscale conversion the memory-bound
digest and a matrix product the GEMM ones. The line is metadata, not text: it is cut before the
digest is split into passages.
"""

from __future__ import annotations

import re
from pathlib import Path

import msgspec

_DOCS = Path(__file__).parent / "docs"
# What a task computes, as the evaluator's ``Task.kind`` names it (a copy: knowledge cannot import
# the evaluator; tests/test_task_kind.py holds the two equal).
KINDS = ("matrix product", "elementwise", "reduction", "scan", "sort")
_TAG = re.compile(r"\A<!--\s*kinds:(?P<kinds>[^>]*)-->[ \t]*\n")


class Document(msgspec.Struct, frozen=True):
    name: str  # file stem, e.g. "mi300x-architecture"
    title: str  # the first '# ' heading
    text: str
    kinds: tuple[str, ...] = ()  # the task kinds it serves; empty: every kind

    def serves(self, kind: str | None) -> bool:
        """Whether a task of ``kind`` should see this digest (None: a task of unknown kind sees all)."""
        return kind is None or not self.kinds or kind in self.kinds


def documents(kind: str | None = None) -> list[Document]:
    """The digests that serve ``kind`` (None: all), sorted by name; the title is the first
    level-one heading. A tag naming an unknown kind is a ValueError naming the file."""
    found = []
    for path in sorted(_DOCS.glob("*.md")):
        text = path.read_text(encoding="utf-8")
        kinds: tuple[str, ...] = ()
        if tag := _TAG.match(text):
            kinds = tuple(k.strip() for k in tag["kinds"].split(",") if k.strip())
            if unknown := [k for k in kinds if k not in KINDS]:
                raise ValueError(f"{path}: kinds {unknown} not among {', '.join(KINDS)}")
            text = text[tag.end() :]
        title = next((line[2:].strip() for line in text.splitlines() if line.startswith("# ")), path.stem)
        doc = Document(name=path.stem, title=title, text=text, kinds=kinds)
        if doc.serves(kind):
            found.append(doc)
    return found
