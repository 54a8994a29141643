"""Baseline files: a reviewable subset of a report's JSON, stored per test and compared run to run.

The pytest plugin (docs/pytest_plugin.md) records a baseline of each test's program and compares the next runs
with it through the comparison engine (``hloscope.compare.compare``), as ``hloscope diff`` compares two reports.
A baseline is what the engine needs of report A, no more:

* ``modules``: each module's totals (``STORED_FIELDS["modules"]``: roofline time, FLOPs, HBM and wire bytes...)
  and its ``cost_coverage`` (the share of its ops whose cost is known: a lower one in a later run fails the
  check, ``hloscope.compare.verdict``) and ``peak_bytes`` (device memory, ``Report.memory``: compared by a
  ``peak_bytes`` rule);
* ``ops``: every collective, every op holding at least ``significant`` (default 1%) of the total roofline time,
  and every op whose roofline time or FLOPs is unknown, with the fields of its identity (``opcode``,
  ``op_name``, ``result_shape``) and of the rules (``STORED_FIELDS["ops"]``) -- never XLA's instruction names
  (``fusion.12``), which change with unrelated edits;
* ``chip``, ``compiled_for`` (platform, device kind, devices), ``significant``, ``test``, ``recorded_with``.

Field names are the report's (``hloscope.roofline.tables.OP_COLUMNS`` / ``MODULE_COLUMNS``); numbers keep 9
significant digits (integral ones exact), null for unknown. Schema ``hloscope.baseline/3``. Older files are read
as they are and never rewritten (only ``--hloscope-update`` replaces a file, atomically, as ``/3``):
``hloscope.baseline/2`` files exactly -- their ``shape`` and ``count`` are ``result_shape`` and ``executions``
(``RENAMED_IN_3``), and they have no ``cost_coverage`` (null: not checked) and no ops of unknown cost --, and
``hloscope.baseline/1`` files (summed ops, other field names) when they map exactly onto this form, else refused
with the command that re-records them. Everything here is a pure function of a report or of JSON text, and
imports neither pytest nor JAX (nor pandas until a baseline becomes a report).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Mapping

from hloscope._atomic import write_file
from hloscope._columns import column_list, kept_table
from hloscope._regex import LazyPattern
from hloscope.compare.engine import DEFAULT_SIGNIFICANT, dims_of, is_collective, rows
from hloscope.errors import HloscopeError

if TYPE_CHECKING:
    import pandas as pd

    from hloscope.result import Report
    from hloscope.roofline.chips import ChipSpec

__all__ = [
    "SCHEMA", "STORED_FIELDS", "DEFAULT_SIGNIFICANT", "BaselineError", "OutdatedBaselineError", "Baseline",
    "BaselineReport", "record", "to_json", "from_json", "read_baseline", "write_baseline", "baseline_path",
]

SCHEMA = "hloscope.baseline/3"
_V2 = "hloscope.baseline/2"
_V1 = "hloscope.baseline/1"

#: What a baseline stores of a report, per table, in file order: the report's own field names. The one list
#: (a rename of a report field changes it here, with a map of the old names, as ``RENAMED_IN_3``, that reads
#: the files already written).
STORED_FIELDS: Mapping[str, tuple[str, ...]] = {
    "modules": ("name", "dtype", "roofline_s", "flops", "transcendentals", "hbm_bytes", "wire_bytes",
                "compute_s", "memory_s", "comm_s", "cost_coverage", "peak_bytes"),
    "ops": ("module", "opcode", "op_name", "result_shape", "category", "dtype", "bound", "comm_kind",
            "executions", "roofline_s", "flops", "hbm_bytes", "wire_bytes", "compute_s", "memory_s", "comm_s"),
}
#: ``hloscope.baseline/2`` field names and their ``/3`` names (the report's columns renamed so that none is a
#: ``pandas.DataFrame`` attribute: ``hloscope.result.report.RENAMED_IN_3``).
RENAMED_IN_3 = {"shape": "result_shape", "count": "executions"}
#: ``STORED_FIELDS`` added in ``/3``: a ``/2`` file has none of them (read as null).
_NEW_IN_3 = {"modules": ("cost_coverage", "peak_bytes"), "ops": ()}
#: What a ``hloscope.baseline/2`` file stores, per table, under its own names (all required).
_V2_FIELDS: Mapping[str, tuple[str, ...]] = {
    table: tuple({v: k for k, v in RENAMED_IN_3.items()}.get(f, f) for f in fields if f not in _NEW_IN_3[table])
    for table, fields in STORED_FIELDS.items()}
#: Stored fields holding text (the rest are numbers or null), under ``/3`` and ``/2`` names.
_TEXT = frozenset({"name", "dtype", "module", "opcode", "op_name", "result_shape", "shape", "category", "bound",
                   "comm_kind"})


class BaselineError(HloscopeError):
    """A baseline file that cannot be used: unreadable, not JSON, or not a baseline document. It is never
    overwritten (not even by ``--hloscope-update``), unless ``OutdatedBaselineError``.

    Attributes:
        path: the file.
        reason: what is wrong with it.
    """

    headline = "corrupted hloscope baseline"

    def __init__(self, path: str | os.PathLike[str], reason: str) -> None:
        self.path = os.fspath(path)
        self.reason = reason
        super().__init__(f"{self.headline} {self.path}: {reason}")

    def __reduce__(self):  # picklable despite the two-argument constructor (xdist)
        return (type(self), (self.path, self.reason))


class OutdatedBaselineError(BaselineError):
    """A baseline of an older schema that cannot be read exactly: ``--hloscope-update`` replaces it (the
    message gives the command).

    Attributes:
        why: what the old file holds that the new form cannot (``written by an older hloscope ...``).
        test: the test that re-records it (the file's ``test``, else ``<nodeid>``).
    """

    headline = "outdated hloscope baseline"

    def __init__(self, path: str | os.PathLike[str], why: str, test: str = "<nodeid>") -> None:
        self.why = why
        self.test = test
        super().__init__(path, f"{why}; re-record it with:  pytest --hloscope-update {test}")

    def __reduce__(self):
        return (type(self), (self.path, self.why, self.test))


@dataclass(frozen=True)
class Baseline:
    """One baseline: the stored subset of a report, and where it came from.

    Attributes:
        chip: id of the chip the ops were scored against.
        modules: one mapping per module (``STORED_FIELDS["modules"]``; None for unknown numbers).
        ops: one mapping per stored op (``STORED_FIELDS["ops"]``), sorted by module and identity.
        compiled_for: ``{"platform", "device_kind", "devices"}`` of the compile (empty when unknown); baselines of
            another platform or device kind are not comparable.
        significant: the share of the total roofline time an op needed to be stored.
        test: the pytest node id (informational).
        recorded_with: versions (``hloscope``, ``jax``), informational.
        schema: the schema the file had (``hloscope.baseline/2`` or ``/1`` for an old file read exactly).
    """

    chip: str
    modules: tuple[Mapping[str, Any], ...]
    ops: tuple[Mapping[str, Any], ...]
    compiled_for: Mapping[str, Any] = field(default_factory=dict)
    significant: float = DEFAULT_SIGNIFICANT
    test: str = ""
    recorded_with: Mapping[str, str] = field(default_factory=dict)
    schema: str = SCHEMA

    @property
    def roofline_s(self) -> float:
        """Total roofline time (seconds per run) over the modules."""
        return float(sum(m["roofline_s"] or 0.0 for m in self.modules))

    def to_report(self, chip: ChipSpec | None = None) -> Report:
        """The baseline as a ``Report`` (the engine's input): the stored fields, the rest null; instruction
        names empty.

        Args:
            chip: the chip to attach (default: ``chip`` looked up among the built-in and user chips).

        Raises:
            BaselineError: the chip id is not known (and no ``chip`` was given).
        """
        import pandas as pd

        from hloscope.result import Report

        if chip is None:
            from hloscope.roofline.chips import UnknownChipError, all_chips, get_chip

            try:
                chip = get_chip(self.chip, extra=all_chips())
            except UnknownChipError as err:
                raise BaselineError("<baseline>", f"chip {self.chip!r}: {err}") from None

        def frame(table: str) -> pd.DataFrame:
            import numpy as np

            text = _text_columns(table)
            data: dict[str, Any] = {c: values if c in text else np.array(values, dtype=float)
                                    for c, values in _columns(self, table).items()}
            return pd.DataFrame(data, columns=_table_columns(table))  # (one constructor: a Series a column cost 2 ms)

        return Report(frame("ops"), frame("modules"), chip, {"baseline": True, "significant": self.significant}, [])


def _table_columns(table: str) -> list[str]:
    from hloscope.roofline.tables import MODULE_COLUMNS, OP_COLUMNS

    return OP_COLUMNS if table == "ops" else MODULE_COLUMNS


def _text_columns(table: str) -> frozenset[str]:
    extra = ("computation", "instruction", "source", "caveats") if table == "ops" else ("caveats",)
    return frozenset(c for c in _table_columns(table) if c in _TEXT or c in extra)


def _columns(baseline: Baseline, table: str, columns: Iterable[str] | None = None) -> dict[str, list[Any]]:
    """Column -> values of a baseline's ``ops`` or ``modules`` as ``to_report``'s tables hold them: every
    column of the report's table, or those of ``columns`` it has (in that order); text as stored ("" when
    missing), numbers as floats (NaN when missing)."""
    records = baseline.ops if table == "ops" else baseline.modules
    text = _text_columns(table)
    data: dict[str, list[Any]] = {}
    names = _table_columns(table)
    if columns is not None:  # (the comparison reads 20 of the ops table's 37 columns: the rest were made for nothing)
        known = set(names)
        names = [c for c in columns if c in known]
    for c in names:
        values = [r.get(c) for r in records]
        if c in text:
            data[c] = [v if isinstance(v, str) else "" for v in values]
        else:
            data[c] = [math.nan if v is None else float(v) for v in values]
    return data


class BaselineReport:
    """A baseline as side A of ``compare``, for the pytest plugin's check: ``chip``, and ``ops`` and
    ``modules`` as ``Baseline.to_report`` gives them (made on first use), and ``table_rows``: those tables'
    rows as dicts, made without pandas (``compare`` reads these; two DataFrames cost ~0.5 ms a test).

    Args:
        baseline: the stored baseline.
        chip: the chip to attach (the report it is compared with was scored against it).
    """

    def __init__(self, baseline: Baseline, chip: ChipSpec) -> None:
        self.baseline, self.chip = baseline, chip
        self._report: Report | None = None

    def _full(self) -> Report:
        if self._report is None:
            self._report = self.baseline.to_report(self.chip)
        return self._report

    @property
    def ops(self) -> pd.DataFrame:
        return self._full().ops

    @property
    def modules(self) -> pd.DataFrame:
        return self._full().modules

    def table_rows(self, table: str) -> list[dict[str, Any]]:
        """The rows of ``ops`` or ``modules`` as dicts of Python values (equal to ``engine.rows`` of the table)."""
        data = self.table_columns(table)
        return [dict(zip(data, values)) for values in zip(*data.values())]

    def table_columns(self, table: str, columns: Iterable[str] | None = None) -> dict[str, list[Any]]:
        """The columns of ``ops`` or ``modules`` (all, or those of ``columns`` the table has) as lists of Python
        values (equal to ``column_list`` of each column of the table)."""
        return _columns(self.baseline, table, columns)


# --------------------------------------------------------------------------------------------------------------
# Recording
# --------------------------------------------------------------------------------------------------------------


def _round(x: Any) -> int | float | None:
    """9 significant digits (stable, reviewable diffs; the engine's SAME margin is finer); integral values as
    ints; None for NaN or missing."""
    if x is None:
        return None
    try:
        x = float(x)
    except (TypeError, ValueError):
        return None
    if x != x or math.isinf(x):
        return None
    if not x.is_integer():
        x = float(f"{x:.9g}")
    if x.is_integer() and abs(x) < 2**63:
        return int(x)
    return x


def _finite(x: Any) -> bool:
    """Whether ``_round(x)`` is a number (not None)."""
    if type(x) is float:
        return x - x == 0.0  # (False for NaN and the infinities)
    return _round(x) is not None


def _clean(row: Mapping[str, Any], fields: tuple[str, ...]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in fields:
        v = row.get(f)
        if f in _TEXT:
            out[f] = v if isinstance(v, str) else ""
        else:
            out[f] = _round(v)
    return out


def record(report: Report, *, significant: float = DEFAULT_SIGNIFICANT, compiled_for: Mapping[str, Any] | None = None,
           test: str = "", recorded_with: Mapping[str, str] | None = None) -> Baseline:
    """What a baseline stores of ``report``: its module totals and cost coverage, its collectives, its
    significant ops and its ops of unknown cost.

    Args:
        report: a static or traced report (measured times are not stored: they vary run to run).
        significant: ops whose roofline time is at least this share of the total are stored (collectives, and
            ops whose roofline time or FLOPs is unknown, always are: a later run compares their cost).
        compiled_for, test, recorded_with: stored as given (see ``Baseline``).
    """
    try:
        getattr(report, "memory", None)  # fills the modules' peak_bytes (device memory) where the HLO is known
    except (KeyError, IndexError, ValueError):  # a module the liveness walk cannot follow: peak_bytes stays null
        pass
    modules = tuple(_clean(m, STORED_FIELDS["modules"])
                    for m in rows(kept_table(report, "modules"), STORED_FIELDS["modules"]))
    total = sum(m["roofline_s"] or 0.0 for m in modules)
    threshold = significant * total
    table = kept_table(report, "ops")
    present = [c for c in STORED_FIELDS["ops"] if c in table.columns]
    columns = {c: column_list(table, c) for c in present}
    count = len(table)

    def column(name: str) -> list[Any]:
        return columns[name] if name in columns else [None] * count

    ops = []
    # (the kept ops picked column by column -- a 2B-parameter model's 15,000 ops keep a few -- and made rows)
    for i, (opcode, category, kind, roof, flops) in enumerate(zip(column("opcode"), column("category"),
                                                                  column("comm_kind"), column("roofline_s"),
                                                                  column("flops"))):
        if category == "unjoined" or not isinstance(opcode, str) or not opcode:
            continue  # a trace op without HLO
        collective = isinstance(kind, str) and is_collective(opcode, kind)
        unknown = not (_finite(roof) and _finite(flops))  # (``_round`` gives None: NaN, missing)
        if collective or unknown or (roof > 0 and roof >= threshold):
            ops.append(_clean({c: columns[c][i] for c in present}, STORED_FIELDS["ops"]))
    ops.sort(key=lambda o: (o["module"], o["opcode"], o["op_name"], dims_of(o["result_shape"]),
                            -(o["roofline_s"] or 0.0), o["result_shape"]))
    return Baseline(report.chip.id, modules, tuple(ops), dict(compiled_for or {}), float(significant), test,
                    dict(recorded_with or {}))


# --------------------------------------------------------------------------------------------------------------
# JSON
# --------------------------------------------------------------------------------------------------------------


def to_json(baseline: Baseline) -> str:
    """The file's text: indented JSON, keys in a fixed order, trailing newline (always schema ``/3``)."""
    doc = {
        "schema": SCHEMA,
        "test": baseline.test,
        "chip": baseline.chip,
        "compiled_for": dict(baseline.compiled_for),
        "recorded_with": dict(baseline.recorded_with),
        "significant": baseline.significant,
        "modules": [{f: m.get(f) for f in STORED_FIELDS["modules"]} for m in baseline.modules],
        "ops": [{f: o.get(f) for f in STORED_FIELDS["ops"]} for o in baseline.ops],
    }
    return json.dumps(doc, indent=2, ensure_ascii=False, allow_nan=False) + "\n"


def _get(doc: Any, key: str, types: type | tuple[type, ...]) -> Any:
    if not isinstance(doc, dict) or key not in doc or not isinstance(doc[key], types) or isinstance(doc[key], bool):
        raise KeyError(key)
    return doc[key]


def _row(obj: Any, fields: tuple[str, ...], where: str) -> dict[str, Any]:
    out = {}
    for f in fields:
        try:
            if f in _TEXT:
                out[f] = _get(obj, f, str)
            else:
                if not isinstance(obj, dict) or f not in obj:
                    raise KeyError(f)
                v = obj[f]
                if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float))):
                    raise KeyError(f)
                out[f] = v
        except KeyError:
            raise KeyError(f"{where}.{f}") from None
    return out


