"""Per-op and per-module tables (pandas) of costs, roofline scores and measured times. Presentation only:
the numbers come from ``hloscope.cost`` and ``hloscope.roofline.score``.

Every number is a total per module run (for traces: per step, i.e. one execution of the entry computation with
its loops), in FLOPs, bytes and seconds.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import cache
from array import array
from itertools import compress
from operator import add, attrgetter
from typing import TYPE_CHECKING, Mapping

from hloscope._columns import (CodedStrings, StringCodes, column_array, column_codes, column_list,
                               frame_from_columns, object_array, table_from_columns)
from hloscope._compiled import PURE_PYTHON, compiled

if TYPE_CHECKING:
    import pandas as pd

    from hloscope._columns import ColumnTable
    from hloscope.cost import ModuleCost
    from hloscope.roofline.chips import ChipSpec

#: The ops table's columns, in order: a contract (docs/report.md). No name is an attribute of
#: ``pandas.DataFrame`` (``report.ops.caveats`` is the column; ``flags``, ``count`` and ``shape`` would be pandas'
#: own ``DataFrame.flags``, ``DataFrame.count`` and ``DataFrame.shape``): tests/report/test_column_names.py.
OP_COLUMNS = [
    "module", "computation", "instruction", "opcode", "category", "op_name", "source", "executions",
    "flops", "transcendentals", "hbm_bytes", "hbm_read_bytes", "hbm_write_bytes", "wire_bytes", "comm_kind",
    "group_size", "dtype", "intensity", "critical_intensity", "compute_s", "memory_s", "comm_s", "roofline_s",
    "bound", "measured_s", "occurrences", "step_fraction", "efficiency", "achieved_flops_per_s",
    "achieved_bytes_per_s", "lost_s", "overlap_window_s", "exposed_comm_s", "overlapped_comm_s",
    "slowest_participant_s", "caveats", "result_shape",
]

#: The modules table's columns, in order.
MODULE_COLUMNS = [
    "name", "flops", "transcendentals", "hbm_bytes", "wire_bytes", "compute_s", "memory_s", "comm_s",
    "roofline_s", "measured_s", "mfu", "cost_coverage", "dtype", "compute_bound_s", "memory_bound_s",
    "communication_bound_s", "caveats", "peak_bytes", "exposed_comm_roofline_s", "exposed_comm_s",
    "comm_hidden_fraction",
]

_COLLECTIVE = frozenset(
    "all-reduce all-gather reduce-scatter all-to-all ragged-all-to-all collective-permute collective-broadcast "
    "all-reduce-start all-gather-start collective-permute-start all-reduce-done all-gather-done "
    "collective-permute-done".split()
)
_CONTROL = frozenset({"while", "conditional", "call", "async-start", "async-update", "async-done"})
_MOVE = frozenset(
    "copy copy-start copy-done broadcast reshape transpose slice dynamic-slice dynamic-update-slice gather "
    "concatenate pad reverse iota bitcast tuple get-tuple-element parameter constant".split()
)


_FUSED_MATMUL = frozenset({"dot", "convolution"})


def category(inst, module) -> str:
    """``matmul`` (dot, convolution, or a fusion holding one), ``fusion:<kind>``, ``collective``,
    ``data-movement``, ``control``, ``custom-call``, ``reduction``, ``fft`` or ``elementwise``.

    ``fft`` is XLA's ``fft`` instruction (FFT, IFFT, RFFT, IRFFT): an O(n log n) transform costed by its own
    rule (``hloscope.cost.reduction.fft``, XLA's ``HandleFft``), not an elementwise op. XLA:CPU keeps
    ``jnp.fft.fft`` as one ``fft`` instruction (tests/roofline/test_category.py); libtpu lowers it to fusions
    holding dots (checked: ``jnp.fft.fft`` on ``c64[8,64]`` compiled deviceless for TPU v5e), which are
    ``matmul``.
    """
    op = inst.opcode
    if op == "fusion":
        for name in inst.called_computations.get("calls", ()):
            if not _FUSED_MATMUL.isdisjoint(module.computation(name).opcode_set):  # (builds no instruction)
                return "matmul"
        return f"fusion:{inst.attribute('kind', '?')}"
    return opcode_category(op)


def opcode_category(op: str) -> str:
    """``category`` of an instruction of opcode ``op`` other than ``fusion`` (the opcode alone decides)."""
    if op in ("dot", "convolution", "ragged-dot"):
        return "matmul"
    if op == "fft":
        return "fft"
    if op in _COLLECTIVE or op.startswith(("all-", "reduce-scatter", "collective-")):
        return "collective"
    if op in _MOVE:
        return "data-movement"
    if op in _CONTROL or op.endswith(("-start", "-done", "-update")):
        return "control"
    if op == "custom-call":
        return "custom-call"
    if op in ("reduce", "reduce-window", "scatter", "select-and-scatter", "sort", "map"):
        return "reduction"
    return "elementwise"


def ops_frame(costs: list[ModuleCost], chip: ChipSpec, measured: Mapping[tuple[str, str], tuple[float, float]] | None = None,
              step_s: Mapping[str, float] | None = None, all_rows: bool = False, as_table: bool = False
              ) -> pd.DataFrame:
    """One row per instruction that does work or took time.

    Args:
        costs: one ``ModuleCost`` per module.
        chip: the chip to score against.
        measured: (module name, instruction name) -> (measured seconds per step, occurrences per step), from a
            trace; None for a static report.
        step_s: module name -> measured step time (seconds), for ``step_fraction``.
        all_rows: keep every instruction, also those without work or time (what a trace of any host may name:
            ``hloscope.pod`` classifies events with it before any time is measured).
        as_table: return the ``_columns.ColumnTable`` the DataFrame is made of (``Report`` makes it on first
            use), or the DataFrame where its columns are not plain or there are no rows.

    Returns:
        DataFrame with ``OP_COLUMNS``, sorted by measured time (traces) or roofline time (static), largest
        first.

    Built by columns (issue #16; docs/architecture.md): the per-instruction fields are gathered with C-level
    maps, the common row (no cost flag, no wire bytes, exact float inputs) is scored by numpy over whole
    columns with the formulas of ``score.score`` in the same order (so the same floats; the other rows go
    through ``score.score`` itself), dtypes, categories and shape texts are memoized per distinct key, and
    metadata and fusion kinds are read without decoding the other attributes. The columns of a few distinct
    strings are made as codes into them (``_columns.CodedStrings``): the table keeps the codes, which the modules
    table's sums by dtype and bound class and the overlap's test of which rows communicate read instead of the
    strings.
    """
    import numpy as np

    from hloscope.roofline.score import devices_per_physical_chip

    measured = measured or {}
    per_chip = devices_per_physical_chip(chip)
    parts = [_module_columns(mc, chip, per_chip, measured, all_rows) for mc in costs]
    frame: dict = {}
    for c in _BUILT_COLUMNS:  # (float64 arrays stay arrays: pandas takes them as they are)
        values = [part[c] for part in parts]
        if values and all(isinstance(v, np.ndarray) for v in values):
            frame[c] = values[0] if len(values) == 1 else np.concatenate(values)
        elif len(values) == 1 and isinstance(values[0], (list, CodedStrings)) and not (measured and c == "module"):
            frame[c] = values[0]  # (one module: its list, or its coded strings, as they are)
        else:  # (several modules, or the module names a trace's rows are joined on: lists)
            frame[c] = [x for v in values for x in (v.tolist() if isinstance(v, (np.ndarray, CodedStrings)) else v)]
    joined = len(frame["module"])
    known = set(zip(frame["module"], frame["instruction"])) if measured else set()
    unjoined = [(m, op, sec, occ) for (m, op), (sec, occ) in measured.items() if (m, op) not in known]
    if unjoined:
        # Trace ops that name no instruction of any module: listed, never dropped.
        for c in _BUILT_COLUMNS:
            values = frame[c].tolist() if isinstance(frame[c], (np.ndarray, CodedStrings)) else frame[c]
            frame[c] = values + [math.nan] * len(unjoined)
        for c in ("computation", "opcode", "op_name", "source", "comm_kind", "dtype", "bound", "result_shape"):
            frame[c][joined:] = [""] * len(unjoined)
        frame["module"][joined:] = [u[0] for u in unjoined]
        frame["instruction"][joined:] = [u[1] for u in unjoined]
        frame["category"][joined:] = ["unjoined"] * len(unjoined)
        frame["caveats"][joined:] = ["not-in-hlo"] * len(unjoined)
        frame["measured_s"][joined:] = [u[2] for u in unjoined]
        frame["occurrences"][joined:] = [u[3] for u in unjoined]
    total = joined + len(unjoined)
    for c in ("overlap_window_s", "exposed_comm_s", "overlapped_comm_s", "slowest_participant_s"):
        frame[c] = np.full(total, math.nan)
    if measured:
        _measured_columns(frame, step_s, joined)
    else:
        for c in _MEASURED_COLUMNS:
            frame[c] = np.full(total, math.nan)
    order = descending_order(np.asarray(frame["measured_s" if measured else "roofline_s"], dtype=float))
    columns = {c: frame[c] for c in OP_COLUMNS}
    if as_table and total:  # (the columns of NaN alone are the same in any order: not taken)
        return table_from_columns(columns, order, _NAN_COLUMNS if measured else _NAN_COLUMNS_STATIC)
    df = frame_from_columns(columns, order)
    if not total:
        df = df.astype(object)  # (an empty table has the dtypes of one built from records)
    return df


def descending_order(key):
    """The row order of ``sort_values(ascending=False, na_position="last", kind="stable")`` on ``key`` (pandas'
    ``nargsort``: largest first, ties and NaNs each in table order, NaNs last); None when the rows are in that
    order already."""
    import numpy as np

    missing = np.isnan(key)
    index = np.arange(len(key))
    known = index[~missing][::-1]  # reversed, sorted stably ascending, reversed: descending, ties in order
    order = np.concatenate([known[np.argsort(key[known], kind="stable")][::-1], index[missing]])
    return None if np.array_equal(order, index) else order


#: Columns ``_module_columns`` makes, in ``OP_COLUMNS`` order.
_BUILT_COLUMNS = (
    "module", "computation", "instruction", "opcode", "category", "op_name", "source", "executions", "flops",
    "transcendentals", "hbm_bytes", "hbm_read_bytes", "hbm_write_bytes", "wire_bytes", "comm_kind", "group_size",
    "dtype", "intensity", "critical_intensity", "compute_s", "memory_s", "comm_s", "roofline_s", "bound",
    "measured_s", "occurrences", "caveats", "result_shape",
)
#: Columns computed from ``measured_s`` (NaN in a static report).
_MEASURED_COLUMNS = ("step_fraction", "efficiency", "achieved_flops_per_s", "achieved_bytes_per_s", "lost_s")
#: Columns ``ops_frame`` makes of NaN alone (filled later, if at all, by ``steps.columns.add_overlap_columns``),
#: and those of a static report (no measured time).
_NAN_COLUMNS = frozenset({"overlap_window_s", "exposed_comm_s", "overlapped_comm_s", "slowest_participant_s"})
_NAN_COLUMNS_STATIC = _NAN_COLUMNS | frozenset(_MEASURED_COLUMNS) | {"measured_s", "occurrences"}
#: Largest integer every float holds exactly: below it, a sum or quotient of Python ints equals that of their
#: float conversions, so the column arithmetic gives Python's floats.
_EXACT_INT = 2**53

_SHAPE = attrgetter("shape")
_COST = attrgetter("cost")
_INSTRUCTION = attrgetter("instruction")
_COUNT = attrgetter("count")
_FLOPS = attrgetter("flops")
_TRANSCENDENTALS = attrgetter("transcendentals")
_READ = attrgetter("bytes_read")
_WRITTEN = attrgetter("bytes_written")
_COMM = attrgetter("comm_bytes")
_COMPUTATION = attrgetter("computation")
_NAME = attrgetter("name")
_OPCODE = attrgetter("opcode")
_COMM_KIND = attrgetter("comm_kind")
_GROUP_SIZE = attrgetter("group_size")


def _measured_columns(frame: dict, step_s: Mapping[str, float] | None, joined: int) -> None:
    """``step_fraction``, ``efficiency``, achieved rates and ``lost_s`` from ``measured_s``, by columns: NaN for a
    row without a measured time and for the trace's unjoined ops (after the first ``joined`` rows). Same
    divisions and subtraction as one row at a time, so the same floats."""
    import numpy as np

    measured_s = np.asarray(frame["measured_s"][:joined], dtype=float)
    timed = ~np.isnan(measured_s)
    positive = timed & (measured_s > 0)
    roofline = np.asarray(frame["roofline_s"][:joined], dtype=float)
    step = np.array([(step_s or {}).get(m) or math.nan for m in frame["module"][:joined]], dtype=float)
    pad = np.full(len(frame["module"]) - joined, math.nan)
    with np.errstate(divide="ignore", invalid="ignore"):
        frame["step_fraction"] = np.concatenate([np.where(timed, measured_s / step, math.nan), pad])
        frame["efficiency"] = np.concatenate([np.where(positive, roofline / measured_s, math.nan), pad])
        frame["achieved_flops_per_s"] = np.concatenate([np.where(
            positive, np.asarray(frame["flops"][:joined], dtype=float) / measured_s, math.nan), pad])
        frame["achieved_bytes_per_s"] = np.concatenate([np.where(
            positive, np.asarray(frame["hbm_bytes"][:joined], dtype=float) / measured_s, math.nan), pad])
        frame["lost_s"] = np.concatenate([np.where(timed, measured_s - roofline, math.nan), pad])


def _module_columns(mc: ModuleCost, chip: ChipSpec, per_chip: int, measured: Mapping, all_rows: bool) -> dict:
    """The ``_BUILT_COLUMNS`` of one module's rows: lists, float arrays, and ``_columns.CodedStrings`` for the
    columns of a few distinct strings (module, opcode, category, comm_kind, dtype, bound, caveats, result
    shape), made once per distinct string and spread over the rows by codes."""
    import numpy as np

    from hloscope.parsers import metadata_column
    from hloscope.roofline.score import score

    module = mc.module
    mname = module.name
    within_chip = per_chip > 1 and module.replica_count * module.num_partitions <= per_chip
    rows = mc.rows if type(mc.rows) is list else list(mc.rows)
    timings = [measured.get((mname, r.instruction.name)) for r in rows] if measured else None
    rows, insts, costs, numbers, timings, fields = (
        _table_columns if PURE_PYTHON else c_table_columns() or _table_columns)(rows, timings, all_rows)
    computations, names, opcodes, shapes, comm_kinds, group_sizes = fields
    count = len(rows)
    n, flops_f, trans_f, reads_f, writes_f, comms_f, work_f, hbm_f, plain = (
        np.frombuffer(numbers, float).reshape(_NUMBERS, count))
    opcode_codes, opcode_names = _coded(opcodes)  # (by value: equal opcodes need not be one object)
    lookups = _RowLookups(module, insts, rows, shapes, opcode_codes, opcode_names)
    dtype_codes, dtype_names = lookups.dtype_codes()
    peaks = [chip.peak_flops_for(d) for d in dtype_names]
    peak = np.array([p[0] for p in peaks], dtype=float)[dtype_codes]
    # Rows numpy scores: no cost flag (precision passes, caveats), no wire bytes (link choice), and inputs
    # whose Python arithmetic the float columns reproduce exactly (finite, below 2**53; not negative, where
    # score()'s max with the 0.0 comm time would differ from the max of two).
    simple = ((plain == 1.0)
              & (comms_f == 0)
              & (work_f >= 0) & (hbm_f >= 0) & (work_f < _EXACT_INT) & (hbm_f < _EXACT_INT)
              & (np.abs(flops_f) < _EXACT_INT) & (np.abs(trans_f) < _EXACT_INT))
    compute_s = work_f / peak  # score(): (passes * flops + transcendentals) / peak, passes = 1
    memory_s = hbm_f / chip.hbm_bytes_per_s
    comm_s = np.zeros(count)
    roofline_s = np.maximum(compute_s, memory_s)
    with np.errstate(divide="ignore", invalid="ignore"):
        intensity = np.where(hbm_f != 0, work_f / hbm_f, np.where(work_f != 0, math.inf, 0.0))
    critical = np.array([p[0] / chip.hbm_bytes_per_s for p in peaks], dtype=float)[dtype_codes]
    # bound: "compute" where the compute time is the roofline time and not 0, else "memory" (score(): a tie
    # goes to compute, no time at all to memory); caveats: "peak-fallback" where the dtype has no peak of its own.
    bounds = StringCodes(["memory", "compute"])
    bound = ((roofline_s != 0.0) & (roofline_s == compute_s)).astype(np.intp)
    caveat_names = StringCodes()
    caveats = np.array([caveat_names.code("peak-fallback" if p[1] else "") for p in peaks], dtype=np.intp)[
        dtype_codes]
    # The other rows through score() itself, once per distinct (cost, dtype) -- a collective repeats layer after
    # layer --, its fields spread over the rows by index.
    others = np.flatnonzero(~simple)
    if len(others):
        # (id(cost), dtype code) -> the row of its fields in ``fields``: rows share cost objects (``costs`` keeps
        # each alive), and a key of the cost itself hashed its eight fields for every row.
        scored: dict = {}
        fields: list[tuple] = []
        which = []
        for k, d in zip(others.tolist(), dtype_codes[others].tolist()):
            key = (id(costs[k]), d)
            j = scored.get(key)
            if j is None:
                s = score(costs[k], chip, dtype_names[d], within_chip)
                j = scored[key] = len(fields)
                fields.append((s.compute_s, s.memory_s, s.comm_s, s.roofline_s, s.intensity, s.critical_intensity,
                               bounds.code(s.bound.value),
                               caveat_names.code(",".join(sorted(costs[k].flags | s.flags)))))
            which.append(j)
        taken = np.array(which, dtype=np.intp)
        columns = list(zip(*fields))
        for target, values, kind in ((compute_s, columns[0], float), (memory_s, columns[1], float),
                                     (comm_s, columns[2], float), (roofline_s, columns[3], float),
                                     (intensity, columns[4], float), (critical, columns[5], float),
                                     (bound, columns[6], np.intp), (caveats, columns[7], np.intp)):
            target[others] = np.array(values, dtype=kind)[taken]
    # (each distinct metadata object described once: the decoder makes one per distinct metadata text)
    metadata_codes, distinct = _identity_coded(metadata_column(insts))
    op_names = object_array([md.op_name if md else "" for md in distinct])
    sources = object_array(_sources(distinct))
    comm_codes, comm_names = _identity_coded(comm_kinds)
    out = {
        "module": CodedStrings(np.zeros(count, dtype=np.intp), object_array([mname])),
        "computation": CodedStrings(*_identity_coded_strings(computations)), "instruction": names,
        "opcode": CodedStrings(opcode_codes, object_array(opcode_names)),
        "category": lookups.categories(opcode_codes, opcode_names),
        "op_name": CodedStrings(metadata_codes, op_names), "source": CodedStrings(metadata_codes, sources),
        "executions": n, "flops": flops_f * n, "transcendentals": trans_f * n,
        "hbm_bytes": hbm_f * n, "hbm_read_bytes": reads_f * n, "hbm_write_bytes": writes_f * n,
        "wire_bytes": comms_f * n, "comm_kind": CodedStrings(comm_codes, object_array(comm_names)),
        "group_size": _int_column(group_sizes), "dtype": CodedStrings(dtype_codes, object_array(dtype_names)),
        "intensity": intensity, "critical_intensity": critical, "compute_s": compute_s * n,
        "memory_s": memory_s * n, "comm_s": comm_s * n, "roofline_s": roofline_s * n,
        "bound": CodedStrings(bound, bounds.array()), "caveats": CodedStrings(caveats, caveat_names.array()),
        "result_shape": lookups.shape_texts(),
        "measured_s": [t[0] if t else math.nan for t in timings] if measured else np.full(count, math.nan),
        "occurrences": [t[1] if t else math.nan for t in timings] if measured else np.full(count, math.nan),
    }
    return out


def _sources(distinct: list) -> list[str]:
    """``md.source`` of each metadata of ``distinct`` (``""`` for None), each string made once per (file, line):
    a model's thousands of distinct metadata values name a few dozen source lines (gemma2_2b_keras_jax: 5,734 of
    69), and formatting the line number took ~0.3 us a value."""
    made: dict[tuple, str] = {}
    out = []
    for md in distinct:
        if md is None or not md.source_file:
            out.append("")
            continue
        key = (md.source_file, md.source_line)
        text = made.get(key)
        if text is None:
            text = made[key] = md.source
        out.append(text)
    return out


#: The numeric columns ``table_columns`` gives, in order (``_NUMBERS`` of them).
_NUMBER_COLUMNS = ("count", "flops", "transcendentals", "bytes_read", "bytes_written", "comm_bytes", "work", "hbm",
                   "plain")
_NUMBERS = len(_NUMBER_COLUMNS)


def _table_columns(rows: list, timings: list | None, keep_all: bool) -> tuple:
    """The rows the table keeps and their fields: ``table_columns`` of ``_cost_walk.c``, in Python (its
    specification): every row with ``keep_all``, else a row whose cost has flags, or whose timing (``timings``,
    beside ``rows``, or None) is not None, or which does any work or moves any byte. Returns (rows, instructions,
    costs, numbers, the kept timings or None, fields): ``numbers`` holds the ``_NUMBER_COLUMNS`` of the kept rows
    as native doubles, column after column (bytes): count, the five cost fields, flops + transcendentals, read +
    written bytes (each sum made as Python adds, then converted by ``float()``), and 1.0 where the cost has no
    flags, else 0.0; ``fields`` holds lists of the kept rows' computations, their instructions' names, opcodes
    and shapes, and their costs' comm kinds and group sizes."""
    if not keep_all:
        keep = [k for k, r in enumerate(rows)
                if r.cost.flags or (timings is not None and timings[k] is not None)
                or (r.cost.flops + r.cost.transcendentals + r.cost.bytes_read + r.cost.bytes_written
                    + r.cost.comm_bytes) != 0]
        if len(keep) < len(rows):
            rows = [rows[k] for k in keep]
            if timings is not None:
                timings = [timings[k] for k in keep]
    costs = list(map(_COST, rows))
    flops = list(map(_FLOPS, costs))
    trans = list(map(_TRANSCENDENTALS, costs))
    reads = list(map(_READ, costs))
    writes = list(map(_WRITTEN, costs))
    numbers = array("d")
    for column in (list(map(_COUNT, rows)), flops, trans, reads, writes, list(map(_COMM, costs)),
                   list(map(add, flops, trans)), list(map(add, reads, writes))):
        numbers.extend(map(float, column))
    numbers.extend(0.0 if c.flags else 1.0 for c in costs)
    insts = list(map(_INSTRUCTION, rows))
    fields = (list(map(_COMPUTATION, rows)), list(map(_NAME, insts)), list(map(_OPCODE, insts)),
              list(map(_SHAPE, insts)), list(map(_COMM_KIND, costs)), list(map(_GROUP_SIZE, costs)))
    return rows, insts, costs, numbers.tobytes(), timings, fields


@cache
def c_exact_sum() -> Callable | None:
    """``_cost_walk.exact_sum`` (``_exact_array_sum``), or None when the extension was not built; looked up on first
    use, as ``c_table_columns``."""
    return compiled("hloscope.cost._cost_walk", "exact_sum")


@cache
def c_table_columns() -> Callable | None:
    """``_table_columns`` in C (``hloscope/cost/_cost_walk.c``), or None when the extension was not built. Looked
    up on first use: importing the extension imports ``hloscope.cost``, and the comparison engine, which reads
    only this module's helpers, imports no cost model (tests/compare/test_engine.py)."""
    return compiled("hloscope.cost._cost_walk", "table_columns")


class _RowLookups:
    """``op_dtype``, ``category`` and the shape text of each row of one module, made once per distinct key (a
    module repeats them: the same elementwise op on the same shape, layer after layer) and spread over the rows
    as codes (``_columns.CodedStrings``). An instruction's dtype is its result shape's (``score.result_dtype``),
    and its category its opcode's, except for the opcodes that read called computations or operands
    (``_READS_MORE``), which are looked up row by row."""

    __slots__ = ("module", "insts", "rows", "shape_codes", "_distinct_shapes", "_more")

    def __init__(self, module, insts: list, rows: list, shapes: list, opcode_codes: np.ndarray,
                 opcode_names: list[str]):
        """``opcode_codes`` and ``opcode_names``: the rows' opcodes as ``_coded`` gives them."""
        import numpy as np

        self.module = module
        self.insts, self.rows = insts, rows
        self.shape_codes, self._distinct_shapes = _identity_coded(shapes)  # (the parser shares one per text)
        # (the rows of those opcodes found by their codes, ``_coded(opcodes)``: no string hashed per row)
        # (a gather of a mask over the codes: ``np.isin``'s own steps were ~0.2 ms of a small module's analysis)
        more = [name in _READS_MORE for name in opcode_names]
        self._more = np.flatnonzero(np.array(more, dtype=bool)[opcode_codes]).tolist() if any(more) else []

    def dtype_codes(self) -> tuple[np.ndarray, list[str]]:
        """``score.op_dtype`` of each row: (codes, dtypes)."""
        import numpy as np

        from hloscope.roofline.score import calls_matmul, op_dtype, result_dtype

        dtypes = StringCodes()
        of_type: dict = {}  # (an array's result_dtype is its element type's: read once per type)
        shape_codes = []
        for shape in self._distinct_shapes:
            element_type = shape.element_type
            if element_type in ("tuple", "token", "opaque"):
                shape_codes.append(dtypes.code(result_dtype(shape)))
                continue
            code = of_type.get(element_type)
            if code is None:
                code = of_type[element_type] = dtypes.code(result_dtype(shape))
            shape_codes.append(code)
        codes = np.array(shape_codes, dtype=np.intp)[self.shape_codes]
        found: dict = {}
        module = self.module
        shape_readers: dict = {}  # computation name -> its shape_of (a module's rows are a few computations')
        for k in self._more:
            inst = self.insts[k]
            opcode = inst.opcode
            if opcode == "fusion" and not calls_matmul(inst, module):
                continue  # (no matmul inside: op_dtype is its result's dtype, as ``codes`` holds)
            if opcode in _FUSED_MATMUL:
                computation = self.rows[k].computation
                shape_of = shape_readers.get(computation)
                if shape_of is None:
                    comp = module.computation(computation)
                    comp.name_index()  # (made once: shape_of then reads one dict, not the names one by one)
                    shape_of = shape_readers[computation] = comp.shape_of
                operand_shapes = tuple(map(shape_of, inst.operands[:2]))
                key = (opcode, *map(id, operand_shapes), id(inst.shape))  # (the parser shares one Shape a text)
                dtype = found.get(key)
                if dtype is None:
                    dtype = found[key] = op_dtype(inst, module, [shape.element_type for shape in operand_shapes])
            else:
                key = (opcode, id(inst.shape), inst.called_computations.get("calls", ()))
                dtype = found.get(key)
                if dtype is None:
                    dtype = found[key] = op_dtype(inst, module)
            codes[k] = dtypes.code(dtype)
        return codes, dtypes.values

    def categories(self, opcode_codes: np.ndarray, opcode_names: list[str]) -> CodedStrings:
        """``category(inst, module)`` of each row, from the rows' opcodes as codes."""
        import numpy as np

        names = StringCodes()
        codes = np.array([names.code(opcode_category(op)) if op != "fusion" else -1 for op in opcode_names],
                         dtype=np.intp)[opcode_codes]
        module = self.module
        for k in self._more:  # (fusions seldom share a fused computation: no memo)
            inst = self.insts[k]
            if inst.opcode == "fusion":
                codes[k] = names.code(category(inst, module))
        return CodedStrings(codes, names.array())

    def shape_texts(self) -> CodedStrings:
        """``str(inst.shape)`` of each row."""
        return CodedStrings(self.shape_codes, object_array([str(shape) for shape in self._distinct_shapes]))


def _coded(values: list) -> tuple[np.ndarray, list]:
    """(codes, distinct values in first-seen order) of a list of hashable values: ``distinct[codes[i]]`` is
    ``values[i]``. Coded by identity first (``_identity_coded``: one C pass, no hashing), then the few distinct
    objects by value: the first object of each value is the first row of that value, so the order and the objects
    kept are those of ``dict.fromkeys(values)`` (a parse shares one string per distinct opcode, but not every
    path does)."""
    import numpy as np

    codes, objects = _identity_coded(values)
    distinct = list(dict.fromkeys(objects))
    if len(distinct) == len(objects):
        return codes, distinct
    index = dict(zip(distinct, range(len(distinct))))
    return np.fromiter(map(index.__getitem__, objects), np.intp, len(objects))[codes], distinct


def _int_column(values: list) -> np.ndarray | list:
    """``values`` as the int64 array ``_columns.frame_from_columns`` makes of a list of ints, where each is an
    ``int`` that fits; else the list as it is (the frame then reads it as before). Coded by identity first: a
    module's rows hold a few group sizes, shared by their costs, and a type check and conversion per row took
    ~1 ms of llama's table."""
    import numpy as np

    if not values:
        return values
    codes, objects = _identity_coded(values)
    if any(type(v) is not int for v in objects):
        return values
    try:
        table = np.array(objects, dtype=np.int64)
    except OverflowError:
        return values
    return table[codes]


def py_identity_codes(values: list) -> tuple[bytearray, list]:
    """(codes, distinct): each value's number among the distinct objects of ``values`` -- by identity, first seen
    first -- as native intp in a bytearray, and those objects (``distinct[codes[i]] is values[i]``): the
    specification of ``identity_codes`` in ``_cost_walk.c``. Two equal objects that are not the same object get
    two numbers (a category twice): the values read back are the same."""
    import numpy as np

    index: dict[int, int] = {}
    distinct: list = []
    codes = []
    for value in values:
        found = index.get(id(value))
        if found is None:
            found = index[id(value)] = len(distinct)
            distinct.append(value)
        codes.append(found)
    return bytearray(np.array(codes, dtype=np.intp).tobytes()), distinct


@cache
def c_identity_codes() -> Callable | None:
    """``identity_codes`` of ``hloscope/cost/_cost_walk.c``, or None when the extension was not built."""
    return compiled("hloscope.cost._cost_walk", "identity_codes")


def _identity_coded(values: list) -> tuple[np.ndarray, list]:
    """(codes as an intp array, distinct objects) of ``values``, by identity (``py_identity_codes``)."""
    import numpy as np

    codes, distinct = (py_identity_codes if PURE_PYTHON else c_identity_codes() or py_identity_codes)(values)
    return np.frombuffer(codes, dtype=np.intp), distinct


def _identity_coded_strings(values: list) -> tuple[np.ndarray, np.ndarray]:
    """``_identity_coded`` with the distinct objects as an object array: a ``CodedStrings`` of a column whose rows
    share a few objects (a row's computation name is its computation's: a module's rows name a few)."""
    codes, distinct = _identity_coded(values)
    return codes, object_array(distinct)


#: Opcodes whose dtype or category reads more than the opcode and result shape: matmuls (operand types, called
#: computations) and fusions (the fused computation, the fusion kind).
_READS_MORE = frozenset({"fusion", "dot", "convolution", "ragged-dot"})


def modules_frame(costs: list[ModuleCost], ops: ColumnTable | pd.DataFrame, chip: ChipSpec,
                  step_s: Mapping[str, float] | None = None, schedule_known: bool = False, as_table: bool = False
                  ) -> pd.DataFrame:
    """One row per module: totals of ``ops`` (a DataFrame or its ``ColumnTable``), the measured step time, MFU,
    and time by bound class. ``as_table``: the ``ColumnTable`` of the DataFrame (``ops_frame``).

    ``schedule_known``: the modules' HLO is at hand, so ``steps.columns.add_overlap_columns`` fills
    ``exposed_comm_roofline_s`` from their schedules; where no op of the table communicates
    (``communicates``), the column is made 0.0 at once, as that function would set it (a column set afterwards
    is a pandas assignment: ~0.1 ms of a small program's analysis on a cold cache). Else it starts NaN.

    ``mfu = flops / (measured_s * peak)`` at the dtype holding most of the module's FLOPs -- NaN, flagged
    ``mfu-above-peak``, where it would exceed 1 (the chip does not fit the trace); ``cost_coverage``: the share
    of the module's ops whose roofline time is known (the totals are over the known part); time by bound class
    is measured time where the trace has it, else roofline time.

    A column's total is ``Series.sum``'s (numpy's pairwise sum, NaN as 0); a sum by dtype or bound class is
    exact (``group_sums``). The columns are read once (pandas calls per module were most of a small program's
    table time).
    """
    import numpy as np

    n = len(ops)
    names = column_list(ops, "module")
    rows_of: dict[str, list[int] | range] = {}
    if costs and names.count(costs[0].module.name) == n:  # one module owns every row: the common case
        rows_of[costs[0].module.name] = range(n)  # (its length alone is read: every row is its)
    else:
        for i, name in enumerate(names):
            rows_of.setdefault(name, []).append(i)
    dtype_codes, bound_codes = column_codes(ops, "dtype"), column_codes(ops, "bound")
    dtype_col = column_list(ops, "dtype") if dtype_codes is None else None
    bound_col = column_list(ops, "bound") if bound_codes is None else None
    exposed_roof = 0.0 if schedule_known and n and not communicates(ops) else math.nan
    flops_col = column_array(ops, "flops")
    roofline = column_array(ops, "roofline_s")
    measured_col = column_array(ops, "measured_s")
    part_sums = {c: column_array(ops, c) for c in ("compute_s", "memory_s", "comm_s")}
    rows = []
    for mc in costs:
        name = mc.module.name
        mine = rows_of.get(name, [])
        whole = len(mine) == n

        def column(values: np.ndarray) -> np.ndarray:
            return values if whole else values[mine]

        measured = step_s.get(name, math.nan) if step_s else math.nan
        by_dtype = _grouped(dtype_col, dtype_codes, column(flops_col), whole, mine)
        dtype = "bf16"
        if by_dtype:
            top = max(sorted(by_dtype), key=by_dtype.__getitem__)  # (max keeps the first: idxmax's choice)
            if by_dtype[top] > 0:
                dtype = str(top)
        roof = column(roofline)
        times = column(measured_col)
        known = ~np.isnan(roof)
        if np.isnan(times).all():
            times = roof
        by_bound = _grouped(bound_col, bound_codes, times, whole, mine)
        module_mfu = mfu(mc.flops, measured, chip, dtype)
        flags = set(mc.flags)
        if module_mfu > 1.0:  # faster than the chip's peak: the chip does not fit (or FLOPs are overcounted)
            module_mfu = math.nan
            flags.add("mfu-above-peak")
        rows.append({
            "name": name, "flops": mc.flops, "transcendentals": mc.transcendentals,
            "hbm_bytes": mc.bytes_accessed, "wire_bytes": mc.comm_bytes,
            "compute_s": nansum(column(part_sums["compute_s"])), "memory_s": nansum(column(part_sums["memory_s"])),
            "comm_s": nansum(column(part_sums["comm_s"])), "roofline_s": nansum(roof), "measured_s": measured,
            "mfu": module_mfu, "cost_coverage": int(known.sum()) / len(known) if len(known) else 1.0,
            "dtype": dtype, "compute_bound_s": float(by_bound.get("compute", 0.0)),
            "memory_bound_s": float(by_bound.get("memory", 0.0)),
            "communication_bound_s": float(by_bound.get("communication", 0.0)),
            "caveats": ",".join(sorted(flags)), "peak_bytes": math.nan,  # filled by Report.memory
            # filled by hloscope.steps.columns.add_overlap_columns:
            "exposed_comm_roofline_s": exposed_roof, "exposed_comm_s": math.nan, "comm_hidden_fraction": math.nan,
        })
    columns = {c: [row[c] for row in rows] for c in MODULE_COLUMNS}
    return table_from_columns(columns) if as_table else frame_from_columns(columns)


def communicates(ops: pd.DataFrame) -> bool:
    """Whether an op of the table is a collective or moves bytes between chips (a ``comm_kind``)."""
    category, comm_kind = column_codes(ops, "category"), column_codes(ops, "comm_kind")
    if category is None or comm_kind is None:
        return "collective" in column_list(ops, "category") or any(map(bool, column_list(ops, "comm_kind")))
    return "collective" in _present(*category) or any(map(bool, _present(*comm_kind)))


def _present(codes, categories) -> list[str]:
    """The categories that some row's code names."""
    import numpy as np

    return list(compress(categories.tolist(), (np.bincount(codes, minlength=len(categories)) > 0).tolist()))


def nansum(values) -> float:
    """``Series.sum()`` of a float column (a float array, or a list of floats): NaN as 0, then numpy's pairwise
    sum. The modules table's totals, and ``compare.Diff``'s totals over its module rows."""
    if type(values) is list and len(values) < 8:
        # (numpy's pairwise sum adds fewer than 8 values one by one, from 0.0: the same sum, without the arrays)
        total = 0.0
        for v in values:
            if v == v:
                total += v
        return float(total)
    import numpy as np

    return float(np.where(np.isnan(values), 0.0, values).sum())


def group_sums(keys: list, values: list[float]) -> dict:
    """key -> the correctly rounded sum (``math.fsum``) of its non-NaN values (0.0 when it has none), keys in
    first-seen order; keys that are None or NaN are left out (as ``groupby`` drops them).

    Not pandas' ``groupby(...).sum()``: that one's result moves in the last bit with the pandas version (3.1 sums
    sorted groups with ``np.add.reduceat``, other groups with a compensated loop); an exact sum is the same
    whatever the library or the order of the rows."""
    from collections import defaultdict

    distinct = dict.fromkeys(keys)  # (first-seen order)
    if len(distinct) <= _FEW_GROUPS and len(keys) == len(values) and all(type(k) is str for k in distinct):
        # A few string keys (bound classes, dtypes) over many rows: one mask per key, in numpy, selecting the
        # same values in the same order as the loop below (a float64 array's items are the floats a list of
        # them holds).
        import numpy as np

        array = values if isinstance(values, np.ndarray) and values.dtype == np.float64 else None
        if array is None and all(type(v) is float for v in values):
            array = np.array(values, dtype=np.float64)
        if array is not None:
            # (each row's key as its number in first-seen order: one C-level map, then integer masks -- an
            # object array's == compared the strings one by one, per key)
            codes = np.fromiter(map(dict(zip(distinct, range(len(distinct)))).__getitem__, keys), np.intp,
                                len(keys))
            known = ~np.isnan(array)
            return {key: _exact_array_sum(array[(codes == k) & known]) for k, key in enumerate(distinct)}
    groups: defaultdict = defaultdict(list)
    for key, value in zip(keys, values):
        groups[key].append(value)
    return {key: _exact_sum([v for v in mine if v == v]) for key, mine in groups.items()
            if key is not None and key == key}


def _grouped(keys: list | None, coded: tuple | None, values, whole: bool, mine: list[int]) -> dict:
    """``group_sums`` of one module's rows (``mine``, or every row when ``whole``) of a key column, read as its
    list ``keys`` or as its ``coded`` (codes, categories) (``_columns.column_codes``); ``values``: the module's
    rows of the summed column."""
    if coded is None:
        return group_sums(keys if whole else [keys[i] for i in mine], values)
    codes, categories = coded
    return group_sums_coded(codes if whole else codes[mine], categories, values)


def group_sums_coded(codes, categories, values) -> dict:
    """``group_sums(keys, values)`` where ``keys[i]`` is ``categories[codes[i]]`` (``_columns.CodedStrings``: a
    few distinct strings), summed by one mask per category present instead of a pass over the strings: the same
    values in the same row order, so the same sums. ``values``: a float64 array beside ``codes``."""
    import numpy as np

    if len(categories) > _FEW_GROUPS or not (isinstance(values, np.ndarray) and values.dtype == np.float64):
        return group_sums(categories[codes].tolist(), values)
    present = np.zeros(len(categories), dtype=bool)
    present[codes] = True
    first = {int(np.argmax(codes == k)): k for k in np.flatnonzero(present).tolist()}  # (first-seen order)
    known = ~np.isnan(values)
    return {categories[k]: _exact_array_sum(values[(codes == k) & known]) for _, k in sorted(first.items())}


#: Most distinct keys ``group_sums`` sums by numpy masks (one pass over the rows per key).
_FEW_GROUPS = 8


def _exact_sum(values: list[float]) -> float:
    try:
        return math.fsum(values)
    except (ValueError, OverflowError):  # inf and -inf (NaN, as a plain sum gives), or an overflow on the way
        return sum(values)


def _exact_array_sum(values: np.ndarray) -> float:
    """``_exact_sum`` of a float64 array's values: in C where built (``_cost_walk.exact_sum``, ``math.fsum``'s
    method on the array's doubles: no float object made per value), else -- and for the values that function
    leaves, an infinity, a NaN or an overflow -- of their list."""
    summed = None if PURE_PYTHON else c_exact_sum()
    total = summed(values) if summed is not None else None
    return total if total is not None else _exact_sum(values.tolist())


def mfu(flops: float, seconds: float, chip: ChipSpec, dtype: str) -> float:
    """Model FLOPs utilization: the share of the chip's peak that ``flops`` done in ``seconds`` reached.

    ``mfu = flops / (seconds x peak_flops_per_s[dtype])`` -- the convention of PaLM (Chowdhery et al. 2022,
    appendix B) and of "How to Scale Your Model" Part 1: achieved FLOP/s over the chip's dense peak at the
    dtype of the work (the dtype holding most of a module's FLOPs). ``flops`` are the program's own HLO FLOPs
    (not 6·N·T model FLOPs), so rematerialised work counts. NaN when ``seconds`` is NaN, 0 or negative.

    This is the one MFU formula of hloscope: the modules table's ``mfu`` column and ``Report.mfu`` (over
    several modules: total FLOPs over the sum of each module's ``seconds x peak``) both use it.
    """
    if not seconds or seconds != seconds or seconds <= 0:
        return math.nan
    return flops / (seconds * chip.peak_flops_for(dtype)[0])


def total_mfu(modules: pd.DataFrame, chip: ChipSpec, time_column: str = "measured_s") -> float:
    """``mfu`` over several modules: total FLOPs / sum(module seconds x peak at the module's dtype).

    Args:
        modules: the modules table (``MODULE_COLUMNS``): ``flops``, ``dtype`` and ``time_column`` are read.
        chip: the chip scored against.
        time_column: ``measured_s`` (achieved MFU, from a trace) or ``roofline_s`` (the roofline MFU: the best
            this program can reach on the chip).

    Returns:
        The fraction (1.0 = at peak); NaN when no module has a positive time in ``time_column``.
    """
    capacity = 0.0
    flops = 0.0
    for f, d, t in zip(modules["flops"], modules["dtype"], modules[time_column]):
        if t == t and t > 0:
            capacity += float(t) * chip.peak_flops_for(str(d))[0]
            flops += float(f)
    return flops / capacity if capacity else math.nan
