"""The techniques for any Triton kernel, on the test folders' seeds and TorchInductor-style modules.

Every form of every any-kernel technique, applied to each seed, parses, passes the static rules,
is not offered again, and is still correct on every test shape of its folder when run in Triton's
CPU interpreter, twice per shape (a second call takes what the first kept). The seeds: the Triton
seeds of tests/problems (vecadd, rowstats, stencil), the minimal relu folder of
docs/problem-folders.md, its seed with PyTorch fallbacks and as two chained kernels, two modules
in the form TorchInductor
writes, and three that `kernel-scientist lower` wrote from PyTorch seeds (GPU MODE's grayscale and
vectorsum, a row norm; tests/fixtures_any_kernel). Then each technique's own behaviour: what it
refuses and why, the per-shape tuner on a stand-in GPU, and the GEMM catalogue's any-kernel
entries, which act on a user's GEMM kernel but never on the seed's regions.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from _support import ANY_KERNEL_SEEDS
from kernel_scientist.evaluator import load_task, static_findings
from kernel_scientist.knowledge import NotApplicable, Technique, Variant
from test_task import InterpretedSubmission

from kernel_scientist import knowledge

ROOT = Path(__file__).resolve().parents[1]
PROBLEMS = ROOT / "tests" / "problems"
FIXTURES = ROOT / "tests" / "fixtures_any_kernel"
FP8 = ROOT / "evaluator" / "tasks" / "amd_fp8_mm"
# seed name -> (its folder, its file)
SEEDS = ANY_KERNEL_SEEDS
# Modules in TorchInductor's form: block sizes as per-kernel module constants (XBLOCK_0). The last
# two were written by `kernel-scientist lower` from the folder's seed.py, as a campaign on a
# PyTorch seed gets them.
INDUCTOR = ("inductor_pointwise", "inductor_reduction", "inductor_reduction_lowered", "grayscale")
NEW = (
    "per_shape_tuning",
    "elements_per_thread",
    "cache_hints",
    "rows_per_program",
    "drop_fallback",
    "fuse_launches",
    "block_scan",
    "split_reduction",
)


def seed(name: str) -> str:
    folder, file = SEEDS[name]
    return (folder / file).read_text()


def load(source: str, folder: Path, tmp_path: Path, name: str) -> InterpretedSubmission:
    """``source`` imported in Triton's interpreter, with ``folder``'s task.py importable as ``task``."""
    task = load_task(folder)
    (tmp_path / "task.py").write_text(Path(task.modules["task"]).read_text())
    saved = sys.modules.pop("task", None)
    sys.path.insert(0, str(tmp_path))
    try:
        return InterpretedSubmission(source, tmp_path, name)
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("task", None)
        if saved is not None:
            sys.modules["task"] = saved


def check_every_shape(source: str, folder: Path, tmp_path: Path, name: str, calls: int = 2) -> InterpretedSubmission:
    """Run ``source`` on each test shape of ``folder`` (``calls`` times each) and assert that the
    folder's own check passes every time."""
    from kernel_scientist.evaluator._task import check_failure
    from kernel_scientist.evaluator.sandbox import generate_input, import_reference

    task = load_task(folder)
    ref = import_reference(task.modules)
    module = load(source, folder, tmp_path, name)
    for shape in task.tests:
        data = generate_input(ref, shape, "cpu")
        for call in range(calls):
            failure = check_failure(ref, data, module.custom_kernel(data))
            assert failure is None, f"{name} {shape.label()} call {call + 1}: {failure}"
    return module


def _cases() -> list[tuple[str, str, Variant]]:
    out = []
    for name in SEEDS:
        for item in knowledge.catalogue("nvidia", "any"):
            if item.name in NEW or (item.name == "block_size" and name in INDUCTOR):
                out += [(name, item.name, v) for v in item.variants(seed(name))]
    return out


CASES = _cases()


