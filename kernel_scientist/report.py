"""The campaign report: one static HTML page with PNG plots, written from a blackboard file.

Sections: best score against submissions and against campaign time; the best kernel's speed-up per
ranked shape over the seed and over the PyTorch reference, with its distance from the speed of
light and the host-bound shapes (``status.bound_lines`` says what those are); the lineage tree of kernels; the
hypothesis ledger (predicted range against observed uplift, with verdicts); evaluator utilisation
and queue wait; and LLM tokens and cost per agent when the blackboard holds LLM-usage records.

Plots are drawn with matplotlib's Agg backend (no display, no graphviz: the lineage tree is laid out
here). Every number says whether it was simulated or measured, as the campaign record does.
"""

from __future__ import annotations

import html
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # before pyplot: render to files only, never a window
import matplotlib.pyplot as plt  # noqa: E402
import msgspec  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from kernel_scientist.blackboard import (  # noqa: E402
    Blackboard,
    Kernel,
    KernelState,
    Verdict,
    metrics,
    seed_evaluation,
)
from kernel_scientist.evaluator.model import report_host_floor_us  # noqa: E402

from . import status as status_mod  # noqa: E402

VERDICT_COLOURS = {
    Verdict.CONFIRMED: "#2a9d3a",
    Verdict.REFUTED: "#c9302c",
    Verdict.INCONCLUSIVE: "#e0a800",
    Verdict.PENDING: "#7a7a7a",
    Verdict.BUILD_FAILED: "#6f42c1",
}
STATE_COLOURS = {KernelState.EVALUATED: "#2a9d3a", KernelState.FAILED: "#c9302c", KernelState.REJECTED: "#9a9a9a"}


class LlmUsage(msgspec.Struct):
    """The fields this report reads from an LLM-usage row; anything else in the row is ignored, so
    the report tolerates the schema growing."""

    agent: str = "?"
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = None


@dataclass
class Section:
    title: str
    image: str | None = None  # PNG file name inside the output folder
    html: str = ""  # extra markup after the image (tables, notes)


@dataclass
class Report:
    out: Path
    title: str
    simulated: bool
    summary: list[str]
    sections: list[Section] = field(default_factory=list)

    def images(self) -> list[Path]:
        return [self.out / s.image for s in self.sections if s.image]


def _save(fig: Figure, path: Path) -> None:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# ---- sections ------------------------------------------------------------------------------
def _best_score(board: Blackboard, out: Path, label: str) -> Section:
    evals = sorted(board.evaluations(), key=lambda e: (e.finished_at, e.id))
    fig, (a, b) = plt.subplots(1, 2, figsize=(12, 4.2))
    xs, hs, scores, best, best_line = [], [], [], None, []
    for i, ev in enumerate(evals, 1):
        score = ev.report.passed_score()
        if score is None:
            continue
        best = score if best is None else min(best, score)
        xs.append(i)
        hs.append(ev.finished_at / 3600)
        scores.append(score)
        best_line.append(best)
    for ax, x, name in ((a, xs, "evaluations (in order of results)"), (b, hs, "campaign time (h)")):
        ax.scatter(x, scores, s=12, color="#9bb7d4", label="each passing kernel")
        ax.step(x, best_line, where="post", color="#1f4e79", lw=2, label="best so far")
        ax.set_xlabel(name)
        ax.set_ylabel(f"geomean time, us ({label})")
        ax.set_yscale("log")
        ax.grid(alpha=0.3)
        ax.legend(loc="upper right")
    a.set_title(f"best score vs evaluations ({label})")
    b.set_title(f"best score vs campaign time ({label})")
    _save(fig, out / "best_score.png")
    failed = len(evals) - len(scores)
    return Section(
        "Best score", "best_score.png", f"<p>{len(evals)} evaluations, {failed} failed; lower is better ({label}).</p>"
    )


