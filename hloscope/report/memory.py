"""Terminal rendering of memory footprints (``hloscope memory``): per module, the argument / output / alias /
temp split of ``compiled.memory_analysis()``, the verdict against the chip's HBM, the peak's instruction and the
largest buffers live there. Input strings reach rich as ``Text`` (``hloscope.report.terminal.literal``), never
as markup."""

from __future__ import annotations

from typing import IO, TYPE_CHECKING

from hloscope.memory.footprint import GIB
from hloscope.report._format import si
from hloscope.report.terminal import literal

if TYPE_CHECKING:
    from hloscope.memory import MemoryFootprint

__all__ = ["render_memory"]


def _short(fp: MemoryFootprint) -> str:
    """``fits, 12.3 GiB free`` / ``over by 4.2 GiB`` / ``-`` (no chip capacity)."""
    if fp.fits is None:
        return "-"
    gib = abs(fp.headroom_bytes) / GIB
    return f"fits, {gib:.3g} GiB free" if fp.fits else f"over by {gib:.3g} GiB"


def render_memory(footprints: list[MemoryFootprint], chip_id: str, file: IO[str] | None = None,
                  width: int | None = None, top: int = 10) -> None:
    """Print one summary table of ``footprints`` (largest first) and, per module, its peak and largest buffers.

    Args:
        footprints: ``Report.memory``.
        chip_id: the chip whose HBM the verdicts are against (for the title).
        file, width: where and how wide to print (default: the terminal).
        top: modules detailed (the largest ``top``; every module is in the summary).
    """
    from rich.console import Console
    from rich.table import Table

    console = Console(file=file, width=width, highlight=False, emoji=False)
    ranked = sorted(footprints, key=lambda fp: -fp.total_bytes)
    capacity = next((fp.hbm_capacity_bytes for fp in footprints if fp.hbm_capacity_bytes), None)
    against = f"{chip_id}, {capacity / GIB:.3g} GiB HBM" if capacity else f"{chip_id} (no HBM capacity known)"
    summary = Table(title=f"device memory per module (one device), against {against}", title_justify="left")
    for col in ("module", "arguments", "outputs", "aliased", "temp", "total", "fits?"):
        summary.add_column(col, justify="left" if col in ("module", "fits?") else "right", overflow="fold")
    for fp in ranked:
        style = "" if fp.fits is None else ("green" if fp.fits else "bold red")
        summary.add_row(literal(fp.module), si(fp.argument_bytes, "B"), si(fp.output_bytes, "B"),
                        si(fp.alias_bytes, "B"), si(fp.temp_bytes, "B"), si(fp.total_bytes, "B"),
                        literal(_short(fp), style))
    console.print(summary)
    for fp in ranked[:top]:
        if not fp.top_buffers:
            continue
        where = fp.peak_instruction + (f" ({fp.peak_source})" if fp.peak_source else "")
        detail = Table(title=f"{fp.module}: temp peak at {where}; largest live buffers there",
                       title_justify="left")
        for col in ("bytes", "kind", "instruction", "shape", "op_name"):
            detail.add_column(col, justify="right" if col == "bytes" else "left", overflow="fold")
        for b in fp.top_buffers:
            detail.add_row(si(b.size_bytes, "B"), literal(b.kind), literal(b.instruction), literal(b.result_shape),
                           literal(b.op_name))
        console.print(detail)
        for note in fp.notes:
            console.print(literal(f"note: {note}", "dim"))
    if footprints and not any(fp.top_buffers for fp in footprints):
        console.print(literal("no temporaries: arguments and outputs are all the program holds", "dim"))
