"""What untrusted text goes through before it enters a prompt, and a model's code before it is kept.

Candidate source, evaluator output and error text are data, written partly by a model and partly by
code that model wrote, so each is (1) stripped of control and format characters (C0/C1 controls
and Unicode category Cf: the bidirectional overrides of "Trojan Source", zero-width joiners, BOMs),
which can hide text from a reviewer or reorder it on screen; (2) cut to a length limit, keeping
head and tail, so no single item can crowd the prompt; (3) fenced with a backtick run longer than
any inside it, so it cannot close its own fence. The system prompt tells the model that fenced
text is data and never instructions. None of this makes an injection impossible; what makes it
harmless is that no verdict is taken from model text (the critic's rules and pre-screen bind, and
hypothesis verdicts are arithmetic on measured times).
"""

from __future__ import annotations

import re
import unicodedata

_KEEP = {"\n", "\t"}


def clean(text: str) -> str:
    """Drop control and format characters (keeping newlines and tabs); normalise line ends."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return "".join(ch for ch in text if ch in _KEEP or unicodedata.category(ch) not in ("Cc", "Cf"))


def truncate(text: str, limit: int) -> str:
    """At most about ``limit`` characters: two thirds from the head, one third from the tail."""
    if len(text) <= limit:
        return text
    head, tail = (2 * limit) // 3, limit // 3
    return f"{text[:head]}\n[... {len(text) - head - tail} characters cut ...]\n{text[len(text) - tail :]}"


def fence(text: str, limit: int, lang: str = "") -> str:
    """Clean, truncate and fence ``text`` so that nothing inside can end the block."""
    body = truncate(clean(text), limit)
    longest = max((len(run) for run in re.findall(r"`+", body)), default=0)
    ticks = "`" * max(3, longest + 1)
    return f"{ticks}{lang}\n{body}\n{ticks}"


def line(text: str, limit: int) -> str:
    """One line of untrusted text (a finding, a reason) inside a list."""
    return truncate(" ".join(clean(text).split()), limit)
