"""The conversation viewer behind ``logs``: filters, a JSON-lines mode, and a hypothesis's thread.

Messages carry ``kernel_id`` and ``hypothesis_id`` (and kernels carry ``hypothesis_id``), so a
hypothesis's whole story can be assembled from ids alone, with no parsing of the text: the plan and
the choice name the hypothesis; the engineer's claim and kernel, the critic's review, the
evaluator's queue and result, the verdict and the archivist's finding name the hypothesis or its
kernel. The filters are exact on ids, agent and kind, and a case-insensitive substring on text.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import TextIO

import msgspec

from kernel_scientist.blackboard import Blackboard, Hypothesis, Message, metrics

from .logs import render

_encode = msgspec.json.Encoder().encode

# The thread's stages in the order a hypothesis lives them, keyed by message kind.
STAGES = (
    ("proposal", ("plan",)),
    ("choice", ("choice",)),
    ("implementation", ("info", "kernel", "warning")),
    ("review", ("review",)),
    ("evaluation", ("queue", "evaluation")),
    ("verdict", ("verdict",)),
    ("finding", ("finding",)),
)
_STAGE_OF = {kind: stage for stage, kinds in STAGES for kind in kinds}


class Filter(msgspec.Struct, frozen=True):
    """Which messages to show; every field left None matches everything."""

    agent: str | None = None
    kind: str | None = None
    kernel_id: int | None = None
    hypothesis_id: int | None = None
    grep: str | None = None

    def matches(self, msg: Message) -> bool:
        return (
            (self.agent is None or msg.agent == self.agent)
            and (self.kind is None or msg.kind == self.kind)
            and (self.kernel_id is None or msg.kernel_id == self.kernel_id)
            and (self.hypothesis_id is None or msg.hypothesis_id == self.hypothesis_id)
            and (self.grep is None or self.grep.lower() in msg.text.lower())
        )


def follow(board: Blackboard, poll_s: float = 0.5, follow: bool = True, after_id: int = 0) -> Iterator[list[Message]]:
    """Yield batches of new messages; with ``follow``, wait (sleeping) for another process's
    commits after each batch (``PRAGMA data_version`` changes only then)."""
    last = after_id
    while True:
        version = board.data_version()
        batch = board.messages(after_id=last)
        if batch:
            last = batch[-1].id
        yield batch
        if not follow:
            return
        board.wait_commit(version, poll_s)


def show(
    board: Blackboard,
    flt: Filter,
    *,
    follow_: bool = False,
    as_json: bool = False,
    out: TextIO | None = None,
    poll_s: float = 0.5,
) -> int:
    """Print the messages ``flt`` matches (text lines or JSON lines) to ``out`` (stdout when None,
    looked up at the call); returns how many."""
    out = out or sys.stdout
    colours = out.isatty() and not as_json
    count = 0
    for batch in follow(board, poll_s, follow_):
        for msg in batch:
            if flt.matches(msg):
                out.write((_encode(msg).decode() if as_json else render(msg, colours)) + "\n")
                count += 1
        out.flush()
    return count


class Thread(msgspec.Struct, frozen=True):
    """One hypothesis from proposal to verdict: the record and its messages, each with a stage."""

    hypothesis: Hypothesis
    messages: list[tuple[str, Message]]  # (stage, message), in campaign order
    missing: list[str]  # stages not reached (yet)


def thread(board: Blackboard, hypothesis_id: int) -> Thread:
    """Assemble a hypothesis's thread. Raises KeyError when there is no such hypothesis."""
    hyp = board.hypothesis(hypothesis_id)
    kernel_ids = {k.id for k in board.kernels() if k.hypothesis_id == hyp.id}
    if hyp.kernel_id is not None:
        kernel_ids.add(hyp.kernel_id)
    picked = []
    for msg in board.messages():
        mine = msg.hypothesis_id == hyp.id or (
            msg.hypothesis_id is None and msg.kernel_id in kernel_ids and msg.kind in _STAGE_OF
        )
        # The archivist's selections and the theorist's avenues name the *base* kernel: not ours.
        if mine and msg.kind in _STAGE_OF:
            picked.append((_STAGE_OF[msg.kind], msg))
    reached = {stage for stage, _ in picked}
    missing = [stage for stage, _ in STAGES if stage not in reached and stage != "finding"]
    return Thread(hypothesis=hyp, messages=picked, missing=missing)


def render_thread(th: Thread, colours: bool = False) -> str:
    h = th.hypothesis
    lines = [
        f"H{h.id} {h.technique}"
        + (f" ({h.label})" if h.label else "")
        + f" on base kernel {h.base_id}"
        + (f", reference {h.reference_id}" if h.reference_id else ""),
        f"  plan: {h.plan}",
        f"  predicted {metrics.predicted_range_text(h.min_uplift, h.max_uplift)}, innovation {h.innovation:.2f}; "
        f"state {h.state}; kernel {h.kernel_id if h.kernel_id is not None else '-'}; "
        f"verdict {h.verdict} (observed {metrics.uplift_text(h.observed_uplift)})",
        "",
    ]
    stage = None
    for st, msg in th.messages:
        if st != stage:
            lines.append(f"── {st}")
            stage = st
        lines.append("  " + render(msg, colours))
    if th.missing:
        lines += ["", "not reached (yet): " + ", ".join(th.missing)]
    return "\n".join(lines)


def parse_hypothesis_ref(text: str) -> int:
    """'H12', 'h12' or '12' -> 12. Raises ValueError with a one-line reason."""
    digits = text[1:] if text[:1] in ("H", "h") else text
    if not digits.isdigit():
        raise ValueError(f"{text!r}: expected a hypothesis id such as H12 or 12")
    return int(digits)
