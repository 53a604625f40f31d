"""What the LLM scientist is shown, and the calls it is spared (issue 45, items 3, 4 and 6).

A campaign against the scripted server on 127.0.0.1 (two simulated hours, then a resume to three)
is read back from its blackboard: the recorded prompts must carry the per-shape change of a base
against its parent, the pending plans and the failures with their errors; the writer's deviations
must be on the kernel record and in the critic's and the selector's prompts; the designer's plans
run by expected value; and no call is made whose answer the program already knows.
"""

from __future__ import annotations

import re

import msgspec
import pytest
import trio
import trio.testing
from _support import ROOT, SCENARIOS, cli
from kernel_scientist.agents import CampaignClock, Context, Engineer
from kernel_scientist.agents.brain import DesignView, KernelView, ReviewView
from kernel_scientist.agents.llm import LLMService, _prompts, _wire, truncate
from kernel_scientist.agents.llm._hygiene import shorten
from kernel_scientist.blackboard import (
    Blackboard,
    EvalReport,
    Hypothesis,
    HypothesisState,
    KernelState,
    Outcome,
    Provenance,
    Shape,
    ShapeResult,
    Verdict,
    load_scenario,
    metrics,
    open_existing,
)
from kernel_scientist.blackboard.config import LLMConfig
from llm_server import INJECTION, ScriptedServer

DEVIATION = "kept BLOCK_K at 128, since the plan's 96 does not divide k"
SEED = (ROOT / "evaluator/tasks/amd_fp8_mm/submission.py").read_text()


def _overrides(url: str, hours: float) -> list[str]:
    sets = [
        "agents.brain=openai-compatible",
        f"llm.base_url={url}/v1",
        f"campaign.hours={hours}",
        "llm.backoff_s=0.05",
    ]
    return [a for s in sets for a in ("--set", s)]


@pytest.fixture(scope="module")
def campaign(tmp_path_factory):
    """Two hours with a writer that deviates, plans that borrow from the reference now and then,
    one kernel carrying an injection (the rules reject it; the model approved it) and one plan the
    writer refuses; then a resume to three hours, asking the same server."""
    db = tmp_path_factory.mktemp("evidence") / "e.sqlite"
    with ScriptedServer() as server:
        server.script.deviation = DEVIATION
        server.script.borrow = True
        server.script.faults = [("implement", "inject"), ("implement", "refusal")]
        first = cli("run", str(SCENARIOS / "smoke.toml"), "--db", str(db), *_overrides(server.url, 2))
        assert first.returncode == 0, first.stderr[-3000:]
        with open_existing(db) as board:
            before = {c.id for c in board.llm_calls()}
            resumed_at = board.clock()
        more = cli("resume", "--db", str(db), "--quiet", "--set", "campaign.hours=3")
        assert more.returncode == 0, more.stderr[-3000:]
    return db, before, resumed_at


def _asks(board, role):
    return [c for c in board.llm_calls() if c.role == role and c.turn == "ask" and c.status == "ok"]


def _prompt(call) -> str:
    return call.messages[0]["content"]


def _times(board, kernel_id) -> list[float | None]:
    return [s.time_us for s in board.evaluation_for(kernel_id).report.shapes]


def test_the_designer_sees_its_base_against_the_parent_shape_by_shape(campaign):
    db, _, _ = campaign
    with open_existing(db) as board:
        labels = [s.shape.label() for s in board.evaluations()[0].report.shapes]
        checked = 0
        for call in _asks(board, "design"):
            text = _prompt(call)
            base = int(re.search(r"Base kernel (\d+) \(parent", text).group(1))
            parent_id = board.kernel(base).parent_id
            if parent_id is None:
                assert "(it has no parent)" in text and "| change vs parent |" not in text
                continue
            new, old = _times(board, base), _times(board, parent_id)
            assert f"| shape | parent {parent_id} us | kernel {base} us | change vs parent |" in text
            for label, o, n in zip(labels, old, new, strict=True):
                change = metrics.uplift_text(metrics.uplift(o, n))  # the one uplift: old / new - 1
                assert f"| {label} | {o:.1f} | {n:.1f} | {change} |" in text
            checked += 1
    assert checked >= 2


