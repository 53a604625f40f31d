"""What a model must answer, as msgspec Structs, and the conversion to the brain's answer Structs.

Decoding is validation (msgspec reports the path of a wrong field); the checks msgspec cannot make
(an id that is not a candidate, an index out of range, min above max, a file that does not parse)
follow. Any failure raises ``AnswerInvalid`` whose message is fed back to the model in its one
repair turn.
"""

from __future__ import annotations

import re
from typing import Annotated, TypeVar

import msgspec

from ..brain import Choice, Critique, Design, DesignView, Draft, Params, Plan, SelectionView
from ._hygiene import clean

Fraction = Annotated[float, msgspec.Meta(ge=-1.0, le=10.0)]


class AnswerInvalid(Exception):
    """A model answer that cannot be used; the message says why, for the repair turn."""


class _Wire(msgspec.Struct, frozen=True, forbid_unknown_fields=False):
    pass


class SelectAnswer(_Wire, frozen=True):
    base_id: int
    reason: str
    reference_id: int | None = None


class PlanAnswer(_Wire, frozen=True):
    label: str
    plan: str
    changes: list[str]
    min_uplift: Fraction
    max_uplift: Fraction
    innovation: Annotated[float, msgspec.Meta(ge=0.0, le=1.0)]
    technique: str = "llm"
    params: Params = {}


class ChosenAnswer(_Wire, frozen=True):
    plan: int
    why: str


class DesignAnswer(_Wire, frozen=True):
    avenues: list[str]
    plans: list[PlanAnswer]
    chosen: list[ChosenAnswer]


class ReviewAnswer(_Wire, frozen=True):
    approve: bool
    reasons: list[str]
    expected_value: Annotated[float, msgspec.Meta(ge=-10.0, le=10.0)]


_JSON_FENCE = re.compile(r"```(?:json)?\s*\n(.*?)\n\s*```", re.S)
W = TypeVar("W", bound=_Wire)


def _json(text: str, cls: type[W]) -> W:
    match = _JSON_FENCE.search(text)
    body = match.group(1) if match else text[text.find("{") : text.rfind("}") + 1]
    if not body.strip():
        raise AnswerInvalid("no JSON object found in the answer")
    try:
        return msgspec.json.decode(body.encode(), type=cls)
    except msgspec.ValidationError as exc:
        raise AnswerInvalid(f"the JSON does not match the requested fields: {exc}") from None
    except msgspec.DecodeError as exc:
        raise AnswerInvalid(f"not valid JSON: {exc}") from None


def choice(text: str, view: SelectionView) -> Choice:
    answer = _json(text, SelectAnswer)
    ids = {k.id for k in view.kernels}
    if answer.base_id not in ids:
        raise AnswerInvalid(f"base_id {answer.base_id} is not a candidate id ({sorted(ids)})")
    if answer.reference_id is not None and (answer.reference_id not in ids or answer.reference_id == answer.base_id):
        raise AnswerInvalid(f"reference_id {answer.reference_id} must be another candidate id or null")
    return Choice(base_id=answer.base_id, reference_id=answer.reference_id, reason=clean(answer.reason)[:500])


def design(text: str, view: DesignView) -> Design:
    answer = _json(text, DesignAnswer)
    plans = answer.plans[: view.plans]
    for i, p in enumerate(plans):
        if p.min_uplift > p.max_uplift:
            raise AnswerInvalid(f"plans[{i}]: min_uplift {p.min_uplift} is above max_uplift {p.max_uplift}")
    chosen: list[int] = []
    why: list[str] = []
    for c in answer.chosen:
        if not 0 <= c.plan < len(plans):
            raise AnswerInvalid(f"chosen plan {c.plan} is not an index into plans (0..{len(plans) - 1})")
        if c.plan not in chosen and len(chosen) < view.choose:
            chosen.append(c.plan)
            why.append(clean(c.why)[:300])
    if plans and not chosen:
        raise AnswerInvalid("no plan was chosen")
    return Design(
        avenues=[clean(a)[:300] for a in answer.avenues],
        plans=[
            Plan(
                technique=clean(p.technique)[:60],
                params=dict(p.params),
                label=clean(p.label)[:120],
                plan=clean(p.plan)[:1500],
                changes=[clean(c)[:300] for c in p.changes],
                min_uplift=p.min_uplift,
                max_uplift=p.max_uplift,
                innovation=p.innovation,
            )
            for p in plans
        ],
        chosen=chosen,
        why=why,
    )


_PY_FENCE = re.compile(r"(`{3,})(?:python|py)?[ \t]*\n(.*?)\n\1", re.S)


def draft(text: str, entry_point: str = "custom_kernel") -> Draft:
    """The writer's answer: a SUMMARY line and one fenced complete submission file."""
    blocks = _PY_FENCE.findall(text)
    if not blocks:
        raise AnswerInvalid("no fenced ```python block with the complete submission file")
    source = clean(max((b for _, b in blocks), key=len)).strip("\n") + "\n"
    try:
        compile(source, "submission.py", "exec")
    except SyntaxError as exc:
        raise AnswerInvalid(f"the file does not parse: line {exc.lineno}: {exc.msg}") from None
    if f"def {entry_point}" not in source:
        raise AnswerInvalid(f"the file defines no {entry_point}(): it must keep the submission interface")
    summary = next((ln.split(":", 1)[1].strip() for ln in text.splitlines() if ln.upper().startswith("SUMMARY:")), "")
    return Draft(source=source, summary=clean(summary)[:300] or "LLM rewrite")


def critique(text: str) -> Critique:
    answer = _json(text, ReviewAnswer)
    return Critique(
        approve=answer.approve, reasons=[clean(r)[:300] for r in answer.reasons], expected_value=answer.expected_value
    )