def _per_shape(board: Blackboard, out: Path, label: str, st: status_mod.Status) -> Section:
    if st.best is None:
        return Section("Per-shape speed-up of the best kernel", None, "<p>No passing evaluation.</p>")
    best_ev = board.evaluation_for(st.best.kernel_id)
    best = best_ev.report.shapes if best_ev is not None else []
    seed = seed_evaluation(board)
    ref = board.campaign().reference
    task = status_mod.campaign_task(board)
    floor = report_host_floor_us(best_ev.report.provenance) if best_ev is not None else None
    labels, vs_seed, vs_ref = [], [], []
    for i, s in enumerate(best):
        labels.append(s.shape.label())
        st_ = seed.report.shapes[i].time_us if seed and i < len(seed.report.shapes) else None
        rt = ref.shapes[i].time_us if ref and i < len(ref.shapes) else None
        vs_seed.append(_or_nan(metrics.speedup(st_, s.time_us)))
        vs_ref.append(_or_nan(metrics.speedup(rt, s.time_us)))
    fig, ax = plt.subplots(figsize=(12, 4.2))
    xs = range(len(labels))
    ax.bar([x - 0.2 for x in xs], vs_seed, 0.4, label="over the seed kernel", color="#4c8bbf")
    ax.bar([x + 0.2 for x in xs], vs_ref, 0.4, label="over the PyTorch reference", color="#e07b39")
    ax.axhline(1.0, color="black", lw=0.8)
    ax.set_xticks(list(xs), labels, rotation=30, ha="right")
    ax.set_ylabel(f"speed-up (x, {label})")
    ax.set_title(f"kernel {st.best.kernel_id}: speed-up per ranked shape ({metrics.shape_words(labels)}, {label})")
    ax.legend()
    ax.grid(axis="y", alpha=0.3)
    _save(fig, out / "per_shape.png")
    name = metrics.bound_name(task.sol_basis() if task else None)
    rows = "".join(
        f"<tr><td>{html.escape(shape_label)}</td><td>{_us(r.time_us)}</td><td>{_x(s)}</td><td>{_x(ref_x)}</td>"
        f"<td>{_x(_or_nan(metrics.sol_ratio(r)))}</td><td>{'yes' if metrics.host_bound(r, floor) else ''}</td></tr>"
        for shape_label, r, s, ref_x in zip(labels, best, vs_seed, vs_ref)
    )
    table = (
        f"<table><tr><th>shape</th><th>time ({label})</th><th>vs seed ({label})</th><th>vs reference ({label})</th>"
        f"<th>x {html.escape(name)}</th><th>host-bound</th></tr>{rows}</table>"
    )
    notes = status_mod.bound_lines(best_ev.report, task) if best_ev is not None else []
    table += "".join(f"<p>{html.escape(n)}</p>" for n in notes)
    return Section("Per-shape speed-up of the best kernel", "per_shape.png", table)


def _us(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.1f} us"


def _or_nan(v: float | None) -> float:
    """A plotted value: a missing one is NaN (matplotlib leaves a gap)."""
    return float("nan") if v is None else v


def _x(v: float) -> str:
    return "n/a" if math.isnan(v) else f"{v:.2f}x"


def lineage_layout(kernels: list[Kernel]) -> dict[int, tuple[float, int]]:
    """(x, depth) per kernel: leaves take consecutive x in depth-first order, a parent sits over
    the mean of its children, depth is the number of ancestors (a tidy tree without graphviz)."""
    ids = {k.id for k in kernels}
    children: dict[int | None, list[int]] = {}
    for k in kernels:
        parent = k.parent_id if k.parent_id in ids else None
        children.setdefault(parent, []).append(k.id)
    pos: dict[int, tuple[float, int]] = {}
    next_x = [0.0]

    def place(node: int, depth: int) -> float:
        kids = children.get(node, [])
        if not kids:
            x = next_x[0]
            next_x[0] += 1
        else:
            x = sum(place(c, depth + 1) for c in kids) / len(kids)
        pos[node] = (x, depth)
        return x

    for root in children.get(None, []):
        place(root, 0)
    return pos


