"""Render the brain protocol's views into prompts (the templates live in ``prompts/*.md``).

The system prompt and each stage's instructions are stable across a campaign and come first, so a
provider's prompt cache can reuse them; the per-call material (kernels, findings, knowledge) comes
after. Everything untrusted goes through ``_hygiene`` on the way in.
"""

from __future__ import annotations

import difflib
import functools
from pathlib import Path
from string import Template

import msgspec
from kernel_scientist.blackboard import metrics
from kernel_scientist.blackboard.config import LLMConfig

from kernel_scientist import knowledge

from ..brain import DesignView, FailureView, ImplementView, KernelView, PendingView, ReviewView, SelectionView, TaskView
from ._hygiene import fence, line

_DIR = Path(__file__).parent / "prompts"


@functools.cache
def template(name: str) -> Template:
    return Template((_DIR / f"{name}.md").read_text(encoding="utf-8"))


# What the evaluator times on, in the words a kernel engineer would use.
DEVICE_WORDS = {
    "mi300x": "the AMD Instinct MI300X (CDNA3)",
    "h200": "the NVIDIA H200 (Hopper)",
    "h100": "the NVIDIA H100 (Hopper)",
}


def system(problem: str = "amd-fp8-mm", device: str = "the AMD Instinct MI300X (CDNA3)", evaluator: str = "") -> str:
    """The stable system prompt: the problem (the task folder's name) and the device named, nothing
    of any one problem assumed; then how the evaluator measures (``evaluator_text``)."""
    head = template("system").substitute(problem=line(problem, 80), device=line(device, 80)).strip()
    return head + ("\n\n" + evaluator if evaluator else "")


def evaluator_text(backend: str, device: str, harness_device: str = "cuda", noise: float = 0.0) -> str:
    """What every stage needs to know of the evaluator: where the kernel runs and how a score is
    made, what is and is not timed, where the tensors live, the pre-screen's limits, the toolchain,
    and, for a simulated device, its public figures (a local or Ray GPU is not known here)."""
    import torch
    import triton
    from kernel_scientist.evaluator.model import DEVICES, MODEL_VERSION, host_floor_us, what_it_sees

    spec = DEVICES.get(device) if backend == "simulated" else None
    if spec is not None:
        how = (
            f"How a kernel is measured: SIMULATED, not on hardware. Each candidate runs under Triton's "
            f"CPU interpreter on the folder's test shapes (correctness: the folder's own check); then its "
            f"Triton launches on each ranked shape are recorded on meta tensors and timed by an analytic "
            f"model of the {spec.label} ({MODEL_VERSION}: bytes and flops against the peaks below, occupancy "
            f"from the launch settings, and at least {host_floor_us(spec):.1f} us of host time per call). "
            "PyTorch ops are modelled as library kernels. Tensors are CPU tensors that answer is_cuda "
            "as a GPU's would; torch.cuda is not available, so a query of device properties needs a "
            "fallback, and a branch on x.device.type would take the CPU side."
            + (
                f" Each shape's modelled time carries random noise of {noise:.0%} (one standard deviation, "
                "drawn anew for every evaluation), so a difference of a few percent between two kernels "
                "may be noise alone."
                if noise > 0
                else " The modelled times carry no noise."
            )
            + " "
            + what_it_sees(spec)
        )
    elif harness_device == "cpu":
        how = (
            "How a kernel is measured: on this machine's CPU under Triton's interpreter, timed by the host "
            "clock (a test mode: the times say nothing of a GPU)."
        )
    else:
        how = (
            "How a kernel is measured: on a real GPU. Each ranked shape gets one untimed warm-up call "
            "(compiling and autotuning happen there), then timed calls, each with fresh inputs, a "
            "NaN-filled output and an L2 flush before it, between two device-wide synchronizations: the "
            "host work of a call (Python, argument binding, every launch) is part of its time, so for "
            "small shapes a launch costs as much as the kernel. Every timed call is re-checked. Two "
            "timings of the same kernel can differ by several percent, most on the small, host-bound shapes."
        )
    score = (
        "A score is the folder's ranking (geometric mean unless it says otherwise) of the ranked "
        "shapes' times, in microseconds; lower is better. Before a kernel is queued the critic "
        "pre-screens it on the CPU (the interpreter on the smallest test shape for a simulated "
        f"campaign, the static rules on a GPU). Toolchain {'of the campaign machine (a Ray host may differ)' if backend == 'ray' else 'here'}: "
        f"torch {torch.__version__.split('+')[0]}, triton {triton.__version__}."
    )
    out = how + " " + score
    if spec is not None:
        unit = "CUs" if spec.vendor == "amd" else "SMs"
        out += (
            f"\n\nThe {spec.label} (public figures): {spec.units} {unit}, {spec.lanes}-lane "
            f"{'wavefronts' if spec.vendor == 'amd' else 'warps'}, up to {spec.max_waves_per_unit} resident "
            f"per {unit[:-1]}; {spec.smem_kb} KB of shared memory per block, {spec.reg_file_kb} KB of registers "
            f"per {unit[:-1]} ({spec.regs_per_lane} per thread before spilling); HBM {spec.hbm_tbps:g} TB/s, "
            f"L2 {spec.l2_mb_per_domain * spec.l2_domains:g} MB"
            + (f" and a {spec.llc_mb:g} MB Infinity Cache" if spec.llc_mb else "")
            + f"; dense peaks: fp8 {spec.fp8_tflops:g}, bf16/fp16 {spec.bf16_tflops:g}, fp32 vector "
            f"{spec.vector_fp32_tflops:g} TFLOP/s."
        )
    return out


