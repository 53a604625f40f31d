"""Any problem folder in GPU MODE's format, not only amd-fp8-mm.

The folders under tests/problems were written for these tests in the public format (a files: list
that takes ../utils.py and ../eval.py, tests that are not m, n, k, a check that returns a message
string or an (ok, message) pair, two outputs, a preallocated output, a generator that hard-codes
device='cuda'). Each ships correct and wrong solutions: the correct ones pass and the wrong ones
are rejected with the folder's own message, on the simulated backend and through the local
backend's CPU mode (the real processes and protocol under Triton's interpreter).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import msgspec
import pytest
from evaluator_kernels import HIDDEN_MATMUL
from kernel_scientist.blackboard.records import EvalReport, Outcome, Shape
from kernel_scientist.evaluator import LocalBackend, SimulatedBackend, TaskError, load_task

from kernel_scientist import knowledge

ROOT = Path(__file__).resolve().parents[1]
PROBLEMS = ROOT / "tests" / "problems"
FP8 = ROOT / "evaluator" / "tasks" / "amd_fp8_mm"

# What each wrong solution's rejection must say: the folder's own check_implementation message.
WRONG = {
    ("vecadd", "drops_tail.py"): "output differs from the reference: ",
    ("rowstats", "first_block_only.py"): "row statistics differ: sums:",
    ("rowstats", "one_output.py"): "expected a tuple (sums, maxima), got Tensor",
    ("stencil", "wraps_edges.py"): "output differs from the reference: ",
    ("stencil", "skips_output.py"): "at (0, 0): nan vs",  # the declared output slot was NaN-filled
    ("rowscan", "exclusive.py"): "output differs from the reference: ",
    ("prefixscan", "blocks_restart.py"): "output differs from the reference: ",
}


def _solutions() -> list[tuple[str, Path, str | None]]:
    cases = []
    for folder in sorted(p for p in PROBLEMS.iterdir() if (p / "task.yml").is_file()):
        cases.append((folder.name, folder / "submission.py", None))
        cases += [(folder.name, f, None) for f in sorted((folder / "solutions" / "correct").glob("*.py"))]
        cases += [
            (folder.name, f, WRONG[(folder.name, f.name)])
            for f in sorted((folder / "solutions" / "wrong").glob("*.py"))
        ]
    return cases


CASES = _solutions()


def _id(case) -> str:
    return f"{case[0]}/{case[1].parent.name if case[1].name != 'submission.py' else 'seed'}/{case[1].stem}"


def test_every_folder_ships_correct_and_wrong_solutions():
    folders = {c[0] for c in CASES}
    assert folders == {"vecadd", "rowstats", "stencil", "rowscan", "prefixscan"}
    for name in folders:
        assert any(c[0] == name and c[2] is None for c in CASES)
        assert any(c[0] == name and c[2] is not None for c in CASES)


@pytest.fixture(scope="module")
def simulated():
    backends = {
        name: SimulatedBackend(load_task(PROBLEMS / name), device="h200", noise=0.0, timeout_s=60)
        for name in {c[0] for c in CASES}
    }
    for b in backends.values():
        b.__enter__()
    yield backends
    for b in backends.values():
        b.close()


def _expect(report: EvalReport, wrong: str | None) -> None:
    if wrong is None:
        assert report.outcome is Outcome.PASSED, report.reason
    else:
        assert report.outcome is Outcome.WRONG_OUTPUT, report.reason
        assert wrong in report.reason


@pytest.mark.parametrize("case", CASES, ids=_id)
async def test_simulated_verdicts(simulated, case):
    name, file, wrong = case
    report = await simulated[name].evaluate(file.read_text(), submission_id=1, secret_seed=5)
    _expect(report, wrong)
    if wrong is None:  # timed by the roofline, labelled simulated, the folder's ranking applied
        assert report.provenance.simulated and report.score_us > 0
        assert [s.shape for s in report.shapes] == simulated[name].task.benchmarks
        assert report.checked_shapes and all(not s.is_mnk() for s in report.checked_shapes)


@pytest.fixture(scope="module")
def on_cpu():
    """The local backend's CPU mode, with each folder's smallest test as its only ranked shape."""
    out = {}
    for name in {c[0] for c in CASES}:
        task = load_task(PROBLEMS / name)
        small = msgspec.structs.replace(task, benchmarks=[min(task.tests, key=lambda s: s.work())])
        out[name] = LocalBackend(small, device="cpu", timeout_s=60, max_calls=3, shape_budget_s=0.3)
    return out


@pytest.mark.parametrize("case", CASES, ids=_id)
async def test_local_cpu_verdicts(on_cpu, case):
    name, file, wrong = case
    report = await on_cpu[name].evaluate(file.read_text(), submission_id=1, secret_seed=5)
    _expect(report, wrong)


async def test_rowstats_scores_by_its_own_ranking(simulated):
    backend = simulated["rowstats"]
    assert backend.task.ranking_by == "mean"
    report = await backend.evaluate(backend.task.seed_source, submission_id=2, secret_seed=1)
    times = [s.time_us for s in report.shapes]
    assert report.score_us == pytest.approx(sum(times) / len(times), rel=1e-3)
    # No flops or bytes declared: the bound is the bytes the inputs and outputs hold (a lower bound).
    assert all(s.sol_us is not None and 0 < s.sol_us < s.time_us for s in report.shapes)


async def test_a_kernel_that_asks_where_its_tensors_live_takes_the_gpus_path(simulated):
    """The simulated GPU's tensors answer ``is_cuda`` as a GPU's would: a guard that falls back
    to PyTorch off the GPU (here a wrong one, to tell) is not taken, and the Triton kernel is
    what is checked and timed."""
    seed = (PROBLEMS / "vecadd" / "submission.py").read_text()
    guarded = seed.replace("    a, b = data\n", "    a, b = data\n    if not a.is_cuda:\n        return a - b\n")
    assert guarded != seed
    report = await simulated["vecadd"].evaluate(guarded, submission_id=6, secret_seed=2)
    plain = await simulated["vecadd"].evaluate(seed, submission_id=7, secret_seed=2)
    assert report.outcome is Outcome.PASSED, report.reason
    assert report.score_us == pytest.approx(plain.score_us, rel=1e-3)


async def test_a_declared_roofline_is_a_floor(simulated):
    report = await simulated["stencil"].evaluate(simulated["stencil"].task.seed_source, submission_id=3, secret_seed=1)
    for s in report.shapes:
        h, w = dict(s.shape.args)["height"], dict(s.shape.args)["width"]
        assert s.sol_us == pytest.approx(8 * h * w / 4.8e6, rel=1e-3) and s.time_us > s.sol_us


# ---- the public fp8-mm layout: files from the parent folder, e4m3fnuz made on 'cuda' --------
_PUBLIC_REFERENCE = """
import torch
from task import input_t, output_t
from utils import make_match_reference


