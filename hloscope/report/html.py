"""The report as one self-contained HTML page: the roofline chart (inline SVG, drawn here), the module summary
and a sortable per-op table. No network at view time: no external script, style, font or image.

Everything that comes from the input -- op names, metadata, source paths, module names, notes, caveats -- is
untrusted (an HLO file is anyone's text; ``jax.named_scope`` puts any string in ``op_name``). It is written
only as escaped text or escaped attribute values (``html.escape(..., quote=True)``), never into the page's
script, whose only data is what it reads back with ``getAttribute`` / ``textContent``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from html import escape
from typing import TYPE_CHECKING

from hloscope.report._format import duration, si

if TYPE_CHECKING:
    import pandas as pd

    from hloscope.result import Report
    from hloscope.roofline.chips import ChipSpec

#: Chart area, in SVG user units.
WIDTH, HEIGHT = 860, 520
MARGIN_LEFT, MARGIN_RIGHT, MARGIN_TOP, MARGIN_BOTTOM = 80, 150, 20, 50
BOUND_COLORS = {"compute": "#2e7d32", "memory": "#ef6c00", "communication": "#8e24aa"}
OTHER_COLOR = "#757575"

#: Ops-table columns: (column, header, format).
TABLE_COLUMNS = [
    ("instruction", "instruction", "text"), ("opcode", "opcode", "text"), ("category", "category", "text"),
    ("op_name", "op_name", "text"), ("source", "source", "text"), ("executions", "executions", "num"),
    ("flops", "FLOPs", "si"), ("hbm_bytes", "HBM bytes", "bytes"), ("wire_bytes", "wire bytes", "bytes"),
    ("intensity", "FLOPs/byte", "num"), ("bound", "bound", "text"), ("roofline_s", "roofline", "time"),
    ("measured_s", "measured", "time"), ("efficiency", "efficiency", "pct"), ("caveats", "caveats", "text"),
]


@dataclass(frozen=True)
class LogAxes:
    """Log-log mapping of data (arithmetic intensity in FLOPs/byte, FLOP/s) to SVG coordinates.

    ``x_min..x_max`` and ``y_min..y_max`` (all > 0) span the plot area; y grows upwards in data, downwards in
    SVG.
    """

    x_min: float
    x_max: float
    y_min: float
    y_max: float

    def x(self, value: float) -> float:
        span = math.log10(self.x_max) - math.log10(self.x_min)
        return MARGIN_LEFT + (math.log10(value) - math.log10(self.x_min)) / span * (WIDTH - MARGIN_LEFT - MARGIN_RIGHT)

    def y(self, value: float) -> float:
        span = math.log10(self.y_max) - math.log10(self.y_min)
        return HEIGHT - MARGIN_BOTTOM - (math.log10(value) - math.log10(self.y_min)) / span * (
            HEIGHT - MARGIN_TOP - MARGIN_BOTTOM)


def roofs(chip: ChipSpec) -> list[tuple[str, float, float]]:
    """``(dtype, peak FLOP/s, ridge intensity)`` per compute roof of the chip, highest peak first.

    The roofline (Williams et al., CACM 2009; "How to Scale Your Model", Austin et al. 2025, ch. 1): attainable
    FLOP/s = min(peak, intensity x HBM bandwidth); the ridge -- the chip's critical intensity -- is where the
    two meet, ``peak / bandwidth`` FLOPs per byte (TPU v5e bf16: 1.97e14 / 8.1e11 = 243).
    """
    bw = chip.hbm_bytes_per_s
    by_peak: dict[float, list[str]] = {}
    for dtype, peak in chip.peak_flops_per_s.items():
        if peak > 0:
            by_peak.setdefault(peak, []).append(dtype)
    # dtypes sharing a peak (H100: fp8 and int8) share one roof, labelled with both.
    return [("/".join(dtypes), peak, peak / bw) for peak, dtypes in sorted(by_peak.items(), reverse=True)]


def points(ops: pd.DataFrame) -> pd.DataFrame:
    """The ops drawn: FLOPs > 0, finite intensity > 0 and a time > 0. Adds ``time_s`` (measured when the op was
    traced, else its roofline time) and ``flops_per_s`` = FLOPs / ``time_s`` -- achieved when measured, the
    roofline's attainable rate when static."""
    import numpy as np

    measured = ops["measured_s"].where(ops["measured_s"] > 0)
    time_s = measured.fillna(ops["roofline_s"])
    keep = (ops["flops"] > 0) & np.isfinite(ops["intensity"]) & (ops["intensity"] > 0) & (time_s > 0)
    out = ops[keep].copy()
    out["time_s"] = time_s[keep]
    out["flops_per_s"] = out["flops"] / out["time_s"]
    out["traced"] = measured[keep].notna()
    return out


