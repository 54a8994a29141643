"""Presentation of a ``hloscope.compare.Diff``: the rich table, the HTML page and what ``hloscope diff --format``
writes. The comparison itself (matching, deltas, rules, verdict) is ``hloscope.compare``; loading the two sides
is the front ends' (``hloscope.diff``, the CLI). Every string from the inputs reaches rich as ``rich.text.Text``
(never read as markup or emoji codes) and HTML escaped.
"""

from __future__ import annotations

import math
from typing import IO, TYPE_CHECKING

from hloscope.compare.engine import MODULE_FIELDS
from hloscope.units import duration, percent, si, signed

if TYPE_CHECKING:
    import pandas as pd

    from hloscope.compare import Diff

__all__ = ["render_diff_table", "render_diff_html", "diff_command_output"]


def _missing(value: object) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _fmt(f: str, value: float) -> str:
    if f.endswith("_s"):
        return duration(value)
    if f in ("mfu", "cost_coverage"):
        return "-" if _missing(value) else f"{value:.1%}"
    if f == "executions":
        return "-" if _missing(value) else f"{value:g}"
    return si(value, "B" if "bytes" in f else ("FLOP" if f == "flops" else ""))


def _title(m: dict | pd.Series) -> str:
    """``module X``, ``module A -> B`` (paired under other names), ``module X (only in A)``."""
    a, b = str(m["module_a"]), str(m["module_b"])
    if not b:
        return f"module {a} (only in A)"
    if not a:
        return f"module {b} (only in B)"
    return f"module {a}" + ("" if a == b else f" -> {b}")


def _op_cell(instruction: str, shape: str) -> str:
    return f"{instruction} {shape}".strip() or "-"


def _tail(text: str, width: int) -> str:
    """The end of a long framework op name (its most specific part)."""
    return text if len(text) <= width else "…" + text[-(width - 1):]


def _sections(d: Diff, top: int) -> list[tuple[str, pd.DataFrame]]:
    ops = d.ops
    comm = ops[(ops["comm_kind"] != "") & (ops["wire_bytes_delta"].abs() > 0)]
    return [
        ("slower", ops[ops["status"] == "slower"].head(top)),
        ("faster", ops[ops["status"] == "faster"].head(top)),
        ("appeared", ops[ops["status"] == "appeared"].head(top)),
        ("vanished", ops[ops["status"] == "vanished"].head(top)),
        ("bound class changed", ops[ops["bound_changed"]].head(top)),
        ("collectives whose wire bytes changed", comm.head(top)),
    ]


def render_diff_table(d: Diff, file: IO[str] | None = None, top: int = 25, width: int | None = None) -> None:
    """Print the diff with rich: module totals (A, B, change), then the ops that got slower, faster,
    appeared, vanished, changed bound class, and the collectives whose wire bytes changed.

    Args:
        d: the diff.
        file: where to print (default stdout; 200 columns when not a terminal).
        top: ops shown per section, largest ``|time_delta|`` first.
        width: console width in characters (default: the terminal's, or 200).

    Times are per module run (seconds, shown with SI prefixes), bytes in B/kB/MB, FLOPs counted; "change" is
    (B - A) / A.
    """
    import sys

    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    piped = file is not None or not sys.stdout.isatty()
    console = Console(file=file, width=width or (200 if piped else None))
    console.print(Text(f"hloscope diff - chip {d.chip.id}\n  A: {d.a_label}\n  B: {d.b_label}"))
    for note in d.notes:
        console.print(Text(f"note: {note}"))
    for _, m in d.modules.iterrows():
        t = Table(title=Text(_title(m)))
        for col in ("field", "A", "B", "change"):
            t.add_column(col, justify="left" if col == "field" else "right")
        for f in MODULE_FIELDS:
            t.add_row(f, _fmt(f, m[f"{f}_a"]), _fmt(f, m[f"{f}_b"]), percent(m[f"{f}_rel"]))
        console.print(t)
    counts = d.ops["status"].value_counts()
    console.print(Text(", ".join(f"{k}: {v}" for k, v in counts.items()) + (" - no change" if not d.changed else "")))
    for title, rows in _sections(d, top):
        if rows.empty:
            continue
        t = Table(title=title)
        for col in ("op_name", "opcode", "A", "B", "time A", "time B", "change", "FLOPs Δ", "HBM bytes Δ",
                    "wire bytes B (Δ)", "bound"):
            t.add_column(col, overflow="fold")
        for _, r in rows.iterrows():
            t.add_row(Text(_tail(str(r["op_name"]), 60) or "-"), Text(str(r["opcode"])),
                      Text(_op_cell(r["instruction_a"], r["result_shape_a"])),
                      Text(_op_cell(r["instruction_b"], r["result_shape_b"])),
                      duration(r["time_a"]), duration(r["time_b"]),
                      percent((r["time_b"] - r["time_a"]) / r["time_a"] if r["time_a"] else math.nan),
                      signed(r["flops_delta"], ""), signed(r["hbm_bytes_delta"], "B"),
                      si(r["wire_bytes_b"], "B")
                      + (f" ({signed(r['wire_bytes_delta'], 'B')})" if r["wire_bytes_delta"] else ""),
                      Text(str(r["bound_a"]) if r["bound_a"] == r["bound_b"] else f"{r['bound_a']} -> {r['bound_b']}"))
        console.print(t)


