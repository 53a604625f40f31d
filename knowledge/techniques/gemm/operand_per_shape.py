"""Which operands the fp16 pre-pass converts, chosen per shape by the in-submission tuner.

Why: the pre-pass reads one byte and writes two per element of both operands. Where one operand is
large and the other small (many rows, few columns, long K), a's half of that traffic is a large part
of the call; the GEMM can instead load a's fp8 tiles by TMA and convert them in registers, at the
price of a conversion per tile and per reuse. Neither wins everywhere
(docs/results.md#what-the-best-kernel-is-made-of), so an ``A_FP8`` constexpr switches a's
conversion into the kernel, the pre-pass moves into ``launch(cfg)`` so that the tuner times it with
the GEMM it feeds, and the tuner picks per shape and structure. No measured number lives here; the
tuner measures on the user's GPU.
"""

from __future__ import annotations

import re

from kernel_scientist.knowledge._base import Form, Structure
from kernel_scientist.knowledge._regions import (
    NotApplicable,
    add_tunable,
    body,
    has,
    insert,
    insert_near,
    replace_body,
    require,
)
from kernel_scientist.knowledge.techniques.gemm._names import DESCRIPTORS, PREPASS, PREPASS_KERNEL
from kernel_scientist.knowledge.techniques.gemm.hopper import A_TILE_LOAD
from kernel_scientist.knowledge.techniques.gemm.prepass import (
    CONVERTER,
    CONVERTER_COUNTS,
    CONVERTER_SIGNATURE,
    conversion_arguments,
)
from kernel_scientist.knowledge.techniques.gemm.tuning import add_switch, require_switches

_LAUNCH_ARGS = re.compile(r"^(?P<indent>\s*)a, b, a_scale, b_scale,", re.M)
_COUNTS = f"    {CONVERTER_COUNTS}\n"  # a line of the converter's host function, which this rewrites


class OperandPerShape(Structure):
    name = "operand_per_shape"
    title = "Which operands the fp16 pre-pass converts, chosen per shape by the in-submission tuner"
    category = "tuning"
    prose = (
        "The fp16 pre-pass costs three bytes of memory traffic per element of both operands. Where "
        "a is large and b small (many rows, few columns, long K) a's share of that traffic is a "
        "large part of the call, and converting a's fp8 tiles in registers inside the GEMM (loaded "
        "by TMA at one byte per element) is cheaper; where the tiles of a are reused by many "
        "output tiles the repeated conversion costs more than the pre-pass saves. So an A_FP8 "
        "constexpr makes the kernel convert a itself, the pre-pass then converts b alone (with "
        "e4m3fnuz inputs it takes a's halving too: exact powers of two), and the pre-pass runs "
        "inside launch(cfg) so that the in-submission tuner times both forms, pre-pass included, "
        "with every setting on a shape's first call, on both structures where stream-K made two. "
        "Needs the pre-pass, tensor descriptors and the tuner."
    )
    # A switch the tuner times loses only by its own noise; it gains on the shapes where a's half
    # of the pre-pass is a large share of the call, a few of a typical set.
    prior_min, prior_max = -0.01, 0.04
    novelty = 0.6
    vendors = ("nvidia",)
    form = Form(
        {"per_shape": True},
        "a's conversion per shape",
        [
            "add an A_FP8 constexpr (0) to the config, select_config and the kernel(s)",
            "in the K loop: if A_FP8, convert a's fp8 tile to fp16 in registers after its TMA load",
            "move the pre-pass into launch(cfg): b always, a only where A_FP8 is 0",
            "add A_FP8 (0, 1) to TUNING_SWITCHES: every setting is timed with both, on every structure",
        ],
    )

    mark, needs = "prepass_per_shape", ("prepare", "loads")

    def refuse(self, source: str) -> None:
        if not has(source, PREPASS):
            raise NotApplicable(f"{self.name}: the kernel has no fp16 pre-pass; apply fp16_prepass first")
        if not has(source, DESCRIPTORS):
            raise NotApplicable(f"{self.name}: a's fp8 tiles come by tensor descriptor; apply tma_descriptors first")
        require_switches(source, self.name)

    def install(self, source: str) -> str:
        require(source, PREPASS_KERNEL, "grid", "launch", why=self.name)
        args = conversion_arguments(source)
        if args is None:
            raise NotApplicable(f"{self.name}: region prepass is not the one line `a, b = {CONVERTER}(...)`")
        if A_TILE_LOAD not in [ln.strip() for ln in body(source, "loads")]:
            raise NotApplicable(f"{self.name}: region loads has no `{A_TILE_LOAD}` line")
        launch = "\n".join(body(source, "launch"))
        if not _LAUNCH_ARGS.search(launch):
            raise NotApplicable(f"{self.name}: the launch does not pass `a, b, a_scale, b_scale, ...`")
        converter = "\n".join(body(source, PREPASS_KERNEL))
        if CONVERTER_SIGNATURE not in converter or _COUNTS not in converter + "\n":
            raise NotApplicable(f"{self.name}: {CONVERTER} is not the catalogue's (one scale, both operands)")

        # The converter: a may stay fp8; then b takes a's factor too (1 or 0.5, exact either way).
        source = source.replace(CONVERTER_SIGNATURE, f"def {CONVERTER}(a, b, scale=1.0, convert_a=True):", 1)
        source = source.replace(
            _COUNTS,
            _COUNTS
            + "    if not convert_a:  # a stays fp8 (the GEMM converts its tiles): b carries both factors\n"
            + "        na, scale = 0, scale * scale\n",
            1,
        )
        # The pre-pass moves into launch(cfg), where the tuner times it with the GEMM it feeds.
        source = replace_body(
            source,
            PREPASS,
            "# a and b stay fp8 here: launch(cfg) converts them as its setting says (operand_per_shape)",
        )
        source = insert(
            source,
            "grid",
            f"""
            # region: {self.mark}
            # The pre-pass runs per setting, so the tuner times it with the GEMM it feeds: b always,
            # a only where the kernel does not convert a's fp8 tiles itself (A_FP8).
            a16, b16 = {CONVERTER}({args}, convert_a=not cfg["A_FP8"])
            a_in = a if cfg["A_FP8"] else a16
            # endregion: {self.mark}
            """,
            at="start",
        )
        launch = "\n".join(body(source, "launch"))
        source = replace_body(source, "launch", _LAUNCH_ARGS.sub(r"\g<indent>a_in, b16, a_scale, b_scale,", launch))

        # The kernel converts a's tile in registers where A_FP8 (a compile-time branch).
        source = add_tunable(source, "A_FP8", 0)
        source = insert_near(
            source,
            "loads",
            A_TILE_LOAD,
            """
            if A_FP8:
                a = a.to(tl.float16)  # a's fp8 tile, converted here instead of in the pre-pass
            """,
            after=True,
        )
        return add_switch(source, "A_FP8")
