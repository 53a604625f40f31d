"""Language-model brains: Claude (``anthropic``), local servers (``openai-compatible``), ``replay``.

Prompts live in ``prompts/*.md``; ``_prompts`` renders the brain protocol's views into them,
``_wire`` decodes answers into the protocol's Structs, ``_transport`` speaks HTTP with one retry
policy, ``_ledger`` keeps the budget, and ``_brain`` ties them together with record and replay.
"""

from ._brain import ROLES, LLMBrain, LLMService
from ._hygiene import clean, fence, truncate
from ._ledger import Ledger
from ._transport import LLMReply, LLMRequest, TransportError, Usage, classify, retry_after

__all__ = [
    "ROLES",
    "LLMBrain",
    "LLMReply",
    "LLMRequest",
    "LLMService",
    "Ledger",
    "TransportError",
    "Usage",
    "clean",
    "classify",
    "fence",
    "retry_after",
    "truncate",
]
