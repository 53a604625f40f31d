"""Stream-K (knowledge/techniques/gemm/stream_k.py) on the Hopper line a campaign builds: the K blocks of
the last waves shared out over the persistent programs, the fix-up between programs, the per-shape
switch back to the loop as it was, and the tuner that times both.

Kernels run in Triton's CPU interpreter, which runs the programs one after another in id order: an
owner that waited on a higher program id would hang here, so these tests also pin the direction
of the waits."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from kernel_scientist.knowledge import NotApplicable
from kernel_scientist.knowledge._regions import set_constant
from test_task import load_submission, reference
from test_techniques import HOPPER_CHAIN, SEED

from kernel_scientist import knowledge

NVIDIA = {t.name: t for t in knowledge.catalogue("nvidia")}
# Persistent, TMA, warp-specialised, folded scales, direct launch, the tuner: campaign H's line.
LINE = HOPPER_CHAIN


def _line(*extra: tuple[str, dict]) -> str:
    source = SEED
    for name, params in [*LINE, *extra]:
        source = NVIDIA[name].apply(source, params)
    return source


def _right(module, shapes, calls: int = 2) -> None:
    for shape in shapes:
        data = reference.generate_input(*shape, seed=shape[1] + shape[2], device="cpu")
        for call in range(calls):  # later calls find the flags cleared by the owners
            ok, message = reference.check_implementation(data, module.custom_kernel(data))
            assert ok, f"{shape} call {call}: {message[:300]}"


def test_stream_k_goes_in_once_and_keeps_the_loop_for_stream_k_0():
    stream_k = NVIDIA["stream_k"]
    before = _line()
    assert [v.params for v in stream_k.variants(before)] == [{"stream_k": True}]
    source = stream_k.apply(before, {"stream_k": True})
    assert stream_k.detect(source) == {"stream_k": True} and stream_k.variants(source) == []
    assert stream_k.apply(source, {"stream_k": True}) == source
    # A plain loop (no warp specialisation: wrong on an H200 with this body), exactly NUM_SMS programs;
    # the warp-specialised kernel as it was stays beside it, without regions, for STREAM_K 0.
    main = source[source.index("def fp8_gemm_kernel(") : source.index("# endregion: tile")]
    assert "for work_id in range(0, dp_steps + sk_steps):" in main and "warp_specialize" not in main
    twin = source[source.index("def fp8_gemm_kernel_whole(") : source.index("def fp8_gemm_kernel(")]
    assert "warp_specialize=True" in twin and "# region" not in twin and "STREAM_K: tl.constexpr" in twin
    assert 'if cfg["STREAM_K"]:' in source and "launch_cached(fp8_gemm_kernel_whole, tiles_grid, cfg," in source
    assert 'grid = (cfg["NUM_SMS"],)' in source and "STREAM_K = 1" in source
    # One compile per setting: DP_TILES joins the scale strides in do_not_specialize, once each.
    assert "@triton.jit(do_not_specialize=['stride_ask', 'stride_bsk', 'DP_TILES'])" in source
    assert "TUNING_SWITCHES" in source
    # Not offered before the persistent loop exists; refused next to either split-K.
    assert stream_k.variants(SEED) == []
    with pytest.raises(NotApplicable, match="persistent"):
        stream_k.apply(SEED, {"stream_k": True})
    with pytest.raises(NotApplicable, match="stream_k"):
        NVIDIA["split_k"].apply(source, {"SPLIT_K_MAX": 4})
    with pytest.raises(NotApplicable, match="stream_k"):
        knowledge.technique("split_k").apply(source, {"SPLIT_K": 2})
    plain = NVIDIA["warp_specialize"].apply(before, {"warp_specialize": False})
    split = NVIDIA["split_k"].apply(plain, {"SPLIT_K_MAX": 4})
    with pytest.raises(NotApplicable, match="splits K already"):
        stream_k.apply(split, {"stream_k": True})
    # From the plain loop: the same stream-K kernel, with the plain kernel as it was beside it.
    from_plain = stream_k.apply(plain, {"stream_k": True})
    assert from_plain[from_plain.index("def fp8_gemm_kernel(") : from_plain.index("# endregion: tile")] == main
    plain_twin = from_plain[from_plain.index("def fp8_gemm_kernel_whole(") : from_plain.index("def fp8_gemm_kernel(")]
    assert "for work_id in range(tl.program_id(0), num_work, NUM_SMS):" in plain_twin
    assert "warp_specialize=True" not in from_plain


def test_warp_specialisation_before_or_after_stream_k_gives_the_same_kernel():
    """Once the kernel is stream-K, warp_specialize rewrites the loop of the copy as it was: a
    search that took stream-K on the plain loop first reaches the warp-specialised line too."""
    ws, sk = NVIDIA["warp_specialize"], NVIDIA["stream_k"]
    plain = ws.apply(_line(), {"warp_specialize": False})
    first_ws = sk.apply(ws.apply(plain, {"warp_specialize": True}), {"stream_k": True})
    first_sk = sk.apply(plain, {"stream_k": True})
    assert ws.detect(first_sk) == {"warp_specialize": False}
    assert [v.params for v in ws.variants(first_sk)] == [{"warp_specialize": True}]
    assert ws.apply(first_sk, {"warp_specialize": True}) == first_ws
    assert ws.detect(first_ws) == {"warp_specialize": True}
    assert ws.apply(first_ws, {"warp_specialize": False}) == first_sk
    # Only the copy changes: the stream-K kernel's loop stays plain either way.
    main = first_ws[first_ws.index("def fp8_gemm_kernel(") :]
    assert "warp_specialize=True" not in main
    # A stream-K kernel written before the copy was kept on plain loops has nothing to rewrite.
    old = first_sk.replace("fp8_gemm_kernel_whole", "gone")
    with pytest.raises(NotApplicable, match="without warp specialisation"):
        ws.apply(old, {"warp_specialize": True})


def _twin(source: str) -> str:
    return source[source.index("def fp8_gemm_kernel_whole(") : source.index("def fp8_gemm_kernel(")]


def test_a_change_after_stream_k_reaches_the_copy_too(tmp_path):
    """Through ``rewrite`` (what engineers and compound plans call), a grouped tile order applied
    after stream_k rewrites the copy's tile order and adds its GROUP_M parameter, as if it had come
    first; a change to what stream_k itself rewrote (the K loop) stays in the stream-K kernel."""
    ws, sk, order = NVIDIA["warp_specialize"], NVIDIA["stream_k"], NVIDIA["grouped_order"]
    plain = ws.apply(_line(), {"warp_specialize": False})
    before = sk.apply(order.apply(plain, {"GROUP_M": 8}), {"stream_k": True})
    after = order.rewrite(sk.apply(plain, {"stream_k": True}), {"GROUP_M": 8})
    assert "group_size = GROUP_M * num_pid_n" in _twin(after) and "GROUP_M: tl.constexpr," in _twin(after)
    assert _twin(after) == _twin(before)
    assert _twin(order.apply(sk.apply(plain, {"stream_k": True}), {"GROUP_M": 8})) != _twin(after)  # apply alone: not
    # Then warp specialisation of the copy, and the copy at STREAM_K 0 is right in the interpreter.
    both = ws.rewrite(after, {"warp_specialize": True})
    assert "warp_specialize=True" in _twin(both) and "group_size" in _twin(both)
    source = set_constant(set_constant(both, "STREAM_K", 0), "NUM_SMS", 4)
    module = load_submission(source, tmp_path, "twin_order")
    _right(module, SHAPES[1:3], calls=1)
    # Nothing to mirror where there is no copy, and a rewrite without change is the source itself.
    assert order.rewrite(plain, {"GROUP_M": 8}) == order.apply(plain, {"GROUP_M": 8})
    assert order.rewrite(after, {"GROUP_M": 8}) == after


def test_the_plan_gives_whole_tiles_for_every_full_wave_but_the_last(tmp_path):
    namespace = load_submission(_line(("stream_k", {"stream_k": True})), tmp_path, "plan").module
    cfg = {"NUM_SMS": 4, "BLOCK_M": 64, "BLOCK_N": 64, "STREAM_K": 1}
    whole = [namespace.stream_k_plan(tiles, cfg, "cpu")[0] for tiles in (1, 9, 8, 10)]
    assert whole == [0, 4, 8, 4]  # 1 tile; 9 = 2 waves + 1; 8 = 2 full waves; 10 = 2 waves + 2
    assert namespace.stream_k_plan(9, dict(cfg, STREAM_K=0), "cpu")[0] == 9
    _, slots, flags = namespace.stream_k_plan(9, cfg, "cpu")
    assert slots.numel() == 4 * 64 * 64 and flags.tolist() == [0, 0, 0, 0]


# Fewer K blocks than programs (empty ranges), whole tiles then pieces, one tile over every
# program, n % 128 == 64 and a 96-row m (rows past m wrap), a K that is not a multiple of the split.
SHAPES = [(64, 64, 128), (192, 192, 512), (64, 64, 2048), (96, 192, 256), (128, 320, 1152)]


@pytest.mark.parametrize("programs", [4, 132])
def test_stream_k_is_right_on_every_split_of_the_work(programs, tmp_path):
    source = set_constant(_line(("stream_k", {"stream_k": True})), "NUM_SMS", programs)
    module = load_submission(source, tmp_path, f"sk{programs}")
    _right(module, SHAPES if programs == 4 else SHAPES[:3])
    assert module.module._SK_SCRATCH and all(
        flags.tolist() == [0] * programs for _, flags in module.module._SK_SCRATCH.values()
    )


def test_stream_k_0_gives_whole_tiles_only(tmp_path):
    """STREAM_K 0 launches the kernel as it was, warp-specialised or plain, and not the stream-K
    kernel; both right."""
    source = set_constant(set_constant(_line(("stream_k", {"stream_k": True})), "STREAM_K", 0), "NUM_SMS", 4)
    module = load_submission(source, tmp_path, "sk0")
    _right(module, SHAPES[1:3], calls=1)
    kernels = {key[0] for key in module.module._COMPILED}
    assert module.module.fp8_gemm_kernel_whole in kernels and module.module.fp8_gemm_kernel not in kernels
    plain = NVIDIA["warp_specialize"].apply(_line(), {"warp_specialize": False})
    source = set_constant(NVIDIA["stream_k"].apply(plain, {"stream_k": True}), "STREAM_K", 0)
    module = load_submission(set_constant(source, "NUM_SMS", 4), tmp_path, "sk0plain")
    _right(module, SHAPES[1:3], calls=1)
    kernels = {key[0] for key in module.module._COMPILED}
    assert module.module.fp8_gemm_kernel_whole in kernels and module.module.fp8_gemm_kernel not in kernels


class _Clock:
    """Stands in for torch (and torch.cuda) in the tuner: each launch of a setting costs what
    ``cost`` says, or ``cold`` says right after the tuner overwrote the cache (the buffer's
    ``zero_``), and the events read the total of the launches between them."""

    def __init__(self, cost, cold=None):
        self.cost, self.cold, self.now, self.launched, self.flushed = cost, cold or cost, 0.0, [], False
        self.flushes = 0

    def torch(self):
        return SimpleNamespace(cuda=self, empty=self.empty, int32="int32")

    def empty(self, size, dtype, device):
        clock = self

        class _Buffer:
            def zero_(self):
                clock.flushed, clock.flushes = True, clock.flushes + 1

        return _Buffer()

    def launch(self, cfg):
        self.launched.append(dict(cfg))
        self.now += (self.cold if self.flushed else self.cost)(cfg)  # raises for a setting that "cannot run"
        self.flushed = False

    def is_available(self):
        return True

    def Event(self, enable_timing):  # noqa: N802 - torch's name
        clock = self

        class _Event:
            def record(self):
                self.at = clock.now

            def synchronize(self):
                pass

            def elapsed_time(self, end):
                return end.at - self.at

        return _Event()


def _tile(cfg) -> tuple:
    """A setting's launch parameters, without its structure switches."""
    return (cfg["BLOCK_M"], cfg["BLOCK_N"], cfg["num_warps"], cfg["num_stages"])