@pytest.mark.parametrize(("name", "technique", "variant"), CASES, ids=lambda c: str(getattr(c, "label", c)))
def test_every_form_is_correct_on_every_test_shape(name, technique, variant, tmp_path):
    item: Technique = next(t for t in knowledge.catalogue("nvidia", "any") if t.name == technique)
    base = seed(name)
    source = item.rewrite(base, dict(variant.params))
    assert source != base
    compile(source, f"{name}.py", "exec")
    assert not [f.text() for f in static_findings(source, own_kernel=True) if f.rejects]
    assert all(v.params != variant.params for v in item.variants(source))  # not offered again
    check_every_shape(source, SEEDS[name][0], tmp_path, f"{name}_{technique}")


def test_every_new_technique_applies_to_some_seed_and_every_seed_gets_some():
    applied = {(name, technique) for name, technique, _ in CASES}
    assert {t for _, t in applied} == set(NEW) | {"block_size"}
    for name in SEEDS:
        assert len({t for n, t in applied if n == name}) >= 2, name
    # The Inductor modules: tuning, hints, rows per program, and elements per thread where a kernel
    # is pointwise (the lowered row norm is one reduction kernel).
    for name in INDUCTOR:
        wanted = {"per_shape_tuning", "cache_hints", "rows_per_program", "block_size"}
        wanted |= {"elements_per_thread"} if name != "inductor_reduction_lowered" else set()
        assert wanted <= {t for n, t in applied if n == name}, name


# ---- block sizes by name ------------------------------------------------------------------------


def test_block_size_takes_any_block_name_and_one_form_changes_one_constant():
    block = knowledge.technique("block_size")
    source = seed("inductor_reduction")
    assert block.detect(source) == {"XBLOCK_0": 8, "R0_BLOCK_0": 64, "XBLOCK_1": 256}
    changed = block.apply(source, {"name": "R0_BLOCK_0", "value": 256})
    assert [line for line in changed.splitlines() if "BLOCK_" in line and " = " in line and "(" not in line] == [
        "XBLOCK_0 = 8",
        "R0_BLOCK_0 = 256",
        "XBLOCK_1 = 256",
    ]
    counted = "NUM_BLOCKS = 4\nBLOCKS_PER_SM = 2\nX = 1\n"
    with pytest.raises(NotApplicable, match="no \\*BLOCK\\* constant"):
        block.detect(counted)
    # A row reduction's XBLOCK of 1 may grow (and is not offered below 1).
    assert {"XBLOCK_0=2", "XBLOCK_0=4"} <= {
        v.label for v in block.variants(source.replace("XBLOCK_0 = 8", "XBLOCK_0 = 1"))
    }


# ---- per-shape tuning ------------------------------------------------------------------------------


def _tuned(name: str) -> str:
    return knowledge.technique("per_shape_tuning").apply(seed(name), {"tuning": "per_shape"})


def test_the_tuner_rewrites_every_launch_with_a_grid_that_follows_the_block():
    stencil = _tuned("stencil")
    assert (
        "lambda cfg: (triton.cdiv(height, cfg['BLOCK_H']), triton.cdiv(width, cfg['BLOCK_W']))" in stencil
        and "('BLOCK_H', 'BLOCK_W', 'num_warps')" in stencil
    )
    relu = _tuned("relu")  # a literal block: the grid's copy of it follows too
    assert "lambda cfg: (triton.cdiv(n, cfg['BLOCK']),), (data, out, n), dict(BLOCK=1024)" in relu
    rows = _tuned("rowstats")  # the grid does not depend on BLOCK; the loop makes num_stages count
    assert "lambda cfg: (rows,)" in rows and "('BLOCK', 'num_warps', 'num_stages')" in rows
    reduction = _tuned("inductor_reduction")
    assert reduction.count("_ks_tuned(triton_") == 2
    # The in-place kernel's argument is among those it stores to (timing launches write copies).
    assert "'triton_poi_fused_sqrt_1#1', ('XBLOCK', 'num_warps'), (0,))" in reduction
    tuning = knowledge.technique("per_shape_tuning")
    assert tuning.detect(reduction) == {"tuning": "per_shape"} and tuning.variants(reduction) == []
    assert tuning.apply(reduction, {"tuning": "per_shape"}) == reduction