def test_the_designer_sees_what_the_compiler_made_of_its_base(campaign):
    """evaluator.compile_stats = "auto": with a language model the simulated MI300X's kernels are
    compiled for gfx942 and the designer is shown the base's registers, spills and occupancy."""
    db, _, _ = campaign
    with open_existing(db) as board:
        for call in _asks(board, "design"):
            text = _prompt(call)
            base = int(re.search(r"Base kernel (\d+) \(parent", text).group(1))
            stats = board.evaluation_for(base).report.compile_stats
            assert stats, f"kernel {base} has no compile statistics"
            assert "Compile statistics (compiled for gfx942 by Triton's AMDGPU back end, not run on a device)" in text
            for s in stats:
                if not s.error:
                    assert (
                        f"| {s.kernel} | {s.settings or '-'} | {s.num_warps} | {s.num_stages} | {s.registers} |" in text
                    )


def test_pending_plans_and_failures_reach_the_selector_and_the_designer(campaign):
    db, _, _ = campaign
    with open_existing(db) as board:
        hyps = {h.id: h for h in board.hypotheses()}
        injected = next(k for k in board.kernels() if INJECTION in k.source)
        [review] = board.reviews(injected.id)
        prompts = {role: [_prompt(c) for c in _asks(board, role)] for role in ("select", "design")}
    # The model approved the injected kernel; the record says what overruled it.
    assert injected.state == KernelState.REJECTED and "matmul" in review.reasons[0]
    for role, texts in prompts.items():
        rows = [m for t in texts for m in re.finditer(r"^\| H(\d+) \| (\d+) \| ([^|]+) \| ([^|]+) \|", t, re.M)]
        assert rows, f"no pending plan in any {role} prompt"
        for row in rows:
            hyp = hyps[int(row[1])]
            assert (hyp.base_id, hyp.label) == (int(row[2]), row[3].strip())
            assert hyp.state != HypothesisState.PROPOSED
        shown = [t for t in texts if f"- kernel {injected.id} (from kernel {injected.parent_id}; " in t]
        assert shown, f"the rejected kernel never reached the {role} prompt"
        assert all("sent back in review" in t and review.reasons[0][:60] in t for t in shown)


def test_the_designer_and_writer_see_the_task_its_check_and_the_rules_and_what_time_is_left(campaign):
    from kernel_scientist.evaluator import load_task, rules_text

    db, _, _ = campaign
    task = load_task(ROOT / "evaluator/tasks/amd_fp8_mm")
    with open_existing(db) as board:
        prompts = {role: [_prompt(c) for c in _asks(board, role)] for role in ("select", "design", "implement")}
    first_line = task.description.strip().splitlines()[0]
    for role in ("design", "implement"):
        assert prompts[role], role
        for text in prompts[role]:
            assert first_line in text and "check_implementation = make_match_reference(ref_kernel, rtol=2e-02" in text
            assert rules_text() in text  # every rule with its reason, the campaign's policy rule included
    for role in ("select", "design"):
        left = [
            re.search(r"At most (\d+) more evaluations? can start before the campaign's deadline", t)
            for t in prompts[role]
        ]
        assert all(left), role


