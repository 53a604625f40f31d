"""Knowledge retrieval for prompts: BM25 over the literature digests and the campaign's findings.

Why BM25 (``rank_bm25``'s Okapi variant) and not embeddings: the corpus is a few dozen passages of
technical prose whose useful matches are exact terms (``split-k``, ``waves``, ``e4m3fnuz``,
``BLOCK_K``); BM25 ranks those well, is deterministic, needs no model download and runs in
microseconds. Documents are split into their top-level bullets and paragraphs (the digests are
written one topic per bullet) so a passage is one topic, and
identifiers are split on ``_``/camel case so ``BLOCK_M`` matches "block m". Only the digests that
serve the task's kind (``_docs``) enter the corpus: BM25 has no notion of which problem is being
solved, and a grayscale kernel's query shares words ("block", "tile") with the GEMM digests.
"""

from __future__ import annotations

import re

import msgspec
from kernel_scientist.knowledge._docs import documents
from rank_bm25 import BM25Okapi

_WORD = re.compile(r"[a-z0-9]+(?:\.[0-9]+)?")
_STOP = frozenset(
    "a an and are as at be by for from has in is it its of on or that the this to was "
    "were will with we you not no can per than then".split()
)


class Passage(msgspec.Struct, frozen=True):
    source: str  # "doc:<name>#<heading>" or "finding"
    title: str
    text: str


def tokens(text: str) -> list[str]:
    text = re.sub(r"([a-z])([A-Z])", r"\1 \2", text).replace("_", " ").lower()
    return [w for w in _WORD.findall(text) if w not in _STOP]


# Words that pull a task kind's own topics into the query, beside the base kernel and the findings.
# A matrix product keeps the query it always had (the GEMM digests were written for the fp8 task).
_KIND_TERMS = {
    "matrix product": "fp8 gemm mi300x tile split-k occupancy",
    "elementwise": "memory-bound coalescing vector width elements per thread grid launch overhead host-bound",
    "reduction": "reduction rows per program two-pass atomics persistent tree tl.reduce",
    "scan": "scan prefix sum look-back reduce-then-scan tl.associative_scan precision",
    "sort": "sort radix bitonic tl.sort scan histogram",
}


def kind_terms(kind: str | None) -> str:
    """Query words for a task of ``kind`` (``KINDS``); none for a task of unknown kind."""
    return _KIND_TERMS.get(kind, "") if kind is not None else ""


def doc_passages(kind: str | None = None) -> list[Passage]:
    """The knowledge/docs digests that serve ``kind`` (None: all), cut into headings' sections,
    top-level bullets and paragraphs."""
    out = []
    for doc in documents(kind):
        heading = doc.title
        for n, chunk in enumerate(re.split(r"\n\s*\n|\n(?=- |#)", doc.text)):
            chunk = chunk.strip()
            if not chunk:
                continue
            if chunk.startswith("#"):
                heading = chunk.splitlines()[0].lstrip("# ").strip()
                chunk = "\n".join(chunk.splitlines()[1:]).strip()
                if not chunk:
                    continue
            bold = re.match(r"- \*\*(.+?)\*\*", chunk)
            title = f"{heading}: {bold.group(1).rstrip('.')}" if bold else heading
            out.append(Passage(source=f"doc:{doc.name}#{n}", title=title, text=chunk))
    return out


def retrieve(
    query: str, findings: list[str], k: int, docs: list[Passage] | None = None, kind: str | None = None
) -> list[Passage]:
    """The ``k`` passages (digest sections and findings) most relevant to ``query``, best first,
    from the digests that serve a task of ``kind`` (None: every digest).

    Ties keep corpus order, and passages that share no term with the query are never returned,
    so the answer is deterministic and may be shorter than ``k``.
    """
    corpus = [
        *(docs if docs is not None else doc_passages(kind)),
        *(Passage(source="finding", title="campaign finding", text=f) for f in findings),
    ]
    if k <= 0 or not corpus:
        return []
    query_terms = tokens(query)
    if not query_terms:
        return []
    index = BM25Okapi([tokens(p.text) or ["_"] for p in corpus])
    scores = index.get_scores(query_terms)
    ranked = sorted(range(len(corpus)), key=lambda i: (-scores[i], i))
    terms = set(query_terms)
    return [corpus[i] for i in ranked[:k] if terms & set(tokens(corpus[i].text))]
