"""What the catalogue writes passes the rules that stand before an evaluation.

Every variant of every technique, in each vendor's catalogue, and every compound the catalogue
composes, applied to the fp8-mm seed (a technique the seed cannot take yet is applied to the first
kernel one step away that can; the any-kernel techniques in a GEMM task's catalogue, which refuse
the seed's regions, to a user's own fp8 GEMM, tests/fixtures_any_kernel/fp8_gemm_plain.py), and every
any-kernel variant applied to the Triton seeds of the problem folders and of
tests/fixtures_any_kernel (the docs' relu folder, its seed with PyTorch fallbacks and as two
chained kernels, two modules
in TorchInductor's form, and three that `kernel-scientist lower` wrote): each result passes the static rules and the simulated backend's
pre-screen (its checks on the smallest shape, the launches recorded again on meta inputs, rule
meta_consistency, and the re-check after that), or the technique says NotApplicable. A campaign
then never sends back, nor spends an evaluation on, a kernel its own catalogue wrote wrongly. One
backend per task serves every kernel; a source met twice is screened once.
"""

from __future__ import annotations

import functools
from pathlib import Path

import pytest
from _support import ANY_KERNEL_SEEDS
from kernel_scientist.agents._base import CampaignClock, Context
from kernel_scientist.agents.critic import Critic
from kernel_scientist.blackboard import Blackboard, HypothesisState, Scenario, Verdict
from kernel_scientist.blackboard.records import EvalReport, Outcome
from kernel_scientist.evaluator import SimulatedBackend, load_task, static_findings
from kernel_scientist.knowledge import NotApplicable, Technique, Variant
from test_blackboard import _hyp, _queued_kernel

from kernel_scientist import knowledge

ROOT = Path(__file__).resolve().parents[1]
FP8 = ROOT / "evaluator" / "tasks" / "amd_fp8_mm"
PROBLEMS = ROOT / "tests" / "problems"
FIXTURES = ROOT / "tests" / "fixtures_any_kernel"
# Any-kernel seeds: name -> (folder, file); the folder's name is its task's.
SEEDS = ANY_KERNEL_SEEDS
FOLDERS = tuple(dict.fromkeys(folder for folder, _ in SEEDS.values()))
VENDORS = ("amd", "nvidia")
# Triton's CPU interpreter returns garbage for a bf16 tl.dot (docs/stack-pitfalls.md): the
# pre-screen, and a simulated evaluation after it, reject this variant however it is written; it
# is right on a GPU. Every other output must pass, and this one must fail only as a wrong output.
# On a user's fp8 GEMM (the seed's kernel without regions), block_size may change BLOCK_K, which
# must stay the scale block (128) there: a syntax-level rewrite cannot know that, and the
# pre-screen catches it (the critic sends it back before any evaluation): its scale loads then
# reach past the scale tensors, which the interpreter refuses (evaluator/sandbox/_bounds.py).
INTERPRETER_GARBAGE = {("accumulation_precision", "mode=bf16_upcast")}
CAUGHT_BY_THE_CHECK = {("block_size", "BLOCK_K=512"), ("block_size", "BLOCK_K=256")}
# Any-kernel entries of a GEMM task's catalogue with nothing to rewrite in a plain GEMM kernel: it
# is not elementwise, launches one kernel, and has no PyTorch fallback or library product (a torch
# matrix product, which the own-kernel policy refuses anyway).
NOT_ON_A_GEMM = {"elements_per_thread", "drop_fallback", "fuse_launches", "library_mm"}
# Screened on a seed of its own in its own test: a lowering that keeps a library matmul breaks the
# own-kernel policy, which every other rewrite of it would keep breaking (tests/test_library_mm.py
# checks its forms against the folder's check, the rules and the policy).
SCREENED_ON_THEIR_OWN = {"library_mm"}


@functools.cache
def _seed(folder: Path, file: str = "submission.py") -> str:
    return (folder / file).read_text()


def _variants(item: Technique, source: str, reference: str | None) -> list[Variant]:
    """Every variant the catalogue offers for ``source`` (every compound, not only the first four)."""
    if item.name == "compound":
        return item.variants(source, reference, limit=10_000)  # type: ignore[call-arg]
    return item.variants(source, reference)


@functools.cache
def _one_step(vendor: str) -> tuple[str, ...]:
    """The kernels one catalogue entry away from the fp8-mm seed (compounds included), in order."""
    seed = _seed(FP8)
    out = []
    for item in knowledge.catalogue(vendor):
        out += [item.rewrite(seed, dict(v.params)) for v in _variants(item, seed, None)]
    return tuple(dict.fromkeys(out))


