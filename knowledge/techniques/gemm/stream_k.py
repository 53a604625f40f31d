"""Stream-K: the persistent programs share out the K loops of the last waves' tiles, so that every
program does the same work however the tiles fall on the SMs.

Wave quantisation: with T output tiles on P persistent programs the call takes ceil(T / P) rounds
of whole tiles, so 96 tiles on 132 SMs leave 36 idle and 288 tiles take three rounds for 2.2
rounds' work. Split-K cuts every tile into the same number of slices and cannot fix a fraction
below one wave. Stream-K (Osama et al., PPoPP 2023; CUTLASS's stream-K scheduler) gives whole
tiles to the programs in turn for every full wave but the last, then lays the remaining tiles'
scale blocks end to end and gives each program one contiguous range of them.

A tile whose blocks fall in several programs' ranges is summed from their partials. Each program
walks its range from the end, so the first piece it computes is the beginning of a tile (written to
its one fp32 workspace slot, then a flag) and its last piece is a tile's end: that program owns
the tile and adds the lower programs' slots, written long before, and writes c. Owners wait only on
lower program ids and no program waits before writing its slot, so there is no cycle: it runs on a
GPU whatever the residency (blocks start in id order) and in Triton's in-order interpreter.

The stream-K loop is plain: with this body a warp-specialised loop was wrong on an H200
(docs/results.md#designs-that-did-not-pay). Neither structure wins everywhere (stream-K on long K
with idle SMs, the warp-specialised loop on short K), so a copy of the kernel as it was stays beside
the stream-K one, and STREAM_K 0 launches it: the tuner picks the structure per shape
(docs/results.md#what-the-best-kernel-is-made-of). warp_specialize rewrites
that copy's loop once the kernel is stream-K, so both orders of the two techniques give the same
kernel (a search that took stream-K first does not lose the warp-specialised line).
"""

from __future__ import annotations

import re
import textwrap

