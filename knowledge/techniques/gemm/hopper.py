"""Hopper (sm_90) structure: where the fp8-to-fp16 conversion happens, tensor descriptors (TMA),
and warp specialisation of the persistent tile loop.

Why these three: Hopper's fp8 tensor cores accumulate with reduced precision, so a kernel that must
match an fp32 reference at atol 1e-3 multiplies in 16 bits (e4m3 converts to fp16 exactly) and
promotes each 128-deep scale block into an fp32 accumulator. Converting inside the K loop costs
registers and a round trip through shared memory for every tile, every time a tile is reused;
converting once in a bandwidth-bound pre-pass costs two bytes written per element once, and lets
the GEMM feed the tensor cores straight from TMA copies. The promotion after every block stalls the
asynchronous MMA chain; a persistent loop with warp specialisation lets the producer warps keep
copying while the consumer warps promote. All three are Triton 3.4+ features (tensor descriptors,
``tl.range(..., warp_specialize=True)``); NVIDIA only: the MI300X accumulates fp8 in fp32 and has
no TMA.
"""

from __future__ import annotations

import re
import textwrap

from kernel_scientist.knowledge._base import Form, Param, Technique
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
from kernel_scientist.knowledge.techniques.gemm.precision import _dot_line
from kernel_scientist.knowledge.techniques.gemm.split_k import WS_CONFLICT, WS_SWITCH_MARK

_PREPASS_KERNEL = '''
# region: prepass_kernel
@triton.jit
def fp8_to_fp16_kernel(a_ptr, b_ptr, a16_ptr, b16_ptr, NA, NB, SCALE, BLOCK: tl.constexpr):
    """Element-for-element fp8 -> fp16 of both operands in one launch (e4m3 fits fp16 exactly),
    times SCALE: 1, or 0.5 for e4m3fnuz bytes read as e4m3fn (fp8_flavour; exact either way)."""
    pid = tl.program_id(0)
    blocks_a = tl.cdiv(NA, BLOCK)
    if pid < blocks_a:
        offs = pid * BLOCK + tl.arange(0, BLOCK)
        mask = offs < NA
        tl.store(a16_ptr + offs, tl.load(a_ptr + offs, mask=mask).to(tl.float16) * SCALE, mask=mask)
    else:
        offs = (pid - blocks_a) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < NB
        tl.store(b16_ptr + offs, tl.load(b_ptr + offs, mask=mask).to(tl.float16) * SCALE, mask=mask)


_FP16_SCRATCH = {}  # (shapes, strides, device) -> the two fp16 buffers; scratch only, never a result


def to_fp16(a, b, scale=1.0):
    """fp16 copies of a and b (times ``scale``) with the same strides, in buffers reused while the
    shape repeats."""
    key = (a.shape, a.stride(), b.shape, b.stride(), a.device)
    buffers = _FP16_SCRATCH.get(key)
    if buffers is None:
        _FP16_SCRATCH.clear()
        buffers = (torch.empty_strided(a.shape, a.stride(), dtype=torch.float16, device=a.device),
                   torch.empty_strided(b.shape, b.stride(), dtype=torch.float16, device=b.device))
        _FP16_SCRATCH[key] = buffers
    a16, b16 = buffers
    na, nb = a.numel(), b.numel()
    grid = (triton.cdiv(na, 4096) + triton.cdiv(nb, 4096),)
    fp8_to_fp16_kernel[grid](a, b, a16, b16, na, nb, scale, BLOCK=4096)
    return a16, b16
# endregion: prepass_kernel
'''