def _trials(clock) -> set[tuple]:
    return {tuple(sorted(cfg.items())) for cfg in clock.launched}


def test_the_tuner_times_every_setting_with_each_stream_k(tmp_path, monkeypatch):
    """Every setting of the space is timed with STREAM_K 0 and 1 and the fastest pair kept, per
    shape; settings without the switch are timed once each; a setting that fails is skipped."""
    namespace = load_submission(_line(("stream_k", {"stream_k": True})), tmp_path, "tuner").module
    space = namespace.TUNING_SPACE
    assert "import itertools" in _line()

    # Stream-K helps the third setting only: the pair (third, 1) beats (first, 0).
    def cost(cfg):
        if _tile(cfg) == space[0] and cfg["STREAM_K"] == 0:
            return 1.0
        return 0.8 if _tile(cfg) == space[2] and cfg["STREAM_K"] == 1 else 2.0

    clock = _Clock(cost)
    monkeypatch.setattr(namespace, "torch", clock.torch())
    best = namespace.tuned((1, 2, 3), {"STREAM_K": 1, "GROUP_M": 8}, clock.launch)
    assert (_tile(best), best["STREAM_K"]) == (space[2], 1)
    assert len(_trials(clock)) == 2 * len(space)
    clock = _Clock(lambda cfg: 1.0 if (_tile(cfg), cfg["STREAM_K"]) == (space[0], 0) else 2.0)
    monkeypatch.setattr(namespace, "torch", clock.torch())
    best = namespace.tuned((4, 5, 6), {"STREAM_K": 1}, clock.launch)
    assert (_tile(best), best["STREAM_K"]) == (space[0], 0)

    def fails(cfg):
        if _tile(cfg) == space[1]:
            raise RuntimeError("out of resource: shared memory")
        return 1.0 if _tile(cfg) == space[1] else 2.0 - 0.1 * (_tile(cfg) == space[3])

    clock = _Clock(fails)
    monkeypatch.setattr(namespace, "torch", clock.torch())
    best = namespace.tuned((7, 8, 9), {"GROUP_M": 8}, clock.launch)
    assert "STREAM_K" not in best and _tile(best) == space[3] and len(_trials(clock)) == len(space)
    assert namespace.tuned((7, 8, 9), {"GROUP_M": 8}, clock.launch) is best  # cached per shape


