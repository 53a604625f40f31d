"""Where the GEMM kernel and stream_k's copy of it are in a source (shared by the techniques that
rewrite either: stream_k makes the copy, warp_specialize and dependent_launch rewrite it too)."""

from __future__ import annotations

import re

from kernel_scientist.knowledge._regions import NotApplicable, parse

# The GEMM kernel: its decorator, its def (parameters in region ``params``) to the end of region ``tile``.
_KERNEL = re.compile(
    r"^@triton\.jit[^\n]*\ndef (?P<name>\w+)\(\n[ \t]*# region: params\n.*?^[ \t]*# endregion: tile[ \t]*\n",
    re.M | re.S,
)
# The copy's name is the kernel's plus a suffix; "_ws" is the one the catalogue wrote before the
# copy could be a plain loop too (kernels in earlier blackboards keep it).
_TWIN_SUFFIXES = ("_whole", "_ws")
MARKER = re.compile(r"^\s*# (?:end)?region\b")
TWIN_NOTE_START = "# The kernel as it stood before stream_k"  # how the copy's comment begins
TWIN_SWITCH = "    STREAM_K: tl.constexpr,  # the tuner's switch: this kernel runs at 0"  # the copy's last parameter


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


def _plain(lines: list[str]) -> str:
    """Region body lines without their nested markers: as they read in the copy."""
    return "\n".join(ln for ln in lines if not MARKER.match(ln))


def mirror_into_twin(before: str, after: str) -> str:
    """``after`` (a technique's rewrite of ``before``) with the same change made to stream_k's copy
    of the kernel, where the copy reads as the rewritten part did: every region of the GEMM kernel
    whose text changed and appears once, verbatim, in the copy (tile order, scale folding, loads)
    is replaced there too, and new kernel parameters are added to it. Parts that stream_k itself
    rewrote (the loop, the K bounds) no longer read the same, so they are left alone; so is a copy
    the technique rewrote itself."""
    if before == after or TWIN_NOTE_START not in after:
        return after
    try:
        name = gemm_kernel(after, "stream_k")["name"]
        old, new = find_twin(before, name), find_twin(after, name)
        old_kernel, new_kernel = gemm_kernel(before, "stream_k")[0], gemm_kernel(after, "stream_k")[0]
        old_regions, new_regions = parse(old_kernel), parse(new_kernel)
    except NotApplicable:
        return after
    if old is None or new is None or before[old[1] : old[2]] != after[new[1] : new[2]]:
        return after
    twin = after[new[1] : new[2]]
    old_lines, new_lines = old_kernel.splitlines(), new_kernel.splitlines()
    for region, where in old_regions.items():
        if region == "params" or region not in new_regions:
            continue
        was = _plain(old_lines[where.start + 1 : where.end])
        now_at = new_regions[region]
        now = _plain(new_lines[now_at.start + 1 : now_at.end])
        if was != now and was.strip() and twin.count(was) == 1:
            twin = twin.replace(was, now)
    if "params" in old_regions and "params" in new_regions:
        p_old, p_new = old_regions["params"], new_regions["params"]
        had = {ln.strip() for ln in old_lines[p_old.start + 1 : p_old.end]}
        added = [ln for ln in new_lines[p_new.start + 1 : p_new.end] if ln.strip() and ln.strip() not in had]
        if added and TWIN_SWITCH in twin:
            twin = twin.replace(TWIN_SWITCH, "\n".join(added) + "\n" + TWIN_SWITCH, 1)
    return after[: new[1]] + twin + after[new[2] :]
