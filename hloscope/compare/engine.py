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

from hloscope._columns import column_array, column_codes, column_list, kept_table
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

    The three tables are DataFrames made on first use from what ``compare`` built (the verdict and the totals
    read that: the pytest plugin's check makes no DataFrame; three cost ~1.5 ms a test). The ops are kept as
    columns (``op_column``) and made into dicts only when asked for (``rows("ops")``, ``op_rows_at``): a report
    compared with its baseline, which keeps only the significant ops, has a row for every op it has -- 15,000
    on gemma4 2B -- of which the verdict reads a few.
    """

    def __init__(self, a_label: str, b_label: str, op_columns: dict[str, Any],
                 module_rows: list[dict[str, Any]], collective_rows: list[dict[str, Any]], chip: ChipSpec,
                 notes: list[str] | None = None, significant: float = DEFAULT_SIGNIFICANT,
                 rules: tuple[Rule, ...] = ()) -> None:
        self.a_label, self.b_label, self.chip = a_label, b_label, chip
        self.notes = list(notes or [])
        self.significant, self.rules = significant, rules
        self._op_columns = op_columns
        self._rows: dict[str, list[dict[str, Any]]] = {"modules": module_rows, "collectives": collective_rows}
        self._frames: dict[str, pd.DataFrame] = {}

    def __repr__(self) -> str:
        return (f"Diff(a_label={self.a_label!r}, b_label={self.b_label!r}, ops={len(self._op_columns['status'])} "
                f"rows, modules={len(self._rows['modules'])} rows, chip={self.chip.id!r})")

    def _frame(self, table: str, columns: list[str]) -> pd.DataFrame:
        frame = self._frames.get(table)
        if frame is None:
            import pandas as pd

            frame = self._frames[table] = pd.DataFrame(self.rows(table), columns=columns)
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
        return self.op_rows_at(None) if table == "ops" else self._rows[table]

    def op_column(self, name: str) -> Any:
        """Column ``name`` of ``ops`` (``OP_DIFF_COLUMNS``) as a numpy array in the table's order: float64 for
        numbers, bool for flags, object (``str``) for text. Raises KeyError for another name."""
        return self._op_columns[name]

    def op_rows_at(self, at: Any) -> list[dict[str, Any]]:
        """The rows of ``ops`` at the positions ``at`` (a numpy array of ascending ints, or None for every row)
        as dicts of Python values, as ``rows("ops")`` holds them."""
        every = self._rows.get("ops")
        if every is None:
            if at is not None and 8 * len(at) < len(self._op_columns["status"]):  # (a few of many)
                return self._make_op_rows(at) if len(at) else []
            every = self._rows["ops"] = self._make_op_rows(None)  # (made once, for every later reader)
        return every if at is None else [every[i] for i in at.tolist()]

    def _make_op_rows(self, at: Any) -> list[dict[str, Any]]:
        import numpy as np

        columns = self._op_columns
        table = np.empty((len(columns["status"]) if at is None else len(at), len(columns)), dtype=object)
        for j, v in enumerate(columns.values()):
            table[:, j] = v if at is None else v[at]  # (a Python float, bool or str per cell)
        names = list(columns)
        return [dict(zip(names, row)) for row in table.tolist()]

    @property
    def changed(self) -> bool:
        """Whether any op or module differs."""
        return (bool((self._op_columns["status"] != "unchanged").any())
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


class _OpSide:
    """One report's ops as columns, for pairing (``_op_side``).

    ``text``: an object array of one column per text column (``_TEXT_AT``: ``_OP_TEXT`` and ``dims``);
    ``fields``: a float64 array of one column per field of ``OP_FIELDS`` (``_FIELD_AT``); ``collective``: per op
    ``is_collective``. Each has one row more at the end -- what an op the other side lacks reads: ``""``, 0.0,
    False -- so that index -1 reads it.
    ``by_module``: module -> its op indices sorted by roofline time then FLOPs (largest first, NaN last; ties in
    table order); ``full`` / ``loose``: per op its ``(opcode, op_name, dims)`` and ``(opcode, op_name)``."""

    __slots__ = ("text", "fields", "collective", "by_module", "full", "loose")


#: Column of each field of ``OP_FIELDS`` in ``_OpSide.fields``.
_FIELD_AT = {f: j for j, f in enumerate(OP_FIELDS)}
#: An op's ``status`` by its code in ``_op_diff``.
_STATUS = ("slower", "faster", "changed", "unchanged", "vanished", "appeared")
#: Column of each text column in ``_OpSide.text``.
_TEXT_AT = {c: j for j, c in enumerate((*_OP_TEXT, "dims"))}


def _op_side(report: Any) -> _OpSide:
    """``report``'s ops as an ``_OpSide``: text cleaned to ``str`` (a column the table lacks: ""), fields to
    float (NaN when missing or not a number); a trace op without HLO (category ``unjoined``) takes its
    instruction name as ``op_name``, with no opcode and no shape."""
    import numpy as np

    if getattr(report, "table_columns", None) is None:  # (a report's table, read by its arrays and codes)
        table = kept_table(report, "ops")
        count = len(table)
        text = {c: _text_column(table, c, count) for c in _OP_TEXT}
        modules = column_list(table, "module") if "module" in table.columns else [None] * count
    else:  # (a baseline's rows: lists)
        table = None
        columns = table_columns(report, "ops", ("module", *_OP_TEXT, *OP_FIELDS))
        count = len(next(iter(columns.values()))) if columns else 0
        text = {c: [v if isinstance(v, str) else "" for v in columns[c]] if c in columns else [""] * count
                for c in _OP_TEXT}
        modules = columns["module"] if "module" in columns else [None] * count
    if "unjoined" in text["category"]:
        for i, category in enumerate(text["category"]):
            if category == "unjoined":  # (a trace op's only identity is its name)
                text["op_name"][i], text["opcode"][i], text["result_shape"][i] = text["instruction"][i], "", ""
    memo: dict[str, str] = {}  # result shape -> dims_of (a few hundred distinct shapes in a large table)
    for shape in text["result_shape"]:
        if shape not in memo:
            memo[shape] = dims_of(shape)
    text["dims"] = [memo[shape] for shape in text["result_shape"]]
    side = _OpSide()
    side.full = list(zip(text["opcode"], text["op_name"], text["dims"]))
    side.loose = list(zip(text["opcode"], text["op_name"]))
    side.collective = np.array([*map(is_collective, text["opcode"], text["comm_kind"]), False])
    side.text = np.array([[*text[c], ""] for c in _TEXT_AT], dtype=object).T
    fields = side.fields = np.zeros((count + 1, len(OP_FIELDS)))
    if count:
        fields[:count] = np.array([_float_column(table, f, count) if table is not None else
                                   [v if type(v) is float else _num(v) for v in columns[f]] if f in columns
                                   else [math.nan] * count for f in OP_FIELDS], dtype=float).T
    t, f = fields[:count, _FIELD_AT["roofline_s"]], fields[:count, _FIELD_AT["flops"]]
    # (stable; numpy sorts NaN as equal to NaN, so -t of the NaN rows, all NaN, ties them as t_nan puts them last)
    order = np.lexsort((-f, np.isnan(f), -t, np.isnan(t))).tolist()
    modules = [str(m) for m in modules]
    by_module: dict[str, list[int]] = {}
    if len(set(modules)) == 1:
        by_module[modules[0]] = order
    else:
        for i in order:
            by_module.setdefault(modules[i], []).append(i)
    side.by_module = by_module
    return side


def _text_column(table: Any, name: str, count: int) -> list[str]:
    """Column ``name`` of an ops table as ``str`` values ("" for any other value, and for a missing column): a
    coded column cleaned on its categories and gathered by its codes."""
    import numpy as np

    if name not in table.columns:
        return [""] * count
    coded = column_codes(table, name)
    if coded is None:
        return [v if isinstance(v, str) else "" for v in column_list(table, name)]
    codes, categories = coded
    return np.array([v if isinstance(v, str) else "" for v in categories.tolist()], dtype=object)[codes].tolist()


def _float_column(table: Any, name: str, count: int) -> Any:
    """Column ``name`` of an ops table as float64 (the stored array when it is one; NaN for a missing column,
    and, as ``_num``, for a value that is not a number)."""
    import numpy as np

    if name not in table.columns:
        return np.full(count, math.nan)
    try:
        return column_array(table, name)
    except (TypeError, ValueError):
        return np.array([_num(v) for v in column_list(table, name)], dtype=float)


def _pair(a: list[int], b: list[int], keys_a: list[Any], keys_b: list[Any]) -> tuple[list[int], list[int],
                                                                                       list[int], list[int]]:
    """Pair the ops ``a`` and ``b`` (indices, in order) whose keys are equal, in order (k-th with k-th);
    return the paired indices of each side and the leftovers of each (in order)."""
    queues: dict[Any, list[int]] = defaultdict(list)
    for j in b:
        queues[keys_b[j]].append(j)
    heads: dict[Any, int] = defaultdict(int)
    used = set()
    pa, pb, rest_a = [], [], []
    for i in a:
        k = keys_a[i]
        q = queues.get(k)
        if q is not None and heads[k] < len(q):
            j = q[heads[k]]
            heads[k] += 1
            used.add(j)
            pa.append(i)
            pb.append(j)
        else:
            rest_a.append(i)
    return pa, pb, rest_a, [j for j in b if j not in used]


def _op_diff(a: _OpSide, b: _OpSide, ia: list[int], ib: list[int], modules: list[str], measured: list[bool],
             threshold: float) -> dict[str, Any]:
    """The columns of ``Diff.ops`` (``OP_DIFF_COLUMNS``) of the op pairs ``(ia[k], ib[k])`` (-1: the side lacks
    the op) of modules ``modules[k]``, whose time is measured time where ``measured[k]`` (both sides measured
    the module), else roofline time; sorted by ``|time_delta|``, largest first, ties in pairing order, unknown
    (NaN) deltas last in pairing order (pandas' ``sort_values(ascending=False, kind="stable")``). Text as
    object arrays, numbers as float64 arrays, flags as bool arrays; an op compared against nothing reads "" and
    0.0 there."""
    import numpy as np

    ia_, ib_ = np.array(ia, dtype=np.intp), np.array(ib, dtype=np.intp)
    time_at = np.where(np.array(measured, dtype=bool), _FIELD_AT["measured_s"], _FIELD_AT["roofline_s"])
    time_a, time_b = a.fields[ia_, time_at], b.fields[ib_, time_at]
    time_delta = time_b - time_a
    unknown = np.isnan(time_delta)
    known = np.flatnonzero(~unknown)
    order = np.concatenate([known[np.argsort(-np.abs(time_delta[known]), kind="stable")], np.flatnonzero(unknown)])
    ia_, ib_, time_a, time_b, time_delta = ia_[order], ib_[order], time_a[order], time_b[order], time_delta[order]

    has_a, has_b = ia_ >= 0, ib_ >= 0
    ta, tb = a.text[ia_], b.text[ib_]  # (ops x text columns)
    ref = np.where(has_b[:, None], tb, ta)  # (B's op, else A's)
    out: dict[str, Any] = {"module": np.array(modules, dtype=object)[order]}
    for c in ("op_name", "opcode", "dims", "category"):
        out[c] = ref[:, _TEXT_AT[c]]
    for c in ("instruction", "result_shape", "dtype", "bound"):
        out[f"{c}_a"], out[f"{c}_b"] = ta[:, _TEXT_AT[c]], tb[:, _TEXT_AT[c]]
    comm_b, comm_a = tb[:, _TEXT_AT["comm_kind"]], ta[:, _TEXT_AT["comm_kind"]]
    out["comm_kind"] = np.where(comm_b == "", comm_a, comm_b)
    with np.errstate(invalid="ignore", divide="ignore"):
        va, vb = a.fields[ia_], b.fields[ib_]  # (ops x fields)
        delta = vb - va
        rel = np.divide(delta, va, out=np.full(delta.shape, math.nan), where=va != 0)
        still = np.isnan(delta) | (np.abs(delta) <= SAME * np.maximum(np.abs(va), np.abs(vb)))
        for f, j in _FIELD_AT.items():
            out[f"{f}_a"], out[f"{f}_b"] = va[:, j], vb[:, j]
            out[f"{f}_delta"], out[f"{f}_rel"] = delta[:, j], rel[:, j]
        out["time_a"], out["time_b"], out["time_delta"] = time_a, time_b, time_delta
        paired = has_a & has_b
        reshaped = paired & (out["dims"] != ta[:, _TEXT_AT["dims"]])
        bound_changed = paired & (out["bound_a"] != out["bound_b"])
        out["reshaped"], out["bound_changed"] = reshaped, bound_changed
        roof_a = va[:, _FIELD_AT["roofline_s"]]
        out["significant"] = has_a & (a.collective[ia_] | ((roof_a > 0) & (roof_a >= threshold)))
        timed = ~unknown[order] & (np.abs(time_delta) > SAME * np.maximum(np.abs(time_a), np.abs(time_b)))
    status = np.where(timed, np.where(time_b > time_a, 0, 1), 2)  # (codes of _STATUS)
    status[still.all(axis=1) & ~reshaped & ~bound_changed] = 3
    status[~has_b] = 4
    status[~has_a] = 5
    out["status"] = np.array(_STATUS, dtype=object)[status]
    return {c: out[c] for c in OP_DIFF_COLUMNS}


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


def _collective_rows(module: str, a: _OpSide, ops_a: list[int], b: _OpSide,
                     ops_b: list[int]) -> list[dict[str, Any]]:
    stats: dict[str, list[float]] = {}
    for side, ops, at in ((0, ops_a, a), (1, ops_b, b)):
        collective, kinds = at.collective, at.text[:, _TEXT_AT["comm_kind"]]
        wire = at.fields[:, _FIELD_AT["wire_bytes"]]
        for i in ops:
            if collective[i]:
                s = stats.setdefault(kinds[i], [0, 0, 0.0, 0.0])
                s[side] += 1
                w = float(wire[i])
                s[2 + side] += 0.0 if math.isnan(w) else w
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
    import numpy as np

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
    side_a, side_b = _op_side(a), _op_side(b)

    ia: list[int] = []
    ib: list[int] = []
    op_modules: list[str] = []
    measured: list[bool] = []
    module_rows: list[dict[str, Any]] = []
    collective_rows: list[dict[str, Any]] = []
    every = [*pairs, *((m, "") for m in only_a), *(("", m) for m in only_b)]
    for ma, mb in every:
        oa = side_a.by_module.get(ma, []) if ma else []
        ob = side_b.by_module.get(mb, []) if mb else []
        name = mb or ma
        both_measured = (bool(oa) and not np.isnan(side_a.fields[oa, _FIELD_AT["measured_s"]]).all()
                         and bool(ob) and not np.isnan(side_b.fields[ob, _FIELD_AT["measured_s"]]).all())
        pa, pb, left_a, left_b = _pair(oa, ob, side_a.full, side_b.full)
        qa, qb, left_a, left_b = _pair(left_a, left_b, side_a.loose, side_b.loose)
        ia += pa + qa + left_a + [-1] * len(left_b)
        ib += pb + qb + [-1] * len(left_a) + left_b
        k = len(pa) + len(qa) + len(left_a) + len(left_b)
        op_modules += [name] * k
        measured += [both_measured] * k
        module_rows.append(_module_row(ma, mb, rows_a, rows_b))
        collective_rows.extend(_collective_rows(name, side_a, oa, side_b, ob))
    op_columns = _op_diff(side_a, side_b, ia, ib, op_modules, measured, threshold)
    return Diff(a_label, b_label, op_columns, module_rows, collective_rows, a.chip, notes, significant, parsed)