def _applied(item: Technique, base: str, reference: str | None) -> list[tuple[str, str]]:
    """(variant label, rewritten source) of each variant; a NotApplicable rewrite is left out."""
    out = []
    for variant in _variants(item, base, reference):
        try:
            out.append((variant.label, item.rewrite(base, dict(variant.params), reference)))
        except NotApplicable:
            continue
    return out


def _gemm_outputs(vendor: str, name: str) -> list[tuple[str, str]]:
    """What technique ``name`` writes from the seed, or from the first kernel one step away that
    it applies to (a technique that builds on another); crossover takes the richest of those as
    its reference."""
    item = next(t for t in knowledge.catalogue(vendor) if t.name == name)
    seed, bases = _seed(FP8), _one_step(vendor)
    if "any" in item.kernels:  # it refuses the seed's regions (test_any_kernel_techniques checks so)
        return _applied(item, _seed(FIXTURES, "fp8_gemm_plain.py"), None)
    reference = bases[-1] if name == "crossover" else None
    for base in (seed, *bases):
        found = _applied(item, base, reference)
        if found:
            return found
    return []


@pytest.fixture(scope="module")
def backends():
    """One simulated backend per task, shared by every kernel of the module."""
    made = {"fp8": SimulatedBackend(load_task(FP8), device="mi300x", noise=0.0, timeout_s=60, own_kernel=True)}
    for folder in FOLDERS:
        made[folder.name] = SimulatedBackend(load_task(folder), device="h200", noise=0.0, timeout_s=60)
    for backend in made.values():
        backend.__enter__()
    yield made
    for backend in made.values():
        backend.close()


_screened: dict[tuple[str, str], EvalReport] = {}  # (task, source) -> its pre-screen


async def _screen(backend: SimulatedBackend, task: str, source: str) -> EvalReport:
    if (task, source) not in _screened:
        _screened[task, source] = await backend.prescreen(source)
    return _screened[task, source]


async def _assert_clean(backend: SimulatedBackend, task: str, name: str, outputs: list[tuple[str, str]]) -> None:
    failures = []
    for label, source in outputs:
        rejects = [f.text() for f in static_findings(source, own_kernel=True) if f.rejects]
        report = await _screen(backend, task, source)
        if (name, label) in INTERPRETER_GARBAGE:
            assert not rejects and report.outcome is Outcome.WRONG_OUTPUT, (label, rejects, report.reason)
        elif task == "fp8" and (name, label) in CAUGHT_BY_THE_CHECK:
            assert not rejects and report.outcome is Outcome.CRASH, (label, rejects, report.reason)
            assert "outside every tensor the launch was given" in report.reason
        elif rejects or report.outcome is not Outcome.PASSED:
            failures.append(f"{name} {label}: {rejects or ''} {report.outcome}: {report.reason[:300]}")
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize(("vendor", "name"), [(v, t.name) for v in VENDORS for t in knowledge.catalogue(v)], ids=str)
async def test_every_gemm_rewrite_passes_the_rules_and_the_prescreen(backends, vendor, name):
    outputs = _gemm_outputs(vendor, name)
    assert outputs or name in NOT_ON_A_GEMM, (
        f"{vendor} {name}: applies to neither the seed nor any kernel one step away"
    )
    await _assert_clean(backends["fp8"], "fp8", name, outputs)


@pytest.mark.parametrize(
    ("seed", "vendor", "name"),
    [(s, v, t.name) for s in SEEDS for v in VENDORS for t in knowledge.catalogue(v, "any")],
    ids=str,
)
async def test_every_any_kernel_rewrite_passes_the_rules_and_the_prescreen(backends, seed, vendor, name):
    folder, file = SEEDS[seed]
    item = next(t for t in knowledge.catalogue(vendor, "any") if t.name == name)
    outputs = _applied(item, _seed(folder, file), None)
    assert outputs or not item.variants(_seed(folder, file)), f"{name} offered variants and applied none"
    await _assert_clean(backends[folder.name], folder.name, name, outputs)


def test_every_new_any_kernel_technique_is_screened_on_some_seed():
    """The any-kernel catalogue's entries each rewrite at least one of the seeds screened above,
    and the GEMM catalogue's any-kernel entries a user's own GEMM kernel, but for those with
    nothing to rewrite there."""
    for vendor in VENDORS:
        for item in knowledge.catalogue(vendor, "any"):
            if item.name not in SCREENED_ON_THEIR_OWN:
                assert any(item.variants(_seed(*SEEDS[s])) for s in SEEDS), f"{vendor} {item.name}"
        gemm = {t.name for t in knowledge.catalogue(vendor) if "any" in t.kernels}
        assert gemm - NOT_ON_A_GEMM == {name for name in gemm if _gemm_outputs(vendor, name)}


