"""ws_per_shape (knowledge/techniques/gemm/hopper.py): the persistent loop's warp specialisation made a
tuner switch, so a submission picks it per shape. Rewrites on campaign H's line with and without
stream-K, both values right in Triton's CPU interpreter, and the tuner's trials."""

from __future__ import annotations

import pytest
from kernel_scientist.knowledge import NotApplicable
from kernel_scientist.knowledge._regions import set_constant
from test_stream_k import _Clock, _line, _right, _tile, _trials
from test_task import load_submission
from test_techniques import HOPPER_CHAIN, SEED

from kernel_scientist import knowledge

NVIDIA = {t.name: t for t in knowledge.catalogue("nvidia")}
PER_SHAPE = ("ws_per_shape", {"per_shape": True})
SHAPES = [(64, 64, 128), (192, 192, 512), (96, 192, 256)]


def test_it_makes_the_loop_a_switch_once_on_either_structure():
    ws = NVIDIA["ws_per_shape"]
    for extra in ((), (("stream_k", {"stream_k": True}),)):
        before = _line(*extra)
        assert [v.params for v in ws.variants(before)] == [{"per_shape": True}]
        source = ws.rewrite(before, {"per_shape": True})
        assert ws.detect(source) == {"per_shape": True} and ws.variants(source) == []
        assert ws.rewrite(source, {"per_shape": True}) == source
        assert "WS_LOOP = 1" in source and '"WS_LOOP": WS_LOOP,' in source
        assert 'TUNING_SWITCHES = {"STREAM_K": (0, 1), "WS_LOOP": (0, 1)}' in source
        loop = "tl.range(tl.program_id(0), num_work, NUM_SMS, flatten=True, warp_specialize=WS_LOOP)"
        assert source.count(loop) == 1 and "warp_specialize=True" not in source
        # warp_specialize no longer offers a fixed choice; the in-kernel split-K is refused beside it.
        assert NVIDIA["warp_specialize"].variants(source) == []
        with pytest.raises(NotApplicable, match="ws_per_shape"):
            NVIDIA["warp_specialize"].detect(source)
    # With stream-K the copy of the kernel as it was takes the switch; both kernels accept it
    # (the launch passes every constexpr), the stream-K loop stays plain.
    twin = source[source.index("def fp8_gemm_kernel_whole(") : source.index("def fp8_gemm_kernel(")]
    main = source[source.index("def fp8_gemm_kernel(") : source.index("# endregion: tile")]
    assert "warp_specialize=WS_LOOP" in twin and "WS_LOOP: tl.constexpr" in twin
    assert "WS_LOOP: tl.constexpr" in main and "warp_specialize" not in main
    plain = NVIDIA["ws_per_shape"].rewrite(_line(), {"per_shape": True})
    with pytest.raises(NotApplicable, match="split_k"):
        NVIDIA["split_k"].apply(plain, {"SPLIT_K_MAX": 4})


def test_it_is_not_offered_without_the_tuner_or_beside_the_in_kernel_split_k():
    ws = NVIDIA["ws_per_shape"]
    no_tuner = SEED
    for name, params in HOPPER_CHAIN:
        if name != "in_submission_tuning":
            no_tuner = NVIDIA[name].apply(no_tuner, params)
    assert ws.variants(no_tuner) == []
    with pytest.raises(NotApplicable, match="in_submission_tuning"):
        ws.apply(no_tuner, {"per_shape": True})
    plain = NVIDIA["warp_specialize"].apply(_line(), {"warp_specialize": False})
    split = NVIDIA["split_k"].apply(plain, {"SPLIT_K_MAX": 4})
    with pytest.raises(NotApplicable, match="warpgroup"):
        ws.apply(split, {"per_shape": True})


