"""The scenario keys as a user sees them: what each accepts, in words, read off the config Structs.

One description serves two readers. A validation error names the key, what it accepts and what it
got ("agents.engineers: expects a whole number from 1 to 32; got 'four' (text)") instead of
msgspec's "Expected `int`, got `str`"; and the scenario reference (docs/scenarios.md) lists every
key with its default and what it accepts, checked against this module by a test so that the page
cannot drift from the Structs. Ranges come from the ``msgspec.Meta`` annotations, choices from the
``Literal`` types, so nothing here repeats a limit by hand.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator

import msgspec
from msgspec import inspect as mi


def accepts(t: mi.Type) -> str:
    """What a value of type ``t`` may be, in words."""
    if isinstance(t, mi.UnionType):  # `X | None`: None means "unset"; TOML cannot write it anyway
        return " or ".join(accepts(x) for x in t.types if not isinstance(x, mi.NoneType))
    if isinstance(t, mi.BoolType):
        return "true or false"
    if isinstance(t, mi.LiteralType):
        return "one of " + ", ".join(f"'{v}'" for v in t.values)
    if isinstance(t, mi.StrType):
        return "text"
    if isinstance(t, mi.StructType):
        return "a table of keys"
    if isinstance(t, (mi.IntType, mi.FloatType)):
        noun = "a whole number" if isinstance(t, mi.IntType) else "a number"
        if t.ge is not None and t.le is not None:
            return f"{noun} from {t.ge:g} to {t.le:g}"
        parts = [
            f"at least {t.ge:g}" if t.ge is not None else "",
            f"more than {t.gt:g}" if t.gt is not None else "",
            f"at most {t.le:g}" if t.le is not None else "",
            f"less than {t.lt:g}" if t.lt is not None else "",
        ]
        bounds = " and ".join(p for p in parts if p)
        return f"{noun} {bounds}" if bounds else noun
    return type(t).__name__.removesuffix("Type").lower()


def describe(value: object, kind: bool = True) -> str:
    """A value as the user wrote it, and its kind when that is the problem."""
    kinds = {bool: "true/false", int: "a whole number", float: "a number", str: "text", dict: "a table", list: "a list"}
    shown = str(value).lower() if isinstance(value, bool) else repr(value)
    return f"{shown} ({kinds.get(type(value), type(value).__name__)})" if kind else shown


def keys(struct: type) -> Iterator[tuple[str, mi.Type, object]]:
    """(dotted key, type, default) for every leaf key of a config Struct, in declaration order."""

    def walk(info: mi.StructType, prefix: str) -> Iterator[tuple[str, mi.Type, object]]:
        for f in info.fields:
            key = f"{prefix}{f.encode_name}"
            if isinstance(f.type, mi.StructType):
                yield from walk(f.type, key + ".")
            else:
                yield key, f.type, f.default

    info = mi.type_info(struct)
    assert isinstance(info, mi.StructType), f"{struct} is not a Struct"
    yield from walk(info, "")


def field_type(struct: type, dotted: str) -> mi.Type | None:
    """The type of ``dotted`` (e.g. "llm.select.max_tokens") in ``struct``, or None."""
    info: mi.Type = mi.type_info(struct)
    for part in dotted.split("."):
        if not isinstance(info, mi.StructType):
            return None
        match = next((f for f in info.fields if f.encode_name == part), None)
        if match is None:
            return None
        info = match.type
    return info


def lookup(tree: dict[str, object], dotted: str) -> object:
    node: object = tree
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return msgspec.UNSET
        node = node[part]
    return node


def explain(struct: type, tree: dict[str, object], message: str) -> str:
    """msgspec's validation ``message`` for ``tree`` (the decoded TOML with overrides applied)
    in the user's terms: the key, what it accepts, what it got."""
    text, sep, where = message.partition(" - at `$")
    path = where.rstrip("`").lstrip(".") if sep else ""
    if text.startswith("Object contains unknown field"):
        return unknown(struct, tree, path, text.split("`")[1])
    t = field_type(struct, path) if path else None
    if t is None:
        return f"{path}: {text}" if path else text
    value = lookup(tree, path)
    if isinstance(value, dict) and isinstance(t, mi.StructType):
        return text  # a table's own rule between its keys (__post_init__): its message names them
    wrong_kind = ", got `" in text or text.startswith("Invalid enum")  # else: the right kind, out of range
    got = "" if value is msgspec.UNSET else f"; got {describe(value, wrong_kind)}"
    return f"{path}: expects {accepts(t)}{got}"


def unknown(struct: type, tree: dict[str, object], path: str, name: str) -> str:
    """An unknown key or table ``name`` in the table at ``path``, with the known key a user most
    likely meant: "agents.engineer: unknown key; did you mean agents.engineers?"."""
    prefix = f"{path}." if path else ""
    key = prefix + name
    value = lookup(tree, key)
    table = isinstance(value, dict)
    what = "unknown table" if table else "unknown key"
    rest = _leaves(value)[0] if table else ""  # the first key the user wrote under it
    written = f"{key}.{rest}" if rest else key
    said = f"{written}: {what} {key}" if table and rest else f"{key}: {what}"
    known = [k for k, _, _ in keys(struct) if k != "source"]
    here = field_type(struct, path) if path else mi.type_info(struct)
    names = [f.encode_name for f in here.fields if f.encode_name != "source"] if isinstance(here, mi.StructType) else []
    near = _closest(name, names)
    if near is not None:  # a typo in this table: agents.engineer -> agents.engineers, agent -> agents
        meant = prefix + near
        whole = f"{meant}.{rest}"
        return f"{said}; did you mean {whole if rest and whole in known else meant}?"
    elsewhere = [k for k in known if k.rsplit(".", 1)[-1] == name]
    if len(elsewhere) == 1:  # the right key in the wrong table: evaluator.engineers -> agents.engineers
        return f"{said}; did you mean {elsewhere[0]}?"
    where = f"the keys of [{path}]" if path else "a scenario's tables"
    return f"{said}; {where}: {', '.join(names)}"


def _closest(name: str, names: list[str]) -> str | None:
    """The known name ``name`` most likely misspells (difflib), or the one it cuts short."""
    close = difflib.get_close_matches(name, names, n=1, cutoff=0.6)
    if close:
        return close[0]
    longer = [n for n in names if n.startswith(name)]  # rate -> rate_per_hour
    return longer[0] if len(longer) == 1 else None


def _leaves(table: object) -> list[str]:
    """The dotted keys under a table the user wrote ([""] for an empty one)."""
    if not isinstance(table, dict) or not table:
        return [""]
    return [f"{k}{'.' + leaf if leaf else ''}" for k, v in table.items() for leaf in _leaves(v)]


def default_text(value: object) -> str:
    """A default as it would be written in a scenario file (None: the key is unset)."""
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, str):
        return f'"{value}"'
    return f"{value:g}" if isinstance(value, float) else str(value)


def reference(struct: type) -> list[tuple[str, str, str]]:
    """(key, default, accepts) for every key a scenario file may set: the rows of docs/scenarios.md."""
    return [(key, default_text(default), accepts(t)) for key, t, default in keys(struct) if key != "source"]
