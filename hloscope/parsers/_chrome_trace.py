"""Reader for Chrome-trace profiles (``*.trace.json.gz``) and a cost model of one HLO instruction line.

JAX's profiler (through xprof) writes a Chrome "Trace Event Format" file next to the XSpace; xprof's trace
viewer serves the same JSON. On TPU each executed HLO op is one complete event (``"ph": "X"``) on the thread
``XLA Ops`` of a device process named ``/device:TPU:<n>`` (process and thread names come from ``"ph": "M"``
metadata events), with libtpu's own numbers in ``args``: ``long_name`` (the instruction's HLO text, one line,
without the fused computation's body), ``model_flops``, ``bytes_accessed``, ``device_duration_ps``,
``hlo_category``, ``tf_op``, ``source``. Module runs are the events of the ``XLA Modules`` thread, named
``<module>(<program id>)``. What real files hold, and how libtpu's numbers compare with hloscope's, is in
``docs/chrome_trace.md``.

Public functions:

* :func:`read_chrome_trace` -- a ``.trace.json.gz`` (or plain ``.trace.json``) to a :class:`ChromeTrace`
  (op events, module runs, step markers as DataFrames), streaming the JSON so that host events (most of a big
  trace) are never held in memory.
* :func:`parse_line` -- one HLO instruction line (``long_name``) to a :class:`ParsedLine`: the instruction inside
  a tiny module whose parameters have the printed operand shapes.
* :func:`canonical_line` -- the line with every ``%name`` renamed by position (lines that differ only in names
  cost the same; the caches key on this form).
* :func:`line_cost` / :func:`line_cost_detail` -- the cost hloscope's own rules give that instruction, with
  ``None`` wherever the line alone does not determine it (a fusion's FLOPs need its body).
* :func:`trace_costs` -- what ``report.table.ops_frame`` / ``modules_frame`` need to report a Chrome trace.
"""

from __future__ import annotations

import gzip
import io
import json
import math
import os
import re
import zlib
from collections import defaultdict
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, NamedTuple

from hloscope.parsers._trace_error import TraceError
from hloscope.parsers._xspace import _self_times, _split_module_key
from hloscope.parsers._xspace import _as_step

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from hloscope.cost import ModuleCost
    from hloscope.cost._types import OpCost
    from hloscope.hlo import HloInstruction, HloModule, Shape

__all__ = [
    "ChromeTrace",
    "LineCost",
    "ParsedLine",
    "TraceCosts",
    "TraceError",
    "canonical_line",
    "line_cost",
    "line_cost_detail",
    "parse_line",
    "read_chrome_trace",
    "trace_costs",
]

XLA_OPS_THREAD = "XLA Ops"
XLA_MODULES_THREAD = "XLA Modules"
STEPS_THREAD = "Steps"
#: Flag of a report row whose FLOPs or bytes are libtpu's (the ``model_flops`` / ``bytes_accessed`` of the
#: trace) because the instruction line alone does not determine them.
LIBTPU_FLAG = "costed-by-libtpu"
#: Module name of op events outside any ``XLA Modules`` event.
NO_MODULE = "(no module)"

OP_COLUMNS = (
    "device", "device_id", "name", "hlo_module", "program_id", "start_us", "duration_us", "self_us",
    "long_name", "category", "model_flops", "bytes_accessed", "raw_bytes_accessed", "tf_op", "source",
)
MODULE_COLUMNS = ("device", "device_id", "name", "hlo_module", "program_id", "run_id", "start_us", "duration_us")
STEP_COLUMNS = ("device", "device_id", "thread", "name", "step_num", "start_us", "duration_us")

_DEVICE_RE = re.compile(r"^/device:([A-Za-z_]+):(\d+)")
#: The ``args`` of device events that are kept (the rest, e.g. ``source_stack``, is dropped while streaming).
_KEPT_ARGS = frozenset({"long_name", "hlo_category", "model_flops", "bytes_accessed", "raw_bytes_accessed",
                        "tf_op", "source", "device_duration_ps", "hlo_module", "program_id", "run_id",
                        "step_num"})
_CHUNK = 1 << 20
#: Longest single JSON value (one event) the stream buffers while waiting for it to complete.
_MAX_VALUE = 64 << 20


@dataclass
class ChromeTrace:
    """The per-op content of one Chrome-trace file.

    Attributes:
        path: the file read.
        ops: one row per HLO op event of a device's ``XLA Ops`` thread, sorted by device then start
            (``OP_COLUMNS``):

            * ``device`` (str, ``/device:TPU:0``), ``device_id`` (int, the ``N`` of the name);
            * ``name`` (str): the HLO instruction name (XLA's ``hlo_op``);
            * ``hlo_module`` (str) and ``program_id`` (nullable UInt64): from the event's ``args`` when present,
              else from the enclosing ``XLA Modules`` event (``jit_step(123)``); ``""`` / NA when neither;
            * ``start_us``, ``duration_us`` (float, microseconds; the duration is ``device_duration_ps`` when
              given), ``self_us`` (duration minus directly nested op events on the same thread);
            * ``long_name`` (str): the instruction's HLO text (``args.long_name``), ``""`` when absent;
            * ``category`` (str): libtpu's ``hlo_category`` (``loop fusion``, ``convolution fusion``, ...);
            * ``model_flops``, ``bytes_accessed``, ``raw_bytes_accessed`` (float, NaN when absent): libtpu's
              numbers for one execution;
            * ``tf_op``, ``source`` (str): framework op name and ``file:line``.
        modules: one row per module run (``XLA Modules`` events; ``MODULE_COLUMNS``).
        steps: step markers (``STEP_COLUMNS``): events of device ``Steps`` threads and host events whose
            ``args`` carry ``step_num``; empty when the trace has none.
        devices: device process names that hold op events, sorted.
        display_time_unit: the file's ``displayTimeUnit`` (``ns`` or ``ms``; timestamps are microseconds either
            way).
    """

    path: str
    ops: pd.DataFrame
    modules: pd.DataFrame
    steps: pd.DataFrame
    devices: tuple[str, ...] = ()
    display_time_unit: str = ""


