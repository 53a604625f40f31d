"""block_scan: the one-program looping 1-D scan Inductor writes for ``torch.cumsum`` of a vector,
made block-parallel (knowledge/techniques/any_kernel/scan.py).

The kernel rewritten is Inductor's own: its CUDA code for GPU MODE's pmpp_v2/prefixsum_py recorded
on an H100 (tests/fixtures_lowering), and, in the campaign, what Inductor writes on this machine for
the prefixscan folder's PyTorch seed. Every verdict is the folder's own check, through
``kernel-scientist evaluate`` and ``kernel-scientist run`` in processes of their own.
"""

from __future__ import annotations

import gzip
import json
import re
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest
from kernel_scientist.blackboard.records import EvalReport, Outcome
from kernel_scientist.evaluator.sandbox import InductorCapture
from kernel_scientist.knowledge import NotApplicable

from kernel_scientist import knowledge
from kernel_scientist.lower import from_capture

ROOT = Path(__file__).resolve().parents[1]
PROBLEMS = ROOT / "tests" / "problems"
FOLDER = PROBLEMS / "prefixscan"
CUDA_CAPTURES = ROOT / "tests" / "fixtures_lowering" / "pmpp-v2-h100.json.gz"
KERNEL = "triton_red_fused_copy__cumsum_0"  # Inductor's name for the looping scan
PHASES = [f"{KERNEL}_block_totals", f"{KERNEL}_block_offsets", f"{KERNEL}_block_scan"]

SCAN = knowledge.technique("block_scan")
BLOCKS = knowledge.technique("block_size")


def _lowered() -> str:
    with gzip.open(CUDA_CAPTURES, "rt") as f:
        capture = msgspec.convert(json.load(f)["prefixsum_py"], InductorCapture)
    return from_capture(capture).source


def _rewritten() -> str:
    source = _lowered()
    [variant] = SCAN.variants(source)
    return SCAN.rewrite(source, variant.params)