def generate_input(m: int, n: int, k: int, seed: int) -> input_t:
    gen = torch.Generator(device="cuda")
    gen.manual_seed(seed)
    kb, nb = (k + 127) // 128, (n + 127) // 128
    a = torch.randn((k, m), dtype=torch.bfloat16, device="cuda", generator=gen).to(torch.float8_e4m3fnuz)
    b = torch.randn((k, n), dtype=torch.bfloat16, device="cuda", generator=gen).to(torch.float8_e4m3fnuz)
    a_scale = torch.randn([kb, m], dtype=torch.float32, device="cuda", generator=gen)
    b_scale = torch.randn([kb, nb], dtype=torch.float32, device="cuda", generator=gen)
    c = torch.zeros((m, n), dtype=torch.bfloat16, device="cuda")
    return a.T, b.T, a_scale.T, b_scale.T, c


def ref_kernel(data: input_t) -> output_t:
    a, b, a_scale, b_scale, c = data
    m, k = a.shape
    n = b.shape[0]
    sa = a_scale.repeat_interleave(128, dim=1)[:, :k]
    sb = b_scale.repeat_interleave(128, dim=0).repeat_interleave(128, dim=1)[:n, :k]
    c[...] = ((a.float() * sa) @ (b.float() * sb).T).to(torch.bfloat16)
    return c


