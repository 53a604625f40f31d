"""split_reduction: the one-program looping full reduction Inductor writes for a sum of a whole
vector, split into partials on every SM and one combine (knowledge/techniques/any_kernel/reduce.py).

The kernel rewritten is Inductor's own: GPU MODE's pmpp_v2/vectorsum_py reference as a PyTorch seed,
lowered by `kernel-scientist lower` on this machine (tests/fixtures_any_kernel/vectorsum_lowered,
whose check vectors are multiples of no block size). Inductor's CUDA lowering of the same reference
on an H100 (torch 2.11, triton 3.6) is the same text past its header. Every verdict on it is the folder's own check
(a simulated backend, as a campaign's), and the campaign runs in a process of its own.
"""

from __future__ import annotations

import importlib
import os
import re
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
import torch
from _support import ROOT
from kernel_scientist.blackboard.records import EvalReport, Outcome
from kernel_scientist.evaluator import load_task
from kernel_scientist.evaluator.backends import SimulatedBackend
from kernel_scientist.knowledge import NotApplicable
from test_task import InterpretedSubmission, _interpreted

from kernel_scientist import knowledge

FOLDER = ROOT / "tests" / "fixtures_any_kernel" / "vectorsum_lowered"
LOWERED = (FOLDER / "submission.py").read_text()
KERNEL = "triton_red_fused__to_copy_sum_0"  # Inductor's name for the looping sum
PHASES = [f"{KERNEL}_split_partials", f"{KERNEL}_split_combine"]

SPLIT = knowledge.technique("split_reduction")
BLOCKS = knowledge.technique("block_size")


def _rewritten(source: str = LOWERED) -> str:
    [variant] = SPLIT.variants(source)
    return SPLIT.rewrite(source, variant.params)


def _small(source: str) -> str:
    """Steps of 16 elements and at most 16 programs: a check vector of 20001 elements takes 16
    programs of 79 steps each, the last one short."""
    for name in ("SPLIT_BLOCK", "SPLIT_PARTIALS_BLOCK"):
        source = BLOCKS.rewrite(source, {"name": name, "value": 16})
    return source


@pytest.fixture(scope="module")
def evaluate():
    """The folder's simulated backend, as a campaign has it (no torch op may do the task's work).
    Triton is imported first with the interpreter on, as tests/test_task.py's kernels need it: the
    backend imports it into this process, and imported otherwise it leaves later interpreted
    kernels unable to call tl.sum."""
    with _interpreted():
        importlib.import_module("triton")
    with SimulatedBackend(load_task(FOLDER), device="h200", noise=0.0, timeout_s=120, own_kernel=True) as backend:

        def run(source: str) -> EvalReport:
            return anyio.run(lambda: backend.evaluate(source, submission_id=1, secret_seed=5), backend="trio")

        yield run


def test_inductors_looping_sum_becomes_two_launches_in_its_own_precision():
    [variant] = SPLIT.variants(LOWERED)
    assert variant.params == {"kernel": KERNEL}
    out = SPLIT.rewrite(LOWERED, variant.params)
    assert f"def {KERNEL}(" not in out and "tl.range(0, r0_numel" not in out
    host = out[out.index("def custom_kernel") :]
    assert [line.split("[")[0].strip() for line in host.splitlines() if "_split_" in line and "[(" in line] == PHASES
    # Inductor's float64 accumulation stays in both phases and in the partials; its cast to float32
    # runs once, in the combine, and nothing is atomic.
    assert out.count("tl.full([XBLOCK, R0_BLOCK], 0, tl.float64)") == 2 and "dtype=torch.float64" in host
    assert out.count(".to(tl.float32)") == 1 and "atomic" not in out
    # The loop's own block constants go with it; the new ones are module literals block_size tunes.
    assert "XBLOCK_0" not in out and "R0_BLOCK_0" not in out
    assert BLOCKS.detect(out) == {"SPLIT_BLOCK": 2048, "SPLIT_PARTIALS_BLOCK": 1024}
    # Rewritten once: nothing more to offer, and the form is reported as present.
    assert SPLIT.variants(out) == [] and SPLIT.detect(out) == {"kernel": KERNEL}


