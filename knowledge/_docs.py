"""Loader for the markdown digests in knowledge/docs (literature summaries in our own words)."""

from __future__ import annotations

from pathlib import Path

import msgspec

_DOCS = Path(__file__).parent / "docs"


class Document(msgspec.Struct, frozen=True):
    name: str  # file stem, e.g. "mi300x-architecture"
    title: str  # the first '# ' heading
    text: str


def documents() -> list[Document]:
    """All digests, sorted by name; the title is the first level-one heading."""
    found = []
    for path in sorted(_DOCS.glob("*.md")):
        text = path.read_text(encoding="utf-8")
        title = next((line[2:].strip() for line in text.splitlines() if line.startswith("# ")), path.stem)
        found.append(Document(name=path.stem, title=title, text=text))
    return found
