"""A report's compile statistics (``EvalReport.compile_stats``) as a short markdown table.

One row per compiled kernel and setting, the columns an engineer reads first when a kernel is
slower than its plan: registers, spills, shared memory and the resident blocks they allow. The
line above the table says where the figures come from (loaded on a GPU, or compiled for the
simulated device's architecture and never run), since a figure compiled here is not a
measurement. For the prompts of the language-model scientist and for any report that shows an
evaluation.
"""

from __future__ import annotations

from kernel_scientist.blackboard.records import CompileStats, EvalReport

__all__ = ["compile_stats_table"]


def compile_stats_table(report: EvalReport) -> str:
    """The table, with its source line and one line per kernel that could not be compiled;
    "" when the report has no statistics."""
    stats = report.compile_stats
    if not stats:
        return ""
    unit = "CU" if "amd" in report.provenance.hardware.lower() else "SM"
    origins = list(dict.fromkeys(s.origin for s in stats if s.origin))
    lines = [f"Compile statistics ({'; '.join(origins) or 'source unknown'}):", ""]
    compiled = [s for s in stats if not s.error]
    if compiled:
        lines += [
            f"| kernel | settings | warps | stages | registers | spills | shared memory | blocks per {unit} |",
            "|---|---|---|---|---|---|---|---|",
        ]
        lines += [_row(s) for s in compiled]
    for s in stats:
        if s.error:
            where = f" ({_cell(s.settings)})" if s.settings else ""
            lines.append(f"- {_cell(s.kernel)}{where} did not compile: {s.error}")
    return "\n".join(lines)


def _row(s: CompileStats) -> str:
    blocks = "-" if s.blocks_per_unit is None else str(s.blocks_per_unit)
    if s.blocks_per_unit is not None and s.limited_by:
        blocks += f" ({s.limited_by})"
    cells = [
        _cell(s.kernel),
        _cell(s.settings) or "-",
        _figure(s.num_warps),
        _figure(s.num_stages),
        _figure(s.registers),
        _figure(s.spills),
        _bytes(s.shared_bytes),
        blocks,
    ]
    return "| " + " | ".join(cells) + " |"


def _figure(value: int | None) -> str:
    return "-" if value is None else str(value)


def _bytes(value: int | None) -> str:
    if value is None:
        return "-"
    return f"{value // 1024} KiB" if value and value % 1024 == 0 else f"{value} B"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")
