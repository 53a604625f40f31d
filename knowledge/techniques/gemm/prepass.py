"""The fp8 -> fp16 conversion in a pre-pass, and the names of the converter that later techniques
rewrite (lean_host launches it through the launch cache, dependent_launch lets the GEMM start while
it ends, operand_per_shape moves it into the tuner's launch).

Why: Hopper's fp8 tensor cores accumulate with reduced precision, so a kernel that must match an
fp32 reference at atol 1e-3 multiplies in 16 bits (e4m3 converts to fp16 exactly) and promotes
each 128-deep scale block into an fp32 accumulator. Converting inside the K loop costs registers
and a round trip through shared memory for every tile, every time a tile is reused; converting
once in a bandwidth-bound pre-pass costs two bytes written per element once, and lets the GEMM feed
the tensor cores straight from TMA copies (docs/results.md#what-the-best-kernel-is-made-of).
NVIDIA only: the MI300X accumulates fp8 in fp32.
"""

from __future__ import annotations

import re
import textwrap

from kernel_scientist.knowledge._base import Form, Structure
from kernel_scientist.knowledge._regions import (
    NotApplicable,
    body,
    has,
    insert,
    insert_after_region,
    replace_body,
    replace_line,
    require,
)
from kernel_scientist.knowledge.techniques.gemm._names import PREPASS, PREPASS_KERNEL
from kernel_scientist.knowledge.techniques.gemm.layout import copies_operands
from kernel_scientist.knowledge.techniques.gemm.precision import dot_line

CONVERTER = "to_fp16"  # the host function: fp16 copies of a and b
CONVERTER_KERNEL = "fp8_to_fp16_kernel"  # the Triton kernel it launches
CONVERTER_SIGNATURE = f"def {CONVERTER}(a, b, scale=1.0):"
CONVERTER_COUNTS = "na, nb = a.numel(), b.numel()"  # a statement of the host function's body
CONVERTER_ARGS = "a, b, a16, b16, na, nb, scale"  # the kernel's arguments but its BLOCK
CONVERTER_BLOCK = 4096
PREPASS_LAUNCH = f"{CONVERTER_KERNEL}[grid]({CONVERTER_ARGS}, BLOCK={CONVERTER_BLOCK})"

_PREPASS_KERNEL = f'''
# region: {PREPASS_KERNEL}
@triton.jit
def {CONVERTER_KERNEL}(a_ptr, b_ptr, a16_ptr, b16_ptr, NA, NB, SCALE, BLOCK: tl.constexpr):
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


_FP16_SCRATCH = {{}}  # (shapes, strides, device) -> the two fp16 buffers; scratch only, never a result


{CONVERTER_SIGNATURE}
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
    {CONVERTER_COUNTS}
    grid = (triton.cdiv(na, {CONVERTER_BLOCK}) + triton.cdiv(nb, {CONVERTER_BLOCK}),)
    {PREPASS_LAUNCH}
    return a16, b16
# endregion: {PREPASS_KERNEL}
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
_CALL = re.compile(rf"^a, b = {CONVERTER}\((?P<args>[^)]*)\)")


def conversion_arguments(source: str) -> str | None:
    """The arguments of the conversion call that region prepass holds (``a, b``, and ``halving``
    where the pre-pass halves e4m3fnuz operands); None where the region is not that one call."""
    call = next((_CALL.match(ln.strip()) for ln in body(source, PREPASS) if ln.strip()), None)
    return None if call is None else call["args"]


def _dedented(lines: list[str]) -> str:
    return textwrap.dedent("\n".join(lines)).strip()


class ConversionPrepass(Structure):
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
    mark, needs = PREPASS, ("prepare", "dot")

    def install(self, source: str) -> str:
        require(source, "select_config", why=self.name)
        if copies_operands(source):
            raise NotApplicable(
                f"{self.name}: the layout pre-pass copies the operands already; undo it first "
                "(layout_prepass 'none') so one pass both converts and keeps the layout"
            )
        line, lhs, a, b = dot_line(source)
        source = replace_line(source, "dot", line, f"{lhs}tl.dot({a}, {b})")
        source = insert_after_region(source, "select_config", _PREPASS_KERNEL)
        call = f"{CONVERTER}(a, b)"
        if has(source, "fp8_flavour") and _dedented(body(source, "fp8_flavour")) == _FLAVOUR_SEED.strip():
            source = replace_body(source, "fp8_flavour", _FLAVOUR_IN_PREPASS)
            call = f"{CONVERTER}(a, b, halving)"
        return insert(
            source,
            "prepare",
            f"""
            # region: {PREPASS}
            a, b = {call}  # one bandwidth-bound pass; the GEMM then multiplies fp16 tiles
            # endregion: {PREPASS}
            """,
        )