def from_json(text: str, path: str | os.PathLike[str] = "<string>") -> Baseline:
    """Parse a baseline file's text (schema ``/3``; a ``/2`` file, its fields renamed by ``RENAMED_IN_3`` and
    ``cost_coverage`` null; or a ``/1`` file that maps exactly).

    Raises:
        BaselineError: not JSON (with line and column), another schema, or a missing/mistyped field (named, under
            the file's own name).
        OutdatedBaselineError: a ``/1`` file that cannot be read exactly (says how to re-record it).
    """
    __tracebackhide__ = True  # pytest shows the caller's line, not this function's (a no-op elsewhere)
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as err:
        hint = " (a merge conflict? resolve it, or delete the file and re-record)" if "<<<<<<<" in text else ""
        raise BaselineError(path, f"not JSON: {err.msg} (at line {err.lineno}, column {err.colno}){hint}") from None
    if not isinstance(doc, dict):
        raise BaselineError(path, f"expected a JSON object, got {type(doc).__name__}")
    schema = doc.get("schema")
    if schema == _V1:
        return _from_v1(doc, path)
    if schema not in (SCHEMA, _V2):
        raise BaselineError(path, f"schema is {schema!r}, expected {SCHEMA!r} (or an older {_V2!r} or {_V1!r})")
    fields = STORED_FIELDS if schema == SCHEMA else _V2_FIELDS
    try:
        modules = tuple(_row(m, fields["modules"], f"modules[{i}]") for i, m in enumerate(_get(doc, "modules", list)))
        ops = tuple(_row(o, fields["ops"], f"ops[{i}]") for i, o in enumerate(_get(doc, "ops", list)))
        if schema == _V2:
            modules = tuple(_from_v2(m, "modules") for m in modules)
            ops = tuple(_from_v2(o, "ops") for o in ops)
        return Baseline(_get(doc, "chip", str), modules, ops, dict(doc.get("compiled_for") or {}),
                        float(doc.get("significant", DEFAULT_SIGNIFICANT)), str(doc.get("test", "")),
                        dict(doc.get("recorded_with") or {}), schema)
    except KeyError as err:
        raise BaselineError(path, f"missing or mistyped field {err.args[0]!r}") from None
    except (TypeError, ValueError, AttributeError) as err:
        raise BaselineError(path, f"bad value: {err}") from None


