"""A speed of light for every folder: declared flops and bytes where the folder has them, else a
lower bound from the bytes its inputs and outputs hold (read on meta tensors, no GPU), labelled as
such wherever it shows; per shape, how far a kernel is from it and whether the shape is host-bound."""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

import msgspec
import pytest
from _support import ROOT
from kernel_scientist.agents._views import bounds_summary, kernel_view, shape_note
from kernel_scientist.blackboard import (
    Blackboard,
    Campaign,
    EvalReport,
    KernelState,
    Outcome,
    Provenance,
    RunSegment,
    Scenario,
    ShapeResult,
    metrics,
    scenario_json,
)
from kernel_scientist.evaluator import DEVICES, SimulatedBackend, load_task
from kernel_scientist.evaluator.model import host_floor_us

from kernel_scientist import report as report_mod
from kernel_scientist import status as status_mod

PROBLEMS = ROOT / "tests" / "problems"
FP8 = ROOT / "evaluator" / "tasks" / "amd_fp8_mm"
H200 = DEVICES["h200"]

_TASK_PY = "input_t = object\noutput_t = object\n"


def _folder(tmp_path: Path, reference: str, yml_extra: str = "", tests: str = '{"size": 1000, "seed": 1}') -> Path:
    """A problem folder with ``reference`` (its generator takes ``size``), one test and benchmark."""
    folder = tmp_path / "prob"
    folder.mkdir()
    (folder / "task.py").write_text(_TASK_PY)
    (folder / "reference.py").write_text(textwrap.dedent(reference))
    (folder / "task.yml").write_text(
        f"files:\n  - {{name: submission.py, source: '@SUBMISSION@'}}\n"
        f"tests:\n  - {tests}\nbenchmarks:\n  - {tests}\n{textwrap.dedent(yml_extra)}"
    )
    return folder


def _check(body: str) -> str:
    return textwrap.dedent(body) + "\n\ndef check_implementation(data, output):\n    return True, ''\n"


# ---- the bound: declared first, else the bytes of the inputs and outputs -----------------------
def test_declared_flops_and_bytes_take_precedence():
    task = load_task(FP8)
    shape = task.benchmarks[0]
    m, n, k = shape.mnk()
    assert task.sol_basis() == "declared" and task.min_bytes(shape) == m * k + n * k + 2 * m * n
    expected = max(2 * m * n * k / (H200.fp8_tflops * 1e6), (m * k + n * k + 2 * m * n) / (H200.hbm_tbps * 1e6))
    assert task.speed_of_light_us(shape, H200) == pytest.approx(expected)


def test_an_undeclared_folder_gets_its_input_and_output_bytes():
    vecadd = load_task(PROBLEMS / "vecadd")  # two float16 inputs, a new float16 output
    shape = vecadd.benchmarks[0]
    size = dict(shape.args)["size"]
    io = vecadd.io_bytes(shape)
    assert vecadd.sol_basis() == "io-bytes" and (io.inputs, io.outputs, io.note) == (4 * size, 2 * size, "")
    assert vecadd.speed_of_light_us(shape, H200) == pytest.approx(6 * size / (H200.hbm_tbps * 1e6))
    rowstats = load_task(PROBLEMS / "rowstats")  # a float32 matrix in, two float32 rows out
    shape = rowstats.benchmarks[0]
    rows, cols = dict(shape.args)["rows"], dict(shape.args)["cols"]
    assert rowstats.min_bytes(shape) == 4 * rows * cols + 2 * 4 * rows