def _us(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1f} us"


def _t(value: float | None) -> str:
    """A time in a table cell (the column says us)."""
    return "n/a" if value is None else f"{value:.1f}"


def _timings(k: KernelView) -> str:
    notes = k.shape_notes or [""] * len(k.shape_us)
    return (
        ", ".join(_us(t) + (f" ({note})" if note else "") for t, note in zip(k.shape_us, notes))
        or "no per-shape timings"
    )


def _at(values: list[float | None], i: int) -> float | None:
    return values[i] if i < len(values) else None


def _cell(text: str, limit: int) -> str:
    """Untrusted text in a table cell: one line, and no bar that would split the cell."""
    return line(text, limit).replace("|", "/")


def _label(shapes: list[str], i: int) -> str:
    return shapes[i] if i < len(shapes) else f"shape {i + 1}"


def shape_table(shapes: list[str], kernel: KernelView, parent: KernelView | None, reference: KernelView | None) -> str:
    """Per ranked shape: the parent's time, the kernel's, the change between them (the one uplift:
    parent / kernel - 1), the reference's and its change over the kernel, and where the kernel's
    time goes (host-bound, distance from the speed of light)."""
    if not kernel.shape_us:
        return "(no per-shape timings)"
    head = ["shape"]
    if parent is not None:
        head += [f"parent {parent.id} us", f"kernel {kernel.id} us", "change vs parent"]
    else:
        head += [f"kernel {kernel.id} us"]
    if reference is not None:
        head += [f"reference {reference.id} us", "reference vs kernel"]
    head.append("notes")
    rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for i, t in enumerate(kernel.shape_us):
        cells = [_label(shapes, i)]
        if parent is not None:
            old = _at(parent.shape_us, i)
            cells += [_t(old), _t(t), metrics.uplift_text(metrics.uplift(old, t))]
        else:
            cells.append(_t(t))
        if reference is not None:
            ref = _at(reference.shape_us, i)
            cells += [_t(ref), metrics.uplift_text(metrics.uplift(t, ref))]
        notes = kernel.shape_notes[i] if i < len(kernel.shape_notes) else ""
        cells.append(_cell(notes, 120) or "-")
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows)


def _kernels_table(shapes: list[str], ranked: list[KernelView]) -> str:
    """Every candidate's time per shape, and in brackets its change against its parent where the
    parent is a candidate too (parent / kernel - 1)."""
    width = max((len(k.shape_us) for k in ranked), default=0)
    if not width:
        return "(no per-shape timings)"
    by_id = {k.id: k for k in ranked}
    head = ["kernel", "parent", *(_label(shapes, i) for i in range(width))]
    rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for k in ranked:
        parent = by_id.get(k.parent_id) if k.parent_id is not None else None
        cells = [str(k.id), str(k.parent_id) if k.parent_id is not None else "-"]
        for i in range(width):
            t = _at(k.shape_us, i)
            change = metrics.uplift(_at(parent.shape_us, i), t) if parent is not None else None
            cells.append(_t(t) + (f" ({metrics.uplift_text(change)})" if change is not None else ""))
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows)


def _pending(pending: list[PendingView]) -> str:
    if not pending:
        return "none"
    rows = ["| plan | base | variant | where it is | predicted | plan text |", "|---|---|---|---|---|---|"]
    rows += [
        f"| H{p.hypothesis_id} | {p.base_id} | {_cell(p.label, 120)} | {p.stage} | "
        f"{metrics.predicted_range_text(p.min_uplift, p.max_uplift)} | {_cell(p.plan, 300)} |"
        for p in pending
    ]
    return "\n".join(rows)


