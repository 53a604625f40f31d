"""Hopper (sm_90) structure: tensor descriptors (TMA) for the operand tiles, and warp
specialisation of the persistent tile loop (once for every shape, or chosen per shape by the tuner).

Why: on Hopper a kernel that must match the fp32 reference multiplies 16-bit tiles (see
``precision`` and ``prepass``) and promotes each 128-deep scale block into an fp32 accumulator. TMA copies feed the tensor cores
without per-thread address arithmetic; the promotion after every block stalls the asynchronous MMA
chain, and a persistent loop with warp specialisation lets the producer warps keep copying while
the consumer warps promote. Both are Triton 3.4+ features (tensor descriptors,
``tl.range(..., warp_specialize=True)``); NVIDIA only: the MI300X has no TMA.
"""

from __future__ import annotations

import re

from kernel_scientist.blackboard.records import Param
from kernel_scientist.knowledge._base import Form, Structure, Technique
from kernel_scientist.knowledge._regions import (
    NotApplicable,
    add_tunable,
    body,
    has,
    insert,
    insert_after_region,
    replace_body,
    replace_line,
    require,
)
from kernel_scientist.knowledge._twin import TWIN_SWITCH, find_twin, gemm_kernel
from kernel_scientist.knowledge.techniques.gemm._names import (
    DESCRIPTORS,
    SPLIT_K_PID,
    SPLIT_K_REDUCE,
    STREAM_K_SCHEDULE,
)
from kernel_scientist.knowledge.techniques.gemm.layout import copies_operands
from kernel_scientist.knowledge.techniques.gemm.order import PERSISTENT_LOOP, WORK_IDS
from kernel_scientist.knowledge.techniques.gemm.tuning import add_switch, require_switches, skip_trials

A_TILE_LOAD = "a = a_desc.load([k0, pid_m * BLOCK_M]).T"  # a's tile by descriptor (operand_per_shape converts it)
WS_MARK = "warp_specialize=True"  # warp_specialize's loop: warp-specialised for every shape
WS_SWITCH_MARK = "warp_specialize=WS_LOOP"  # ws_per_shape's loop: warp-specialised where the tuner says
# Split-K reduced in the kernel beside a warp-specialised loop gave wrong output on an H200, rows
# 64-127 of every 128-row tile: a tile was reduced before its last slice's lower half arrived
# (docs/results.md#designs-that-did-not-pay). Hence split_k and the loops refuse each other.
WS_CONFLICT = (
    "the warp-specialised loop runs the epilogue once per consumer warpgroup, so the per-tile "
    "arrival counter of the in-kernel split-K reduction would count each slice twice; use one or the other"
)


_LOAD_A = re.compile(r"^a\s*=\s*tl\.load\(")
_LOAD_B = re.compile(r"^b\s*=\s*tl\.load\(")
_ALLOCATOR = '''
# region: tma_allocator
_SCRATCH = {}  # (size, stream) -> one buffer: descriptor scratch only, never a result


def _descriptor_scratch(size: int, alignment: int, stream):
    """Global memory for the descriptors a kernel builds on the device. Triton asks on every
    launch; launches on one stream run in order, so one buffer per size and stream serves them all
    and no call pays an allocation."""
    key = (size, stream)
    buffer = _SCRATCH.get(key)
    if buffer is None:
        buffer = _SCRATCH[key] = torch.empty(size, dtype=torch.int8, device="cuda")
    return buffer


if torch.cuda.is_available():
    triton.set_allocator(_descriptor_scratch)
# endregion: tma_allocator
'''


