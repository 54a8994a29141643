"""``hloscope diff``: two reports compared op by op and module by module, and rules that fail a CI build.

Matching (XLA renumbers instruction names from one compile to the next, so names are no identity):

1. Modules pair by name; when each side has exactly one module they pair whatever their names.
2. Within a module pair, ops pair by ``(op_name, opcode, shape)`` -- the framework op name from the HLO
   metadata, the opcode and the result shape. Several ops sharing a key (XLA copies without an op name, the
   same layer's ops repeated) pair in order of roofline time, then FLOPs, largest first.
3. Ops left over pair by ``(op_name, opcode)``: the same op with another shape (a resharded program's
   per-device shapes change), marked ``reshaped``.
4. What is still left over ``appeared`` (only in B) or ``vanished`` (only in A). Trace ops that name no
   instruction (``unjoined``) pair by their name.

Fields compared (totals per module run, or per step for traces): ``roofline_s``, ``measured_s``, ``flops``,
``bytes_accessed``, ``comm_bytes``, ``count``; for each ``<f>_a``, ``<f>_b``, ``<f>_delta`` (B - A) and
``<f>_rel`` (delta / A; NaN when A is 0). ``time`` is measured time where both sides have it, else roofline
time; an op is ``slower`` or ``faster`` by it, ``unchanged`` when no field moved by more than 1e-9 relative.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import IO, TYPE_CHECKING, Any

from hloscope.report._format import duration, si

if TYPE_CHECKING:
    import pandas as pd

    from hloscope.result import Report
    from hloscope.roofline.chips import ChipSpec

SCHEMA = "hloscope.diff/1"
#: Op fields compared, in order.
FIELDS = ("roofline_s", "measured_s", "flops", "bytes_accessed", "comm_bytes", "count")
#: Module fields compared and the ones ``--fail-on`` rules may name.
MODULE_FIELDS = ("roofline_s", "measured_s", "flops", "transcendentals", "bytes_accessed", "comm_bytes",
                 "compute_s", "memory_s", "comm_s", "mfu")
_KEY_COLUMNS = ("op_name", "opcode", "shape")
#: The columns of ``Diff.ops``, in order.
OP_DIFF_COLUMNS = [
    "module", "op_name", "opcode", "category", "instruction_a", "instruction_b", "shape_a", "shape_b",
    "bound_a", "bound_b", "comm_kind",
    *(f"{f}_{s}" for f in FIELDS for s in ("a", "b", "delta", "rel")),
    "time_a", "time_b", "time_delta", "reshaped", "bound_changed", "status",
]
_SAME = 1e-9


@dataclass(frozen=True)
class Rule:
    """A ``--fail-on`` rule: fail when a module total's change passes ``threshold``.

    ``field`` is one of ``MODULE_FIELDS``; ``direction`` +1 (fail on increase) or -1 (fail on decrease);
    ``threshold`` is a fraction of A's value when ``relative``, else in the field's unit.
    """

    field: str
    direction: int
    threshold: float
    relative: bool
    text: str


_RULE = re.compile(r"^\s*([a-z_]+)\s*:\s*([+-]?)\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*(%?)\s*$")


def parse_rules(texts: Iterable[str]) -> list[Rule]:
    """Parse ``--fail-on`` rules: ``FIELD:[+|-]NUMBER[%]``.

    ``roofline_s:+5%`` fails when a module's roofline time grows by more than 5%; ``flops:-10%`` when its FLOPs
    shrink by more than 10%; ``comm_bytes:+0`` when its wire bytes grow at all (absolute, in bytes); no sign
    means ``+``. The syntax follows pytest-benchmark's ``--benchmark-compare-fail=EXPR`` (``min:5%`` relative,
    ``mean:0.001`` absolute), with a sign for the direction.

    Raises:
        ValueError: a rule that does not parse or names an unknown field (the message gives the syntax).
    """
    rules = []
    for text in texts:
        m = _RULE.match(text)
        if m is None or m.group(1) not in MODULE_FIELDS:
            raise ValueError(f"bad --fail-on rule {text!r}: expected FIELD:[+|-]NUMBER[%], e.g. roofline_s:+5% "
                             f"or comm_bytes:+0, with FIELD one of {', '.join(MODULE_FIELDS)}")
        name, sign, number, pct = m.groups()
        value = float(number)
        rules.append(Rule(name, -1 if sign == "-" else 1, value / 100 if pct else value, bool(pct), text.strip()))
    return rules


@dataclass
class Diff:
    """Result of :func:`diff`.

    Attributes:
        a_label, b_label: where A and B came from.
        ops: one row per op pair or unpaired op: ``module``, ``op_name``, ``opcode``, ``category``,
            ``instruction_a``/``_b``, ``shape_a``/``_b``, ``bound_a``/``_b``, ``comm_kind``, ``status``
            (``unchanged``, ``slower``, ``faster``, ``changed`` (work moved, time not), ``appeared``,
            ``vanished``), ``reshaped``, ``bound_changed``, ``time_a``/``_b``/``_delta``, and per field of
            ``FIELDS`` ``_a``, ``_b``, ``_delta``, ``_rel``. Sorted by ``|time_delta|``, largest first.
        modules: one row per module pair: ``module_a``, ``module_b``, and per field of ``MODULE_FIELDS``
            ``_a``, ``_b``, ``_delta``, ``_rel``.
        chip: the chip both sides were scored against (A's).
    """

    a_label: str
    b_label: str
    ops: pd.DataFrame
    modules: pd.DataFrame
    chip: ChipSpec
    notes: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        """Whether any op or module total differs."""
        return bool((self.ops["status"] != "unchanged").any())

    def check(self, rules: Iterable[Rule | str]) -> list[str]:
        """The rules broken, one line each (empty when none).

        Rules apply to each module pair's totals (``.modules``), not to single ops. A rule on a field one side
        lacks (``measured_s`` of a static report) is broken, never skipped silently. A change within 1e-9
        relative of the values (float summation noise) never breaks a rule, so ``flops:+0`` fails only on a
        real increase.

        Args:
            rules: ``Rule`` objects or rule strings (``parse_rules`` syntax).

        Raises:
            ValueError: a rule string that does not parse.
        """
        parsed = [r if isinstance(r, Rule) else parse_rules([r])[0] for r in rules]
        broken = []
        for rule in parsed:
            for _, m in self.modules.iterrows():
                a, b = m[f"{rule.field}_a"], m[f"{rule.field}_b"]
                where = m["module_b"] if m["module_a"] == m["module_b"] else f"{m['module_a']} -> {m['module_b']}"
                if _missing(a) or _missing(b):
                    broken.append(f"{rule.text}: {where}: {rule.field} is not known on both sides")
                    continue
                change = (b - a) / a if rule.relative and a else (b - a)
                if rule.relative and not a:
                    change = math.inf if b > 0 else (-math.inf if b < 0 else 0.0)
                noise = _SAME if rule.relative else _SAME * max(abs(a), abs(b))
                if change * rule.direction > rule.threshold + noise:
                    shown = f"{change:+.2%}" if rule.relative else f"{change:+.6g}"
                    broken.append(f"{rule.text}: {where}: {rule.field} {a:.6g} -> {b:.6g} ({shown})")
        return broken

    def to_dict(self) -> dict[str, Any]:
        """The JSON document (schema ``hloscope.diff/1``): ``schema``, ``a``, ``b`` (labels), ``chip`` (id),
        ``summary`` (status -> number of ops), ``modules`` and ``ops`` (rows of the DataFrames; NaN as None),
        ``notes``."""
        from hloscope.result.report import _records

        counts = self.ops["status"].value_counts().to_dict()
        return {"schema": SCHEMA, "a": self.a_label, "b": self.b_label, "chip": self.chip.id,
                "summary": {k: int(v) for k, v in counts.items()}, "modules": _records(self.modules),
                "ops": _records(self.ops), "notes": self.notes}

    def to_json(self, indent: int | None = 1) -> str:
        """The diff as JSON (schema ``hloscope.diff/1``, fields as in the DataFrames; NaN as null)."""
        return json.dumps(self.to_dict(), indent=indent, allow_nan=False)


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def load_side(source: Any, chip: str | ChipSpec | None = None) -> tuple[Report, str]:
    """``(report, label)`` of one side.

    Args:
        source: a ``Report`` (label ``"<report>"``); a path ending in ``.json`` to a report JSON file
            (``hloscope.report/1``, read back with its own chip); or anything ``hloscope.analyze`` takes (HLO
            text file, XLA dump dir, profile dir, ``Compiled``), scored against ``chip``.
        chip: chip id or spec for inputs that ``analyze``.

    Raises:
        ValueError: a JSON file that is not a report, or any error ``hloscope.analyze`` raises.
    """
    from pathlib import Path

    from hloscope.analysis import analyze
    from hloscope.result import Report, load_report

    if isinstance(source, Report):
        return source, "<report>"
    if isinstance(source, (str, Path)) and str(source).endswith(".json") and Path(source).is_file():
        return load_report(source), str(source)
    label = str(source) if isinstance(source, (str, Path)) else type(source).__name__
    return analyze(source, chip), label


def _module_pairs(a: Report, b: Report) -> list[tuple[str, str]]:
    names_a, names_b = list(a.modules["name"]), list(b.modules["name"])
    if len(names_a) == 1 and len(names_b) == 1:
        return [(names_a[0], names_b[0])]
    return [(n, n) for n in names_a if n in set(names_b)]


def _keyed(ops: pd.DataFrame) -> pd.DataFrame:
    out = ops.copy()
    unjoined = out["category"] == "unjoined"
    out.loc[unjoined, "op_name"] = out.loc[unjoined, "instruction"]  # a trace op's only identity is its name
    out = out.sort_values(["roofline_s", "flops"], ascending=False, na_position="last", kind="stable")
    return out


def _pair(a: pd.DataFrame, b: pd.DataFrame, key: list[str]) -> tuple[list[tuple[int, int]], pd.DataFrame,
                                                                      pd.DataFrame]:
    """Pair rows with equal ``key`` in order (k-th with k-th); return pairs of index labels and leftovers."""
    a = a.assign(_k=a.groupby(key, sort=False).cumcount())
    b = b.assign(_k=b.groupby(key, sort=False).cumcount())
    merged = a.reset_index().merge(b.reset_index(), on=[*key, "_k"], suffixes=("_a", "_b"))
    pairs = list(zip(merged["index_a"], merged["index_b"]))
    return pairs, a.drop(index=merged["index_a"]).drop(columns="_k"), b.drop(index=merged["index_b"]).drop(columns="_k")


def _time(row: pd.Series | None, both_measured: bool) -> float:
    if row is None:
        return 0.0
    return float(row["measured_s"]) if both_measured else float(row["roofline_s"])


def _op_row(module: str, ra: pd.Series | None, rb: pd.Series | None, both_measured: bool) -> dict[str, Any]:
    ref = rb if rb is not None else ra
    out: dict[str, Any] = {
        "module": module, "op_name": ref["op_name"], "opcode": ref["opcode"], "category": ref["category"],
        "instruction_a": ra["instruction"] if ra is not None else "",
        "instruction_b": rb["instruction"] if rb is not None else "",
        "shape_a": ra["shape"] if ra is not None else "", "shape_b": rb["shape"] if rb is not None else "",
        "bound_a": ra["bound"] if ra is not None else "", "bound_b": rb["bound"] if rb is not None else "",
        "comm_kind": ref["comm_kind"] or (ra["comm_kind"] if ra is not None else ""),
    }
    moved = False
    for f in FIELDS:
        va = float(ra[f]) if ra is not None else 0.0
        vb = float(rb[f]) if rb is not None else 0.0
        delta = vb - va
        out[f"{f}_a"], out[f"{f}_b"], out[f"{f}_delta"] = va, vb, delta
        out[f"{f}_rel"] = delta / va if va else math.nan
        if not (math.isnan(delta) or abs(delta) <= _SAME * max(abs(va), abs(vb))):
            moved = True
    ta, tb = _time(ra, both_measured), _time(rb, both_measured)
    out["time_a"], out["time_b"], out["time_delta"] = ta, tb, tb - ta
    out["reshaped"] = ra is not None and rb is not None and ra["shape"] != rb["shape"]
    out["bound_changed"] = ra is not None and rb is not None and ra["bound"] != rb["bound"]
    if ra is None:
        status = "appeared"
    elif rb is None:
        status = "vanished"
    elif not moved and not out["reshaped"] and not out["bound_changed"]:
        status = "unchanged"
    elif abs(tb - ta) > _SAME * max(abs(ta), abs(tb)):
        status = "slower" if tb > ta else "faster"
    else:
        status = "changed"
    out["status"] = status
    return out


def diff(a: Any, b: Any, *, chip: str | ChipSpec | None = None) -> Diff:
    """Compare B against A (rules of matching and fields in the module docstring).

    Args:
        a, b: each a ``Report``, a report JSON file, an HLO text file, an XLA dump dir, a profile dir or
            anything else ``hloscope.analyze`` takes.
        chip: chip id or spec for sides that need one (HLO inputs); report JSON keeps its own.

    Returns:
        ``Diff`` with ``.ops`` and ``.modules`` DataFrames.

    Raises:
        ValueError: the sides were scored against different chips (compare like with like), or any error
            ``hloscope.analyze`` / ``load_report`` raise for a bad input.
    """
    import pandas as pd

    ra, label_a = load_side(a, chip)
    rb, label_b = load_side(b, chip)
    if ra.chip.id != rb.chip.id:
        raise ValueError(f"A was scored against {ra.chip.id!r} and B against {rb.chip.id!r}: pass --chip to "
                         "score both against one chip")
    rows = []
    module_rows = []
    notes = []
    pairs = _module_pairs(ra, rb)
    if not pairs:
        raise ValueError(f"no module of A ({', '.join(ra.modules['name'])}) is in B "
                         f"({', '.join(rb.modules['name'])}) and neither side has exactly one")
    for ma, mb in pairs:
        oa = _keyed(ra.ops[ra.ops["module"] == ma])
        ob = _keyed(rb.ops[rb.ops["module"] == mb])
        both_measured = bool(oa["measured_s"].notna().any() and ob["measured_s"].notna().any())
        exact, left_a, left_b = _pair(oa, ob, list(_KEY_COLUMNS))
        loose, left_a, left_b = _pair(left_a, left_b, ["op_name", "opcode"])
        for ia, ib in exact + loose:
            rows.append(_op_row(mb, oa.loc[ia], ob.loc[ib], both_measured))
        rows.extend(_op_row(mb, oa.loc[i], None, both_measured) for i in left_a.index)
        rows.extend(_op_row(mb, None, ob.loc[i], both_measured) for i in left_b.index)
        mod_a = ra.modules[ra.modules["name"] == ma].iloc[0]
        mod_b = rb.modules[rb.modules["name"] == mb].iloc[0]
        mrow: dict[str, Any] = {"module_a": ma, "module_b": mb}
        for f in MODULE_FIELDS:
            va, vb = float(mod_a[f]), float(mod_b[f])
            mrow[f"{f}_a"], mrow[f"{f}_b"], mrow[f"{f}_delta"] = va, vb, vb - va
            mrow[f"{f}_rel"] = (vb - va) / va if va else math.nan
        module_rows.append(mrow)
    unpaired = (set(ra.modules["name"]) - {p[0] for p in pairs}) | (set(rb.modules["name"]) - {p[1] for p in pairs})
    if unpaired:
        notes.append(f"modules on one side only, not compared: {', '.join(sorted(unpaired))}")
    ops = pd.DataFrame(rows, columns=OP_DIFF_COLUMNS)
    ops = ops.reindex(ops["time_delta"].abs().sort_values(ascending=False, kind="stable").index).reset_index(drop=True)
    return Diff(label_a, label_b, ops, pd.DataFrame(module_rows), ra.chip, notes)


# -- rendering ------------------------------------------------------------------------------------------------


def _pct(value: float) -> str:
    return "-" if _missing(value) else f"{value:+.1%}"


def _fmt(f: str, value: float) -> str:
    if f.endswith("_s"):
        return duration(value)
    if f == "mfu":
        return "-" if _missing(value) else f"{value:.1%}"
    if f == "count":
        return "-" if _missing(value) else f"{value:g}"
    return si(value, "B" if "bytes" in f else "")


def _signed(value: float, unit: str) -> str:
    return "0" if not value else ("+" if value > 0 else "") + si(value, unit)


def _tail(text: str, width: int) -> str:
    """The end of a long framework op name (its most specific part)."""
    return text if len(text) <= width else "…" + text[-(width - 1):]


def _sections(d: Diff, top: int) -> list[tuple[str, pd.DataFrame]]:
    ops = d.ops
    comm = ops[(ops["comm_kind"] != "") & (ops["comm_bytes_delta"].abs() > 0)]
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
    from rich.markup import escape
    from rich.table import Table

    piped = file is not None or not sys.stdout.isatty()
    console = Console(file=file, width=width or (200 if piped else None))
    console.print(f"hloscope diff - chip {escape(d.chip.id)}\n  A: {escape(d.a_label)}\n  B: {escape(d.b_label)}")
    for note in d.notes:
        console.print(f"note: {escape(note)}")
    for _, m in d.modules.iterrows():
        t = Table(title=f"module {escape(str(m['module_a']))}"
                  + ("" if m["module_a"] == m["module_b"] else f" -> {escape(str(m['module_b']))}"))
        for col in ("field", "A", "B", "change"):
            t.add_column(col, justify="left" if col == "field" else "right")
        for f in MODULE_FIELDS:
            t.add_row(f, _fmt(f, m[f"{f}_a"]), _fmt(f, m[f"{f}_b"]), _pct(m[f"{f}_rel"]))
        console.print(t)
    counts = d.ops["status"].value_counts()
    console.print(", ".join(f"{k}: {v}" for k, v in counts.items()) + (" - no change" if not d.changed else ""))
    for title, rows in _sections(d, top):
        if rows.empty:
            continue
        t = Table(title=title)
        for col in ("op_name", "opcode", "A", "B", "time A", "time B", "change", "FLOPs Δ", "HBM bytes Δ",
                    "wire bytes B (Δ)", "bound"):
            t.add_column(col, overflow="fold")
        for _, r in rows.iterrows():
            t.add_row(escape(_tail(str(r["op_name"]), 60) or "-"), escape(str(r["opcode"])),
                      escape(f"{r['instruction_a']} {r['shape_a']}".strip() or "-"),
                      escape(f"{r['instruction_b']} {r['shape_b']}".strip() or "-"),
                      duration(r["time_a"]), duration(r["time_b"]), _pct((r["time_b"] - r["time_a"]) / r["time_a"] if r["time_a"] else math.nan),
                      _signed(r["flops_delta"], ""), _signed(r["bytes_accessed_delta"], "B"),
                      si(r["comm_bytes_b"], "B")
                      + (f" ({_signed(r['comm_bytes_delta'], 'B')})" if r["comm_bytes_delta"] else ""),
                      escape(r["bound_a"] if r["bound_a"] == r["bound_b"] else f"{r['bound_a']} -> {r['bound_b']}"))
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
        parts.append(f"<h2>module {escape(str(m['module_b']))}</h2><table><tr><th>field</th><th>A</th><th>B</th>"
                     "<th>change</th></tr>")
        for f in MODULE_FIELDS:
            parts.append(f"<tr><td>{f}</td><td>{escape(_fmt(f, m[f + '_a']))}</td><td>{escape(_fmt(f, m[f + '_b']))}"
                         f"</td><td>{escape(_pct(m[f + '_rel']))}</td></tr>")
        parts.append("</table>")
    for title, rows in _sections(d, top):
        if rows.empty:
            continue
        parts.append(f"<h2>{escape(title)}</h2><table><tr><th>op_name</th><th>opcode</th><th>A</th><th>B</th>"
                     "<th>time A</th><th>time B</th><th>wire bytes A</th><th>wire bytes B</th><th>bound</th></tr>")
        for _, r in rows.iterrows():
            cells = [r["op_name"], r["opcode"], f"{r['instruction_a']} {r['shape_a']}",
                     f"{r['instruction_b']} {r['shape_b']}", duration(r["time_a"]), duration(r["time_b"]),
                     si(r["comm_bytes_a"], "B"), si(r["comm_bytes_b"], "B"), f"{r['bound_a']} -> {r['bound_b']}"]
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
