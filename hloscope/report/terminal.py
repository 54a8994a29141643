"""Terminal rendering of a report and the chip list with rich.

Every string that comes from the input -- module, instruction, op and source names, categories, notes, chip
names from a chip file -- reaches rich as ``rich.text.Text``, never as markup: ``jax.named_scope("a[/x]")``
puts any text in an op name, and rich would read ``[/x]`` or ``[bold]`` in a ``str`` as a tag (an error, or a
silent restyle) and ``:smile:`` as an emoji.
"""

from __future__ import annotations

import math
from typing import IO, TYPE_CHECKING, Any

from hloscope._columns import column_array, column_list, head_records
from hloscope.report._format import duration as _time
from hloscope.report._format import si as _si

if TYPE_CHECKING:
    import pandas as pd
    from rich.text import Text

    from hloscope._columns import ColumnTable

    from hloscope.result import Report
    from hloscope.roofline.chips import ChipSpec


_BOUND_STYLE = {"compute": "green", "memory": "yellow", "communication": "magenta"}
#: The modules table shows at most this many modules, and folds modules taking less than ``FOLD_SHARE`` of the
#: total time into one line -- an XLA dump dir holds a module per operation JAX ran outside ``jit``.
MAX_MODULES = 10
FOLD_SHARE = 0.01
#: Columns of the modules table summed into the folded line.
_SUMMED = ("flops", "hbm_bytes", "wire_bytes", "roofline_s", "measured_s", "compute_bound_s", "memory_bound_s",
           "communication_bound_s")


def literal(value: Any, style: str = "") -> Text:
    """``value`` as literal terminal text (no markup, no emoji codes)."""
    from rich.text import Text

    return Text("" if value is None or (isinstance(value, float) and math.isnan(value)) else str(value), style=style)


