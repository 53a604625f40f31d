"""Cache and eviction hints on a Triton kernel's loads, per class of load.

``tl.load`` takes an ``eviction_policy`` ("evict_first": this line will not be read again, let it
go first; "evict_last": keep it, it will be) and a ``cache_modifier`` (".cg": cache in L2 only,
not in the SM's L1). They change no result, only which lines the caches keep, so they pay where a
kernel's working set competes for L2: a stream of data each program reads once pushing out data
that every program reads again. Which is which is read from the syntax: a load whose address
derives from the program id reads the program's own slice (streamed: each byte read by one
program), a load whose address does not reads what every program reads (shared: a bias, a
table, a scale). Each form sets one hint on one class of load, or takes the hints off it
(TorchInductor writes ``evict_first`` and ``evict_last`` on its own, so a campaign can measure
without them); stores keep theirs.
"""

from __future__ import annotations

import ast

from kernel_scientist.blackboard.records import Param
from kernel_scientist.knowledge._base import Form
from kernel_scientist.knowledge._regions import NotApplicable
from kernel_scientist.knowledge.techniques.any_kernel._syntax import (
    SyntaxTechnique,
    apply_edits,
    dotted,
    kernels,
    pid_derived,
    refuse_gemm_regions,
    replace,
    segment,
    tree_of,
)

_HINTS = {  # a form's hint -> the keywords it writes (nothing for "none")
    "evict_first": "eviction_policy='evict_first'",
    "evict_last": "eviction_policy='evict_last'",
    "cg": "cache_modifier='.cg'",
    "none": "",
}
# (class, hint), the likeliest first: streamed data evicted first, shared data kept, streamed data
# kept out of L1, then each class without hints, then the reverse of the first two.
_CHOICES = (
    ("streamed", "evict_first"),
    ("shared", "evict_last"),
    ("streamed", "cg"),
    ("streamed", "none"),
    ("shared", "none"),
    ("streamed", "evict_last"),
)
_LOADS = ("tl.load", "triton.language.load")
_WHY = {
    "streamed": "loads whose address derives from the program id (each program's own slice, read once)",
    "shared": "loads whose address does not derive from the program id (data every program reads)",
}


def _loads(source: str, technique: str) -> dict[str, list[ast.Call]]:
    """Every ``tl.load`` of the module's kernels, by class ("streamed", "shared")."""
    refuse_gemm_regions(source, technique)
    tree = tree_of(source, technique)
    out: dict[str, list[ast.Call]] = {}
    for kernel in kernels(tree).values():
        per_program = pid_derived(kernel.node)
        for call in (c for c in ast.walk(kernel.node) if isinstance(c, ast.Call) and dotted(c.func) in _LOADS):
            if len(call.args) > 5 or any(k.arg is None for k in call.keywords):
                raise NotApplicable(f"{technique}: a load passes its hints by position or with **")
            pointer = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "pointer"), None)
            names = {n.id for n in ast.walk(pointer) if isinstance(n, ast.Name)} if pointer is not None else set()
            out.setdefault("streamed" if names & per_program else "shared", []).append(call)
    if not out:
        raise NotApplicable(f"{technique}: no tl.load in a @triton.jit kernel")
    return out


def _state(call: ast.Call) -> str:
    """A load's hints as a form names them: "evict_first", "evict_last", "cg", "none", "other"."""
    hints = {k.arg: k.value for k in call.keywords if k.arg in ("eviction_policy", "cache_modifier")}
    values = {k: v.value if isinstance(v, ast.Constant) else None for k, v in hints.items()}
    policy, modifier = values.get("eviction_policy", ""), values.get("cache_modifier", "")
    if not policy and not modifier:
        return "none"
    if policy in ("evict_first", "evict_last") and not modifier:
        return str(policy)
    return "cg" if modifier == ".cg" and not policy else "other"


class CacheHints(SyntaxTechnique):
    name = "cache_hints"
    title = "Cache and eviction hints on a kernel's loads (per class of load)"
    category = "memory"
    prose = (
        "tl.load takes an eviction_policy (evict_first: the line is not read again, let it go "
        "first; evict_last: keep it) and a cache_modifier (.cg: cache in L2 only, not in L1). "
        "They change no result, only what the caches keep: a stream each program reads once "
        "(its own slice) can push out of L2 data every program reads again (a bias, a table, a "
        "neighbour's halo). Marking the stream evict_first and the shared data evict_last keeps "
        "the reused lines resident. It pays only where the working set competes for L2; on a "
        "kernel that reads everything once the hints are neutral, and evict_first on data that "
        "is in fact re-read (overlapping stencil neighbours) costs hits."
    )
    prior_min, prior_max = -0.05, 0.1
    novelty = 0.3

    def detect(self, source: str) -> dict[str, Param] | None:
        out: dict[str, Param] = {}
        for kind, loads in _loads(source, self.name).items():
            states = {_state(c) for c in loads}
            out[kind] = states.pop() if len(states) == 1 else "mixed"
        return out

    def forms(self, source: str) -> list[Form]:
        present = _loads(source, self.name)
        return [
            Form(
                {kind: hint},
                f"{hint} on {kind} loads" if hint != "none" else f"no hints on {kind} loads",
                [f"{_HINTS[hint] or 'no eviction_policy or cache_modifier'} on the {_WHY[kind]}"],
            )
            for kind, hint in _CHOICES
            if kind in present
        ]

    def apply(self, source: str, params: dict[str, Param], reference: str | None = None) -> str:
        present = _loads(source, self.name)
        if len(params) != 1:
            raise NotApplicable(f"{self.name}: one class of load per form, not {sorted(params)}")
        kind = next(iter(params))
        if kind not in _WHY:
            raise NotApplicable(f"{self.name}: no class of load {kind!r} (classes: {', '.join(_WHY)})")
        hint = self._param(params, kind, tuple(_HINTS))
        if kind not in present:
            raise NotApplicable(f"{self.name}: the kernels have no {_WHY[kind]}")
        edits = []
        for call in present[kind]:
            parts = [segment(source, a) for a in call.args]
            parts += [segment(source, k) for k in call.keywords if k.arg not in ("eviction_policy", "cache_modifier")]
            parts += [_HINTS[hint]] if _HINTS[hint] else []
            edits.append(replace(call, f"{segment(source, call.func)}({', '.join(parts)})"))
        out = apply_edits(source, edits)
        tree_of(out, self.name)
        return out