def test_the_rewrite_passes_the_folders_check_and_streams_on_every_sm(evaluate):
    rewritten, lowered = evaluate(_rewritten()), evaluate(LOWERED)
    seed = evaluate((FOLDER / "seed.py").read_text())
    assert rewritten.outcome is Outcome.PASSED, rewritten.reason
    assert lowered.outcome is Outcome.PASSED and seed.outcome is Outcome.PASSED
    # Checked on a vector of ten 2048-element steps (the folder's check shapes), not on one step.
    assert max(dict(s.args)["size"] for s in rewritten.checked_shapes) > 4 * 2048
    assert rewritten.score_us is not None and lowered.score_us is not None and seed.score_us is not None
    assert rewritten.score_us < lowered.score_us / 10  # one SM streaming against all of them
    assert rewritten.score_us < seed.score_us  # and below PyTorch's own sum
    # On 52M elements the partials stream near bandwidth: within twice the I/O-bytes bound.
    largest = rewritten.shapes[-1]
    assert largest.time_us is not None and largest.sol_us is not None and largest.time_us < 2 * largest.sol_us


def test_many_small_chunks_sum_right_and_a_lost_partial_is_caught(evaluate):
    small = _small(_rewritten())
    assert evaluate(small).outcome is Outcome.PASSED
    # A tuner's step for phase 1 other than the host's (per_shape_tuning may pick one): each program
    # still takes whole steps of its own, so no element is summed twice or skipped.
    steps = "R0_BLOCK=SPLIT_BLOCK,"
    assert small.count(steps) == 1
    assert evaluate(small.replace(steps, "R0_BLOCK=4 * SPLIT_BLOCK,")).outcome is Outcome.PASSED
    every = "_ks_mask = _ks_index < _ks_parts\n"
    assert small.count(every) == 1
    wrong = evaluate(small.replace(every, "_ks_mask = _ks_index < _ks_parts - 1\n"))
    assert wrong.outcome is Outcome.WRONG_OUTPUT and "differ from the reference" in wrong.reason


# Inductor's maximum and its reduction, as `kernel-scientist lower` writes them for `data.amax()`.
_MAX_HELPERS = """

@triton.jit
def inductor_is_floating(x):
    return inductor_promote_to_tensor(x).dtype.is_floating()


@triton.jit
def inductor_promote_to_tensor(x):
    return x + tl.zeros((1,), tl.int1)


@triton.jit
def inductor_{op}2(a, dim):
    return tl.reduce(a, dim, inductor_{op}imum)


@triton.jit
def inductor_{op}imum(a, b):
    mask = a {compare} b
    if inductor_is_floating(a):
        mask |= a != a
    return tl.where(mask, a, b)
"""


def _mutated(old: str, new: str, source: str = LOWERED) -> str:
    assert source.count(old) == 1, old
    return source.replace(old, new)


def _combined_by(op: str) -> str:
    """The fixture's kernel as Inductor writes a maximum (``op`` "max") or a minimum ("min")."""
    source = _mutated(
        "# Launch settings", _MAX_HELPERS.format(op=op, compare=">" if op == "max" else "<") + "\n# Launch settings"
    )
    start = "float('-inf')" if op == "max" else "float('inf')"
    source = _mutated(
        "tl.full([XBLOCK, R0_BLOCK], 0, tl.float64)", f"tl.full([XBLOCK, R0_BLOCK], {start}, tl.float64)", source
    )
    source = _mutated("tmp4 = _tmp3 + tmp2", f"tmp4 = inductor_{op}imum(_tmp3, tmp2)", source)
    return _mutated("tl.sum(_tmp3, 1)", f"inductor_{op}2(_tmp3, 1)", source)


KINDS = {
    "sum": (LOWERED, lambda x: x.double().sum().float()),
    "mean": (  # an epilogue that reads the length: it runs once, in the combine
        _mutated("tmp5 = tmp3.to(tl.float32)", "tmp5 = (tmp3 / r0_numel.to(tl.float64)).to(tl.float32)"),
        lambda x: x.double().mean().float(),
    ),
    "max": (_combined_by("max"), lambda x: x.double().max().float()),
    "min": (_combined_by("min"), lambda x: x.double().min().float()),
}