# --------------------------------------------------------------------------------------------------------
# Streaming the JSON


class _Stream:
    """A text stream read in chunks, decoded one JSON value at a time (``json.JSONDecoder.raw_decode``)."""

    __slots__ = ("fh", "buf", "pos", "eof", "path", "decoder")

    def __init__(self, fh: io.TextIOBase, path: str) -> None:
        self.fh = fh
        self.buf = ""
        self.pos = 0
        self.eof = False
        self.path = path
        self.decoder = json.JSONDecoder()

    def _more(self) -> bool:
        if self.eof:
            return False
        chunk = _read(self.fh, self.path)
        if not chunk:
            self.eof = True
            return False
        if self.pos:
            self.buf = self.buf[self.pos:]
            self.pos = 0
        self.buf += chunk
        return True

    def peek(self) -> str:
        """The next non-blank character ("" at the end), not consumed."""
        while True:
            buf = self.buf
            n = len(buf)
            pos = self.pos
            while pos < n and buf[pos] in " \t\r\n":
                pos += 1
            self.pos = pos
            if pos < n:
                return buf[pos]
            if not self._more():
                return ""

    def expect(self, chars: str) -> str:
        ch = self.peek()
        if not ch or ch not in chars:
            raise TraceError(self.path, f"is not a JSON trace: expected {' or '.join(repr(c) for c in chars)} at "
                                        f"character {self.pos}, found {ch or 'end of file'!r}; "
                                        "expected a Chrome trace (*.trace.json.gz)")
        self.pos += 1
        return ch

    def value(self) -> Any:
        """Decode the next JSON value, reading more text while the value is incomplete."""
        self.peek()
        while True:
            try:
                value, end = self.decoder.raw_decode(self.buf, self.pos)
            except json.JSONDecodeError as e:
                # A value cut by the chunk boundary is incomplete: read more, up to a bound on one value's size
                # (a malformed file must not be buffered whole).
                if len(self.buf) - self.pos < _MAX_VALUE and self._more():
                    continue
                raise TraceError(self.path, f"is not valid JSON ({e.msg} near character {e.pos}); expected a "
                                            "complete Chrome trace (*.trace.json.gz), re-copy the file") from None
            # A number at the end of the buffer may continue in the next chunk.
            if end == len(self.buf) and not self.eof and isinstance(value, (int, float)):
                if self._more():
                    continue
            self.pos = end
            return value


def _read(fh, path: str) -> str:
    try:
        return fh.read(_CHUNK)
    except (OSError, EOFError, zlib.error, UnicodeDecodeError) as e:
        raise TraceError(path, f"cannot be decompressed or decoded ({e}); expected a gzip-compressed JSON "
                               "Chrome trace (*.trace.json.gz)") from None


class _Key(NamedTuple):
    """A top-level key of the trace object, yielded by ``_events`` between the events."""

    name: str
    value: Any


def _events(stream: _Stream) -> Iterator[Any]:
    """The trace's events: elements of the top-level array, or of the top-level object's ``traceEvents``.

    Each top-level key (``traceEvents`` itself, ``displayTimeUnit``, ``metadata``, ...) is yielded as a
    ``_Key`` (``traceEvents`` with value None, before its events).
    """
    first = stream.expect("{[")
    if first == "[":  # the Trace Event Format's bare "JSON Array Format"
        yield _Key("traceEvents", None)
        yield from _array(stream)
        return
    if stream.peek() == "}":
        stream.pos += 1
        return
    while True:
        key = stream.value()
        if not isinstance(key, str):
            raise TraceError(stream.path, "is not a JSON object with string keys; expected a Chrome trace")
        stream.expect(":")
        if key == "traceEvents":
            stream.expect("[")
            yield _Key(key, None)
            yield from _array(stream)
        else:
            yield _Key(key, stream.value())
        if stream.expect(",}") == "}":
            return


def _array(stream: _Stream) -> Iterator[Any]:
    """The elements of an array whose '[' was read."""
    if stream.peek() == "]":
        stream.pos += 1
        return
    while True:
        yield stream.value()
        if stream.expect(",]") == "]":
            return


def _open_text(path: Path) -> io.TextIOBase:
    with open(path, "rb") as fh:
        head = fh.read(2)
    if head == b"\x1f\x8b":
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8")
    return open(path, encoding="utf-8")  # noqa: SIM115 - closed by the caller


# --------------------------------------------------------------------------------------------------------
# Reading


def _num(v: Any) -> float:
    if v is None:
        return math.nan
    try:
        return float(v)
    except (TypeError, ValueError):
        return math.nan


def _ps(v: Any) -> int | None:
    try:
        return int(v)
    except (TypeError, ValueError):
        return None


