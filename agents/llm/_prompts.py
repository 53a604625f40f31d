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

from ..brain import DesignView, ImplementView, KernelView, ReviewView, SelectionView
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


def evaluator_text(backend: str, device: str, harness_device: str = "cuda") -> str:
    """What every stage needs to know of the evaluator: where the kernel runs and how a score is
    made, what is and is not timed, where the tensors live, the pre-screen's limits, the toolchain,
    and, for a simulated device, its public figures (a local or Ray GPU is not known here)."""
    import torch
    import triton
    from kernel_scientist.evaluator.model import DEVICES, MODEL_VERSION, host_floor_us

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
            "small shapes a launch costs as much as the kernel. Every timed call is re-checked."
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


def _timings(k: KernelView) -> str:
    notes = k.shape_notes or [""] * len(k.shape_us)
    return (
        ", ".join(_us(t) + (f" ({note})" if note else "") for t, note in zip(k.shape_us, notes))
        or "no per-shape timings"
    )


def select(view: SelectionView, cfg: LLMConfig) -> str:
    ranked = sorted(view.kernels, key=lambda k: (k.score_us is None, k.score_us or 0.0, k.id))
    rows = [
        f"- kernel {k.id} (parent {k.parent_id if k.parent_id is not None else '-'}, "
        f"by {line(k.author, 40)}): score {_us(k.score_us)}; shapes: {_timings(k)}; "
        f"{line(k.summary, 200)}"
        for k in ranked
    ]
    return template("select").substitute(
        shape_words=metrics.shape_words(view.shapes),
        shapes=", ".join(view.shapes) or "(not given)",
        kernels="\n".join(rows) or "(none)",
        exhausted=", ".join(map(str, view.exhausted)) or "none",
        ids=", ".join(str(k.id) for k in ranked),
    )


def design(view: DesignView, cfg: LLMConfig, kind: str | None = None) -> str:
    """The theorist's prompt. ``kind`` is the task's (``Task.kind``): the retrieved knowledge comes
    from the digests for that kind only, with its topics in the query; None (unknown) searches every
    digest."""
    base = view.base
    reference = "No reference kernel."
    if view.reference is not None and view.reference_source is not None:
        reference = (
            f"Reference kernel {view.reference.id} (score {_us(view.reference.score_us)}; "
            f"shapes: {_timings(view.reference)}):\n" + fence(view.reference_source, cfg.source_chars, "python")
        )
    trials = [
        f"- kernel {t.base_id}: {line(t.technique, 80)} ({line(t.label, 120)}): "
        f"{metrics.uplift_text(t.observed_uplift)}, {t.verdict}"
        for t in view.trials
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
    return template("design").substitute(
        avenues=view.avenues,
        plans=view.plans,
        choose=view.choose,
        base_id=base.id,
        base_parent=base.parent_id if base.parent_id is not None else "-",
        base_score=_us(base.score_us),
        base_timings=f"shape times: {_timings(base)}",
        base_source=fence(view.base_source, cfg.source_chars, "python"),
        reference=reference,
        trials="\n".join(trials) or "none yet",
        findings=found,
        knowledge=know,
    )


def implement(view: ImplementView, cfg: LLMConfig) -> str:
    reference = "No reference kernel."
    if view.reference_source is not None:
        reference = "Reference kernel (borrow from it where the plan says so):\n" + fence(
            view.reference_source, cfg.source_chars, "python"
        )
    params = msgspec.json.encode(view.params).decode()
    return template("implement").substitute(
        task=fence(view.task_description or "(no description)", cfg.text_chars * 2),
        reference_impl=fence(view.reference_impl or "(not given)", cfg.source_chars, "python"),
        technique=line(view.technique, 80),
        params=params,
        plan=fence(view.plan, cfg.text_chars),
        changes="\n".join(f"- {line(c, 300)}" for c in view.changes) or "- (none listed)",
        base_source=fence(view.base_source, cfg.source_chars, "python"),
        reference=reference,
    )


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
        min_uplift=metrics.uplift_text(view.min_uplift),
        max_uplift=metrics.uplift_text(view.max_uplift),
        innovation=f"{view.innovation:.2f}",
        diff=fence(diff, cfg.source_chars, "diff"),
        findings=fence(findings, cfg.text_chars) if findings else "none",
        prescreen=fence(view.prescreen.text(), cfg.text_chars) if view.prescreen else "not run",
    )


def repair(problem: str) -> str:
    return template("repair").substitute(problem=line(problem, 600))
