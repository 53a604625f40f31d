"""A campaign's kernel as a file a leaderboard user can submit as it is.

The file starts with the ``#!POPCORN`` lines the GPU MODE leaderboard routes by: the task's
leaderboard name and, when the kernel's score was measured on a GPU, that GPU, taken from the
evaluation's provenance rather than assumed. A simulated score is a prediction that no leaderboard
GPU produced, so such a file names none: a comment line says the score is simulated and on which
device, and how to choose the GPU (a ``#!POPCORN gpus`` line of one's own, or ``--gpus NAME``,
which writes it). A header comment says where the file came from (campaign, kernel, score,
protocol, lineage), so a number read off the leaderboard can be traced back to the blackboard. An
evolved kernel inherits the seed's module docstring word for word, which describes the seed ("a
plain, correct Triton kernel") and not what the campaign made of it; that docstring is replaced by
one listing the changes applied on the way from the seed. A docstring the kernel's author wrote
(an LLM engineer may) is kept.
"""

from __future__ import annotations

import ast
import textwrap

import msgspec

from kernel_scientist.blackboard import Blackboard, Kernel

# The GPU names the leaderboard's `#!POPCORN gpus` line accepts, and the device-name marker of each.
LEADERBOARD_GPUS = (
    ("MI300", "MI300"),
    ("MI250", "MI250"),
    ("H100", "H100"),
    ("A100", "A100"),
    ("B200", "B200"),
    ("L4", " L4"),
    ("T4", " T4"),
)


def _known() -> str:
    return ", ".join(name for name, _ in LEADERBOARD_GPUS)


class Export(msgspec.Struct, frozen=True):
    text: str  # the whole file
    kernel_id: int
    gpu: str  # the `#!POPCORN gpus` line's GPU; "" when the file has none (a simulated score, no --gpus)
    simulated: bool  # the score is the timing model's prediction, not a measurement
    note: str = ""  # something the user must check before submitting ("" = nothing)


def leaderboard_gpu(device: str) -> tuple[str, str]:
    """The leaderboard's name for ``device`` (a provenance device name such as "AMD Instinct MI300X
    (simulated)"), and a note when the leaderboard is not known to offer it."""
    upper = f" {device.upper()}"
    for name, marker in LEADERBOARD_GPUS:
        if marker in upper:
            return name, ""
    short = device.replace("(simulated)", "").replace("NVIDIA", "").replace("AMD", "").strip().split()
    guess = short[-1] if short else "unknown"
    return guess, (
        f"{device} is not one of the leaderboard GPUs this version knows ({_known()}); "
        f"change the `#!POPCORN gpus` line to the GPU you submit to, or export with --gpus NAME"
    )


def lineage(board: Blackboard, kernel: Kernel) -> list[Kernel]:
    """The kernel's ancestors by parent, from the seed (or the oldest known) to the kernel."""
    chain = [kernel]
    while chain[-1].parent_id is not None and len(chain) <= 10_000:
        chain.append(board.kernel(chain[-1].parent_id))
    return chain[::-1]


def _score(board: Blackboard, kernel_id: int) -> str:
    ev = board.evaluation_for(kernel_id)
    if ev is None:
        return "not evaluated"
    score = ev.report.passed_score()
    return f"{ev.report.outcome}" if score is None else f"{score:.1f} us"


def _step(board: Blackboard, k: Kernel) -> str:
    tag = f"H{k.hypothesis_id}, " if k.hypothesis_id else ""
    ref = f", borrowing from kernel {k.reference_id}" if k.reference_id else ""
    return f"kernel {k.id} ({tag}{k.author}{ref}): {k.summary or 'no summary'} -> {_score(board, k.id)}"


def leaderboard_name(board: Blackboard, chain: list[Kernel]) -> str:
    """The task's own leaderboard name: the ``#!POPCORN leaderboard`` line of the campaign's seed
    (the task's submission template), else the task's name."""
    for line in chain[0].source.splitlines()[:20]:
        if line.startswith("#!POPCORN leaderboard "):
            return line.split(None, 2)[2].strip()
    return board.campaign().task


def _docstring_span(source: str) -> tuple[int, int, str] | None:
    """(first line, last line, text) of the module docstring, 1-based; None without one."""
    try:
        body = ast.parse(source).body
    except SyntaxError:
        return None
    if (
        body
        and isinstance(body[0], ast.Expr)
        and isinstance(body[0].value, ast.Constant)
        and isinstance(body[0].value.value, str)
    ):
        return body[0].lineno, body[0].end_lineno or body[0].lineno, body[0].value.value
    return None


