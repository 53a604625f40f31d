"""Techniques that change which program computes which tile: grouped order, XCD remap, persistence.

The kernel maps a flat work id ``pid`` to a tile inside the ``pid_map`` region. Each technique
owns a sub-region there, in a fixed order: ``xcd_remap`` (acts on the hardware dispatch order, so
it comes first), then ``split_k_pid`` (owned by split_k), then ``tile_order`` (row-major or grouped).
"""

from __future__ import annotations

from kernel_scientist.knowledge._regions import (
    NotApplicable,
    add_tunable,
    body,
    insert,
    replace_body,
    replace_line,
    require,
)
from kernel_scientist.knowledge.techniques.gemm._constant import ConstantStructure
from kernel_scientist.knowledge.techniques.gemm._names import XCD_REMAP

WORK_IDS = "tl.program_id(0), num_work, NUM_SMS"  # the persistent loop's range: this program's work ids
PERSISTENT_LOOP = f"for work_id in range({WORK_IDS}):"  # the loop persistent puts region tile's body in


class GroupedOrder(ConstantStructure):
    name = "grouped_order"
    title = "Grouped (swizzled) launch order for L2 reuse"
    category = "memory"
    prose = (
        "Row-major tile order makes consecutive programs walk one row of tiles, so every program "
        "in a wave needs a different column block of b. Grouping GROUP_M rows of tiles together "
        "makes the programs in flight share both a few row blocks of a and a few column blocks of "
        "b, raising L2 hit rates. On MI300X each XCD has only 4 MB of L2, so the benefit depends "
        "on which programs land on the same XCD (see xcd_remap). It matters for large m and n "
        "(6144 x 7168) and is neutral when the grid is a single wave."
    )
    prior_min, prior_max = 0.0, 0.1
    novelty = 0.15
    constant, values, accepted = "GROUP_M", (8, 4, 16), (2,)
    needs = ("tile_order", "config")
    marker = ("tile_order", "GROUP_M")
    changes = (
        "add a GROUP_M constexpr",
        "replace row-major pid -> (pid_m, pid_n) with groups of {value} tile rows walked column by column",
    )

    def _install(self, source: str, value: int) -> str:
        source = add_tunable(source, "GROUP_M", value)
        return replace_body(
            source,
            "tile_order",
            """
            # Groups of GROUP_M tile rows are walked column by column, so the programs in flight
            # reuse a few row blocks of a and a few column blocks of b from L2.
            group_size = GROUP_M * num_pid_n
            first_m = (pid // group_size) * GROUP_M
            group_rows = tl.minimum(num_pid_m - first_m, GROUP_M)
            pid_m = first_m + (pid % group_size) % group_rows
            pid_n = (pid % group_size) // group_rows
            """,
        )


class XcdRemap(ConstantStructure):
    name = "xcd_remap"
    title = "XCD-aware program-id remap"
    category = "memory"
    prose = (
        "MI300X dispatches consecutive workgroups round-robin to its 8 XCDs, and each XCD has a "
        "private 4 MB L2. With a plain order, neighbouring tiles, which share rows of a or columns "
        "of b, run on different XCDs and each XCD fetches the shared data again from Infinity "
        "Cache or HBM. Renumbering work ids so that each XCD receives one contiguous run makes "
        "grouped order effective per XCD. AMD's Triton GEMM tutorials and the challenge's top "
        "entries used such a remap; it does nothing on single-die GPUs and little when a shape's "
        "operands fit in L2 anyway (k = 256)."
    )
    prior_min, prior_max = 0.0, 0.15
    novelty = 0.6
    vendors = ("amd",)
    constant, values, default = "NUM_XCDS", (8,), 8
    needs = ("pid_map", "config")
    marker = (XCD_REMAP, None)
    changes = (
        "add a NUM_XCDS constexpr",
        "renumber work ids so each XCD gets one contiguous run before mapping to tiles",
    )

    def _install(self, source: str, value: int) -> str:
        require(source, "work_preamble", why=self.name)
        if "num_work" not in "\n".join(body(source, "work_preamble")):
            raise NotApplicable(f"{self.name}: work_preamble does not define num_work")
        source = add_tunable(source, "NUM_XCDS", value)
        return insert(
            source,
            "pid_map",
            f"""
            # region: {XCD_REMAP}
            # Work id w runs on XCD w % NUM_XCDS. Give XCD x the contiguous ids starting at
            # x * per_xcd + min(x, extra), so its L2 sees neighbouring tiles; a bijection for any
            # num_work (the first `extra` XCDs take one id more).
            xcd = pid % NUM_XCDS
            per_xcd = num_work // NUM_XCDS
            extra = num_work % NUM_XCDS
            pid = xcd * per_xcd + tl.minimum(xcd, extra) + pid // NUM_XCDS
            # endregion: {XCD_REMAP}
            """,
            at="start",
        )