def read_chrome_trace(path: str | os.PathLike[str]) -> ChromeTrace:
    """Read the HLO op events, module runs and step markers of a Chrome trace (``*.trace.json.gz``).

    The file is decoded one event at a time: events of host processes are dropped as they are read (except
    step annotations), device events are reduced to the fields kept and their strings shared, so memory grows
    with the device op events, not with the file (measurements in ``docs/chrome_trace.md``).

    Args:
        path: a ``.trace.json.gz`` file (gzip-compressed JSON; an uncompressed ``.trace.json`` works too).

    Returns:
        A :class:`ChromeTrace`.

    Raises:
        TraceError: (naming ``path``) the file is missing or a directory; is neither gzip nor JSON, or is
            truncated; has no ``traceEvents``; or holds no HLO op events on a device's ``XLA Ops`` thread.
    """
    import pandas as pd

    p = Path(path)
    spath = str(p)
    if not p.exists():
        raise TraceError(p, "no such file; expected a Chrome trace *.trace.json.gz (written by jax.profiler "
                            "next to the *.xplane.pb)")
    if p.is_dir():
        raise TraceError(p, "is a directory, expected one *.trace.json.gz file")
    try:
        fh = _open_text(p)
    except OSError as e:
        raise TraceError(p, f"cannot be read ({e.strerror or e}); check the path and its permissions") from None

    process: dict[Any, str] = {}
    thread: dict[tuple[Any, Any], str] = {}
    devices: dict[Any, tuple[str, int] | None] = {}  # pid -> (process name, device id), None: not a device
    pending: list[dict] = []  # "X" events of processes not named yet (Chrome traces allow any order)
    ops: list[tuple] = []
    modules: list[tuple] = []
    steps: list[tuple] = []
    strings: dict[str, str] = {}
    share = strings.setdefault  # one object per distinct string: op lines repeat every step
    saw_events = False
    unit = ""

    def device(pid: Any) -> tuple[str, int] | None | bool:
        """(name, id) of a device process, None for another named process, False while unnamed."""
        d = devices.get(pid, False)
        if d is False and pid in process:
            m = _DEVICE_RE.match(process[pid])
            d = devices[pid] = (process[pid], int(m.group(2))) if m else None
        return d

    def take(ev: dict, dev: tuple[str, int]) -> None:
        pid = ev.get("pid")
        tname = thread.get((pid, ev.get("tid")), "")
        args = ev.get("args")
        if not isinstance(args, dict):
            args = {}
        start_ps = round(_num(ev.get("ts")) * 1e6)
        dur_ps = _ps(args.get("device_duration_ps"))
        if dur_ps is None:
            d = _num(ev.get("dur"))
            dur_ps = 0 if math.isnan(d) else round(d * 1e6)
        name = str(ev.get("name", ""))
        if tname == XLA_OPS_THREAD:
            get = args.get

            def text(key: str) -> str:
                v = get(key, "")
                v = v if type(v) is str else str(v)
                return share(v, v)

            ops.append((dev[0], dev[1], share(name, name), start_ps, dur_ps, text("long_name"),
                        text("hlo_category"), _num(get("model_flops")), _num(get("bytes_accessed")),
                        _num(get("raw_bytes_accessed")), text("tf_op"), text("source"), get("hlo_module"),
                        _as_int(get("program_id"))))
        elif tname == XLA_MODULES_THREAD:
            module, program_id = _split_module_key(name)
            modules.append((dev[0], dev[1], name, module, program_id, args.get("run_id"), start_ps, dur_ps))
        elif tname == STEPS_THREAD:
            steps.append((dev[0], dev[1], tname, name, _as_int(args.get("step_num", name)), start_ps, dur_ps))

    def host_step(ev: dict) -> None:
        args = ev["args"]
        d = _num(ev.get("dur"))
        steps.append((process.get(ev.get("pid"), ""), -1, thread.get((ev.get("pid"), ev.get("tid")), ""),
                      str(ev.get("name", "")), _as_int(args.get("step_num")), round(_num(ev.get("ts")) * 1e6),
                      0 if math.isnan(d) else round(d * 1e6)))

    with fh:
        for ev in _events(_Stream(fh, spath)):
            if type(ev) is _Key:
                if ev.name == "traceEvents":
                    saw_events = True
                elif ev.name == "displayTimeUnit" and isinstance(ev.value, str):
                    unit = ev.value
                continue
            if not isinstance(ev, dict):
                continue
            ph = ev.get("ph")
            if ph == "X":
                dev = device(ev.get("pid"))
                if dev:
                    take(ev, dev)
                elif dev is None:
                    args = ev.get("args")
                    if isinstance(args, dict) and "step_num" in args:
                        host_step(ev)
                else:
                    args = ev.get("args")
                    if isinstance(args, dict) and len(args) > len(_KEPT_ARGS):
                        ev["args"] = {k: v for k, v in args.items() if k in _KEPT_ARGS}
                    pending.append(ev)
            elif ph == "M":
                args = ev.get("args") or {}
                if ev.get("name") == "process_name":
                    process[ev.get("pid")] = str(args.get("name", ""))
                elif ev.get("name") == "thread_name":
                    thread[(ev.get("pid"), ev.get("tid"))] = str(args.get("name", ""))
    if not saw_events:
        raise TraceError(p, "has no traceEvents array; expected a Chrome trace (*.trace.json.gz from "
                            "jax.profiler / xprof), not another JSON file")
    for ev in pending:
        dev = device(ev.get("pid"))
        if dev:
            take(ev, dev)
        elif isinstance(ev.get("args"), dict) and "step_num" in ev["args"]:
            host_step(ev)
    if not ops:
        names = sorted({n for n in process.values() if n.startswith("/device:")})
        raise TraceError(p, "no per-HLO-op events: no complete ('X') event on an 'XLA Ops' thread of a "
                            f"/device:... process (device processes: {names or 'none'}); capture the profile "
                            "on TPU with jax.profiler.trace around jitted steps")

    frame = _ops_frame(ops, modules)
    module_frame = pd.DataFrame(
        {
            "device": [r[0] for r in modules],
            "device_id": pd.Series([r[1] for r in modules], dtype="int64"),
            "name": [r[2] for r in modules],
            "hlo_module": [r[3] for r in modules],
            "program_id": pd.Series([r[4] for r in modules], dtype="UInt64"),
            "run_id": [r[5] for r in modules],
            "start_us": pd.Series([r[6] / 1e6 for r in modules], dtype="float64"),
            "duration_us": pd.Series([r[7] / 1e6 for r in modules], dtype="float64"),
        },
        columns=list(MODULE_COLUMNS),
    ).sort_values(["device_id", "start_us"], kind="stable").reset_index(drop=True)
    step_frame = pd.DataFrame(
        {
            "device": [r[0] for r in steps],
            "device_id": pd.Series([r[1] for r in steps], dtype="int64"),
            "thread": [r[2] for r in steps],
            "name": [r[3] for r in steps],
            "step_num": pd.Series([r[4] for r in steps], dtype="Int64"),
            "start_us": pd.Series([r[5] / 1e6 for r in steps], dtype="float64"),
            "duration_us": pd.Series([r[6] / 1e6 for r in steps], dtype="float64"),
        },
        columns=list(STEP_COLUMNS),
    )
    names = tuple(sorted({r[0] for r in ops}, key=lambda n: (len(n), n)))
    return ChromeTrace(spath, frame, module_frame, step_frame, names, unit)


