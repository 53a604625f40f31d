"""The five agents, the brain protocol and the offline brain.

The folder keeps the design's name ``agents``; how it is installed so that it cannot collide
with another distribution's ``agents`` package is in docs/decisions.md ("Package layout").
"""

from ._base import SLOTS, Agent, CampaignClock, Context
from .archivist import Archivist
from .brain import Brain, BrainError, BrainUnavailable, BudgetExhausted, CannotImplement
from .critic import Critic
from .engineer import Engineer
from .evaluator_agent import EvaluatorAgent
from .offline_brain import OfflineBrain
from .theorist import Theorist

__all__ = [
    "SLOTS", "Agent", "Archivist", "Brain", "BrainError", "BrainUnavailable", "BudgetExhausted", "CampaignClock", "CannotImplement", "Context", "Critic",
    "Engineer", "EvaluatorAgent", "OfflineBrain", "Theorist",
]