def test_a_block_the_grid_cannot_follow_is_not_tuned():
    computed = seed("vecadd").replace(
        "    add_kernel[(triton.cdiv(n, BLOCK),)](",
        "    blocks = triton.cdiv(n, BLOCK)\n    add_kernel[(blocks,)](",
    )
    assert "blocks = triton.cdiv" in computed
    source = knowledge.technique("per_shape_tuning").apply(computed, {"tuning": "per_shape"})
    assert "lambda cfg: (blocks,)" in source and "('num_warps',)" in source


def _on_a_stand_in_gpu(module, cost):
    """Let ``module``'s tuner run on the CPU: tuning allowed, and each setting "timed" by
    ``cost(setting)`` after its launches ran (so a wrong answer is still caught). Returns the
    settings timed, in order."""
    timed = []
    namespace = module.module

    def time_it(launch):
        launch()
        setting = namespace._ks_last[0]
        timed.append(setting)
        return cost(setting)

    namespace._ks_can_tune = lambda args, cfg: True
    namespace._ks_time = time_it
    namespace._ks_last = [None]
    launched = namespace._ks_jit_launch

    def remembering(kernel, grid, args, cfg):
        namespace._ks_last[0] = dict(cfg)
        return launched(kernel, grid, args, cfg)

    namespace._ks_jit_launch = remembering
    return timed


def test_the_tuner_picks_per_shape_and_leaves_the_outputs_to_the_real_launch(tmp_path):
    """On a stand-in GPU that prefers larger XBLOCKs and 8 warps, each shape of the Inductor
    reduction keeps its own fastest setting; the answers stay right on every call, the in-place
    square root included (timing launches wrote copies, so the real output was written once)."""
    folder = SEEDS["inductor_reduction"][0]
    module = load(_tuned("inductor_reduction"), folder, tmp_path, "tuned_reduction")
    timed = _on_a_stand_in_gpu(module, lambda s: 1.0 / s["XBLOCK"] + abs(s.get("num_warps", 4) - 8))
    namespace = module.module
    from kernel_scientist.evaluator._task import check_failure
    from kernel_scientist.evaluator.sandbox import generate_input, import_reference

    task = load_task(folder)
    ref = import_reference(task.modules)
    for shape in task.tests:
        data = generate_input(ref, shape, "cpu")
        for _ in range(2):
            assert check_failure(ref, data, module.custom_kernel(data)) is None
    kept = namespace._KS_TUNED
    assert len(kept) == 2 * len(task.tests)  # one setting per launch site and shape
    assert all(setting["num_warps"] == 8 for setting in kept.values())
    assert all(setting["XBLOCK"] > 8 for key, setting in kept.items() if key[0].startswith("triton_red"))
    per_key = namespace.KS_TUNE_TRIALS
    assert len(timed) <= per_key * len(kept)  # bounded per shape key
    # Settings only: no tensor is kept, and the key holds shapes, strides, dtypes and integers.
    import torch

    for key, setting in kept.items():
        assert not any(isinstance(v, torch.Tensor) for v in setting.values())
        assert "data_ptr" not in repr(key)


def test_the_tuner_skips_a_setting_with_another_answer_or_that_fails(tmp_path):
    """One program covers the whole vector (grid (1,)): a smaller BLOCK leaves elements unwritten.
    The stand-in GPU prefers the smallest block and fails every 16-warp launch; the tuner keeps a
    block that covers the vector, and the answer is right."""
    source = seed("relu").replace(
        "relu_kernel[(triton.cdiv(n, 1024),)](data, out, n, BLOCK=1024)",
        "relu_kernel[(1,)](data, out, n, BLOCK=8192, num_warps=8)",
    )
    tuned = knowledge.technique("per_shape_tuning").apply(source, {"tuning": "per_shape"})
    assert "('BLOCK', 'num_warps')" in tuned
    module = load(tuned, SEEDS["relu"][0], tmp_path, "one_program")

    def cost(setting):
        if setting.get("num_warps") == 16:
            raise RuntimeError("out of resources")
        return setting["BLOCK"]

    _on_a_stand_in_gpu(module, cost)
    import torch

    x = torch.randn(5000)
    assert torch.equal(module.custom_kernel(x), torch.relu(x))
    (kept,) = module.module._KS_TUNED.values()
    assert kept["BLOCK"] >= 5000 and kept["num_warps"] != 16