class Persistent(ConstantStructure):
    name = "persistent"
    title = "Persistent kernel (one program per CU walks the tiles)"
    category = "schedule"
    prose = (
        "A persistent kernel launches about one program per compute unit (NUM_SMS = 304 on "
        "MI300X) and lets each loop over work ids with a stride of NUM_SMS. It saves launch and "
        "workgroup start-up cost, and opens the door to overlapping one tile's epilogue with the "
        "next tile's loads. With the tile count not a multiple of 304 the last round is still "
        "partly idle (wave quantization does not go away), and on the small-K shapes the per-tile "
        "work is short enough that the loop overhead shows. Two programs per CU (608) keep some "
        "latency hiding that one program per CU loses."
    )
    prior_min, prior_max = -0.05, 0.15
    novelty = 0.5
    constant, values, accepted = "NUM_SMS", (304, 608), (66, 132, 152, 264, 1216)
    needs = ("tile", "config")
    marker = ("tile", "for work_id in range(")
    changes = (
        "add a NUM_SMS constexpr",
        "wrap the per-tile body in `for work_id in range(program_id, num_work, NUM_SMS)`",
        "launch min(NUM_SMS, work items) programs",
    )

    def _install(self, source: str, value: int) -> str:
        require(source, "grid", "work_preamble", why=self.name)
        lines = body(source, "tile")
        if not lines or lines[0].strip() != "pid = tl.program_id(0)":
            raise NotApplicable(f"{self.name}: region tile must start with `pid = tl.program_id(0)`")
        indent = lines[0][: len(lines[0]) - len(lines[0].lstrip())]
        rest = [("    " + line[len(indent) :]) if line.strip() else "" for line in lines[1:]]
        new_body = "\n".join(
            [
                "# Persistent: NUM_SMS programs stride through the work list.",
                PERSISTENT_LOOP,
                "    pid = work_id",
                *rest,
            ]
        )
        source = add_tunable(source, "NUM_SMS", value)
        source = replace_body(source, "tile", new_body)
        return replace_line(source, "grid", "grid = ", 'grid = (min(cfg["NUM_SMS"], num_work),)')


class _HopperPersistent(Persistent, replaces_on="nvidia"):
    """The NVIDIA form: one or two programs per SM of an H100/H200 (132 SMs)."""

    prose = (
        "A persistent kernel launches one program per SM (132 on an H100/H200) and lets each loop "
        "over output tiles with a stride of NUM_SMS. It saves block launch and start-up cost, keeps "
        "per-program set-up (tensor descriptors, scale pointers) out of the tile loop, and is what "
        "Triton's warp specialisation and flattened tile+K pipelining build on: the next tile's "
        "first copies overlap the current tile's epilogue. The last round stays partly idle when "
        "the tile count is not a multiple of 132."
    )
    prior_min, prior_max = -0.05, 0.2
    values = (132, 264)