check_implementation = make_match_reference(ref_kernel, rtol=2e-02, atol=1e-03)
"""

_PUBLIC_YML = """
files:
  - {"name": "submission.py", "source": "@SUBMISSION@"}
  - {"name": "task.py", "source": "task.py"}
  - {"name": "utils.py", "source": "../utils.py"}
  - {"name": "reference.py", "source": "reference.py"}
  - {"name": "eval.py", "source": "../eval.py"}
lang: "py"
description: fp8 block-scaled matmul, e4m3fnuz inputs
config:
  main: "eval.py"
tests:
  - {"m": 64, "n": 64, "k": 128, "seed": 6635}
  - {"m": 96, "n": 192, "k": 256, "seed": 1234}
benchmarks:
  - {"m": 1024, "n": 1536, "k": 7168, "seed": 8135}
  - {"m": 6144, "n": 576, "k": 7168, "seed": 9863}
ranking_by: "geom"
"""


@pytest.fixture(scope="module")
def public_fp8(tmp_path_factory) -> Path:
    """A folder laid out as problems/amd/fp8-mm is: no kernel_scientist metadata, helpers and the
    harness's main (which itself imports reference) taken from the parent folder."""
    root = tmp_path_factory.mktemp("amd")
    shutil.copy(FP8.parent / "utils.py", root / "utils.py")
    shutil.copy(PROBLEMS / "eval.py", root / "eval.py")
    folder = root / "fp8-mm"
    folder.mkdir()
    (folder / "task.yml").write_text(_PUBLIC_YML)
    (folder / "reference.py").write_text(_PUBLIC_REFERENCE)
    shutil.copy(FP8 / "task.py", folder / "task.py")
    shutil.copy(FP8 / "submission.py", folder / "submission.py")
    return folder


async def test_the_public_fp8_layout_passes_with_the_seed(public_fp8):
    task = load_task(public_fp8)
    assert set(task.modules) == {"task", "utils", "reference", "eval"}
    assert task.kernels() == "gemm" and task.meta.output is None
    with SimulatedBackend(task, device="h200", noise=0.0, timeout_s=120) as backend:
        report = await backend.evaluate(task.seed_source, submission_id=1, secret_seed=3)
    assert report.outcome is Outcome.PASSED, report.reason
    assert all(s.sol_us is not None and 0 < s.sol_us < s.time_us for s in report.shapes)  # the I/O-bytes bound
    small = msgspec.structs.replace(task, benchmarks=task.tests[:1])
    local = LocalBackend(small, device="cpu", timeout_s=120, max_calls=3, shape_budget_s=0.3)
    report = await local.evaluate(task.seed_source, submission_id=1, secret_seed=3)
    assert report.outcome is Outcome.PASSED, report.reason


async def test_a_kernel_that_never_writes_c_fails_without_metadata(public_fp8):
    task = msgspec.structs.replace(load_task(public_fp8), benchmarks=[Shape(64, 64, 128, 1)])
    lazy = "def custom_kernel(data):\n    return data[-1]\n"
    with SimulatedBackend(task, device="h200", noise=0.0) as backend:
        report = await backend.evaluate(lazy, submission_id=1, secret_seed=3)
    assert report.outcome is Outcome.WRONG_OUTPUT and "mismatch found" in report.reason


# ---- the rules on what a kernel may call are a policy ------------------------------------
# the same torch solution spelled with the @ operator (caught statically) and through
# operator.matmul (caught at run time by the torch dispatch recorder)
TORCH_AT = HIDDEN_MATMUL.replace("from operator import matmul as _mul\n", "").replace(
    "_mul(a.float() * sa, (b.float() * sb).T)", "((a.float() * sa) @ (b.float() * sb).T)"
)


