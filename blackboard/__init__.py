"""The shared SQLite blackboard and its records (the bottom layer: imports nothing of ours)."""

from . import metrics, records
from ._db import SCHEMA_VERSION, BlackboardError, inspect
from ._store import TOPICS, Blackboard, TransitionError, open_existing, source_hash
from .config import Scenario, ScenarioError, load_scenario, retune, scenario_from_json, scenario_json
from .queries import seed_evaluation, seed_kernel, seed_score
from .records import *  # noqa: F403  (the records' public names: records.__all__)

__all__ = [
    "SCHEMA_VERSION",
    "TOPICS",
    "Blackboard",
    "BlackboardError",
    "Scenario",
    "ScenarioError",
    "TransitionError",
    "inspect",
    "load_scenario",
    "metrics",
    "open_existing",
    "retune",
    "scenario_from_json",
    "scenario_json",
    "seed_evaluation",
    "seed_kernel",
    "seed_score",
    "source_hash",
    *records.__all__,
]