def test_the_writer_may_deviate_and_the_critic_and_selector_see_it(campaign):
    db, before, resumed_at = campaign
    with open_existing(db) as board:
        written = [k for k in board.kernels() if k.hypothesis_id is not None]
        reviews = [_prompt(c) for c in _asks(board, "review")]
        selects = [c for c in _asks(board, "select") if c.id not in before]
        implements = [_prompt(c) for c in _asks(board, "implement")]
    assert written and all(k.deviations == DEVIATION for k in written)
    assert all("departed from the plan:\n```\n" + DEVIATION in r for r in reviews if "(the seed kernel" not in r)
    assert "under DEVIATIONS" in implements[0] and "DEVIATIONS: <none, or each place" in implements[0]
    # After the resume, the selector still reads what a kernel written before it deviated in.
    old = [k for k in written if k.created_at < resumed_at]
    assert selects and any(
        f"- kernel {k.id} (parent {k.parent_id}" in _prompt(c)
        and f"deviated from its plan: {DEVIATION}" in _prompt(c).split(f"- kernel {k.id} ", 1)[1].split("\n")[0]
        for c in selects
        for k in old
    )


def test_plans_run_by_expected_value_the_best_first_and_the_critic_is_told_what_its_value_does(campaign):
    db, _, _ = campaign
    with open_existing(db) as board:
        chosen = [h for h in board.hypotheses() if h.state != HypothesisState.PROPOSED]
        review = _prompt(_asks(board, "review")[-1])
        design = _prompt(_asks(board, "design")[0])
    assert "give every plan an expected value and the reason for it" in design
    by_selection: dict[int, list[Hypothesis]] = {}
    for h in chosen:
        by_selection.setdefault(h.selection_id, []).append(h)
    for batch in by_selection.values():
        ranks = [h.why_chosen.split(":")[0] for h in sorted(batch, key=lambda h: h.id)]
        # The scripted model values its plans +0.02, +0.03, +0.04 in writing order.
        assert ranks == [
            "expected value +0.040, 1 of 3",
            "expected value +0.030, 2 of 3",
            "expected value +0.020, 3 of 3",
        ]
    assert "starts the waiting kernel of highest expected value next" in review
    assert "never evaluated if the campaign's deadline comes first" in review
    assert re.search(r"Queue now: (no kernel waiting|\d+ kernels? waiting, with expected values [-+])", review)
    assert re.search(r"at most \d+ more evaluations? can start before the campaign's deadline", review)


def test_no_choice_among_one_and_no_design_before_news(campaign):
    db, _, _ = campaign
    with open_existing(db) as board:
        # The seed runs whatever a model would say of it: no review is asked for it.
        assert board.reviews(1) and board.reviews(1)[0].approved
        assert all("(the seed kernel: no plan)" not in _prompt(c) for c in board.llm_calls() if c.role == "review")
        selections = board.selections()
        asked = _asks(board, "select")
        messages = board.messages()
        hyps = board.hypotheses()
    program = [s for s in selections if "chosen without asking the brain" in s.reason]
    assert selections[0] in program  # the seed alone
    assert len(asked) == len(selections) - len(program)
    # A design on a base whose last plans had no result waited for one: every later design on the
    # same base came after some result of the design before it.
    results = {}
    for m in messages:
        if m.hypothesis_id is not None and (m.kind == "verdict" or " abandoned: " in m.text):
            results.setdefault(m.hypothesis_id, m.at)
    designed = [s for s in selections if any(h.selection_id == s.id for h in hyps)]
    later = 0
    for s in designed:
        earlier = [p for p in designed if p.base_id == s.base_id and p.id < s.id]
        if not earlier:
            continue
        mine = min(h.created_at for h in hyps if h.selection_id == s.id)
        last = [h.id for h in hyps if h.selection_id == earlier[-1].id and h.state != HypothesisState.PROPOSED]
        assert min(results.get(i, float("inf")) for i in last) <= mine, f"selection {s.id} designed before any news"
        later += 1
    assert later >= 3
    assert any(m.agent == "theorist" and "no result yet from the last plans" in m.text for m in messages)