@pytest.mark.parametrize(
    ("source", "rule"),
    [(TORCH_AT, "rule heavy_op (line"), (HIDDEN_MATMUL, "rule heavy_op_runtime")],
    ids=["at-operator", "operator-matmul"],
)
async def test_a_torch_matmul_passes_evaluate_and_is_rejected_in_a_campaign(source, rule):
    assert "@" in TORCH_AT
    task = load_task(FP8)
    task = msgspec.structs.replace(task, benchmarks=task.benchmarks[:2])
    with SimulatedBackend(task, noise=0.0) as plain:  # evaluate's default: judged as a leaderboard would
        report = await plain.evaluate(source, submission_id=1, secret_seed=1)
    assert report.outcome is Outcome.PASSED, report.reason
    with SimulatedBackend(task, noise=0.0, own_kernel=True) as strict:  # a campaign's policy
        report = await strict.evaluate(source, submission_id=1, secret_seed=1)
    assert report.outcome is Outcome.REJECTED_BY_RULE and report.reason.startswith(rule), report.reason


def test_campaigns_keep_the_own_kernel_rules_by_default():
    from kernel_scientist.blackboard import load_scenario

    for name in ("amd_fp8_mm_mi300x", "amd_fp8_mm_h200", "smoke", "stencil", "stencil_h200"):
        assert load_scenario(ROOT / "scenarios" / f"{name}.toml").evaluator.own_kernel is True


def test_a_missing_seed_file_is_one_line(tmp_path):
    from kernel_scientist.blackboard import ScenarioError, load_scenario

    scenario = tmp_path / "s.toml"
    scenario.write_text(f'[campaign]\ntask = "{PROBLEMS / "stencil"}"\nseed_file = "nope.py"\n')
    with pytest.raises(ScenarioError, match="campaign.seed_file: no seed kernel at .*nope.py"):
        load_scenario(scenario)
    scenario.write_text(f'[campaign]\ntask = "{PROBLEMS / "stencil"}"\nseed_file = "solutions/correct/torch_pad.py"\n')
    assert load_scenario(scenario).seed_path().name == "torch_pad.py"


# ---- what a folder may hold, and what is refused ----------------------------------------
def _folder(tmp_path, name: str, yml_extra: str = "", tests: str = '  - {"size": 8, "seed": 1}') -> Path:
    folder = tmp_path / name
    shutil.copytree(PROBLEMS / "vecadd", folder)
    shutil.copy(PROBLEMS / "utils.py", tmp_path / "utils.py")
    shutil.copy(PROBLEMS / "eval.py", tmp_path / "eval.py")
    yml = (folder / "task.yml").read_text()
    head, _, _ = yml.partition("tests:")
    (folder / "task.yml").write_text(f'{head}tests:\n{tests}\nbenchmarks:\n  - {{"size": 64, "seed": 2}}\n{yml_extra}')
    return folder


@pytest.mark.parametrize(
    ("extra", "tests", "message"),
    [
        pytest.param(
            "",
            '  - {"size": 8, "seed": 1, "dtype": "half"}',
            "has 'dtype', which generate_input(size, seed) does not take",
            id="unknown-argument",
        ),
        pytest.param(
            "", '  - {"seed": 1}', "lacks 'size', which generate_input(size, seed) needs", id="missing-argument"
        ),
        pytest.param('ranking_by: "median"\n', '  - {"size": 8, "seed": 1}', "ranking_by", id="ranking"),
        pytest.param(
            'kernel_scientist:\n  bytes: "4*size + __import__(1)"\n',
            '  - {"size": 8, "seed": 1}',
            "kernel_scientist.bytes",
            id="bytes-expression",
        ),
        pytest.param('kernel_scientist:\n  flopz: "1"\n', '  - {"size": 8, "seed": 1}', "flopz", id="metadata-typo"),
    ],
)
def test_a_folder_the_evaluator_cannot_use_is_refused_in_one_line(tmp_path, extra, tests, message):
    folder = _folder(tmp_path, "bad", extra, tests)
    with pytest.raises(TaskError) as err:
        load_task(folder)
    assert message in str(err.value) and "\n" not in str(err.value) and "task.yml" in str(err.value)


