"""The ``Report`` record and its JSON/CSV forms (schema in docs/report.md); its totals and assertions are in
``hloscope.result.assertions``."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from hloscope._columns import CodedStrings, ColumnTable, column_array, column_codes, column_list, dtype_kinds
from hloscope.errors import ReportSchemaError
from hloscope.result.assertions import ReportAssertions

if TYPE_CHECKING:
    from collections.abc import Callable

    import pandas as pd

    from hloscope.memory import MemoryFootprint
    from hloscope.roofline.chips import ChipSpec

SCHEMA = "hloscope.report/3"
#: Field names of ``hloscope.report/1`` documents and their ``/2`` names (one name per quantity: HBM traffic is
#: ``hbm_*bytes``, bytes on the wire ``wire_bytes``); ``from_dict`` reads ``/1`` documents through it (then
#: through ``RENAMED_IN_3``).
RENAMED_IN_2 = {"bytes_accessed": "hbm_bytes", "bytes_read": "hbm_read_bytes", "bytes_written": "hbm_write_bytes",
                "comm_bytes": "wire_bytes"}
#: Field names of ``hloscope.report/2`` (and ``/1``) documents and their ``/3`` names: no column of the ops or
#: modules table may be an attribute of ``pandas.DataFrame`` (``report.ops.flags`` was pandas'
#: ``DataFrame.flags``, ``.count`` its method, ``.shape`` its tuple). ``from_dict`` reads ``/2`` documents
#: through it.
RENAMED_IN_3 = {"count": "executions", "flags": "caveats", "shape": "result_shape"}
#: The schemas ``from_dict`` reads, each with the renames that bring its fields to ``SCHEMA``'s, in order.
_RENAMES = {"hloscope.report/1": (RENAMED_IN_2, RENAMED_IN_3), "hloscope.report/2": (RENAMED_IN_3,), SCHEMA: ()}


@dataclass(repr=False)
class Report(ReportAssertions):
    """Result of ``hloscope.analyze``: tables, totals, coverage, notes, assertions, JSON round-trip.

    Totals (``roofline_s``, ``flops``, ``hbm_bytes``, ``wire_bytes``, ``wire_bytes_by_kind()``, ``mfu``),
    ``select(pattern)`` and the ``assert_*`` methods come from ``ReportAssertions``.

    Attributes:
        ops: per-op DataFrame (``hloscope.roofline.tables.OP_COLUMNS``), totals per module run.
        modules: per-module DataFrame (``hloscope.roofline.tables.MODULE_COLUMNS``).
            A static analysis keeps both as their columns (``_columns.ColumnTable``) and makes each DataFrame on
            first use; ``table(name)`` gives the table as kept, for readers of columns (the JSON, the baseline,
            the comparison), which then make no DataFrame.
        chip: the chip the ops were scored against.
        coverage: for traces, ``joined_time_fraction`` (share of measured op time that joined an instruction
            with a cost), ``steps``, ``devices``, ``files``; for static reports, ``{"static": True}``.
        notes: human-readable caveats (e.g. "host chip calibrated on the fly").
        compiled_for: for a program hloscope compiled (or a given ``Compiled``): ``{"platform", "device_kind",
            "devices"}`` (``hloscope.compile.CompiledProgram.compiled_for``); empty for HLO text and traces.
            In the JSON as ``"compiled_for"``.
        compile_s: seconds JAX spent lowering and compiling for this report (0.0 when nothing was compiled).
            Not in the JSON.
        analysis_s: seconds hloscope spent (HLO text out, parse, cost, score, tables). Not in the JSON.
        hlo_modules: the parsed modules behind the report (kept for ``memory``); empty for a report read from
            JSON. Not in the JSON.

    ``memory`` (a property) is each module's per-device memory footprint (``hloscope.memory``), computed on
    first use; in the JSON as ``"memory"``.

    For a trace, ``steps`` is one row per (step, device) (``hloscope.steps.breakdown.STEP_COLUMNS``: wall, busy
    and idle seconds, busy time split into compute, memory, exposed communication and other, communication hidden
    under other work, roofline time of the step) and ``gaps`` the longest idle gaps
    (``hloscope.steps.breakdown.GAP_COLUMNS``); both None for a static report. In the JSON as ``"steps"`` and
    ``"gaps"``. ``step_summary()``, ``steps_across_devices()`` and ``per_device()`` read them
    (``hloscope.steps.summary``). ``stragglers``: the devices the others wait for, with the ops that make the
    difference (``hloscope.steps.summary.stragglers``; JSON ``"stragglers"``).
    """

    ops: pd.DataFrame
    modules: pd.DataFrame
    chip: ChipSpec
    coverage: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    compiled_for: dict[str, Any] = field(default_factory=dict)
    compile_s: float = 0.0
    analysis_s: float = 0.0
    hlo_modules: list[Any] = field(default_factory=list, repr=False, compare=False)
    steps: pd.DataFrame | None = field(default=None, repr=False, compare=False)
    gaps: pd.DataFrame | None = field(default=None, repr=False, compare=False)
    stragglers: pd.DataFrame | None = field(default=None, repr=False, compare=False)
    _memory: list[Any] | None = field(default=None, repr=False, compare=False)
    _advice: ColumnTable | pd.DataFrame | None = field(default=None, repr=False, compare=False)

    def table(self, name: str) -> ColumnTable | pd.DataFrame:
        """The ``ops`` or ``modules`` table as kept -- a DataFrame, or the ``ColumnTable`` it is made of -- for
        readers of columns (``hloscope._columns``: ``column_list``, ``column_array``), which then make no
        DataFrame. Raises KeyError for another name."""
        if name not in _TABLES:
            raise KeyError(name)
        return self.__dict__["_" + name]

    @property
    def advice(self) -> pd.DataFrame:
        """What to change, ranked by the roofline time it could save at most (``hloscope.advice.advise``:
        ``rule``, ``module``, ``ops``, ``evidence``, ``action``, ``gain_s``, ``gain_basis``, ``source``; docs/advice.md).
        Computed on first use; a report read from JSON has the stored advice."""
        table = self._advice_table()
        if isinstance(table, ColumnTable):
            table = self._advice = table.frame()
        return table

    def _advice_table(self) -> ColumnTable | pd.DataFrame:
        """``advice`` as kept: its columns until a DataFrame of it is asked for (the JSON prints the columns)."""
        if self._advice is None:
            from hloscope.advice import advice_table

            self._advice = advice_table(self)
        return self._advice

    @property
    def memory(self) -> list[MemoryFootprint]:
        """Per module, the memory one device needs to run it (``hloscope.memory.MemoryFootprint``: argument,
        output, alias and temp bytes as ``compiled.memory_analysis()`` gives them, the peak and its largest
        buffers, and ``fits`` against ``chip.hbm_capacity_bytes``), in the order of ``modules``. Computed from
        ``hlo_modules`` on first use (a liveness walk: about as long as the analysis itself on large modules);
        a report read from JSON has the stored footprints, or none when the JSON had none."""
        if self._memory is None:
            from hloscope.memory import footprint

            self._memory = [footprint(m, self.chip) for m in self.hlo_modules]
            self._fill_peak_bytes()
        return self._memory

    def _use_memory(self, footprints: list[MemoryFootprint]) -> bool:
        """Take ``footprints`` as ``memory`` when they are what it would compute: not computed yet, one per module
        of ``hlo_modules``, named as they are (``hloscope.memory.forked``, whose child computed them from the same
        text). Returns whether they were taken."""
        if self._memory is not None or [fp.module for fp in footprints] != [m.name for m in self.hlo_modules]:
            return False
        self._memory = list(footprints)
        self._fill_peak_bytes()
        return True

    def _fill_peak_bytes(self) -> None:
        """The modules table's ``peak_bytes`` column from ``memory`` (matched by module name)."""
        by_name = {fp.module: float(fp.total_bytes) for fp in self._memory or ()}
        modules = self.table("modules")
        if by_name and len(modules):
            names, peaks = column_list(modules, "name"), column_list(modules, "peak_bytes")
            modules["peak_bytes"] = [by_name.get(n, v) for n, v in zip(names, peaks)]

    def steps_across_devices(self) -> pd.DataFrame | None:
        """One row per step: its wall time (the longest device's), the mean over devices of the parts of it, the
        slowest device and the straggler gap (``hloscope.steps.summary.across_devices``); None without steps."""
        from hloscope.steps.summary import across_devices

        return across_devices(self.steps) if self.steps is not None and len(self.steps) else None

    def per_device(self) -> pd.DataFrame | None:
        """One row per host and device: medians over its steps of wall, busy, idle, exposed communication, late
        start and ready time (``hloscope.steps.summary.per_device``); None without steps."""
        from hloscope.steps.summary import per_device

        return per_device(self.steps) if self.steps is not None and len(self.steps) else None

    def step_summary(self) -> dict[str, Any]:
        """Median and worst step time, the first step, median idle and exposed communication, the share of
        communication hidden, the worst straggler (``hloscope.steps.summary.step_summary``); ``{"steps": 0}``
        without steps."""
        from hloscope.steps.summary import step_summary

        return step_summary(self.steps) if self.steps is not None and len(self.steps) else {"steps": 0}

    def to_dict(self) -> dict[str, Any]:
        """The JSON document: ``schema``, ``chip``, ``modules``, ``ops``, ``coverage``, ``notes``,
        ``compiled_for``."""
        return self._document(tables_as_rows=False)

    def _document(self, tables_as_rows: bool, ahead: dict[str, Any] | None = None) -> dict[str, Any]:
        """``to_dict``; with ``tables_as_rows``, the tables as ``result._json_text.Rows`` (their columns), which
        ``dumps_indent1`` prints as the lists of dicts without the dicts being made (``to_json``). ``ahead``: the
        ``_memory_free_parts`` made already (``_json_pieces``)."""
        from hloscope.roofline.chips import chip_to_dict

        memory = [fp.to_dict() for fp in self.memory]  # first: it fills the modules' peak_bytes
        parts = ahead if ahead is not None else self._memory_free_parts(tables_as_rows)
        return {
            "schema": SCHEMA,
            "chip": chip_to_dict(self.chip),
            "modules": _records(self.table("modules"), rows=tables_as_rows),
            "ops": parts["ops"],
            "coverage": self.coverage,
            "notes": self.notes,
            "compiled_for": self.compiled_for,
            "memory": memory,
            "advice": parts["advice"],
            "steps": _records(self.steps, rows=tables_as_rows) if self.steps is not None else [],
            "gaps": _records(self.gaps, rows=tables_as_rows) if self.gaps is not None else [],
            "stragglers": _records(self.stragglers, rows=tables_as_rows) if self.stragglers is not None else [],
        }

    def _memory_free_parts(self, tables_as_rows: bool) -> dict[str, Any]:
        """The document's ``ops`` and ``advice``, which no memory footprint changes (``_json_pieces`` prints them
        before the footprints are read)."""
        return {"ops": self._ops_records(tables_as_rows),
                "advice": _records(self._advice_table(), rows=tables_as_rows)}

    def _ops_records(self, tables_as_rows: bool) -> Any:
        """The document's ``ops``: ``_records`` of the ops table, each row's ``caveats`` a list of its flags."""
        convert = _SharedCaveatLists().__getitem__ if tables_as_rows else _caveat_list
        return _records(self.table("ops"), convert={"caveats": convert}, rows=tables_as_rows)

    def to_json(self, indent: int | None = 1) -> str:
        if indent == 1:  # (the default: the same text as json.dumps(self.to_dict()), printed faster from the
            # tables' columns; result/_json_text.py)
            from hloscope.result._json_text import dumps_indent1

            return dumps_indent1(self._document(tables_as_rows=True))
        return json.dumps(self.to_dict(), indent=indent, allow_nan=False)

    def _json_pieces(self, before_memory: Callable[[], object] | None = None) -> list[str | bytes]:
        """``to_json()`` in pieces, for a writer (``hloscope report --format json``; ``_json_text.pieces_indent1``).

        ``before_memory``: called once the parts of the document that do not depend on the memory footprints
        (the ops and advice tables) are printed, before the footprints are read: ``hloscope report`` collects the
        footprints its child computed on the other core there (``hloscope.memory.forked``), so that this
        printing overlaps the child's work instead of following it. The text is the same either way."""
        from hloscope.result._json_text import pieces_indent1, printed_ahead

        ahead = None
        if before_memory is not None:
            ahead = {key: printed_ahead(value, 1) for key, value in self._memory_free_parts(True).items()}
            before_memory()
        return pieces_indent1(self._document(tables_as_rows=True, ahead=ahead))

    def to_csv(self) -> str:
        return self.ops.to_csv(index=False)

    @classmethod
    def from_dict(cls, data: dict[str, Any], source: str = "<dict>") -> Report:
        """A report from its JSON document (``to_dict``), e.g. one written by ``hloscope report --format json``.

        Columns a document lacks (an older writer) are filled with nulls; a document without ``compiled_for``
        reads as ``{}``. ``hloscope.report/2`` documents are read too, their fields renamed (``RENAMED_IN_3``:
        ``count``, ``flags``, ``shape`` -> ``executions``, ``caveats``, ``result_shape``), and ``/1`` documents
        (``RENAMED_IN_2``, then ``RENAMED_IN_3``).

        Raises:
            ReportSchemaError: (a ``ValueError``) not a ``hloscope.report/1``, ``/2`` or ``/3`` document -- the
                message names ``source`` and the schema found -- or one whose ``chip`` is missing or malformed.
        """
        import pandas as pd

        from hloscope.roofline.tables import MODULE_COLUMNS, OP_COLUMNS
        from hloscope.roofline.chips import chip_from_dict

        found = data.get("schema") if isinstance(data, dict) else None
        renames = _RENAMES.get(found) if isinstance(found, str) else None
        if renames is None:
            raise ReportSchemaError(source, f"expected a report JSON with \"schema\": \"{SCHEMA}\" (or an older "
                                    f"hloscope.report/2 or /1), found {found!r}")
        if renames:
            data = dict(data, ops=[_renamed(r, renames) for r in data.get("ops") or []],
                        modules=[_renamed(r, renames) for r in data.get("modules") or []])
        if not isinstance(data.get("chip"), dict):
            raise ReportSchemaError(source, "the report has no \"chip\" object")
        ops = [dict(r, caveats=",".join(r.get("caveats") or ())) for r in data.get("ops", [])]
        frame = pd.DataFrame(ops, columns=OP_COLUMNS)
        for col in ("op_name", "source", "result_shape", "comm_kind", "dtype", "bound", "caveats", "category"):
            frame[col] = frame[col].astype(object).fillna("")  # (an all-null column is float64)
        numeric = [c for c in OP_COLUMNS if c not in (
            "module", "computation", "instruction", "opcode", "category", "op_name", "source", "comm_kind",
            "dtype", "bound", "caveats", "result_shape")]
        frame[numeric] = frame[numeric].apply(pd.to_numeric, errors="coerce")
        modules = pd.DataFrame(data.get("modules", []), columns=MODULE_COLUMNS)
        num_mod = [c for c in MODULE_COLUMNS if c not in ("name", "dtype", "caveats")]
        modules[num_mod] = modules[num_mod].apply(pd.to_numeric, errors="coerce")
        from hloscope.memory import MemoryFootprint

        try:
            memory = [MemoryFootprint.from_dict(m) for m in data.get("memory") or ()]
        except (KeyError, TypeError, AttributeError) as err:
            raise ReportSchemaError(source, f"bad \"memory\" entry: {err}") from None
        steps, gaps = _step_frames(data, source)
        from hloscope.steps.summary import STRAGGLER_COLUMNS

        strag = data.get("stragglers") or []
        if not isinstance(strag, list) or not all(isinstance(a, dict) for a in strag):
            raise ReportSchemaError(source, "\"stragglers\" must be a list of objects")
        strag_frame = pd.DataFrame(strag, columns=STRAGGLER_COLUMNS) if steps is not None else None
        from hloscope.advice import ADVICE_COLUMNS

        advice = data.get("advice") or []
        if not isinstance(advice, list) or not all(isinstance(a, dict) for a in advice):
            raise ReportSchemaError(source, "\"advice\" must be a list of objects")
        advice_frame = pd.DataFrame(advice, columns=ADVICE_COLUMNS)
        advice_frame["gain_s"] = pd.to_numeric(advice_frame["gain_s"], errors="coerce")
        return cls(frame, modules, chip_from_dict(data["chip"]), dict(data.get("coverage") or {}),
                   list(data.get("notes") or []), dict(data.get("compiled_for") or {}), steps=steps, gaps=gaps,
                   stragglers=strag_frame, _memory=memory or None, _advice=advice_frame)


