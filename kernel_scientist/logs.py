"""The agents' conversation on the console (a colour per agent, drawn by rich) and in a JSONL file.

Every message is first committed to the blackboard; the console line and the JSONL line are
written after the commit, so what you read there is on disk. ``logs --follow`` (conversation.py) reads the
blackboard file from another process and prints what is new as it lands.
"""

from __future__ import annotations

import sys
from logging import WARNING
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, TextIO

import msgspec
from loguru import logger
from rich.console import Console
from rich.text import Text

from kernel_scientist.blackboard import Message

if TYPE_CHECKING:
    import loguru

# One colour per agent, in rich's names (rich draws every coloured line of the CLI: this
# conversation, ``logs``, ``watch``, the progress bars); warnings and errors in ALARM.
COLOURS = {
    "archivist": "magenta",
    "theorist": "cyan",
    "critic": "yellow",
    "evaluator": "green",
    "runner": "white",
}
ENGINEER_COLOURS = ("blue", "bright_blue", "bright_cyan", "bright_magenta")
ALARM = "red"


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

    def __init__(self, path: Path) -> None:
        self.path = path
        self.file: BinaryIO | None = None

    def __call__(self, msg: Message) -> None:
        if self.file is None:
            self.file = open(self.path, "ab")
        self.file.write(msgspec.json.encode(msg) + b"\n")
        self.file.flush()

    def close(self) -> None:
        if self.file is not None:
            self.file.close()
            self.file = None


_console: Console | None = None  # where the conversation goes (setup_console); stderr until then


def setup_console(stream: TextIO | None = None, colours: bool | None = None) -> None:
    """Point the conversation and the library's log records (loguru; only the CLI does this) at
    ``stream``: one line per message, coloured by agent, on stderr unless told otherwise (stdout is
    for the leaderboard). ``colours`` None: colours when the stream is a terminal."""
    global _console
    stream = stream or sys.stderr  # looked up now, not at import: the CLI may run in-process
    _console = Console(file=stream, force_terminal=colours, no_color=colours is False, highlight=False, soft_wrap=True)
    logger.remove()
    logger.add(_log_record, level="INFO", format="{message}")


def _log_record(message: loguru.Message) -> None:
    """A loguru record (the LLM transport's retries) as a console line in the conversation's style."""
    record = message.record
    agent = record["extra"].get("agent", "runner")
    line = Text(f"{'':8} {agent: >11} │ ", style=colour(agent))
    line.append(record["message"], style=ALARM if record["level"].no >= WARNING else colour(agent))
    (_console or Console(stderr=True)).print(line)


CONSOLE_WIDTH = 400  # long messages (the theorist's ten avenues) are cut on the console only


def styled(msg: Message, width: int | None = None) -> Text:
    """One message as a console line: time, agent and text in the agent's colour (the text in
    ALARM for warnings and errors), the text cut to ``width`` characters."""
    text = msg.text if width is None or len(msg.text) <= width else msg.text[: width - 1] + "…"
    tint = colour(msg.agent)
    line = Text(f"{clock(msg.at)} {msg.agent: >11} │ ", style=tint)
    line.append(text, style=ALARM if msg.kind in ("error", "warning") else tint)
    return line


def to_console(msg: Message) -> None:
    (_console or Console(stderr=True)).print(styled(msg, CONSOLE_WIDTH))


_ansi = Console(force_terminal=True, color_system="standard", highlight=False, soft_wrap=True)


def render(msg: Message, colours: bool) -> str:
    """One message as a line of text, with terminal colour codes when ``colours``."""
    line = styled(msg)
    if not colours:
        return line.plain
    with _ansi.capture() as captured:
        _ansi.print(line, end="")
    return captured.get()
