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
from kernel_scientist.blackboard.config import ChooseBy

from ..brain import Choice, Critique, Design, DesignView, Draft, Params, Plan, SelectionView
from ._hygiene import clean, shorten

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
    # None: the model did not say; the plan uses the reference where its text names it.
    uses_reference: bool | None = None
    expected_value: Annotated[float, msgspec.Meta(ge=-1.0, le=10.0)] | None = None  # llm.choose_by
    why: str = ""  # the reason for its expected value


class ChosenAnswer(_Wire, frozen=True):
    plan: int
    why: str


class DesignAnswer(_Wire, frozen=True):
    avenues: list[str]
    plans: list[PlanAnswer]
    chosen: list[ChosenAnswer] = []  # the paper's rule; by expected value the program chooses


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
    return Choice(base_id=answer.base_id, reference_id=answer.reference_id, reason=shorten(clean(answer.reason), 500))


def design(text: str, view: DesignView, choose_by: ChooseBy = "expected_value") -> Design:
    """The designer's answer. By expected value every plan carries one with its reason, and the
    program runs the ``view.choose`` highest, best first; by the paper's rule the model's
    ``chosen`` list says which run."""
    answer = _json(text, DesignAnswer)
    plans = answer.plans[: view.plans]
    for i, p in enumerate(plans):
        if p.min_uplift > p.max_uplift:
            raise AnswerInvalid(f"plans[{i}]: min_uplift {p.min_uplift} is above max_uplift {p.max_uplift}")
    chosen: list[int] = []
    why: list[str] = []
    if choose_by == "expected_value":
        values: list[float] = []
        for i, p in enumerate(plans):
            if p.expected_value is None:
                raise AnswerInvalid(f"plans[{i}]: no expected_value: give every plan one, with its why")
            values.append(p.expected_value)
        order = sorted(range(len(plans)), key=lambda i: (-values[i], i))
        chosen = order[: view.choose]
        why = [
            f"expected value {values[i]:+.3f}, {rank} of {len(plans)}"
            + (f": {shorten(clean(plans[i].why), 300)}" if plans[i].why.strip() else "")
            for rank, i in enumerate(chosen, 1)
        ]
    else:
        for c in answer.chosen:
            if not 0 <= c.plan < len(plans):
                raise AnswerInvalid(f"chosen plan {c.plan} is not an index into plans (0..{len(plans) - 1})")
            if c.plan not in chosen and len(chosen) < view.choose:
                chosen.append(c.plan)
                why.append(shorten(clean(c.why), 300))
        if plans and not chosen:
            raise AnswerInvalid("no plan was chosen")
    return Design(
        avenues=[shorten(clean(a), 300) for a in answer.avenues],
        plans=[
            Plan(
                technique=shorten(clean(p.technique), 60),
                params=dict(p.params),
                label=shorten(clean(p.label), 120),
                plan=shorten(clean(p.plan), 1500),
                changes=[shorten(clean(c), 300) for c in p.changes],
                min_uplift=p.min_uplift,
                max_uplift=p.max_uplift,
                innovation=p.innovation,
                uses_reference=view.reference is not None and _uses_reference(p),
            )
            for p in plans
        ],
        chosen=chosen,
        why=why,
    )


def _uses_reference(plan: PlanAnswer) -> bool:
    """What the model said, or else whether the plan's text names the reference."""
    if plan.uses_reference is not None:
        return plan.uses_reference
    return "reference" in " ".join([plan.plan, *plan.changes]).lower()


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
    return Draft(source=source, summary=shorten(clean(summary), 300) or "LLM rewrite", deviations=_deviations(text))


_DEVIATIONS = re.compile(r"^DEVIATIONS:[ \t]*(.*?)(?=^`{3,}|^SUMMARY:|\Z)", re.S | re.M | re.I)
_NONE = {"", "none", "none.", "no", "-", "n/a", "nothing"}


def _deviations(text: str) -> str:
    """The writer's DEVIATIONS, up to its code block ("" for none or when it gave none)."""
    match = _DEVIATIONS.search(text)
    said = " ".join(clean(match.group(1)).split()) if match else ""
    return "" if said.lower() in _NONE else shorten(said, 1000)


def critique(text: str) -> Critique:
    answer = _json(text, ReviewAnswer)
    return Critique(
        approve=answer.approve,
        reasons=[shorten(clean(r), 300) for r in answer.reasons],
        expected_value=answer.expected_value,
    )
