"""In-submission tuning: the submission carries a small space of launch settings and picks, per
shape, the fastest on its first call of that shape.

Why: a campaign evaluation is scarce (seconds of GPU time, a rate limit), while timing one launch
setting inside the submission costs milliseconds. One evaluation of a tuning kernel explores the
whole space on every shape it meets, including shapes nobody tuned for, and no per-shape table
measured by hand is needed. A leaderboard harness calls each shape once untimed before timing it
(warm-up), so the search costs no score; it is bounded in time so a slow compile cannot stall a
test. The choice is cached per shape (launch settings only, never a result), which is also the
lean host path: later calls go straight to the launch.
"""

from __future__ import annotations

import ast
import functools
import re

from kernel_scientist.blackboard.records import Param
from kernel_scientist.knowledge._base import Form, Structure, Technique
from kernel_scientist.knowledge._regions import (
    NotApplicable,
    body,
    has,
    insert_after_region,
    parse,
    replace_body,
    require,
)
from kernel_scientist.knowledge.techniques.gemm._names import LAUNCH_CACHE, TUNING
from kernel_scientist.knowledge.techniques.gemm.prepass import (
    CONVERTER_ARGS,
    CONVERTER_BLOCK,
    CONVERTER_KERNEL,
    PREPASS_LAUNCH,
)

# Common Hopper/CDNA GEMM settings (tile, warps, pipeline depth), largest tiles first; general
# practice, not measured on this task: settings that do not fit a GPU fail to compile and are
# skipped at run time.
_SPACES = {
    "tiles6": (
        (128, 128, 8, 3),
        (128, 128, 4, 3),
        (64, 128, 4, 4),
        (128, 64, 4, 4),
        (64, 64, 4, 4),
        (128, 256, 8, 2),
    ),
    "tiles3": ((128, 128, 8, 3), (64, 128, 4, 4), (128, 64, 4, 4)),
}

_TUNER = '''
# region: {tuning}
TUNING_SPACE = {space}
TUNING_BUDGET_S = 30.0  # per shape: stop trying settings after this long (compiles included)
_TUNED = {{}}  # (m, n, k) -> the fastest launch settings; settings only, never a result
TIMED_LAUNCHES = 10  # per setting, each after the cache is overwritten; the median is kept
EVICT_BYTES = 256 << 20  # written before each timed launch: as triton's do_bench, more than Hopper's L2
_EVICT = []  # that buffer, made on the first tuning call; scratch only, never a result


# Structure switches of the kernel (stream_k's STREAM_K): where the settings carry one, every
# setting is timed with each of its values.
TUNING_SWITCHES = {{"STREAM_K": (0, 1)}}


def _timed(launch, trial):
    """Median milliseconds of TIMED_LAUNCHES launches of ``trial``, each timed alone after L2 is
    overwritten, as a scored call meets it (a flushed cache or fresh inputs, one call at a time),
    so a setting is not chosen for how it runs on operands a previous launch left in L2; after one
    launch that compiles it and two that wake the clocks. None where this GPU cannot run it (too
    much shared memory, say)."""
    try:
        launch(trial)  # compiles on first use
    except Exception:  # noqa: BLE001 - a setting this GPU cannot run is simply not a candidate
        return None
    launch(trial)
    launch(trial)
    if not _EVICT:
        _EVICT.append(torch.empty(EVICT_BYTES // 4, dtype=torch.int32, device="cuda"))
    pairs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(TIMED_LAUNCHES)]
    for start, end in pairs:
        _EVICT[0].zero_()
        start.record()
        launch(trial)
        end.record()
    pairs[-1][1].synchronize()
    times = sorted(start.elapsed_time(end) for start, end in pairs)
    return times[len(times) // 2]


def tuned(key, cfg, launch):
    """The fastest of TUNING_SPACE, each setting with each value of the structure switches the
    settings carry, timed with device events on the first call of a shape; settings that fail to
    compile are skipped."""
    best = _TUNED.get(key)
    if best is not None:
        return best
    if not torch.cuda.is_available():  # the CPU interpreter: keep the defaults
        _TUNED[key] = cfg
        return cfg
    began = time.perf_counter()
    switches = [[(name, value) for value in values] for name, values in TUNING_SWITCHES.items() if name in cfg]
    timings = []
    {trials}
        if time.perf_counter() - began > TUNING_BUDGET_S:
            break
        trial = dict(cfg, BLOCK_M=block_m, BLOCK_N=block_n, num_warps=warps, num_stages=stages, **dict(choice))
        ms = _timed(launch, trial)
        if ms is not None:
            timings.append((ms, len(timings), trial))
    best = min(timings)[2] if timings else cfg
    _TUNED[key] = best
    return best
# endregion: {tuning}
'''
# The tuner's trial loop (a setting and a choice of structure switches), where skip_trials puts a skip.
_TRIALS = (
    "for (block_m, block_n, warps, stages), choice in itertools.product(TUNING_SPACE, itertools.product(*switches)):"
)


