"""Per-shape config dispatch: choose tunables by the (m, n, k) class inside select_config.

The ranked shapes differ by two orders of magnitude in work, and no single tile or split fits
all; a dispatch block after the default dict overrides settings per class. The policies are
written as plain Python in the submission, so later techniques (and LLM edits) can read them.
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
    replace_body,
    require,
)
from kernel_scientist.knowledge.techniques.gemm._names import AMD_KNOBS
from kernel_scientist.knowledge.techniques.gemm.split_k import install as install_split_k

CUS = 304  # MI300X compute units: the number of tiles one full wave occupies

_TILES = """
# Small m (the 64..128-row tests): short tiles waste no rows; wide n tiles keep tiles big.
if m <= 128:
    cfg.update(BLOCK_M=32 if m % 64 else 64, BLOCK_N=128)
elif m >= 4096 and n >= 4096:
    cfg.update(BLOCK_M=128, BLOCK_N=128, num_warps=8)
"""

_SPLIT = f"""
# Fewer tiles than CUs and a long K: split K so about one full wave of programs runs.
tiles = triton.cdiv(m, cfg["BLOCK_M"]) * triton.cdiv(n, cfg["BLOCK_N"])
k_steps = triton.cdiv(k, cfg["BLOCK_K"])
if tiles < {CUS} and k_steps >= 4:
    cfg["SPLIT_K"] = max(1, min(8, {CUS} // tiles, k_steps // 2))
"""

_POLICIES = {
    "tiles_by_size": (_TILES, ["choose BLOCK_M/BLOCK_N (and warps) by m and n class"]),
    "split_k_few_tiles": (
        _SPLIT,
        ["install split-K (default SPLIT_K = 1)", f"use SPLIT_K > 1 only when tiles < {CUS} and K has >= 4 blocks"],
    ),
    "both": (
        _TILES + _SPLIT,
        ["choose tiles by m and n class", f"then split K when tiles < {CUS} and K has >= 4 blocks"],
    ),
}


class ShapeDispatch(Technique):
    name = "shape_dispatch"
    title = "Per-shape config dispatch"
    category = "tuning"
    prose = (
        "The score is a geometric mean over 18 shapes from 1024x512x7168 (40 tiles of 128x128, "
        "latency-bound) to 6144x7168x2048 (2688 tiles, compute-bound), so every shape counts "
        "equally and a config tuned for the big ones leaves the small ones far from their limit. "
        "Production GEMM libraries (hipBLASLt, DeepGEMM, Triton autotune tables) select a kernel "
        "config per shape class: small tiles or split-K when tiles are fewer than the 304 CUs, "
        "large tiles and more warps when the grid is many waves deep. A dispatch table cannot "
        "help if the underlying kernel is slow for all configs."
    )
    prior_min, prior_max = 0.05, 0.4
    novelty = 0.3

    def detect(self, source: str) -> dict[str, Param] | None:
        require(source, "select_config", why=self.name)
        if not has(source, "shape_dispatch"):
            return None
        for line in body(source, "shape_dispatch"):
            if line.strip().startswith("# policy: "):
                return {"policy": line.strip()[len("# policy: ") :]}
        return {"policy": "custom"}

    def forms(self, source: str) -> list[Form]:
        return [Form({"policy": policy}, f"policy={policy}", changes) for policy, (_, changes) in _POLICIES.items()]

    def apply(self, source: str, params: dict[str, Param], reference: str | None = None) -> str:
        policy = self._param(params, "policy", tuple(_POLICIES))
        return self.install(source, policy, _POLICIES[policy][0])

    def install(self, source: str, policy: str, code: str) -> str:
        """Put ``code`` (plain Python over m, n, k and cfg) into select_config as the dispatch."""
        require(source, "select_config", "config", why=self.name)
        if not any(line.strip() == "return cfg" for line in body(source, "select_config")):
            raise NotApplicable(f"{self.name}: select_config must end with `return cfg`")
        text = f"# policy: {policy}\n" + code.strip("\n")
        if "SPLIT_K" in text and "SPLIT_K" not in read_tunables(source):
            source = install_split_k(source, 1)
        if has(source, "shape_dispatch"):
            return replace_body(source, "shape_dispatch", text)
        # Before the AMD knobs (if any) so every override is in place when they are added.
        anchor = f"# region: {AMD_KNOBS}" if has(source, AMD_KNOBS) else "return cfg"
        return insert_near(
            source,
            "select_config",
            anchor,
            f"# region: shape_dispatch\n{text}\n# endregion: shape_dispatch",
            after=False,
        )
