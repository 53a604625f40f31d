"""operand_per_shape (knowledge/techniques/gemm/operand_per_shape.py): whether the pre-pass converts a,
or the GEMM converts a's fp8 tiles itself, made a tuner switch. Rewrites on the Hopper line with and
without stream-K, both values right in Triton's CPU interpreter (e4m3fn and e4m3fnuz inputs), the
pre-pass timed with the GEMM by the tuner, and the refusals."""

from __future__ import annotations

import pytest
import torch
from kernel_scientist.knowledge import NotApplicable
from kernel_scientist.knowledge._regions import set_constant
from test_stream_k import _Clock, _line, _right, _tile, _trials, reference
from test_task import load_submission
from test_techniques import HOPPER_CHAIN, SEED

from kernel_scientist import knowledge

NVIDIA = {t.name: t for t in knowledge.catalogue("nvidia")}
STREAM_K = ("stream_k", {"stream_k": True})
SHAPES = [(64, 64, 128), (192, 192, 512), (96, 192, 256)]


def _kernels(source: str) -> tuple[str, str]:
    twin = source[source.index("def fp8_gemm_kernel_whole(") : source.index("def fp8_gemm_kernel(")]
    main = source[source.index("def fp8_gemm_kernel(") : source.index("# endregion: tile")]
    return twin, main


def test_it_makes_a_conversion_a_switch_once_on_either_structure():
    per_shape = NVIDIA["operand_per_shape"]
    for extra in ((), (STREAM_K,)):
        before = _line(*extra)
        assert per_shape.detect(before) is None
        assert [v.params for v in per_shape.variants(before)] == [{"per_shape": True}]
        source = per_shape.rewrite(before, {"per_shape": True})
        assert per_shape.detect(source) == {"per_shape": True} and per_shape.variants(source) == []
        assert per_shape.rewrite(source, {"per_shape": True}) == source
        assert "A_FP8 = 0" in source and '"A_FP8": A_FP8,' in source
        assert '"A_FP8": (0, 1)}' in source
        # The pre-pass left prepare for launch(cfg); every GEMM launch takes its outputs.
        prepare = source[source.index("# region: prepare") : source.index("# endregion: prepare")]
        assert "to_fp16(" not in prepare
        assert 'a16, b16 = to_fp16(a, b, halving, convert_a=not cfg["A_FP8"])' in source
        launch = source[source.index("# region: launch\n") : source.index("# endregion: launch\n")]
        assert "a, b, a_scale" not in launch and launch.count("a_in, b16, a_scale, b_scale,") == 1 + len(extra)
    # With stream-K the copy of the kernel as it was takes the conversion too (mirrored), and the
    # tuner times both values on both kernels: nothing is skipped.
    twin, main = _kernels(source)
    assert "a = a.to(tl.float16)" in twin and "A_FP8: tl.constexpr" in twin
    assert "A_FP8: tl.constexpr" in main
    assert 'dict(choice).get("A_FP8")' not in source


def test_it_is_refused_without_the_pre_pass_descriptors_or_tuner():
    per_shape = NVIDIA["operand_per_shape"]
    for missing, why in (
        ("fp16_prepass", "fp16_prepass"),
        ("tma_descriptors", "tma_descriptors"),
        ("in_submission_tuning", "in_submission_tuning"),
    ):
        source = SEED
        for name, params in HOPPER_CHAIN:
            if name != missing:
                try:
                    source = NVIDIA[name].apply(source, params)
                except NotApplicable:
                    pass
        assert per_shape.variants(source) == []
        with pytest.raises(NotApplicable, match=why):
            per_shape.apply(source, {"per_shape": True})


