"""Offline knowledge: executable GEMM optimisation techniques and literature digests.

Layering: knowledge imports nothing else of ours (it sits beside the evaluator, under the agents).
Each technique rewrites a submission's comment-delimited regions; see ``_regions``.
"""

from ._base import Category, NotApplicable, Technique, Variant
from ._docs import Document, documents
from ._regions import read_tunables
from ._retrieval import Passage, retrieve
from .techniques import catalogue, technique

__all__ = [
    "Category",
    "Document",
    "NotApplicable",
    "Passage",
    "Technique",
    "Variant",
    "catalogue",
    "documents",
    "read_tunables",
    "retrieve",
    "technique",
]
