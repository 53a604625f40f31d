"""Compile statistics of the kernels a candidate launches (``EvalReport.compile_stats``).

On the simulated backend, asked for them, the timed kernels are compiled for the device's
architecture with Triton's own toolchain (ptxas for sm_90, the AMDGPU back end for gfx942) and
never run; off by default. On a GPU the harness reads the kernels the driver loaded: that path
cannot run here, so its reader is checked on a kernel compiled for sm_90 and placed in a
JITFunction's cache as Triton's launch path would place it.
"""

import json
import os
import subprocess
import sys
import textwrap

import anyio
import msgspec
import pytest
from _support import ROOT, cli
from kernel_scientist.blackboard.compile_stats import compile_stats_table
from kernel_scientist.blackboard.records import EvalReport, Outcome
from kernel_scientist.evaluator import load_task
from kernel_scientist.evaluator.backends import SimulatedBackend

VECADD = ROOT / "tests" / "problems" / "vecadd"
SEED = (VECADD / "submission.py").read_text()
# The same add, also passing an AMD launch option: the interpreter ignores it, Triton's CUDA
# back end refuses it ("Keyword argument waves_per_eu was specified but unrecognised").
AMD_ONLY = SEED.replace("BLOCK=BLOCK, num_warps=4)", "BLOCK=BLOCK, num_warps=4, waves_per_eu=2)")


def _evaluate(device: str, source: str, compile_stats: bool = True) -> EvalReport:
    with SimulatedBackend(load_task(VECADD), device=device, noise=0.0, timeout_s=120, compile_stats=compile_stats) as b:
        return anyio.run(lambda: b.evaluate(source, submission_id=1, secret_seed=5), backend="trio")


def test_simulated_h200_reports_ptxas_figures_for_the_timed_kernel():
    report = _evaluate("h200", SEED)
    assert report.outcome is Outcome.PASSED
    [stats] = report.compile_stats  # one kernel, one setting, however many shapes launched it
    assert stats.kernel == "add_kernel"
    assert stats.settings == "BLOCK=256"
    assert (stats.num_warps, stats.num_stages) == (4, 3)  # as launched; Triton's default stages
    assert stats.error == ""
    assert stats.registers is not None and 8 <= stats.registers <= 64  # a small elementwise kernel
    assert stats.spills == 0
    assert stats.shared_bytes == 0
    # 64 warps per SM allow 16 blocks of 4 warps; its few registers allow more
    assert (stats.blocks_per_unit, stats.limited_by) == (16, "warps")
    assert stats.origin == "compiled for sm_90 by ptxas, not run on a device"
    table = compile_stats_table(report)
    assert table.splitlines()[0] == "Compile statistics (compiled for sm_90 by ptxas, not run on a device):"
    assert f"| add_kernel | BLOCK=256 | 4 | 3 | {stats.registers} | 0 | 0 B | 16 (warps) |" in table
    assert "blocks per SM" in table


def test_simulated_mi300x_reports_the_amdgpu_back_ends_figures():
    report = _evaluate("mi300x", AMD_ONLY)
    [stats] = report.compile_stats
    assert stats.origin == "compiled for gfx942 by Triton's AMDGPU back end, not run on a device"
    assert stats.error == ""
    assert stats.registers is not None and 1 <= stats.registers <= 512
    assert stats.spills == 0
    assert stats.blocks_per_unit is not None and stats.blocks_per_unit >= 1
    assert "blocks per CU" in compile_stats_table(report)


def test_a_kernel_the_target_refuses_is_named_and_the_evaluation_stands():
    report = _evaluate("h200", AMD_ONLY)
    assert report.outcome is Outcome.PASSED and report.score_us is not None
    [stats] = report.compile_stats
    assert "waves_per_eu" in stats.error
    assert stats.registers is None and stats.blocks_per_unit is None
    assert "- add_kernel (BLOCK=256) did not compile: KeyError" in compile_stats_table(report)


