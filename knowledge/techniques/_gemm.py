"""Where the GEMM kernel and stream_k's copy of it are in a source (shared by the techniques that
rewrite either: stream_k makes the copy, warp_specialize and dependent_launch rewrite it too)."""

from __future__ import annotations

import re

from .._base import NotApplicable

# The GEMM kernel: its decorator, its def (parameters in region ``params``) to the end of region ``tile``.
_KERNEL = re.compile(
    r"^@triton\.jit[^\n]*\ndef (?P<name>\w+)\(\n[ \t]*# region: params\n.*?^[ \t]*# endregion: tile[ \t]*\n",
    re.M | re.S,
)
# The copy's name is the kernel's plus a suffix; "_ws" is the one the catalogue wrote before the
# copy could be a plain loop too (kernels in earlier blackboards keep it).
_TWIN_SUFFIXES = ("_whole", "_ws")


def gemm_kernel(source: str, technique: str) -> re.Match[str]:
    """The GEMM kernel's text (decorator to the end of region ``tile``), its name as ``["name"]``;
    NotApplicable, naming ``technique``, where there is none."""
    found = _KERNEL.search(source)
    if found is None:
        raise NotApplicable(f"{technique}: the GEMM kernel (a @triton.jit def with region params) was not found")
    return found


def twin_name(name: str) -> str:
    """The name stream_k gives its copy of kernel ``name`` (whole tiles, the loop as it was)."""
    return name + _TWIN_SUFFIXES[0]


def find_twin(source: str, name: str) -> tuple[str, int, int] | None:
    """(name, start, end) of stream_k's copy of GEMM kernel ``name``: from its ``def`` line to the
    GEMM kernel's decorator, which stream_k puts right after it. None where there is no copy."""
    end = gemm_kernel(source, "stream_k").start()
    for suffix in _TWIN_SUFFIXES:
        found = re.search(rf"^def {name}{suffix}\($", source[:end], re.M)
        if found:
            return name + suffix, found.start(), end
    return None