#: ``Report``'s tables that may be kept as their columns (``Report.table``).
_TABLES = ("ops", "modules")


def _table_property(name: str, doc: str) -> property:
    """``Report.ops`` / ``Report.modules``: the DataFrame, made on first use from the ``ColumnTable`` a static
    analysis keeps (``_columns.ColumnTable.frame``: the frame ``frame_from_columns`` makes); set as any attribute
    (the dataclass's ``__init__`` and ``dataclasses.replace`` go through it)."""
    key = "_" + name

    def get(self: Report) -> pd.DataFrame:
        table = self.__dict__[key]
        if isinstance(table, ColumnTable):
            table = self.__dict__[key] = table.frame()
        return table

    def set_(self: Report, value: Any) -> None:
        self.__dict__[key] = value

    return property(get, set_, doc=doc)


# (after the dataclass is made: a property in the class body would be taken for the fields' default)
Report.ops = _table_property("ops", "Per-op DataFrame (``hloscope.roofline.tables.OP_COLUMNS``), totals per module "
                             "run.")  # type: ignore[assignment]
Report.modules = _table_property("modules", "Per-module DataFrame (``hloscope.roofline.tables.MODULE_COLUMNS``)."
                                 )  # type: ignore[assignment]


def _step_frames(data: dict[str, Any], source: str) -> tuple[pd.DataFrame | None, pd.DataFrame | None]:
    """The steps and gaps tables of a report document (None when it has none: a static report, an older
    writer)."""
    import pandas as pd

    from hloscope.steps.breakdown import GAP_COLUMNS, STEP_COLUMNS

    steps, gaps = data.get("steps") or [], data.get("gaps") or []
    if not isinstance(steps, list) or not isinstance(gaps, list) or not all(
            isinstance(r, dict) for r in steps + gaps):
        raise ReportSchemaError(source, "\"steps\" and \"gaps\" must be lists of objects")
    if not steps:
        return None, None
    frame = pd.DataFrame(steps, columns=STEP_COLUMNS)
    text = ("host", "device", "module", "source", "first", "by_category_s")
    num = [c for c in STEP_COLUMNS if c not in text]
    frame[num] = frame[num].apply(pd.to_numeric, errors="coerce")
    frame["by_category_s"] = [v if isinstance(v, dict) else {} for v in frame["by_category_s"]]
    frame["first"] = frame["first"].fillna(False).astype(bool)
    g = pd.DataFrame(gaps, columns=GAP_COLUMNS)
    gnum = ["step", "device_id", "start_s", "duration_s"]
    g[gnum] = g[gnum].apply(pd.to_numeric, errors="coerce")
    return frame, g


