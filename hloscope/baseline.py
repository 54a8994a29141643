"""Roofline baselines: what a test's compiled program costs, stored as JSON and compared run to run.

The pytest plugin (``hloscope.pytest_plugin``, docs/pytest_plugin.md) is the user of this module; everything here
is a pure function of a ``Report`` (or of JSON text) and imports neither pytest nor JAX.

A baseline records, for one compiled program scored against one chip:

* the totals -- roofline time, FLOPs, HBM bytes, wire bytes;
* wire bytes and op count per collective kind (``all-reduce``, ``all-gather``, ...);
* each *significant* op (roofline time >= ``significant`` x the total, default 1%) and every collective, with
  its bound class and roofline time. Ops are identified by **opcode + framework op_name + dimensions** --
  never by XLA's instruction names (``fusion.12``), which are renumbered by unrelated changes. The element
  type is recorded but is not part of the identity, so a matmul that went from bf16 to f32 is reported as
  *that op* changing. Ops sharing one identity (two layers with equal shapes and names) are summed into one
  entry with ``instances`` > 1.

Notes:
    ``compare(baseline, current, tolerance)`` fails (``Comparison.failed``) on:

    1. a total (roofline time, FLOPs, HBM bytes, wire bytes) more than ``tolerance`` (relative) above the
       baseline;
    2. a collective kind whose wire bytes grew beyond ``tolerance``, a collective kind the baseline lacks, or
       more ops of a kind than the baseline had ("new collective": no tolerance);
    3. a baseline op whose roofline time grew beyond ``tolerance``, or whose bound class got worse
       (compute -> memory -> communication).

    Values below ``1 - tolerance`` of the baseline are improvements: reported, never failures. Ops that
    appear or disappear (other than collectives) are reported as notes; their cost shows in the totals.

Everything is static (roofline) cost: measured times of a trace are not stored, as they vary run to run.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Mapping

if TYPE_CHECKING:
    from hloscope.result import Report

__all__ = [
    "SCHEMA",
    "DEFAULT_TOLERANCE",
    "DEFAULT_SIGNIFICANT",
    "BaselineError",
    "Summary",
    "OpEntry",
    "Delta",
    "Comparison",
    "summarize",
    "trim",
    "dims_of",
    "to_json",
    "from_json",
    "read_baseline",
    "write_baseline",
    "compare",
    "baseline_path",
    "parse_fraction",
    "format_quantity",
]

SCHEMA = "hloscope.baseline/1"
#: Relative change of a metric beyond which it is a regression (or, downwards, an improvement).
DEFAULT_TOLERANCE = 0.05
#: Share of the total roofline time from which an op is stored and compared individually.
DEFAULT_SIGNIFICANT = 0.01

#: Bound classes from best to worst: an op moving right is a regression.
BOUND_ORDER = {"compute": 0, "memory": 1, "communication": 2}

#: Totals compared, in report order: (JSON key, label, unit).
TOTALS = (("roofline_s", "roofline time", "s"), ("flops", "FLOPs", "FLOP"), ("hbm_bytes", "HBM bytes", "B"),
          ("wire_bytes", "wire bytes", "B"))

# Values equal within this relative margin are "unchanged" (JSON keeps 6 significant digits).
_SAME = 1e-5


class BaselineError(ValueError):
    """A baseline file that cannot be used: unreadable, not JSON, or not a ``hloscope.baseline/1`` document.

    Attributes:
        path: the file.
        reason: what is wrong with it.
    """

    def __init__(self, path: str | os.PathLike[str], reason: str) -> None:
        self.path = str(path)
        self.reason = reason
        super().__init__(f"corrupted hloscope baseline {self.path}: {reason}")


@dataclass(frozen=True, slots=True)
class OpEntry:
    """One op identity (summed over its instances): where it is and what it costs per program run.

    ``opcode``, ``op_name`` and ``dims`` form the identity (``key``); the rest is compared or shown.
    ``dims`` is the result shape without element types (``[32,128]``; tuples ``([8],[8])``); ``""`` when
    the shapes are unknown (a report from a trace, or a ``Report`` without its HLO).
    """

    opcode: str
    op_name: str
    dims: str
    dtype: str
    category: str
    bound: str
    roofline_s: float
    flops: float
    hbm_bytes: float
    wire_bytes: float
    comm_kind: str = ""
    instances: int = 1
    instructions: tuple[str, ...] = field(default=(), compare=False)  # this run's XLA names; not stored

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.opcode, self.op_name, self.dims)

    @property
    def label(self) -> str:
        """``opcode op_name dims`` for messages (op_name elided in the middle past 60 characters)."""
        name = self.op_name or "(no op_name)"
        if len(name) > 60:
            name = name[:20] + "..." + name[-37:]
        return " ".join(p for p in (self.opcode, name, self.dims) if p)


@dataclass(frozen=True, slots=True)
class Summary:
    """What a baseline holds for one program (see the module docstring).

    Attributes:
        chip: chip id the ops were scored against.
        compiled_for: ``{"platform", "device_kind", "devices"}`` of the compile (empty when unknown, e.g. HLO
            text); baselines of different platforms or device kinds are not comparable.
        totals: ``roofline_s``, ``flops``, ``hbm_bytes``, ``wire_bytes`` (also ``compute_s``, ``memory_s``,
            ``comm_s``, shown not compared), per program run.
        collectives: kind -> ``{"ops": n, "wire_bytes": b}``.
        ops: significant ops and all collectives, sorted by identity.
        significant: the fraction of total roofline time an op needed to be listed.
        test: the pytest node id (informational).
        recorded_with: versions (``hloscope``, ``jax``), informational.
    """

    chip: str
    compiled_for: Mapping[str, Any]
    totals: Mapping[str, float]
    collectives: Mapping[str, Mapping[str, float]]
    ops: tuple[OpEntry, ...]
    significant: float = DEFAULT_SIGNIFICANT
    test: str = ""
    recorded_with: Mapping[str, str] = field(default_factory=dict)

    @property
    def roofline_s(self) -> float:
        return float(self.totals.get("roofline_s", math.nan))


@dataclass(frozen=True, slots=True)
class Delta:
    """One difference between a baseline and now.

    ``metric`` is a ``TOTALS`` label, ``"bound"``, ``"ops"`` (a collective count) or ``"new"``; ``old`` /
    ``new`` are numbers (``unit`` given) or bound names; ``subject`` is ``"total"``, a collective kind or an op
    label.
    """

    subject: str
    metric: str
    old: Any
    new: Any
    unit: str = ""
    note: str = ""

    @property
    def change(self) -> str:
        if self.metric == "bound":
            return f"{self.old} -> {self.new}"
        if self.metric == "new":
            return "new"
        if self.metric == "ops":
            return f"{self.old} -> {self.new} ops"
        return format_change(self.old, self.new)


@dataclass(frozen=True, slots=True)
class Comparison:
    """Result of ``compare``: what regressed, what improved, and notes (appeared/disappeared ops)."""

    baseline: Summary
    current: Summary
    tolerance: float
    regressions: tuple[Delta, ...]
    improvements: tuple[Delta, ...]
    notes: tuple[str, ...]

    @property
    def failed(self) -> bool:
        return bool(self.regressions)

    @property
    def roofline_change(self) -> float:
        """Relative change of the total roofline time (0.25 = 25% slower); NaN when the baseline is 0."""
        old, new = self.baseline.roofline_s, self.current.roofline_s
        return (new - old) / old if old else (0.0 if new == old else math.nan)

    def format(self, path: str | os.PathLike[str] | None = None, limit: int = 20) -> str:
        """The failure message: a headline and a small table of what regressed (at most ``limit`` rows), then
        improvements and notes, if any."""
        n = len(self.regressions)
        where = f" against {path}" if path else ""
        lines = [f"{n} roofline regression{'s' if n != 1 else ''}{where} "
                 f"(chip {self.current.chip}, tolerance {self.tolerance:.0%}):"]
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


# --------------------------------------------------------------------------------------------------
# Building a summary from a report
# --------------------------------------------------------------------------------------------------

_DTYPE_RE = re.compile(r"[a-z][a-z0-9]*\[")


def dims_of(shape: Any) -> str:
    """A shape's dimensions without element types or layout: ``f32[32,128]{1,0}`` -> ``[32,128]``,
    ``(f32[8], s32[])`` -> ``([8],[])``. Accepts a ``hloscope.Shape`` or its text; ``""`` for None."""
    if shape is None:
        return ""
    text = re.sub(r"\{[^{}]*\}", "", str(shape))  # layouts (HLO text forms)
    return _DTYPE_RE.sub("[", text).replace(" ", "")


def summarize(report: Report, shapes: Mapping[tuple[str, str, str], Any] | None = None, *,
              significant: float = DEFAULT_SIGNIFICANT, compiled_for: Mapping[str, Any] | None = None,
              test: str = "", recorded_with: Mapping[str, str] | None = None) -> Summary:
    """Condense a report into what a baseline stores.

    Args:
        report: a ``hloscope.analyze`` result (static or traced; measured times are ignored).
        shapes: (module, computation, instruction) -> result shape (``Shape`` or text), for op identities;
            without it ops are identified by opcode and op_name only.
        significant: ops whose summed roofline time is at least this share of the total are listed
            individually (collectives always are).
        compiled_for, test, recorded_with: stored as given (see ``Summary``).

    Returns:
        The ``Summary``; ``ops`` sorted by identity, so its JSON diffs well.
    """
    ops = report.ops
    mods = report.modules
    totals = {
        "roofline_s": _num(mods["roofline_s"].sum()), "flops": _num(mods["flops"].sum()),
        "hbm_bytes": _num(mods["bytes_accessed"].sum()), "wire_bytes": _num(mods["comm_bytes"].sum()),
        "compute_s": _num(mods["compute_s"].sum()), "memory_s": _num(mods["memory_s"].sum()),
        "comm_s": _num(mods["comm_s"].sum()),
    }
    shapes = shapes or {}
    groups: dict[tuple[str, str, str], dict[str, Any]] = {}
    collectives: dict[str, dict[str, float]] = {}
    cols = ("module", "computation", "instruction", "opcode", "category", "op_name", "dtype", "bound",
            "roofline_s", "compute_s", "memory_s", "comm_s", "flops", "bytes_accessed", "comm_bytes", "comm_kind")
    for row in zip(*(ops[c].tolist() for c in cols)):
        (module, comp, inst, opcode, category, op_name, dtype, bound, roof, c_s, m_s, w_s, flops, hbm, wire,
         kind) = row
        if category == "unjoined" or not isinstance(opcode, str) or roof != roof:  # trace op without HLO; NaN
            continue
        op_name = op_name if isinstance(op_name, str) else ""
        dims = dims_of(shapes.get((module, comp, inst)))
        key = (opcode, op_name, dims)
        g = groups.get(key)
        if g is None:
            g = groups[key] = {"dtypes": [], "category": category, "bounds": set(), "roofline_s": 0.0,
                               "compute_s": 0.0, "memory_s": 0.0, "comm_s": 0.0, "flops": 0.0, "hbm": 0.0,
                               "wire": 0.0, "kind": kind or "", "instances": 0, "instructions": []}
        if dtype and dtype not in g["dtypes"]:
            g["dtypes"].append(dtype)
        g["bounds"].add(bound)
        g["roofline_s"] += roof
        g["compute_s"] += c_s
        g["memory_s"] += m_s
        g["comm_s"] += w_s
        g["flops"] += flops
        g["hbm"] += hbm
        g["wire"] += wire
        g["instances"] += 1
        g["instructions"].append(inst)
        if kind and not opcode.endswith("-done"):
            c = collectives.setdefault(kind, {"ops": 0, "wire_bytes": 0.0})
            c["ops"] += 1
            c["wire_bytes"] += wire
    threshold = significant * totals["roofline_s"]
    entries = []
    for (opcode, op_name, dims), g in groups.items():
        collective = bool(g["kind"]) and not opcode.endswith("-done")
        if not collective and not (g["roofline_s"] >= threshold and g["roofline_s"] > 0):
            continue
        if len(g["bounds"]) == 1:
            bound = next(iter(g["bounds"]))
        else:
            times = {"compute": g["compute_s"], "memory": g["memory_s"], "communication": g["comm_s"]}
            bound = max(times, key=times.__getitem__)
        entries.append(OpEntry(opcode, op_name, dims, ",".join(sorted(g["dtypes"])), g["category"], bound,
                               _num(g["roofline_s"]), _num(g["flops"]), _num(g["hbm"]), _num(g["wire"]),
                               g["kind"], g["instances"], tuple(g["instructions"])))
    entries.sort(key=lambda e: e.key)
    return Summary(report.chip.id, dict(compiled_for or {}), totals,
                   {k: {"ops": v["ops"], "wire_bytes": _num(v["wire_bytes"])} for k, v in sorted(collectives.items())},
                   tuple(entries), significant, test, dict(recorded_with or {}))


def trim(summary: Summary, significant: float) -> Summary:
    """The summary with only the ops a baseline stores: collectives, and ops holding at least ``significant`` of
    the total roofline time. (Compare against an untrimmed summary, so that a stored op whose share fell below
    the threshold is still found.)"""
    threshold = significant * summary.roofline_s
    keep = tuple(e for e in summary.ops if (e.comm_kind and not e.opcode.endswith("-done"))
                 or (e.roofline_s >= threshold and e.roofline_s > 0))
    return dataclasses.replace(summary, ops=keep, significant=significant)


def _num(x: Any) -> float:
    return float(x)


# --------------------------------------------------------------------------------------------------
# JSON
# --------------------------------------------------------------------------------------------------


def _round(x: float) -> float | int:
    """6 significant digits (stable diffs, no float noise); integral values as ints."""
    if x != x or math.isinf(x):
        raise ValueError(f"cannot store {x} in a baseline")
    if not float(x).is_integer():
        x = float(f"{x:.6g}")
    if float(x).is_integer() and abs(x) < 2**63:
        return int(x)
    return x


def to_json(summary: Summary) -> str:
    """The baseline file's text: indented JSON, one op per block, keys in a fixed order, trailing newline."""
    doc = {
        "schema": SCHEMA,
        "test": summary.test,
        "chip": summary.chip,
        "compiled_for": dict(summary.compiled_for),
        "recorded_with": dict(summary.recorded_with),
        "significant": summary.significant,
        "totals": {k: _round(v) for k, v in summary.totals.items()},
        "collectives": {k: {"ops": int(v["ops"]), "wire_bytes": _round(v["wire_bytes"])}
                        for k, v in summary.collectives.items()},
        "ops": [
            {"opcode": e.opcode, "op_name": e.op_name, "dims": e.dims, "dtype": e.dtype, "category": e.category,
             "bound": e.bound, "roofline_s": _round(e.roofline_s), "flops": _round(e.flops),
             "hbm_bytes": _round(e.hbm_bytes), "wire_bytes": _round(e.wire_bytes),
             **({"comm_kind": e.comm_kind} if e.comm_kind else {}), "instances": e.instances}
            for e in summary.ops
        ],
    }
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"