@pytest.mark.parametrize("kind", KINDS)
def test_the_kernels_own_combine_and_epilogue_stay(kind, tmp_path):
    """Sums, a mean's division, Inductor's maximum and minimum: the split answers what the loop
    answers on one element, on a vector of many short chunks, and (maximum and minimum, which
    propagate NaN) on one holding a NaN; a maximum or minimum exactly."""
    source, expected = KINDS[kind]
    # The loop with 64-element steps: the interpreter reduces with Inductor's own maximum element by element.
    loop = InterpretedSubmission(BLOCKS.rewrite(source, {"name": "R0_BLOCK_0", "value": 64}), tmp_path, f"{kind}_loop")
    split = InterpretedSubmission(_small(_rewritten(source)), tmp_path, f"{kind}_split")
    torch.manual_seed(0)
    vectors = [torch.randn(1) * 5 + 3, torch.randn(5003) * 7 + 2]
    if kind in ("max", "min"):
        vectors.append(torch.randn(4001).index_fill_(0, torch.tensor([2500]), float("nan")))
    for x in vectors:
        data = (x, torch.empty(1))
        got, looped = split.custom_kernel(data), loop.custom_kernel(data)
        assert torch.allclose(looped, expected(x), rtol=1e-6, equal_nan=True)
        if kind in ("max", "min"):
            assert torch.equal(got, looped) or (got.isnan() and looped.isnan())
        else:
            assert torch.allclose(got, looped, rtol=1e-6)


def test_the_cuda_backends_spelling_is_taken_too(tmp_path):
    """Inductor's CUDA code differs in spelling, not structure: a plain range, parenthesised
    indices, the store's index as a block of its own, other block and warp literals."""
    source = LOWERED
    for old, new in (
        ("tl.range(0, r0_numel, R0_BLOCK)", "range(0, r0_numel, R0_BLOCK)"),
        ("in_ptr0 + r0_0,", "in_ptr0 + (r0_0),"),
        (
            "out_ptr1 + tl.full([1, 1], 0, tl.int32).broadcast_to(XBLOCK, 1)",
            "out_ptr1 + (tl.full([XBLOCK, 1], 0, tl.int32))",
        ),
        ("R0_BLOCK_0 = 2048", "R0_BLOCK_0 = 4096"),
        ("num_warps=16", "num_warps=8"),
    ):
        source = _mutated(old, new, source)
    split = InterpretedSubmission(_small(_rewritten(source)), tmp_path, "cuda_split")
    torch.manual_seed(1)
    x = torch.randn(20001) * 3 + 50
    assert torch.allclose(split.custom_kernel((x, torch.empty(1))), x.double().sum().float(), rtol=1e-6)


_TWO_SUMS = (  # a second accumulator beside the first: the sum of squares in the same loop
    "    _tmp3 = tl.full([XBLOCK, R0_BLOCK], 0, tl.float64)\n",
    "    _tmp3 = tl.full([XBLOCK, R0_BLOCK], 0, tl.float64)\n    _tmp9 = tl.full([XBLOCK, R0_BLOCK], 0, tl.float64)\n",
    "        _tmp3 = tl.where(r0_mask, tmp4, _tmp3)\n",
    "        _tmp3 = tl.where(r0_mask, tmp4, _tmp3)\n        _tmp9 = tl.where(r0_mask, _tmp9 + tmp2 * tmp2, _tmp9)\n",
)


@pytest.mark.parametrize(
    ("source", "reason"),
    [
        (
            lambda: _mutated("tmp4 = _tmp3 + tmp2", "tmp4 = _tmp3 * tmp2"),  # a product
            "combines its accumulator by `_tmp3 * tmp2`, not a sum, maximum or minimum",
        ),
        (lambda: _mutated("xnumel = 1\n", "xnumel = 3\n"), "does not set xnumel = 1"),
        (
            lambda: _mutated(*_TWO_SUMS[2:], source=_mutated(*_TWO_SUMS[:2])),
            "carries 2 values from step to step (_tmp3, _tmp9): one accumulator only",
        ),
        (
            lambda: _mutated(
                "tl.full([XBLOCK, R0_BLOCK], 0, tl.float64)", "tl.full([XBLOCK, R0_BLOCK], 1, tl.float64)"
            ),
            "starts its sum at 1, not 0",
        ),
        (
            lambda: _mutated("tl.sum(_tmp3, 1)", "tl.max(_tmp3, 1)"),
            "does not reduce its accumulator once after the loop",
        ),
        (
            lambda: _mutated("tmp1 = tmp0.to(tl.float64)", "tmp1 = tmp0.to(tl.float64) - _tmp3"),
            "reads its accumulator in its loop other than to combine a value into it",
        ),
        (
            lambda: _mutated(
                "        _tmp3 = tl.where(r0_mask, tmp4, _tmp3)\n",
                "        _tmp3 = tl.where(r0_mask, tmp4, _tmp3)\n        tl.store(out_ptr1 + r0_0, tmp1, r0_mask)\n",
            ),
            "does not make one store, after its loop",
        ),
        (
            lambda: _mutated("[triton.cdiv(1, XBLOCK_0),]", "[triton.cdiv(2, XBLOCK_0),]"),
            "not launched on a grid of one program",
        ),
        (
            lambda: _mutated(
                "    outs = (buf1,)",
                f"    {KERNEL}[(1,)](arg1_1, buf1, 1, s63, XBLOCK=1, R0_BLOCK=16)\n    outs = (buf1,)",
            ),
            "is not launched once",
        ),
        (
            lambda: _mutated("(arg1_1, buf1, 1, s63,", "(arg1_1, buf1, 1, s63 + 0,"),
            "passes its arguments as expressions",
        ),
        (  # Inductor's own row reduction (a row norm): one row per program already
            lambda: (ROOT / "tests" / "fixtures_any_kernel" / "inductor_reduction" / "lowered.py").read_text(),
            "does not set xnumel = 1",
        ),
        (
            lambda: (ROOT / "tests" / "problems" / "vecadd" / "submission.py").read_text(),
            "no kernel loops over a reduction",
        ),
    ],
    ids=[
        "product",
        "xnumel-not-1",
        "two-accumulators",
        "sum-not-from-0",
        "other-final-reduction",
        "accumulator-read",
        "store-in-loop",
        "grid-of-two",
        "two-launches",
        "expression-argument",
        "row-reduction",
        "elementwise",
    ],
)
def test_what_it_cannot_rewrite_exactly_is_refused_with_the_reason(source, reason):
    text = source()
    assert SPLIT.variants(text) == []
    with pytest.raises(NotApplicable, match="split_reduction: .*" + re.escape(reason)):
        SPLIT.detect(text)