def test_old_records_still_read():
    old = b'{"m": 64, "n": 1536, "k": 7168, "seed": 9}'
    shape = msgspec.json.decode(old, type=Shape)
    assert shape == Shape(64, 1536, 7168, 9) and shape.label() == "64x1536x7168" and shape.is_mnk()
    new = Shape.of({"height": 33, "width": 47, "seed": 1})
    assert msgspec.json.decode(msgspec.json.encode(new), type=Shape) == new
    assert new.label() == "height=33 width=47" and new.kwargs() == {"height": 33, "width": 47, "seed": 1}


async def test_a_dot_kernel_on_a_task_that_is_no_matrix_product_is_not_timed(simulated):
    dotted = """
import torch
import triton
import triton.language as tl


@triton.jit
def rows_kernel(x_ptr, s_ptr, m_ptr, cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    best = tl.full([BLOCK], float("-inf"), dtype=tl.float32)
    for start in range(0, cols, BLOCK):
        v = tl.load(x_ptr + row * stride + start + offs, mask=start + offs < cols, other=0.0)
        acc += v
        best = tl.maximum(best, tl.where(start + offs < cols, v, float("-inf")))
    ones = tl.full([16, 16], 1.0, tl.float32)
    unused = tl.dot(ones, ones)
    tl.store(s_ptr + row, tl.sum(acc, axis=0))
    tl.store(m_ptr + row, tl.max(best, axis=0))


def custom_kernel(x):
    rows, cols = x.shape
    s = torch.empty(rows, device=x.device, dtype=torch.float32)
    m = torch.empty(rows, device=x.device, dtype=torch.float32)
    rows_kernel[(rows,)](x, s, m, cols, x.stride(0), BLOCK=256)
    return s, m
"""
    report = await simulated["rowstats"].evaluate(dotted, submission_id=4, secret_seed=1)
    assert report.outcome is Outcome.PASSED and report.score_us is None
    assert "not timed" in report.reason and "cannot count its tiles" in report.reason


# ---- the offline brain's techniques for any Triton kernel -------------------------------
def _generic_variants():
    out = []
    for name in ("vecadd", "rowstats", "stencil"):
        seed = (PROBLEMS / name / "submission.py").read_text()
        for item in knowledge.catalogue("nvidia", "any"):
            out += [(name, item.name, v) for v in item.variants(seed)[:2]]
    return out


ANY_KERNEL = {
    "block_size",
    "launch_warps",
    "launch_stages",
    "direct_launch",
    "per_shape_tuning",
    "elements_per_thread",
    "rows_per_program",
    "cache_hints",
    "fuse_launches",
    "drop_fallback",
    "block_scan",
    "split_reduction",
    "library_mm",
}


def test_the_generic_catalogue_has_no_gemm_rewrites():
    names = {t.name for t in knowledge.catalogue("nvidia", "any")}
    assert names == ANY_KERNEL
    # A non-GEMM folder gets none of the GEMM rewrites (a GEMM folder gets both catalogues).
    assert not any(".techniques.gemm." in type(t).__module__ for t in knowledge.catalogue("nvidia", "any"))
    assert load_task(PROBLEMS / "stencil").kernels() == "any" and load_task(FP8).kernels() == "gemm"


@pytest.mark.parametrize("case", _generic_variants(), ids=lambda c: f"{c[0]}-{c[2].label}")
async def test_generic_variants_pass_the_prescreen(simulated, case):
    name, technique, variant = case
    seed = (PROBLEMS / name / "submission.py").read_text()
    source = knowledge.technique(technique).apply(seed, variant.params)
    assert source != seed
    report = await simulated[name].prescreen(source)
    assert report.outcome is Outcome.PASSED, report.reason


@pytest.mark.parametrize(
    ("side_op", "named"),
    [
        ("torch.bincount(torch.zeros(4, dtype=torch.long, device=x.device))", "bincount"),  # no meta kernel
        ("assert x.abs().sum().item() >= 0", "item()"),  # a host read of data meta tensors do not have
    ],
    ids=["no-meta-kernel", "item"],
)
async def test_a_call_that_cannot_run_on_meta_tensors_is_passed_untimed(simulated, side_op, named):
    source = f"import torch\n\n\ndef custom_kernel(x):\n    {side_op}\n    return x.sum(dim=1), x.amax(dim=1)\n"
    report = await simulated["rowstats"].evaluate(source, submission_id=5, secret_seed=1)
    assert report.outcome is Outcome.PASSED and report.score_us is None and report.shapes == []
    assert "not timed" in report.reason and named in report.reason