def from_json(text: str, path: str | os.PathLike[str] = "<string>") -> Summary:
    """Parse a baseline file's text.

    Raises:
        BaselineError: not JSON (with line and column), another schema, or a missing/mistyped field (named).
    """
    __tracebackhide__ = True  # pytest shows the caller's line, not this function's (a no-op elsewhere)
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as err:
        hint = " (a merge conflict? resolve it, or delete the file and re-record)" if "<<<<<<<" in text else ""
        raise BaselineError(path, f"not JSON: {err.msg} (at line {err.lineno}, column {err.colno}){hint}") from None
    if not isinstance(doc, dict):
        raise BaselineError(path, f"expected a JSON object, got {type(doc).__name__}")
    if doc.get("schema") != SCHEMA:
        raise BaselineError(path, f"schema is {doc.get('schema')!r}, expected {SCHEMA!r}")
    try:
        totals = {k: float(v) for k, v in _get(doc, "totals", dict).items()}
        for k, _, _ in TOTALS:
            if k not in totals:
                raise KeyError(f"totals.{k}")
        collectives = {str(k): {"ops": int(_get(v, "ops", int)),
                                "wire_bytes": float(_get(v, "wire_bytes", (int, float)))}
                       for k, v in _get(doc, "collectives", dict).items()}
        ops = []
        for i, o in enumerate(_get(doc, "ops", list)):
            try:
                ops.append(OpEntry(
                    _get(o, "opcode", str), _get(o, "op_name", str), _get(o, "dims", str), _get(o, "dtype", str),
                    _get(o, "category", str), _get(o, "bound", str), float(_get(o, "roofline_s", (int, float))),
                    float(_get(o, "flops", (int, float))), float(_get(o, "hbm_bytes", (int, float))),
                    float(_get(o, "wire_bytes", (int, float))), str(o.get("comm_kind", "")),
                    int(o.get("instances", 1))))
            except KeyError as err:
                raise KeyError(f"ops[{i}].{err.args[0]}") from None
        return Summary(_get(doc, "chip", str), dict(doc.get("compiled_for") or {}), totals, collectives,
                       tuple(ops), float(doc.get("significant", DEFAULT_SIGNIFICANT)), str(doc.get("test", "")),
                       dict(doc.get("recorded_with") or {}))
    except KeyError as err:
        raise BaselineError(path, f"missing or mistyped field {err.args[0]!r}") from None
    except (TypeError, ValueError, AttributeError) as err:
        raise BaselineError(path, f"bad value: {err}") from None