from kernel_scientist.knowledge._base import Form, Structure
from kernel_scientist.knowledge._regions import (
    NotApplicable,
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
from kernel_scientist.knowledge._twin import MARKER, TWIN_NOTE_START, TWIN_SWITCH, gemm_kernel, twin_name
from kernel_scientist.knowledge.techniques.gemm._names import SPLIT_K_PID, SPLIT_K_REDUCE, STREAM_K_SCHEDULE
from kernel_scientist.knowledge.techniques.gemm.hopper import persistent_loop
from kernel_scientist.knowledge.techniques.gemm.tuning import no_specialise

_SCHEDULE = f"""
# region: {STREAM_K_SCHEDULE}
# Whole tiles first (DP_TILES, every full wave but the last), then the other tiles' K blocks
# shared out evenly: this program's range is [sk_lo, sk_hi), walked from its end.
k_blocks = tl.cdiv(K, BLOCK_K)
me = tl.program_id(0)
dp_steps = tl.cdiv(tl.maximum(DP_TILES - me, 0), NUM_SMS)
sk_work = ((num_work - DP_TILES) * k_blocks).to(tl.int64)
sk_lo = ((me * sk_work) // NUM_SMS).to(tl.int32)
sk_hi = (((me + 1) * sk_work) // NUM_SMS).to(tl.int32)
sk_steps = tl.where(sk_hi > sk_lo, (sk_hi - 1) // k_blocks - sk_lo // k_blocks + 1, 0)
sk_slot = tl.arange(0, BLOCK_M)[:, None] * BLOCK_N + tl.arange(0, BLOCK_N)[None, :]
# endregion: {STREAM_K_SCHEDULE}
"""

_PID = """
# region: stream_k_pid
# Step work_id: a whole tile, or the piece of a shared tile that this program's range covers.
seg_tile = (sk_hi - 1) // k_blocks - (work_id - dp_steps)
seg_lo = tl.maximum(sk_lo, seg_tile * k_blocks)
seg_hi = tl.minimum(sk_hi, seg_tile * k_blocks + k_blocks)
whole = work_id < dp_steps
pid = tl.where(whole, me + work_id * NUM_SMS, DP_TILES + seg_tile)
kb_lo = tl.where(whole, 0, seg_lo - seg_tile * k_blocks)
kb_hi = tl.where(whole, k_blocks, seg_hi - seg_tile * k_blocks)
# endregion: stream_k_pid
"""

_FIXUP = """
# region: stream_k_fixup
if STREAM_K:
    owner = kb_hi == k_blocks
    if kb_hi < k_blocks:
        # A tile's beginning (or middle): this program's first piece, left in its workspace slot.
        tl.store(sk_ws_ptr + me * (BLOCK_M * BLOCK_N) + sk_slot, acc)
        tl.debug_barrier()
        tl.atomic_xchg(sk_flag_ptr + me, 1, sem="release")
    elif kb_lo > 0:
        # This program owns the tile's end: add the lower programs' pieces, each slot once, and
        # clear their flags for the next call. (With fewer K blocks than programs some ranges
        # are empty: those programs left nothing.)
        q = me - 1
        covered = seg_lo
        while covered > seg_tile * k_blocks:
            q_lo = ((q * sk_work) // NUM_SMS).to(tl.int32)
            if q_lo < covered:
                while tl.atomic_add(sk_flag_ptr + q, 0, sem="acquire") == 0:
                    pass
                acc += tl.load(sk_ws_ptr + q * (BLOCK_M * BLOCK_N) + sk_slot, cache_modifier=".cg")
                tl.atomic_xchg(sk_flag_ptr + q, 0, sem="relaxed")
            covered = q_lo
            q -= 1
else:
    owner = True  # whole tiles only (a compile-time branch)
if owner:
{epilogue}
# endregion: stream_k_fixup
"""

_PLAN = '''
# region: stream_k_plan
_SK_SCRATCH = {}  # (programs, tile, device) -> (fp32 slot per program, flags); scratch, never a result


def stream_k_plan(tiles, cfg, device):
    """(whole tiles, workspace, flags) for a shape's ``tiles`` output tiles and one launch setting:
    every full wave of tiles but the last goes whole to the programs; the last full wave and the
    partial one are shared out by K blocks (each program's share is then at least about one tile).
    All tiles whole where they fill the waves exactly, or with STREAM_K 0 (whole tiles only; the
    tuner times both)."""
    sms = cfg["NUM_SMS"]
    waves, tail = divmod(tiles, sms)
    whole = tiles if tail == 0 or not cfg["STREAM_K"] else max(0, waves - 1) * sms
    key = (sms, cfg["BLOCK_M"], cfg["BLOCK_N"], device)
    buffers = _SK_SCRATCH.get(key)
    if buffers is None:
        buffers = _SK_SCRATCH[key] = (torch.empty(sms * cfg["BLOCK_M"] * cfg["BLOCK_N"], dtype=torch.float32, device=device),
                                      torch.zeros(sms, dtype=torch.int32, device=device))
    return whole, buffers[0], buffers[1]
# endregion: stream_k_plan
'''

_TWIN_NOTE = f"""\
{TWIN_NOTE_START}: whole tiles in the persistent loop, which may be
# warp-specialised (warp_specialize rewrites this loop once the other kernel is stream-K: the
# stream-K body cannot be). The launch takes it at STREAM_K 0, so the
# tuner chooses per shape between the two structures. It has no regions: a technique applied after
# stream_k rewrites the stream-K kernel, and its change is made here too where this copy reads as
# the rewritten part did (a grouped tile order reaches both; Technique.rewrite).
"""


def _whole_tile_twin(source: str) -> tuple[str, str, str, str]:
    """(name, text, launch, grid line): a copy of the GEMM kernel renamed (``twin_name``), its
    region markers dropped and an unused STREAM_K parameter added (the launch passes every
    setting), with the launch region's body and the grid line as they were."""
    found = gemm_kernel(source, "stream_k")
    name = found["name"]
    lines = [ln for ln in found[0].splitlines() if not MARKER.match(ln)]
    close = next((i for i, ln in enumerate(lines) if ln.strip() == "):"), None)
    if close is None:
        raise NotApplicable("stream_k: the kernel's parameter list does not end in a line `):`")
    lines[close:close] = [TWIN_SWITCH]
    copy = "\n".join(lines).replace(f"def {name}(", f"def {twin_name(name)}(", 1)
    launch = textwrap.dedent("\n".join(body(source, "launch"))).strip("\n")
    grid = _line(body(source, "grid"), "grid = ", "region grid has no `grid = ` line")
    return name, _TWIN_NOTE + copy + "\n\n\n", launch, grid


def _line(lines: list[str], start: str, why: str) -> str:
    found = next((ln.strip() for ln in lines if ln.strip().startswith(start)), None)
    if found is None:
        raise NotApplicable(f"stream_k: {why}")
    return found


def _with_twin(source: str, twin: tuple[str, str, str, str]) -> str:
    """``source`` (stream-K applied) with the kernel as it was back beside it, launched at STREAM_K 0
    with its own grid and arguments as they were."""
    name, text, old_launch, old_grid = twin
    source = replace_line(source, "grid", 'grid = (cfg["NUM_SMS"],)', f'tiles_{old_grid}\ngrid = (cfg["NUM_SMS"],)')
    old = re.sub(r"\bgrid\b", "tiles_grid", re.sub(rf"\b{name}\b", twin_name(name), old_launch))
    new = textwrap.dedent("\n".join(body(source, "launch"))).strip("\n")
    source = replace_body(
        source,
        "launch",
        'if cfg["STREAM_K"]:\n'
        + textwrap.indent(new, "    ")
        + "\nelse:  # whole tiles through the kernel as it was (its own grid)\n"
        + textwrap.indent(old, "    "),
    )
    where = gemm_kernel(source, "stream_k").start()
    return source[:where] + text + source[where:]


class StreamK(Structure):
    name = "stream_k"
    title = "Stream-K: the last waves' K loops shared out evenly over the persistent programs"
    category = "parallelism"
    prose = (
        "With T output tiles on P persistent programs a GEMM takes ceil(T / P) rounds of whole tiles: "
        "96 tiles of 128x128 on the 132 SMs of an H200 leave 36 SMs idle for the whole call, and 288 "
        "take three rounds for 2.2 rounds of work. Split-K cuts every tile alike and cannot fix a "
        "fraction below one wave. Stream-K (Osama et al., PPoPP 2023; CUTLASS's stream-K scheduler) "
        "gives whole tiles out for every full wave but the last and lays the other tiles' K blocks "
        "end to end, one contiguous range per program, so every program does the same work. A tile "
        "split between programs is summed in fp32 by the program that holds its last K block, from "
        "the others' workspace slots, with flags and no host work. It pays where the tiles leave a "
        "wave partly idle and K is long, and loses on short K, where a warp-specialised loop pays. "
        "Its own loop is plain (the fix-up needs one epilogue per program), so the kernel as it was "
        "stays beside it: a STREAM_K constexpr of 0 launches that one (whole tiles only), the "
        "in-submission tuner times both structures per shape, and warp specialisation can still be "
        "turned on or off in that copy's loop afterwards."
    )
    prior_min, prior_max = -0.05, 0.25
    novelty = 0.8
    vendors = ("nvidia",)
    form = Form(
        {"stream_k": True},
        "stream-K over the persistent programs",
        [
            "give whole tiles to the programs for every full wave but the last (DP_TILES, per shape on the host)",
            "share the other tiles' K blocks out evenly: one contiguous range per program, walked from its end",
            "a tile's first piece goes to the program's fp32 workspace slot with a flag; the program "
            "holding its last K block adds the lower programs' slots and writes c",
            "launch exactly NUM_SMS programs from a plain loop (no warp specialisation); a STREAM_K constexpr "
            "(1) gives whole tiles only at 0, which a tuner times too, per shape",
            "keep the kernel as it was (its persistent loop, warp-specialised or not) beside the stream-K one, "
            "launched at STREAM_K 0",
        ],
    )

    mark, needs = STREAM_K_SCHEDULE, ("tile",)

    def refuse(self, source: str) -> None:
        persistent_loop(source, self.name)  # not offered before the persistent loop exists

    def install(self, source: str) -> str:
        require(source, "tile", "k_bounds", "epilogue", "params", "grid", "launch", "config", "select_config",
                why=self.name)  # fmt: skip
        if has(source, SPLIT_K_PID) or has(source, SPLIT_K_REDUCE):
            raise NotApplicable("stream_k: this kernel splits K already (split_k); use one or the other")
        loop = persistent_loop(source, self.name)
        # The kernel as it was stays beside the stream-K one, and STREAM_K 0 launches it: each
        # structure wins on its own shapes, and warp_specialize can still rewrite it.
        twin = _whole_tile_twin(source)
        if [ln.strip() for ln in body(source, "k_bounds")] != ["k_lo = 0", "k_hi = K"]:
            raise NotApplicable("stream_k: region k_bounds must be the whole K loop (`k_lo = 0`, `k_hi = K`)")
        if "BLOCK_K" not in "\n".join(body(source, "params")):
            raise NotApplicable("stream_k: the kernel has no BLOCK_K parameter")
        first = _line(body(source, "params"), "a_ptr,", "the kernel's pointer parameters are not the seed's")
        dims = _line(body(source, "params"), "M, N, K,", "the kernel's size parameters are not the seed's")
        args = _line(body(source, "launch"), "a, b, a_scale, b_scale, out,", "the launch's tensors are not the seed's")
        sizes = _line(body(source, "launch"), "m, n, k,", "the launch's sizes are not the seed's")
        if "c_ptr," not in first:
            raise NotApplicable("stream_k: the kernel's pointer parameters are not the seed's")
        source = replace_line(source, "params", first, first.replace("c_ptr,", "c_ptr, sk_ws_ptr, sk_flag_ptr,", 1))
        source = replace_line(source, "params", dims, dims.replace("M, N, K,", "M, N, K, DP_TILES,", 1))
        source = replace_line(source, "launch", args, args.replace("out,", "out, sk_ws, sk_flags,", 1))
        source = replace_line(source, "launch", sizes, sizes.replace("m, n, k,", "m, n, k, dp_tiles,", 1))
        # The loop: the steps of this program (whole tiles, then pieces), no longer strided work ids,
        # and a plain range: the fix-up's flags need one epilogue per program, and with this body a
        # warp-specialised loop was wrong on an H200 even for STREAM_K 0 (rows 64-127 of every
        # 128-row tile with two consumer warpgroups; docs/results.md#designs-that-did-not-pay).
        source = replace_line(source, "tile", loop, "for work_id in range(0, dp_steps + sk_steps):")
        source = add_tunable(source, "STREAM_K", 1)
        source = replace_line(source, "tile", "pid = work_id", textwrap.dedent(_PID).strip("\n"))
        source = insert(source, "tile", textwrap.dedent(_SCHEDULE).strip("\n"), at="start")
        source = replace_body(
            source,
            "k_bounds",
            """
            # Whole BLOCK_K steps: this step's K blocks [kb_lo, kb_hi).
            k_lo = kb_lo * BLOCK_K
            k_hi = tl.minimum(K, kb_hi * BLOCK_K)
            """,
        )
        epilogue = textwrap.indent(textwrap.dedent("\n".join(body(source, "epilogue"))).strip("\n"), "    ")
        source = replace_body(source, "epilogue", _FIXUP.format(epilogue=epilogue))
        plan = "dp_tiles, sk_ws, sk_flags = stream_k_plan(num_work, cfg, out.device)"
        source = insert_near(source, "grid", "num_work = ", plan, after=True)
        source = replace_line(source, "grid", "grid = ", 'grid = (cfg["NUM_SMS"],)')
        # DP_TILES changes with every shape: one compile per setting, not per divisibility class.
        source = no_specialise(insert_after_region(source, "select_config", _PLAN), ["DP_TILES"])
        return _with_twin(source, twin)
