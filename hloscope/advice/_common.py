"""What every advice rule shares: the ``Advice`` record, the ops table's columns, significance, and reading a
matmul's shapes from the HLO.

Advice is computed from the scored tables of a ``Report`` (and, where a rule needs an op's shapes or its
neighbours, the parsed modules the report keeps); nothing is re-parsed or re-scored. The rules read the ops table
by columns (``OpsColumns``) from the table as the report keeps it, so that a static report's advice -- part of
its JSON -- needs no DataFrame and no pandas (``hloscope report --format json``).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Iterator

from hloscope._record import FrozenRecord

if TYPE_CHECKING:
    import pandas as pd

    from hloscope.hlo import HloComputation, HloInstruction, HloModule

#: An op (or a group of ops) is worth advice when it takes at least this share of its module's time.
SIGNIFICANT_SHARE = 0.05


class Advice(FrozenRecord):
    """One piece of advice.

    Attributes:
        rule: the rule's id (``memory-bound-matmul``, ...).
        module: the HLO module.
        ops: the instruction(s) it is about, comma-joined.
        evidence: the numbers from the tables that triggered it, in words.
        action: what to change, with the number the rule computed (a dimension, a dtype, a schedule).
        gain_s: roofline (or measured) seconds per module run the change could save at most: an upper bound.
        gain_basis: how ``gain_s`` was computed, in words.
        source: where the rule comes from (book part and section, XLA/JAX docs).

    Immutable (``hloscope._record.FrozenRecord``: compared, hashed and printed by these fields).
    """

    __slots__ = ("rule", "module", "ops", "evidence", "action", "gain_s", "gain_basis", "source")
    rule: str
    module: str
    ops: str
    evidence: str
    action: str
    gain_s: float
    gain_basis: str
    source: str

    def __init__(self, rule: str, module: str, ops: str, evidence: str, action: str, gain_s: float,
                 gain_basis: str, source: str) -> None:
        self._init_fields(rule, module, ops, evidence, action, gain_s, gain_basis, source)


class OpsColumns:
    """A report's ops table as the rules read it: each column once, by name, from the table the report keeps
    (``Report.table("ops")``: a DataFrame, or the columns a static analysis keeps; ``hloscope._columns``), rows by
    position (0 to ``len - 1``, the table's order, as its ``RangeIndex`` numbers them).

    ``column(name)``: the column's values as Python objects (``column_list``); ``array(name)``: a float column as a
    float64 array; ``row(i)``: row ``i`` as a mapping that reads each column it is asked for (the values
    ``DataFrame.loc[i]`` gives: Python floats, ints and strings). Raises KeyError for a column the table lacks.
    """

    __slots__ = ("table", "_lists", "_arrays")

    def __init__(self, report: Any) -> None:
        from hloscope._columns import kept_table

        self.table = kept_table(report, "ops")
        self._lists: dict[str, list] = {}
        self._arrays: dict[str, Any] = {}

    def __len__(self) -> int:
        return len(self.table)

    def column(self, name: str) -> list:
        found = self._lists.get(name)
        if found is None:
            from hloscope._columns import column_list

            found = self._lists[name] = column_list(self.table, name)
        return found

    def array(self, name: str) -> Any:
        found = self._arrays.get(name)
        if found is None:
            from hloscope._columns import column_array

            found = self._arrays[name] = column_array(self.table, name)
        return found

    def equal(self, name: str, value: str) -> Any:
        """A bool array: rows whose column ``name`` equals ``value`` (by the column's codes where it keeps them:
        its few distinct strings compared, not every row's)."""
        from itertools import repeat
        from operator import eq

        import numpy as np

        from hloscope._columns import column_codes

        coded = column_codes(self.table, name)
        if coded is not None:
            codes, categories = coded
            hits = np.fromiter(map(eq, categories.tolist(), repeat(value)), bool, len(categories))
            return hits[codes]
        column = self.column(name)
        return np.fromiter(map(eq, column, repeat(value)), bool, len(column))

    def row(self, i: int) -> _Row:
        return _Row(self, i)


class _Row:
    """Row ``i`` of an ``OpsColumns``, read column by column (``row["roofline_s"]``): one value, not the column's
    list (a rule reads a few rows; the lists of a corpus module's float columns were 14 M instructions of its
    report)."""

    __slots__ = ("_ops", "_i")

    def __init__(self, ops: OpsColumns, i: int) -> None:
        self._ops, self._i = ops, i

    def __getitem__(self, name: str) -> Any:
        listed = self._ops._lists.get(name)
        if listed is not None:
            return listed[self._i]
        from hloscope._columns import column_value

        return column_value(self._ops.table, name, self._i)


def time_column(ops: OpsColumns) -> str:
    """``measured_s`` for a traced report, else ``roofline_s``."""
    import numpy as np

    return "measured_s" if (~np.isnan(ops.array("measured_s"))).any() else "roofline_s"


def module_totals(ops: OpsColumns, column: str) -> Any:
    """Each row's module total of ``column`` (a float64 array beside the rows): the exact sum (``math.fsum``) of
    the module's non-NaN values -- the same whatever the row order or the library (pandas' groupby sum, used
    before, moves its last bit with the pandas version and with NaN in the column)."""
    import numpy as np

    values = ops.array(column)
    modules = ops.column("module")
    known = values[~np.isnan(values)] if len(set(modules)) == 1 else None
    if known is not None:
        return np.full(len(values), math.fsum(known.tolist()))
    sums: dict[str, list[float]] = {}
    for m, v in zip(modules, values.tolist()):
        if v == v:
            sums.setdefault(m, []).append(v)
    total = {m: math.fsum(vs) for m, vs in sums.items()}
    return np.array([total.get(m, 0.0) for m in modules], dtype=float)


def share_of_module(ops: OpsColumns, column: str, totals: Any) -> Any:
    """``column / totals`` where the total is positive, else 0.0; a NaN value's share is 0.0 (a float64 array)."""
    import numpy as np

    with np.errstate(divide="ignore", invalid="ignore"):
        share = ops.array(column) / np.where(totals > 0, totals, np.nan)
    return np.where(np.isnan(share), 0.0, share)


def shares(ops: OpsColumns) -> Any:
    """Each op's share of its module's total time (``time_column``): a float64 array beside the rows."""
    col = time_column(ops)
    return share_of_module(ops, col, module_totals(ops, col))


def picked(mask: Any) -> list[int]:
    """The rows (positions, in order) where the bool array ``mask`` holds."""
    import numpy as np

    return np.flatnonzero(mask).tolist()


def modules_by_name(report: Any) -> dict[str, HloModule]:
    return {m.name: m for m in getattr(report, "hlo_modules", None) or ()}


def row_instruction(modules: dict[str, HloModule], row: Any
                    ) -> tuple[HloModule, HloComputation, HloInstruction] | None:  # (an OpsColumns row)
    """The module, computation and instruction an ops-table row names; None when the report holds no such
    module (a trace op without HLO) or the names are not in it."""
    module = modules.get(row["module"])
    if module is None:
        return None
    try:
        comp = module.computation(row["computation"])
        return module, comp, comp.instruction(row["instruction"])
    except KeyError:
        return None


def is_scheduled(module: HloModule) -> bool:
    """``is_scheduled=true`` in the module header: XLA's optimized, scheduled module (fusion decisions made, the
    printed order the run order). Before optimization, unfused elementwise ops and the printed order say nothing
    about what will run."""
    return str(module.header_attributes.get("is_scheduled", "")).lower() == "true"


class MatmulShape(FrozenRecord):
    """A dot as the roofline sees it: ``[batch..., m, k] x [batch..., k, n]`` folded to sizes and bytes.

    Attributes:
        batch, m, k, n: products of the batch, lhs-free, contracting and rhs-free dimensions.
        lhs_bytes, rhs_bytes, out_bytes: bytes of each operand and of the result.
        flops: ``2 * batch * m * k * n``.

    Immutable (``hloscope._record.FrozenRecord``: compared, hashed and printed by the fields).
    """

    __slots__ = ("batch", "m", "k", "n", "lhs_bytes", "rhs_bytes", "out_bytes")
    batch: int
    m: int
    k: int
    n: int
    lhs_bytes: int
    rhs_bytes: int
    out_bytes: int

    def __init__(self, batch: int, m: int, k: int, n: int, lhs_bytes: int, rhs_bytes: int, out_bytes: int) -> None:
        self._init_fields(batch, m, k, n, lhs_bytes, rhs_bytes, out_bytes)

    @property
    def flops(self) -> int:
        return 2 * self.batch * self.m * self.k * self.n


def dot_in(module: HloModule, computation: str, inst: HloInstruction) -> MatmulShape | None:
    """The dot an op is (a ``dot``) or holds (a fusion: its largest dot by FLOPs), or None (a convolution, a
    custom call, a dot with unknown shapes)."""
    if inst.opcode in ("dot", "convolution"):
        return _shape_of_dot(module.computation(computation), inst)
    if inst.opcode != "fusion":
        return None
    best = None
    for name in inst.called_computations.get("calls", ()):
        comp = module.computation(name)
        for i, op in enumerate(comp.opcodes):
            if op in ("dot", "convolution"):
                s = _shape_of_dot(comp, comp.instruction_at(i))
                if s is not None and (best is None or s.flops > best.flops):
                    best = s
    return best


def _shape_of_dot(comp: HloComputation, inst: HloInstruction) -> MatmulShape | None:
    """A dot's sizes; a convolution's when it is a matmul -- every spatial dimension of its kernel of size 1, no
    feature groups (libtpu writes matmuls as ``convolution`` with ``dim_labels=bf_io->bf`` inside fusions):
    ``m`` the input's batch and spatial sizes, ``k`` its feature size, ``n`` the kernel's output features."""
    try:
        lhs, rhs = (comp.shape_of(o) for o in inst.operands[:2])
    except (KeyError, ValueError, IndexError):
        return None
    attrs = inst.attributes
    if inst.opcode == "convolution":
        dn = attrs.get("dim_labels")
        if dn is None or not lhs.is_array or not rhs.is_array or attrs.get("feature_group_count", 1) != 1 \
                or attrs.get("batch_group_count", 1) != 1 \
                or any(rhs.dims[i] != 1 for i in dn.kernel_spatial_dimensions):
            return None
        m = math.prod(d for i, d in enumerate(lhs.dims) if i != dn.input_feature_dimension)
        return MatmulShape(1, m, lhs.dims[dn.input_feature_dimension], rhs.dims[dn.kernel_output_feature_dimension],
                           lhs.size_bytes, rhs.size_bytes, inst.shape.size_bytes)
    lc, rc = tuple(attrs.get("lhs_contracting_dims", ())), tuple(attrs.get("rhs_contracting_dims", ()))
    lb, rb = tuple(attrs.get("lhs_batch_dims", ())), tuple(attrs.get("rhs_batch_dims", ()))
    if not lhs.is_array or not rhs.is_array:
        return None
    ld, rd = lhs.dims, rhs.dims
    batch = math.prod(ld[i] for i in lb)
    k = math.prod(ld[i] for i in lc)
    m = math.prod(d for i, d in enumerate(ld) if i not in lc and i not in lb)
    n = math.prod(d for i, d in enumerate(rd) if i not in rc and i not in rb)
    return MatmulShape(batch, m, k, n, lhs.size_bytes, rhs.size_bytes, inst.shape.size_bytes)


def users(comp: HloComputation, name: str, through: frozenset[str] = frozenset(
        {"get-tuple-element", "bitcast", "copy", "reshape", "all-reduce-done", "all-gather-done",
         "collective-permute-done", "async-done"})) -> Iterator[int]:
    """Indices of the instructions of ``comp`` that use ``name``, looking through layout-only ops and dones."""
    seen = {name}
    frontier = [name]
    opcodes = comp.opcodes
    operand_lists = comp.operand_lists(range(len(opcodes)))
    while frontier:
        cur = frontier.pop()
        for i, operands in enumerate(operand_lists):
            if cur in operands:
                n = comp.names[i]
                if opcodes[i] in through:
                    if n not in seen:
                        seen.add(n)
                        frontier.append(n)
                else:
                    yield i