@pytest.mark.parametrize(
    ("line", "rejected"),
    [
        ("torch.backends.cudnn.allow_tf32 = False", False),
        ("torch.backends.cudnn.deterministic = True", False),
        ("torch.backends.cudnn.benchmark = False", False),
        ("torch.backends.cuda.matmul.allow_tf32 = True", True),  # could lower an in-process reference's precision
        ("torch.backends.cudnn.deterministic = False", True),
        ("torch.cuda.synchronize = None", True),
    ],
)
def test_only_stricter_torch_backend_flags_may_be_set(line, rejected):
    from kernel_scientist.evaluator import static_findings

    findings = static_findings(f"import torch\n{line}\n")
    assert bool([f for f in findings if f.severity == "reject"]) is rejected


def test_evaluate_takes_the_policy_from_its_flag(tmp_path):
    import subprocess
    import sys

    file = tmp_path / "torch_at.py"
    file.write_text(TORCH_AT)
    base = [sys.executable, "-m", "kernel_scientist", "evaluate", str(file), "--task", str(FP8)]
    plain = subprocess.run(base, capture_output=True, text=True, timeout=600)
    assert plain.returncode == 0 and ": passed" in plain.stdout, plain.stdout + plain.stderr
    strict = subprocess.run(base + ["--own-kernel"], capture_output=True, text=True, timeout=600)
    assert strict.returncode == 1 and "rule heavy_op" in strict.stdout


def test_a_campaign_on_a_non_gemm_folder_improves_its_seed(tmp_path):
    """scenarios/stencil.toml end to end (simulated, offline brain): only the techniques for any
    Triton kernel are tried, and the best kernel beats the folder's seed."""
    import json

    from _support import SCENARIOS, cli
    from kernel_scientist.blackboard import open_existing

    db = tmp_path / "stencil.sqlite"
    result = cli("run", str(SCENARIOS / "stencil.toml"), "--db", str(db), "--quiet", "--set", "campaign.hours=1.5")
    assert result.returncode == 0, result.stderr[-3000:]
    status = json.loads(cli("status", "--db", str(db), "--json").stdout)
    assert status["task"] == "stencil" and status["simulated"] is True
    assert status["best"]["score_us"] < status["seed_score_us"]
    with open_existing(db) as board:
        tried = {h.technique for h in board.hypotheses()}
        assert tried and tried <= ANY_KERNEL
        seed = next(k for k in board.kernels() if k.author == "seed")
        assert seed.source == (PROBLEMS / "stencil" / "submission.py").read_text()


@pytest.mark.parametrize(
    "how",
    [["--backend", "simulated"], ["--device", "cpu", "--smallest", "--max-calls", "3", "--shape-budget", "0.3"]],
    ids=["simulated", "local-cpu"],
)
def test_check_folders_prints_every_verdict(tmp_path, how):
    import json
    import subprocess
    import sys

    out = tmp_path / "rows.json"
    run = subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "check_folders.py"),
            str(PROBLEMS / "rowstats"),
            *how,
            "--json",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "4 solutions in 1 folders: 4 as expected, 0 not" in run.stdout
    rows = json.loads(out.read_text())
    assert {(r["file"], r["report"]["outcome"]) for r in rows} == {
        ("submission.py", "passed"),
        ("solutions/correct/torch_rows.py", "passed"),
        ("solutions/wrong/first_block_only.py", "wrong_output"),
        ("solutions/wrong/one_output.py", "wrong_output"),
    }
    bad = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "check_folders.py"), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode == 2 and "no task.yml there" in bad.stderr and "Traceback" not in bad.stderr


