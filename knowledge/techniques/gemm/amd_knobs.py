"""AMD-specific compiler options passed at launch, only when running on ROCm.

``waves_per_eu`` hints the occupancy the register allocator should aim for,
``matrix_instr_nonkdim`` picks 16x16 or 32x32 MFMA tiles, ``kpack`` the K packing of operands in
LDS. CUDA's Triton rejects these keywords and the interpreter has no use for them, hence the
``torch.version.hip`` guard.
"""

from __future__ import annotations

from kernel_scientist.blackboard.records import Param
from kernel_scientist.knowledge._base import Form, Technique
from kernel_scientist.knowledge._regions import (
    NotApplicable,
    body,
    has,
    insert_near,
    read_tunables,
    require,
    set_constant,
)
from kernel_scientist.knowledge.techniques.gemm._names import AMD_KNOBS

_KEYS = ("waves_per_eu", "matrix_instr_nonkdim", "kpack")
_CONSTANTS = {"waves_per_eu": "WAVES_PER_EU", "matrix_instr_nonkdim": "MATRIX_INSTR_NONKDIM", "kpack": "KPACK"}
_CHOICES = [(2, 16, 1), (2, 32, 1), (0, 16, 2), (1, 32, 1), (0, 32, 2), (3, 16, 1)]


class AmdKnobs(Technique):
    name = "amd_knobs"
    title = "AMD compiler knobs: waves_per_eu, matrix_instr_nonkdim, kpack"
    category = "tuning"
    prose = (
        "Triton's AMD backend takes three extra launch options. matrix_instr_nonkdim = 32 selects "
        "the 32x32x16 fp8 MFMA (fewer instructions, best for large tiles), 16 selects 16x16x32 "
        "(finer granularity for small tiles); the challenge winners used 32x32 for large shapes "
        "and 16x16 for small ones. waves_per_eu caps registers per wavefront to reach a target "
        "occupancy (0 lets the compiler choose), trading accumulator space for latency hiding. "
        "kpack = 2 packs K pairs in LDS for wider reads on some layouts. Gains are config-dependent "
        "and usually a few percent; a bad occupancy hint can spill registers."
    )
    prior_min, prior_max = -0.05, 0.2
    novelty = 0.35
    vendors = ("amd",)

    def detect(self, source: str) -> dict[str, Param] | None:
        require(source, "select_config", "config", why=self.name)
        if not has(source, AMD_KNOBS):
            return None
        tunables = read_tunables(source)
        return {key: tunables.get(constant, 0) for key, constant in _CONSTANTS.items()}

    def forms(self, source: str) -> list[Form]:
        out = []
        for choice in _CHOICES:
            params: dict[str, Param] = dict(zip(_KEYS, choice))
            label = ", ".join(f"{key}={value}" for key, value in params.items())
            out.append(
                Form(params, label, [f"on ROCm only, launch with {label}", "unchanged on CUDA and the CPU interpreter"])
            )
        return out

    def apply(self, source: str, params: dict[str, Param], reference: str | None = None) -> str:
        values = {
            "waves_per_eu": self._param(params, "waves_per_eu", (0, 1, 2, 3, 4)),
            "matrix_instr_nonkdim": self._param(params, "matrix_instr_nonkdim", (16, 32)),
            "kpack": self._param(params, "kpack", (1, 2)),
        }
        fresh = self.detect(source) is None
        for key, value in values.items():
            source = set_constant(source, _CONSTANTS[key], value)
        if not fresh:
            return source
        if not any(line.strip() == "return cfg" for line in body(source, "select_config")):
            raise NotApplicable(f"{self.name}: select_config must end with `return cfg`")
        return insert_near(
            source,
            "select_config",
            "return cfg",
            f"""
            # region: {AMD_KNOBS}
            if torch.version.hip:
                # ROCm-only options: CUDA's Triton rejects these keywords.
                cfg.update(waves_per_eu=WAVES_PER_EU, matrix_instr_nonkdim=MATRIX_INSTR_NONKDIM, kpack=KPACK)
            # endregion: {AMD_KNOBS}
            """,
            after=False,
        )