def _failures(failures: list[FailureView], cfg: LLMConfig) -> str:
    if not failures:
        return "none"
    return "\n".join(
        f"- kernel {f.kernel_id} (from kernel {f.parent_id if f.parent_id is not None else '-'}; "
        f"{line(f.what, 200)}): {f.outcome}\n" + fence(f.error, cfg.text_chars // 2)
        for f in failures
    )


def _deviations(k: KernelView) -> str:
    return f"; deviated from its plan: {line(k.deviations, 300)}" if k.deviations else ""


def select(view: SelectionView, cfg: LLMConfig) -> str:
    ranked = sorted(view.kernels, key=lambda k: (k.score_us is None, k.score_us or 0.0, k.id))
    rows = [
        f"- kernel {k.id} (parent {k.parent_id if k.parent_id is not None else '-'}, "
        f"by {line(k.author, 40)}): score {_us(k.score_us)}; {line(k.summary, 300)}{_deviations(k)}"
        for k in ranked
    ]
    best = ranked[0] if ranked else None
    notes = (
        f"Where kernel {best.id}'s time goes, per shape: "
        + "; ".join(f"{_label(view.shapes, i)}: {n}" for i, n in enumerate(best.shape_notes) if n)
        if best is not None and any(best.shape_notes)
        else ""
    )
    return template("select").substitute(
        shape_words=metrics.shape_words(view.shapes),
        shapes=", ".join(view.shapes) or "(not given)",
        kernels="\n".join(rows) or "(none)",
        table=_kernels_table(view.shapes, ranked) + ("\n\n" + notes if notes else ""),
        pending=_pending(view.pending),
        left=_left(view.evaluations_left, view.pending),
        failures=_failures(view.failures, cfg),
        exhausted=", ".join(map(str, view.exhausted)) or "none",
        ids=", ".join(str(k.id) for k in ranked),
    )


# How the designer picks the plans that run (llm.choose_by): the step of its instructions, and
# the fields its answer adds for it.
_CHOOSE = {
    "expected_value": (
        "3. give every plan an expected value and the reason for it: the uplift you expect if it runs, "
        "averaged over its chances (a kernel that fails its check or is slower counts as what it "
        "is: -1.0 for a failure, the negative uplift for a slowdown), plus a small price for what "
        "its result would teach. The $choose plans of highest expected value run, the highest "
        "first; the others are recorded and not run.",
        '"expected_value": <float>, "why": "<the reason for that value>"',
        "",
    ),
    "paper": (
        "3. choose $choose plans to run: the most innovative, the one with the highest maximum uplift "
        "and the one with the highest minimum uplift (distinct plans when possible).",
        "",
        ',\n "chosen": [{"plan": <index into plans, from 0>, "why": "<reason>"}, ...]',
    ),
}


def _task(task: TaskView, cfg: LLMConfig) -> dict[str, str]:
    """The task's three parts for a template: its prose, its reference.py and the static rules."""
    return {
        "task": fence(task.description or "(no description)", cfg.text_chars * 2),
        "reference_impl": fence(task.reference_impl or "(not given)", cfg.source_chars, "python"),
        "rules": task.rules or "(none given)",
    }


def design(view: DesignView, cfg: LLMConfig, kind: str | None = None) -> str:
    """The theorist's prompt. ``kind`` is the task's (``Task.kind``): the retrieved knowledge comes
    from the digests for that kind only, with its topics in the query; None (unknown) searches every
    digest."""
    base = view.base
    reference = "No reference kernel."
    if view.reference is not None and view.reference_source is not None:
        reference = (
            f"Reference kernel {view.reference.id} (score {_us(view.reference.score_us)}; its per-shape times "
            "are in the table above). A plan that borrows from it says so (uses_reference); only those "
            "plans' writers are shown it:\n" + fence(view.reference_source, cfg.source_chars, "python")
        )
    trials = [
        f"- kernel {t.base_id}: {line(t.technique, 80)} ({line(t.label, 120)}): "
        f"{metrics.uplift_text(t.observed_uplift)}, {t.verdict}" + (f" ({line(t.note, 300)})" if t.note else "")
        for t in view.trials
        if t.verdict != "pending"  # the pending ones have a table of their own
    ]
    query = " ".join(
        [
            base.summary,
            *view.findings[-5:],
            *(t.technique for t in view.trials[-10:]),
            knowledge.kind_terms(kind),
            view.base_source[:2000],
        ]
    )
    passages = knowledge.retrieve(query, view.findings, cfg.knowledge_passages, kind=kind)
    found = fence("\n".join(f"- {f}" for f in view.findings), cfg.text_chars * 4) if view.findings else "none yet"
    know = "\n\n".join(f"[{p.title}]\n" + fence(p.text, cfg.text_chars) for p in passages) or "none"
    rule, plan_fields, chosen_field = _CHOOSE[cfg.choose_by]
    against = (
        f"against its parent, kernel {view.parent.id} (score {_us(view.parent.score_us)})"
        if view.parent is not None
        else "(it has no parent)"
    )
    return template("design").substitute(
        avenues=view.avenues,
        plans=view.plans,
        choose_rule=Template(rule).substitute(choose=view.choose),
        plan_fields=", " + plan_fields if plan_fields else "",
        chosen_field=chosen_field,
        base_id=base.id,
        base_parent=base.parent_id if base.parent_id is not None else "-",
        base_score=_us(base.score_us),
        base_summary=line(base.summary, 300) + _deviations(base),
        against=against,
        base_timings=shape_table(view.shapes, base, view.parent, view.reference),
        base_compile="".join("\n" + fence(text, cfg.text_chars) for text in (base.compile_stats, base.profile) if text),
        base_source=fence(view.base_source, cfg.source_chars, "python"),
        reference=reference,
        trials="\n".join(trials) or "none yet",
        pending=_pending(view.pending),
        left=_left(view.evaluations_left, view.pending),
        failures=_failures(view.failures, cfg),
        findings=found,
        knowledge=know,
        **_task(view.task, cfg),
    )


def implement(view: ImplementView, cfg: LLMConfig) -> str:
    reference = "No reference kernel."
    if view.reference_source is not None:
        reference = "Reference kernel (borrow from it where the plan says so):\n" + fence(
            view.reference_source, cfg.source_chars, "python"
        )
    params = msgspec.json.encode(view.params).decode()
    return template("implement").substitute(
        **_task(view.task, cfg),
        technique=line(view.technique, 80),
        params=params,
        plan=fence(view.plan, cfg.text_chars),
        changes="\n".join(f"- {line(c, 300)}" for c in view.changes) or "- (none listed)",
        base_source=fence(view.base_source, cfg.source_chars, "python"),
        reference=reference,
        regions=" Keep its `# region:` / `# endregion:` comment lines (other tools find their code by them)."
        if "# region:" in view.base_source
        else "",
    )


def _left(n: int | None, pending: list[PendingView]) -> str:
    """The evaluations that can still start before the deadline, against the plans that still
    need one (every pending plan but the one being evaluated)."""
    if n is None:
        return "The campaign has no deadline."
    waiting = sum(1 for p in pending if not p.stage.endswith("being evaluated"))
    return (
        f"At most {n} more evaluation{'s' if n != 1 else ''} can start before the campaign's deadline; "
        f"{waiting} of the pending plans above {'are' if waiting != 1 else 'is'} still waiting for one."
    )


def _queue(view: ReviewView) -> str:
    """Where an approval would stand: the values already waiting, and the starts left."""
    waiting = sorted(view.queued, reverse=True)
    text = (
        f"{len(waiting)} kernel{'s' if len(waiting) != 1 else ''} waiting, with expected values "
        + ", ".join(f"{v:+.3f}" for v in waiting[:12])
        + (", ..." if len(waiting) > 12 else "")
        if waiting
        else "no kernel waiting"
    )
    if view.evaluations_left is not None:
        n = view.evaluations_left
        text += f"; at most {n} more evaluation{'s' if n != 1 else ''} can start before the campaign's deadline"
    return text


def review(view: ReviewView, cfg: LLMConfig) -> str:
    if view.base_source is not None:
        diff = "".join(
            difflib.unified_diff(
                view.base_source.splitlines(keepends=True),
                view.source.splitlines(keepends=True),
                "base/submission.py",
                "candidate/submission.py",
                n=3,
            )
        )
        diff = diff or "(no change: the candidate is identical to its base)"
    else:
        diff = view.source
    findings = "\n".join(f"- {f.text()}" for f in view.static_findings)
    return template("review").substitute(
        plan=line(view.plan or "(the seed kernel: no plan)", cfg.text_chars),
        deviations=fence(view.deviations, cfg.text_chars) if view.deviations else "none stated",
        min_uplift=metrics.uplift_text(view.min_uplift),
        max_uplift=metrics.uplift_text(view.max_uplift),
        innovation=f"{view.innovation:.2f}",
        diff=fence(diff, cfg.source_chars, "diff"),
        findings=fence(findings, cfg.text_chars) if findings else "none",
        prescreen=fence(view.prescreen.text(), cfg.text_chars) if view.prescreen else "not run",
        queue=_queue(view),
    )


def repair(problem: str) -> str:
    return template("repair").substitute(problem=line(problem, 600))