def test_without_a_gpu_the_tuner_launches_what_the_source_did(tmp_path):
    module = check_every_shape(_tuned("stencil"), SEEDS["stencil"][0], tmp_path, "tuned_stencil_cpu")
    assert {tuple(sorted(s.items())) for s in module.module._KS_TUNED.values()} == {
        (("BLOCK_H", 16), ("BLOCK_W", 32), ("num_warps", 4))
    }


def test_tuning_composes_after_direct_launch(tmp_path):
    direct = knowledge.technique("direct_launch").apply(seed("inductor_pointwise"), {"launch": "direct"})
    tuned = knowledge.technique("per_shape_tuning").apply(direct, {"tuning": "per_shape"})
    assert (
        tuned.count("_ks_tuned(triton_poi") == 2
        and "_ks_search(kernel, grid, args, cfg, tunable, written, _ks_launch)" in tuned
    )
    check_every_shape(tuned, SEEDS["inductor_pointwise"][0], tmp_path, "direct_tuned")


# ---- elements per thread ---------------------------------------------------------------------------


def test_elements_per_thread_moves_block_and_warps_together():
    item = knowledge.technique("elements_per_thread")
    relu = item.apply(seed("relu"), {"kernel": "relu_kernel", "elements_per_thread": 16, "num_warps": 8})
    assert "relu_kernel[(triton.cdiv(n, 4096),)](data, out, n, BLOCK=4096, num_warps=8)" in relu
    assert item.detect(relu) == {"relu_kernel": "16x8"}
    pointwise = item.apply(
        seed("inductor_pointwise"), {"kernel": "triton_poi_fused_add_relu_1", "elements_per_thread": 4, "num_warps": 8}
    )
    # 4 per thread on 8 warps is XBLOCK 1024 again: only that kernel's warps change
    assert "XBLOCK_0 = 1024\nXBLOCK_1 = 1024\n" in pointwise
    assert "XBLOCK=XBLOCK_1, num_warps=8, num_stages=1" in pointwise and "XBLOCK=XBLOCK_0, num_warps=4" in pointwise
    reduction = item.detect(seed("inductor_reduction"))
    assert reduction == {"triton_poi_fused_sqrt_1": "2x4"}  # the looped reduction is not elementwise
    for name in ("rowstats", "stencil"):
        with pytest.raises(NotApplicable, match="no 1-D elementwise kernel"):
            item.detect(seed(name))


# ---- cache hints -----------------------------------------------------------------------------------

BIAS = """import torch
import triton
import triton.language as tl


@triton.jit
def bias_kernel(x_ptr, b_ptr, out_ptr, cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < cols
    x = tl.load(x_ptr + row * cols + offs, mask=mask)
    b = tl.load(b_ptr + offs, mask=mask)
    tl.store(out_ptr + row * cols + offs, x + b, mask=mask)


def custom_kernel(data):
    x, b = data
    out = torch.empty_like(x)
    bias_kernel[(x.shape[0],)](x, b, out, x.shape[1], BLOCK=triton.next_power_of_2(x.shape[1]))
    return out
"""


def test_cache_hints_per_class_of_load(tmp_path):
    item = knowledge.technique("cache_hints")
    assert item.detect(BIAS) == {"streamed": "none", "shared": "none"}
    both = item.apply(item.apply(BIAS, {"streamed": "evict_first"}), {"shared": "evict_last"})
    assert "tl.load(x_ptr + row * cols + offs, mask=mask, eviction_policy='evict_first')" in both
    assert "tl.load(b_ptr + offs, mask=mask, eviction_policy='evict_last')" in both
    assert item.detect(both) == {"streamed": "evict_first", "shared": "evict_last"}
    assert [v.label for v in item.variants(both)][:2] == ["cg on streamed loads", "no hints on streamed loads"]
    import torch

    module = load(both, SEEDS["relu"][0], tmp_path, "bias")
    x, b = torch.randn(5, 33), torch.randn(33)
    assert torch.allclose(module.custom_kernel((x, b)), x + b)
    # Inductor's own hints can be taken off, and set uniformly.
    reduction = seed("inductor_reduction")
    assert item.detect(reduction) == {"streamed": "mixed"}
    plain = item.apply(reduction, {"streamed": "none"})
    assert "eviction_policy" not in plain and item.detect(plain) == {"streamed": "none"}
    with pytest.raises(NotApplicable, match="no class of load 'hot'"):
        item.apply(reduction, {"hot": "evict_first"})


