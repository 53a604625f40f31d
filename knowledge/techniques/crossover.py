"""Crossover: carry what a reference kernel does differently over to the base kernel.

Rather than pasting regions (which breaks when the two kernels' other parts disagree), crossover
re-applies the reference's techniques, as detected in its source, to the base. Plain tunables that
both kernels have are copied in one variant. A reference without our region markers still offers
its module-level constants.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from kernel_scientist.blackboard.records import Param
from kernel_scientist.knowledge._base import Technique, Variant
from kernel_scientist.knowledge._regions import NotApplicable, read_tunables, set_constant


class Crossover(Technique):
    name = "crossover"
    title = "Crossover with a reference kernel"
    category = "crossover"
    prose = (
        "Evolutionary code search (FunSearch, AlphaEvolve, OpenEvolve, ShinkaEvolve) recombines "
        "two good programs: here, the base kernel adopts one technique, or the tunables, that a "
        "second strong kernel uses and it lacks. Improvements that are independent (a split-K "
        "found on small shapes, a tile shape found on large ones) combine without a new search. "
        "Crossover fails when the two changes interact (split-K with a tile chosen for many "
        "tiles) and adds nothing when the kernels differ only in noise."
    )
    prior_min, prior_max = 0.0, 0.3
    novelty = 0.3

    def __init__(self, peers: Callable[[], Iterable[Technique]] = tuple) -> None:
        """``peers`` lists the techniques a reference's differences are looked for with: the
        registry hands in its own catalogue (this module cannot import the registry that imports it)."""
        self._peers = peers

    def detect(self, source: str) -> dict[str, Param] | None:
        return None  # crossover leaves no trace of its own

    def _differences(self, source: str, reference: str) -> list[tuple[Technique, dict[str, Param]]]:
        found = []
        for other in self._peers():
            try:
                theirs = other.detect(reference)
                ours = other.detect(source)
            except NotApplicable:
                continue
            if theirs is not None and theirs != ours:
                found.append((other, theirs))
        return found

    def _tunable_changes(self, source: str, reference: str) -> dict[str, int]:
        ours, theirs = read_tunables(source), read_tunables(reference)
        return {name: value for name, value in theirs.items() if name in ours and ours[name] != value}

    def variants(self, source: str, reference: str | None = None) -> list[Variant]:
        if reference is None:
            return []
        found = []
        changes = self._tunable_changes(source, reference)
        if changes:
            label = ", ".join(f"{name}={value}" for name, value in changes.items())
            found.append(
                self._variant({"adopt": "tunables"}, f"adopt tunables {label}", [f"set {label} from the reference"])
            )
        for other, params in self._differences(source, reference):
            label = ", ".join(f"{key}={value}" for key, value in params.items())
            found.append(
                self._variant(
                    {"adopt": other.name},
                    f"adopt {other.name} ({label})",
                    [f"apply {other.name} with {label}, as in the reference"],
                )
            )
        return found[:6]

    def apply(self, source: str, params: dict[str, Param], reference: str | None = None) -> str:
        if reference is None:
            raise NotApplicable("crossover needs a reference kernel")
        adopt = params.get("adopt")
        if adopt == "tunables":
            changes = self._tunable_changes(source, reference)
            if not changes:
                raise NotApplicable("crossover: no shared tunable differs from the reference")
            for name, value in changes.items():
                source = set_constant(source, name, value)
            return source
        for other, theirs in self._differences(source, reference):
            if other.name == adopt:
                return other.rewrite(source, theirs)
        raise NotApplicable(f"crossover: the reference does not differ from the base in {adopt!r}")