_as_int = _as_step  # an int, or an integer string, from a JSON arg; else None


def _ops_frame(ops: list[tuple], module_rows: list[tuple]) -> pd.DataFrame:
    """Op rows -> DataFrame, per device sorted by start: module from the event's args or from the enclosing
    module run, self time (duration minus directly nested op events)."""
    import pandas as pd
    from bisect import bisect_right

    spans: dict[str, list[tuple[int, int, str, int | None]]] = defaultdict(list)
    for r in module_rows:
        spans[r[0]].append((r[6], r[6] + r[7], r[3], r[4]))
    by_dev: dict[str, list[tuple]] = defaultdict(list)
    for r in ops:
        by_dev[r[0]].append(r)
    out: list[tuple] = []
    selfs: list[int] = []
    modules: list[str] = []
    programs: list[int | None] = []
    for dev in sorted(by_dev, key=lambda n: (len(n), n)):
        rows = by_dev[dev]
        rows.sort(key=lambda r: (r[3], -r[4]))
        dev_spans = sorted(spans.get(dev, ()))
        starts = [s[0] for s in dev_spans]
        selfs.extend(_self_times([r[3] for r in rows], [r[4] for r in rows]))
        for r in rows:
            module, program_id = r[12], r[13]
            if not module and starts:
                j = bisect_right(starts, r[3]) - 1
                if j >= 0 and r[3] < dev_spans[j][1]:
                    module = dev_spans[j][2]
                    program_id = program_id if program_id is not None else dev_spans[j][3]
            modules.append(str(module or ""))
            programs.append(program_id)
        out.extend(rows)
    cols = list(zip(*out))
    return pd.DataFrame(
        {
            "device": pd.Series(cols[0], dtype=object),
            "device_id": pd.Series(cols[1], dtype="int64"),
            "name": pd.Series(cols[2], dtype=object),
            "hlo_module": pd.Series(modules, dtype=object),
            "program_id": pd.Series(programs, dtype="UInt64"),
            "start_us": pd.Series(cols[3], dtype="float64") / 1e6,
            "duration_us": pd.Series(cols[4], dtype="float64") / 1e6,
            "self_us": pd.Series(selfs, dtype="float64") / 1e6,
            "long_name": pd.Series(cols[5], dtype=object),
            "category": pd.Series(cols[6], dtype=object),
            "model_flops": pd.Series(cols[7], dtype="float64"),
            "bytes_accessed": pd.Series(cols[8], dtype="float64"),
            "raw_bytes_accessed": pd.Series(cols[9], dtype="float64"),
            "tf_op": pd.Series(cols[10], dtype=object),
            "source": pd.Series(cols[11], dtype=object),
        },
        columns=list(OP_COLUMNS),
    )


# --------------------------------------------------------------------------------------------------------
# One instruction line

#: ``%name`` tokens (instruction, operand and computation names) of a line.
_SIGIL = re.compile(r"%([^\s,(){}=]+)")
_INDEX_COMMENT = re.compile(r"/\*.*?\*/", re.DOTALL)
_HEAD = re.compile(r"\s*(?:ROOT\s+)?%([^\s=]+)\s*=\s*")
_OPCODE = re.compile(r"\s*([a-z][a-z0-9\-_]*)\s*\(")
_CALLEE = re.compile(r"(?:^|[\s,])(?:calls|to_apply|condition|body|branch_computations|true_computation|"
                     r"false_computation|async_wrapped_computation|select|scatter|called_computations)="
                     r"(\{[^}]*\}|%[^\s,{}]+)")
_TILES = re.compile(r"T(?:\([^()]*\))+")
_NO_OPERANDS = frozenset({"parameter", "constant", "iota", "partition-id", "replica-id", "after-all",
                          "rng-get-and-update-state"})


def canonical_line(long_name: str) -> tuple[str, tuple[str, ...]]:
    """``long_name`` with ``/*...*/`` comments removed and every ``%name`` renamed ``%n<i>`` (i = order of first
    appearance; the instruction's own name is ``n0``), and the original names. Lines that differ only in names
    (layer 3's ``fusion.812`` and layer 4's ``fusion.815``) cost the same: the cache keys on this form."""
    text = long_name.strip()
    if "/*" in text:
        text = _INDEX_COMMENT.sub("", text)
    names: dict[str, str] = {}

    def rename(m: re.Match[str]) -> str:
        n = m.group(1)
        c = names.get(n)
        if c is None:
            c = names[n] = f"n{len(names)}"
        return "%" + c

    return _SIGIL.sub(rename, text), tuple(names)