def test_the_reference_goes_only_to_writers_whose_plan_uses_it(campaign):
    db, _, _ = campaign
    with open_existing(db) as board:
        selections = {s.id: s for s in board.selections()}
        written = [k for k in board.kernels() if k.hypothesis_id is not None]
        calls = {a: _asks(board, "implement") for a in {k.author for k in written}}
        hyps = {h.id: h for h in board.hypotheses()}
    borrowing = [h for h in hyps.values() if h.reference_id is not None]
    assert borrowing and all("as the reference kernel does" in h.plan for h in borrowing)
    spared = [h for h in hyps.values() if selections[h.selection_id].reference_id and h.reference_id is None]
    assert spared and not any("reference kernel does" in h.plan for h in spared)
    for author in calls:  # each engineer's kernels in order are its implement asks in order
        mine = [k for k in written if k.author == author]
        asks = [c for c in calls[author] if c.agent == author]
        assert len(asks) == len(mine)
        for kernel, call in zip(mine, asks, strict=True):
            shown = "Reference kernel (borrow from it" in _prompt(call)
            assert shown == (hyps[kernel.hypothesis_id].reference_id is not None)


def test_a_plan_the_writer_failed_shows_the_designer_why(campaign):
    db, _, _ = campaign
    with open_existing(db) as board:
        [refused] = [h for h in board.hypotheses() if h.why_abandoned.startswith("the brain gave no kernel")]
        later = [_prompt(c) for c in _asks(board, "design") if c.at > refused.created_at]
    assert refused.why_abandoned.startswith("the brain gave no kernel: implement: the model refused")
    assert any(f"({refused.label}): n/a, abandoned (the brain gave no kernel: implement: the model" in t for t in later)


def test_plans_gone_stale_are_dropped_with_their_reason_and_never_written(campaign):
    db, _, _ = campaign
    with open_existing(db) as board:
        dropped = [h for h in board.hypotheses() if h.why_abandoned.startswith("dropped before it was written")]
        hyps = {h.id: h for h in board.hypotheses()}
        kernels = board.kernels()
    assert dropped
    for h in dropped:
        assert h.state == HypothesisState.ABANDONED and h.kernel_id is None
        assert not any(k.hypothesis_id == h.id for k in kernels)
        twin = hyps[int(re.search(r"H(\d+) already tr", h.why_abandoned).group(1))]
        assert (twin.base_id, twin.label) == (h.base_id, h.label) and twin.id != h.id


# ---- a stale plan, on a blackboard built for it -------------------------------------------------
def _report(times: list[float]) -> EvalReport:
    shapes = [
        ShapeResult(shape=Shape(m=64 * (i + 1), n=64, k=128), passed=True, time_us=t) for i, t in enumerate(times)
    ]
    score = round((times[0] * times[1]) ** 0.5, 4)
    provenance = Provenance(backend="simulated", simulated=True, device="MI300X", timing_method="model")
    return EvalReport(outcome=Outcome.PASSED, reason="ok", provenance=provenance, score_us=score, shapes=shapes)


def _evaluate(board: Blackboard, kernel_id: int, times: list[float], at: float) -> None:
    board.review(kernel_id=kernel_id, reviewer="critic", approved=True, reasons=["ok"], at=at, expected_value=0.1)
    sub = board.lease_submission("evaluator/0", at, 600.0)
    assert sub is not None and sub.kernel_id == kernel_id
    board.record_evaluation(
        submission_id=sub.id, owner="evaluator/0", started_at=at, finished_at=at + 60, report=_report(times)
    )


def _plan(board: Blackboard, selection: int, base: int, label: str, max_uplift: float, at: float) -> Hypothesis:
    name, value = label.split("=")
    draft = Hypothesis(
        id=0,
        selection_id=selection,
        base_id=base,
        reference_id=None,
        avenue=label,
        technique="tunable",
        params={name.strip().upper(): int(value)},
        plan=f"set {label}",
        changes=[label],
        min_uplift=0.0,
        max_uplift=max_uplift,
        innovation=0.3,
        state=HypothesisState.CHOSEN,
        verdict=Verdict.PENDING,
        author="theorist",
        created_at=at,
        label=label,
    )
    sel = board.add_selection(base_id=base, reference_id=None, reason="test", at=at)
    assert sel.id == selection
    return board.add_hypotheses(sel.id, [draft])[0]