def axes_for(chip: ChipSpec, pts: pd.DataFrame) -> LogAxes:
    """Axes spanning the roofs' ridges and every point, with half a decade of margin, on whole decades."""
    ridges = [r[2] for r in roofs(chip)]
    peaks = [r[1] for r in roofs(chip)]
    xs = ridges + list(pts["intensity"])
    ys = peaks + list(pts["flops_per_s"])
    x_min = 10 ** math.floor(math.log10(min(xs)) - 0.5)
    x_max = 10 ** math.ceil(math.log10(max(xs)) + 0.5)
    y_min = 10 ** math.floor(math.log10(min(ys)) - 0.5)
    y_max = 10 ** math.ceil(math.log10(max(ys)) + 0.3)
    return LogAxes(x_min, x_max, y_min, y_max)


def _chart(report: Report) -> str:
    chip = report.chip
    pts = points(report.ops)
    if not len(roofs(chip)):
        return "<p class=note>The chip has no peak FLOP/s: no roofline to draw.</p>"
    ax = axes_for(chip, pts)
    bw = chip.hbm_bytes_per_s
    parts = [f'<svg id=roofline xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT}" '
             f'width="{WIDTH}" height="{HEIGHT}" role="img" aria-label="roofline chart">']
    x0, x1 = ax.x(ax.x_min), ax.x(ax.x_max)
    y0, y1 = ax.y(ax.y_min), ax.y(ax.y_max)
    # Decade grid and labels.
    for e in range(round(math.log10(ax.x_min)), round(math.log10(ax.x_max)) + 1):
        x = ax.x(10.0 ** e)
        parts.append(f'<line class=grid x1="{x:.1f}" y1="{y0:.1f}" x2="{x:.1f}" y2="{y1:.1f}"/>'
                     f'<text class=tick x="{x:.1f}" y="{y0 + 16:.1f}" text-anchor=middle>1e{e}</text>')
    for e in range(round(math.log10(ax.y_min)), round(math.log10(ax.y_max)) + 1):
        y = ax.y(10.0 ** e)
        parts.append(f'<line class=grid x1="{x0:.1f}" y1="{y:.1f}" x2="{x1:.1f}" y2="{y:.1f}"/>'
                     f'<text class=tick x="{x0 - 6:.1f}" y="{y + 4:.1f}" text-anchor=end>1e{e}</text>')
    parts.append(f'<text class=axis x="{(x0 + x1) / 2:.1f}" y="{HEIGHT - 8}" text-anchor=middle>'
                 'arithmetic intensity (FLOPs / HBM byte)</text>'
                 f'<text class=axis transform="translate(16 {(y0 + y1) / 2:.1f}) rotate(-90)" text-anchor=middle>'
                 'FLOP/s</text>')
    # The HBM slope up to the highest ridge, then one flat roof per dtype from its own ridge.
    top_peak, top_ridge = roofs(chip)[0][1], roofs(chip)[0][2]
    slope_start = max(ax.x_min, ax.y_min / bw)
    parts.append(f'<line class=roof x1="{ax.x(slope_start):.1f}" y1="{ax.y(slope_start * bw):.1f}" '
                 f'x2="{ax.x(top_ridge):.1f}" y2="{ax.y(top_peak):.1f}"/>'
                 f'<text class=rooflabel x="{ax.x(slope_start) + 4:.1f}" y="{ax.y(slope_start * bw) - 6:.1f}">'
                 f'HBM {escape(si(bw, "B/s"))}</text>')
    for dtype, peak, ridge in roofs(chip):
        parts.append(f'<line class=roof data-dtype="{escape(dtype)}" data-ridge="{ridge:.6g}" '
                     f'x1="{ax.x(ridge):.1f}" y1="{ax.y(peak):.1f}" x2="{x1:.1f}" y2="{ax.y(peak):.1f}"/>'
                     f'<text class=rooflabel x="{x1 + 4:.1f}" y="{ax.y(peak) + 4:.1f}">'
                     f'{escape(dtype)} {escape(si(peak, "FLOP/s"))}</text>')
    # Points, largest first so small ones stay on top.
    if len(pts):
        t_max = float(pts["time_s"].max())
        for _, p in pts.sort_values("time_s", ascending=False).iterrows():
            r = 3.0 + 14.0 * math.sqrt(p["time_s"] / t_max)
            color = BOUND_COLORS.get(p["bound"], OTHER_COLOR)
            tip = (f'{p["instruction"]} ({p["opcode"]})\nop_name: {p["op_name"] or "-"}\n'
                   f'source: {p["source"] or "-"}\n'
                   f'{"measured" if p["traced"] else "roofline"} time: {duration(p["time_s"])}\n'
                   f'FLOPs: {si(p["flops"], "")}  HBM bytes: {si(p["hbm_bytes"], "B")}\n'
                   f'intensity: {p["intensity"]:.3g} FLOPs/byte  bound: {p["bound"]}')
            parts.append(f'<circle class=op cx="{ax.x(p["intensity"]):.1f}" cy="{ax.y(p["flops_per_s"]):.1f}" '
                         f'r="{r:.1f}" fill="{color}" data-tip="{escape(tip)}"><title>{escape(tip)}</title>'
                         '</circle>')
    # Legend.
    ly = MARGIN_TOP + 10
    for name, color in (*BOUND_COLORS.items(), ("other", OTHER_COLOR)):
        parts.append(f'<circle cx="{x1 + 12:.1f}" cy="{HEIGHT - MARGIN_BOTTOM - 70 + ly:.1f}" r=5 fill="{color}"/>'
                     f'<text class=tick x="{x1 + 22:.1f}" y="{HEIGHT - MARGIN_BOTTOM - 66 + ly:.1f}">{name}</text>')
        ly += 16
    parts.append("</svg>")
    if not len(pts):
        parts.append("<p class=note>No op has FLOPs and a time to plot.</p>")
    return "".join(parts)