# The add through a dot with the identity on 256 x 256 fp16 tiles: correct on the interpreter,
# and its dot operand takes 128 KiB of shared memory per block: an H200's SM holds one such
# block, an MI300X's CU (64 KiB of LDS) none.
BIG_TILE = (
    SEED.replace(
        """    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    a = tl.load(a_ptr + offs, mask=mask)
    b = tl.load(b_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, a + b, mask=mask)""",
        """    rows = tl.arange(0, BLOCK)[:, None]
    cols = tl.arange(0, BLOCK)[None, :]
    offs = tl.program_id(0) * BLOCK * BLOCK + rows * BLOCK + cols
    mask = offs < n
    s = tl.load(a_ptr + offs, mask=mask, other=0.0) + tl.load(b_ptr + offs, mask=mask, other=0.0)
    eye = tl.where(rows == cols, 1.0, 0.0).to(tl.float16)
    tl.store(out_ptr + offs, tl.dot(s, eye).to(tl.float16), mask=mask)""",
    )
    .replace("(triton.cdiv(n, BLOCK),)", "(triton.cdiv(n, BLOCK * BLOCK),)")
    .replace("num_warps=4)", "num_warps=8, num_stages=1)")
)


def test_a_kernel_whose_block_does_not_fit_a_cu_fails_as_its_launch_would():
    assert "tl.dot(s, eye)" in BIG_TILE and "num_stages=1" in BIG_TILE
    report = _evaluate("mi300x", BIG_TILE)
    assert report.outcome is Outcome.COMPILE_ERROR
    assert report.reason == (
        "add_kernel (BLOCK=256), num_warps=8, num_stages=1: out of resource: shared memory, required 131072, "
        "hardware limit 65536 (compiled for gfx942 by Triton's AMDGPU back end, not run on a device): "
        "the launch fails on the device"
    )
    [stats] = report.compile_stats  # shown to the next design like any other evaluation's
    assert (stats.blocks_per_unit, stats.limited_by) == (0, "shared memory")
    fits = _evaluate("h200", BIG_TILE)  # 227 KiB per block on Hopper: the same kernel launches
    assert fits.outcome is Outcome.PASSED
    assert fits.compile_stats[0].blocks_per_unit == 1


@pytest.mark.parametrize(
    ("figures", "why"),
    [
        (
            {"registers": 255, "num_warps": 16, "limited_by": "registers"},
            "registers, 255 per thread, hardware limit 128 at 16 warps",
        ),
        ({"num_warps": 32, "limited_by": "warps"}, "32 warps per block, hardware limit 16"),
    ],
)
def test_the_refusal_names_the_resource_that_does_not_fit(figures, why):
    from kernel_scientist.blackboard.records import CompileStats
    from kernel_scientist.evaluator.sandbox._compile_stats import launch_refusal, limits_of

    nvidia = limits_of("nvidia", 32, 256, 64, 227)
    stats = CompileStats(kernel="k", settings="B=64", num_stages=2, blocks_per_unit=0, **figures)
    fits = msgspec.structs.replace(stats, blocks_per_unit=1)
    warps = figures["num_warps"]
    if figures["limited_by"] == "warps":
        nvidia = msgspec.structs.replace(nvidia, max_warps=16)
    assert launch_refusal([fits, stats], nvidia) == f"k (B=64), num_warps={warps}, num_stages=2: out of resource: {why}"
    assert launch_refusal([fits], nvidia) is None
    assert launch_refusal([msgspec.structs.replace(stats, blocks_per_unit=None)], nvidia) is None


def test_off_by_default_and_empty_for_a_torch_only_candidate():
    assert _evaluate("h200", SEED, compile_stats=False).compile_stats == []
    torch_only = (VECADD / "solutions" / "correct" / "torch_add.py").read_text()
    report = _evaluate("h200", torch_only)
    assert report.outcome is Outcome.PASSED
    assert report.compile_stats == []
    assert compile_stats_table(report) == ""