def fold_modules(modules: ColumnTable | pd.DataFrame, time_column: str, limit: int = MAX_MODULES,
                 share: float = FOLD_SHARE) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The modules table (a DataFrame, or the columns a report keeps: ``Report.table``) ranked by ``time_column``
    (largest first, ties in table order; no time last), split into the rows shown and the rows folded into one
    line: at most ``limit`` rows are shown, each taking at least ``share`` of the total time (the largest always).
    Nothing is folded when that would fold fewer than two rows.

    Returns:
        ``(shown, folded)``: rows as dicts of Python values, both in rank order.
    """
    import numpy as np

    from hloscope.roofline.tables import descending_order

    rows = head_records(modules, len(modules))
    times = np.array(column_list(modules, time_column), dtype=float)
    order = descending_order(times)  # (sort_values(ascending=False, na_position="last", kind="stable"))
    if order is not None:
        rows, times = [rows[i] for i in order], times[order]
    times = np.where(np.isnan(times), 0.0, times)
    total = float(times.sum())
    keep = [i == 0 or (i < limit and total > 0 and t >= share * total) for i, t in enumerate(times.tolist())]
    if len(keep) - sum(keep) < 2:
        return rows, []
    return [r for r, k in zip(rows, keep) if k], [r for r, k in zip(rows, keep) if not k]


def _module_row(m: dict[str, Any]) -> list[Any]:
    mfu = m.get("mfu", math.nan)
    return [_si(m["flops"], "FLOP"), _si(m["hbm_bytes"], "B"), _si(m["wire_bytes"], "B"), _time(m["roofline_s"]),
            _time(m["measured_s"]), "-" if mfu is None or mfu != mfu else f"{mfu:.1%}", _time(m["compute_bound_s"]),
            _time(m["memory_bound_s"]), _time(m["communication_bound_s"])]


def _folded_row(folded: list[dict[str, Any]], time_column: str) -> list[Any]:
    import numpy as np

    from hloscope.roofline.tables import nansum

    def summed(values: np.ndarray) -> float:  # (Series.sum(min_count=1): NaN when nothing is known)
        return nansum(values) if (~np.isnan(values)).any() else math.nan

    sums = {c: summed(np.array([r[c] for r in folded], dtype=float)) for c in _SUMMED}
    times = np.array([r[time_column] for r in folded], dtype=float)
    largest = _time(float(np.nanmax(times)) if (~np.isnan(times)).any() else math.nan)
    return [literal(f"{len(folded)} smaller modules (each <= {largest})", "dim")] + [
        literal(v, "dim") for v in _module_row(sums | {"mfu": math.nan})]


def render(report: Report, top: int = 25, file: IO[str] | None = None, width: int | None = None,
           advice: bool = False) -> None:
    """Print the module summary (ranked by time, small modules folded into one line), for a trace the steps,
    the top ``top`` ops of ``report``, and with ``advice`` what to change (``Report.advice``)."""
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    console = Console(file=file, width=width)
    if width is None and console.width < 150:
        console = Console(file=file, width=150)  # the tables need room; wrapping is worse than scrolling
    traced = not report.coverage.get("static")
    chip = report.chip
    console.print(Text.assemble(("hloscope", "bold"), " - chip ", (str(chip.id), "cyan"), f" ({chip.name})",
                                "" if traced else " - static prediction from HLO"))
    for note in report.notes:
        console.print(literal(f"note: {note}", "dim"))
    time_column = "measured_s" if traced else "roofline_s"
    # (the tables as the report keeps them: a static report's columns make no DataFrame, and no pandas is loaded)
    shown, folded = fold_modules(report.table("modules"), time_column)
    summary = Table(title=literal(f"modules (per {'step' if traced else 'run'}), by {time_column[:-2]} time"))
    for col in ("module", "FLOPs", "HBM bytes", "wire bytes", "roofline", "measured", "MFU",
                "compute-bound", "memory-bound", "comm-bound"):
        summary.add_column(col, justify="left" if col == "module" else "right", overflow="fold")
    for m in shown:
        summary.add_row(literal(m["name"]), *_module_row(m))
    if folded:
        summary.add_row(*_folded_row(folded, time_column))
    console.print(summary)
    if traced:
        cov = report.coverage
        console.print(literal(f"joined {cov.get('joined_time_fraction', 0):.1%} of measured op time to HLO "
                           f"instructions ({cov.get('steps')} steps, {cov.get('devices')} devices, "
                           f"{cov.get('unjoined_ops', 0)} ops not in the HLO)"))
    if report.steps is not None and len(report.steps):
        _render_steps(console, report)
    _render_overlap_line(console, report)
    several = len(report.table("modules")) > 1
    ops = Table(title=literal(f"top {top} ops by {'measured' if traced else 'roofline'} time"))
    columns = (["module"] if several else []) + ["instruction", "category", "op_name", "FLOPs", "bytes", "wire",
                                                 "bound", "roofline"]
    if traced:
        columns += ["measured", "efficiency"]
    for col in columns:
        ops.add_column(col, overflow="fold", max_width=40 if col in ("op_name", "module") else None)
    for r in head_records(report.table("ops"), top):
        row = ([literal(r["module"])] if several else []) + [
            literal(r["instruction"]), literal(r["category"]), literal((r["op_name"] or "")[-40:]),
            _si(r["flops"], ""), _si(r["hbm_bytes"], "B"), _si(r["wire_bytes"], "B"),
            literal(r["bound"], _BOUND_STYLE.get(r["bound"], "")), _time(r["roofline_s"])]
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
            table.add_row(literal(r["instruction"]), literal(r["category"]), literal(r["bound"]),
                          _time(r["measured_s"]), _time(r["roofline_s"]), _time(r["lost_s"]), f"{r['efficiency']:.1%}")
        console.print(table)
    if advice:
        _render_advice(console, report, top)


def _render_advice(console: Any, report: Report, top: int) -> None:
    """The advice table, largest gain first (gains are upper bounds)."""
    from rich.table import Table

    table = report._advice_table()
    if not len(table):
        console.print(literal("advice: none of the rules applies (docs/advice.md lists them)"))
        return
    t = Table(title=literal(f"advice ({len(table)}; gain = roofline time per run it could save at most)"))
    for col, width in (("gain", None), ("rule", 22), ("ops", 30), ("evidence", 60), ("do", 60)):
        t.add_column(col, justify="right" if col == "gain" else "left", overflow="fold", max_width=width)
    for r in head_records(table, top):
        t.add_row(_time(r["gain_s"]), literal(r["rule"]), literal(r["ops"]), literal(r["evidence"]),
                  literal(r["action"]))
    console.print(t)


def _render_steps(console: Any, report: Report) -> None:
    """The per-step table (across devices: ``hloscope.steps.summary``), the step summary line, the collectives
    with the most exposed time and the longest idle gaps."""
    from rich.table import Table

    from hloscope.steps.summary import across_devices, step_summary

    per = across_devices(report.steps)
    table = Table(title=literal(f"steps ({per['devices'].max()} device(s); parts of the wall time are means over "
                                "devices: compute + memory + exposed comm + other + idle = wall)"))
    for col in ("step", "wall", "busy", "compute", "memory", "exposed comm", "other", "idle", "comm hidden",
                "roofline", "roof/wall", "slowest device", "straggler gap"):
        table.add_column(col, justify="left" if col in ("step", "slowest device") else "right", overflow="fold")
    shown = per if len(per) <= 40 else per.iloc[list(range(20)) + list(range(len(per) - 10, len(per)))]
    for r in shown.to_dict(orient="records"):
        hidden, frac = r["comm_hidden_fraction"], r["roofline_fraction"]
        table.add_row(
            literal(f"{r['step']}" + (f" {r['module']}" if r["module"] else "") + (" (first)" if r["first"] else "")),
            _time(r["wall_s"]), _time(r["busy_s"]), _time(r["compute_s"]), _time(r["memory_s"]),
            literal(_time(r["exposed_comm_s"]), "magenta" if r["exposed_comm_s"] > 0 else ""),
            _time(r["other_s"]), _time(r["idle_s"]), "-" if hidden != hidden else f"{hidden:.0%}",
            _time(r["roofline_s"]), "-" if frac != frac else f"{frac:.1%}",
            literal(r["slowest_device"] if r["devices"] > 1 else ""),
            _time(r["straggler_gap_s"]) if r["devices"] > 1 else "")
    console.print(table)
    if len(shown) < len(per):
        console.print(literal(f"({len(per) - len(shown)} steps not shown; all are in --format json)", "dim"))
    s = step_summary(report.steps)
    line = f"step time: median {_time(s['median_wall_s'])}" + (" (first step left out)" if s["median_excludes_first"]
                                                                  else "")
    line += f", worst {_time(s['worst_wall_s'])} (step {s['worst_step']})"
    if s["first_step"] is not None:
        line += f", first {_time(s['first_wall_s'])}"
    line += f"; median idle {_time(s['median_idle_s'])}, exposed comm {_time(s['median_exposed_comm_s'])}"
    if s["comm_hidden_fraction"] == s["comm_hidden_fraction"]:
        line += f" ({s['comm_hidden_fraction']:.0%} of communication hidden)"
    console.print(literal(line))
    exposed = report.ops[report.ops["exposed_comm_s"] > 0].sort_values("exposed_comm_s", ascending=False).head(5)
    if len(exposed):
        t = Table(title="collectives with the most exposed time (per step and device)")
        for col in ("instruction", "comm kind", "measured", "slowest participant", "exposed", "overlapped",
                    "overlap window (roofline)"):
            t.add_column(col, justify="left" if col in ("instruction", "comm kind") else "right")
        for r in exposed.to_dict(orient="records"):
            t.add_row(literal(r["instruction"]), literal(r["comm_kind"]), _time(r["measured_s"]),
                      _time(r["slowest_participant_s"]), _time(r["exposed_comm_s"]), _time(r["overlapped_comm_s"]),
                      _time(r["overlap_window_s"]))
        console.print(t)
    if report.steps["host"].nunique() > 1:
        _render_devices(console, report)
    if report.stragglers is not None and len(report.stragglers):
        t = Table(title="stragglers (devices the others wait for: ready time = late start + own work, per step)")
        for col in ("device", "ready", "median device", "excess", "late start", "where the time went"):
            t.add_column(col, justify="left" if col in ("device", "where the time went") else "right",
                         overflow="fold")
        for r in report.stragglers.head(10).to_dict(orient="records"):
            t.add_row(literal(_device(r)), _time(r["ready_s"]), _time(r["median_ready_s"]), _time(r["excess_s"]),
                      _time(r["late_start_s"]), literal(r["ops"]))
        console.print(t)
    if report.gaps is not None and len(report.gaps):
        t = Table(title="longest idle gaps")
        for col in ("step", "device", "at", "gap", "after op", "before op"):
            t.add_column(col, justify="right" if col in ("at", "gap") else "left", overflow="fold")
        for r in report.gaps.head(5).to_dict(orient="records"):
            t.add_row(literal(r["step"]), literal(_device(r)), _time(r["start_s"]), _time(r["duration_s"]),
                      literal(r["before"] or "(step start)"), literal(r["after"] or "(step end)"))
        console.print(t)


def _render_overlap_line(console: Any, report: Report) -> None:
    """One line on what the schedule lets communication hide (``overlap_window_s``, ``exposed_comm_roofline_s``:
    docs/steps.md), when the program has collectives."""
    import numpy as np

    from hloscope.roofline.tables import nansum

    ops, modules = report.table("ops"), report.table("modules")
    opcode = column_list(ops, "opcode")
    comm = [i for i, c in enumerate(column_list(ops, "category"))
            if c == "collective" and not str(opcode[i]).endswith("-done")]
    if not comm or "exposed_comm_roofline_s" not in modules.columns:
        return
    total = nansum(column_array(ops, "roofline_s")[comm])
    exposed_each = column_array(modules, "exposed_comm_roofline_s")
    if np.isnan(exposed_each).all():  # (Series.sum(min_count=1): NaN when nothing is known)
        return
    exposed = nansum(exposed_each)
    windows = column_array(ops, "overlap_window_s")
    windows = windows[~np.isnan(windows)]
    line = (f"communication at the roof: {_time(total)}, of which {_time(exposed)} exposed by the schedule "
            f"({len(comm) - len(windows)} synchronous collective(s) hide nothing")
    line += (f"; {len(windows)} async collective(s) have {_time(float(windows.sum()))} of work scheduled between start "
             "and done)" if len(windows) else ")")
    console.print(literal(line))


def _render_devices(console: Any, report: Report) -> None:
    """The per-host/per-device table of a run of several hosts (medians over steps), latest-ready first."""
    from rich.table import Table

    dev = report.per_device().sort_values("ready_s", ascending=False, kind="stable")
    t = Table(title=literal(f"devices ({len(dev)} on {report.steps['host'].nunique()} hosts; medians over steps, "
                            "latest-ready first)"))
    for col in ("device", "wall", "busy", "idle", "exposed comm", "late start", "ready"):
        t.add_column(col, justify="left" if col == "device" else "right")
    shown = dev.head(16)
    for r in shown.to_dict(orient="records"):
        t.add_row(literal(_device(r)), _time(r["wall_s"]), _time(r["busy_s"]), _time(r["idle_s"]),
                  _time(r["exposed_comm_s"]), _time(r["late_start_s"]), _time(r["ready_s"]))
    console.print(t)
    if len(dev) > len(shown):
        console.print(literal(f"({len(dev) - len(shown)} more devices in --format json: steps[])", "dim"))


def _device(r: dict[str, Any]) -> str:
    from hloscope.steps.summary import device_label

    return device_label(r["host"], r["device"], int(r["device_id"]), with_host=True)


def render_chips(chips: list[ChipSpec], file: IO[str] | None = None, width: int | None = None) -> None:
    """Print the chip table: peaks, HBM, links."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title="chips (dense peaks; bandwidths one direction)")
    for col in ("id", "name", "bf16", "f32", "int8", "HBM B/s", "HBM", "link B/s", "aliases"):
        table.add_column(col)
    for c in chips:
        peaks = c.peak_flops_per_s
        link = c.peer_link_bytes_per_s
        table.add_row(literal(c.id), literal(c.name), _si(peaks.get("bf16", math.nan), "FLOP/s"),
                      _si(peaks.get("f32", math.nan), "FLOP/s"), _si(peaks.get("int8", math.nan), "OP/s"),
                      _si(c.hbm_bytes_per_s, "B/s"), _si(c.hbm_capacity_bytes, "B"),
                      _si(link, "B/s") if link else "-", literal(", ".join(c.aliases[:3])))
    Console(file=file, width=width).print(table)