def _lineage(board: Blackboard, out: Path, label: str, st: status_mod.Status) -> Section:
    kernels = board.kernels()
    pos = lineage_layout(kernels)
    width = max(len(kernels) and max(x for x, _ in pos.values()) + 1, 4)
    depth = max((d for _, d in pos.values()), default=0) + 1
    fig, ax = plt.subplots(figsize=(min(max(6, width * 0.35), 30), max(3, depth * 0.9)))
    for k in kernels:
        if k.parent_id in pos:
            (x0, y0), (x1, y1) = pos[k.parent_id], pos[k.id]
            ax.plot([x0, x1], [y0, y1], color="#bbbbbb", lw=0.8, zorder=1)
    for state in {k.state for k in kernels}:
        pts = [pos[k.id] for k in kernels if k.state == state]
        ax.scatter(
            [p[0] for p in pts],
            [p[1] for p in pts],
            s=30,
            zorder=2,
            label=str(state),
            color=STATE_COLOURS.get(state, "#4c8bbf"),
        )
    if st.best is not None:
        bx, by = pos[st.best.kernel_id]
        ax.scatter(
            [bx],
            [by],
            marker="*",
            s=260,
            color="gold",
            edgecolor="black",
            zorder=3,
            label=f"best: kernel {st.best.kernel_id}",
        )
    if len(kernels) <= 80:
        for k in kernels:
            ax.annotate(str(k.id), pos[k.id], textcoords="offset points", xytext=(0, 6), ha="center", fontsize=7)
    ax.invert_yaxis()
    ax.set_ylabel("generation (edits from the seed)")
    ax.set_xticks([])
    ax.set_title(f"lineage of {len(kernels)} kernels (edges: parent -> child; colours: state)")
    ax.legend(loc="lower right", fontsize=8)
    _save(fig, out / "lineage.png")
    return Section("Lineage of kernels", "lineage.png")


def _ledger(board: Blackboard, out: Path, label: str) -> Section:
    hyps = [h for h in board.hypotheses() if h.kernel_id is not None]
    fig, ax = plt.subplots(figsize=(12, 4.2))
    for i, h in enumerate(hyps):
        ax.plot(
            [i, i], [h.min_uplift * 100, h.max_uplift * 100], color="#9bb7d4", lw=4, solid_capstyle="butt", zorder=1
        )
        if h.observed_uplift is not None:
            ax.scatter([i], [h.observed_uplift * 100], color=VERDICT_COLOURS[h.verdict], s=24, zorder=2)
    for verdict, colour in VERDICT_COLOURS.items():
        ax.scatter([], [], color=colour, label=f"observed: {verdict}")
    ax.plot([], [], color="#9bb7d4", lw=4, label="predicted min..max")
    ax.axhline(0, color="black", lw=0.8)
    ax.set_yscale("symlog", linthresh=10)
    ax.set_xlabel("implemented hypotheses (in order)")
    ax.set_ylabel(f"uplift % ({label})")
    ax.set_title(f"hypothesis ledger: predicted range vs observed uplift over the base ({label})")
    ax.legend(fontsize=8, ncol=5, loc="upper right")
    ax.grid(alpha=0.3)
    _save(fig, out / "hypotheses.png")
    counts = {v: sum(1 for h in hyps if h.verdict == v) for v in Verdict}
    rows = []
    for h in hyps:
        rows.append(
            f"<tr><td>H{h.id}</td><td>{html.escape(h.technique)}</td>"
            f"<td>{html.escape(h.label)}</td><td>{h.base_id}</td><td>{h.kernel_id}</td>"
            f"<td>{metrics.predicted_range_text(h.min_uplift, h.max_uplift)}</td>"
            f"<td>{metrics.uplift_text(h.observed_uplift)}</td>"
            f"<td class='{h.verdict}'>{h.verdict}</td></tr>"
        )
    summary = ", ".join(f"{n} {v}" for v, n in counts.items())
    table = (
        f"<p>{len(hyps)} hypotheses implemented ({summary}); "
        f"{len(board.hypotheses()) - len(hyps)} more were proposed or abandoned without a kernel.</p>"
        "<table><tr><th>hypothesis</th><th>technique</th><th>variant</th><th>base</th><th>kernel</th>"
        f"<th>predicted</th><th>observed ({label})</th><th>verdict</th></tr>{''.join(rows)}</table>"
    )
    return Section("Hypothesis ledger", "hypotheses.png", table)


