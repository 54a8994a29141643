"""The comparison engine: two ``Report``s -> op-by-op and module-by-module deltas, and a verdict under rules.

``hloscope diff`` (the CLI, ``hloscope.diff``) and the pytest plugin's baselines both call ``compare``; it takes
reports only (loading paths, HLO or traces is the front ends' job) and imports no analysis.

Matching (XLA renumbers instruction names from one compile to the next, so names are no identity):

1. Modules pair by name; when each side has exactly one module they pair whatever their names. A module on
   one side only is compared against nothing (its totals from or to 0, status ``appeared``/``vanished``).
2. Ops pair by their **identity** ``(opcode, op_name, dims)``: the opcode, the framework op name of the HLO
   metadata and the result shape's dimensions without element types or layout (``f32[32,128]{1,0}`` ->
   ``[32,128]``, from the ops table's ``result_shape`` column). The element type is not part of it, so a matmul
   that went from bf16 to f32 is *that op* changing. Ops sharing an identity pair in order of roofline time, then
   FLOPs, largest first.
3. Ops left over pair by ``(opcode, op_name)``: the same op with other dimensions (a resharded program's
   per-device shapes), marked ``reshaped``.
4. What is still left ``appeared`` (only in B) or ``vanished`` (only in A). Trace ops that name no instruction
   (category ``unjoined``) pair by their instruction name.

Fields compared per op (``OP_FIELDS``) and per module (``MODULE_FIELDS``): for each ``<f>_a``, ``<f>_b``,
``<f>_delta`` (B - A) and ``<f>_rel`` (delta / A; NaN when A is 0). ``time`` is measured time where both sides
have it, else roofline time; an op is ``slower`` or ``faster`` by it, ``unchanged`` when no field moved by more
than ``SAME`` (relative), the dims and the bound class are the same.

The verdict (``Diff.check``, ``hloscope.compare.verdict``) applies rules of ``hloscope.compare.rules`` (grammar
in docs/diff.md).
"""

from __future__ import annotations

import json
import math
import re
from collections import defaultdict
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from hloscope._columns import column_list, kept_table
from hloscope._regex import LazyPattern
from hloscope.compare.rules import Rule, RuleSpec, resolve
from hloscope.roofline.tables import nansum

if TYPE_CHECKING:
    import pandas as pd

    from hloscope.compare.verdict import Verdict
    from hloscope.result import Report
    from hloscope.roofline.chips import ChipSpec

__all__ = [
    "SCHEMA", "DEFAULT_SIGNIFICANT", "SAME", "OP_FIELDS", "MODULE_FIELDS", "OP_DIFF_COLUMNS",
    "MODULE_DIFF_COLUMNS", "COLLECTIVE_DIFF_COLUMNS", "BOUND_RANK", "dims_of", "identity", "is_collective", "rows",
    "table_rows", "table_columns", "compare", "Diff",
]

#: Schema of ``Diff.to_json`` (``/3``: the op fields ``count`` and ``shape`` became ``executions`` and
#: ``result_shape`` -- ``executions_a``..., ``result_shape_a``/``_b`` -- and modules gained ``cost_coverage``).
SCHEMA = "hloscope.diff/3"
#: Share of A's total roofline time from which an op is compared on its own by ``op.*`` rules (collectives
#: always are); also what a baseline stores.
DEFAULT_SIGNIFICANT = 0.01
#: Values within this relative margin are the same (float summation noise; baselines keep 9 digits).
SAME = 1e-8
#: Op fields compared, in order (columns of the report's ops table).
OP_FIELDS = ("roofline_s", "measured_s", "flops", "hbm_bytes", "wire_bytes", "executions")
#: Module fields compared (columns of the report's modules table): the module metrics of the rules, and
#: ``cost_coverage`` (the share of the module's ops whose cost is known), which the verdict checks whatever the
#: rules (``hloscope.compare.verdict``: a cost that became unknown is a failure, never an improvement).
MODULE_FIELDS = ("roofline_s", "measured_s", "flops", "transcendentals", "hbm_bytes", "wire_bytes",
                 "compute_s", "memory_s", "comm_s", "mfu", "cost_coverage", "peak_bytes", "exposed_comm_s",
                 "exposed_comm_roofline_s")