@dataclass(frozen=True)
class ParsedLine:
    """One HLO instruction line, parsed inside a tiny module made for it.

    Attributes:
        instruction: the instruction (attributes decoded by hloscope's parser on first access).
        module: the tiny module: one parameter per printed operand (of its printed shape), a stub for each
            called computation (a scalar f32 ``add``), and the instruction as ``ROOT``.
        operand_shapes: the printed shape of each operand, in order.
    """

    instruction: HloInstruction
    module: HloModule
    operand_shapes: tuple[Shape, ...]


def _close(text: str, open_pos: int) -> int:
    """Index of the ')' matching the '(' at ``open_pos`` (strings skipped), or -1."""
    depth = 0
    i = open_pos
    n = len(text)
    while i < n:
        ch = text[i]
        if ch == '"':
            i += 1
            while i < n and text[i] != '"':
                i += 2 if text[i] == "\\" else 1
        elif ch in "({[":
            depth += 1
        elif ch in ")}]":
            depth -= 1
            if depth == 0:
                return i if ch == ")" else -1
        i += 1
    return -1


def _split_top(text: str) -> list[str]:
    parts = []
    depth = 0
    start = 0
    for i, ch in enumerate(text):
        if ch in "({[":
            depth += 1
        elif ch in ")}]":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


def _stub(name: str) -> str:
    return (f"%{name} (s.a: f32[], s.b: f32[]) -> f32[] {{\n  %s.a = f32[] parameter(0)\n"
            f"  %s.b = f32[] parameter(1)\n  ROOT %s.add = f32[] add(f32[] %s.a, f32[] %s.b)\n}}\n\n")


def parse_line(long_name: str, *, tiles: bool = True) -> ParsedLine:
    """Parse one HLO instruction line as XLA prints it: ``%name = shape opcode(shape %a, ...), attrs``.

    Each operand becomes a parameter of its printed shape and each called computation a stub adding two f32
    scalars (a reducer then costs 1 FLOP per application; :func:`line_cost_detail` never reports a FLOP count
    that depends on that assumption). Names are kept as printed.

    Args:
        long_name: the line: a trace's ``args.long_name``, or an XProf ``expression`` / ``hlo_op_expression``.
        tiles: keep the layouts' tiles ``T(...)``; False drops them, so every size is dense.

    Raises:
        ValueError: the text is not one instruction with printed operand shapes (the message says why).
    """
    text = long_name.strip()
    if "/*" in text:
        text = _INDEX_COMMENT.sub("", text)
    return _parse(text, tiles)


@lru_cache(maxsize=8192)
def _parse(text: str, tiles: bool) -> ParsedLine:
    from hloscope.parsers import _hlo_re as r
    from hloscope.parsers._errors import HloParseError
    from hloscope.parsers._hlo_text import parse_hlo_text

    if not tiles:
        text = _TILES.sub("", text)
    head = _HEAD.match(text)
    if head is None:
        raise ValueError("not an HLO instruction line ('%name = shape opcode(...)')")
    try:
        _, pos = r._shape_at(text, head.end())
    except ValueError as e:
        raise ValueError(f"no result shape: {e}") from None
    om = _OPCODE.match(text, pos)
    if om is None:
        raise ValueError("no opcode and '(' after the result shape")
    open_pos = om.end() - 1
    close = _close(text, open_pos)
    if close < 0:
        raise ValueError("unbalanced operand list (the line may be truncated)")
    opcode = om.group(1)
    params: list[str] = []
    shapes: list[Shape] = []
    seen: set[str] = set()
    if opcode not in _NO_OPERANDS:
        for k, piece in enumerate(_split_top(text[open_pos + 1:close])):
            try:
                oshape, opos = r._shape_at(piece, 0)
            except ValueError:
                raise ValueError(f"operand {k} ({piece[:40]!r}) has no printed shape") from None
            oname = piece[opos:].strip()
            if not oname.startswith("%") or any(c in oname for c in " \t\n"):
                raise ValueError(f"operand {k} ({piece[:40]!r}) is not 'shape %name'")
            if oname not in seen:
                seen.add(oname)
                params.append(f"  {oname} = {piece[:opos].strip()} parameter({len(params)})\n")
            shapes.append(oshape)
    callees: list[str] = []
    for value in _CALLEE.findall(text, close):
        for n in (r.name_list(value) if value.startswith("{") else (r.name_value(value),)):
            if n not in callees and "%" + n not in seen:
                callees.append(n)
    src = ("HloModule line\n\n" + "".join(_stub(c) for c in callees) + "ENTRY %line.entry {\n" + "".join(params)
           + "  ROOT " + text[head.start(1) - 1:] + "\n}\n")
    try:
        module = parse_hlo_text(src, source="<long_name>")
    except HloParseError as e:
        raise ValueError(f"hloscope's HLO parser rejects the line: {str(e).splitlines()[0]}") from None
    return ParsedLine(module.entry.root, module, tuple(shapes))