def _from_v2(row: dict[str, Any], table: str) -> dict[str, Any]:
    """A ``/2`` row under ``/3`` names, in ``STORED_FIELDS`` order; fields new in ``/3`` null."""
    renamed = {RENAMED_IN_3.get(k, k): v for k, v in row.items()}
    return {f: renamed.get(f) for f in STORED_FIELDS[table]}


#: ``hloscope.baseline/1`` names of the fields that ``/3`` stores under the report's names.
_V1_NAMES = {"hbm_bytes": "hbm_bytes", "wire_bytes": "wire_bytes"}
_V1_MODULE = "(hloscope.baseline/1)"


def _from_v1(doc: dict[str, Any], path: str | os.PathLike[str]) -> Baseline:
    """A ``/1`` document as a ``/3`` baseline, when the mapping is exact: one entry per op (no ``instances`` > 1),
    dimensions known, and the per-kind collective counts and wire bytes equal to those of the ops."""
    test = doc.get("test") if isinstance(doc.get("test"), str) and doc.get("test") else "<nodeid>"

    def outdated(why: str) -> OutdatedBaselineError:
        return OutdatedBaselineError(path, f"written by an older hloscope ({_V1}) and cannot be read exactly: {why}",
                                     test)

    names = {**{k: k for k in ("roofline_s", "flops", "compute_s", "memory_s", "comm_s")}, **_V1_NAMES}
    try:
        totals = _get(doc, "totals", dict)
        module: dict[str, Any] = {f: None for f in STORED_FIELDS["modules"]}
        module.update(name=_V1_MODULE, dtype="")
        for old, new in names.items():
            if old in totals:
                module[new] = float(_get(totals, old, (int, float)))
        for required in ("roofline_s", "flops", "hbm_bytes", "wire_bytes"):
            _get(totals, required, (int, float))
        ops = []
        for i, o in enumerate(_get(doc, "ops", list)):
            try:
                row: dict[str, Any] = {f: None for f in STORED_FIELDS["ops"]}
                dims = _get(o, "dims", str)
                row.update(module=_V1_MODULE, opcode=_get(o, "opcode", str), op_name=_get(o, "op_name", str),
                           result_shape=dims, category=_get(o, "category", str), dtype=_get(o, "dtype", str),
                           bound=_get(o, "bound", str), comm_kind=str(o.get("comm_kind", "")),
                           roofline_s=float(_get(o, "roofline_s", (int, float))),
                           flops=float(_get(o, "flops", (int, float))))
                for old, new in _V1_NAMES.items():
                    row[new] = float(_get(o, old, (int, float)))
                instances = int(o.get("instances", 1))
            except KeyError as err:
                raise KeyError(f"ops[{i}].{err.args[0]}") from None
            if instances != 1:
                raise outdated(f"op {row['opcode']} {row['op_name']} {dims} sums {instances} ops, which are "
                               "compared one by one now")
            if not dims:
                raise outdated(f"op {row['opcode']} {row['op_name']} has no dimensions (recorded without shapes)")
            ops.append(row)
        collectives = _get(doc, "collectives", dict)
        for kind, c in collectives.items():
            mine = [o for o in ops if o["comm_kind"] == kind and not o["opcode"].endswith("-done")]
            n, wire = int(_get(c, "ops", int)), float(_get(c, "wire_bytes", (int, float)))
            if len(mine) != n or abs(sum(o["wire_bytes"] for o in mine) - wire) > 1e-5 * max(abs(wire), 1.0):
                raise outdated(f"its {kind} totals ({n} ops) are not those of its ops ({len(mine)})")
        chip = _get(doc, "chip", str)
    except BaselineError:
        raise
    except KeyError as err:
        raise BaselineError(path, f"missing or mistyped field {err.args[0]!r}") from None
    except (TypeError, ValueError, AttributeError) as err:
        raise BaselineError(path, f"bad value: {err}") from None
    return Baseline(chip, (module,), tuple(ops), dict(doc.get("compiled_for") or {}),
                    float(doc.get("significant", DEFAULT_SIGNIFICANT)), str(doc.get("test", "")),
                    dict(doc.get("recorded_with") or {}), _V1)