def _one_line_literal(source: str, name: str, kind: type[ast.expr]) -> ast.expr | None:
    """The value of the module-level ``NAME = <literal of kind>`` written on one line, or None."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and [ast.unparse(target) for target in node.targets] == [name]
            and isinstance(node.value, kind)
            and node.col_offset == 0
            and node.lineno == node.end_lineno
        ):
            return node.value
    return None


@functools.lru_cache(maxsize=256)
def _switches(source: str) -> tuple[int, str, int] | None:
    """(line index, text between the braces, column after them) of the tuner's record of its
    structure switches, ``TUNING_SWITCHES = {...}``: a module-level dict literal on one line."""
    value = _one_line_literal(source, "TUNING_SWITCHES", ast.Dict)
    if value is None:
        return None
    line = source.split("\n")[value.lineno - 1]
    end = value.end_col_offset or 0
    return value.lineno - 1, line[value.col_offset + 1 : end - 1], end


@functools.lru_cache(maxsize=256)
def _space(source: str) -> tuple[int, tuple[tuple[int, ...], ...], int] | None:
    """(line index, settings, column after the literal) of the tuner's ``TUNING_SPACE = (...)``: a
    module-level tuple literal of (BLOCK_M, BLOCK_N, num_warps, num_stages) settings on one line."""
    value = _one_line_literal(source, "TUNING_SPACE", ast.Tuple)
    if value is None:
        return None
    try:
        settings = ast.literal_eval(value)
    except ValueError:
        return None
    if not all(isinstance(s, tuple) and len(s) == 4 and all(type(v) is int for v in s) for s in settings):
        return None
    return value.lineno - 1, settings, value.end_col_offset or 0


def add_setting(source: str, setting: tuple[int, int, int, int], technique: str) -> str:
    """``source`` with ``setting`` (BLOCK_M, BLOCK_N, num_warps, num_stages) among the settings its
    tuner times, last; unchanged where it is there already. Refused, naming ``technique``, where
    the tuner's space is not one tuple literal on one line."""
    found = _space(source)
    if found is None:
        raise NotApplicable(f"{technique}: the tuner's TUNING_SPACE is not a tuple of settings on one line")
    index, settings, end = found
    if setting in settings:
        return source
    lines = source.split("\n")
    lines[index] = f"TUNING_SPACE = {(*settings, setting)!r}" + lines[index][end:]
    return "\n".join(lines)


def require_switches(source: str, technique: str) -> None:
    """Refuse, naming ``technique``, a kernel without the in-submission tuner that times structure
    switches (where ``add_switch`` puts one)."""
    if not has(source, TUNING) or _switches(source) is None or _TRIALS not in source:
        raise NotApplicable(
            f"{technique}: the kernel has no in-submission tuner with structure switches; apply in_submission_tuning first"
        )


def add_switch(source: str, name: str) -> str:
    """``source`` with switch ``name`` timed at 0 and at 1 with every setting (``require_switches``
    has checked that the tuner is there)."""
    found = _switches(source)
    assert found is not None, "require_switches first"
    index, items, end = found
    lines = source.split("\n")
    items = items.strip()
    lines[index] = f'TUNING_SWITCHES = {{{items}{", " if items else ""}"{name}": (0, 1)}}' + lines[index][end:]
    return "\n".join(lines)