@dataclass(frozen=True)
class LineCost:
    """What hloscope's rules say about one instruction from its line alone.

    Attributes:
        opcode: the instruction's opcode (``""`` when the line did not parse).
        flops, transcendentals: None when the line does not determine them (fusion body, called reducer,
            async wrapper, opaque custom call, control flow).
        bytes_read, bytes_written: HBM bytes by hloscope's rule for the opcode (a fusion: its boundary); None
            when the line does not determine them.
        comm_bytes: wire bytes per device of a collective (None when its group size is not printed), else 0.
        comm_kind, group_size: collective family and N.
        applications: for an op applying a called computation (reduce, all-reduce, scatter, map, ...): how many
            times it applies it. Its FLOPs are ``applications x cost(callee)``; 0 applications determine 0.
        result_bytes: dense bytes of the result (all tuple leaves), None when the line did not parse.
        flags: the rule's flags.
        why: why a value is None.
    """

    opcode: str = ""
    flops: float | None = None
    transcendentals: float | None = None
    bytes_read: float | None = None
    bytes_written: float | None = None
    comm_bytes: float | None = 0.0
    comm_kind: str = ""
    group_size: int = 0
    applications: float | None = None
    result_bytes: float | None = None
    flags: frozenset[str] = frozenset()
    why: str = ""

    @property
    def bytes_accessed(self) -> float | None:
        """``bytes_read + bytes_written``, or None when either is unknown."""
        if self.bytes_read is None or self.bytes_written is None:
            return None
        return self.bytes_read + self.bytes_written


#: Opcodes whose cost is that of a called computation the line does not print.
_BODY_OPCODES = frozenset({"fusion", "while", "conditional", "call", "async-start", "async-update", "async-done"})
#: Opcodes whose FLOPs are ``applications x cost(called computation)``.
_APPLYING = frozenset({"reduce", "reduce-window", "select-and-scatter", "scatter", "map", "all-reduce",
                       "all-reduce-start", "reduce-scatter"})


def line_cost_detail(long_name: str, *, padded: bool = True) -> LineCost:
    """Cost one HLO instruction line with hloscope's rules (``hloscope.cost.RULES``), as far as the line alone
    determines it.

    Determined: every unfused op whose rule needs only its operand and result shapes and printed attributes:
    elementwise (1 FLOP or transcendental per output element), dot and convolution (``dot_flops``,
    ``valid_taps``), data movement (slice reads only the slice, dynamic-update-slice is in place, copy-start
    reads and writes one buffer, copy-done is free), collectives with printed replica groups, sort, custom
    calls hloscope knows. A fusion's bytes: its boundary, every operand read whole plus the result (an upper
    bound when the body slices or gathers an operand; see ``docs/chrome_trace.md``).

    Not determined (None): a fusion's FLOPs (its body's), control flow and async wrappers (their callee's
    cost), the FLOPs of an op applying a called computation (reduce, all-reduce, scatter, ...) unless it
    applies it 0 times, an opaque custom call's FLOPs, the wire bytes of a collective with
    ``replica_groups={}``, and everything of a line without operand shapes.

    Args:
        long_name: the instruction's line, operand shapes printed (``/*index=N*/`` comments are ignored).
        padded: charge TPU tile-padded sizes (``Shape.padded_size_bytes``: hloscope's convention and what
            XLA's compile-time TPU cost analysis does); False charges dense sizes (what libtpu's profiler
            reports per op).
    """
    canon, _ = canonical_line(long_name)
    return _line_cost(canon, padded)


@lru_cache(maxsize=8192)
def _line_cost(canon: str, padded: bool) -> LineCost:
    try:
        parsed = _parse(canon, padded)
    except ValueError as e:
        return LineCost(why=f"unparsed: {e}")
    inst = parsed.instruction
    opcode = inst.opcode
    result_bytes = inst.shape.size_bytes
    if opcode in _BODY_OPCODES or (opcode.endswith(("-start", "-update", "-done"))
                                   and "calls" in inst.called_computations):
        if opcode == "fusion":
            read = sum(s.padded_size_bytes for s in parsed.operand_shapes)
            return LineCost(opcode, None, None, read, inst.shape.padded_size_bytes, result_bytes=result_bytes,
                            flags=frozenset({"fusion-boundary"}), why="fusion: FLOPs are the body's")
        return LineCost(opcode, result_bytes=result_bytes, why=f"{opcode}: the cost is the called computation's")
    cost = _rule_cost(parsed)
    if cost is None:
        return LineCost(opcode, result_bytes=result_bytes, why=f"no hloscope rule for {opcode!r}")
    flops: float | None = cost.flops
    transcendentals: float | None = cost.transcendentals
    applications = None
    why = ""
    if opcode in _APPLYING:
        applications = cost.flops  # the stub callee costs exactly 1 FLOP per application
        if applications:
            flops = transcendentals = None
            why = f"{opcode}: FLOPs are applications x the called computation's"
        else:
            flops = transcendentals = 0.0
    if opcode == "custom-call" and "opaque-custom-call" in cost.flags:
        flops = transcendentals = None
        why = "opaque custom call"
    comm: float | None = cost.comm_bytes
    if cost.comm_kind:
        groups = inst.attributes.get("replica_groups")
        if groups is None or not groups.groups:
            comm = None
            why = why or "collective without printed replica groups"
    return LineCost(opcode, flops, transcendentals, cost.bytes_read, cost.bytes_written, comm, cost.comm_kind,
                    cost.group_size, applications, result_bytes, cost.flags, why)


def _rule_cost(parsed: ParsedLine) -> OpCost | None:
    from hloscope.cost import RULES
    from hloscope.cost.module import module_cost

    inst = parsed.instruction
    if RULES.get(inst.opcode) is None:
        return None
    for row in module_cost(parsed.module).rows:
        if row.instruction is inst:
            return row.cost
    return None  # pragma: no cover - the root is always a row of its entry computation


def line_cost(long_name: str, *, padded: bool = True) -> tuple[float | None, float | None]:
    """``(flops, bytes_accessed)`` of one HLO instruction line by hloscope's rules; None where the line alone
    does not determine the value (see :func:`line_cost_detail`; a fusion's FLOPs need its body)."""
    c = line_cost_detail(long_name, padded=padded)
    return c.flops, c.bytes_accessed