def _get(doc: Any, key: str, types: type | tuple[type, ...]) -> Any:
    if not isinstance(doc, dict) or key not in doc or not isinstance(doc[key], types) or isinstance(doc[key], bool):
        raise KeyError(key)
    return doc[key]


def read_baseline(path: str | os.PathLike[str]) -> Summary | None:
    """The baseline stored at ``path``; None when there is no file.

    Raises:
        BaselineError: the file exists but cannot be read or parsed (never silently replaced).
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


def write_baseline(path: str | os.PathLike[str], summary: Summary) -> bool:
    """Write ``summary`` to ``path`` atomically (``<file>.<pid>.tmp`` then ``os.replace``), creating parent
    directories. A file whose content is already identical is left untouched.

    Returns:
        True when the file was written, False when it already held this content.
    """
    p = Path(path)
    text = to_json(summary)
    try:
        if p.read_text(encoding="utf-8") == text:
            return False
    except (OSError, UnicodeDecodeError):
        pass
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_name(f"{p.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
        os.replace(tmp, p)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return True


_UNSAFE = re.compile(r"[^A-Za-z0-9_.\-\[\]=,+@]")


def baseline_path(directory: str | os.PathLike[str], nodeid: str, name: str | None = None) -> Path:
    """Where the baseline of test ``nodeid`` lives: ``<directory>/<test file without .py>/<test name>.json``
    (classes become directories; ``name`` adds ``.<name>`` for a second baseline in one test). Characters
    unsafe in file names become ``_``; very long names are shortened with a hash."""
    import hashlib

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


# --------------------------------------------------------------------------------------------------
# Comparing
# --------------------------------------------------------------------------------------------------


def compare(baseline: Summary, current: Summary, tolerance: float = DEFAULT_TOLERANCE) -> Comparison:
    """Compare a run against its baseline; see the module Notes for what fails.

    Args:
        baseline: the stored summary.
        current: this run's summary (its ``ops`` may list more ops than the significant ones: each baseline op
            is looked up among them).
        tolerance: relative change tolerated (0.05 = 5%).

    Returns:
        A ``Comparison``; ``failed`` is True when anything regressed.
    """
    reg: list[Delta] = []
    imp: list[Delta] = []
    notes: list[str] = []

    def metric(subject: str, label: str, old: float, new: float, unit: str) -> None:
        if _worse(old, new, tolerance):
            reg.append(Delta(subject, label, old, new, unit))
        elif _better(old, new, tolerance):
            imp.append(Delta(subject, label, old, new, unit))

    for key, label, unit in TOTALS:
        metric("total", label, baseline.totals.get(key, 0.0), current.totals.get(key, 0.0), unit)

    cur_ops = {e.key: e for e in current.ops}
    base_ops = {e.key: e for e in baseline.ops}
    grown: set[str] = set()
    for kind in sorted(set(baseline.collectives) | set(current.collectives)):
        old, new = baseline.collectives.get(kind), current.collectives.get(kind)
        if old is None:
            grown.add(kind)
            n = int(new["ops"])
            reg.append(Delta(kind, "new", None, new["wire_bytes"], "B",
                             f"new collective kind, {n} op{'s' if n != 1 else ''}"))
        elif new is None:
            imp.append(Delta(kind, "ops", int(old["ops"]), 0))
        else:
            if new["ops"] > old["ops"]:
                grown.add(kind)
                reg.append(Delta(kind, "ops", int(old["ops"]), int(new["ops"]), "", "new collective"))
            elif new["ops"] < old["ops"]:
                imp.append(Delta(kind, "ops", int(old["ops"]), int(new["ops"])))
            metric(kind, "wire bytes", old["wire_bytes"], new["wire_bytes"], "B")
    # Name the collective ops behind a new kind or a higher count: those the baseline does not know.
    for key, e in cur_ops.items():
        if e.comm_kind in grown and key not in base_ops and not e.opcode.endswith("-done"):
            reg.append(Delta(e.label, "new", None, e.wire_bytes, "B", f"new {e.comm_kind}"))
        elif e.comm_kind and key not in base_ops and not e.opcode.endswith("-done"):
            notes.append(f"collective not in the baseline: {e.label} ({format_quantity(e.wire_bytes, 'B')} on the "
                         f"wire; its kind's count is unchanged)")

    dims_known = all(e.dims for e in baseline.ops) and all(e.dims for e in current.ops)
    for key, old in base_ops.items():
        new = cur_ops.get(key)
        if new is None:
            notes.append(f"op gone: {old.label} (was {format_quantity(old.roofline_s, 's')}, {old.bound}-bound)")
            continue
        label = new.label + (f" {old.dtype}->{new.dtype}" if old.dtype != new.dtype else "")
        if old.instances != new.instances:
            notes.append(f"{new.label}: {old.instances} -> {new.instances} instances")
        metric(label, "roofline time", old.roofline_s, new.roofline_s, "s")
        ob, nb = BOUND_ORDER.get(old.bound), BOUND_ORDER.get(new.bound)
        if ob is not None and nb is not None and ob != nb:
            (reg if nb > ob else imp).append(Delta(label, "bound", old.bound, new.bound))
    threshold = baseline.significant * current.roofline_s
    for key, e in cur_ops.items():
        if key not in base_ops and not e.comm_kind and e.roofline_s >= threshold and e.roofline_s > 0:
            notes.append(f"new op: {e.label} {e.dtype} ({format_quantity(e.roofline_s, 's')}, {e.bound}-bound)")
    if not dims_known and baseline.ops and current.ops:
        notes.append("ops matched by opcode and op_name only (no shapes: a trace or a plain Report)")
    return Comparison(baseline, current, tolerance, tuple(_ordered(reg)), tuple(_ordered(imp)), tuple(notes))


def _worse(old: float, new: float, tol: float) -> bool:
    """``new`` is more than ``tol`` (relative) above ``old`` (and not within float noise)."""
    if new <= old or new - old <= _SAME * max(abs(old), abs(new)):
        return False
    if old <= 0:
        return True
    return new > old * (1 + tol)


def _better(old: float, new: float, tol: float) -> bool:
    """``new`` is more than ``tol`` (relative) below ``old`` (and not within float noise)."""
    if new >= old or old - new <= _SAME * max(abs(old), abs(new)):
        return False
    return new < old * (1 - tol)


def _ordered(deltas: Iterable[Delta]) -> list[Delta]:
    """Totals and collective kinds first (in the order found), then ops by the size of the change."""
    deltas = list(deltas)
    head = [d for d in deltas if d.subject == "total" or d.metric in ("ops", "new")]
    ops = [d for d in deltas if d not in head]

    def size(d: Delta) -> float:
        if isinstance(d.old, (int, float)) and isinstance(d.new, (int, float)):
            return abs(d.new - d.old)
        return math.inf  # bound changes first

    return head + sorted(ops, key=size, reverse=True)


# --------------------------------------------------------------------------------------------------
# Formatting
# --------------------------------------------------------------------------------------------------

_PREFIXES = ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1.0, ""))
_TIME = ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs"), (1e-9, "ns"), (1e-12, "ps"))


def format_quantity(value: Any, unit: str) -> str:
    """``3.12 µs``, ``1.57 MB``, ``11.2 MFLOP``; ``-`` for None/NaN; other values as text."""
    if value is None or (isinstance(value, float) and value != value):
        return "-"
    if not isinstance(value, (int, float)):
        return str(value)
    v = float(value)
    if unit == "s":
        if v == 0:
            return "0 s"
        for scale, name in _TIME:
            if abs(v) >= scale:
                return f"{v / scale:.3g} {name}"
        return f"{v / 1e-12:.3g} ps"
    for scale, prefix in _PREFIXES:
        if abs(v) >= scale:
            return f"{v / scale:.3g} {prefix}{unit}".rstrip()
    return f"{v:.3g} {unit}".rstrip()


def format_change(old: Any, new: Any) -> str:
    """``+12.5%``; ``new`` when the baseline was 0."""
    if not isinstance(old, (int, float)) or not isinstance(new, (int, float)):
        return ""
    if old == 0:
        return "+0.0%" if new == 0 else "new"
    rel = (new - old) / old
    return f"{0.0 if abs(rel) < 5e-4 else rel:+.1%}"


def _table(deltas: Iterable[Delta], limit: int) -> list[str]:
    deltas = list(deltas)
    rows = [("what", "metric", "baseline", "now", "change")]
    for d in deltas[:limit]:
        change = d.change + (f" ({d.note})" if d.note else "")
        rows.append((d.subject, d.metric if d.metric != "new" else "wire bytes",
                     format_quantity(d.old, d.unit), format_quantity(d.new, d.unit), change))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    out = ["  " + "  ".join(c.ljust(w) for c, w in zip(r[:4], widths)) + "  " + r[4] for r in rows]
    if len(deltas) > limit:
        out.append(f"  ... and {len(deltas) - limit} more")
    return out


def parse_fraction(text: str | float, where: str) -> float:
    """A tolerance or share: ``0.05``, ``5%``. ``where`` names the setting's origin for the error.

    Raises:
        ValueError: ``invalid tolerance '5x' from <where>: expected a fraction such as 0.05 or a percentage
            such as 5%``.
    """
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        value = float(text)
    else:
        s = str(text).strip()
        try:
            value = float(s[:-1]) / 100 if s.endswith("%") else float(s)
        except ValueError:
            raise ValueError(f"invalid value {text!r} from {where}: expected a fraction such as 0.05 or a "
                             f"percentage such as 5%") from None
    if not (0 <= value < 100) or value != value:
        raise ValueError(f"invalid value {text!r} from {where}: must be >= 0 (0.05 means 5%)")
    return value