def skip_trials(source: str, condition: str, why: str) -> str:
    """``source`` with the tuner skipping each trial where ``condition`` holds (an expression over
    ``choice``, the trial's (switch, value) pairs); ``why`` is the skip's comment."""
    at = source.index(_TRIALS)
    indent = source[:at].rsplit("\n", 1)[1]
    skip = f"{indent}    if {condition}:\n{indent}        continue  # {why}\n"
    at += len(_TRIALS) + 1
    return source[:at] + skip + source[at:]


class InSubmissionTuning(Technique):
    name = "in_submission_tuning"
    title = "In-submission per-shape tuning of the launch settings"
    category = "tuning"
    prose = (
        "Instead of spending one scarce evaluation per launch setting, the submission carries a "
        "small space of settings (tile, warps, stages) and times each with device events on the "
        "first call of every new shape, each launch after the cache is overwritten as a scored "
        "call meets it (timed back to back, a setting is judged on operands left in L2), keeping "
        "the fastest (the idea behind triton.autotune, "
        "without its per-call overhead). Leaderboard harnesses run each shape once untimed first, "
        "so the search is free for the score, and shapes nobody tuned for still get a good "
        "setting. Bounded in time per shape; settings that cannot compile are skipped. Later "
        "calls of a shape find the setting in a dict: no Python work beyond the launch itself."
    )
    prior_min, prior_max = 0.0, 0.35
    novelty = 0.6
    most = 1  # one tuning space per kernel: the larger one first

    def detect(self, source: str) -> dict[str, Param] | None:
        require(source, "select_config", "grid", "launch", why=self.name)
        if not has(source, TUNING):
            return None
        for space, options in _SPACES.items():
            if f"TUNING_SPACE = {options!r}" in source:
                return {"space": space}
        return {"space": "custom"}

    def forms(self, source: str) -> list[Form]:
        if has(source, TUNING):
            return []
        return [
            Form(
                {"space": name},
                f"tune {len(options)} settings per shape",
                [
                    f"carry {len(options)} launch settings {list(options)} (BLOCK_M, BLOCK_N, warps, stages)",
                    "on the first call of a shape time each with device events, each launch after L2 is overwritten; keep the fastest",
                    "wrap the grid and launch code in a local launch(cfg) function",
                ],
            )
            for name, options in _SPACES.items()
        ]

    def apply(self, source: str, params: dict[str, Param], reference: str | None = None) -> str:
        space = self._param(params, "space", tuple(_SPACES))
        if has(source, TUNING):
            raise NotApplicable(f"{self.name}: the kernel tunes itself already")
        regions = require(source, "select_config", "grid", "launch", "prepare", why=self.name)
        grid, launch = regions["grid"], regions["launch"]
        if launch.start != grid.end + 1 or grid.indent != launch.indent:
            raise NotApplicable(f"{self.name}: regions grid and launch must be adjacent")
        lines = source.splitlines()
        indent = grid.indent
        moved = ["    " + line if line.strip() else "" for line in lines[grid.start : launch.end + 1]]
        wrapped = (
            [f"{indent}def launch(cfg):"]
            + moved
            + [f"{indent}cfg = tuned((m, n, k), cfg, launch)", f"{indent}launch(cfg)"]
        )
        source = "\n".join(lines[: grid.start] + wrapped + lines[launch.end + 1 :]) + "\n"
        parse(source)  # the markers still nest
        if "\nimport time\n" not in source:
            source = source.replace("\nimport torch\n", "\nimport time\n\nimport torch\n", 1)
        if "\nimport itertools\n" not in source:
            source = source.replace("\nimport time\n", "\nimport itertools\nimport time\n", 1)
        return insert_after_region(
            source, "select_config", _TUNER.format(space=repr(_SPACES[space]), tuning=TUNING, trials=_TRIALS)
        )


