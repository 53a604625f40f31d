"""The amd-fp8-mm task folder: input layout, reference, checker, and the seed submission on the
CPU through Triton's interpreter."""

from __future__ import annotations

import contextlib
import importlib.util
import os
import sys
import time
from pathlib import Path

import pytest
import torch
import yaml

TASK = Path(__file__).resolve().parents[1] / "evaluator" / "tasks" / "amd_fp8_mm"
sys.path.insert(0, str(TASK))
import reference  # noqa: E402  (the task folder is a run directory, not a package)

SMALL_SHAPES = [(64, 64, 128), (96, 192, 256), (128, 192, 384), (64, 128, 512)]


@contextlib.contextmanager
def _interpreted():
    """Run Triton in its CPU interpreter for the duration of the block.

    Triton reads the variable when a kernel is decorated and again inside some launches (lazy
    imports check it), so it is set around both; restoring it keeps other tests unaffected."""
    old = os.environ.get("TRITON_INTERPRET")
    os.environ["TRITON_INTERPRET"] = "1"
    try:
        yield
    finally:
        if old is None:
            del os.environ["TRITON_INTERPRET"]
        else:
            os.environ["TRITON_INTERPRET"] = old


class InterpretedSubmission:
    """A submission imported from source text whose kernels run in the CPU interpreter."""

    def __init__(self, source: str, folder: Path, name: str):
        path = folder / f"{name}.py"
        path.write_text(source)
        spec = importlib.util.spec_from_file_location(name, path)
        self.module = importlib.util.module_from_spec(spec)
        with _interpreted():
            spec.loader.exec_module(self.module)

    def custom_kernel(self, data):
        with _interpreted():
            return self.module.custom_kernel(data)


load_submission = InterpretedSubmission


def test_generate_input_layout():
    a, b, a_scale, b_scale, c = reference.generate_input(m=96, n=192, k=384, seed=7, device="cpu")
    assert a.shape == (96, 384) and a.stride() == (1, 96)
    assert b.shape == (192, 384) and b.stride() == (1, 192)
    assert a_scale.shape == (96, 3) and a_scale.stride() == (1, 96)
    assert b_scale.shape == (2, 3) and b_scale.stride() == (1, 2)
    assert c.shape == (96, 192) and c.is_contiguous() and c.dtype == torch.bfloat16
    assert a.dtype == b.dtype == reference.fp8_dtype()
    assert a_scale.dtype == b_scale.dtype == torch.float32
    assert not c.any()
    # Same seed, same data; another seed, other data.
    again = reference.generate_input(m=96, n=192, k=384, seed=7, device="cpu")
    assert torch.equal(a.float(), again[0].float()) and torch.equal(b_scale, again[3])
    other = reference.generate_input(m=96, n=192, k=384, seed=8, device="cpu")
    assert not torch.equal(a.float(), other[0].float())


def test_reference_matches_a_dense_loop():
    data = reference.generate_input(m=64, n=192, k=256, seed=3, device="cpu")
    a, b, a_scale, b_scale, _ = data
    expected = torch.zeros(64, 192, dtype=torch.float64)
    # Block by block, exactly as the problem statement defines c.
    for kb in range(2):
        ks = slice(kb * 128, (kb + 1) * 128)
        for nb in range(2):
            ns = slice(nb * 128, min((nb + 1) * 128, 192))
            block = a[:, ks].double() @ b[ns, ks].double().T
            expected[:, ns] += block * a_scale[:, kb : kb + 1].double() * b_scale[nb, kb].double()
    out = reference.ref_kernel(data)
    assert out is data[4]
    torch.testing.assert_close(out.double(), expected, rtol=1e-2, atol=1e-2)


def test_check_accepts_reference_and_rejects_wrong_outputs():
    data = reference.generate_input(m=64, n=128, k=256, seed=11, device="cpu")
    good = reference.ref_kernel(tuple(t.clone() for t in data))
    assert reference.check_implementation(data, good) == (True, "")

    ok, message = reference.check_implementation(data, torch.zeros_like(good))
    assert not ok and "mismatch" in message

    perturbed = good.clone()
    perturbed[3, 5] = perturbed[3, 5] * 1.1 + 0.05
    ok, message = reference.check_implementation(data, perturbed)
    assert not ok and "(3, 5)" in message

    nan = good.clone()
    nan[0, 0] = float("nan")
    assert not reference.check_implementation(data, nan)[0]
    assert not reference.check_implementation(data, good[:, :64])[0]


def test_task_yml_lists_the_shapes():
    spec = yaml.safe_load((TASK / "task.yml").read_text())
    assert len(spec["tests"]) == 11 and len(spec["benchmarks"]) == 18
    assert spec["ranking_by"] == "geom" and spec["config"]["main"] == "eval.py"
    names = {entry["name"] for entry in spec["files"]}
    assert {"submission.py", "task.py", "reference.py", "utils.py"} <= names
    for entry in spec["files"]:
        if entry["source"] != "@SUBMISSION@":
            assert (TASK / entry["source"]).resolve().exists()
    assert {"m": 6144, "n": 576, "k": 7168, "seed": 9863} in spec["benchmarks"]


@pytest.mark.parametrize("shape", SMALL_SHAPES)
def test_seed_submission_passes_in_the_interpreter(shape, tmp_path):
    seed = load_submission((TASK / "submission.py").read_text(), tmp_path, "seed_submission")
    data = reference.generate_input(*shape, seed=sum(shape), device="cpu")
    started = time.perf_counter()
    out = seed.custom_kernel(data)
    assert time.perf_counter() - started < 5
    assert out is data[4]
    ok, message = reference.check_implementation(data, out)
    assert ok, message
