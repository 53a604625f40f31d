"""Line-based editing of the comment-delimited regions of a submission.

A region is the text between ``# region: NAME`` and ``# endregion`` (optionally
``# endregion: NAME``) comment lines; regions nest. Editing text rather than an AST keeps the
comments, the formatting and the region markers intact, so that a rewritten kernel can be rewritten
again by the next technique. Inserted code takes the indentation of the region's marker line, which
is what lets the persistent-loop rewrite indent whole regions without breaking later insertions.
"""

from __future__ import annotations

import ast
import functools
import re
import textwrap

import msgspec


class NotApplicable(Exception):
    """A technique cannot transform this source (it lacks a region or a form the rewrite needs);
    the message says why."""


_OPEN = re.compile(r"^(\s*)# region: (\w+)\s*$")
_CLOSE = re.compile(r"^\s*# endregion(?::\s*(\w+))?\s*$")
_CONSTANT = re.compile(r"^(\s*)([A-Z][A-Z0-9_]*)\s*=\s*(.+?)\s*(#.*)?$")


class Region(msgspec.Struct, frozen=True):
    name: str
    start: int  # line index of the opening marker
    end: int  # line index of the closing marker
    indent: str  # whitespace before the opening marker


def parse(source: str) -> dict[str, Region]:
    """All regions of ``source`` by name; malformed markers raise NotApplicable."""
    return dict(_parsed(source))


@functools.lru_cache(maxsize=512)
def _parsed(source: str) -> tuple[tuple[str, Region], ...]:
    # A design step asks about the same few sources thousands of times (every technique's
    # variants, compounds, detection): parse each once. Errors are not cached (they are raised).
    regions: dict[str, Region] = {}
    stack: list[tuple[str, int, str]] = []
    for index, line in enumerate(source.splitlines()):
        if opened := _OPEN.match(line):
            stack.append((opened.group(2), index, opened.group(1)))
        elif closed := _CLOSE.match(line):
            if not stack:
                raise NotApplicable(f"line {index + 1}: '# endregion' without an open region")
            name, start, indent = stack.pop()
            if closed.group(1) and closed.group(1) != name:
                raise NotApplicable(f"line {index + 1}: '# endregion: {closed.group(1)}' closes region {name!r}")
            if name in regions:
                raise NotApplicable(f"region {name!r} appears twice")
            regions[name] = Region(name, start, index, indent)
    if stack:
        raise NotApplicable(f"region {stack[-1][0]!r} is never closed")
    return tuple(regions.items())


def require(source: str, *names: str, why: str) -> dict[str, Region]:
    """Regions of ``source``, raising NotApplicable naming what is missing and who needed it."""
    regions = parse(source)
    missing = [name for name in names if name not in regions]
    if missing:
        raise NotApplicable(f"{why}: the source lacks region(s) {', '.join(missing)}")
    return regions


def has(source: str, name: str) -> bool:
    try:
        return name in parse(source)
    except NotApplicable:
        return False


def body(source: str, name: str) -> list[str]:
    """The lines strictly inside a region (markers excluded), as written."""
    region = require(source, name, why=f"reading region {name}")[name]
    return source.splitlines()[region.start + 1 : region.end]


def _indented(text: str, indent: str) -> list[str]:
    lines = textwrap.dedent(text).strip("\n").splitlines()
    return [indent + line if line.strip() else "" for line in lines]


def _join(lines: list[str]) -> str:
    return "\n".join(lines) + "\n"


def replace_body(source: str, name: str, text: str) -> str:
    """Replace everything inside region ``name`` with ``text`` (re-indented to the marker)."""
    region = require(source, name, why=f"rewriting region {name}")[name]
    lines = source.splitlines()
    return _join(lines[: region.start + 1] + _indented(text, region.indent) + lines[region.end :])


def insert(source: str, name: str, text: str, at: str = "end") -> str:
    """Insert ``text`` at the start or the end of region ``name``."""
    region = require(source, name, why=f"inserting into region {name}")[name]
    lines = source.splitlines()
    where = region.start + 1 if at == "start" else region.end
    return _join(lines[:where] + _indented(text, region.indent) + lines[where:])