#: Bound classes from best to worst: ``op.bound`` compares these ranks.
BOUND_RANK = {"compute": 0, "memory": 1, "communication": 2}

#: The columns of ``Diff.ops``, in order.
OP_DIFF_COLUMNS = [
    "module", "op_name", "opcode", "dims", "category", "instruction_a", "instruction_b", "result_shape_a",
    "result_shape_b",
    "dtype_a", "dtype_b", "bound_a", "bound_b", "comm_kind",
    *(f"{f}_{s}" for f in OP_FIELDS for s in ("a", "b", "delta", "rel")),
    "time_a", "time_b", "time_delta", "reshaped", "bound_changed", "significant", "status",
]
#: The columns of ``Diff.modules``, in order.
MODULE_DIFF_COLUMNS = ["module_a", "module_b", "status",
                       *(f"{f}_{s}" for f in MODULE_FIELDS for s in ("a", "b", "delta", "rel"))]
#: The columns of ``Diff.collectives`` (one row per module pair and collective kind), in order: ``count_a`` /
#: ``count_b`` are numbers of collective ops of the kind (the ``collective.count`` rule), not an ops-table column.
COLLECTIVE_DIFF_COLUMNS = ["module", "comm_kind", "count_a", "count_b", "wire_bytes_a", "wire_bytes_b",
                           "wire_bytes_delta", "wire_bytes_rel"]

_DTYPE_RE = LazyPattern(r"[a-z][a-z0-9]*\[")
_LAYOUT_RE = LazyPattern(r"\{[^{}]*\}")


def dims_of(shape: Any) -> str:
    """A shape's dimensions without element types or layout: ``f32[32,128]{1,0}`` -> ``[32,128]``,
    ``(f32[8]{0}, s32[])`` -> ``([8],[])``. Accepts a ``Shape`` or its text; ``""`` for None/NaN/""."""
    if shape is None or (isinstance(shape, float) and shape != shape):
        return ""
    text = str(shape)
    while "{" in text:
        stripped = _LAYOUT_RE.sub("", text)
        if stripped == text:
            break
        text = stripped
    return _DTYPE_RE.sub("[", text).replace(" ", "")