#: The stacked bar of a step, bottom to top: (steps-table column, legend, color). They add up to the mean wall
#: time over devices (``hloscope.steps.summary.across_devices``).
STEP_PARTS = [("compute_s", "compute-bound", BOUND_COLORS["compute"]),
              ("memory_s", "memory-bound", BOUND_COLORS["memory"]),
              ("exposed_comm_s", "exposed communication", BOUND_COLORS["communication"]),
              ("other_s", "other (unknown bound, control)", OTHER_COLOR), ("idle_s", "idle", "#d6d6d6")]
STEPS_HEIGHT = 260


def _steps_chart(report: Report) -> str:
    """Each step as a stacked bar (``STEP_PARTS``), one per step in time order, hovering gives the numbers."""
    from hloscope.steps.summary import across_devices

    if report.steps is None or not len(report.steps):
        return ""
    per = across_devices(report.steps)
    plot_w, plot_h = WIDTH - MARGIN_LEFT - MARGIN_RIGHT, STEPS_HEIGHT - MARGIN_TOP - MARGIN_BOTTOM
    total = per[[c for c, _, _ in STEP_PARTS]].sum(axis=1)
    top = float(total.max()) or 1.0
    slot = plot_w / len(per)
    bar = max(min(slot * 0.8, 60.0), 1.0)
    parts = [f'<svg id=steps xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {STEPS_HEIGHT}" '
             f'width="{WIDTH}" height="{STEPS_HEIGHT}" role="img" aria-label="time per step">']
    for frac in (0.0, 0.5, 1.0):
        y = MARGIN_TOP + plot_h * (1 - frac)
        parts.append(f'<line class=grid x1="{MARGIN_LEFT}" x2="{MARGIN_LEFT + plot_w}" y1="{y:.1f}" y2="{y:.1f}"/>'
                     f'<text class=tick x="{MARGIN_LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">'
                     f'{escape(duration(top * frac))}</text>')
    for k, r in enumerate(per.to_dict(orient="records")):
        x = MARGIN_LEFT + k * slot + (slot - bar) / 2
        y = MARGIN_TOP + plot_h
        label = f"step {r['step']}" + (f" {r['module']}" if r["module"] else "") + (" (first)" if r["first"] else "")
        tip = "\n".join([f"{label}: wall {duration(r['wall_s'])} (longest device)"] + [
            f"{name}: {duration(r[c])}" for c, name, _ in STEP_PARTS] + [
            f"communication hidden under other work: {duration(r['overlapped_comm_s'])}",
            f"roofline: {duration(r['roofline_s'])}"])
        for col, _, color in STEP_PARTS:
            h = max(float(r[col]), 0.0) / top * plot_h
            if h <= 0:
                continue
            y -= h
            parts.append(f'<rect class=seg x="{x:.1f}" y="{y:.1f}" width="{bar:.1f}" height="{h:.2f}" '
                         f'fill="{color}" data-tip="{escape(tip, quote=True)}"/>')
        if len(per) <= 40 or k % max(len(per) // 20, 1) == 0:
            parts.append(f'<text class=tick x="{x + bar / 2:.1f}" y="{MARGIN_TOP + plot_h + 14}" '
                         f'text-anchor="middle">{escape(str(r["step"]))}</text>')
    for i, (_, name, color) in enumerate(STEP_PARTS):
        y = MARGIN_TOP + 14 * i
        parts.append(f'<rect x="{MARGIN_LEFT + plot_w + 12}" y="{y}" width="10" height="10" fill="{color}"/>'
                     f'<text class=tick x="{MARGIN_LEFT + plot_w + 26}" y="{y + 9}">{escape(name)}</text>')
    parts.append(f'<text class=axis x="{MARGIN_LEFT + plot_w / 2}" y="{STEPS_HEIGHT - 12}" text-anchor="middle">'
                 "step (mean over devices)</text></svg>")
    return "".join(parts)


def _advice(report: Report) -> str:
    """The advice panel: one row per piece of advice, largest gain first (``Report.advice``)."""
    table = report.advice
    if not len(table):
        return "<p class=note>None of the advice rules applies (docs/advice.md).</p>"
    rows = "".join(
        "<tr>" + f"<td class=n>{escape(duration(r['gain_s']))}</td>" + "".join(
            f"<td>{escape(str(r[c]))}</td>" for c in ("rule", "ops", "evidence", "action", "source")) + "</tr>"
        for r in table.to_dict(orient="records"))
    return ("<table class=advice><tr><th>gain (at most)</th><th>rule</th><th>ops</th><th>evidence</th><th>do</th>"
            f"<th>source</th></tr>{rows}</table>")


def _cell(value, fmt: str) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return '<td data-v="">-</td>'
    if fmt == "text":
        return f'<td data-v="{escape(str(value))}">{escape(str(value))}</td>'
    shown = {"si": lambda v: si(v, ""), "bytes": lambda v: si(v, "B"), "time": duration,
             "pct": lambda v: f"{v:.1%}", "num": lambda v: f"{v:.4g}"}[fmt](float(value))
    return f'<td class=n data-v="{float(value)!r}">{escape(shown)}</td>'


def _percent(value: float) -> str:
    return "-" if value is None or math.isnan(value) else f"{value:.1%}"


def _modules(report: Report) -> str:
    rows = []
    traced = report.modules["measured_s"].notna().any()
    for _, m in report.modules.iterrows():
        time_s = m["measured_s"] if traced else m["roofline_s"]
        rows.append("<tr>" + "".join([
            f"<td>{escape(str(m['name']))}</td>", f"<td class=n>{escape(duration(time_s))}</td>",
            f"<td class=n>{escape(duration(m['roofline_s']))}</td>",
            f"<td class=n>{escape(si(m['flops'], ''))}</td>", f"<td class=n>{escape(si(m['hbm_bytes'], 'B'))}</td>",
            f"<td class=n>{escape(si(m['wire_bytes'], 'B'))}</td>",
            f"<td class=n>{_percent(m['mfu'])}</td>",
            f"<td class=n>{escape(duration(m['compute_bound_s']))}</td>",
            f"<td class=n>{escape(duration(m['memory_bound_s']))}</td>",
            f"<td class=n>{escape(duration(m['communication_bound_s']))}</td>",
            f"<td>{escape(str(m['caveats'] or ''))}</td>"]) + "</tr>")
    head = ("<tr><th>module</th><th>" + ("measured" if traced else "roofline") + " time</th><th>roofline</th>"
            "<th>FLOPs</th><th>HBM bytes</th><th>wire bytes</th><th>MFU</th><th>compute-bound</th>"
            "<th>memory-bound</th><th>comm-bound</th><th>caveats</th></tr>")
    return f"<table class=summary>{head}{''.join(rows)}</table>"


def _ops_table(ops: pd.DataFrame, top: int | None) -> str:
    shown = ops if top is None else ops.head(top)
    head = "".join(f'<th data-kind="{"text" if f == "text" else "num"}">{escape(h)}</th>' for _, h, f in TABLE_COLUMNS)
    body = []
    for rec in shown.to_dict(orient="records"):
        body.append("<tr>" + "".join(_cell(rec.get(c), f) for c, _, f in TABLE_COLUMNS) + "</tr>")
    more = "" if top is None or len(ops) <= top else f"<p class=note>{len(ops) - top} more ops not shown.</p>"
    return f"<table id=ops class=ops><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>{more}"


_STYLE = """
body{font:14px system-ui,sans-serif;margin:24px;color:#222}h1{font-size:20px}h2{font-size:16px;margin-top:28px}
table{border-collapse:collapse;font-size:12px}td,th{border:1px solid #ddd;padding:3px 6px;text-align:left}
td.n{text-align:right;font-variant-numeric:tabular-nums}th{background:#f4f4f4;cursor:pointer;position:sticky;top:0}
.grid{stroke:#eee}.tick{font-size:11px;fill:#555}.axis{font-size:12px;fill:#333}.roof{stroke:#111;stroke-width:2}
.rooflabel{font-size:11px;fill:#111}circle.op{fill-opacity:.55;stroke:#222;stroke-width:.6}
circle.op:hover{fill-opacity:.95;stroke-width:2}rect.seg:hover{stroke:#222}.note{color:#666}
#tip{position:fixed;display:none;background:#fff;border:1px solid #999;padding:6px 8px;font-size:12px;
white-space:pre;pointer-events:none;box-shadow:0 2px 6px rgba(0,0,0,.2)}
"""

# The page's only script: hover tooltips from data-tip attributes, sorting on data-v, a ready marker.
_SCRIPT = """
window.onerror=function(m){document.title='hloscope-error: '+m;};
(function(){
var tip=document.getElementById('tip');
document.querySelectorAll('circle.op,rect.seg').forEach(function(c){
 c.addEventListener('mousemove',function(e){tip.textContent=c.getAttribute('data-tip');tip.style.display='block';
  tip.style.left=(e.clientX+14)+'px';tip.style.top=(e.clientY+14)+'px';});
 c.addEventListener('mouseleave',function(){tip.style.display='none';});});
var table=document.getElementById('ops');
if(table){table.querySelectorAll('th').forEach(function(th,i){th.addEventListener('click',function(){
 var num=th.getAttribute('data-kind')==='num',asc=th.getAttribute('data-asc')!=='1';
 th.setAttribute('data-asc',asc?'1':'0');var body=table.tBodies[0];
 var rows=Array.prototype.slice.call(body.rows);
 rows.sort(function(a,b){var x=a.cells[i].getAttribute('data-v'),y=b.cells[i].getAttribute('data-v');
  if(num){x=x===''?-Infinity:parseFloat(x);y=y===''?-Infinity:parseFloat(y);return asc?x-y:y-x;}
  return asc?x.localeCompare(y):y.localeCompare(x);});
 rows.forEach(function(r){body.appendChild(r);});});});}
document.body.setAttribute('data-ready','1');
})();
"""


def render_html(report: Report, *, title: str | None = None, top: int | None = None) -> str:
    """The report as one self-contained HTML document (UTF-8 text).

    Args:
        report: from ``hloscope.analyze``.
        title: page title (escaped); default ``hloscope - <chip id>``.
        top: rows of the per-op table (largest time first, as ``report.ops`` is sorted); None for all. The
            chart always shows every plottable op.

    Returns:
        The page: the roofline chart of ``report.chip`` -- log-log, attainable FLOP/s against arithmetic
        intensity, one flat compute roof per dtype of the chip's peak table and the HBM slope, one point per
        op with FLOPs (at its intensity and FLOPs / time: measured time when traced, roofline time when
        static), area proportional to that time, colored by bound class, hovering names the op, its op_name
        and source line -- then the per-module summary, for a trace with steps each step as a stacked bar
        (compute, memory, exposed communication, other, idle), coverage and notes, and the sortable op table.
    """
    chip = report.chip
    title = title or f"hloscope - {chip.id}"
    coverage = ", ".join(f"{k}: {v:.3g}" if isinstance(v, float) else f"{k}: {v}"
                         for k, v in report.coverage.items() if k != "files")
    notes = "".join(f"<li>{escape(str(n))}</li>" for n in report.notes)
    return "".join([
        "<!DOCTYPE html><html lang=en><head><meta charset=utf-8>",
        f"<title>{escape(title)}</title><style>{_STYLE}</style></head><body>",
        f"<h1>{escape(title)}</h1>",
        f"<p>chip <strong>{escape(chip.id)}</strong> ({escape(chip.name)}): HBM {escape(si(chip.hbm_bytes_per_s, 'B/s'))}; "
        + "; ".join(f"{escape(d)} {escape(si(p, 'FLOP/s'))} (ridge {r:.0f} FLOPs/byte)" for d, p, r in roofs(chip))
        + "</p>",
        _chart(report), "<div id=tip></div>",
        "<h2>Modules (per step / run)</h2>", _modules(report),
        *(["<h2>Steps</h2>", _steps_chart(report)] if report.steps is not None and len(report.steps) else []),
        "<h2>Advice</h2>", _advice(report),
        f"<p class=note>{escape(coverage)}</p>" if coverage else "",
        f"<ul class=note>{notes}</ul>" if notes else "",
        "<h2>Ops</h2><p class=note>Click a column header to sort.</p>", _ops_table(report.ops, top),
        f"<script>{_SCRIPT}</script></body></html>\n",
    ])