@pytest.mark.parametrize("stream_k", [False, True])
@pytest.mark.parametrize("ws_loop", [0, 1])
def test_both_loops_are_right(stream_k, ws_loop, tmp_path):
    extra = (("stream_k", {"stream_k": True}),) if stream_k else ()
    source = NVIDIA["ws_per_shape"].rewrite(_line(*extra), {"per_shape": True})
    source = set_constant(set_constant(source, "WS_LOOP", ws_loop), "NUM_SMS", 4)
    if stream_k:
        source = set_constant(source, "STREAM_K", 0)  # the copy with the switch
    module = load_submission(source, tmp_path, f"ws{ws_loop}{int(stream_k)}")
    _right(module, SHAPES, calls=1)
    assert all(dict(key[2])["WS_LOOP"] == ws_loop for key in module.module._COMPILED if "WS_LOOP" in dict(key[2]))


def test_the_tuner_times_the_switch_where_it_exists(tmp_path, monkeypatch):
    """Each setting is timed with WS_LOOP 0 and 1 at STREAM_K 0, once at STREAM_K 1 (that kernel
    has no such loop), and the fastest of all is kept per shape."""
    source = NVIDIA["ws_per_shape"].rewrite(_line(("stream_k", {"stream_k": True})), {"per_shape": True})
    namespace = load_submission(source, tmp_path, "tuner").module
    space = namespace.TUNING_SPACE

    def cost(cfg):
        if (_tile(cfg), cfg["STREAM_K"], cfg["WS_LOOP"]) == (space[1], 0, 0):
            return 0.5
        return 1.0 + 0.1 * cfg["WS_LOOP"]

    clock = _Clock(cost)
    monkeypatch.setattr(namespace, "torch", clock.torch())
    best = namespace.tuned((1, 2, 3), {"STREAM_K": 1, "WS_LOOP": 1}, clock.launch)
    assert (_tile(best), best["STREAM_K"], best["WS_LOOP"]) == (space[1], 0, 0)
    trials = _trials(clock)
    assert len(trials) == 3 * len(space)
    assert not any(dict(t)["STREAM_K"] == 1 and dict(t)["WS_LOOP"] == 0 for t in trials)
    # Without stream-K the switch is timed for every setting.
    source = NVIDIA["ws_per_shape"].rewrite(_line(), {"per_shape": True})
    namespace = load_submission(source, tmp_path, "tuner2").module
    clock = _Clock(lambda cfg: 1.0 - 0.5 * (cfg["WS_LOOP"] == 0 and _tile(cfg) == space[0]))
    monkeypatch.setattr(namespace, "torch", clock.torch())
    best = namespace.tuned((4, 5, 6), {"WS_LOOP": 1}, clock.launch)
    assert (_tile(best), best["WS_LOOP"]) == (space[0], 0) and len(_trials(clock)) == 2 * len(space)


def test_stream_k_after_it_keeps_the_switch_in_the_copy(tmp_path):
    """The other order: stream_k applied to a kernel that already has the switch copies it into
    the kernel as it was, and the stream-K kernel takes the parameter without a loop to use it in."""
    source = NVIDIA["stream_k"].rewrite(_line(PER_SHAPE), {"stream_k": True})
    twin = source[source.index("def fp8_gemm_kernel_whole(") : source.index("def fp8_gemm_kernel(")]
    main = source[source.index("def fp8_gemm_kernel(") : source.index("# endregion: tile")]
    assert "warp_specialize=WS_LOOP" in twin and "WS_LOOP: tl.constexpr" in twin
    assert "WS_LOOP: tl.constexpr" in main and "warp_specialize" not in main
    assert NVIDIA["ws_per_shape"].detect(source) == {"per_shape": True}
    assert source.count('if dict(choice).get("STREAM_K")') == 1
    for stream_k in (0, 1):
        module = load_submission(
            set_constant(set_constant(set_constant(source, "WS_LOOP", 0), "NUM_SMS", 4), "STREAM_K", stream_k),
            tmp_path,
            f"after{stream_k}",
        )
        _right(module, SHAPES[:2], calls=1)