def test_an_output_written_into_an_input_counts_once(tmp_path):
    """A preallocated output (declared, or the tensor the reference returns) is written, not read:
    its bytes count once; two views of one buffer are one buffer."""
    returned = _folder(
        tmp_path,
        _check("""
        import torch
        def generate_input(size, seed):
            x = torch.randn(size, device="cuda")
            return x, torch.empty(size, device="cuda"), x.view(1, size)
        def ref_kernel(data):
            x, out, _ = data
            out.copy_(x * 2)
            return out
        """),
    )
    task = load_task(returned)
    assert task.min_bytes(task.benchmarks[0]) == 2 * 4 * 1000
    declared = tmp_path / "declared"
    shutil.copytree(returned, declared)
    with (declared / "task.yml").open("a") as f:
        f.write("kernel_scientist:\n  output: 1\n")
    assert load_task(declared).min_bytes(load_task(declared).benchmarks[0]) == 2 * 4 * 1000


def test_a_reference_that_cannot_run_without_data_counts_the_inputs(tmp_path):
    folder = _folder(
        tmp_path,
        _check("""
        import torch
        def generate_input(size, seed):
            return torch.randint(0, 16, (size,), device="cuda")
        def ref_kernel(data):
            return torch.bincount(data, minlength=16)  # no meta kernel, a data-dependent size
        """),
    )
    task = load_task(folder)
    io = task.io_bytes(task.benchmarks[0])
    assert io.inputs == 8 * 1000 and io.outputs is None and "output bytes not counted" in io.note
    assert task.min_bytes(task.benchmarks[0]) == 8 * 1000


def test_a_generator_that_cannot_run_without_a_gpu_gives_no_bound_in_one_line(tmp_path):
    folder = _folder(
        tmp_path,
        _check("""
        import torch
        def generate_input(size, seed):
            x = torch.randn(size, device="cuda")
            return torch.from_numpy(x.cpu().numpy())  # reads its data: no meta, no fake
        def ref_kernel(data):
            return data
        """),
    )
    task = load_task(folder)
    shape = task.benchmarks[0]
    reason = task.io_bytes(shape)
    assert isinstance(reason, str) and reason.startswith("generate_input cannot run without a GPU on size=1000")
    assert "\n" not in reason and "Traceback" not in reason
    assert task.speed_of_light_us(shape, H200) is None and task.min_bytes(shape) is None
    report = EvalReport(
        outcome=Outcome.PASSED,
        reason="",
        provenance=Provenance(backend="t", simulated=True, device="NVIDIA H200", timing_method="m"),
        score_us=50.0,
        shapes=[ShapeResult(shape=shape, passed=True, time_us=50.0)],
    )
    assert bounds_summary(report, task) == f"no speed of light: {reason}"
    assert "no speed of light: generate_input cannot run" in "\n".join(status_mod.bound_lines(report, task))


def test_a_reference_that_cannot_be_imported_gives_no_bound(tmp_path):
    folder = _folder(tmp_path, "import torch\nraise RuntimeError('needs a GPU\\nat import')\n")
    task = load_task(folder)
    reason = task.io_bytes(task.benchmarks[0])
    assert reason == "reference.py cannot be imported (RuntimeError: needs a GPU at import)"
    assert task.speed_of_light_us(task.benchmarks[0], H200) is None


# ---- the simulated backend records it; the notes name it and the host-bound shapes ------------
@pytest.fixture(scope="module")
def vecadd_report():
    task = load_task(PROBLEMS / "vecadd")
    small = msgspec.structs.replace(task, benchmarks=task.benchmarks[:2])
    with SimulatedBackend(small, device="h200", noise=0.0, timeout_s=60) as backend:
        import trio

        report = trio.run(lambda: backend.evaluate(task.seed_source, submission_id=1, secret_seed=3))
    return task, report


def test_the_simulated_backend_records_the_lower_bound_and_stays_above_it(vecadd_report):
    task, report = vecadd_report
    assert report.outcome is Outcome.PASSED, report.reason
    for s in report.shapes:
        assert s.sol_us == pytest.approx(task.min_bytes(s.shape) / (H200.hbm_tbps * 1e6), rel=1e-3)
        assert s.time_us > s.sol_us and s.flagged is None


