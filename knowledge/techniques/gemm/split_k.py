"""Split-K: several programs share one output tile, each summing a slice of the K loop.

Partials go to an fp32 workspace [SPLIT_K, m, n]; the host sums the slices and rounds once to
bf16 (torch's cast rounds to nearest, and summing in fp32 keeps the reference's single rounding).
A second Triton kernel or atomics could fuse the reduction; the workspace is the simplest choice
that is correct for every SPLIT_K, including slices left empty when K has few blocks.
"""

from __future__ import annotations

import textwrap
from typing import ClassVar

from kernel_scientist.blackboard.records import Param
from kernel_scientist.knowledge._regions import (
    NotApplicable,
    add_tunable,
    body,
    has,
    insert,
    insert_after_region,
    insert_near,
    read_tunables,
    replace_body,
    replace_line,
    require,
    set_constant,
)
from kernel_scientist.knowledge.techniques.gemm._constant import ConstantStructure
from kernel_scientist.knowledge.techniques.gemm._names import SPLIT_K_PID, SPLIT_K_REDUCE, STREAM_K_SCHEDULE, XCD_REMAP
from kernel_scientist.knowledge.techniques.gemm.hopper import WS_CONFLICT, WS_MARK, WS_SWITCH_MARK

_REGIONS = ("work_preamble", "pid_map", "k_bounds", "epilogue", "output", "grid", "finish")


def _slices(source: str) -> str:
    """The K slices of the work id and of the K loop, shared by both forms: the work list grows
    SPLIT_K-fold, the slice is its slowest-varying part, and each slice loops over whole BLOCK_K
    steps (trailing slices may be empty and then contribute zeros)."""
    source = insert(source, "work_preamble", "num_work = num_work * SPLIT_K")
    block = f"""
        # region: {SPLIT_K_PID}
        # The K slice is the slowest-varying part of the work id, so programs in flight work on
        # neighbouring tiles of one slice and share its operands in L2.
        num_tiles = num_pid_m * num_pid_n
        pid_k = pid // num_tiles
        pid = pid % num_tiles
        # endregion: {SPLIT_K_PID}
        """
    if has(source, XCD_REMAP):
        # After the XCD remap (which acts on dispatch order), before the tile order.
        source = insert_after_region(source, XCD_REMAP, block)
    else:
        source = insert(source, "pid_map", block, at="start")
    return replace_body(
        source,
        "k_bounds",
        """
        # Whole BLOCK_K steps per slice; trailing slices may be empty and then contribute zeros.
        k_steps = tl.cdiv(tl.cdiv(K, BLOCK_K), SPLIT_K)
        k_lo = pid_k * k_steps * BLOCK_K
        k_hi = tl.minimum(K, k_lo + k_steps * BLOCK_K)
        """,
    )


_STREAM_K = "split_k: this kernel shares out its K loops already (stream_k); use one or the other"


def install(source: str, split: int) -> str:
    """Insert the split-K structure with SPLIT_K = ``split`` (1 leaves the result unchanged)."""
    require(source, *_REGIONS, "config", "select_config", "params", why="split_k")
    if has(source, STREAM_K_SCHEDULE):
        raise NotApplicable(_STREAM_K)
    epilogue = "\n".join(body(source, "epilogue"))
    if "out_base = c_ptr" not in epilogue:
        raise NotApplicable("split_k: the epilogue must write through `out_base = c_ptr`")
    source = add_tunable(source, "SPLIT_K", split)
    source = _slices(source)
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
    constant = "SPLIT_K"
    # Annotated here so that the NVIDIA form below may offer other counts of them.
    values: ClassVar[tuple[int, ...]] = (2, 4, 8)
    accepted: ClassVar[tuple[int, ...]] = (1, 16)
    needs: ClassVar[tuple[str, ...]] = ("config", "pid_map")
    marker = (SPLIT_K_PID, None)
    changes: ClassVar[tuple[str, ...]] = (
        "add a SPLIT_K constexpr; the work id also selects a K slice",
        "each program loops over its slice of K blocks only",
        "store fp32 partials to a [SPLIT_K, m, n] workspace, then sum and cast to bf16 on the host",
    )

    def _install(self, source: str, value: int) -> str:
        return install(source, value)


_PLAN = '''
# region: split_k_plan
_SPLIT_SCRATCH = {}  # (m, n, split, tile, device) -> (fp32 partial planes, tile counters); scratch, never a result
_SMS = {}  # device -> its SM count


def split_plan(m, n, k, cfg, device):
    """(split, partial planes, counters) for one shape and launch setting: the split of the K loop
    that needs the fewest rounds of programs times K blocks per program, each extra slice charged
    two K blocks (its fp32 partial tile is written and read back, about the bytes of two blocks'
    operand tiles). Tiles that fill the GPU already get 1; at most SPLIT_K_MAX."""
    sms = cfg.get("NUM_SMS")
    if sms is None:
        sms = _SMS.get(device)
        if sms is None:
            sms = _SMS[device] = torch.cuda.get_device_properties(device).multi_processor_count if device.type == "cuda" else 4
    tiles = triton.cdiv(m, cfg["BLOCK_M"]) * triton.cdiv(n, cfg["BLOCK_N"])
    blocks = triton.cdiv(k, cfg["BLOCK_K"])
    split = min(range(1, max(1, min(SPLIT_K_MAX, blocks)) + 1),
                key=lambda s: triton.cdiv(tiles * s, sms) * triton.cdiv(blocks, s) + 2 * (s - 1))
    key = (m, n, split, cfg["BLOCK_M"], cfg["BLOCK_N"], device)
    buffers = _SPLIT_SCRATCH.get(key)
    if buffers is None:
        planes = split * m * n if split > 1 else 1
        buffers = _SPLIT_SCRATCH[key] = (torch.empty(planes, dtype=torch.float32, device=device),
                                         torch.zeros(tiles, dtype=torch.int32, device=device))
    return split, buffers[0], buffers[1]
# endregion: split_k_plan
'''

