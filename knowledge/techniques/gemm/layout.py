"""Layout pre-pass: copy the column-major fp8 operands to K-contiguous rows before the GEMM.

The kernel already loads through the strides it is given, so the rewrite only has to insert the
copies; Triton then specialises the K stride to 1 and emits wide vector loads along K.
"""

from __future__ import annotations

from kernel_scientist.blackboard.records import Param
from kernel_scientist.knowledge._base import Form, Technique
from kernel_scientist.knowledge._regions import NotApplicable, body, has, insert, replace_body, require
from kernel_scientist.knowledge.techniques.gemm._names import DESCRIPTORS, LAYOUT, PREPASS

_COPIES = {
    "ab": ("a = a.contiguous()", "b = b.contiguous()"),
    "a": ("a = a.contiguous()",),
    "b": ("b = b.contiguous()",),
    "none": (),  # undo: on Hopper an fp16-upcast kernel was faster on the inputs as given
}


def copies_operands(source: str) -> bool:
    """Does the kernel copy its operands to another layout first (a layout region with code)?"""
    return has(source, LAYOUT) and any(
        line.strip() and not line.strip().startswith("#") for line in body(source, LAYOUT)
    )


class LayoutPrepass(Technique):
    name = "layout_prepass"
    title = "K-contiguous layout pre-pass"
    category = "memory"
    prose = (
        "The inputs arrive column-major: consecutive bytes run along m (or n), while the matrix "
        "instructions consume operands along K. Loading such tiles directly gives narrow, strided "
        "accesses or needs a transpose through LDS. Copying a and b to K-contiguous rows first "
        "(one pass over m*k + n*k bytes, a few microseconds at 5.3 TB/s) lets every tile load be a "
        "16-byte vector along K. Every winning MI300X entry transposed its inputs first. The copy "
        "is a fixed cost that matters most for the k = 256 and 512 shapes, where the GEMM itself "
        "is only a few microseconds."
    )
    prior_min, prior_max = 0.0, 0.5
    novelty = 0.2

    def forms(self, source: str) -> list[Form]:
        described = {"ab": "a and b", "a": "a only", "b": "b only"}
        undo = Form(
            {"operands": "none"},
            "no K-contiguous copies",
            ["remove the layout region's copies: the kernel loads the column-major inputs as given"],
        )
        return ([undo] if has(source, LAYOUT) else []) + [
            Form(
                {"operands": key},
                f"K-contiguous {described[key]}",
                [
                    f"copy {described[key]} to K-contiguous (row-major) layout on the host before the launch",
                    "the kernel loads through the new strides (K stride 1)",
                ],
            )
            for key in ("ab", "a", "b")
        ]

    def detect(self, source: str) -> dict[str, Param] | None:
        require(source, "prepare", why=self.name)
        if has(source, DESCRIPTORS) or has(source, PREPASS):
            # Tensor descriptors are built for the inputs' own layout, and the fp16 pre-pass keeps
            # it: a copy to K-contiguous rows would silently break both.
            raise NotApplicable(
                f"{self.name}: the kernel reads the column-major inputs through descriptors "
                "or a conversion pre-pass; their layout is fixed"
            )
        if not has(source, LAYOUT):
            return None
        text = "\n".join(body(source, LAYOUT))
        operands = "".join(name for name in "ab" if f"{name} = {name}.contiguous()" in text)
        return {"operands": operands or "none"}

    def apply(self, source: str, params: dict[str, Param], reference: str | None = None) -> str:
        key = self._param(params, "operands", tuple(_COPIES))
        self.detect(source)
        prepare = "\n".join(body(source, "prepare"))
        if "a, b, a_scale, b_scale, c = data" not in prepare:
            raise NotApplicable(f"{self.name}: region prepare must unpack `a, b, a_scale, b_scale, c = data`")
        if key == "none":
            text = "# no layout copies: the kernel loads the column-major inputs through their strides"
        else:
            text = "\n".join(
                [
                    "# K-contiguous copies: each row of a (b) becomes k consecutive bytes, so tile loads",
                    "# are wide vectors along K, the order the matrix instructions consume.",
                    *_COPIES[key],
                ]
            )
        if has(source, LAYOUT):
            return replace_body(source, LAYOUT, text)
        return insert(source, "prepare", f"# region: {LAYOUT}\n{text}\n# endregion: {LAYOUT}")


class _HopperLayout(LayoutPrepass, replaces_on="nvidia"):
    """The NVIDIA form: K-contiguous copies matter for fp8 MMAs only."""

    prose = (
        "Hopper's wgmma reads 16-bit operands from shared memory in either major order, but fp8 "
        "operands only K-major. For a kernel that multiplies fp8 tiles (precise accumulation) on "
        "these column-major inputs, copying a and b to K-contiguous rows first saves a transpose "
        "per tile; a kernel that converts to fp16 gains nothing from the copy and still pays its "
        "extra pass over both operands (and it blocks tensor descriptors over the inputs as given)."
    )
    prior_min, prior_max = -0.1, 0.2
