"""The technique catalogue, in a fixed order (tunables first, then structure, then crossover)."""

from __future__ import annotations

from .._base import Technique
from .amd_knobs import AmdKnobs
from .compound import Compound
from .crossover import Crossover
from .dispatch import ShapeDispatch
from .hopper import ConversionPrepass, TensorDescriptors, WarpSpecialize
from .layout import LayoutPrepass
from .order import GroupedOrder, Persistent, XcdRemap
from .precision import AccumulationPrecision
from .split_k import SplitK
from .tunables import Stages, TileShape, Warps
from .tuning import InSubmissionTuning, LeanHost

_CLASSES = (
    TileShape,
    Warps,
    Stages,
    GroupedOrder,
    SplitK,
    LayoutPrepass,
    AccumulationPrecision,
    ConversionPrepass,
    TensorDescriptors,
    Persistent,
    WarpSpecialize,
    AmdKnobs,
    XcdRemap,
    ShapeDispatch,
    InSubmissionTuning,
    LeanHost,
    Crossover,
)
_SINGLE: tuple[Technique, ...] = tuple(cls() for cls in _CLASSES)
_INSTANCES: tuple[Technique, ...] = _SINGLE + (Compound(list(_SINGLE)),)


def catalogue(vendor: str | None = None) -> list[Technique]:
    """Every technique; with a vendor ("amd" or "nvidia"), those that can change anything on its
    GPUs, each in its form for that vendor's hardware (an experiment that cannot move the number
    is waste), and compounds made of those alone."""
    if vendor is None:
        return list(_INSTANCES)
    singles = [item.for_vendor(vendor) for item in _SINGLE if vendor in item.vendors]
    return singles + [Compound(singles)]


def catalogue_without_crossover() -> list[Technique]:
    return [item for item in _INSTANCES if item.category != "crossover"]


def technique(name: str) -> Technique:
    for item in _INSTANCES:
        if item.name == name:
            return item
    known = ", ".join(item.name for item in _INSTANCES)
    raise KeyError(f"no technique named {name!r}; known techniques: {known}")
