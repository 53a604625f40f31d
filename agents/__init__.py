"""The five agents, the brain protocol and the offline brain.

Note: this top-level package is named ``agents`` as the design card asks; another SDK ships a
package of the same name. Install kernel-scientist in its own environment if you use that SDK.
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