# The seed's fp8_flavour and what the pre-pass makes of it: the scale op on a's scales costs a launch
# per call and stops launch replay (replay.py); the pre-pass halves both operands as it converts.
_FLAVOUR_SEED = """
# The public generator draws e4m3fnuz on every platform, and Triton on NVIDIA cannot load it.
# Same bit layout, exponent bias 8 instead of 7: every fnuz code but three reads as an e4m3fn
# code of exactly twice its value (0x80, fnuz's NaN, would read as -0; 0x7F/0xFF, fnuz's
# +-240, as NaN; a standard normal never draws them). So the bytes are reinterpreted and the
# halving of both operands is folded into a's scales. ROCm loads fnuz natively.
if a.dtype == torch.float8_e4m3fnuz and not torch.version.hip:
    a, b = a.view(torch.float8_e4m3fn), b.view(torch.float8_e4m3fn)
    a_scale = a_scale * 0.25
"""
_FLAVOUR_IN_PREPASS = """
# The public generator draws e4m3fnuz on every platform, and Triton on NVIDIA cannot load it.
# Same bit layout, exponent bias 8 instead of 7: every fnuz code but three reads as an e4m3fn
# code of exactly twice its value (0x80, fnuz's NaN, would read as -0; 0x7F/0xFF, fnuz's
# +-240, as NaN; a standard normal never draws them). So the bytes are reinterpreted (a view, no
# device work) and the fp16 pre-pass halves each operand as it converts: no scale op per call.
halving = 1.0
if a.dtype == torch.float8_e4m3fnuz and not torch.version.hip:
    a, b = a.view(torch.float8_e4m3fn), b.view(torch.float8_e4m3fn)
    halving = 0.5
"""


def _dedented(lines: list[str]) -> str:
    return textwrap.dedent("\n".join(lines)).strip()


def _copies_layout(source: str) -> bool:
    """Does the kernel copy its operands to another layout first (layout_prepass)?"""
    return has(source, "layout") and any(
        line.strip() and not line.strip().startswith("#") for line in body(source, "layout")
    )


