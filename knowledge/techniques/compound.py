"""Compound plans: two or three structural techniques applied together, with one prediction.

Search by single steps stalls at points whose neighbours are all worse even though a point two or
three steps away is much better: on Hopper, a conversion pre-pass alone adds a launch and doubles
operand bytes, tensor descriptors alone change little for pointer-friendly tiles, and a persistent
loop alone only saves launches; together they give the tensor cores an asynchronous fp16 pipeline.
A compound names its steps in order (each a technique and its parameters) and applies them one
after the other; its predicted uplift combines the steps' priors multiplicatively.
"""

from __future__ import annotations

import itertools
import json

from kernel_scientist.blackboard.records import Param
from kernel_scientist.knowledge._base import Technique, Variant, same_params
from kernel_scientist.knowledge._regions import NotApplicable

MAX_STEPS = 3
# Plain retuning of one constant is cheap to try alone and is what in-submission tuning searches:
# compounds are for structure.
_SINGLE_ONLY = {"tile_shape", "num_warps", "num_stages", "crossover", "compound", "shape_dispatch"}


class Compound(Technique):
    name = "compound"
    title = "Compound plan (two or three structural techniques together)"
    category = "crossover"
    prose = (
        "An experiment made of two or three techniques applied together, predicted as one. Use it "
        "when each step alone is predicted (or was observed) not to pay, yet they remove one "
        "bottleneck only jointly: for instance a conversion pre-pass, tensor-descriptor loads and a "
        "persistent warp-specialised loop on Hopper, or split-K with smaller tiles on a GPU with "
        "more compute units than tiles. A compound that fails teaches less than single steps "
        "would (which step hurt?), so it is worth its evaluation only where single steps stalled."
    )
    prior_min, prior_max = 0.0, 0.3
    novelty = 0.6

    def __init__(self, parts: list[Technique] | None = None):
        self.parts = [p for p in (parts or []) if p.name not in _SINGLE_ONLY]
        self._by_name = {p.name: p for p in self.parts}

    def _combined(self, steps: list[tuple[Technique, dict[str, Param]]]) -> tuple[float, float]:
        lo = hi = 1.0
        for part, params in steps:
            edge = part.edge(params)
            lo *= 1 + part.prior_min + edge
            hi *= 1 + part.prior_max + edge
        return lo - 1, hi - 1

    def edge(self, params: dict[str, Param]) -> float:
        try:
            steps = self._steps(params)
        except NotApplicable:
            return 0.0
        lo, hi = self._combined(steps)
        return (lo + hi) / 2 - (self.prior_min + self.prior_max) / 2

    def _steps(self, params: dict[str, Param]) -> list[tuple[Technique, dict[str, Param]]]:
        raw = params.get("steps")
        if not isinstance(raw, str):
            raise NotApplicable(f"{self.name}: parameter 'steps' must be a JSON list of [technique, params]")
        try:
            decoded = json.loads(raw)
            steps = [(self._by_name[name], dict(p)) for name, p in decoded]
        except (ValueError, TypeError, KeyError) as exc:
            known = ", ".join(self._by_name)
            raise NotApplicable(f"{self.name}: cannot read steps {raw!r} ({exc}); known techniques: {known}") from exc
        if not 2 <= len(steps) <= MAX_STEPS:
            raise NotApplicable(f"{self.name}: a compound has 2 to {MAX_STEPS} steps, not {len(steps)}")
        return steps

    def detect(self, source: str) -> dict[str, Param] | None:
        return None  # a compound leaves the traces of its steps, none of its own

    def variants(self, source: str, reference: str | None = None, limit: int = 4) -> list[Variant]:
        firsts: list[tuple[Technique, Variant]] = []
        for part in self.parts:
            try:
                options = part.variants(source, reference)
            except NotApplicable:
                continue
            if options:
                firsts.append((part, options[0]))
        combos = [c for size in range(2, MAX_STEPS + 1) for c in itertools.combinations(firsts, size)]
        # Most promising first (combined prior centre), then check that the steps really compose.
        combos.sort(key=lambda c: -sum(self._combined([(p, v.params) for p, v in c])))
        found: list[Variant] = []
        for combo in combos:
            try:
                current = source
                for part, variant in combo:
                    after = part.rewrite(current, dict(variant.params), reference)
                    if after == current:
                        raise NotApplicable("a step changed nothing")
                    current = after
                # A later step may undo an earlier one (a pre-pass replaces the dot's precision
                # form): then the compound is really a shorter one.
                for part, variant in combo:
                    if not same_params(variant.params, part.detect(current) or {}):
                        raise NotApplicable("a later step undid an earlier one")
            except NotApplicable:
                continue
            if self._redundant(source, combo, current, reference):
                continue
            steps = json.dumps([[p.name, v.params] for p, v in combo])
            found.append(
                self._variant(
                    {"steps": steps},
                    " + ".join(v.label for _, v in combo),
                    [change for _, v in combo for change in v.changes],
                )
            )
            if len(found) == limit:
                break
        return found

    @staticmethod
    def _redundant(
        source: str, combo: tuple[tuple[Technique, Variant], ...], result: str, reference: str | None
    ) -> bool:
        """Whether the other steps of ``combo`` write ``result`` without one of them (launch replay
        installs the direct launch itself): such a compound is a shorter one, whose kernel another
        plan writes too, under a prediction that counts a step twice."""
        for skipped in range(len(combo)):
            current = source
            try:
                for part, variant in combo[:skipped] + combo[skipped + 1 :]:
                    current = part.rewrite(current, dict(variant.params), reference)
            except NotApplicable:
                continue
            if current == result:
                return True
        return False

    def apply(self, source: str, params: dict[str, Param], reference: str | None = None) -> str:
        for part, step in self._steps(params):
            source = part.rewrite(source, step, reference)
        return source