class TensorDescriptors(Structure):
    name = "tma_descriptors"
    title = "Tensor descriptors (TMA) for the operand tiles and the output"
    category = "memory"
    prose = (
        "Hopper's Tensor Memory Accelerator copies a whole tile between global and shared memory "
        "from one instruction, computing addresses and bounds in hardware: no per-thread address "
        "arithmetic, no masks, out-of-bounds rows read as zeros and are dropped on store, and the "
        "copy lands in the swizzled layout the MMA reads. In Triton (3.4+) a kernel builds "
        "descriptors with tl.make_tensor_descriptor(ptr, shape, strides, block_shape) and calls "
        "desc.load([k, m]) / desc.store(...). The innermost stride must be 1 and the others 16-byte "
        "aligned: for column-major operands the descriptor is over the [K, M] view and the tile is "
        "transposed in registers (a free layout change for 16-bit MMAs, which read either major "
        "order; fp8 MMAs need K-major operands). Descriptors built on the device need a global "
        "scratch allocator (triton.set_allocator)."
    )
    prior_min, prior_max = 0.0, 0.3
    novelty = 0.6
    vendors = ("nvidia",)
    form = Form(
        {"tma": True},
        "TMA descriptors",
        [
            "build tensor descriptors for a ([K, M] view), b ([K, N] view) and c in the kernel",
            "load each operand tile with desc.load([k0, tile offset]) (a transposed in registers)",
            "store the output tile with c_desc.store",
            "install a device allocator for the descriptors",
        ],
    )

    mark, needs = DESCRIPTORS, ("work_preamble", "loads", "epilogue")

    def refuse(self, source: str) -> None:
        if has(source, SPLIT_K_PID):  # the host-reduction split-K writes K planes, c_desc one
            raise NotApplicable(f"{self.name}: the epilogue writes split-K planes; apply it before split_k")

    def install(self, source: str) -> str:
        require(source, "select_config", "prepare", why=self.name)
        if copies_operands(source):
            raise NotApplicable(
                f"{self.name}: descriptors here read the column-major inputs; undo layout_prepass first"
            )
        epilogue = "\n".join(body(source, "epilogue"))
        if "tl.store(out_ptrs" not in epilogue or "atomic" in epilogue:
            raise NotApplicable(
                f"{self.name}: the epilogue is not the plain masked store (split-K or custom); apply it before split_k"
            )
        loads = body(source, "loads")
        line_a = next((ln.strip() for ln in loads if _LOAD_A.match(ln.strip())), None)
        line_b = next((ln.strip() for ln in loads if _LOAD_B.match(ln.strip())), None)
        if line_a is None or line_b is None:
            raise NotApplicable(f"{self.name}: region loads has no `a = tl.load(...)` / `b = tl.load(...)` lines")
        source = replace_line(source, "loads", line_a, A_TILE_LOAD)
        source = replace_line(source, "loads", line_b, "b = b_desc.load([k0, pid_n * BLOCK_N])")
        source = insert(
            source,
            "work_preamble",
            f"""
            # region: {DESCRIPTORS}
            # The operands are column-major: [K, M] and [K, N] row-major views, unit inner stride.
            a_desc = tl.make_tensor_descriptor(a_ptr, shape=[K, M], strides=[stride_ak, 1], block_shape=[BLOCK_K, BLOCK_M])
            b_desc = tl.make_tensor_descriptor(b_ptr, shape=[K, N], strides=[stride_bk, 1], block_shape=[BLOCK_K, BLOCK_N])
            c_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[stride_cm, 1], block_shape=[BLOCK_M, BLOCK_N])
            # endregion: {DESCRIPTORS}
            """,
        )
        source = replace_body(
            source,
            "epilogue",
            """
            c_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N], acc.to(c_ptr.dtype.element_ty))
            """,
        )
        source = insert(
            source,
            "prepare",
            """
            if a.stride(0) != 1 or b.stride(0) != 1 or c.stride(1) != 1:
                raise ValueError("this kernel's tensor descriptors need column-major a and b and a row-major c")
            """,
        )
        return insert_after_region(source, "select_config", _ALLOCATOR)