_PTX = r"""
import importlib.util, sys
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

spec = importlib.util.spec_from_file_location("split", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
types = {"in_ptr0": "*fp32", "out_ptr1": "*fp32", "_ks_partials": "*fp64", "r0_numel": "i32", "_ks_parts": "i32"}
for phase, block in (("split_partials", 2048), ("split_combine", 1024)):
    fn = getattr(module, sys.argv[2] + "_" + phase)
    names = fn.arg_names
    sig = {n: "constexpr" if n == "R0_BLOCK" else types[n] for n in names}
    src = ASTSource(fn, sig, {(names.index("R0_BLOCK"),): block})
    ptx = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": 8, "num_stages": 1}).asm["ptx"]
    print(phase, "ld.global" in ptx and "st.global" in ptx)
"""


def test_both_phases_compile_for_hopper(tmp_path):
    """Compiled for sm_90 on this CPU machine (Triton's CUDA backend needs no GPU to emit PTX): a
    chunk's 64-bit start and its tl.minimum bound make a loop the compiler takes."""
    path = tmp_path / "split.py"
    path.write_text(_rewritten())
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["TRITON_CACHE_DIR"] = str(tmp_path / "cache")
    run = subprocess.run(
        [sys.executable, "-c", _PTX, str(path), KERNEL], env=env, capture_output=True, text=True, timeout=600
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.split() == ["split_partials", "True", "split_combine", "True"]


def test_a_campaign_from_the_lowered_sum_takes_the_split_first(tmp_path: Path):
    from kernel_scientist.blackboard import open_existing

    scenario = tmp_path / "vectorsum.toml"
    scenario.write_text(
        f'[campaign]\nname = "vectorsum"\ntask = "{FOLDER}"\nseed_file = "submission.py"\nhours = 1.0\n\n'
        '[agents]\nbrain = "offline"\n\n[evaluator]\nbackend = "simulated"\ndevice = "h200"\n'
    )
    db = tmp_path / "vectorsum.sqlite"
    cmd = [sys.executable, "-m", "kernel_scientist", "run", str(scenario), "--db", str(db), "--quiet"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=900, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    with open_existing(db) as board:
        kernels = {k.id: k for k in board.kernels()}
        hypotheses = board.hypotheses()
        scores = {e.kernel_id: e.report.passed_score() for e in board.evaluations()}
    seed = next(k for k in kernels.values() if k.author == "seed")
    assert f"def {KERNEL}(" in seed.source  # Inductor's loop
    taken = [h for h in hypotheses if h.technique == "split_reduction" and h.kernel_id is not None]
    assert taken and taken[0].base_id == seed.id, [(h.technique, h.label) for h in hypotheses]
    assert taken[0].id <= 3  # among the first design's three plans
    split = taken[0].kernel_id
    assert split is not None and all(f"def {name}(" in kernels[split].source for name in PHASES)
    score, loop = scores.get(split), scores.get(seed.id)
    assert score is not None and loop is not None and score < loop / 10, (score, loop)
