"""Reference for amd-fp8-mm: block-scaled FP8 GEMM, c = (a * a_scale) @ (b * b_scale).T in bf16.

Inputs follow the public problem exactly (see task.yml's description): a and b are fp8 e4m3 and
column-major, a_scale holds one fp32 per row of a and 128-wide K block, b_scale one per 128x128
block of b. The reference dequantizes to fp32, multiplies in fp32 and rounds once to bf16.
"""

from __future__ import annotations

import importlib.util
import os
import sys

import torch

try:  # a run directory has task.py beside this file; the annotations are only documentation
    from task import input_t, output_t
except ImportError:  # imported from inside the package without the folder on sys.path
    input_t = tuple
    output_t = torch.Tensor

SCALE_BLOCK = 128  # the K (and b's N) granularity of the scales


def _import_utils():
    """Find ``utils.py``: beside this file in a run directory, else in the tasks folder above.

    A run directory holds copies of reference.py, task.py and utils.py side by side; inside the
    package the shared helpers sit one folder up. Loading by path avoids picking up an unrelated
    top-level ``utils`` module that happens to be importable.
    """
    here = os.path.dirname(os.path.abspath(__file__))
    for folder in (here, os.path.dirname(here)):
        path = os.path.join(folder, "utils.py")
        if os.path.exists(path):
            module = sys.modules.get("utils")
            if module is not None and os.path.abspath(getattr(module, "__file__", "")) == path:
                return module
            spec = importlib.util.spec_from_file_location("utils", path)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            sys.modules.setdefault("utils", module)
            return module
    raise ImportError(f"utils.py not found beside {here} or in its parent folder")


_utils = _import_utils()
make_match_reference = _utils.make_match_reference


def fp8_dtype() -> torch.dtype:
    """The e4m3 flavour of the machine: ``fnuz`` on ROCm (MI300X), the OCP ``fn`` elsewhere."""
    return torch.float8_e4m3fnuz if torch.version.hip else torch.float8_e4m3fn


def _default_device() -> str:
    return "cuda" if torch.cuda.is_available() else "cpu"


def generate_input(m: int, n: int, k: int, seed: int, device: str | None = None) -> input_t:
    """Draw one problem instance (a, b, a_scale, b_scale, c).

    Draw order and shapes match the public generator: a then b as bf16 standard normals of shape
    [k, m] / [k, n] cast to fp8, then the two fp32 scale tensors; each is returned transposed, so
    every input is column-major. c is a zero bf16 [m, n] row-major tensor.
    """
    device = device or _default_device()
    # On the meta device there is no data and no Generator: the layout alone (shapes, strides,
    # dtypes) is what an evaluator needs to capture a submission's launches.
    meta = torch.device(device).type == "meta"
    gen = None if meta else torch.Generator(device=device)
    if gen is not None:
        gen.manual_seed(seed)

    def normal(shape, dtype):
        if meta:
            return torch.empty(shape, dtype=dtype, device=device)
        return torch.randn(shape, dtype=dtype, device=device, generator=gen)

    k_blocks = (k + SCALE_BLOCK - 1) // SCALE_BLOCK
    n_blocks = (n + SCALE_BLOCK - 1) // SCALE_BLOCK
    fp8 = fp8_dtype()
    a = normal((k, m), torch.bfloat16).to(fp8)
    b = normal((k, n), torch.bfloat16).to(fp8)
    a_scale = normal((k_blocks, m), torch.float32)
    b_scale = normal((k_blocks, n_blocks), torch.float32)
    c = torch.zeros((m, n), dtype=torch.bfloat16, device=device)
    return a.T, b.T, a_scale.T, b_scale.T, c


def _expand(scale: torch.Tensor, rows: int, cols: int, row_block: int) -> torch.Tensor:
    """Repeat a block scale to one value per element of a [rows, cols] operand."""
    expanded = scale.repeat_interleave(row_block, dim=0).repeat_interleave(SCALE_BLOCK, dim=1)
    return expanded[:rows, :cols]


def ref_kernel(data: input_t) -> output_t:
    """Dequantize to fp32, multiply in fp32, round to bf16 into c, and return c."""
    a, b, a_scale, b_scale, c = data
    m, k = a.shape
    n = b.shape[0]
    a_deq = a.to(torch.float32) * _expand(a_scale, m, k, row_block=1)
    b_deq = b.to(torch.float32) * _expand(b_scale, n, k, row_block=SCALE_BLOCK)
    c[...] = (a_deq @ b_deq.T).to(torch.bfloat16)
    return c


check_implementation = make_match_reference(ref_kernel, rtol=2e-02, atol=1e-03)
