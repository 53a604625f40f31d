"""Offline knowledge: executable GEMM optimisation techniques and literature digests.

Layering: knowledge imports nothing else of ours (it sits beside the evaluator, under the agents).
Each technique rewrites a submission's comment-delimited regions; see ``_regions``.
"""

from kernel_scientist.knowledge._base import Category, Technique, Variant
from kernel_scientist.knowledge._docs import Document, documents
from kernel_scientist.knowledge._regions import NotApplicable, read_tunables
from kernel_scientist.knowledge._retrieval import Passage, retrieve
from kernel_scientist.knowledge.techniques import catalogue, technique

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