@pytest.mark.parametrize("structure", ["plain", "stream_k", "stream_k_twin"])
@pytest.mark.parametrize("a_fp8", [0, 1])
def test_both_conversions_are_right(structure, a_fp8, tmp_path):
    """Both values on the kernel without stream-K, on the stream-K kernel and on its twin."""
    extra = () if structure == "plain" else (STREAM_K,)
    source = NVIDIA["operand_per_shape"].rewrite(_line(*extra), {"per_shape": True})
    source = set_constant(set_constant(source, "A_FP8", a_fp8), "NUM_SMS", 4)
    if structure == "stream_k_twin":
        source = set_constant(source, "STREAM_K", 0)  # the copy of the kernel as it was
    module = load_submission(source, tmp_path, f"op{a_fp8}{structure}")
    _right(module, SHAPES, calls=2)
    keys = [dict(key[2]) for key in module.module._COMPILED]
    assert any(k.get("A_FP8") == a_fp8 for k in keys)
    # The pre-pass converted a only where the kernel does not: its launch counts a's elements or none.
    prepass = [key for key in module.module._COMPILED if key[0].__name__ == "fp8_to_fp16_kernel"]
    assert prepass and all((key[3][0] == 0) == bool(a_fp8) for key in prepass)


def test_e4m3fnuz_inputs_are_right_with_a_in_the_kernel(tmp_path):
    """GPU MODE's generator draws e4m3fnuz: read as e4m3fn each value is twice its own, and with a
    left in fp8 its halving moves onto b (b times a quarter): exact."""
    source = NVIDIA["operand_per_shape"].rewrite(_line(), {"per_shape": True})
    module = load_submission(set_constant(set_constant(source, "A_FP8", 1), "NUM_SMS", 4), tmp_path, "fnuz")
    for m, n, k in SHAPES[:2]:
        a, b, a_scale, b_scale, c = reference.generate_input(m, n, k, seed=n + k, device="cpu")
        fnuz = (a.float() / 2).to(torch.float8_e4m3fnuz), (b.float() / 2).to(torch.float8_e4m3fnuz)
        data = (fnuz[0].T.contiguous().T, fnuz[1].T.contiguous().T, a_scale, b_scale, c)
        want = (fnuz[0].float() * a_scale.repeat_interleave(128, 1)[:, :k]) @ (
            fnuz[1].float() * b_scale.repeat_interleave(128, 0)[:n].repeat_interleave(128, 1)[:, :k]
        ).T
        got = module.custom_kernel(data).float()
        assert torch.allclose(got, want, rtol=2e-2, atol=1e-3), (m, n, k)


def test_the_tuner_times_the_pre_pass_with_each_form(tmp_path, monkeypatch):
    """Each setting is timed at A_FP8 0 and 1 on both structures (STREAM_K 0 and 1), and the
    fastest of all is kept per shape."""
    source = NVIDIA["operand_per_shape"].rewrite(_line(STREAM_K), {"per_shape": True})
    namespace = load_submission(source, tmp_path, "tuner").module
    space = namespace.TUNING_SPACE

    def cost(cfg):
        if (_tile(cfg), cfg["STREAM_K"], cfg["A_FP8"]) == (space[2], 1, 1):
            return 0.5
        return 1.0 + 0.1 * cfg["A_FP8"]

    clock = _Clock(cost)
    monkeypatch.setattr(namespace, "torch", clock.torch())
    best = namespace.tuned((1, 2, 3), {"STREAM_K": 1, "A_FP8": 0}, clock.launch)
    assert (_tile(best), best["STREAM_K"], best["A_FP8"]) == (space[2], 1, 1)
    trials = _trials(clock)
    assert len(trials) == 4 * len(space)
    assert {(dict(t)["STREAM_K"], dict(t)["A_FP8"]) for t in trials} == {(0, 0), (0, 1), (1, 0), (1, 1)}


def test_it_composes_with_the_loop_switch(tmp_path):
    """Beside ws_per_shape (either order) both switches are timed and both kernels stay right."""
    for first, second in (("ws_per_shape", "operand_per_shape"), ("operand_per_shape", "ws_per_shape")):
        source = _line(STREAM_K)
        for name in (first, second):
            source = NVIDIA[name].rewrite(source, {"per_shape": True})
        assert '"WS_LOOP": (0, 1)' in source and '"A_FP8": (0, 1)' in source
        source = set_constant(set_constant(set_constant(source, "A_FP8", 1), "WS_LOOP", 0), "NUM_SMS", 4)
        module = load_submission(set_constant(source, "STREAM_K", 0), tmp_path, f"both-{first}")
        _right(module, SHAPES[:2], calls=1)