_REDUCE = """
if SPLIT_K == 1:
{original}
else:
    # region: {reduce}
    # Each slice leaves its fp32 partial in its own plane; the last of a tile's slices to arrive
    # (an arrival counter per tile) adds the planes in slice order, so the sum does not depend on
    # which slice came last, writes c, and resets the counter for the next call.
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    inside = (rows[:, None] < M) & (cols[None, :] < N)
    at = rows[:, None] * N + cols[None, :]
    tl.store(ws_ptr + pid_k * M * N + at, acc, mask=inside)
    tl.debug_barrier()
    tile_id = pid_m * num_pid_n + pid_n
    if tl.atomic_add(cnt_ptr + tile_id, 1, sem="acq_rel") == SPLIT_K - 1:
        total = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for s in tl.static_range(SPLIT_K):
            total += tl.load(ws_ptr + s * M * N + at, mask=inside, other=0.0, cache_modifier=".cg")
        tl.store(c_ptr + rows[:, None] * stride_cm + cols[None, :] * stride_cn,
                 total.to(c_ptr.dtype.element_ty), mask=inside)
        tl.atomic_xchg(cnt_ptr + tile_id, 0)
    # endregion: {reduce}
"""


def install_reduce(source: str, most: int) -> str:
    """The NVIDIA split-K: one launch, the split chosen per shape (at most ``most``), the partials
    reduced in the kernel by the last slice of each tile (module docstring of the AMD form for
    the workspace alternative)."""
    require(source, "work_preamble", "pid_map", "k_bounds", "epilogue", "grid", "launch", "params", why="split_k")
    require(source, "config", "select_config", why="split_k")
    if has(source, STREAM_K_SCHEDULE):
        raise NotApplicable(_STREAM_K)
    params = body(source, "params")
    first = next((ln.strip() for ln in params if "c_ptr," in ln), None)
    launch = body(source, "launch")
    args = next((ln.strip() for ln in launch if ln.strip().startswith("a, b, a_scale, b_scale, out,")), None)
    if first is None or args is None:
        raise NotApplicable(
            "split_k: the kernel's pointer parameters or the launch's tensor arguments are not the seed's"
        )
    original = textwrap.indent(textwrap.dedent("\n".join(body(source, "epilogue"))).strip("\n"), "    ")
    source = set_constant(source, "SPLIT_K_MAX", most)
    source = replace_line(source, "params", first, first.replace("c_ptr,", "c_ptr, ws_ptr, cnt_ptr,", 1))
    source = insert(source, "params", "SPLIT_K: tl.constexpr,")
    source = replace_line(source, "launch", args, args.replace("out,", "out, ws, cnt,", 1))
    source = _slices(source)
    source = replace_body(source, "epilogue", _REDUCE.format(original=original, reduce=SPLIT_K_REDUCE))
    source = insert(source, "grid", 'cfg["SPLIT_K"], ws, cnt = split_plan(m, n, k, cfg, out.device)', at="start")
    source = insert_near(source, "grid", "num_work = ", 'num_work *= cfg["SPLIT_K"]', after=True)
    return insert_after_region(source, "select_config", _PLAN)


class _HopperSplitK(SplitK, replaces_on="nvidia"):
    """The NVIDIA form: one launch, the split picked per shape, the partials reduced in-kernel."""

    prose = (
        "Where m and n give fewer output tiles than the GPU has SMs (m = 1024 with n = 512 or 576 "
        "gives 32-40 tiles of 128x128 on 132 SMs) but K is long, most SMs idle for the whole call. "
        "Split-K gives each tile's K loop to several programs. This form picks the split per shape "
        "at launch (the fewest rounds of programs times K blocks per program, each extra slice "
        "charged for its partial's round trip, so shapes that fill the GPU keep one slice) and "
        "reduces in the same launch: every slice writes an fp32 partial plane, and the last slice "
        "of a tile to arrive, found with a per-tile atomic counter, adds the planes in slice order "
        "and writes c. No torch operation runs per call, so launch replay still applies. "
        "SPLIT_K_MAX bounds the split; the workspace is scratch reused per shape, never a result."
    )
    constant = "SPLIT_K_MAX"
    values = (4, 8)
    accepted = (1, 2, 16)
    marker = (SPLIT_K_REDUCE, None)
    needs = ("config", "pid_map", "epilogue")
    changes = (
        "pick the K split per shape at launch, at most {value} slices, one where the tiles fill the GPU",
        "each program sums its slice of K blocks into an fp32 partial plane",
        "the last slice of a tile (per-tile atomic counter) adds the planes and writes c in the same launch",
    )

    def detect(self, source: str) -> dict[str, Param] | None:
        require(source, *self.needs, why=self.name)
        if not has(source, SPLIT_K_REDUCE):
            return None
        return {self.constant: read_tunables(source).get(self.constant, 1)}

    def _install(self, source: str, value: int) -> str:
        if has(source, SPLIT_K_PID):
            raise NotApplicable("split_k: this kernel already splits K with a host-side reduction")
        if has(source, STREAM_K_SCHEDULE):
            raise NotApplicable(_STREAM_K)
        tile = "\n".join(body(source, "tile"))  # the GEMM kernel's own loop (ws_per_shape's may specialise)
        if WS_MARK in tile or WS_SWITCH_MARK in tile:
            raise NotApplicable(f"split_k: {WS_CONFLICT}")
        return install_reduce(source, value)