# --------------------------------------------------------------------------------------------------------
# A trace as the report's input


@dataclass
class TraceCosts:
    """What ``report.table.ops_frame`` and ``modules_frame`` need to report a Chrome trace.

    Attributes:
        costs: one ``ModuleCost`` per HLO module that ran; its ``module`` is synthesized from the op lines (one
            computation ``trace`` holding every traced instruction and a parameter per operand that is not
            itself traced, plus a stub per called computation); its rows are one per traced instruction, cost
            per execution, ``count`` = executions per module run and device.
        measured: (module, instruction) -> (measured self seconds per module run and device, executions per run
            and device).
        step_s: module -> measured busy seconds per run and device (the sum of its ops' ``measured``).
        coverage: the report's coverage dict (``docs/report.md``) plus ``line_costed_time_fraction`` (share of
            measured op time whose FLOPs and bytes both came from hloscope's rules) and ``module_runs``.
        notes: caveats in words.
        platform: ``"tpu"`` or ``"gpu"`` (from the device process names), for chip resolution.
    """

    costs: list[ModuleCost]
    measured: dict[tuple[str, str], tuple[float, float]]
    step_s: dict[str, float]
    coverage: dict[str, Any]
    notes: list[str] = field(default_factory=list)
    platform: str = "tpu"


class _TraceDecoder:
    """``AttributeDecoder`` for an instruction rebuilt from a canonical parse: the canonical instruction's
    attributes with the trace's framework op name and source as metadata."""

    __slots__ = ("base", "metadata")

    def __init__(self, base: HloInstruction, metadata: Any) -> None:
        self.base = base
        self.metadata = metadata

    def decode(self, inst: HloInstruction) -> Any:
        from hloscope.hlo import DecodedAttributes

        b = self.base
        return DecodedAttributes(b.attributes, self.metadata, b.backend_config_text, b.frontend_attributes,
                                 b.sharding)


def _metadata(tf_op: str, source: str) -> Any:
    from hloscope.hlo import Metadata

    if not tf_op and not source:
        return None
    file, _, line = source.rpartition(":")
    if not file or not line.isdigit():
        file, line = source, "0"
    return Metadata("", tf_op, file, int(line), 0, "")


def _rebuilt(long_name: str, name: str, tf_op: str, source: str
             ) -> tuple[HloInstruction, tuple[Shape, ...], tuple[str, ...]] | None:
    """The instruction of ``long_name`` named ``name`` (the trace event's op name), its other names as printed
    (built on the cached canonical parse), its operand shapes and operand names; None when the line does not
    parse."""
    from hloscope.hlo import HloInstruction

    canon, names = canonical_line(long_name)
    try:
        parsed = _parse(canon, True)
    except ValueError:
        return None
    base = parsed.instruction
    real = dict(zip((f"n{i}" for i in range(len(names))), names))
    operands = tuple(real.get(o, o) for o in base.operands)
    called = {role: tuple(real.get(c, c) for c in callees) for role, callees in base.called_computations.items()}
    inst = HloInstruction(name, base.opcode, base.shape, operands, called,
                          attribute_text="(trace)", decoder=_TraceDecoder(base, _metadata(tf_op, source)))
    return inst, parsed.operand_shapes, operands


def _stub_computation(name: str, conv_operands: list[tuple[str, Shape]] | None, out: Shape) -> Any:
    """A called computation the trace does not print. A fusion libtpu calls a ``convolution fusion`` gets one
    ``convolution`` of its first two operands, so that the table calls it ``matmul`` and scores it at their
    dtype; any other gets a scalar parameter."""
    from hloscope.hlo import HloComputation, HloInstruction, Shape

    if conv_operands and len(conv_operands) >= 2:
        params = tuple(HloInstruction(f"{name}.p{i}", "parameter", s, parameter_number=i)
                       for i, (_, s) in enumerate(conv_operands[:2]))
        root = HloInstruction(f"{name}.convolution", "convolution", out, (params[0].name, params[1].name),
                              is_root=True)
        return HloComputation(name, params + (root,), root.name)
    p = HloInstruction(f"{name}.p0", "parameter", Shape("f32", ()), is_root=True, parameter_number=0)
    return HloComputation(name, (p,), p.name)


def _op_cost(lc: LineCost, model_flops: float, libtpu_bytes: float, dense_boundary: float | None) -> OpCost:
    """Per-execution cost of one traced op: hloscope's rules where the line determines a value, else libtpu's
    number (flag ``costed-by-libtpu``). A fusion keeps its line boundary only when libtpu's body-aware count
    equals the dense boundary (every operand read whole); else libtpu's bytes (the body slices or gathers)."""
    from hloscope.cost._types import OpCost

    flags = set(lc.flags) - {"fusion-boundary"}
    flops = lc.flops
    trans = lc.transcendentals
    if flops is None:
        if math.isnan(model_flops):
            flops = 0.0
            flags.add("unknown-flops")
        else:
            flops = model_flops
            flags.add(LIBTPU_FLAG)
    read, written = lc.bytes_read, lc.bytes_written
    use_line = read is not None and written is not None
    if use_line and lc.opcode == "fusion":
        use_line = (dense_boundary is not None and not math.isnan(libtpu_bytes)
                    and abs(dense_boundary - libtpu_bytes) <= 1e-6 * max(libtpu_bytes, 1.0))
    if not use_line:
        if math.isnan(libtpu_bytes):
            read, written = (read or 0.0), (written or 0.0)
            flags.add("unknown-bytes")
        else:
            out = lc.result_bytes if lc.result_bytes is not None else 0.0
            written = min(out, libtpu_bytes)
            read = libtpu_bytes - written
            flags.add(LIBTPU_FLAG)
    comm = lc.comm_bytes
    if comm is None:
        comm = 0.0
        flags.add("unknown-group-size")
    return OpCost(float(flops), float(trans or 0.0), float(read), float(written), float(comm), lc.comm_kind,
                  lc.group_size, frozenset(flags))