STREAM_K_CONFLICT = (
    "stream_k's loop runs without warp specialisation (its fix-up flags need one epilogue per "
    "program, and with its body a warp-specialised loop was wrong on an H200 even for STREAM_K 0)"
)
# The persistent loop, plain or a tl.range with options (warp specialisation, flattening).
_PERSISTENT_LOOP = re.compile(rf"^for work_id in (?:tl\.)?range\({re.escape(WORK_IDS)}.*\):$")
_WS_LOOP = f"for work_id in tl.range({WORK_IDS}, flatten=True, {WS_MARK}):"


def persistent_loop(source: str, technique: str) -> str:
    """The header line of the persistent loop in region ``tile``, which the techniques that rewrite
    that loop start from; NotApplicable, naming ``technique``, where the kernel has none."""
    require(source, "tile", why=technique)
    for line in body(source, "tile"):
        if _PERSISTENT_LOOP.match(line.strip()):
            return line.strip()
    raise NotApplicable(f"{technique}: no persistent loop (`{PERSISTENT_LOOP[:-1]}`); apply persistent first")


def _loop(source: str, technique: str) -> tuple[str, tuple[int, int] | None]:
    """The persistent loop's header and, on a stream-K kernel, the span of stream_k's copy of the
    kernel as it was, whose loop the warp-specialisation techniques rewrite there (the stream-K body
    cannot be warp-specialised)."""
    require(source, "tile", why=technique)
    if not has(source, STREAM_K_SCHEDULE):
        return persistent_loop(source, technique), None
    twin = find_twin(source, gemm_kernel(source, technique)["name"])
    if twin is None:  # stream-K written before the copy was kept for a plain loop too
        raise NotApplicable(f"{technique}: {STREAM_K_CONFLICT}")
    _, start, end = twin
    line = next((ln.strip() for ln in source[start:end].splitlines() if _PERSISTENT_LOOP.match(ln.strip())), None)
    if line is None:
        raise NotApplicable(f"{technique}: stream_k's copy of the kernel has no persistent loop")
    return line, (start, end)


class WarpSpecialize(Technique):
    name = "warp_specialize"
    title = "Warp specialisation of the persistent tile loop"
    category = "schedule"
    prose = (
        "With warp_specialize=True on a tl.range loop (Triton 3.4+, Hopper and Blackwell), the "
        "compiler splits the warps into a producer that only issues TMA copies and consumers that "
        "only run MMAs and the epilogue, communicating through shared-memory barriers. Copies then "
        "never wait behind the consumers' arithmetic, which matters most when each K step ends in "
        "non-MMA work (here the scaled fp32 promotion of every 128-deep block). flatten=True merges "
        "the tile loop and the K loop into one pipelined stream so the next tile's first copies "
        "overlap the current tile's epilogue. It needs the persistent loop and pays off with TMA "
        "loads; with pointer loads the producer has nothing asynchronous to issue. On a stream-K "
        "kernel it rewrites the loop of the copy of the kernel as it was (launched at STREAM_K 0)."
    )
    prior_min, prior_max = -0.05, 0.25
    novelty = 0.7
    vendors = ("nvidia",)
    # Both directions: a campaign that turned it on can measure the loop without it again (with
    # the one-FMA scaled add the plain loop can be the faster one, and split_k needs it off).
    _FORMS = {
        True: Form(
            {"warp_specialize": True},
            "warp-specialised loop",
            ["turn the persistent loop into tl.range(..., flatten=True, warp_specialize=True)"],
        ),
        False: Form(
            {"warp_specialize": False},
            "plain persistent loop",
            ["turn the warp-specialised loop back into a plain range over the work ids"],
        ),
    }

    def detect(self, source: str) -> dict[str, Param] | None:
        loop = _loop(source, self.name)[0]
        if WS_SWITCH_MARK in loop:
            raise NotApplicable(f"{self.name}: the tuner chooses the loop per shape here (ws_per_shape)")
        return {"warp_specialize": WS_MARK in loop}

    def forms(self, source: str) -> list[Form]:
        return list(self._FORMS.values())

    def apply(self, source: str, params: dict[str, Param], reference: str | None = None) -> str:
        on = self._param(params, "warp_specialize", (True, False))
        loop, twin = _loop(source, self.name)
        if (WS_MARK in loop) == on:
            return source
        if on and has(source, SPLIT_K_REDUCE):
            raise NotApplicable(f"{self.name}: {WS_CONFLICT}")
        header = _WS_LOOP if on else PERSISTENT_LOOP
        if twin is not None:
            start, end = twin
            text = source[start:end]
            return source[:start] + text.replace(loop, header, 1) + source[end:]
        return replace_line(source, "tile", loop, header)