def test_the_compounds_screened_are_more_than_the_four_a_plan_sees_and_each_writes_its_own_kernel():
    """A compound whose kernel the other steps write without one of them (launch replay installs
    the direct launch itself) is a shorter plan under a prediction that counts a step twice: not
    offered."""
    for vendor in VENDORS:
        compounds = _gemm_outputs(vendor, "compound")
        assert len(compounds) > 4 and len({s for _, s in compounds}) == len(compounds)
        assert not [label for label, _ in compounds if "direct compiled launch + replayed launches" in label]


# A kernel whose first call of a shape launches its work twice and every later call once: what
# launch replay wrote when it recorded on a device where no replay can be made.
_TWICE_FIRST = """

_seen = set()
_written = custom_kernel


def custom_kernel(data):
    shape = tuple(t.shape for t in data)
    if shape not in _seen:
        _seen.add(shape)
        _written(data)
    return _written(data)
"""


async def test_a_first_call_that_launches_more_than_later_calls_is_stopped_by_the_prescreen(backends):
    backend = backends["fp8"]
    source = _seed(FP8) + _TWICE_FIRST
    assert not [f for f in static_findings(source) if f.rejects]
    report = await backend.prescreen(source)
    assert report.outcome is Outcome.REJECTED_BY_RULE, report.reason
    assert report.reason.startswith("rule meta_consistency: on 64x64x128 ") and report.duration_s == 0.0


def _evaluated(board: Blackboard, source: str, report: EvalReport, at: float):
    """A kernel queued, leased and evaluated at ``at`` with ``report``."""
    kernel = _queued_kernel(board, source=source)
    sub = board.lease_submission("ev", now=at, lease_s=10)
    board.record_evaluation(submission_id=sub.id, owner="ev", started_at=at, finished_at=at + 1, report=report)
    return kernel


async def test_the_critic_says_why_a_kernel_has_no_time_in_a_sentence(backends, tmp_path):
    """A kernel the evaluator's rule rejected says nothing about its idea: the verdict is
    inconclusive, and reads as a sentence naming the rule and why (no "n/a (...)"); a wrong answer
    refutes the idea as implemented, in the same form."""
    report = await backends["fp8"].evaluate(_seed(FP8) + _TWICE_FIRST, submission_id=1, secret_seed=1)
    assert report.outcome is Outcome.REJECTED_BY_RULE
    wrong = EvalReport(
        outcome=Outcome.WRONG_OUTPUT,
        reason="wrong output on check shape 64x64x128 (seed 3): x",
        provenance=report.provenance,
    )
    timed = EvalReport(outcome=Outcome.PASSED, reason="", provenance=report.provenance, score_us=10.0)
    board = Blackboard(tmp_path / "b.sqlite")
    base, rejected, failed = (
        _evaluated(board, source, r, at)
        for source, r, at in (("base", timed, 2), ("twice", report, 4), ("bad", wrong, 6))
    )
    sel = board.add_selection(base_id=base.id, reference_id=None, reason="", at=0)
    hyps = board.add_hypotheses(sel.id, [_hyp(sel.id, base.id), _hyp(sel.id, base.id)])
    for hyp, kernel in zip(hyps, (rejected, failed), strict=True):
        board.update_hypothesis(hyp.id, kernel_id=kernel.id, state=HypothesisState.IMPLEMENTED)
    critic = Critic(
        Context(board=board, scenario=Scenario(), clock=CampaignClock(), seed=1, backend=None, task=None, brain=None),
        "critic",
        0,
    )
    for hyp in critic._unjudged():
        critic.judge(hyp)
    verdicts = [board.hypothesis(hyp.id).verdict for hyp in hyps]
    said = [m.text for m in board.messages() if m.kind == "verdict"]
    board.close()
    assert verdicts == [Verdict.INCONCLUSIVE, Verdict.REFUTED]
    assert said[0].startswith(
        f"H{hyps[0].id} inconclusive: predicted +0.0%..+10.0%, nothing observed: the evaluator rejected "
        f"kernel {rejected.id} by its rule meta_consistency: on "
    )
    assert said[1] == (
        f"H{hyps[1].id} refuted: predicted +0.0%..+10.0%, nothing observed: kernel {failed.id} computed a "
        "wrong answer: wrong output on check shape 64x64x128 (seed 3): x"
    )
    assert not [text for text in said if "n/a" in text]
