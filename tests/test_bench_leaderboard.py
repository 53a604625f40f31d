"""scripts/bench_leaderboard.py's shapes nobody tuned for (the script itself needs a GPU)."""

from __future__ import annotations

import sys

from _support import ROOT, script

sys.path.insert(0, str(ROOT / "scripts"))

import bench_leaderboard  # noqa: E402


def test_unseen_shapes_cover_the_promised_range_reproducibly():
    shapes = bench_leaderboard.unseen_shapes(200, seed=7)
    assert shapes == bench_leaderboard.unseen_shapes(200, seed=7) != bench_leaderboard.unseen_shapes(200, seed=8)
    assert all(m % 64 == 0 and n % 64 == 0 and k % 128 == 0 for m, n, k in shapes)
    assert all(64 <= m <= 8192 and 64 <= n <= 32768 and 128 <= k <= 16384 for m, n, k in shapes)
    small = sum(m * n * k < 1024 * 1024 * 1024 for m, n, k in shapes)
    assert 0.2 < small / len(shapes) < 0.9  # log-uniform: small and large shapes alike


def test_unseen_shapes_need_a_gemm_task(tmp_path):
    done = script(
        "bench_leaderboard.py", "--unseen", "3", "--task", str(ROOT / "tests" / "problems" / "stencil"), cwd=tmp_path
    )
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert "--unseen draws m, n, k shapes: it needs a GEMM task" in done.stderr
