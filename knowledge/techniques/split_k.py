"""Split-K: several programs share one output tile, each summing a slice of the K loop.

Partials go to an fp32 workspace [SPLIT_K, m, n]; the host sums the slices and rounds once to
bf16 (torch's cast rounds to nearest, and summing in fp32 keeps the reference's single rounding).
A second Triton kernel or atomics could fuse the reduction; the workspace is the simplest choice
that is correct for every SPLIT_K, including slices left empty when K has few blocks.
"""

from __future__ import annotations

from .._base import NotApplicable
from .._regions import (
    add_tunable,
    body,
    has,
    insert,
    insert_after_region,
    insert_near,
    replace_body,
    replace_line,
    require,
)
from ._constant import ConstantStructure

_REGIONS = ("work_preamble", "pid_map", "k_bounds", "epilogue", "output", "grid", "finish")


def install(source: str, split: int) -> str:
    """Insert the split-K structure with SPLIT_K = ``split`` (1 leaves the result unchanged)."""
    require(source, *_REGIONS, "config", "select_config", "params", why="split_k")
    epilogue = "\n".join(body(source, "epilogue"))
    if "out_base = c_ptr" not in epilogue:
        raise NotApplicable("split_k: the epilogue must write through `out_base = c_ptr`")
    source = add_tunable(source, "SPLIT_K", split)
    source = insert(source, "work_preamble", "num_work = num_work * SPLIT_K")
    block = """
        # region: split_k_pid
        # The K slice is the slowest-varying part of the work id, so programs in flight work on
        # neighbouring tiles of one slice and share its operands in L2.
        num_tiles = num_pid_m * num_pid_n
        pid_k = pid // num_tiles
        pid = pid % num_tiles
        # endregion: split_k_pid
        """
    if has(source, "xcd_remap"):
        # After the XCD remap (which acts on dispatch order), before the tile order.
        source = insert_after_region(source, "xcd_remap", block)
    else:
        source = insert(source, "pid_map", block, at="start")
    source = replace_body(
        source,
        "k_bounds",
        """
        # Whole BLOCK_K steps per slice; trailing slices may be empty and then store zeros.
        k_steps = tl.cdiv(tl.cdiv(K, BLOCK_K), SPLIT_K)
        k_lo = pid_k * k_steps * BLOCK_K
        k_hi = tl.minimum(K, k_lo + k_steps * BLOCK_K)
        """,
    )
    # The workspace is contiguous [SPLIT_K, M, N]; slice pid_k starts pid_k * M * N elements in.
    source = replace_line(source, "epilogue", "out_base = c_ptr", "out_base = c_ptr + pid_k * M * N")
    source = replace_body(
        source,
        "output",
        """
        if cfg["SPLIT_K"] > 1:
            # fp32 partial tiles, one plane per K slice, reduced and rounded once in `finish`.
            out = torch.empty((cfg["SPLIT_K"], m, n), device=c.device, dtype=torch.float32)
        else:
            out = c
        """,
    )
    source = insert_near(source, "grid", "num_work = ", 'num_work *= cfg["SPLIT_K"]', after=True)
    return insert(
        source,
        "finish",
        """
        if out is not c:
            c.copy_(out.sum(dim=0))
        """,
        at="start",
    )


class SplitK(ConstantStructure):
    name = "split_k"
    title = "Split-K with an fp32 workspace reduction"
    category = "parallelism"
    prose = (
        "When m and n give fewer output tiles than the 304 CUs of MI300X (m = 1024 with n = 512 "
        "or 576 gives 32-40 tiles of 128x128) but K is long (7168), most of the GPU idles. Split-K "
        "divides the K loop among SPLIT_K programs per tile and sums their fp32 partials "
        "afterwards. The challenge winners used it for small m, n with large k. It costs a "
        "workspace write and read of SPLIT_K * m * n * 4 bytes plus a reduction launch, so it "
        "loses on shapes that already fill the machine or have short K (k = 256, 512)."
    )
    prior_min, prior_max = -0.2, 0.3
    novelty = 0.4
    constant, values, accepted = "SPLIT_K", (2, 4, 8), (1, 16)
    needs = ("config", "pid_map")
    marker = ("split_k_pid", None)
    changes = (
        "add a SPLIT_K constexpr; the work id also selects a K slice",
        "each program loops over its slice of K blocks only",
        "store fp32 partials to a [SPLIT_K, m, n] workspace, then sum and cast to bf16 on the host",
    )

    def _install(self, source: str, value: int) -> str:
        return install(source, value)
