"""The shared SQLite blackboard and its records (the bottom layer: imports nothing of ours)."""

from . import metrics
from ._db import SCHEMA_VERSION, BlackboardError, inspect
from ._store import TOPICS, Blackboard, TransitionError, open_existing, source_hash
from .config import Scenario, ScenarioError, load_scenario, retune, scenario_from_json, scenario_json
from .queries import seed_evaluation, seed_kernel, seed_score
from .records import (
    LEARNED, SEED_AUTHOR, Campaign, EvalReport, Evaluation, Finding, Hypothesis, HypothesisState, Kernel, KernelState,
    LLMCall, Message, Outcome, Provenance, Review, RunSegment, Selection, SelectionState, Shape, ShapeResult,
    Submission, SubmissionState, Verdict,
)

__all__ = [
    "LEARNED", "SCHEMA_VERSION", "SEED_AUTHOR", "TOPICS", "Blackboard", "BlackboardError", "Campaign", "EvalReport",
    "Evaluation", "Finding", "Hypothesis", "HypothesisState", "Kernel", "KernelState", "LLMCall", "Message",
    "Outcome", "Provenance", "Review", "RunSegment", "Scenario", "ScenarioError", "Selection", "SelectionState", "Shape",
    "ShapeResult", "Submission", "SubmissionState", "TransitionError", "Verdict", "inspect", "load_scenario", "metrics",
    "open_existing", "retune", "scenario_from_json", "scenario_json", "seed_evaluation",
    "seed_kernel", "seed_score", "source_hash",
]