def test_notes_say_how_far_from_the_bound_and_which_shapes_are_host_bound(vecadd_report):
    task, report = vecadd_report
    small, large = report.shapes  # 1M elements move in about a microsecond: the host floor is the call
    floor = host_floor_us(H200)
    assert metrics.host_bound(small, floor) and metrics.host_bound(large, floor) is False
    note = shape_note(small, task.sol_basis(), floor)
    assert note.startswith(f"host-bound ({floor:.0f} of {small.time_us:.0f} us is the host floor), ")
    assert f"{metrics.sol_ratio(small):.1f}x the I/O-bytes lower bound (" in note
    assert shape_note(large, task.sol_basis(), floor) == metrics.sol_text(large, "io-bytes")
    summary = bounds_summary(report, task)
    assert summary.startswith(f"host-bound on 1 of 2 shapes ({small.shape.label()}); ")
    assert f"farthest from the speed of light: {large.shape.label()} at " in summary
    assert "I/O-bytes lower bound" in summary and "declared" not in summary
    measured = msgspec.structs.replace(small, host_us=small.time_us * 0.5)  # measured host work wins
    assert metrics.host_bound(measured, floor) is False


def _board(tmp_path: Path, task_dir: Path, report: EvalReport) -> Blackboard:
    """A campaign on ``task_dir`` whose seed kernel was evaluated as ``report``."""
    scenario = msgspec.structs.replace(Scenario(), source=str(task_dir.parent / "x.toml"))
    scenario = msgspec.structs.replace(
        scenario, campaign=msgspec.structs.replace(scenario.campaign, task=task_dir.name)
    )
    board = Blackboard(tmp_path / "b.sqlite")
    board.create_campaign(
        Campaign(
            name="t",
            seed=1,
            task=task_dir.name,
            backend="simulated",
            simulated=True,
            config_json=scenario_json(scenario),
            created_wall=0.0,
            virtual_time=True,
            segments=[RunSegment(started_at=0.0, rate_per_hour=6.0, in_flight=1, hours=1.0)],
        )
    )
    seed = board.add_kernel(source="seed", author="seed", at=0, state=KernelState.DRAFT)
    board.review(kernel_id=seed.id, reviewer="critic", approved=True, reasons=[], at=1, expected_value=1.0)
    sub = board.lease_submission("ev", now=2, lease_s=10)
    board.record_evaluation(submission_id=sub.id, owner="ev", started_at=2, finished_at=3, report=report)
    return board


def test_status_and_report_show_the_distance_per_shape(vecadd_report, tmp_path):
    task, report = vecadd_report
    with _board(tmp_path, PROBLEMS / "vecadd", report) as board:
        text = status_mod.render(board)
        view = kernel_view(board, board.kernels()[0], task)
        page = report_mod.build(board, tmp_path / "page")
    small, large = report.shapes
    assert "best / seed / reference, x I/O-bytes lower bound" in text
    assert f"{metrics.sol_ratio(small):8.1f}x  host-bound" in text
    assert "x I/O-bytes lower bound: the best kernel's time over its I/O-bytes lower bound (a lower bound" in text
    assert "host-bound: the device's 19.6 us host floor is at least 60% of the call's time" in text
    assert view.shape_notes[0].startswith("host-bound") and "I/O-bytes lower bound" in view.shape_notes[1]
    per_shape = next(s for s in page.sections if s.title.startswith("Per-shape"))
    assert "<th>x I/O-bytes lower bound</th><th>host-bound</th>" in per_shape.html
    assert "<td>yes</td>" in per_shape.html


def test_status_names_the_bound_plainly_when_the_folder_is_gone(vecadd_report, tmp_path):
    _, report = vecadd_report
    gone = tmp_path / "gone"
    with _board(tmp_path, gone, report) as board:
        text = status_mod.render(board)
    assert "best / seed / reference, x speed of light" in text and "I/O-bytes" not in text