def render_diff_html(d: Diff, top: int = 200) -> str:
    """The diff as one self-contained HTML page (module totals and the sections of the table form, ``top``
    ops per section); every value from the inputs (labels, notes, op names, shapes) is ``html.escape``d, so a
    hostile framework op name arrives as text. No scripts, no external resources."""
    from html import escape

    parts = ["<!DOCTYPE html><html lang=en><head><meta charset=utf-8><title>hloscope diff</title><style>",
             ("body{font:14px system-ui,sans-serif;margin:24px}table{border-collapse:collapse;font-size:12px;"
              "margin-bottom:16px}td,th{border:1px solid #ddd;padding:3px 6px}th{background:#f4f4f4}</style>"
              "</head><body><h1>hloscope diff</h1>"),
             f"<p>chip {escape(d.chip.id)}<br>A: {escape(d.a_label)}<br>B: {escape(d.b_label)}</p>"]
    parts += [f"<p>{escape(n)}</p>" for n in d.notes]
    for _, m in d.modules.iterrows():
        parts.append(f"<h2>{escape(_title(m))}</h2><table><tr><th>field</th><th>A</th><th>B</th>"
                     "<th>change</th></tr>")
        for f in MODULE_FIELDS:
            parts.append(f"<tr><td>{f}</td><td>{escape(_fmt(f, m[f + '_a']))}</td><td>{escape(_fmt(f, m[f + '_b']))}"
                         f"</td><td>{escape(percent(m[f + '_rel']))}</td></tr>")
        parts.append("</table>")
    for title, rows in _sections(d, top):
        if rows.empty:
            continue
        parts.append(f"<h2>{escape(title)}</h2><table><tr><th>op_name</th><th>opcode</th><th>A</th><th>B</th>"
                     "<th>time A</th><th>time B</th><th>wire bytes A</th><th>wire bytes B</th><th>bound</th></tr>")
        for _, r in rows.iterrows():
            cells = [r["op_name"], r["opcode"], f"{r['instruction_a']} {r['result_shape_a']}",
                     f"{r['instruction_b']} {r['result_shape_b']}", duration(r["time_a"]), duration(r["time_b"]),
                     si(r["wire_bytes_a"], "B"), si(r["wire_bytes_b"], "B"), f"{r['bound_a']} -> {r['bound_b']}"]
            parts.append("<tr>" + "".join(f"<td>{escape(str(c))}</td>" for c in cells) + "</tr>")
        parts.append("</table>")
    parts.append("</body></html>\n")
    return "".join(parts)


def diff_command_output(d: Diff, fmt: str, top: int = 25) -> str:
    """What ``hloscope diff --format FMT`` writes: ``"json"`` (``Diff.to_json()`` plus a newline), ``"html"``
    (``render_diff_html``) or ``"table"`` (``render_diff_table`` into a string, 200 columns wide, ``top`` ops
    per section).

    Raises:
        ValueError: an unknown format.
    """
    if fmt == "json":
        return d.to_json() + "\n"
    if fmt == "html":
        return render_diff_html(d)
    if fmt == "table":
        from io import StringIO

        buf = StringIO()
        render_diff_table(d, file=buf, top=top)
        return buf.getvalue()
    raise ValueError(f"unknown diff format {fmt!r}: expected table, json or html")
