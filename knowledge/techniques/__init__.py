"""The technique catalogue, in a fixed order (tunables first, then structure, then crossover)."""

from __future__ import annotations

from .._base import Technique
from .amd_knobs import AmdKnobs
from .crossover import Crossover
from .dispatch import ShapeDispatch
from .launch import BlockSize, LaunchStages, LaunchWarps
from .layout import LayoutPrepass
from .measured import MeasuredPoint
from .order import GroupedOrder, Persistent, XcdRemap
from .precision import AccumulationPrecision
from .split_k import SplitK
from .tunables import Stages, TileShape, Warps

_CLASSES = (
    TileShape,
    Warps,
    Stages,
    GroupedOrder,
    SplitK,
    LayoutPrepass,
    AccumulationPrecision,
    Persistent,
    AmdKnobs,
    XcdRemap,
    ShapeDispatch,
    MeasuredPoint,
    Crossover,
    BlockSize,
    LaunchWarps,
    LaunchStages,
)
_INSTANCES: tuple[Technique, ...] = tuple(cls() for cls in _CLASSES)


def catalogue(vendor: str | None = None, kernels: str = "gemm") -> list[Technique]:
    """The techniques for one kind of task's kernels ("gemm" or "any", see ``Technique.kernels``);
    with a vendor ("amd" or "nvidia"), those that can change anything on its GPUs, each in the
    form measured there (an experiment that cannot move the number is waste)."""
    items = [item for item in _INSTANCES if kernels in item.kernels]
    if vendor is None:
        return items
    return [item.for_vendor(vendor) for item in items if vendor in item.vendors]


def catalogue_without_crossover() -> list[Technique]:
    return [item for item in catalogue() if item.category != "crossover"]


def technique(name: str) -> Technique:
    for item in _INSTANCES:
        if item.name == name:
            return item
    known = ", ".join(item.name for item in _INSTANCES)
    raise KeyError(f"no technique named {name!r}; known techniques: {known}")
