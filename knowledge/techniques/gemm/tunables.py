"""Techniques that only retune existing constants: tile shape, warps, pipeline stages.

They still go through ``set_constant`` so a kernel whose config region lacks the constant is
refused instead of silently gaining a setting nothing reads.

On a kernel that tunes itself (``in_submission_tuning``) the constants are its default setting:
what runs where nothing can be timed (the CPU pre-screen, and the launches the simulated evaluator
records and times, so the simulated score of a tuning kernel is its default's) and where no
setting of its space compiles. A retune there sets the default and adds it to the tuner's space,
so that on a GPU it is one more setting the tuner times and keeps only if it is the fastest: the
tuner's pick is then never slower than the default the simulation timed. Without this a tuning
kernel's tile, warps and stages could never change again, on a GPU (a fixed space of six settings,
most of which do not fit an MI300X's LDS with BLOCK_K 128) or in a simulated campaign, whose
lineages through a tuning compound then stalled at its default.
"""

from __future__ import annotations

from kernel_scientist.blackboard.records import Param
from kernel_scientist.knowledge._base import Form, Technique
from kernel_scientist.knowledge._regions import NotApplicable, has, read_tunables, require, set_constant
from kernel_scientist.knowledge.techniques.gemm._names import TUNING
from kernel_scientist.knowledge.techniques.gemm.tuning import add_setting

_SETTING = ("BLOCK_M", "BLOCK_N", "NUM_WARPS", "NUM_STAGES")  # a tuner's setting, in its order


def _need(source: str, *names: str, why: str) -> dict[str, int]:
    """The config region's constants, refused where one of ``names`` is missing (or, on a kernel
    that tunes itself, one of its default setting's)."""
    require(source, "config", why=why)
    tunables = read_tunables(source)
    wanted = list(names) + ([n for n in _SETTING if n not in names] if has(source, TUNING) else [])
    missing = [name for name in wanted if name not in tunables]
    if missing:
        raise NotApplicable(f"{why}: the config region has no {', '.join(missing)}")
    return tunables


def _retune(source: str, values: dict[str, int], why: str) -> str:
    """``source`` with the config constants set; on a kernel that tunes itself, the new default
    setting added to the tuner's space (module docstring)."""
    for name, value in values.items():
        source = set_constant(source, name, value)
    if not has(source, TUNING):
        return source
    tunables = read_tunables(source)
    block_m, block_n, warps, stages = (tunables[name] for name in _SETTING)
    return add_setting(source, (block_m, block_n, warps, stages), why)


class TileShape(Technique):
    name = "tile_shape"
    title = "Output tile shape (BLOCK_M x BLOCK_N)"
    category = "tiling"
    prose = (
        "The output tile sets the arithmetic intensity of each program: a BM x BN tile reads "
        "(BM + BN) * BK bytes of fp8 per BM * BN * BK multiply-adds, so larger tiles cut global and "
        "LDS traffic per FLOP. On MI300X, 256x256 or 256x128 tiles with 32x32x16 fp8 MFMA were used "
        "by the fastest challenge entries for the large shapes. Large tiles lose when the grid has "
        "too few tiles to occupy 304 CUs (m = 1024 with n = 512..1536) or when the fp32 accumulator "
        "spills registers (a 256x256 tile needs 256 KB of accumulators per workgroup). Small m (the "
        "64/96/128-row tests) wastes most of a tall tile."
    )
    prior_min, prior_max = 0.05, 0.6
    novelty = 0.1

    _CANDIDATES = [(128, 128), (64, 128), (128, 64), (256, 128), (128, 256), (32, 64), (256, 256), (64, 64)]
    _SIZES = (32, 64, 128, 256)

    def detect(self, source: str) -> dict[str, Param] | None:
        tunables = _need(source, "BLOCK_M", "BLOCK_N", why=self.name)
        return {"BLOCK_M": tunables["BLOCK_M"], "BLOCK_N": tunables["BLOCK_N"]}

    def forms(self, source: str) -> list[Form]:
        return [
            Form(
                {"BLOCK_M": bm, "BLOCK_N": bn},
                f"BLOCK_M={bm}, BLOCK_N={bn}",
                [f"set BLOCK_M = {bm} and BLOCK_N = {bn} in the config region"],
            )
            for bm, bn in self._CANDIDATES
        ]

    def apply(self, source: str, params: dict[str, Param], reference: str | None = None) -> str:
        self.detect(source)
        values = {key: self._param(params, key, self._SIZES) for key in ("BLOCK_M", "BLOCK_N")}
        return _retune(source, values, self.name)


class _LaunchOption(Technique):
    """One integer launch option held in one config constant."""

    constant: str
    key: str
    choices: tuple[int, ...]

    def detect(self, source: str) -> dict[str, Param] | None:
        return {self.key: _need(source, self.constant, why=self.name)[self.constant]}

    def forms(self, source: str) -> list[Form]:
        return [
            Form({self.key: value}, f"{self.key}={value}", [f"set {self.constant} = {value} in the config region"])
            for value in self.choices
        ]

    def apply(self, source: str, params: dict[str, Param], reference: str | None = None) -> str:
        self.detect(source)
        return _retune(source, {self.constant: self._param(params, self.key, self.choices)}, self.name)


class Warps(_LaunchOption):
    name = "num_warps"
    title = "Warps (wavefronts) per program"
    category = "parallelism"
    prose = (
        "num_warps sets how many wavefronts (64 lanes each on MI300X) share one tile. More "
        "wavefronts split the tile's MFMA work and hide load latency, but each owns fewer "
        "accumulator registers only if the tile is large enough; with 64x64 tiles, 8 wavefronts "
        "leave each one too little work. A CU runs at most 32 wavefronts (2048 lanes), so "
        "waves_per_eu and num_warps together set occupancy. Typical MI300X GEMM configs use 4 "
        "warps for 128x128 and 8 for 256x256 tiles."
    )
    prior_min, prior_max = -0.1, 0.15
    novelty = 0.05
    constant, key, choices = "NUM_WARPS", "num_warps", (4, 8, 2)


class Stages(_LaunchOption):
    name = "num_stages"
    title = "Software pipeline depth (num_stages)"
    category = "schedule"
    prose = (
        "num_stages is how many K steps of operand tiles Triton keeps in flight, so that global "
        "loads for the next steps overlap the matrix instructions of the current one. On MI300X "
        "Triton's stream pipeliner works best with 2 (one tile in LDS, one in flight); deeper "
        "pipelines need more LDS (64 KB per CU) and lower occupancy. K = 256 shapes have only two "
        "scale blocks, so pipelining barely matters there; k = 7168 shapes (56 steps) benefit most."
    )
    prior_min, prior_max = -0.1, 0.2
    novelty = 0.1
    constant, key, choices = "NUM_STAGES", "num_stages", (1, 2, 3, 4)
