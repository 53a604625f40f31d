"""The technique catalogue, in a fixed order (tunables first, then structure, then crossover).

The techniques are grouped by what they rewrite: ``gemm/`` the matrix-product seed's regions (one
module per family; ``gemm/_names`` spells the regions one technique adds and others look for),
``any_kernel/`` any Triton kernel by its syntax (``any_kernel/_syntax`` reads kernels, launches and
the constants behind them), ``host/`` the host path of a call (any kernel's launches, or the GEMM
seed's replayed). ``compound`` applies two or three of them as one experiment and ``crossover``
carries a reference kernel's techniques over; both use the other techniques through the
``Technique`` interface only.

A GEMM task's catalogue holds the GEMM techniques and the any-kernel techniques that apply to a
matrix product too (``kernels`` names both): a user's own GEMM kernel has none of the seed's
regions, and the any-kernel techniques refuse a kernel that has them, so on the seed and its
descendants the GEMM techniques alone act.
"""

from __future__ import annotations

from kernel_scientist.knowledge._base import Technique
from kernel_scientist.knowledge.techniques.any_kernel.cache_hints import CacheHints
from kernel_scientist.knowledge.techniques.any_kernel.fallback import DropFallback
from kernel_scientist.knowledge.techniques.any_kernel.fusion import FuseLaunches
from kernel_scientist.knowledge.techniques.any_kernel.launch import BlockSize, LaunchStages, LaunchWarps
from kernel_scientist.knowledge.techniques.any_kernel.library_mm import LibraryMatmul
from kernel_scientist.knowledge.techniques.any_kernel.reduce import SplitReduction
from kernel_scientist.knowledge.techniques.any_kernel.rows import RowsPerProgram
from kernel_scientist.knowledge.techniques.any_kernel.scan import BlockScan
from kernel_scientist.knowledge.techniques.any_kernel.tuning import PerShapeTuning
from kernel_scientist.knowledge.techniques.any_kernel.vector import ElementsPerThread
from kernel_scientist.knowledge.techniques.compound import Compound
from kernel_scientist.knowledge.techniques.crossover import Crossover
from kernel_scientist.knowledge.techniques.gemm.amd_knobs import AmdKnobs
from kernel_scientist.knowledge.techniques.gemm.dependent_launch import DependentLaunch
from kernel_scientist.knowledge.techniques.gemm.dispatch import ShapeDispatch
from kernel_scientist.knowledge.techniques.gemm.hopper import PerShapeWarpSpecialize, TensorDescriptors, WarpSpecialize
from kernel_scientist.knowledge.techniques.gemm.layout import LayoutPrepass
from kernel_scientist.knowledge.techniques.gemm.operand_per_shape import OperandPerShape
from kernel_scientist.knowledge.techniques.gemm.order import GroupedOrder, Persistent, XcdRemap
from kernel_scientist.knowledge.techniques.gemm.precision import AccumulationPrecision
from kernel_scientist.knowledge.techniques.gemm.prepass import ConversionPrepass
from kernel_scientist.knowledge.techniques.gemm.scale_fold import ScaleFold
from kernel_scientist.knowledge.techniques.gemm.split_k import SplitK
from kernel_scientist.knowledge.techniques.gemm.stream_k import StreamK
from kernel_scientist.knowledge.techniques.gemm.tunables import Stages, TileShape, Warps
from kernel_scientist.knowledge.techniques.gemm.tuning import InSubmissionTuning, LeanHost
from kernel_scientist.knowledge.techniques.host.direct import DirectLaunch
from kernel_scientist.knowledge.techniques.host.replay import LaunchReplay

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
    StreamK,
    PerShapeWarpSpecialize,
    OperandPerShape,
    ScaleFold,
    AmdKnobs,
    XcdRemap,
    ShapeDispatch,
    InSubmissionTuning,
    LeanHost,
    LaunchReplay,
    DependentLaunch,
    Crossover,
    BlockSize,
    LaunchWarps,
    LaunchStages,
    ElementsPerThread,
    PerShapeTuning,
    CacheHints,
    RowsPerProgram,
    DropFallback,
    FuseLaunches,
    BlockScan,
    SplitReduction,
    LibraryMatmul,
    DirectLaunch,
)
# Plain retuning of one constant is tried alone (as compound's own list says for the GEMM tunables).
_NOT_IN_COMPOUNDS = {"block_size", "launch_warps", "launch_stages"}
# Crossover looks for the reference's techniques among the others: the catalogue is handed to it.
_SINGLE: tuple[Technique, ...] = tuple(
    cls(lambda: catalogue_without_crossover()) if cls is Crossover else cls() for cls in _CLASSES
)
_GEMM_COMPOUND = Compound([item for item in _SINGLE if "gemm" in item.kernels and item.name not in _NOT_IN_COMPOUNDS])
_INSTANCES: tuple[Technique, ...] = _SINGLE + (_GEMM_COMPOUND,)


def catalogue(vendor: str | None = None, kernels: str = "gemm") -> list[Technique]:
    """The techniques for one kind of task's kernels ("gemm" or "any", see ``Technique.kernels``);
    with a vendor ("amd" or "nvidia"), those that can change anything on its GPUs, each in its
    form for that vendor's hardware (an experiment that cannot move the number is waste), and
    compounds made of those alone (GEMM tasks only: there the structural steps compose)."""
    singles = [item for item in _SINGLE if kernels in item.kernels]
    if vendor is None:
        return singles + ([_GEMM_COMPOUND] if kernels == "gemm" else [])
    singles = [item.for_vendor(vendor) for item in singles if vendor in item.vendors]
    parts = [item for item in singles if item.name not in _NOT_IN_COMPOUNDS]
    return singles + ([Compound(parts)] if kernels == "gemm" else [])


def catalogue_without_crossover() -> list[Technique]:
    return [item for item in catalogue() if item.category != "crossover"]


def technique(name: str) -> Technique:
    for item in _INSTANCES:
        if item.name == name:
            return item
    known = ", ".join(item.name for item in _INSTANCES)
    raise KeyError(f"no technique named {name!r}; known techniques: {known}")