def _evaluator(board: Blackboard, out: Path, label: str) -> Section:
    campaign = board.campaign()
    evals = board.evaluations()
    subs = {s.id: s for s in board.submissions()}
    end = board.clock()
    hours = max(1, math.ceil(end / 3600))
    util = metrics.utilisation_by_hour(campaign, evals, hours)
    segs = metrics.segments(campaign)
    limits = "; ".join(
        f"from {s.started_at / 3600:.1f} h: in_flight={s.in_flight}, rate {s.rate_per_hour:g}/h" for s in segs
    )
    waits = [
        (e.started_at / 3600, (e.started_at - subs[e.submission_id].enqueued_at) / 3600)
        for e in evals
        if e.submission_id in subs
    ]
    fig, (a, b) = plt.subplots(1, 2, figsize=(12, 4.2))
    a.bar([h + 0.5 for h in range(hours)], [u * 100 for u in util], width=0.9, color="#4c8bbf")
    a.set_ylim(0, 105)
    a.set_xlabel("campaign hour")
    a.set_ylabel(f"% of evaluator capacity busy ({label})")
    a.set_title("utilisation per hour (of the capacity in force)")
    a.grid(axis="y", alpha=0.3)
    b.scatter([w[0] for w in waits], [w[1] for w in waits], s=14, color="#e07b39")
    b.set_xlabel("campaign time of the evaluation's start (h)")
    b.set_ylabel(f"queue wait (h, {label})")
    b.set_title("queue wait: approved -> evaluation started")
    b.grid(alpha=0.3)
    _save(fig, out / "evaluator.png")
    use = metrics.usage(campaign, evals, list(subs.values()), board.evaluation_starts(), end)
    mean_wait = sum(w for _, w in waits) / len(waits) if waits else 0.0
    return Section(
        "Evaluator utilisation and queue wait",
        "evaluator.png",
        f"<p>Overall utilisation {use.utilisation:.0%} of the evaluator capacity in force over "
        f"{end / 3600:.1f} campaign hours ({html.escape(limits)}); mean queue wait "
        f"{mean_wait * 60:.0f} min; {use.starts} evaluation starts of the {use.allowed} the rate "
        f"limits allowed (rate limit used {use.rate_used:.0%}; {label}).</p>",
    )


def llm_usage(board: Blackboard) -> list[LlmUsage] | None:
    """The campaign's LLM exchanges as usage rows, or None when it asked no language model."""
    rows = [msgspec.convert(r, LlmUsage, from_attributes=True) for r in board.llm_calls()]
    return rows or None


def _llm(board: Blackboard, out: Path) -> Section | None:
    rows = llm_usage(board)
    if not rows:
        return None
    per: dict[str, list[float]] = {}
    for r in rows:
        acc = per.setdefault(r.agent, [0, 0, 0.0, 0])
        acc[0] += r.input_tokens
        acc[1] += r.output_tokens
        acc[2] += r.cost_usd or 0.0
        acc[3] += 1
    agents = sorted(per)
    fig, (a, b) = plt.subplots(1, 2, figsize=(12, 4))
    a.bar(agents, [per[x][0] for x in agents], label="input tokens", color="#4c8bbf")
    a.bar(
        agents, [per[x][1] for x in agents], bottom=[per[x][0] for x in agents], label="output tokens", color="#e07b39"
    )
    a.set_title("LLM tokens per agent")
    a.legend()
    b.bar(agents, [per[x][2] for x in agents], color="#2a9d3a")
    b.set_title("LLM cost per agent (USD)")
    for ax in (a, b):
        ax.tick_params(axis="x", rotation=30)
    _save(fig, out / "llm.png")
    rows_html = "".join(
        f"<tr><td>{html.escape(x)}</td><td>{int(per[x][3])}</td><td>{int(per[x][0])}</td>"
        f"<td>{int(per[x][1])}</td><td>${per[x][2]:.4f}</td></tr>"
        for x in agents
    )
    return Section(
        "LLM tokens and cost",
        "llm.png",
        "<table><tr><th>agent</th><th>calls</th><th>input tokens</th><th>output tokens</th>"
        f"<th>cost</th></tr>{rows_html}</table>",
    )


