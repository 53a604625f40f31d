"""Programmatic dependent launch: the GEMM's programs start while the pre-pass ends.

Two kernels on one stream normally run strictly one after the other: the GEMM is launched only
once the pre-pass has finished and its memory is flushed, and its programs then set up (shared
memory, barriers, tensor descriptors) before the first load. Hopper's programmatic dependent
launch (CUDA's programmatic stream serialisation; Triton's ``launch_pdl`` launch option) lets the
second kernel's programs start as soon as every program of the first has signalled
``griddepcontrol.launch_dependents``; the second waits with ``griddepcontrol.wait`` before reading
anything the first wrote, which then is complete and visible. The launch gap and the set-up hide
behind the pre-pass's last wave. Nothing else may run early: the wait stands before the GEMM's
first statement, and the pre-pass itself is launched as before, after everything earlier on the
stream. Off on other GPUs and in the interpreter (a compile-time branch).
"""

from __future__ import annotations

import re

from kernel_scientist.knowledge._base import Form, Structure
from kernel_scientist.knowledge._regions import (
    NotApplicable,
    body,
    has,
    insert,
    insert_after_region,
    insert_near,
    replace_body,
    require,
)
from kernel_scientist.knowledge._twin import find_twin, gemm_kernel
from kernel_scientist.knowledge.techniques.gemm._names import PREPASS_KERNEL
from kernel_scientist.knowledge.techniques.gemm.prepass import CONVERTER_BLOCK, CONVERTER_KERNEL
from kernel_scientist.knowledge.techniques.gemm.tuning import PREPASS_SETTINGS

MARK = "dependent_launch"

_FLAG = """
# region: dependent_launch
# Programmatic dependent launch where the GPU has it (Hopper and later, CUDA): the GEMM's programs
# start while the pre-pass ends and wait on griddepcontrol before reading its output.
PDL_ON = bool(torch.cuda.is_available() and not torch.version.hip and torch.cuda.get_device_capability()[0] >= 9)
# endregion: dependent_launch
"""

# The converter kernel's def line (its parameters end in BLOCK) and a one-line docstring, if any.
_PREPASS_DEF = re.compile(rf"^(def {CONVERTER_KERNEL}\(.*BLOCK: tl\.constexpr)\):\n(\s+\"\"\".*\"\"\"\n)?", re.M)
_WAIT = [
    "    if PDL:  # the pre-pass's output is complete and visible from here (a no-op off Hopper)",
    "        tl.extra.cuda.gdc_wait()",
]
_SIGNAL = [
    "    if PDL:  # the GEMM may launch once every program of this kernel is here",
    "        tl.extra.cuda.gdc_launch_dependents()",
]


def _gemm_names(source: str) -> list[str]:
    """The GEMM kernel and stream_k's copy of it, if any."""
    name = gemm_kernel(source, MARK)["name"]
    twin = find_twin(source, name)
    return [name] + ([twin[0]] if twin else [])


def _waiting(source: str, name: str, add_param: bool) -> str:
    """``source`` with kernel ``name`` waiting on griddepcontrol at the top of its body (and, where
    ``add_param``, taking the PDL constexpr: a copy without regions)."""
    lines = source.splitlines()
    start = lines.index(f"def {name}(")
    close = next(i for i in range(start, len(lines)) if lines[i] == "):")
    head = ["    PDL: tl.constexpr,"] if add_param else []
    return "\n".join(lines[:close] + head + [lines[close]] + _WAIT + lines[close + 1 :]) + "\n"


class DependentLaunch(Structure):
    name = MARK
    title = "Programmatic dependent launch between the pre-pass and the GEMM"
    category = "schedule"
    prose = (
        "A submission of two kernels (a conversion pre-pass, then the GEMM) pays, on every call, the "
        "gap between them: the GEMM is launched only after the pre-pass has finished and flushed, and "
        "its programs then allocate shared memory, initialise barriers and build tensor descriptors "
        "before their first load. Hopper's programmatic dependent launch (Triton's launch_pdl option) "
        "starts the GEMM's programs as soon as every pre-pass program has signalled "
        "griddepcontrol.launch_dependents; the GEMM waits with griddepcontrol.wait before reading "
        "anything, so the result is the same. It hides a few microseconds per call: most on short "
        "calls, little on long ones, where the GEMM's early programs can even take SMs the pre-pass's "
        "last wave would have used. A compile-time switch: off on other GPUs and in the interpreter."
    )
    prior_min, prior_max = -0.02, 0.06
    novelty = 0.6
    vendors = ("nvidia",)
    form = Form(
        {"pdl": True},
        "programmatic dependent launch",
        [
            "the pre-pass signals griddepcontrol.launch_dependents at its start",
            "the GEMM is launched with launch_pdl and waits on griddepcontrol.wait before its first statement",
            "a PDL constexpr, on where the GPU is a CUDA GPU of compute capability 9 or later",
        ],
    )

    mark, needs = MARK, ("select_config", "params")

    def refuse(self, source: str) -> None:
        if not has(source, PREPASS_KERNEL):
            raise NotApplicable(f"{self.name}: there is no pre-pass kernel before the GEMM (apply fp16_prepass first)")

    def install(self, source: str) -> str:
        require(source, PREPASS_KERNEL, "config", why=self.name)
        prepass = "\n".join(body(source, PREPASS_KERNEL))
        if prepass.count(PREPASS_SETTINGS) != 1:
            raise NotApplicable(
                f"{self.name}: the pre-pass is not launched through the launch cache (apply lean_host first)"
            )
        defined = _PREPASS_DEF.search(prepass)
        if defined is None:
            raise NotApplicable(f"{self.name}: the pre-pass kernel's parameters are not the catalogue's")
        names = _gemm_names(source)
        signal = (
            defined.group(0).replace(defined.group(1) + "):", defined.group(1) + ", PDL: tl.constexpr):", 1)
            + "\n".join(_SIGNAL)
            + "\n"
        )
        prepass = prepass.replace(defined.group(0), signal, 1).replace(
            PREPASS_SETTINGS, f'{{"BLOCK": {CONVERTER_BLOCK}, "PDL": PDL_ON}}', 1
        )
        source = replace_body(source, PREPASS_KERNEL, prepass)
        source = insert_after_region(source, "config", _FLAG)
        for entry in ('"PDL": PDL_ON,', '"launch_pdl": PDL_ON,'):
            source = insert_near(source, "select_config", "}", entry, after=False, extra="    ")
        source = insert(source, "params", "PDL: tl.constexpr,")
        for name in names:
            source = _waiting(source, name, add_param=name != names[0])
        return source