def trace_costs(trace: ChromeTrace) -> TraceCosts:
    """Turn a Chrome trace into the report's inputs: per module, one row per traced HLO instruction with its
    cost per execution (:func:`line_cost_detail`, else libtpu's numbers, flagged ``costed-by-libtpu``),
    executions per module run and device, and measured self time per run and device.

    A module run is one event of the device's ``XLA Modules`` thread; numbers are per run and device (a module
    that ran 3 times on each of 2 devices divides its ops' time by 6). Ops outside any module run form the
    module ``NO_MODULE`` (``"(no module)"``) with one run per device. Ops whose line does not parse are measured but not costed: the table
    lists them as ``unjoined``.
    """
    from hloscope.cost.module import CostRow, ModuleCost, summed
    from hloscope.hlo import HloComputation, HloInstruction, HloModule

    ops = trace.ops
    notes: list[str] = []
    runs = trace.modules.groupby("hlo_module").size().to_dict() if len(trace.modules) else {}
    n_devices = max(int(ops["device"].nunique()), 1)
    costs: list[ModuleCost] = []
    measured: dict[tuple[str, str], tuple[float, float]] = {}
    step_s: dict[str, float] = {}
    total_s = line_s = joined_s = 0.0
    unjoined = 0
    grouped = ops.groupby(["hlo_module", "name"], sort=False)
    agg = grouped.agg(self_us=("self_us", "sum"), n=("self_us", "size"), long_name=("long_name", "first"),
                      model_flops=("model_flops", "first"), bytes_accessed=("bytes_accessed", "first"),
                      category=("category", "first"), tf_op=("tf_op", "first"), source=("source", "first"))
    for raw_name, frame in agg.groupby(level=0, sort=True):
        n_runs = runs.get(raw_name) or n_devices
        module_name = raw_name or NO_MODULE
        if raw_name not in runs:
            notes.append(f"module {module_name!r}: no XLA Modules events; assumed one run per device")
        rows: list[CostRow] = []
        instructions: dict[str, HloInstruction] = {}
        operand_shapes: dict[str, Shape] = {}
        stubs: dict[str, Any] = {}
        busy = 0.0
        for (_, op_name), r in frame.iterrows():
            sec = r["self_us"] / 1e6 / n_runs
            occ = r["n"] / n_runs
            busy += sec
            measured[(module_name, op_name)] = (sec, occ)
            total_s += sec
            built = _rebuilt(r["long_name"], op_name, r["tf_op"], r["source"]) if r["long_name"] else None
            if built is None:
                unjoined += 1
                continue
            joined_s += sec
            inst, shapes, operand_names = built
            lc = line_cost_detail(r["long_name"])
            dense = None
            if lc.opcode == "fusion":
                dense = sum(s.size_bytes for s in shapes) + inst.shape.size_bytes
            cost = _op_cost(lc, float(r["model_flops"]), float(r["bytes_accessed"]), dense)
            if LIBTPU_FLAG not in cost.flags:
                line_s += sec
            instructions[op_name] = inst
            for o, s in zip(operand_names, shapes):
                operand_shapes.setdefault(o, s)
            conv = "convolution" in str(r["category"])
            for role, callees in inst.called_computations.items():
                for c in callees:
                    if c not in stubs or (conv and role == "calls"):
                        pairs = list(zip(operand_names, shapes)) if conv and role == "calls" else None
                        stubs[c] = _stub_computation(c, pairs, inst.shape)
            rows.append(CostRow("trace", inst, cost, occ))
        step_s[module_name] = busy
        params = tuple(HloInstruction(o, "parameter", s, parameter_number=i)
                       for i, (o, s) in enumerate((o, s) for o, s in operand_shapes.items() if o not in instructions))
        body = params + tuple(instructions.values())
        entry = HloComputation("trace", body, body[-1].name if body else "", is_entry=True)
        computations = tuple(v for k, v in stubs.items() if k != "trace") + (entry,)
        module = HloModule(module_name, computations, "trace", source=trace.path)
        total = summed(rows)
        costs.append(ModuleCost(module, rows, total.flops, total.transcendentals, total.bytes_read,
                                total.bytes_written, total.comm_bytes, total.flags))
    steps = trace.steps
    n_steps = int(steps["step_num"].nunique()) if len(steps) and steps["step_num"].notna().any() else 0
    if n_steps:
        notes.append(f"{n_steps} step markers in the trace; numbers are per module run")
    notes.append("costs from each op's HLO line (hloscope's rules, tile-padded bytes); where the line alone does "
                 "not determine a value (fusion FLOPs, async wrappers, sliced fusion operands) libtpu's own "
                 "number is used, flagged costed-by-libtpu (dense bytes)")
    coverage = {
        "joined_time_fraction": joined_s / total_s if total_s else 0.0,
        "line_costed_time_fraction": line_s / total_s if total_s else 0.0,
        "steps": n_steps,
        "module_runs": {k: int(v) for k, v in runs.items()},
        "devices": n_devices,
        "files": [trace.path],
        "unjoined_ops": unjoined,
        "modules_without_hlo": [],
    }
    platform = "tpu" if any("TPU" in d for d in trace.devices) else "gpu"
    return TraceCosts(costs, measured, step_s, coverage, notes, platform)
