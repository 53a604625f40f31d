"""Programmatic dependent launch (knowledge/techniques/gemm/dependent_launch.py) on the Hopper line: where
it goes in, where it is refused, that the kernels stay right in the interpreter (where it is off),
and that with it on, Triton's compiler for sm_90 emits the griddepcontrol pair (no GPU needed)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from kernel_scientist.knowledge import NotApplicable
from kernel_scientist.knowledge._regions import set_constant
from test_stream_k import SHAPES, _right
from test_techniques import HOPPER_CHAIN, SEED

from kernel_scientist import knowledge

NVIDIA = {t.name: t for t in knowledge.catalogue("nvidia")}
PDL = ("dependent_launch", {"pdl": True})
STREAM_K = ("stream_k", {"stream_k": True})


def _line(*steps: tuple[str, dict], chain=HOPPER_CHAIN) -> str:
    source = SEED
    for name, params in [*chain, *steps]:
        source = NVIDIA[name].apply(source, params)
    return source


def test_it_goes_in_once_on_the_pre_pass_line_and_nowhere_else():
    technique = NVIDIA["dependent_launch"]
    before = _line()
    assert [v.params for v in technique.variants(before)] == [{"pdl": True}]
    source = technique.apply(before, {"pdl": True})
    assert technique.detect(source) == {"pdl": True} and technique.variants(source) == []
    assert technique.apply(source, {"pdl": True}) == source
    # The pre-pass signals, its launch passes the flag, the GEMM is launched with launch_pdl and
    # waits before its first statement.
    assert "tl.extra.cuda.gdc_launch_dependents()" in source and '{"BLOCK": 4096, "PDL": PDL_ON}' in source
    assert '"launch_pdl": PDL_ON,' in source and '"PDL": PDL_ON,' in source
    gemm = source[source.index("def fp8_gemm_kernel(") :]
    first = gemm[gemm.index("):\n") + 3 :].splitlines()[:2]
    assert first == [
        "    if PDL:  # the pre-pass's output is complete and visible from here (a no-op off Hopper)",
        "        tl.extra.cuda.gdc_wait()",
    ]
    # No pre-pass: nothing to overlap. A pre-pass launched by the JIT: apply lean_host first.
    assert technique.variants(SEED) == []
    with pytest.raises(NotApplicable):
        technique.apply(SEED, {"pdl": True})
    no_lean = [step for step in HOPPER_CHAIN if step[0] not in ("lean_host", "in_submission_tuning")]
    with pytest.raises(NotApplicable, match="lean_host"):
        technique.apply(_line(chain=no_lean), {"pdl": True})


def test_stream_k_before_or_after_gives_both_gemm_kernels_the_wait():
    for source in (_line(PDL, STREAM_K), _line(STREAM_K, PDL)):
        for name in ("def fp8_gemm_kernel(", "def fp8_gemm_kernel_whole("):
            kernel = source[source.index(name) :]
            header = kernel[: kernel.index("):\n")]
            assert "PDL: tl.constexpr," in header, name
            assert kernel[kernel.index("):\n") + 3 :].splitlines()[1] == "        tl.extra.cuda.gdc_wait()", name
        assert source.count("gdc_wait()") == 2


@pytest.mark.parametrize("order", ["pdl_then_stream_k", "stream_k_then_pdl"])
def test_the_kernels_stay_right_with_it(order, tmp_path):
    from test_task import load_submission

    steps = (PDL, STREAM_K) if order == "pdl_then_stream_k" else (STREAM_K, PDL)
    source = set_constant(_line(*steps), "NUM_SMS", 4)
    for value in (0, 1):
        module = load_submission(set_constant(source, "STREAM_K", value), tmp_path, f"{order}{value}")
        assert module.module.PDL_ON is False  # no CUDA GPU here: off, a compile-time branch
        _right(module, SHAPES[1:3], calls=2)


_PTX = r"""
import sys
sys.path.insert(0, sys.argv[1])
import submission as m
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

def ptx(fn, pointers, consts, **options):
    names = fn.arg_names
    sig = {n: pointers.get(n, "constexpr" if n in consts else "i32") for n in names}
    src = ASTSource(fn, sig, {(names.index(n),): v for n, v in consts.items()})
    return triton.compile(src, target=GPUTarget("cuda", 90, 32), options=options).asm["ptx"]

fp8 = {"a_ptr": "*fp8e4nv", "b_ptr": "*fp8e4nv", "a16_ptr": "*fp16", "b16_ptr": "*fp16"}
gemm = {"a_ptr": "*fp16", "b_ptr": "*fp16", "as_ptr": "*fp32", "bs_ptr": "*fp32", "c_ptr": "*bf16",
        "sk_ws_ptr": "*fp32", "sk_flag_ptr": "*i32"}
tiles = {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 128, "NUM_SMS": 132, "GROUP_M": 8}
for on in (True, False):
    print("prepass", on, "griddepcontrol.launch_dependents" in ptx(m.fp8_to_fp16_kernel, fp8, {"BLOCK": 4096, "PDL": on}, num_warps=4))
    for name, k in (("gemm", m.fp8_gemm_kernel), ("gemm_ws", m.fp8_gemm_kernel_whole)):
        consts = {n: v for n, v in dict(tiles, STREAM_K=int(name == "gemm"), PDL=on).items() if n in k.arg_names}
        text = ptx(k, gemm, consts, num_warps=8, num_stages=3, launch_pdl=on)
        print(name, on, "griddepcontrol.wait" in text)
"""


def test_with_it_on_the_compiler_emits_the_griddepcontrol_pair_for_sm_90(tmp_path):
    """Compiled for Hopper on this CPU machine (Triton's CUDA backend needs no GPU to emit PTX): the
    pre-pass signals and both GEMM kernels wait exactly when PDL is on."""
    (tmp_path / "submission.py").write_text(_line(PDL, STREAM_K))
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["TRITON_CACHE_DIR"] = str(tmp_path / "cache")
    run = subprocess.run(
        [sys.executable, "-c", _PTX, str(tmp_path)], env=env, capture_output=True, text=True, timeout=600
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.split("\n")[:6] == [
        "prepass True True",
        "gemm True True",
        "gemm_ws True True",
        "prepass False False",
        "gemm False False",
        "gemm_ws False False",
    ]
