"""Folded block scales: one fused multiply-add per accumulator element and K block.

The task's scaled add, ``acc += partial * a_s[:, None] * b_s[None, :]``, costs two fp32 vector
operations per accumulator element every 128-deep K block (a multiply, then a fused multiply-add)
and keeps a vector of b scales alive: one per column the thread holds. b's scales change only
every 128 columns, so a tile no wider than that (and aligned to it: BLOCK_N a power of two up to
128) sees a single b scale per K block. Multiplying it into a's per-row scales first leaves one
FMA per element (``acc += partial * s[:, None]``), a scalar load instead of a vector of them, and
fewer live registers. The result is the same up to fp32 rounding order (a_s * b_s is rounded once
before the product instead of after it), far inside any bf16 tolerance.
"""

from __future__ import annotations

import re

from kernel_scientist.knowledge._base import Form, Structure
from kernel_scientist.knowledge._regions import NotApplicable, body, replace_line, require

# The scaled add as the seed writes it (and every technique before this one keeps it).
_SCALED_ADD = re.compile(r"^acc\s*\+=\s*(?P<p>\w+)\s*\*\s*a_s\[:,\s*None\]\s*\*\s*b_s\[None,\s*:\]$")

_FOLDED = """
# region: {mark}
if 128 % BLOCK_N == 0:
    # The tile lies inside one of b's 128-column scale blocks: one b scale per K block, folded
    # into a's row scales, so the scaled add is one FMA per accumulator element.
    b_one = tl.load(bs_ptr + ((pid_n * BLOCK_N) // 128) * stride_bsn + (k0 // 128) * stride_bsk)
    acc += {p} * (a_s * b_one)[:, None]
else:
    acc += {p} * a_s[:, None] * b_s[None, :]
# endregion: {mark}
"""


def _scaled_add(source: str) -> tuple[str, str]:
    """(line as written, name of the partial product) of the plain scaled add in region dot."""
    require(source, "dot", "loads", why="scale_fold")
    for line in body(source, "dot"):
        match = _SCALED_ADD.match(line.strip())
        if match:
            return line.strip(), match.group("p")
    raise NotApplicable("scale_fold: region dot has no `acc += partial * a_s[:, None] * b_s[None, :]`")


class ScaleFold(Structure):
    name = "scale_fold"
    title = "Folded block scales (one FMA per element per K block)"
    category = "schedule"
    prose = (
        "Every 128-deep K block ends in a scaled add of the block's product into the fp32 "
        "accumulator, and on Hopper that vector work runs between MMAs instead of beside them, "
        "so its instruction count adds to the main loop's time. Written as partial * a_s * b_s it "
        "is a multiply and a fused multiply-add per element, plus a vector of b scales per thread. "
        "b's scales change every 128 columns only: with BLOCK_N at most 128 a tile has one b scale "
        "per K block, which folds into a's row scales (BLOCK_M products, not BLOCK_M x BLOCK_N), "
        "leaving one FMA per element and one scalar load. Wider tiles keep the general form (a "
        "compile-time branch on BLOCK_N, so in-submission tuning may still try them). Exact up to "
        "fp32 rounding order. It pays most where the loop is bound by that vector work: large "
        "16-bit tiles on Hopper whose MMAs wait for each block's promotion."
    )
    prior_min, prior_max = -0.02, 0.15
    novelty = 0.5
    # Measured on Hopper only. On MI300X it would trim VALU work of the same kind, but nobody has
    # timed it there, and the simulated MI300X's model counts the scaled add per element, not its
    # instructions: a simulated campaign could only spend evaluations on it for nothing.
    vendors = ("nvidia",)
    form = Form(
        {"fold": True},
        "one b scale per tile",
        [
            "where BLOCK_N divides 128, load the tile's single b scale per K block as a scalar",
            "multiply it into a's row scales and add partial * s[:, None]: one FMA per element",
            "wider tiles keep the two-vector scaled add (a compile-time branch)",
        ],
    )

    mark, needs = "scale_fold", ("dot", "loads")

    def refuse(self, source: str) -> None:
        _scaled_add(source)  # NotApplicable where the scaled add is not the plain form

    def install(self, source: str) -> str:
        params_text = "\n".join(body(source, "params"))
        if "stride_bsn" not in params_text or "stride_bsk" not in params_text:
            raise NotApplicable(f"{self.name}: the kernel takes no stride_bsn / stride_bsk for b's scales")
        if "pid_n" not in "\n".join(body(source, "offsets")):
            raise NotApplicable(f"{self.name}: region offsets does not derive the columns from pid_n")
        line, partial = _scaled_add(source)
        return replace_line(source, "dot", line, _FOLDED.format(p=partial, mark=self.mark))