def test_the_tuner_ranks_settings_as_a_flushed_call_runs_them(tmp_path, monkeypatch):
    """A setting that is fastest only on operands left in L2 by the launch before loses to the one
    that is fastest after the cache is overwritten, which is how a scored call runs; each timed
    launch follows its own overwrite, and an odd slow launch does not decide (the median)."""
    namespace = load_submission(_line(("stream_k", {"stream_k": True})), tmp_path, "flushed").module
    space = namespace.TUNING_SPACE

    def warm(cfg):  # back to back: the first setting wins
        return 0.5 if _tile(cfg) == space[0] else 1.0

    launches = {"third": 0}

    def cold(cfg):  # after a flush: the third setting wins, though one of its launches is slow
        if _tile(cfg) == space[2] and cfg["STREAM_K"] == 0:
            launches["third"] += 1
            return 5.0 if launches["third"] == 2 else 0.6  # its mean, 1.04, would lose to 0.9
        return 0.9 if _tile(cfg) == space[0] else 1.0

    clock = _Clock(warm, cold)
    monkeypatch.setattr(namespace, "torch", clock.torch())
    best = namespace.tuned((1, 2, 3), {"STREAM_K": 1}, clock.launch)
    assert (_tile(best), best["STREAM_K"]) == (space[2], 0)
    assert clock.flushes == namespace.TIMED_LAUNCHES * 2 * len(space)