# ---- direct_launch: the lean host path for any Triton kernel --------------------------------
class _Compiled:
    """Stands in for Triton's CompiledKernel: ``compiled[grid](*every_parameter)`` launches."""

    def __init__(self, log):
        self.log = log

    def __getitem__(self, grid):
        return lambda *params: self.log.append(("direct", grid, params))


class _Kernel:
    """Stands in for a JITFunction: ``kernel[grid](*args, **kwargs)`` is the JIT path."""

    arg_names = ["x_ptr", "out_ptr", "n", "BLOCK"]

    def __init__(self, jit_returns=True):
        self.log, self.jit_returns = [], jit_returns

    def __getitem__(self, grid):
        def launch(*args, **kwargs):
            self.log.append(("jit", grid, args, kwargs))
            return _Compiled(self.log) if self.jit_returns else None

        return launch


def _helper():
    from kernel_scientist.knowledge.techniques.host.direct import HELPER

    space: dict = {}
    exec(HELPER, space)  # noqa: S102 - the exact text the technique writes into a submission
    return space["_ks_launch"]


def test_direct_launch_takes_the_jit_path_once_per_specialisation():
    import torch

    launch, kernel = _helper(), _Kernel()
    x, out = torch.zeros(64), torch.zeros(64)
    for _ in range(3):
        launch(kernel, (4,), (x, out, 64), {"BLOCK": 16, "num_warps": 4})
    assert [e[0] for e in kernel.log] == ["jit", "direct", "direct"]
    assert kernel.log[1] == ("direct", (4, 1, 1), (x, out, 64, 16))  # every parameter, in order
    launch(kernel, (4,), (x, out, 65), {"BLOCK": 16, "num_warps": 4})  # another size: compiles anew
    launch(kernel, (4,), (x[1:], out, 64), {"BLOCK": 16, "num_warps": 4})  # misaligned: anew
    launch(kernel, (4,), (x.double(), out, 64), {"BLOCK": 16, "num_warps": 4})  # another dtype: anew
    launch(kernel, (4,), (x, out, 64), {"BLOCK": 32, "num_warps": 4})  # another constexpr: anew
    assert [e[0] for e in kernel.log[3:]] == ["jit"] * 4


def test_direct_launch_stays_on_the_jit_path_where_it_must():
    import torch

    launch = _helper()
    x = torch.zeros(8)
    interpreted = _Kernel(jit_returns=False)  # Triton's interpreter returns no compiled kernel
    unnamed = _Kernel()  # BLOCK left to a default or an autotuner: the call does not name it
    for _ in range(2):
        launch(interpreted, (1,), (x, x, 8), {"BLOCK": 8})
        launch(unnamed, (1,), (x, x, 8), {})
        launch(unnamed, lambda meta: (1,), (x, x, 8), {"BLOCK": 8})  # a grid function
    assert [e[0] for e in interpreted.log] == ["jit", "jit"]
    assert [e[0] for e in unnamed.log] == ["jit"] * 4


@pytest.mark.parametrize("name", ["vecadd", "rowstats", "stencil"])
async def test_direct_launch_rewrites_every_launch_and_passes_in_cpu_mode(on_cpu, name):
    seed = (PROBLEMS / name / "submission.py").read_text()
    technique = knowledge.technique("direct_launch")
    (variant,) = technique.variants(seed)
    source = technique.apply(seed, variant.params)
    assert "_ks_launch(" in source and "[grid](" not in source.split("def _ks_launch")[0].split("HELPER")[-1]
    assert technique.detect(source) == {"launch": "direct"}
    assert technique.apply(source, variant.params) == source  # applied once only
    report = await on_cpu[name].evaluate(source, submission_id=7, secret_seed=3)
    assert report.outcome is Outcome.PASSED, report.reason


def test_direct_launch_is_not_applicable_without_a_jit_launch():
    from kernel_scientist.knowledge import NotApplicable

    with pytest.raises(NotApplicable, match="no kernel\\[grid\\]"):
        knowledge.technique("direct_launch").variants("import torch\n\ndef custom_kernel(x):\n    return x * 2\n")