# ---- the page ------------------------------------------------------------------------------
def build(board: Blackboard, out: Path, step: Callable[[str], None] = lambda name: None) -> Report:
    """Write every plot into ``out`` and return the page's parts; ``step`` reports progress. The
    sections read the campaign as one moment (it may still be running in another process)."""
    with board.reading():
        return _build(board, out, step)


def _build(board: Blackboard, out: Path, step: Callable[[str], None]) -> Report:
    out.mkdir(parents=True, exist_ok=True)
    campaign = board.campaign()
    st = status_mod.status(board)
    label = st.kind or ("simulated" if campaign.simulated else "measured")  # the evaluations' provenance
    summary = [
        f"task {campaign.task}; backend {campaign.backend}; {st.label or 'no evaluations yet'}; "
        f"seed {campaign.seed}; {st.virtual_hours:.1f} {'virtual' if campaign.virtual_time else 'wall'} "
        "campaign hours",
        f"{st.submissions} submissions, {st.evaluations} evaluations ({st.failed} failed), "
        f"{st.rejected} kernels sent back by the critic; evaluator utilisation {st.utilisation:.0%}, "
        f"rate limit used {st.rate_used:.0%}",
        metrics.calibration_text(st.predictions),
        *filter(None, [metrics.retime_text(st.retimes)]),
    ]
    if st.best is not None:
        summary.append(
            f"best: kernel {st.best.kernel_id} at {st.best.score_us:.1f} us ({label}), "
            f"{_x(st.best.speedup_vs_seed or float('nan'))} the seed, "
            f"{_x(st.best.speedup_vs_reference or float('nan'))} the PyTorch reference"
        )
    report = Report(
        out=out, title=f"{campaign.name}: campaign report ({label})", simulated=st.simulated, summary=summary
    )
    steps: list[tuple[str, Callable[[], Section | None]]] = [
        ("best score", lambda: _best_score(board, out, label)),
        ("per-shape speed-up", lambda: _per_shape(board, out, label, st)),
        ("lineage", lambda: _lineage(board, out, label, st)),
        ("hypothesis ledger", lambda: _ledger(board, out, label)),
        ("evaluator", lambda: _evaluator(board, out, label)),
        ("LLM usage", lambda: _llm(board, out)),
    ]
    for name, make in steps:
        step(name)
        section = make()
        if section is not None:
            report.sections.append(section)
    return report


STEPS = 6  # the number of ``step`` calls ``build`` makes (for progress bars)
# Every file a report may write into its folder (``report --out`` replaces them only with --force).
FILES = ("index.html", "best_score.png", "per_shape.png", "lineage.png", "hypotheses.png", "evaluator.png", "llm.png")

_CSS = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1300px; color: #222; }
img { max-width: 100%; border: 1px solid #ddd; }
table { border-collapse: collapse; font-size: 0.85em; margin: 0.5em 0 1.5em; }
td, th { border: 1px solid #ccc; padding: 2px 8px; text-align: left; }
.confirmed { color: #2a9d3a; } .refuted { color: #c9302c; } .inconclusive { color: #b08800; } .build_failed { color: #6f42c1; }
.badge { background: #fff3cd; border: 1px solid #e0a800; padding: 2px 8px; border-radius: 4px; }
"""


def write_html(report: Report) -> Path:
    label_note = (
        "<p><span class='badge'>simulated</span> Every time and score on this page comes "
        "from the simulated backend's analytic timing model, not from hardware.</p>"
        if report.simulated
        else ""
    )
    parts = [
        f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(report.title)}</title>"
        f"<style>{_CSS}</style></head><body><h1>{html.escape(report.title)}</h1>",
        label_note,
        "<ul>" + "".join(f"<li>{html.escape(s)}</li>" for s in report.summary) + "</ul>",
    ]
    for s in report.sections:
        parts.append(f"<h2>{html.escape(s.title)}</h2>")
        if s.image:
            parts.append(f"<img src='{s.image}' alt='{html.escape(s.title)}'>")
        parts.append(s.html)
    parts.append("</body></html>")
    path = report.out / "index.html"
    path.write_text("\n".join(parts), encoding="utf-8")
    return path