class ConversionPrepass(Technique):
    name = "fp16_prepass"
    title = "fp8 -> fp16 conversion in a pre-pass"
    category = "precision"
    prose = (
        "On Hopper the fp8 tensor cores accumulate with reduced precision and miss a tight fp32 "
        "tolerance; 16-bit MMAs accumulate in fp32. e4m3 values convert to fp16 exactly, so an "
        "fp16 GEMM with the per-block scales applied in fp32 is as exact as the fp32 reference. "
        "Where to convert: inside the K loop every tile is converted again each time it is reused "
        "(once per output tile that reads it), through registers and back to shared memory; a "
        "pre-pass kernel converts each element once (read 1 byte, write 2: about 3 bytes per "
        "element at HBM speed) and leaves the GEMM a plain fp16 problem that TMA can feed. The "
        "pre-pass costs one extra launch (host time on small shapes) and the fp16 copies double "
        "the GEMM's operand traffic, which only matters where the GEMM is memory-bound."
    )
    prior_min, prior_max = 0.0, 0.4
    novelty = 0.6
    vendors = ("nvidia",)
    form = Form(
        {"operands": "fp16"},
        "fp16 pre-pass",
        [
            "add a Triton kernel converting a and b from fp8 to fp16 in one launch (strides kept)",
            "convert both operands at the start of custom_kernel, into buffers reused per shape",
            "the GEMM's dot becomes a plain fp16 tl.dot with the scales applied per 128-deep K block",
        ],
    )

    def detect(self, source: str) -> dict[str, Param] | None:
        require(source, "prepare", "dot", why=self.name)
        return {"operands": "fp16"} if has(source, "prepass") else None

    def apply(self, source: str, params: dict[str, Param], reference: str | None = None) -> str:
        if self._has_form(source, params):
            return source
        require(source, "select_config", why=self.name)
        if _copies_layout(source):
            raise NotApplicable(
                f"{self.name}: the layout pre-pass copies the operands already; undo it first "
                "(layout_prepass 'none') so one pass both converts and keeps the layout"
            )
        line, lhs, a, b = _dot_line(source)
        source = replace_line(source, "dot", line, f"{lhs}tl.dot({a}, {b})")
        source = insert_after_region(source, "select_config", _PREPASS_KERNEL)
        call = "to_fp16(a, b)"
        if has(source, "fp8_flavour") and _dedented(body(source, "fp8_flavour")) == _FLAVOUR_SEED.strip():
            source = replace_body(source, "fp8_flavour", _FLAVOUR_IN_PREPASS)
            call = "to_fp16(a, b, halving)"
        return insert(
            source,
            "prepare",
            f"""
            # region: prepass
            a, b = {call}  # one bandwidth-bound pass; the GEMM then multiplies fp16 tiles
            # endregion: prepass
            """,
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


class TensorDescriptors(Technique):
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

    def detect(self, source: str) -> dict[str, Param] | None:
        require(source, "work_preamble", "loads", "epilogue", why=self.name)
        if has(source, "descriptors"):
            return {"tma": True}
        if has(source, "split_k_pid"):  # the host-reduction split-K writes K planes, c_desc one
            raise NotApplicable(f"{self.name}: the epilogue writes split-K planes; apply it before split_k")
        return None

    def apply(self, source: str, params: dict[str, Param], reference: str | None = None) -> str:
        if self._has_form(source, params):
            return source
        require(source, "select_config", "prepare", why=self.name)
        if _copies_layout(source):
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
        source = replace_line(source, "loads", line_a, "a = a_desc.load([k0, pid_m * BLOCK_M]).T")
        source = replace_line(source, "loads", line_b, "b = b_desc.load([k0, pid_n * BLOCK_N])")
        source = insert(
            source,
            "work_preamble",
            """
            # region: descriptors
            # The operands are column-major: [K, M] and [K, N] row-major views, unit inner stride.
            a_desc = tl.make_tensor_descriptor(a_ptr, shape=[K, M], strides=[stride_ak, 1], block_shape=[BLOCK_K, BLOCK_M])
            b_desc = tl.make_tensor_descriptor(b_ptr, shape=[K, N], strides=[stride_bk, 1], block_shape=[BLOCK_K, BLOCK_N])
            c_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[stride_cm, 1], block_shape=[BLOCK_M, BLOCK_N])
            # endregion: descriptors
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
_PERSISTENT_LOOP = re.compile(r"^for work_id in (?:tl\.)?range\(tl\.program_id\(0\), num_work, NUM_SMS.*\):$")


def persistent_loop(source: str, technique: str) -> str:
    """The header line of the persistent loop in region ``tile``, which the techniques that rewrite
    that loop start from; NotApplicable, naming ``technique``, where the kernel has none."""
    require(source, "tile", why=technique)
    for line in body(source, "tile"):
        if _PERSISTENT_LOOP.match(line.strip()):
            return line.strip()
    raise NotApplicable(
        f"{technique}: no persistent loop (`for work_id in range(tl.program_id(0), num_work, "
        "NUM_SMS)`); apply persistent first"
    )


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

    def _loop(self, source: str) -> tuple[str, tuple[int, int] | None]:
        """The persistent loop's header and, on a stream-K kernel, the span of stream_k's copy of
        the kernel as it was, whose loop this technique rewrites there (the stream-K body cannot
        be warp-specialised)."""
        require(source, "tile", why=self.name)
        if not has(source, "stream_k_schedule"):
            return persistent_loop(source, self.name), None
        twin = find_twin(source, gemm_kernel(source, self.name)["name"])
        if twin is None:  # stream-K written before the copy was kept for a plain loop too
            raise NotApplicable(f"{self.name}: {STREAM_K_CONFLICT}")
        _, start, end = twin
        line = next((ln.strip() for ln in source[start:end].splitlines() if _PERSISTENT_LOOP.match(ln.strip())), None)
        if line is None:
            raise NotApplicable(f"{self.name}: stream_k's copy of the kernel has no persistent loop")
        return line, (start, end)

    def detect(self, source: str) -> dict[str, Param] | None:
        loop = self._loop(source)[0]
        if WS_SWITCH_MARK in loop:
            raise NotApplicable(f"{self.name}: the tuner chooses the loop per shape here (ws_per_shape)")
        return {"warp_specialize": "warp_specialize=True" in loop}

    def forms(self, source: str) -> list[Form]:
        return list(self._FORMS.values())

    def apply(self, source: str, params: dict[str, Param], reference: str | None = None) -> str:
        on = self._param(params, "warp_specialize", (True, False))
        loop, twin = self._loop(source)
        if ("warp_specialize=True" in loop) == on:
            return source
        if on and has(source, "split_k_reduce"):
            raise NotApplicable(f"{self.name}: {WS_CONFLICT}")
        header = (
            "for work_id in tl.range(tl.program_id(0), num_work, NUM_SMS, flatten=True, warp_specialize=True):"
            if on
            else "for work_id in range(tl.program_id(0), num_work, NUM_SMS):"
        )
        if twin is not None:
            start, end = twin
            text = source[start:end]
            return source[:start] + text.replace(loop, header, 1) + source[end:]
        return replace_line(source, "tile", loop, header)


_SWITCHES = re.compile(r"^TUNING_SWITCHES = \{(?P<items>.*)\}$", re.M)


def _add_switch(source: str, name: str) -> str:
    """Add ``name: (0, 1)`` to the tuner's TUNING_SWITCHES (the caller's detect checked it is there)."""
    found = _SWITCHES.search(source)
    assert found is not None
    items = found.group("items").strip()
    switches = f'TUNING_SWITCHES = {{{items}{", " if items else ""}"{name}": (0, 1)}}'
    return source[: found.start()] + switches + source[found.end() :]


_TRIALS = (
    "for (block_m, block_n, warps, stages), choice in itertools.product(TUNING_SPACE, itertools.product(*switches)):"
)


def _require_switches(source: str, name: str) -> None:
    """Refuse a kernel without the in-submission tuner that times structure switches (where
    ``_add_switch`` puts one)."""
    if not has(source, "tuning") or _SWITCHES.search(source) is None or _TRIALS not in source:
        raise NotApplicable(
            f"{name}: the kernel has no in-submission tuner with structure switches; apply in_submission_tuning first"
        )


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
        loop, _ = WarpSpecialize()._loop(source)
        if WS_SWITCH_MARK in loop:
            return {"per_shape": True}
        _require_switches(source, self.name)
        return None

    def apply(self, source: str, params: dict[str, Param], reference: str | None = None) -> str:
        if self._has_form(source, params):
            return source
        if has(source, "split_k_reduce"):
            raise NotApplicable(f"{self.name}: {WS_CONFLICT}")
        header = f"for work_id in tl.range(tl.program_id(0), num_work, NUM_SMS, flatten=True, {WS_SWITCH_MARK}):"
        source = add_tunable(source, "WS_LOOP", 1)
        loop, twin = WarpSpecialize()._loop(source)
        if twin is None:
            source = replace_line(source, "tile", loop, header)
        else:
            start, end = twin
            text = source[start:end]
            if TWIN_SWITCH not in text:
                raise NotApplicable(f"{self.name}: stream_k's copy of the kernel has no STREAM_K parameter line")
            text = text.replace(loop, header, 1).replace(TWIN_SWITCH, "    WS_LOOP: tl.constexpr,\n" + TWIN_SWITCH, 1)
            source = source[:start] + text + source[end:]
        source = _add_switch(source, "WS_LOOP")
        indent = source[: source.index(_TRIALS)].rsplit("\n", 1)[1]
        skip = (
            f'{indent}    if dict(choice).get("STREAM_K") and not dict(choice).get("WS_LOOP", 1):\n'
            f"{indent}        continue  # the stream-K kernel has no warp-specialised loop: its WS_LOOP 1 trial is the one\n"
        )
        at = source.index(_TRIALS) + len(_TRIALS) + 1
        return source[:at] + skip + source[at:]