# ---- rows per program ------------------------------------------------------------------------------


def test_rows_per_program_says_why_it_cannot(tmp_path):
    item = knowledge.technique("rows_per_program")
    with pytest.raises(NotApplicable, match="tl.program_id\\(0\\) exactly once"):
        item.detect(seed("stencil"))
    early = seed("rowstats").replace(
        "    row = tl.program_id(0)\n", "    row = tl.program_id(0)\n    if row < 0:\n        return\n"
    )
    with pytest.raises(NotApplicable, match="a return or a while loop"):
        item.detect(early)
    assert item.variants(seed("stencil")) == []
    tuned = _tuned("rowstats")
    with pytest.raises(NotApplicable, match="not one dimension written at its launch"):
        item.detect(tuned)


def test_rows_per_program_counts_change_and_the_persistent_grid_is_sized_off_a_gpu(tmp_path):
    item = knowledge.technique("rows_per_program")
    four = item.apply(seed("rowstats"), {"kernel": "rowstats_kernel", "rows": 4})
    assert item.detect(four) == {"rowstats_kernel": "rows=4"}
    assert [v.label for v in item.variants(four)] == [
        "rowstats_kernel: 2 rows per program",
        "rowstats_kernel: 8 rows per program",
    ]
    eight = item.apply(four, {"kernel": "rowstats_kernel", "rows": 8})
    assert "_ks_programs=rows, ROWS_PER_PROGRAM=8)" in eight
    with pytest.raises(NotApplicable, match="already has the rows form"):
        item.apply(four, {"kernel": "rowstats_kernel", "per_sm": 2})
    check_every_shape(eight, SEEDS["rowstats"][0], tmp_path, "rows8")
    persistent = item.apply(seed("rowstats"), {"kernel": "rowstats_kernel", "per_sm": 2})
    module = load(persistent, SEEDS["rowstats"][0], tmp_path, "persistent")
    assert module.module.KS_SMS == 132 and module.module._ks_persistent(10_000, 2) == 264
    amd = knowledge.catalogue("amd", "any")
    amd_rows = next(t for t in amd if t.name == "rows_per_program")
    assert "KS_SMS = 304" in amd_rows.apply(seed("rowstats"), {"kernel": "rowstats_kernel", "per_sm": 2})


# ---- lowered PyTorch seeds --------------------------------------------------------------------------

GRAY = "triton_poi_fused_copy__lift_fresh_mul_sum_0"


def test_the_catalogue_reads_a_lowered_seed(tmp_path):
    """`kernel-scientist lower` writes grids as tuples without parentheses and block sizes as
    per-kernel constants; the grayscale seed writes into the output its caller passes in."""
    source = seed("grayscale")
    assert f"{GRAY}[triton.cdiv({GRAY}_xnumel, XBLOCK_0),](" in source
    assert knowledge.technique("block_size").detect(source) == {"XBLOCK_0": 256}
    assert knowledge.technique("elements_per_thread").detect(source) == {GRAY: "2x4"}
    assert knowledge.technique("cache_hints").detect(source) == {"streamed": "evict_last"}
    tuned = _tuned("grayscale")
    # the grid a lambda's whole body; the caller's output (argument 1) is what timing launches copy
    assert f"lambda cfg: (triton.cdiv({GRAY}_xnumel, cfg['XBLOCK']),), (arg2_1, arg3_1, {GRAY}_xnumel)" in tuned
    assert f"'{GRAY}#0', ('XBLOCK', 'num_warps'), (1,))" in tuned
    wider = knowledge.technique("elements_per_thread").apply(
        source, {"kernel": GRAY, "elements_per_thread": 8, "num_warps": 4}
    )
    assert "XBLOCK_0 = 1024" in wider and "XBLOCK=XBLOCK_0, num_warps=4" in wider
    module = load(tuned, SEEDS["grayscale"][0], tmp_path, "tuned_grayscale")
    _on_a_stand_in_gpu(module, lambda s: 1.0 / s["XBLOCK"])
    import torch

    for size in (8, 30):
        image, out = torch.rand(size, size, 3), torch.zeros(size, size)
        expected = (image * torch.tensor([0.2989, 0.5870, 0.1140])).sum(-1)
        assert module.custom_kernel((image, out)) is out and torch.allclose(out, expected, atol=1e-5)
    assert all(setting["XBLOCK"] > 256 for setting in module.module._KS_TUNED.values())


