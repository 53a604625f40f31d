"""``run --learn-from DB ...``: start a campaign with what the user's earlier campaigns measured.

Each earlier blackboard contributes its measured trials (technique, variant, observed uplift on its
base) as findings of scope ``learned`` in the new blackboard, every one naming where it came from
(file, campaign, task, device, simulated or measured). The theorist counts them as earlier trials,
so the catalogue's literature priors are pulled towards what this user's hardware showed before the
first evaluation. Nothing is copied into the source: what a campaign learns stays in the user's data.
"""

from __future__ import annotations

from pathlib import Path

import msgspec

from kernel_scientist.blackboard import LEARNED, Blackboard, BlackboardError, metrics, open_existing


class Lesson(msgspec.Struct, frozen=True):
    technique: str
    label: str
    uplift: float  # observed fractional speed-up over its base kernel
    origin: str  # provenance: file, campaign, task, device, simulated or measured


def read_lessons(path: Path) -> list[Lesson]:
    """The measured trials of one earlier blackboard (read only); BlackboardError if it is none."""
    with open_existing(path) as board:
        campaign = board.campaign()
        evaluations = board.evaluations()
        device = evaluations[0].report.provenance.device if evaluations else campaign.backend
        kind = "simulated" if campaign.simulated else "measured"
        origin = (
            f"{path.name} (campaign '{campaign.name}' seed {campaign.seed}, {campaign.task}, "
            f"{kind} on {device}, {len(evaluations)} evaluations)"
        )
        return [
            Lesson(technique=h.technique, label=h.label, uplift=round(h.observed_uplift, 5), origin=origin)
            for h in board.hypotheses()
            if h.observed_uplift is not None
        ]


def read_all(paths: list[Path]) -> list[Lesson]:
    lessons: list[Lesson] = []
    for path in paths:
        found = read_lessons(path)
        if not found:
            raise BlackboardError(f"{path}: holds no measured trial to learn from (no evaluated hypothesis)")
        lessons.extend(found)
    return lessons


def record(board: Blackboard, lessons: list[Lesson], at: float) -> None:
    """Write the lessons as findings and say in the conversation what was learned from where."""
    for lesson in lessons:
        board.add_finding(
            technique=lesson.technique,
            scope=LEARNED,
            uplift=lesson.uplift,
            evidence=[],
            text=f"learned from {lesson.origin}: {lesson.technique} [{lesson.label}] {metrics.uplift_text(lesson.uplift)}",
            at=at,
        )
    origins = sorted({lesson.origin for lesson in lessons})
    if origins:
        board.say(
            agent="runner",
            kind="info",
            at=at,
            text=f"learned {len(lessons)} measured trials from " + "; ".join(origins),
        )