# --------------------------------------------------------------------------------------------------------------
# Files
# --------------------------------------------------------------------------------------------------------------


def read_baseline(path: str | os.PathLike[str]) -> Baseline | None:
    """The baseline stored at ``path``; None when there is no file.

    Raises:
        BaselineError: the file exists but cannot be read or parsed (never silently replaced).
        OutdatedBaselineError: an old file that cannot be read exactly.
    """
    __tracebackhide__ = True
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as err:
        raise BaselineError(p, f"cannot read it: {err}") from None
    return from_json(text, p)


def write_baseline(path: str | os.PathLike[str], baseline: Baseline) -> bool:
    """Write ``baseline`` to ``path`` atomically (``hloscope._atomic.write_file``: a temporary file, then
    ``os.replace``; a reader never sees half a file), creating parent directories. A file whose content is
    already identical is left untouched.

    Returns:
        True when the file was written, False when it already held this content.
    """
    p = Path(path)
    text = to_json(baseline)
    try:
        if p.read_text(encoding="utf-8") == text:
            return False
    except (OSError, UnicodeDecodeError):
        pass
    p.parent.mkdir(parents=True, exist_ok=True)
    write_file(p, lambda stream: stream.write(text), newline="\n")
    return True


_UNSAFE = LazyPattern(r"[^A-Za-z0-9_.\-\[\]=,+@]")


def baseline_path(directory: str | os.PathLike[str], nodeid: str, name: str | None = None) -> Path:
    """Where the baseline of test ``nodeid`` lives: ``<directory>/<test file without .py>/<test name>.json``
    (classes become directories; ``name`` adds ``.<name>`` for a second baseline in one test). Characters
    unsafe in file names become ``_``; very long names are shortened with a hash."""
    file_part, _, rest = nodeid.partition("::")
    if file_part.endswith(".py"):
        file_part = file_part[:-3]
    parts = [p for p in file_part.replace("\\", "/").split("/") if p not in ("", ".", "..")]
    parts += rest.split("::") if rest else ["_module"]
    if name:
        parts[-1] += f".{name}"
    safe = []
    for p in parts:
        s = _UNSAFE.sub("_", p)
        if len(s) > 120:
            s = s[:100] + "-" + hashlib.sha1(p.encode()).hexdigest()[:12]
        safe.append(s)
    return Path(directory).joinpath(*safe[:-1], safe[-1] + ".json")
