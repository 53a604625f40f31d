"""The warp-specialised Gluon GEMM (scripts/gluon_ws_gemm.py) compiles for sm_90a on this CPU
machine, and Triton's own ptxas finds what the design needs: each product waited for at depth 0,
no wgmma serialised (C7514), no spills. Its speed and correctness need a Hopper GPU (docs/h200.md)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# Found, not imported: triton imported in this process before tests/test_task.py sets
# TRITON_INTERPRET leaves every later interpreted kernel unable to call tl.cdiv (conftest checks).
_SPEC = importlib.util.find_spec("triton")
_TRITON = Path(_SPEC.origin).parent if _SPEC and _SPEC.origin else None
PTXAS = _TRITON / "backends" / "nvidia" / "bin" / "ptxas" if _TRITON else None
pytestmark = pytest.mark.skipif(
    PTXAS is None or not PTXAS.exists() or not (_TRITON / "experimental" / "gluon").is_dir(),
    reason="this triton carries no ptxas or no Gluon",
)


def _report(*flags: str) -> str:
    run = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gluon_ws_gemm.py"), "--ptxas", *flags],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    return run.stdout


@pytest.mark.parametrize("flags", [(), ("--no-stagger",)])
def test_compiles_without_serialised_wgmma_or_spills(flags):
    out = _report(*flags)
    assert "wgmma.wait_group depths: ['0', '0']" in out  # one wait per consumer, depth 0
    assert "C7514" not in out
    assert "0 bytes spill stores, 0 bytes spill loads" in out
    assert "('dec', '40')" in out  # the loader warp gives its registers to the consumers


def test_the_single_partition_kernel_is_serialised():
    """The control: the earlier Gluon kernel, which keeps a product in flight across the loop's back
    edge, is the one ptxas serialises (the reason for the warp-specialised design)."""
    run = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gluon_gemm.py"), "--ptxas"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert "C7514" in run.stdout