LAUNCH_CACHED = "launch_cached"  # the launch cache's entry point
_LAUNCH_CACHE = f'''
# region: {LAUNCH_CACHE}
_COMPILED = {{}}  # (kernel, grid, settings, integer arguments) -> its compiled launcher; never a result


def _direct(compiled, grid):
    """The compiled kernel's own C launcher with its fixed arguments bound: a later call passes
    only the current stream and the kernel's arguments. Triton's runner would also look up the
    device and build launch metadata for profiling hooks on every call. None where this Triton's
    compiled kernel has no such launcher (then its runner is used)."""
    run, function = getattr(compiled, "run", None), getattr(compiled, "function", None)
    if run is None or function is None or not torch.cuda.is_available():
        return None
    try:
        driver = triton.runtime.driver.active
    except (AttributeError, RuntimeError):  # no active GPU driver
        return None
    device = torch.cuda.current_device()
    stream_of = driver.get_current_stream
    g0, g1, g2 = tuple(grid) + (1,) * (3 - len(grid))
    packed = compiled.packed_metadata

    def launch(*args):
        run(g0, g1, g2, stream_of(device), function, packed, None, None, None, *args)

    launch.parts = (run, function, packed, (g0, g1, g2), device, stream_of)  # for launch_replay's C path
    return launch


def {LAUNCH_CACHED}(kernel, grid, cfg, *args):
    """Launch through Triton's JIT the first time, then straight through the compiled kernel:
    no argument binding, specialisation or cache-key hashing in Python on later calls. Integer
    arguments are part of the key because Triton specialises on them (== 1, multiple of 16)."""
    key = (kernel, grid, tuple(cfg.items()), tuple(x for x in args if isinstance(x, int)))
    cached = _COMPILED.get(key)
    if cached is not None:
        runner, consts = cached
        if runner is not None:
            runner(*args, *consts)
            return
    compiled = kernel[grid](*args, **cfg)
    if cached is None:
        runner, consts = None, ()
        names = getattr(kernel, "arg_names", None)
        if compiled is not None and names is not None and all(n in cfg for n in names[len(args):]):
            if hasattr(compiled, "_init_handles"):
                compiled._init_handles()  # loads the module: function and launcher exist from here
            runner = _direct(compiled, grid) or compiled[tuple(grid) + (1,) * (3 - len(grid))]
            consts = tuple(cfg[n] for n in names[len(args):])
        _COMPILED[key] = (runner, consts)  # None: this Triton (or its interpreter) launches by JIT only
# endregion: {LAUNCH_CACHE}
'''
# Where launch_replay hooks its recorder into the cache: the launch straight through the compiled
# kernel, and the launch through the JIT.
CACHED_CALL = "            runner(*args, *consts)\n            return\n"
JIT_CALL = "    compiled = kernel[grid](*args, **cfg)\n"
assert CACHED_CALL in _LAUNCH_CACHE and JIT_CALL in _LAUNCH_CACHE
# The pre-pass's launch settings as the cache takes them (dependent_launch adds its PDL switch).
PREPASS_SETTINGS = f'{{"BLOCK": {CONVERTER_BLOCK}}}'
_JIT_LAUNCH = re.compile(r"^(?P<indent>\s*)(?P<kernel>\w+)\[grid\]\($")
_SPREAD_CFG = re.compile(r"^\s*\*\*cfg,?\s*$")