def _evaluate(tmp_path: Path, name: str, source: str) -> EvalReport:
    path = tmp_path / name
    path.write_text(source)
    cmd = [sys.executable, "-m", "kernel_scientist", "evaluate", str(path), "--task", str(FOLDER)]
    cmd += ["--backend", "simulated", "--device", "h200", "--json"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert done.stdout, done.stderr[-3000:]
    return msgspec.json.decode(done.stdout, type=EvalReport)


def test_inductors_looping_scan_becomes_three_block_parallel_launches():
    source = _lowered()
    # The folder ships the same module as a correct solution (the catalogue's tests screen it).
    assert (FOLDER / "solutions" / "correct" / "inductor_cuda.py").read_text().endswith(source)
    [variant] = SCAN.variants(source)
    assert variant.params == {"kernel": KERNEL}
    out = SCAN.rewrite(source, variant.params)
    assert f"def {KERNEL}(" not in out and "tl.range(0, r0_numel" not in out
    host = out[out.index("def custom_kernel") :]
    assert [line.split("[")[0].strip() for line in host.splitlines() if "_block_" in line and "[(" in line] == PHASES
    # Inductor's accumulation stays: values converted to float32, totals kept in float32.
    assert out.count(".to(tl.float32)") == 2 and "dtype=torch.float32" in host
    # The loop's own block constants go with it; the new ones are module literals block_size tunes.
    assert "XBLOCK_0" not in out and "R0_BLOCK_0" not in out
    assert BLOCKS.detect(out) == {"SCAN_BLOCK": 2048, "SCAN_TOTALS_BLOCK": 4096}
    # Rewritten once: nothing more to offer, and the form is reported as present.
    assert SCAN.variants(out) == [] and SCAN.detect(out) == {"kernel": KERNEL}


async def test_the_rewrite_passes_the_folders_check_and_streams_on_every_sm(tmp_path):
    rewritten = _evaluate(tmp_path, "rewritten.py", _rewritten())
    lowered = _evaluate(tmp_path, "lowered.py", _lowered())
    seed = _evaluate(tmp_path, "seed.py", (FOLDER / "submission.py").read_text())
    assert rewritten.outcome is Outcome.PASSED, rewritten.reason
    assert lowered.outcome is Outcome.PASSED and seed.outcome is Outcome.PASSED
    # Checked on a vector of several blocks (the folder's check shapes), not on one block alone.
    assert max(dict(s.args)["size"] for s in rewritten.checked_shapes) > 2 * 2048
    assert rewritten.score_us is not None and lowered.score_us is not None
    assert rewritten.score_us < lowered.score_us / 10  # one SM streaming against all of them
    # On the largest vector the three passes run near bandwidth: below the library scan's model.
    assert rewritten.shapes[-1].time_us is not None and seed.shapes[-1].time_us is not None
    assert rewritten.shapes[-1].time_us < seed.shapes[-1].time_us


def test_many_small_blocks_scan_exactly_and_a_lost_offset_is_caught(tmp_path):
    """Blocks of 16 elements and totals scanned 16 at a time: the check's vectors take hundreds of
    blocks and a phase 2 of many steps. The same kernel without the blocks' offsets fails."""
    small = _rewritten()
    for name in ("SCAN_BLOCK", "SCAN_TOTALS_BLOCK"):
        small = BLOCKS.rewrite(small, {"name": name, "value": 16})
    assert _evaluate(tmp_path, "small.py", small).outcome is Outcome.PASSED
    offset = "tl.where(block > 0, before + scanned, scanned)"
    assert small.count(offset) == 1
    wrong = _evaluate(tmp_path, "wrong.py", small.replace(offset, "scanned"))
    assert wrong.outcome is Outcome.WRONG_OUTPUT and "output differs from the reference" in wrong.reason


def _mutated(old: str, new: str) -> str:
    source = _lowered()
    assert source.count(old) == 1, old
    return source.replace(old, new)


@pytest.mark.parametrize(
    ("source", "reason"),
    [
        (
            lambda: _mutated("tmp0 = arg0_0 + arg1_0", "tmp0 = arg0_0 * arg1_0"),  # cumprod
            "combine function is not a sum of its two arguments",
        ),
        (lambda: _mutated("tmp8, r0_mask)", "tmp4, r0_mask)"), "does not store tl.where(r0_offset > 0, carry + scan"),
        (
            lambda: _mutated("tl.where(roffset > 0, tmp6, tmp5)", "tl.where(roffset > 0, tmp6, tmp6)"),
            "does not carry the block's last element",
        ),
        (
            lambda: _mutated(  # the carry updated before the stored value is computed from it
                "        tmp7 = tmp3 + tmp4\n        tmp8 = tl.where(roffset > 0, tmp7, tmp4)\n"
                "        tmp3 = tl.where(roffset > 0, tmp6, tmp5)\n",
                "        tmp3 = tl.where(roffset > 0, tmp6, tmp5)\n"
                "        tmp7 = tmp3 + tmp4\n        tmp8 = tl.where(roffset > 0, tmp7, tmp4)\n",
            ),
            "reads its carry after updating it",
        ),
        (
            lambda: _mutated("in_ptr0 + r0_0,", "in_ptr0 + (r0_0 + 7 * xindex),"),  # a scan per row
            "does not load and store at OFF + tl.arange(0, R0_BLOCK) below r0_numel",
        ),
        (
            lambda: _mutated(
                "    outs = (arg2_1,)", f"    {KERNEL}[(1,)](arg1_1, arg2_1, 1, s11, 1, 16)\n    outs = (arg2_1,)"
            ),
            "is not launched once",
        ),
        (
            lambda: (FOLDER / "solutions" / "correct" / "triton_carry.py").read_text(),
            "scan_carry's scan is not assigned in the loop's own body",
        ),
        (lambda: (PROBLEMS / "vecadd" / "submission.py").read_text(), "no kernel makes a tl.associative_scan"),
    ],
    ids=[
        "cumprod",
        "no-carry-in-store",
        "carry-not-last",
        "carry-updated-first",
        "per-row",
        "two-launches",
        "hand-written",
        "elementwise",
    ],
)
def test_what_it_cannot_rewrite_exactly_is_refused_with_the_reason(source, reason):
    text = source()
    assert SCAN.variants(text) == []
    with pytest.raises(NotApplicable, match="block_scan: .*" + re.escape(reason)):
        SCAN.detect(text)


def test_inductors_scan_per_row_is_refused(tmp_path):
    """The rowscan folder's seed lowered here: one program per row (XBLOCK rows), already parallel."""
    out = tmp_path / "rowscan.py"
    cmd = [sys.executable, "-m", "kernel_scientist", "lower", str(PROBLEMS / "rowscan"), "--out", str(out)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    source = out.read_text()
    assert "tl.associative_scan" in source and SCAN.variants(source) == []
    with pytest.raises(NotApplicable, match="does not load and store at OFF"):
        SCAN.detect(source)


def test_a_campaign_from_the_pytorch_seed_takes_the_block_scan(tmp_path):
    from kernel_scientist.blackboard import LOWERED_AUTHOR, open_existing

    scenario = tmp_path / "prefixscan.toml"
    scenario.write_text(
        f'[campaign]\nname = "prefixscan"\ntask = "{FOLDER}"\nseed_file = "submission.py"\nhours = 2.0\n\n'
        '[agents]\nbrain = "offline"\n\n[evaluator]\nbackend = "simulated"\ndevice = "h200"\n'
    )
    db = tmp_path / "prefixscan.sqlite"
    cmd = [sys.executable, "-m", "kernel_scientist", "run", str(scenario), "--db", str(db), "--quiet"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=900, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    with open_existing(db) as board:
        kernels = {k.id: k for k in board.kernels()}
        hypotheses = board.hypotheses()
        scores = {e.kernel_id: e.report.passed_score() for e in board.evaluations()}
    lowered = next(k for k in kernels.values() if k.author == LOWERED_AUTHOR)
    assert f"def {KERNEL}(" in lowered.source  # Inductor's loop, as on the GPU
    taken = [h for h in hypotheses if h.technique == "block_scan" and h.kernel_id is not None]
    assert [h.base_id for h in taken] == [lowered.id], [(h.technique, h.label) for h in hypotheses]
    scanned = taken[0].kernel_id
    assert scanned is not None and all(f"def {name}(" in kernels[scanned].source for name in PHASES)
    score, loop = scores.get(scanned), scores.get(lowered.id)
    assert score is not None and loop is not None and score < loop / 10, (score, loop)