def identity(opcode: str, op_name: str, shape: Any) -> tuple[str, str, str]:
    """An op's identity across compiles: ``(opcode, op_name, dims_of(shape))``."""
    return (opcode or "", op_name or "", dims_of(shape))


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _num(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def rows(df: pd.DataFrame, columns: Iterable[str] | None = None) -> list[dict[str, Any]]:
    """The rows of ``df`` as dicts of Python values (``DataFrame.to_dict("records")``, several times faster on
    small tables: column lists zipped)."""
    cols = list(df.columns) if columns is None else [c for c in columns if c in df.columns]
    if not cols or not len(df):
        return []
    # (a list per column, read from its stored array: ~2x faster than one object array of the table, whose
    # values are the same Python objects, at 1 row and at 21,000)
    return [dict(zip(cols, values)) for values in zip(*[column_list(df, c) for c in cols])]


def table_rows(report: Any, table: str, columns: Iterable[str] | None = None) -> list[dict[str, Any]]:
    """The rows of ``report``'s ``ops`` or ``modules`` table as dicts (``rows``), or what its own
    ``table_rows(table)`` gives when it has one (``baseline.BaselineReport``: the rows without a DataFrame; they
    may hold more columns than asked for)."""
    own = getattr(report, "table_rows", None)
    return own(table) if own is not None else rows(kept_table(report, table), columns)



def table_columns(report: Any, table: str, columns: Iterable[str]) -> dict[str, list[Any]]:
    """Column -> values (Python objects) of ``columns`` of ``report``'s ``ops`` or ``modules`` table, leaving out
    columns the table lacks; what its own ``table_columns(table, columns)`` gives when it has one
    (``baseline.BaselineReport``: made without a DataFrame)."""
    own = getattr(report, "table_columns", None)
    if own is not None:
        return own(table, columns)
    df = kept_table(report, table)
    return {c: column_list(df, c) for c in columns if c in df.columns}


def is_collective(opcode: str, comm_kind: str) -> bool:
    """A collective op counted as one (the ``-done`` half of an async pair is not)."""
    return bool(comm_kind) and not opcode.endswith("-done")


# --------------------------------------------------------------------------------------------------------------
# The diff
# --------------------------------------------------------------------------------------------------------------


class Diff:
    """Result of ``compare`` (and of ``hloscope.diff``).

    Attributes:
        a_label, b_label: where A and B came from.
        ops: one row per op pair or unpaired op (``OP_DIFF_COLUMNS``): ``module``, ``op_name``, ``opcode``,
            ``dims``, ``category``, ``instruction_a``/``_b``, ``result_shape_a``/``_b``, ``dtype_a``/``_b``,
            ``bound_a``/``_b``, ``comm_kind``, per field of ``OP_FIELDS`` ``_a``, ``_b``, ``_delta``, ``_rel``,
            ``time_a``/``_b``/``_delta``, ``reshaped``, ``bound_changed``, ``significant`` (A's op is compared
            by ``op.*`` rules) and ``status`` (``unchanged``, ``slower``, ``faster``, ``changed`` (work moved,
            time not), ``appeared``, ``vanished``). Sorted by ``|time_delta|``, largest first.
        modules: one row per module pair (``MODULE_DIFF_COLUMNS``): ``module_a``, ``module_b`` (``""`` on the
            side that lacks it), ``status`` (``paired``, ``appeared``, ``vanished``) and per field of
            ``MODULE_FIELDS`` ``_a``, ``_b``, ``_delta``, ``_rel``.
        collectives: one row per module and collective kind (``COLLECTIVE_DIFF_COLUMNS``): number of ops and
            wire bytes on each side.
        chip: the chip both sides were scored against.
        notes: modules on one side only, and other caveats.
        significant: the share of A's roofline time from which an op is ``significant``.
        rules: the rules of ``verdict``.

    The three tables are DataFrames made on first use from the rows ``compare`` built (the verdict and the
    totals read the rows: the pytest plugin's check makes no DataFrame; three cost ~1.5 ms a test).
    """

    def __init__(self, a_label: str, b_label: str, op_rows: list[dict[str, Any]],
                 module_rows: list[dict[str, Any]], collective_rows: list[dict[str, Any]], chip: ChipSpec,
                 notes: list[str] | None = None, significant: float = DEFAULT_SIGNIFICANT,
                 rules: tuple[Rule, ...] = ()) -> None:
        self.a_label, self.b_label, self.chip = a_label, b_label, chip
        self.notes = list(notes or [])
        self.significant, self.rules = significant, rules
        self._rows = {"ops": op_rows, "modules": module_rows, "collectives": collective_rows}
        self._frames: dict[str, pd.DataFrame] = {}

    def __repr__(self) -> str:
        return (f"Diff(a_label={self.a_label!r}, b_label={self.b_label!r}, ops={len(self._rows['ops'])} rows, "
                f"modules={len(self._rows['modules'])} rows, chip={self.chip.id!r})")

    def _frame(self, table: str, columns: list[str]) -> pd.DataFrame:
        frame = self._frames.get(table)
        if frame is None:
            import pandas as pd

            frame = self._frames[table] = pd.DataFrame(self._rows[table], columns=columns)
        return frame

    @property
    def ops(self) -> pd.DataFrame:
        return self._frame("ops", OP_DIFF_COLUMNS)

    @property
    def modules(self) -> pd.DataFrame:
        return self._frame("modules", MODULE_DIFF_COLUMNS)

    @property
    def collectives(self) -> pd.DataFrame:
        return self._frame("collectives", COLLECTIVE_DIFF_COLUMNS)

    def rows(self, table: str) -> list[dict[str, Any]]:
        """The rows of ``ops``, ``modules`` or ``collectives`` as dicts of Python values, in the table's order
        (read them, do not change them: the DataFrames are made from them)."""
        return self._rows[table]

    @property
    def changed(self) -> bool:
        """Whether any op or module differs."""
        return (any(r["status"] != "unchanged" for r in self._rows["ops"])
                or any(m["status"] != "paired" for m in self._rows["modules"]))

    def total(self, name: str) -> tuple[float, float]:
        """``(A, B)``: a module field summed over the modules (NaNs skipped; numpy's summation, as
        ``DataFrame.sum``)."""
        return (nansum([m[f"{name}_a"] for m in self._rows["modules"]]),
                nansum([m[f"{name}_b"] for m in self._rows["modules"]]))

    @property
    def roofline_change(self) -> float:
        """Relative change of the total roofline time (0.25 = 25% slower); NaN when A's is 0 and B's is not."""
        old, new = self.total("roofline_s")
        if abs(new - old) <= SAME * max(abs(old), abs(new)):
            return 0.0
        return (new - old) / old if old else math.nan

    @property
    def verdict(self) -> Verdict:
        """``check(self.rules)``."""
        return self.check(self.rules)

    def check(self, rules: RuleSpec) -> Verdict:
        """Apply rules: a tolerance (``0.05``: ``rules.default_rules``), rule text (``"roofline_s:+5%,flops:+0"``)
        or a list of rules / rule texts.

        A rule on a field one side lacks (``measured_s`` of a static report) is broken, never skipped silently.
        A change within ``SAME`` (relative) breaks no rule, so ``flops:+0`` fails only on a real increase.

        Raises:
            hloscope.errors.ConfigError: a rule that does not parse.
        """
        from hloscope.compare.verdict import apply_rules

        return apply_rules(self, resolve(rules))

    def to_dict(self) -> dict[str, Any]:
        """The JSON document (schema ``hloscope.diff/3``): ``schema``, ``a``, ``b`` (labels), ``chip`` (id),
        ``summary`` (status -> number of ops), ``modules``, ``collectives`` and ``ops`` (rows of the DataFrames;
        NaN as None), ``notes``."""
        counts = self.ops["status"].value_counts().to_dict()
        return {"schema": SCHEMA, "a": self.a_label, "b": self.b_label, "chip": self.chip.id,
                "summary": {str(k): int(v) for k, v in counts.items()}, "modules": _records(self.modules),
                "collectives": _records(self.collectives), "ops": _records(self.ops), "notes": list(self.notes)}

    def to_json(self, indent: int | None = 1) -> str:
        """The diff as JSON (``to_dict``; NaN as null)."""
        return json.dumps(self.to_dict(), indent=indent, allow_nan=False)


def _records(df: pd.DataFrame) -> list[dict[str, Any]]:
    from hloscope.result.report import _records as records  # NaN -> None, numpy scalars -> Python

    return records(df)


# --------------------------------------------------------------------------------------------------------------
# compare
# --------------------------------------------------------------------------------------------------------------

_OP_TEXT = ("instruction", "opcode", "op_name", "result_shape", "category", "dtype", "bound", "comm_kind")


def _op_records(report: Any) -> dict[str, list[dict[str, Any]]]:
    """module -> the rows of ``report``'s ops as dicts with clean text and float fields, keyed for pairing,
    sorted by roofline time then FLOPs (largest first, NaN last). Cleaned column by column (a column the table
    lacks: "" or NaN), then zipped into the rows."""
    out: dict[str, list[dict[str, Any]]] = defaultdict(list)
    columns = table_columns(report, "ops", ("module", *_OP_TEXT, *OP_FIELDS))
    count = len(next(iter(columns.values()))) if columns else 0
    if not count:
        return out
    values = [[v if isinstance(v, str) else "" for v in columns[c]] if c in columns else [""] * count
              for c in _OP_TEXT]
    values += [[v if type(v) is float else _num(v) for v in columns[f]] if f in columns else [math.nan] * count
               for f in OP_FIELDS]
    keys = (*_OP_TEXT, *OP_FIELDS)
    dims: dict[str, str] = {}  # result shape -> dims_of (a few hundred distinct shapes in a large table)
    modules = columns["module"] if "module" in columns else [None] * count
    for module, row in zip(modules, zip(*values)):
        r = dict(zip(keys, row))
        if r["category"] == "unjoined":  # a trace op's only identity is its name
            r["op_name"], r["opcode"], r["result_shape"] = r["instruction"], "", ""
        shape = r["result_shape"]
        d = dims.get(shape)
        if d is None:
            d = dims[shape] = dims_of(shape)
        r["dims"] = d
        out[str(module)].append(r)

    def order(r: dict[str, Any]) -> tuple[bool, float, bool, float]:
        t, f = r["roofline_s"], r["flops"]
        return (t != t, -t if t == t else 0.0, f != f, -f if f == f else 0.0)

    for mine in out.values():
        mine.sort(key=order)
    return out


def _pair(a: list[dict[str, Any]], b: list[dict[str, Any]], key: Any) -> tuple[list[tuple[dict, dict]], list[dict],
                                                                                list[dict]]:
    """Pair rows with equal ``key(row)`` in order (k-th with k-th); return the pairs and the leftovers (in
    order)."""
    queues: dict[Any, list[int]] = defaultdict(list)
    for i, r in enumerate(b):
        queues[key(r)].append(i)
    heads: dict[Any, int] = defaultdict(int)
    used = set()
    pairs, rest_a = [], []
    for r in a:
        k = key(r)
        q = queues.get(k)
        if q is not None and heads[k] < len(q):
            j = q[heads[k]]
            heads[k] += 1
            used.add(j)
            pairs.append((r, b[j]))
        else:
            rest_a.append(r)
    return pairs, rest_a, [r for i, r in enumerate(b) if i not in used]


def _full_key(r: dict[str, Any]) -> tuple[str, str, str]:
    return (r["opcode"], r["op_name"], r["dims"])


def _loose_key(r: dict[str, Any]) -> tuple[str, str]:
    return (r["opcode"], r["op_name"])


#: Per op field: its name and the diff's column names for A, B, delta and relative change.
_FIELD_KEYS = tuple((f, f"{f}_a", f"{f}_b", f"{f}_delta", f"{f}_rel") for f in OP_FIELDS)


def _op_row(module: str, ra: dict | None, rb: dict | None, both_measured: bool, threshold: float) -> dict[str, Any]:
    ref = rb if rb is not None else ra
    assert ref is not None
    out: dict[str, Any] = {
        "module": module, "op_name": ref["op_name"], "opcode": ref["opcode"], "dims": ref["dims"],
        "category": ref["category"],
        "instruction_a": ra["instruction"] if ra else "", "instruction_b": rb["instruction"] if rb else "",
        "result_shape_a": ra["result_shape"] if ra else "", "result_shape_b": rb["result_shape"] if rb else "",
        "dtype_a": ra["dtype"] if ra else "", "dtype_b": rb["dtype"] if rb else "",
        "bound_a": ra["bound"] if ra else "", "bound_b": rb["bound"] if rb else "",
        "comm_kind": ref["comm_kind"] or (ra["comm_kind"] if ra else ""),
    }
    moved = False
    for f, key_a, key_b, key_delta, key_rel in _FIELD_KEYS:
        va = ra[f] if ra is not None else 0.0
        vb = rb[f] if rb is not None else 0.0
        delta = vb - va
        out[key_a], out[key_b], out[key_delta] = va, vb, delta
        out[key_rel] = delta / va if va else math.nan
        if not moved and not (delta != delta or abs(delta) <= SAME * max(abs(va), abs(vb))):
            moved = True
    time_key = "measured_s" if both_measured else "roofline_s"
    ta = ra[time_key] if ra is not None else 0.0
    tb = rb[time_key] if rb is not None else 0.0
    out["time_a"], out["time_b"], out["time_delta"] = ta, tb, tb - ta
    out["reshaped"] = ra is not None and rb is not None and ra["dims"] != rb["dims"]
    out["bound_changed"] = ra is not None and rb is not None and ra["bound"] != rb["bound"]
    out["significant"] = ra is not None and (
        is_collective(ra["opcode"], ra["comm_kind"]) or (ra["roofline_s"] > 0 and ra["roofline_s"] >= threshold))
    if ra is None:
        status = "appeared"
    elif rb is None:
        status = "vanished"
    elif not moved and not out["reshaped"] and not out["bound_changed"]:
        status = "unchanged"
    elif not math.isnan(tb - ta) and abs(tb - ta) > SAME * max(abs(ta), abs(tb)):
        status = "slower" if tb > ta else "faster"
    else:
        status = "changed"
    out["status"] = status
    return out


def _module_pairs(names_a: list[str], names_b: list[str]) -> list[tuple[str, str]]:
    if len(names_a) == 1 and len(names_b) == 1:
        return [(names_a[0], names_b[0])]
    in_b = set(names_b)
    return [(n, n) for n in names_a if n in in_b]


def _module_row(ma: str, mb: str, rows_a: dict[str, dict], rows_b: dict[str, dict]) -> dict[str, Any]:
    ra, rb = rows_a.get(ma), rows_b.get(mb)
    status = "paired" if ra is not None and rb is not None else ("appeared" if ra is None else "vanished")
    out: dict[str, Any] = {"module_a": ma if ra is not None else "", "module_b": mb if rb is not None else "",
                           "status": status}
    for f in MODULE_FIELDS:
        va = _num(ra.get(f)) if ra is not None else math.nan
        vb = _num(rb.get(f)) if rb is not None else math.nan
        # A module one side lacks costs nothing there (unless nothing is known of the field); its MFU and its
        # cost coverage are undefined there, not 0.
        if f not in ("mfu", "cost_coverage"):
            if ra is None and not _missing(vb):
                va = 0.0
            if rb is None and not _missing(va):
                vb = 0.0
        out[f"{f}_a"], out[f"{f}_b"], out[f"{f}_delta"] = va, vb, vb - va
        out[f"{f}_rel"] = (vb - va) / va if va else math.nan
    return out


def _collective_rows(module: str, ops_a: list[dict], ops_b: list[dict]) -> list[dict[str, Any]]:
    stats: dict[str, list[float]] = {}
    for side, ops in ((0, ops_a), (1, ops_b)):
        for r in ops:
            if is_collective(r["opcode"], r["comm_kind"]):
                s = stats.setdefault(r["comm_kind"], [0, 0, 0.0, 0.0])
                s[side] += 1
                s[2 + side] += 0.0 if math.isnan(r["wire_bytes"]) else r["wire_bytes"]
    rows = []
    for kind in sorted(stats):
        na, nb, wa, wb = stats[kind]
        rows.append({"module": module, "comm_kind": kind, "count_a": na, "count_b": nb, "wire_bytes_a": wa,
                     "wire_bytes_b": wb, "wire_bytes_delta": wb - wa, "wire_bytes_rel": (wb - wa) / wa if wa else math.nan})
    return rows


def compare(a: Report, b: Report, *, a_label: str = "A", b_label: str = "B",
            significant: float = DEFAULT_SIGNIFICANT, rules: RuleSpec = ()) -> Diff:
    """Compare report B against report A (matching in the module docstring).

    Args:
        a, b: the reports (anything with the report's ``ops``, ``modules`` and ``chip``).
        a_label, b_label: where they came from, for messages.
        significant: share of A's total roofline time from which an op is compared by ``op.*`` rules.
        rules: the rules of ``Diff.verdict`` (a tolerance, rule text or rules; see ``Diff.check``).

    Raises:
        hloscope.errors.ComparisonError: the reports were scored against different chips, or share no module
            (and do not each have exactly one).
        hloscope.errors.ConfigError: a rule that does not parse.
    """
    from hloscope.errors import ComparisonError

    parsed = resolve(rules)
    if a.chip.id != b.chip.id:
        raise ComparisonError(f"{a_label} was scored against {a.chip.id!r} and {b_label} against {b.chip.id!r}: "
                              "score both against one chip (--chip)")
    module_rows_a, module_rows_b = table_rows(a, "modules"), table_rows(b, "modules")
    names_a, names_b = [str(r["name"]) for r in module_rows_a], [str(r["name"]) for r in module_rows_b]
    pairs = _module_pairs(names_a, names_b)
    if not pairs:
        raise ComparisonError(f"no module of {a_label} ({', '.join(names_a) or 'none'}) is in "
                              f"{b_label} ({', '.join(names_b) or 'none'}) and neither side has exactly one")
    paired_a, paired_b = {p[0] for p in pairs}, {p[1] for p in pairs}
    only_a = [n for n in names_a if n not in paired_a]
    only_b = [n for n in names_b if n not in paired_b]
    notes = []
    if only_a:
        notes.append(f"modules only in {a_label} (vanished): {', '.join(only_a)}")
    if only_b:
        notes.append(f"modules only in {b_label} (appeared): {', '.join(only_b)}")
    rows_a = {str(r["name"]): r for r in module_rows_a}
    rows_b = {str(r["name"]): r for r in module_rows_b}
    total_a = nansum([_num(r["roofline_s"]) for r in module_rows_a])
    threshold = significant * total_a
    ops_a_by_module = _op_records(a)
    ops_b_by_module = _op_records(b)

    op_rows: list[dict[str, Any]] = []
    module_rows: list[dict[str, Any]] = []
    collective_rows: list[dict[str, Any]] = []
    every = [*pairs, *((m, "") for m in only_a), *(("", m) for m in only_b)]
    for ma, mb in every:
        oa = ops_a_by_module.get(ma, []) if ma else []
        ob = ops_b_by_module.get(mb, []) if mb else []
        name = mb or ma
        both_measured = any(not math.isnan(r["measured_s"]) for r in oa) and \
            any(not math.isnan(r["measured_s"]) for r in ob)
        exact, left_a, left_b = _pair(oa, ob, _full_key)
        loose, left_a, left_b = _pair(left_a, left_b, _loose_key)
        for ra, rb in exact + loose:
            op_rows.append(_op_row(name, ra, rb, both_measured, threshold))
        op_rows.extend(_op_row(name, ra, None, both_measured, threshold) for ra in left_a)
        op_rows.extend(_op_row(name, None, rb, both_measured, threshold) for rb in left_b)
        module_rows.append(_module_row(ma, mb, rows_a, rows_b))
        collective_rows.extend(_collective_rows(name, oa, ob))
    # Largest |time_delta| first, ties in pairing order, unknown (NaN) deltas last in pairing order: pandas'
    # ``sort_values(ascending=False, kind="stable")`` of that column.
    known = [r for r in op_rows if r["time_delta"] == r["time_delta"]]
    known.sort(key=lambda r: -abs(r["time_delta"]))
    op_rows = known + [r for r in op_rows if r["time_delta"] != r["time_delta"]]
    return Diff(a_label, b_label, op_rows, module_rows, collective_rows, a.chip, notes, significant, parsed)