def test_a_plan_outrun_by_a_new_best_or_already_tried_is_dropped_without_a_call(tmp_path):
    """Kernel 2 (200 us) lands after plans on kernel 1 (300 us) were made: a plan whose best case
    (+20%: 250 us) no longer beats it is dropped, and so is one that repeats kernel 2's own
    variant; a plan on kernel 2 itself is written, the only call the engineer makes."""
    with ScriptedServer() as server:
        scenario = load_scenario(
            SCENARIOS / "smoke.toml",
            ["agents.brain=openai-compatible", f"llm.base_url={server.url}/v1", "llm.backoff_s=0.05"],
        )
        with Blackboard(tmp_path / "b.sqlite") as board:
            seed = board.add_kernel(source=SEED, author="seed", at=0.0, state=KernelState.DRAFT)
            _evaluate(board, seed.id, [300.0, 300.0], at=10.0)
            first = _plan(board, 1, seed.id, "BLOCK_N=128", 0.2, at=100.0)
            board.claim_hypothesis("engineer-0", 100.0, 600.0)
            best = board.add_kernel(
                source=SEED.replace("BLOCK_N = 64", "BLOCK_N = 128"),
                author="engineer-0",
                at=150.0,
                state=KernelState.DRAFT,
                parent_id=seed.id,
                hypothesis_id=first.id,
            )
            _evaluate(board, best.id, [200.0, 200.0], at=200.0)
            board.update_hypothesis(first.id, verdict=Verdict.CONFIRMED, observed_uplift=0.5)
            outrun = _plan(board, 2, seed.id, "NUM_WARPS=8", 0.2, at=120.0)
            twin = _plan(board, 3, seed.id, "block_n=128", 0.5, at=130.0)
            fresh = _plan(board, 4, best.id, "BLOCK_M=128", 0.1, at=300.0)
            service = LLMService(scenario, board, lambda: 0.0)
            clock = CampaignClock(deadline=4000.0)
            ctx = Context(board=board, scenario=scenario, clock=clock, seed=1, backend=None, task=None, brain=None)
            ctx.brain = service.brain("engineer-1")
            engineer = Engineer(ctx, "engineer-1", rank=5)
            service.now = engineer.now

            async def main():
                clock.origin = trio.current_time() - 400.0
                await engineer.run()

            trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
            hyps = {h.id: h for h in board.hypotheses()}
            messages = [m.text for m in board.messages()]
        stages = [s.stage for s in server.script.seen]
    assert hyps[outrun.id].state == HypothesisState.ABANDONED and hyps[outrun.id].kernel_id is None
    assert hyps[outrun.id].why_abandoned == (
        "dropped before it was written: at its predicted best (+20.0%) kernel 1 would score 250.0 us, "
        "and kernel 2, evaluated since the plan was made, scores 200.0 us"
    )
    assert hyps[twin.id].why_abandoned == (
        "dropped before it was written: H1 already tried block_n=128 on kernel 1 (kernel 2: +50.0%, confirmed)"
    )
    assert hyps[fresh.id].state == HypothesisState.IMPLEMENTED and hyps[fresh.id].kernel_id is not None
    assert stages == ["implement"]
    assert any(f"H{outrun.id} abandoned: dropped before it was written" in t for t in messages)


# ---- the parts, through the renderers and decoders the brain uses ------------------------------
PLAN = {"label": "BLOCK_N=128", "plan": "wider tiles", "changes": ["BLOCK_N = 128"], "min_uplift": 0.0}


def _design_answer(*values: float | None, chosen=()) -> str:
    plans = [
        {**PLAN, "label": f"v{i}", "max_uplift": 0.1, "innovation": 0.5}
        | ({"expected_value": v, "why": f"reason {i}"} if v is not None else {})
        for i, v in enumerate(values)
    ]
    return msgspec.json.encode({"avenues": ["a"], "plans": plans, "chosen": list(chosen)}).decode()


