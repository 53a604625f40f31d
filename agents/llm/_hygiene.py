"""What untrusted text goes through before it enters a prompt, and a model's code before it is kept.

Candidate source, evaluator output and error text are data, written partly by a model and partly by
code that model wrote, so each is (1) stripped of control and format characters (C0/C1 controls
and Unicode category Cf: the bidirectional overrides of "Trojan Source", zero-width joiners, BOMs),
which can hide text from a reviewer or reorder it on screen; (2) cut to a length limit (head
and tail for code and errors, the head for a summary or a plan) between lines, sentences or
words, saying how much was cut, so no single item can crowd the prompt and none ends mid-sentence
unannounced; (3) fenced with a backtick run longer than any inside it, so it cannot close its own
fence. The system prompt tells the model that fenced text is data and never instructions. None of
this makes an injection impossible; what makes it harmless is that no verdict is taken from model
text (the critic's rules and pre-screen bind, and hypothesis verdicts are arithmetic on measured
times).
"""

from __future__ import annotations

import re
import unicodedata

_KEEP = {"\n", "\t"}


def clean(text: str) -> str:
    """Drop control and format characters (keeping newlines and tabs); normalise line ends."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return "".join(ch for ch in text if ch in _KEEP or unicodedata.category(ch) not in ("Cc", "Cf"))


# Where a cut may fall, best first: between lines, after a sentence, between words. A cut never
# falls mid-word when a break lies in the last half of the room, and a cut always says so.
_BREAKS = ("\n", ". ", " ")


def _end_before(text: str, n: int) -> int:
    """Where a head of at most ``n`` characters ends: after its last whole line, sentence or word."""
    for sep in _BREAKS:
        i = text.rfind(sep, 0, n)
        if i >= n // 2:
            return i + (1 if sep == ". " else 0)
    return n


def _start_after(text: str, start: int) -> int:
    """Where a tail beginning at or after ``start`` begins: at its first whole line, sentence or word."""
    room = len(text) - start
    for sep in _BREAKS:
        i = text.find(sep, start)
        if i != -1 and i - start <= room // 2:
            return i + len(sep)
    return start


def truncate(text: str, limit: int) -> str:
    """At most about ``limit`` characters: two thirds from the head, one third from the tail, cut
    between lines, sentences or words where one is near, with a line saying how much was cut."""
    if len(text) <= limit:
        return text
    head = text[: _end_before(text, (2 * limit) // 3)].rstrip()
    tail = text[_start_after(text, len(text) - limit // 3) :]  # a code line keeps its indent
    return f"{head}\n[... {len(text) - len(head) - len(tail)} characters cut ...]\n{tail}"


def shorten(text: str, limit: int) -> str:
    """At most about ``limit`` characters from the head, ending at a whole line, sentence or word,
    and saying how much was cut: for text whose start matters (a summary, a plan, a reason)."""
    if len(text) <= limit:
        return text
    head = text[: _end_before(text, limit)].rstrip()
    return f"{head} [... {len(text) - len(head)} characters cut]"


def fence(text: str, limit: int, lang: str = "") -> str:
    """Clean, truncate and fence ``text`` so that nothing inside can end the block."""
    body = truncate(clean(text), limit)
    longest = max((len(run) for run in re.findall(r"`+", body)), default=0)
    ticks = "`" * max(3, longest + 1)
    return f"{ticks}{lang}\n{body}\n{ticks}"


def line(text: str, limit: int) -> str:
    """One line of untrusted text (a summary, a reason) inside a list or a table."""
    return shorten(" ".join(clean(text).split()), limit)