class PerShapeWarpSpecialize(Technique):
    name = "ws_per_shape"
    title = "Warp specialisation chosen per shape by the in-submission tuner"
    category = "tuning"
    prose = (
        "Whether a warp-specialised persistent loop beats the plain one depends on the shape: "
        "where each tile's K loop is long the producer warps keep the copies ahead of the scaled "
        "adds, but where K is short or the tiles are few the split costs more than it hides (its "
        "barriers, a consumer epilogue per warpgroup, fewer registers per consumer), and the plain "
        "flattened loop can be much faster on such a shape. So instead of one choice for "
        "every shape, the loop takes warp_specialize from a WS_LOOP constexpr that the in-submission "
        "tuner times both ways per shape, with every launch setting. It costs one more compile per "
        "setting on a kernel's first call of a shape (untimed), nothing per call later. Needs the "
        "tuner (in_submission_tuning) and the persistent loop; on a stream-K kernel it rewrites the "
        "loop of the copy of the kernel as it was (the stream-K loop stays plain), and the tuner "
        "skips the switch where STREAM_K is 1 (that kernel has no such loop)."
    )
    # A switch the tuner times loses only by the tuner's own noise, and gains only on the shapes
    # where the two loops differ, which a tuner with several tile settings partly covers already.
    prior_min, prior_max = -0.01, 0.05
    novelty = 0.6
    vendors = ("nvidia",)
    form = Form(
        {"per_shape": True},
        "warp specialisation per shape",
        [
            "the persistent loop becomes tl.range(..., flatten=True, warp_specialize=WS_LOOP)",
            "add a WS_LOOP constexpr (1) to the config, select_config and the kernel(s)",
            "add WS_LOOP (0, 1) to TUNING_SWITCHES; the tuner skips it where STREAM_K is 1",
        ],
    )

    def detect(self, source: str) -> dict[str, Param] | None:
        loop, _ = _loop(source, WarpSpecialize.name)  # the loop warp_specialize would rewrite
        if WS_SWITCH_MARK in loop:
            return {"per_shape": True}
        require_switches(source, self.name)
        return None

    def apply(self, source: str, params: dict[str, Param], reference: str | None = None) -> str:
        if self._has_form(source, params):
            return source
        if has(source, SPLIT_K_REDUCE):
            raise NotApplicable(f"{self.name}: {WS_CONFLICT}")
        header = f"for work_id in tl.range({WORK_IDS}, flatten=True, {WS_SWITCH_MARK}):"
        source = add_tunable(source, "WS_LOOP", 1)
        loop, twin = _loop(source, WarpSpecialize.name)
        if twin is None:
            source = replace_line(source, "tile", loop, header)
        else:
            start, end = twin
            text = source[start:end]
            if TWIN_SWITCH not in text:
                raise NotApplicable(f"{self.name}: stream_k's copy of the kernel has no STREAM_K parameter line")
            text = text.replace(loop, header, 1).replace(TWIN_SWITCH, "    WS_LOOP: tl.constexpr,\n" + TWIN_SWITCH, 1)
            source = source[:start] + text + source[end:]
        return skip_trials(
            add_switch(source, "WS_LOOP"),
            'dict(choice).get("STREAM_K") and not dict(choice).get("WS_LOOP", 1)',
            "the stream-K kernel has no warp-specialised loop: its WS_LOOP 1 trial is the one",
        )
