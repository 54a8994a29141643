"""Verdicts: the rules of ``hloscope.compare.rules`` applied to a ``Diff`` -- regressions (rules broken),
improvements (their mirrors), notes -- and the failure message the plugin shows.

Scopes (docs/diff.md, "Rules"): module rules compare each module pair's totals; collective rules each module's
collective kinds (a kind new to B, or gone from it, is said once, by the count rule when there is one, and the
new collective ops are named); op rules each significant op of A whose identity B has (reshaped, gone and new
ops are notes: their cost is in the totals).

A cost that became unknown fails whatever the rules (``UNKNOWN_COST``, given any rule at all): hloscope leaves
an unknown cost (an opaque custom call, an unknown opcode, a cost rule that failed: NaN, flagged ``unknown-flops``
/ ``unknown-bytes``) out of the module totals, so without this check a change that made an op's cost unknown
would lower B's FLOPs and roofline time and read as an improvement. It fails when a paired module's
``cost_coverage`` (the share of its ops whose roofline time is known) is lower in B than in A, or when an op
paired on both sides has a known roofline time or FLOPs in A and an unknown one in B. A side without
``cost_coverage`` (a ``hloscope.baseline/2`` file, a hand-made report) is not checked on coverage.
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from hloscope.compare.engine import BOUND_RANK, SAME, dims_of, is_collective
from hloscope.compare.rules import Rule, describe
from hloscope.units import change as _change
from hloscope.units import quantity

if TYPE_CHECKING:
    from hloscope.compare.engine import Diff

__all__ = ["UNKNOWN_COST", "Finding", "Verdict", "apply_rules"]

#: The ``rule`` of a finding that a cost became unknown (not a rule one writes: it holds under every rule set).
UNKNOWN_COST = "unknown-cost"

#: Fields for people, in messages.
_LABELS = {"roofline_s": "roofline time", "measured_s": "measured time", "flops": "FLOPs",
           "transcendentals": "transcendentals", "hbm_bytes": "HBM bytes", "wire_bytes": "wire bytes",
           "compute_s": "compute time", "memory_s": "memory time", "comm_s": "comm time", "mfu": "MFU",
           "count": "ops", "executions": "executions", "bound": "bound", "new": "wire bytes",
           "cost_coverage": "cost coverage", "peak_bytes": "peak device memory",
           "exposed_comm_s": "exposed communication", "exposed_comm_roofline_s": "exposed communication at the roof"}


def _unit(name: str) -> str:
    if name.endswith("_s"):
        return "s"
    if "bytes" in name or name == "new":
        return "B"
    if name == "flops":
        return "FLOP"
    return ""


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


@dataclass(frozen=True)
class Finding:
    """One rule broken (a regression) or its mirror passed (an improvement).

    Attributes:
        rule: the rule's text (``roofline_s:+5%``).
        scope: ``module``, ``collective`` or ``op``.
        module: the module (``a -> b`` when the names differ).
        subject: ``total`` (module scope), the collective kind, or the op's label (``opcode op_name dims``).
        field: the field; ``new`` for a collective op or kind that A lacks (``new`` is its wire bytes).
        old, new: A's and B's values (numbers, or bound class names).
        note: what else to say (``new collective kind, 1 op``, ``not known on both sides``).
    """

    rule: str
    scope: str
    module: str
    subject: str
    field: str
    old: Any
    new: Any
    note: str = ""

    @property
    def unit(self) -> str:
        return _unit(self.field)

    @property
    def metric(self) -> str:
        """The field for people: ``roofline time``, ``HBM bytes``, ``wire bytes``, ``ops``, ``bound``."""
        return _LABELS.get(self.field, self.field)

    @property
    def unknown_cost(self) -> bool:
        """Whether this finding says that a cost became unknown (``UNKNOWN_COST``)."""
        return self.rule == UNKNOWN_COST

    @property
    def change(self) -> str:
        """``+12.5%``, ``memory -> communication``, ``2 -> 3 ops``, ``new``, ``cost became unknown``."""
        if self.unknown_cost:
            return "cost became unknown"
        if self.field == "bound":
            return f"{self.old} -> {self.new}"
        if self.field == "new":
            return "new"
        if self.field == "count":
            return f"{_count(self.old)} -> {_count(self.new)} ops"
        if self.field == "mfu":
            return f"{self.old:.1%} -> {self.new:.1%}" if not (_missing(self.old) or _missing(self.new)) else "-"
        return _change(self.old, self.new)

    def shown(self, value: Any) -> str:
        if self.field == "cost_coverage":
            return _coverage(value, self.old, self.new)
        if self.unknown_cost and _missing(value):
            return "unknown"
        if self.field == "bound":
            return str(value) if value else "-"
        if self.field == "count":
            return _count(value)
        if self.field == "mfu":
            return "-" if _missing(value) else f"{value:.1%}"
        return quantity(value, self.unit)

    def line(self) -> str:
        """One line: ``RULE: module: subject: metric A -> B (change)``."""
        where = self.module + (f": {self.subject}" if self.subject != "total" else "")
        if self.unknown_cost:
            coverage = (f" (coverage {self.shown(self.old)} -> {self.shown(self.new)})"
                        if self.field == "cost_coverage" else "")
            return f"{self.rule}: {where}: cost became unknown: {self.note}{coverage}"
        if self.note == "not known on both sides":
            return f"{self.rule}: {where}: {self.field} is not known on both sides"
        if self.field == "new":
            return f"{self.rule}: {where}: {self.note} ({quantity(self.new, 'B')} on the wire)"
        text = f"{self.rule}: {where}: {self.field} {self.shown(self.old)} -> {self.shown(self.new)} ({self.change})"
        return text + (f" ({self.note})" if self.note else "")


def _count(value: Any) -> str:
    return "-" if _missing(value) else f"{value:g}"


def _coverage(value: Any, a: Any, b: Any) -> str:
    """A cost coverage (a fraction) with 2 decimals, or as many more (up to 6) as tell ``a`` and ``b`` apart:
    ``1.00 -> 0.97``, ``1.000 -> 0.999``."""
    if _missing(value):
        return "-"
    digits = 2
    if not (_missing(a) or _missing(b)) and a != b:
        while digits < 6 and f"{a:.{digits}f}" == f"{b:.{digits}f}":
            digits += 1
    return f"{value:.{digits}f}"


@dataclass(frozen=True)
class Verdict:
    """What rules say about a ``Diff``: regressions (rules broken), improvements (their mirrors) and notes.

    ``bool(verdict)`` is ``verdict.regressed``.
    """

    rules: tuple[Rule, ...]
    regressions: tuple[Finding, ...]
    improvements: tuple[Finding, ...]
    notes: tuple[str, ...]
    chip: str = ""

    @property
    def regressed(self) -> bool:
        return bool(self.regressions)

    @property
    def improved(self) -> bool:
        return bool(self.improvements) and not self.regressions

    def __bool__(self) -> bool:
        return self.regressed

    def lines(self) -> list[str]:
        """The rules broken, one line each (``Finding.line``); [] when none."""
        return [f.line() for f in self.regressions]

    def format(self, against: str | None = None, limit: int = 20) -> str:
        """The failure message: a headline and a table of what regressed (at most ``limit`` rows), then
        improvements and notes, if any."""
        n = len(self.regressions)
        where = f" against {against}" if against else ""
        lines = [f"{n} roofline regression{'s' if n != 1 else ''}{where} (chip {self.chip}, {describe(self.rules)}):"]
        if self.regressions:
            lines += _table(self.regressions, limit)
        if self.improvements:
            lines.append(f"improved ({len(self.improvements)}):")
            lines += _table(self.improvements, limit)
        for note in self.notes[:limit // 2]:
            lines.append(f"note: {note}")
        if len(self.notes) > limit // 2:
            lines.append(f"note: ... and {len(self.notes) - limit // 2} more")
        return "\n".join(lines)


def _table(findings: Iterable[Finding], limit: int) -> list[str]:
    findings = list(findings)
    modules = {f.module for f in findings}
    rows = [("what", "metric", "baseline", "now", "change")]
    for f in findings[:limit]:
        what = f.subject if len(modules) == 1 or f.scope != "module" else f.module
        change = f.change + (f" ({f.note})" if f.note else "")
        rows.append((what, f.metric, f.shown(f.old) if f.field != "new" else "-", f.shown(f.new), change))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    out = ["  " + "  ".join(c.ljust(w) for c, w in zip(r[:4], widths)) + "  " + r[4] for r in rows]
    if len(findings) > limit:
        out.append(f"  ... and {len(findings) - limit} more")
    return out




def _judge(rule: Rule, a: float, b: float) -> int:
    """+1 broken, -1 improved (past the threshold the other way), 0 neither."""
    if abs(b - a) <= SAME * max(abs(a), abs(b)):
        return 0
    if rule.relative:
        change = (b - a) / a if a else (math.inf if b > a else -math.inf)
        margin = rule.threshold + SAME
    else:
        change = b - a
        margin = rule.threshold + SAME * max(abs(a), abs(b))
    signed = change * rule.direction
    if signed > margin:
        return 1
    if signed < -margin:
        return -1
    return 0


def _short(text: str, width: int) -> str:
    return text if len(text) <= width else text[:width - 4] + "...)"


def _op_label(r: dict[str, Any]) -> str:
    """``opcode op_name dims`` for messages (op_name elided in the middle past 60 characters, long tuple dims
    cut); ``dimsA->dimsB`` for a reshaped pair, `` dtypeA->dtypeB`` when the element type changed."""
    name = r["op_name"] or "(no op_name)"
    if len(name) > 60:
        name = name[:20] + "..." + name[-37:]
    dims = _short(r["dims"], 40)
    if r["status"] not in ("appeared", "vanished") and r["reshaped"]:
        dims = f"{_short(dims_of(r['result_shape_a']), 28)}->{_short(dims_of(r['result_shape_b']), 28)}"
    label = " ".join(p for p in (r["opcode"], name, dims) if p)
    if r["dtype_a"] and r["dtype_b"] and r["dtype_a"] != r["dtype_b"]:
        label += f" {r['dtype_a']}->{r['dtype_b']}"
    return label


def apply_rules(d: Diff, rules: tuple[Rule, ...]) -> Verdict:
    """The verdict of ``rules`` on ``d`` (``Diff.check`` parses rule text first)."""
    import numpy as np

    reg: list[Finding] = []
    imp: list[Finding] = []
    notes: list[str] = list(d.notes)
    modules = d.rows("modules")
    collectives = d.rows("collectives")
    # The verdict reads a few kinds of ops (below): their rows are made from the diff's columns, in table order.
    status, comm_kind = d.op_column("status"), d.op_column("comm_kind")
    significant, reshaped = d.op_column("significant"), d.op_column("reshaped")
    appeared, vanished = status == "appeared", status == "vanished"
    paired = ~(appeared | vanished)

    def where(m: dict[str, Any]) -> str:
        a, b = m["module_a"], m["module_b"]
        return a if a == b or not b else (b if not a else f"{a} -> {b}")

    def add(rule: Rule, outcome: int, finding: Finding) -> None:
        if outcome > 0:
            reg.append(finding)
        elif outcome < 0:
            imp.append(finding)

    # Module totals.
    for rule in (r for r in rules if r.scope == "module"):
        for m in modules:
            a, b = m[f"{rule.field}_a"], m[f"{rule.field}_b"]
            if _missing(a) or _missing(b):
                reg.append(Finding(rule.text, "module", where(m), "total", rule.field, a, b, "not known on both sides"))
                continue
            add(rule, _judge(rule, a, b), Finding(rule.text, "module", where(m), "total", rule.field, a, b))

    # Collective kinds; a kind new to B (or gone from it) is said once, by the count rule when there is one.
    reported: set[tuple[str, str]] = set()
    grown: set[tuple[str, str]] = set()
    count_rules = [r for r in rules if r.scope == "collective" and r.field == "count"]
    for rule in count_rules + [r for r in rules if r.scope == "collective" and r.field != "count"]:
        for c in collectives:
            key = (c["module"], c["comm_kind"])
            a, b = c[f"{rule.field}_a"], c[f"{rule.field}_b"]
            if rule.field != "count" and key in reported:
                continue
            outcome = _judge(rule, a, b)
            if rule.field == "count" and c["count_a"] == 0 and outcome > 0:
                n = int(c["count_b"])
                f = Finding(rule.text, "collective", c["module"], c["comm_kind"], "new", None, c["wire_bytes_b"],
                            f"new collective kind, {n} op{'s' if n != 1 else ''}")
                reported.add(key)
            elif rule.field == "count" and c["count_b"] == 0 and outcome < 0:
                f = Finding(rule.text, "collective", c["module"], c["comm_kind"], "count", a, b)
                reported.add(key)
            else:
                f = Finding(rule.text, "collective", c["module"], c["comm_kind"], rule.field, a, b,
                            "new collective" if rule.field == "count" and outcome > 0 else "")
            if rule.field == "count" and outcome > 0:
                grown.add(key)
            add(rule, outcome, f)
    # Name the collective ops behind a new kind or a higher count: those A does not have.
    for r in d.op_rows_at(np.flatnonzero(appeared & (comm_kind != ""))):
        if not is_collective(r["opcode"], r["comm_kind"]):
            continue
        label = _op_label(r)
        if (r["module"], r["comm_kind"]) in grown:
            rule = next(x.text for x in count_rules)
            reg.append(Finding(rule, "collective", r["module"], label, "new", None, r["wire_bytes_b"],
                               f"new {r['comm_kind']}"))
        else:
            c = next((c for c in collectives if (c["module"], c["comm_kind"]) == (r["module"], r["comm_kind"])), {})
            same_count = c.get("count_a") == c.get("count_b")
            notes.append(f"new collective op: {label} ({quantity(r['wire_bytes_b'], 'B')} on the wire"
                         + ("; its kind's count is unchanged)" if same_count else ")"))

    # Significant ops of A whose identity B has (a reshaped pair is another identity: its cost is in the totals).
    op_found: list[tuple[int, Finding]] = []
    same = d.op_rows_at(np.flatnonzero(significant & paired & ~reshaped))
    for rule in (r for r in rules if r.scope == "op"):
        if rule.field in ("roofline_s", "measured_s", "flops", "hbm_bytes", "wire_bytes", "executions"):
            for m in modules:
                name = m["module_b"] or m["module_a"]
                mine = [r for r in same if r["module"] == name]
                if mine and (all(_missing(r[f"{rule.field}_a"]) for r in mine)
                             or all(_missing(r[f"{rule.field}_b"]) for r in mine)) and m["status"] == "paired":
                    reg.append(Finding(rule.text, "op", where(m), "total", rule.field, math.nan, math.nan,
                                       "not known on both sides"))
        for r in same:
            if rule.field == "bound":
                ra, rb = BOUND_RANK.get(r["bound_a"]), BOUND_RANK.get(r["bound_b"])
                if ra is None or rb is None:
                    continue
                outcome = _judge(rule, float(ra), float(rb))
                if outcome:  # (an op within the rule is neither: no finding made)
                    op_found.append((outcome, Finding(rule.text, "op", r["module"], _op_label(r), "bound",
                                                      r["bound_a"], r["bound_b"])))
                continue
            a, b = r[f"{rule.field}_a"], r[f"{rule.field}_b"]
            if _missing(a) or _missing(b):
                continue
            outcome = _judge(rule, a, b)
            if outcome:
                op_found.append((outcome, Finding(rule.text, "op", r["module"], _op_label(r), rule.field, a, b)))

    def size(f: Finding) -> float:
        if f.field == "bound":
            return math.inf
        return abs(f.new - f.old) if isinstance(f.old, (int, float)) and isinstance(f.new, (int, float)) else 0.0

    for outcome, f in sorted(op_found, key=lambda x: size(x[1]), reverse=True):
        if outcome > 0:
            reg.append(f)
        elif outcome < 0:
            imp.append(f)

    # A cost that became unknown: a failure under any rule set (see the module docstring), never an improvement.
    unknown = _unknown_costs(d, modules, paired, where)
    if rules:
        reg[:0] = unknown
        hit = {f.module for f in unknown}
        imp = [dataclasses.replace(f, note=f"{f.note + '; ' if f.note else ''}a cost became unknown")
               if f.scope == "module" and f.module in hit else f for f in imp]
    else:
        notes += [f.line() for f in unknown]

    # Notes: significant ops reshaped or gone, new significant ops (their cost shows in the totals).
    total_b = d.total("roofline_s")[1]
    roof_b = d.op_column("roofline_s_b")
    with np.errstate(invalid="ignore"):
        new = appeared & (comm_kind == "") & (roof_b > 0) & (roof_b >= d.significant * total_b)
    reshaped_significant, gone = reshaped & significant & paired, vanished & significant  # (disjoint, and from new)
    at = np.flatnonzero(reshaped_significant | gone | new)
    for i, r in zip(at.tolist(), d.op_rows_at(at)):
        if reshaped_significant[i]:
            notes.append(f"reshaped: {_op_label(r)} ({quantity(r['roofline_s_a'], 's')} -> "
                         f"{quantity(r['roofline_s_b'], 's')}, {r['bound_a']}-bound"
                         + (f" -> {r['bound_b']}-bound)" if r["bound_a"] != r["bound_b"] else ")"))
        elif gone[i]:
            notes.append(f"op gone: {_op_label(r)} (was {quantity(r['roofline_s_a'], 's')}, {r['bound_a']}-bound)")
        else:
            notes.append(f"new op: {_op_label(r)} {r['dtype_b']} ({quantity(r['roofline_s_b'], 's')}, "
                         f"{r['bound_b']}-bound)")
    return Verdict(rules, tuple(reg), tuple(imp), tuple(notes), d.chip.id)


def _unknown_costs(d: Diff, modules: list[dict[str, Any]], paired: Any, where: Any) -> list[Finding]:
    """Findings (rule ``UNKNOWN_COST``) of every paired module whose ``cost_coverage`` fell, and of every op
    paired on both sides (``paired``: per row of ``d.ops``) whose roofline time or FLOPs was known in A and is
    unknown (NaN) in B.

    The instructions no longer costed are counted from the ops of each side whose roofline time is unknown (a
    baseline stores those since ``hloscope.baseline/3``)."""
    import numpy as np

    out: list[Finding] = []
    op_modules = d.op_column("module")
    unknown_a = Counter(op_modules[np.isnan(d.op_column("roofline_s_a"))].tolist())
    unknown_b = Counter(op_modules[np.isnan(d.op_column("roofline_s_b"))].tolist())
    by_name = {}
    for m in modules:
        name = m["module_b"] or m["module_a"]
        by_name[name] = where(m)
        a, b = m["cost_coverage_a"], m["cost_coverage_b"]
        if m["status"] != "paired" or _missing(a) or _missing(b) or not b < a - SAME:
            continue
        more = unknown_b[name] - unknown_a[name]
        now = unknown_b[name]
        note = (f"{more} instruction{'s' if more != 1 else ''} no longer costed" if more > 0 else
                f"{now} instruction{'s' if now != 1 else ''} not costed")
        out.append(Finding(UNKNOWN_COST, "module", where(m), "total", "cost_coverage", a, b, note))
    fields = ("roofline_s", "flops")
    lost_at = {f: paired & ~np.isnan(d.op_column(f"{f}_a")) & np.isnan(d.op_column(f"{f}_b")) for f in fields}
    at = np.flatnonzero(lost_at["roofline_s"] | lost_at["flops"])
    for i, r in zip(at.tolist(), d.op_rows_at(at)):
        lost = [f for f in fields if lost_at[f][i]]
        note = ", ".join(f"{_LABELS[f]} {quantity(r[f'{f}_a'], _unit(f))} -> unknown" for f in lost)
        out.append(Finding(UNKNOWN_COST, "op", by_name.get(r["module"], r["module"]), _op_label(r), lost[0],
                           r[f"{lost[0]}_a"], math.nan, note))
    return out