def test_rows_per_program_keeps_a_lowered_kernels_constexpr_before_its_loop(tmp_path):
    """Triton binds a constexpr once per kernel and traces a loop's body more than once: the
    lowered reduction's ``RBLOCK: tl.constexpr = R0_BLOCK`` stays before the loop over rows."""
    item = knowledge.technique("rows_per_program")
    name = "triton_red_fused_mul_sqrt_sum_0"
    for params, loop in (({"rows": 2}, "for _ks_step in range("), ({"per_sm": 2}, "for _ks_pid in range(")):
        source = item.apply(seed("inductor_reduction_lowered"), {"kernel": name, **params})
        assert f"    RBLOCK: tl.constexpr = R0_BLOCK\n    {loop}" in source
        assert "        rnumel = r0_numel\n" in source  # the rest of the body moved into the loop
        check_every_shape(source, SEEDS["inductor_reduction_lowered"][0], tmp_path, f"lowered_{loop[6:13]}", calls=1)


# ---- fused launches --------------------------------------------------------------------------------

PAIR = {"pair": "double_kernel+half_relu_kernel"}


def test_fusing_two_launches_runs_both_bodies_in_one_program(tmp_path):
    item = knowledge.technique("fuse_launches")
    fused = item.apply(seed("relu_chain"), PAIR)
    assert fused.count("double_kernel_half_relu_kernel[") == 1 and "double_kernel[" not in fused
    assert "half_relu_kernel[" not in fused.replace("double_kernel_half_relu_kernel[", "")
    # the second body reads the first's block parameter; its own names are renamed apart
    assert "offs_k1 = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)" in fused
    assert "tl.debug_barrier()" in fused and "x_ptr_k1=doubled, out_ptr_k1=out, n_k1=n)" in fused
    assert item.variants(fused) == []
    check_every_shape(fused, SEEDS["relu"][0], tmp_path, "fused")
    tuned = knowledge.technique("per_shape_tuning").apply(fused, {"tuning": "per_shape"})
    check_every_shape(tuned, SEEDS["relu"][0], tmp_path, "fused_tuned", calls=1)


@pytest.mark.parametrize(
    ("old", "new", "why"),
    [
        (
            "tl.load(x_ptr + offs, mask=mask)\n    tl.store(out_ptr + offs, tl.maximum",
            "tl.load(x_ptr + offs + 1, mask=mask)\n    tl.store(out_ptr + offs, tl.maximum",
            "reads doubled at offsets other than",
        ),
        (
            "    out = torch.empty_like(data)\n",
            "    out = torch.empty_like(doubled.sum())\n",
            "statements between the launches",
        ),
        (
            "(doubled, out, n, BLOCK_SIZE=1024)",
            "(doubled, data, n, BLOCK_SIZE=1024)",
            "writes a buffer the first is passed",
        ),
        (
            "(triton.cdiv(n, 1024),)](doubled, out, n, BLOCK_SIZE=1024)",
            "(triton.cdiv(n, 512),)](doubled, out, n, BLOCK_SIZE=512)",
            "block sizes not equal",
        ),
        (
            "    x = tl.load(x_ptr + offs, mask=mask)\n",
            "    x = tl.load(x_ptr + offs, mask=mask)\n    if n < 0:\n        return\n",
            "returns early",
        ),
        (
            "    mask = offs < n\n    x = tl.load",
            "    mask = offs < n\n    if n > 5:\n        offs = offs + 1\n    x = tl.load",
            "reads doubled at offsets other than",
        ),
    ],
    ids=[
        "another_programs_element",
        "host_reads_the_intermediate",
        "writes_the_first_input",
        "other_block",
        "early_return",
        "offset_bound_twice",
    ],
)
def test_fusing_refuses_what_would_not_be_exact(old, new, why):
    source = seed("relu_chain")
    assert old in source
    with pytest.raises(NotApplicable, match=why):
        knowledge.technique("fuse_launches").detect(source.replace(old, new))