def test_evaluate_json_carries_the_field(tmp_path):
    sub = tmp_path / "submission.py"
    sub.write_text(SEED)
    proc = cli("evaluate", str(sub), "--task", str(VECADD), "--device", "h200", "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["compile_stats"] == []  # the simulated backend's default


def test_a_report_written_before_the_field_still_decodes():
    old = {
        "outcome": "passed",
        "reason": "ok",
        "provenance": {"backend": "local", "simulated": False, "device": "NVIDIA H100", "timing_method": "events"},
        "score_us": 12.5,
    }
    report = msgspec.json.decode(json.dumps(old), type=EvalReport)
    assert report.compile_stats == []
    assert compile_stats_table(report) == ""


# The GPU harness's reader, on a kernel compiled for sm_90 and put in a JITFunction's cache the
# way JITFunction.run does; the driver's own figures (n_regs, n_spills) win where it set them.
_GPU_READER = textwrap.dedent(
    """
    import json
    import msgspec
    import triton, triton.language as tl
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource, compile
    from kernel_scientist.evaluator.sandbox._compile_stats import limits_of, loaded_stats

    @triton.jit
    def scale(x_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)

    target = GPUTarget("cuda", 90, 32)
    sig = {"x_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr"}
    kernel = compile(ASTSource(scale, sig, {(2,): 512}), target=target, options={"num_warps": 8})
    # n divisible by 16: another specialisation, the same figures (one entry, not two)
    aligned = compile(
        ASTSource(scale, sig, {(2,): 512}, {(1,): [["tt.divisibility", 16]]}), target=target, options={"num_warps": 8}
    )
    assert aligned.hash != kernel.hash
    scale.device_caches[0] = ({"key": kernel, "aligned": aligned}, {}, target, None, None)
    limits = limits_of("nvidia", 32, 256, 64, 227)
    first = loaded_stats("loaded by the driver on test", limits)
    kernel.n_regs, kernel.n_spills = aligned.n_regs, aligned.n_spills = 200, 3  # as the driver's load_binary sets them
    again = loaded_stats("loaded by the driver on test", limits)
    print(json.dumps(msgspec.to_builtins([first, again])))
    """
)


def test_the_gpu_harness_reads_compiled_kernels_from_triton_caches(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["TRITON_CACHE_DIR"] = str(tmp_path / "cache")
    script = tmp_path / "reader.py"  # @triton.jit reads its function's source from a file
    script.write_text(_GPU_READER)
    proc = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=300, cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    first, again = json.loads(proc.stdout.splitlines()[-1])
    [from_binary] = first
    assert from_binary["kernel"] == "scale" and from_binary["settings"] == "BLOCK=512"
    assert from_binary["num_warps"] == 8 and from_binary["shared_bytes"] == 0
    assert 8 <= from_binary["registers"] <= 64 and from_binary["spills"] == 0  # read from the cubin
    [loaded] = again
    assert (loaded["registers"], loaded["spills"]) == (200, 3)
    # 200 registers -> 208 per thread: 65536 / (208 * 32) = 9 warps, one block of 8
    assert (loaded["blocks_per_unit"], loaded["limited_by"]) == (1, "registers")


@pytest.mark.parametrize("missing", ["registers", "num_warps"])
def test_occupancy_needs_its_figures(missing):
    from kernel_scientist.evaluator.sandbox._compile_stats import limits_of, occupancy

    figures = {"registers": 40, "num_warps": 4, "shared": 0}
    figures[missing] = None
    assert occupancy(limits_of("nvidia", 32, 256, 64, 227), **figures) == (None, "")


@pytest.mark.parametrize(
    ("setting", "llm", "expected"), [("auto", True, 1), ("auto", False, 0), ("on", False, 1), ("off", True, 0)]
)
def test_a_campaign_compiles_for_statistics_where_a_language_model_reads_them(setting, llm, expected):
    """evaluator.compile_stats: "auto" compiles only for an LLM brain (the offline one never reads
    the figures); "on" and "off" decide alone."""
    from kernel_scientist.blackboard.config import EvaluatorConfig
    from kernel_scientist.evaluator.backends import make_backend

    cfg = EvaluatorConfig(device="h200", noise=0.0, timeout_s=120, compile_stats=setting)
    with make_backend(cfg, load_task(VECADD), llm=llm) as backend:
        report = anyio.run(lambda: backend.evaluate(SEED, submission_id=1, secret_seed=5), backend="trio")
    assert report.outcome is Outcome.PASSED and len(report.compile_stats) == expected
