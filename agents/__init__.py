"""The five agents, the brain protocol and the offline brain.

Installed as ``kernel_scientist.agents`` (the folder keeps the design's name): another SDK's import
name is ``agents``, and both install side by side (docs/decisions.md, "Package layout").
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
    "SLOTS",
    "Agent",
    "Archivist",
    "Brain",
    "BrainError",
    "BrainUnavailable",
    "BudgetExhausted",
    "CampaignClock",
    "CannotImplement",
    "Context",
    "Critic",
    "Engineer",
    "EvaluatorAgent",
    "OfflineBrain",
    "Theorist",
]