def _view(choose: int = 2) -> DesignView:
    kv = KernelView(id=1, parent_id=None, author="seed", summary="seed", score_us=300.0, shape_us=[1.0])
    return DesignView(
        base=kv,
        base_source=SEED,
        reference=None,
        reference_source=None,
        trials=[],
        findings=[],
        written=[],
        avenues=3,
        plans=5,
        choose=choose,
    )


def test_plans_are_ranked_by_expected_value_and_the_papers_rule_stays_available():
    design = _wire.design(_design_answer(0.01, 0.2, -0.1, 0.05), _view(), "expected_value")
    assert design.chosen == [1, 3]
    assert design.why == ["expected value +0.200, 1 of 4: reason 1", "expected value +0.050, 2 of 4: reason 3"]
    with pytest.raises(_wire.AnswerInvalid, match=r"plans\[1\]: no expected_value"):
        _wire.design(_design_answer(0.01, None), _view(), "expected_value")
    paper = _wire.design(_design_answer(None, None, chosen=[{"plan": 1, "why": "most innovative"}]), _view(), "paper")
    assert paper.chosen == [1] and paper.why == ["most innovative"]
    with pytest.raises(_wire.AnswerInvalid, match="no plan was chosen"):
        _wire.design(_design_answer(0.1), _view(), "paper")
    cfg = msgspec.convert({"choose_by": "paper"}, LLMConfig)
    text = _prompts.design(_view(), cfg)
    assert "the most innovative, the one with the highest maximum uplift" in text and '"chosen": [' in text
    assert "expected_value" not in text


def test_the_writer_answers_its_deviations_apart_from_its_summary():
    draft = _wire.draft(
        f"SUMMARY: wider tiles\nDEVIATIONS: kept BLOCK_K:\n  96 does not divide k\n```python\n{SEED}\n```"
    )
    assert draft.summary == "wider tiles" and draft.deviations == "kept BLOCK_K: 96 does not divide k"
    assert _wire.draft(f"SUMMARY: x\nDEVIATIONS: None.\n```python\n{SEED}\n```").deviations == ""
    assert _wire.draft(f"SUMMARY: x\n```python\n{SEED}\n```").deviations == ""


def test_text_is_cut_between_sentences_or_words_and_says_so():
    plan = "Widen the tiles to 128. " * 100
    cut = (
        _wire.design(
            msgspec.json.encode(
                {
                    "avenues": [],
                    "plans": [{**PLAN, "plan": plan, "max_uplift": 0.1, "innovation": 0.1, "expected_value": 0.1}],
                }
            ).decode(),
            _view(),
        )
        .plans[0]
        .plan
    )
    assert cut == ("Widen the tiles to 128. " * 62).strip() + " [... 913 characters cut]"
    assert shorten("word " * 50, 22) == "word word word word [... 231 characters cut]"
    trace = "Traceback (most recent call last):\n" + "".join(f'  File "k.py", line {i}\n' for i in range(200))
    trace += "triton.CompilationError: out of resources: shared memory 262144 > 65536"
    kept = truncate(trace, 600)
    assert kept.startswith("Traceback (most recent call last):\n")
    assert kept.endswith("triton.CompilationError: out of resources: shared memory 262144 > 65536")
    assert all(ln.startswith(("  File", "Traceback", "[... ", "triton.")) for ln in kept.splitlines())


def test_the_review_prompt_places_the_kernel_in_the_queue():
    view = ReviewView(
        source=SEED,
        base_source=SEED,
        plan="p",
        min_uplift=0.0,
        max_uplift=0.1,
        innovation=0.2,
        static_findings=[],
        prescreen=None,
        deviations="",
        queued=[0.01, 0.08],
        evaluations_left=1,
    )
    text = _prompts.review(view, LLMConfig())
    assert (
        "Queue now: 2 kernels waiting, with expected values +0.080, +0.010; at most 1 more evaluation can start" in text
    )
    assert "departed from the plan:\nnone stated" in text