def _lineage_docstring(task: str, chain: list[Kernel], board: Blackboard, score: str, regions: bool) -> str:
    lines = [
        f"{task} submission evolved by kernel-scientist from the task's seed kernel.",
        "",
        f"Changes applied to kernel {chain[0].id} ({chain[0].author}, {_score(board, chain[0].id)}), in order:",
    ]
    for i, k in enumerate(chain[1:], 1):
        lines += textwrap.wrap(_step(board, k), 96, initial_indent=f"  {i}. ", subsequent_indent="     ")
    lines += ["", f"Score: {score}."]
    if regions:
        lines += [
            "",
            "The ``# region: NAME`` / ``# endregion: NAME`` comment lines mark the parts that kernel-scientist's",
            "technique catalogue rewrites; keep them when editing by hand.",
        ]
    text = "\n".join(lines).replace('"""', "'''").replace("\\", "\\\\")
    return f'"""{text}\n"""'


def _gpu_lines(device: str, simulated: bool, chosen: str | None) -> tuple[list[str], str, str]:
    """The header lines that route the file, the GPU they name ("" = none) and a note.

    A measured score names the GPU that measured it, unless the user chose another (``chosen``,
    --gpus). A simulated score names none unless the user chose one: no leaderboard GPU produced
    it, and a line taken from the simulated device would pass a prediction off as that GPU's time."""
    hardware = device.replace("(simulated)", "").strip()
    source_gpu, note = leaderboard_gpu(device)
    if chosen is not None:
        other = not simulated and chosen != source_gpu
        note = f"the score was measured on {hardware}, not on {chosen} (--gpus)" if other else ""
    if not simulated:
        gpu = chosen or source_gpu
        return [f"#!POPCORN gpus {gpu}"], gpu, note
    said = f"# Simulated score: the analytic model's prediction for {hardware}, measured on no GPU"
    if chosen is None:
        example = "H100" if note else source_gpu  # a leaderboard name, also for a device it lacks
        how = f"add a line such as `#!POPCORN gpus {example}` for the GPU you submit to, or export with --gpus NAME"
        return [f"{said}, so this file names no leaderboard GPU; {how}."], "", ""
    return [f"#!POPCORN gpus {chosen}", f"{said}; the `gpus` line above is the one --gpus chose."], chosen, note


def export(board: Blackboard, kernel_id: int, db_name: str, version: str, gpus: str | None = None) -> Export:
    """The submission file for kernel ``kernel_id``, routed to ``gpus`` when given (one of
    ``LEADERBOARD_GPUS``' names). Raises KeyError when there is no such kernel."""
    campaign = board.campaign()
    kernel = board.kernel(kernel_id)
    chain = lineage(board, kernel)
    ev = board.evaluation_for(kernel.id)
    prov = ev.report.provenance if ev else (campaign.reference.provenance if campaign.reference else None)
    device = prov.device if prov else campaign.backend
    simulated = prov.simulated if prov else campaign.simulated
    routing, gpu, note = _gpu_lines(device, simulated, gpus)
    if ev and (passed := ev.report.passed_score()) is not None:
        score = (
            f"{passed:.1f} us geometric mean over {len(ev.report.shapes)} ranked shapes "
            f"({ev.report.provenance.label()})"
        )
    else:
        score = f"{_score(board, kernel.id)} (this kernel has no passing evaluation)"
    header = [
        f"#!POPCORN leaderboard {leaderboard_name(board, chain)}",
        *routing,
        f"# Exported by kernel-scientist {version} from campaign '{campaign.name}' (seed {campaign.seed}, "
        f"blackboard {db_name}).",
        f"# Kernel {kernel.id} ({kernel.state}): {score}.",
        f"# Protocol: {prov.protocol() if prov else 'no evaluation'}.",
        "# Lineage: " + " -> ".join(f"kernel {k.id}" for k in chain) + ".",
    ]
    body = [line for line in kernel.source.splitlines() if not line.startswith("#!POPCORN")]
    source = "\n".join(body)
    span, seed_doc = _docstring_span(source), _docstring_span(chain[0].source)
    if span is not None and seed_doc is not None and span[2] == seed_doc[2] and len(chain) > 1:  # inherited
        doc = _lineage_docstring(campaign.task, chain, board, score, "# region:" in source)
        body = body[: span[0] - 1] + doc.splitlines() + body[span[1] :]
    return Export(text="\n".join(header + body) + "\n", kernel_id=kernel.id, gpu=gpu, simulated=simulated, note=note)
