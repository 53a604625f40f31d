"""Offline knowledge: executable kernel optimisation techniques and literature digests.

Layering: knowledge sits beside the evaluator, under the agents; of ours it imports only the
blackboard's records (a technique's parameter values are ``records.Param``). ``techniques`` holds
the catalogue (``catalogue``, ``technique``); ``_base`` the interface every technique implements;
``_regions`` the editing of a submission's comment-delimited regions that the GEMM techniques
rewrite; ``_twin`` where stream_k's copy of the GEMM kernel is, which every rewrite keeps in step;
``_docs`` and ``_retrieval`` the digests in ``docs/`` (each tagged with the task kinds it serves)
and the passages a prompt quotes from them.
"""

from kernel_scientist.knowledge._base import Category, Technique, Variant
from kernel_scientist.knowledge._docs import KINDS, Document, documents
from kernel_scientist.knowledge._regions import NotApplicable, read_tunables
from kernel_scientist.knowledge._retrieval import Passage, kind_terms, retrieve
from kernel_scientist.knowledge.techniques import catalogue, technique

__all__ = [
    "KINDS",
    "Category",
    "Document",
    "NotApplicable",
    "Passage",
    "Technique",
    "Variant",
    "catalogue",
    "documents",
    "kind_terms",
    "read_tunables",
    "retrieve",
    "technique",
]