def insert_after_region(source: str, name: str, text: str) -> str:
    """Insert ``text`` right after region ``name``'s closing marker, at the marker's indent."""
    region = require(source, name, why=f"inserting after region {name}")[name]
    lines = source.splitlines()
    where = region.end + 1
    return _join(lines[:where] + _indented(text, region.indent) + lines[where:])


def insert_near(source: str, name: str, prefix: str, text: str, after: bool, extra: str = "") -> str:
    """Insert ``text`` before/after the first line of region ``name`` starting with ``prefix``.

    The inserted text takes that line's indentation plus ``extra``.
    """
    region = require(source, name, why=f"editing region {name}")[name]
    lines = source.splitlines()
    for index in range(region.start + 1, region.end):
        stripped = lines[index].lstrip()
        if stripped.startswith(prefix):
            indent = lines[index][: len(lines[index]) - len(stripped)]
            where = index + 1 if after else index
            return _join(lines[:where] + _indented(text, indent + extra) + lines[where:])
    raise NotApplicable(f"region {name} has no line starting with {prefix!r}")


def replace_line(source: str, name: str, prefix: str, text: str) -> str:
    """Replace the first line of region ``name`` that starts with ``prefix``."""
    region = require(source, name, why=f"editing region {name}")[name]
    lines = source.splitlines()
    for index in range(region.start + 1, region.end):
        stripped = lines[index].lstrip()
        if stripped.startswith(prefix):
            indent = lines[index][: len(lines[index]) - len(stripped)]
            return _join(lines[:index] + _indented(text, indent) + lines[index + 1 :])
    raise NotApplicable(f"region {name} has no line starting with {prefix!r}")


# -- tunables --------------------------------------------------------------------------------


def read_tunables(source: str) -> dict[str, int]:
    """Integer constants of the ``config`` region; without one, upper-case module-level ints.

    The fallback lets crossover and the timing model read an LLM-written kernel that kept its
    settings as module constants but dropped our markers.
    """
    try:
        regions = parse(source)
    except NotApplicable:
        regions = {}
    found: dict[str, int] = {}
    if "config" in regions:
        for line in body(source, "config"):
            if match := _CONSTANT.match(line):
                value = _literal_int(match.group(3))
                if value is not None:
                    found[match.group(2)] = value
        return found
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return found
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            target = node.targets[0].id
            if target.isupper() and isinstance(node.value, ast.Constant):
                constant = node.value.value
                if isinstance(constant, int) and not isinstance(constant, bool):
                    found[target] = constant
    return found


def _literal_int(text: str) -> int | None:
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def set_constant(source: str, name: str, value: int) -> str:
    """Set ``NAME = value`` in the config region, appending the line if it is new."""
    region = require(source, "config", why=f"setting {name}")["config"]
    lines = source.splitlines()
    for index in range(region.start + 1, region.end):
        match = _CONSTANT.match(lines[index])
        if match and match.group(2) == name:
            lines[index] = f"{match.group(1)}{name} = {value!r}"
            return _join(lines)
    return insert(source, "config", f"{name} = {value!r}")


def add_tunable(source: str, name: str, value: int, *, launch_key: str | None = None, kernel_param: bool = True) -> str:
    """Introduce a new tunable end to end: constant, select_config entry, kernel constexpr.

    ``launch_key`` is the keyword the launch receives (defaults to ``name``); ``kernel_param``
    adds ``NAME: tl.constexpr`` to the kernel's parameter list. Re-adding an existing tunable only
    updates its value.
    """
    why = f"adding tunable {name}"
    require(source, "config", "select_config", *(["params"] if kernel_param else []), why=why)
    key = launch_key or name
    fresh = name not in read_tunables(source)
    source = set_constant(source, name, value)
    if not fresh:
        return source
    source = insert_near(source, "select_config", "}", f'"{key}": {name},', after=False, extra="    ")
    if kernel_param:
        source = insert(source, "params", f"{name}: tl.constexpr,")
    return source