class LeanHost(Structure):
    name = "lean_host"
    title = "Lean host path: launch the compiled kernel directly"
    category = "tuning"
    prose = (
        "Under a leaderboard's protocol every call is timed alone between two device-wide "
        "synchronisations, so the Python between the call and the GPU launch is part of the score: "
        "on the small shapes it is most of it. Triton's JIT launch binds every argument, computes "
        "its specialisation (alignment, == 1) and hashes a cache key on each call: tens of "
        "microseconds for a kernel with twenty arguments. Keeping the compiled kernel per shape and "
        "launch settings and calling it directly skips all of that; so does avoiding per-call "
        "allocations, copies and recomputed settings. Nothing on the GPU changes: do_bench-style "
        "timings (back-to-back launches) do not see this gain."
    )
    prior_min, prior_max = 0.0, 0.3
    novelty = 0.5
    form = Form(
        {"launch": "compiled"},
        "direct compiled launch",
        [
            "keep each compiled kernel per (grid, launch settings, integer arguments)",
            "call the compiled launcher directly after the first launch (the JIT path only once)",
        ],
    )

    mark, needs = LAUNCH_CACHE, ("launch",)

    def install(self, source: str) -> str:
        require(source, "select_config", why=self.name)
        lines = body(source, "launch")
        opening = [line for line in lines if _JIT_LAUNCH.match(line)]
        spread = [line for line in lines if _SPREAD_CFG.match(line)]
        if len(opening) != 1 or len(spread) != 1:
            raise NotApplicable(f"{self.name}: region launch must hold one `kernel[grid](` call ending in `**cfg`")
        match = _JIT_LAUNCH.match(opening[0])
        assert match is not None  # opening holds the lines it matches
        new = [
            f"{match['indent']}{LAUNCH_CACHED}({match['kernel']}, grid, cfg," if line is opening[0] else line
            for line in lines
            if line is not spread[0]
        ]
        source = replace_body(source, "launch", "\n".join(new))
        cached = f"{LAUNCH_CACHED}({CONVERTER_KERNEL}, grid, {PREPASS_SETTINGS}, {CONVERTER_ARGS})"
        source = source.replace(PREPASS_LAUNCH, cached)  # the fp16 pre-pass's launch, where there is one
        return insert_after_region(source, "select_config", _LAUNCH_CACHE)


# The scale tensors' strides between K blocks (a_scale's is m, b_scale's ceil(n / 128)); their unit
# strides stay specialised, which keeps the scale vectors' loads contiguous.
_SCALE_STRIDES = re.compile(r"\bstride_[ab]s[a-z_]*k\b")


def compile_once(source: str) -> str:
    """``source`` with its GEMM kernel (the one holding region ``params``) kept from specialising
    on the scale tensors' K-block strides: ``@triton.jit(do_not_specialize=[...])``. Unchanged where the
    kernel has no such parameters."""
    return no_specialise(source, [n for line in body(source, "params") for n in _SCALE_STRIDES.findall(line)])


_JIT = re.compile(
    r"^@triton\.jit(?:\(do_not_specialize=\[(?P<listed>[^\]]*)\]\))?\n(?P<head>def \w+\(\n[ \t]*# region: params)$",
    re.M,
)


def no_specialise(source: str, names: list[str]) -> str:
    """``source`` with ``names`` added to its GEMM kernel's ``do_not_specialize`` list (the kernel
    whose parameters are region ``params``). Unchanged for no names, or a decorator with other arguments."""
    if not names:
        return source

    def merged(match: re.Match[str]) -> str:
        listed = [n.strip().strip("'\"") for n in (match["listed"] or "").split(",") if n.strip()]
        every = ", ".join(repr(n) for n in dict.fromkeys(listed + names))
        return f"@triton.jit(do_not_specialize=[{every}])\n{match['head']}"

    return _JIT.sub(merged, source, count=1)


class NvidiaTuning(InSubmissionTuning, replaces_on="nvidia"):
    """On NVIDIA GPUs the tuning space is compiled once per setting, not once per setting and per
    divisibility class of the scale strides. Triton's CUDA backend specialises every integer
    argument on being 1 or a multiple of 16; b_scale's K-block stride is ceil(n / 128) (1, 5, 12,
    32 across this task's shapes), so each setting was compiled up to three times: 19 compiles in
    one evaluation's tests on an H200, and compiling once halved that phase
    (docs/results.md#evaluations-per-gpu-hour). Those strides step from one K block's scales to the
    next, where the specialisation buys nothing. The leaderboard never times compiles; a campaign's
    evaluations per GPU-hour do."""

    vendors = ("nvidia",)
    prose = InSubmissionTuning.prose + (
        " On NVIDIA the kernel is also kept from specialising on the scale tensors' K-block strides, so each "
        "setting compiles once rather than once per divisibility class of ceil(n / 128)."
    )

    def apply(self, source: str, params: dict[str, Param], reference: str | None = None) -> str:
        return compile_once(super().apply(source, params, reference))