# ---- PyTorch fallbacks -----------------------------------------------------------------------------

TAIL = """import torch
import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, tl.maximum(x, 0.0), mask=mask)


def custom_kernel(data):
    if data.is_cuda and data.is_contiguous():
        out = torch.empty_like(data)
        n = data.numel()
        relu_kernel[(triton.cdiv(n, 1024),)](data, out, n, BLOCK=1024)
        return out
    return torch.relu(data)
"""


def test_drop_fallback_sends_every_case_through_the_kernel(tmp_path):
    item = knowledge.technique("drop_fallback")
    labels = [v.label for v in item.variants(seed("relu_fallback"))]
    assert labels == ["drop `if not data.is_cuda:` (its PyTorch branch)", "drop `if n < 4096:` (its PyTorch branch)"]
    both = item.apply(item.apply(seed("relu_fallback"), {"branch": "not data.is_cuda"}), {"branch": "n < 4096"})
    assert "torch.relu" not in both and "clamp_min" not in both and item.variants(both) == []
    module = check_every_shape(both, SEEDS["relu"][0], tmp_path, "no_fallback", calls=1)
    launched = []
    kernel = module.module.relu_kernel

    class Counting:  # off a GPU and on a small input, the kernel runs now
        def __getitem__(self, grid):
            launched.append(grid)
            return kernel[grid]

    module.module.relu_kernel = Counting()
    import torch

    x = torch.randn(65)
    assert torch.equal(module.custom_kernel(x), torch.relu(x)) and launched == [(1,)]
    tail = item.apply(TAIL, {"branch": "data.is_cuda and data.is_contiguous()"})
    assert "torch.relu" not in tail and "    relu_kernel[(triton.cdiv(n, 1024),)]" in tail
    check_every_shape(tail, SEEDS["relu"][0], tmp_path, "tail", calls=1)
    with pytest.raises(NotApplicable, match="no fallback branch `if x:`"):
        item.apply(seed("relu_fallback"), {"branch": "x"})


# ---- GEMM tasks ------------------------------------------------------------------------------------


def test_a_gemm_task_gets_the_any_kernel_entries_which_leave_the_seeds_regions_alone():
    """A GEMM task's catalogue holds the any-kernel techniques too (a user's own GEMM kernel has no
    regions); on the seed and on every kernel one step from it they offer nothing, so the GEMM
    techniques alone act there."""
    gemm_seed = (FP8 / "submission.py").read_text()
    for vendor in ("amd", "nvidia"):
        gemm = knowledge.catalogue(vendor)
        anyk = [t for t in gemm if "any" in t.kernels]
        # All but block_scan and split_reduction (a matrix-product task has no cumsum or full
        # reduction to rewrite), and library_mm, which only a matrix-product task gets
        # (tests/test_library_mm.py).
        assert {t.name for t in anyk} == {"block_size", "launch_warps", "launch_stages", "library_mm", *NEW} - {
            "block_scan",
            "split_reduction",
        }
        one_step = [
            item.rewrite(gemm_seed, dict(v.params))
            for item in gemm
            if "any" not in item.kernels
            for v in item.variants(gemm_seed)
        ]
        for source in [gemm_seed, *one_step]:
            assert not [t.name for t in anyk if t.variants(source)]
    bare = "\n".join(line for line in gemm_seed.splitlines() if "region" not in line) + "\n"
    offered = {t.name for t in knowledge.catalogue("nvidia") if "any" in t.kernels and t.variants(bare)}
    assert offered == {"block_size", "cache_hints"}  # the launch spreads **cfg: nothing else is visible
