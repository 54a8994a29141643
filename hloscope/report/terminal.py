"""Terminal rendering of a report and the chip list with rich."""

from __future__ import annotations

import math
from typing import IO, TYPE_CHECKING

from hloscope.report._format import duration as _time
from hloscope.report._format import si as _si

if TYPE_CHECKING:
    from hloscope.result import Report
    from hloscope.roofline.chips import ChipSpec


_BOUND_STYLE = {"compute": "green", "memory": "yellow", "communication": "magenta"}


def render(report: Report, top: int = 25, file: IO[str] | None = None, width: int | None = None) -> None:
    """Print the module summary and the top ``top`` ops of ``report``."""
    from rich.console import Console
    from rich.table import Table

    console = Console(file=file, width=width)
    if width is None and console.width < 150:
        console = Console(file=file, width=150)  # the tables need room; wrapping is worse than scrolling
    traced = not report.coverage.get("static")
    chip = report.chip
    console.print(f"[bold]hloscope[/bold] - chip [cyan]{chip.id}[/cyan] ({chip.name})"
                  + ("" if traced else " - static prediction from HLO"))
    for note in report.notes:
        console.print(f"[dim]note: {note}[/dim]")
    summary = Table(title="modules (per step)" if traced else "modules (per run)")
    for col in ("module", "FLOPs", "HBM bytes", "wire bytes", "roofline", "measured", "MFU",
                "compute-bound", "memory-bound", "comm-bound"):
        summary.add_column(col, justify="left" if col == "module" else "right")
    for m in report.modules.to_dict(orient="records"):
        summary.add_row(m["name"], _si(m["flops"], "FLOP"), _si(m["hbm_bytes"], "B"),
                        _si(m["wire_bytes"], "B"), _time(m["roofline_s"]), _time(m["measured_s"]),
                        "-" if math.isnan(m["mfu"]) else f"{m['mfu']:.1%}", _time(m["compute_bound_s"]),
                        _time(m["memory_bound_s"]), _time(m["communication_bound_s"]))
    console.print(summary)
    if traced:
        cov = report.coverage
        console.print(f"joined {cov.get('joined_time_fraction', 0):.1%} of measured op time to HLO instructions "
                      f"({cov.get('steps')} steps, {cov.get('devices')} devices, "
                      f"{cov.get('unjoined_ops', 0)} ops not in the HLO)")
    ops = Table(title=f"top {top} ops by {'measured' if traced else 'roofline'} time")
    columns = ["instruction", "category", "op_name", "FLOPs", "bytes", "wire", "bound", "roofline"]
    if traced:
        columns += ["measured", "efficiency"]
    for col in columns:
        ops.add_column(col, overflow="fold", max_width=40 if col == "op_name" else None)
    for r in report.ops.head(top).to_dict(orient="records"):
        style = _BOUND_STYLE.get(r["bound"], "")
        row = [r["instruction"], r["category"], (r["op_name"] or "")[-40:], _si(r["flops"], ""),
               _si(r["hbm_bytes"], "B"), _si(r["wire_bytes"], "B"),
               f"[{style}]{r['bound']}[/{style}]" if style else str(r["bound"]), _time(r["roofline_s"])]
        if traced:
            eff = r["efficiency"]
            row += [_time(r["measured_s"]), "-" if eff != eff else f"{eff:.1%}"]
        ops.add_row(*row)
    console.print(ops)
    if traced and report.ops["lost_s"].notna().any():
        lost = report.ops[report.ops["lost_s"] > 0].sort_values("lost_s", ascending=False).head(min(top, 10))
        table = Table(title="most time lost to the roof (measured - roofline)")
        for col in ("instruction", "category", "bound", "measured", "roofline", "lost", "efficiency"):
            table.add_column(col)
        for r in lost.to_dict(orient="records"):
            table.add_row(r["instruction"], r["category"], str(r["bound"]), _time(r["measured_s"]),
                          _time(r["roofline_s"]), _time(r["lost_s"]), f"{r['efficiency']:.1%}")
        console.print(table)


def render_chips(chips: list[ChipSpec]) -> None:
    """Print the chip table: peaks, HBM, links."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title="chips (dense peaks; bandwidths one direction)")
    for col in ("id", "name", "bf16", "f32", "int8", "HBM B/s", "HBM", "link B/s", "aliases"):
        table.add_column(col)
    for c in chips:
        peaks = c.peak_flops_per_s
        link = c.peer_link_bytes_per_s
        table.add_row(c.id, c.name, _si(peaks.get("bf16", math.nan), "FLOP/s"), _si(peaks.get("f32", math.nan), "FLOP/s"),
                      _si(peaks.get("int8", math.nan), "OP/s"), _si(c.hbm_bytes_per_s, "B/s"), _si(c.hbm_capacity_bytes, "B"),
                      _si(link, "B/s") if link else "-", ", ".join(c.aliases[:3]))
    Console().print(table)
