"""Task folders: loading, clear errors, and the scaled-down check shapes."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from kernel_scientist.evaluator import TaskError, load_task

FOLDER = Path(__file__).resolve().parents[1] / "evaluator" / "tasks" / "amd_fp8_mm"


def test_the_amd_task_loads_with_its_shapes_and_seed():
    task = load_task(FOLDER)
    assert task.name == "amd-fp8-mm" and len(task.tests) == 11 and len(task.benchmarks) == 18
    assert task.ranking_by == "geom" and "custom_kernel" in (task.seed_source or "")
    assert {"task", "reference", "utils"} <= set(task.modules)


def test_check_shapes_keep_every_edge_case_and_stay_small():
    shapes = load_task(FOLDER).check_shapes
    assert any(s.n % 128 == 64 for s in shapes)
    assert any(s.m % 64 for s in shapes)
    assert any(s.k == 128 for s in shapes) and any(s.k > 128 for s in shapes)
    assert any(s.n > 128 and s.n % 128 == 64 for s in shapes)  # a partial b_scale block after a full one
    assert sum(s.m * s.n * s.k for s in shapes) <= 96 * 192 * 256 * 2


def test_a_missing_folder_is_one_clear_error(tmp_path):
    with pytest.raises(TaskError, match="task.yml"):
        load_task(tmp_path / "nope")


def test_a_broken_yml_names_the_file_and_the_problem(tmp_path):
    folder = tmp_path / "amd_fp8_mm"
    shutil.copytree(FOLDER, folder)
    shutil.copy(FOLDER.parent / "utils.py", tmp_path / "utils.py")
    (folder / "task.yml").write_text("tests: 3\n")
    with pytest.raises(TaskError) as err:
        load_task(folder)
    assert "task.yml" in str(err.value) and "tests" in str(err.value) and "\n" not in str(err.value)
    (folder / "task.yml").write_text("tests:\n  - {m: 64, n: 64}\nbenchmarks:\n  - {m: 1, n: 1, k: 1}\n")
    with pytest.raises(TaskError, match=r"lacks 'k', which generate_input\(m, n, k, seed, device\) needs"):
        load_task(folder)


def test_the_public_surface_is_declared():
    from kernel_scientist import evaluator

    expected = set(
        (
            "ClusterError ClusterLost DEVICES Backend BackendUnavailable DeviceSpec Launch LocalBackend "
            "MODEL_VERSION Profiles RayBackend RuleFinding SandboxError SimulatedBackend StartsInBackground Task "
            "TaskError TaskMeta TensorArg TorchOp geomean join_cluster load_task make_backend rule_verdict rules_text "
            "spec_for speed_of_light_us static_findings"
        ).split()
    )
    assert set(evaluator.__all__) == expected
    assert all(hasattr(evaluator, name) for name in expected)
    assert {"mi300x", "h200", "h100"} <= set(evaluator.DEVICES)


def test_an_output_view_with_an_odd_stride_is_compared_by_its_bytes():
    """A row of ``(x @ w)[:, 0]`` with one row: shape (1,), stride (2,), which contiguous()
    keeps (a size-1 dimension counts as contiguous) and a byte view refuses."""
    import torch
    from kernel_scientist.evaluator._task import tensor_bytes

    view = (torch.ones(1, 7) @ torch.ones(7, 2))[:, 0]
    assert view.stride() == (2,) and view.is_contiguous()
    assert tensor_bytes(view).tolist() == list(torch.tensor([7.0]).view(torch.uint8).tolist())
