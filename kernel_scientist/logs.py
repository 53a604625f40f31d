"""The agents' conversation on the console (a colour per agent) and in a JSONL file.

Every message is first committed to the blackboard; the console line and the JSONL line are
written after the commit, so what you read there is on disk. ``logs --follow`` (conversation.py) reads the
blackboard file from another process and prints what is new as it lands.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TextIO

import msgspec
from loguru import logger

from blackboard import Message

COLOURS = {
    "archivist": "magenta", "theorist": "cyan", "critic": "yellow", "evaluator": "green",
    "runner": "white",
}
ENGINEER_COLOURS = ("blue", "light-blue", "light-cyan", "light-magenta")
_ANSI = {"magenta": 35, "cyan": 36, "yellow": 33, "green": 32, "white": 37, "blue": 34,
         "light-blue": 94, "light-cyan": 96, "light-magenta": 95, "red": 31}


def colour(agent: str) -> str:
    if agent.startswith("engineer-"):
        number = agent.rsplit("-", 1)[-1]
        return ENGINEER_COLOURS[(int(number) - 1) % len(ENGINEER_COLOURS)] if number.isdigit() else "blue"
    return COLOURS.get(agent, "white")


def clock(at: float) -> str:
    hours, rest = divmod(int(at), 3600)
    return f"{hours:02d}:{rest // 60:02d}:{rest % 60:02d}"


def jsonl_path(db: Path) -> Path:
    return db.with_suffix(".jsonl")


class JsonlLog:
    """Appends each message as one JSON object per line. The file is opened at the first message,
    so a campaign that never starts (a missing key, no GPU) leaves no empty log behind."""

    def __init__(self, path: Path):
        self.path = path
        self.file = None

    def __call__(self, msg: Message) -> None:
        if self.file is None:
            self.file = open(self.path, "ab")
        self.file.write(msgspec.json.encode(msg) + b"\n")
        self.file.flush()

    def close(self) -> None:
        if self.file is not None:
            self.file.close()
            self.file = None


def setup_console(stream: TextIO | None = None, colours: bool | None = None) -> None:
    """Configure loguru (only the CLI does this): one line per message, coloured by agent, on
    stderr unless told otherwise (stdout is for the leaderboard)."""
    stream = stream or sys.stderr  # looked up now, not at import: the CLI may run in-process
    logger.remove()

    def fmt(record) -> str:
        tint = colour(record["extra"].get("agent", "runner"))
        if record["extra"].get("kind") in ("error", "warning"):
            return f"<{tint}>{{extra[clock]}} {{extra[agent]: >11}}</{tint}> │ <red>{{message}}</red>\n"
        return f"<{tint}>{{extra[clock]}} {{extra[agent]: >11}} │ {{message}}</{tint}>\n"

    logger.add(stream, format=fmt, colorize=colours if colours is not None else stream.isatty(), level="INFO")


CONSOLE_WIDTH = 400  # long messages (the theorist's ten avenues) are cut on the console only


def to_console(msg: Message) -> None:
    text = msg.text if len(msg.text) <= CONSOLE_WIDTH else msg.text[: CONSOLE_WIDTH - 1] + "…"
    logger.bind(agent=msg.agent, kind=msg.kind, clock=clock(msg.at)).info(text)


def render(msg: Message, colours: bool) -> str:
    line = f"{clock(msg.at)} {msg.agent: >11} │ {msg.text}"
    if colours:
        code = 31 if msg.kind in ("error", "warning") else _ANSI[colour(msg.agent)]
        return f"\x1b[{code}m{line}\x1b[0m"
    return line