def _renamed(row: Any, renames: tuple[dict[str, str], ...]) -> Any:
    """``row`` with its keys renamed by each map of ``renames`` in turn (an older document's fields under
    ``SCHEMA``'s names); a key the new name already holds is not overwritten."""
    if not isinstance(row, dict):
        return row
    for names in renames:
        out: dict[str, Any] = {}
        for k, v in row.items():
            new = names.get(k, k)
            if new != k and new in row:
                continue  # the document has both names: keep the field under the new one as written
            out[new] = v
        row = out
    return row


def load_report(path: str | os.PathLike[str]) -> Report:
    """Read a report JSON file written by ``hloscope report --format json``.

    Raises:
        ReportSchemaError: (a ``ValueError``) the file is not JSON, or not a ``hloscope.report/1``, ``/2`` or ``/3``
            document (names the file).
        FileNotFoundError: no such file.
    """
    text = Path(path).read_text(encoding="utf-8")
    try:
        data = json.loads(text)
    except ValueError as e:
        raise ReportSchemaError(path, f"not JSON ({e})") from None
    return Report.from_dict(data, source=str(path))


def _records(df: ColumnTable | pd.DataFrame, convert: dict[str, Any] | None = None,
             rows: bool = False) -> Any:
    """Rows as dicts with NaN -> None and numpy scalars -> Python (JSON has no NaN): what
    ``df.to_dict(orient="records")`` cleaned value by value gives, made by columns (a float column's values are
    Python floats from ``tolist``; only object columns holding something else than ``str``, ``int``, ``bool`` or
    None, which cleaning leaves as they are, are cleaned one value at a time). ``convert`` maps a column's name to
    a function applied to each of its (cleaned) values. With ``rows``, the same as a ``_json_text.Rows`` (the
    columns, a float column not converted as its float64 array; ``to_json`` prints them without making the dicts
    or the floats)."""
    from itertools import repeat

    import numpy as np

    as_they_are = {str, int, bool, type(None)}  # (exact types: no ``item``, not a float)
    names = list(df.columns)
    columns = []
    for name, kind in zip(names, dtype_kinds(df)):
        if kind == "f" and rows and (convert is None or name not in convert):
            values = np.ascontiguousarray(column_array(df, name, np.float64))  # (Rows: NaN printed as null)
        elif kind == "f":
            arr = column_array(df, name, np.float64)
            values = arr.tolist()
            bad = ~np.isfinite(arr)
            if bad.any():
                for i in np.flatnonzero(bad).tolist():
                    values[i] = None
        elif kind in "iub":
            values = column_list(df, name)
        else:
            coded = column_codes(df, name)  # (a coded column's values are among its few categories: their types)
            plain = coded is not None and set(map(type, coded[1].tolist())) <= as_they_are
            if rows and plain:
                # (Rows: the codes and the categories, converted one category each; printed without the
                # column's list of strings, or its object array, being made)
                categories = coded[1]
                if convert is not None and name in convert:  # (fromiter: a list value stays one object)
                    categories = np.fromiter(map(convert[name], categories.tolist()), object, len(categories))
                columns.append(CodedStrings(coded[0], categories))
                continue
            values = column_list(df, name)
            if not (plain if coded is not None else set(map(type, values)) <= as_they_are):
                values = [_clean_value(v) for v in values]
        if convert is not None and name in convert:
            values = list(map(convert[name], values))
        columns.append(values)
    if rows:
        from hloscope.result._json_text import Rows

        return Rows(names, columns, len(df))
    if not names:
        return [{} for _ in range(len(df))]
    return list(map(dict, map(zip, repeat(names), zip(*columns))))


def _caveat_list(caveats: str | None) -> list[str]:
    """An ops row's ``caveats`` text as the list of its flags (the report document's form)."""
    return [f for f in caveats.split(",") if f] if caveats else []


class _SharedCaveatLists(dict):
    """``_caveat_list`` of each distinct caveats text, made on its first lookup and shared by the rows that hold
    it (for printing: the lists are never handed out); a row's lookup is ``dict.__getitem__``, in C."""

    def __missing__(self, caveats: str | None) -> list[str]:
        found = self[caveats] = _caveat_list(caveats)
        return found


def _clean_value(v: Any) -> Any:
    if hasattr(v, "item"):
        v = v.item()
    if isinstance(v, float) and (math.isnan(v) or math.isinf(v)):
        return None
    return v
