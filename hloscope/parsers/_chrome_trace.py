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
* :func:`parse_line` -- one HLO instruction line (``long_name``) to an ``HloInstruction`` whose operands resolve
  to parameters of the printed operand shapes.
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
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator

from hloscope.parsers._xspace import TraceError, _self_times, _split_module_key

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from hloscope.cost import ModuleCost
    from hloscope.cost._types import OpCost
    from hloscope.hlo import HloInstruction, HloModule, Shape

__all__ = [
    "ChromeTrace",
    "LineCost",
    "TraceCosts",
    "TraceError",
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

OP_COLUMNS = (
    "device", "device_id", "name", "hlo_module", "program_id", "start_us", "duration_us", "self_us",
    "long_name", "category", "model_flops", "bytes_accessed", "raw_bytes_accessed", "tf_op", "source",
)
MODULE_COLUMNS = ("device", "device_id", "name", "hlo_module", "program_id", "run_id", "start_us", "duration_us")
STEP_COLUMNS = ("device", "device_id", "thread", "name", "step_num", "start_us", "duration_us")

_DEVICE_RE = re.compile(r"^/device:([A-Za-z_]+):(\d+)")
_CHUNK = 1 << 20


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
                # A value cut by the chunk boundary fails somewhere at or past the end of the buffer: read more.
                if self._more():
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


def _events(stream: _Stream) -> Iterator[dict]:
    """The trace's events: elements of the top-level array, or of the top-level object's ``traceEvents``.

    Other top-level keys (``displayTimeUnit``, ``metadata``, ...) are decoded and passed back through the
    special event ``{"__key__": key, "value": value}``.
    """
    first = stream.expect("{[")
    if first == "[":  # the Trace Event Format's bare "JSON Array Format"
        yield {"__key__": "traceEvents", "value": None}
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
            yield {"__key__": key, "value": None}
            yield from _array(stream, opened=True)
        else:
            yield {"__key__": key, "value": stream.value()}
        if stream.expect(",}") == "}":
            return


def _array(stream: _Stream, opened: bool = False) -> Iterator[Any]:
    if not opened:
        pass
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

    The file is decoded one event at a time; only events of device processes (``/device:...``) and host events
    carrying ``step_num`` are kept, so memory grows with the device op events, not with the file.

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
    candidates: list[dict] = []  # "X" events of non-host processes (names may be declared after the events)
    host_steps: list[dict] = []
    saw_events = False
    unit = ""
    with fh:
        stream = _Stream(fh, spath)
        for ev in _events(stream):
            if not isinstance(ev, dict):
                continue
            key = ev.get("__key__")
            if key is not None and len(ev) == 2 and "value" in ev:
                if key == "traceEvents":
                    saw_events = True
                elif key == "displayTimeUnit" and isinstance(ev["value"], str):
                    unit = ev["value"]
                continue
            ph = ev.get("ph")
            if ph == "M":
                args = ev.get("args") or {}
                if ev.get("name") == "process_name":
                    process[ev.get("pid")] = str(args.get("name", ""))
                elif ev.get("name") == "thread_name":
                    thread[(ev.get("pid"), ev.get("tid"))] = str(args.get("name", ""))
                continue
            if ph != "X":
                continue
            pname = process.get(ev.get("pid"))
            if pname is not None and not pname.startswith("/device:"):
                args = ev.get("args")
                if isinstance(args, dict) and "step_num" in args:
                    host_steps.append(ev)
                continue
            candidates.append(ev)
    if not saw_events:
        raise TraceError(p, "has no traceEvents array; expected a Chrome trace (*.trace.json.gz from "
                            "jax.profiler / xprof), not another JSON file")

    op_rows: list[tuple] = []
    module_rows: list[tuple] = []
    step_rows: list[tuple] = []
    for ev in candidates:
        pid = ev.get("pid")
        pname = process.get(pid, "")
        m = _DEVICE_RE.match(pname)
        if m is None:
            args = ev.get("args")
            if isinstance(args, dict) and "step_num" in args:
                host_steps.append(ev)
            continue
        dev_id = int(m.group(2))
        tname = thread.get((pid, ev.get("tid")), "")
        args = ev.get("args") if isinstance(ev.get("args"), dict) else {}
        start_ps = round(_num(ev.get("ts")) * 1e6)
        dur_ps = _ps(args.get("device_duration_ps"))
        if dur_ps is None:
            d = _num(ev.get("dur"))
            dur_ps = 0 if math.isnan(d) else round(d * 1e6)
        name = str(ev.get("name", ""))
        if tname == XLA_OPS_THREAD:
            op_rows.append((pname, dev_id, name, start_ps, dur_ps, args))
        elif tname == XLA_MODULES_THREAD:
            module, program_id = _split_module_key(name)
            module_rows.append((pname, dev_id, name, module, program_id, args.get("run_id"), start_ps, dur_ps))
        elif tname == STEPS_THREAD:
            step = args.get("step_num", name)
            step_rows.append((pname, dev_id, tname, name, _as_int(step), start_ps, dur_ps))
    for ev in host_steps:
        args = ev.get("args") or {}
        pname = process.get(ev.get("pid"), "")
        start_ps = round(_num(ev.get("ts")) * 1e6)
        d = _num(ev.get("dur"))
        step_rows.append((pname, -1, thread.get((ev.get("pid"), ev.get("tid")), ""), str(ev.get("name", "")),
                          _as_int(args.get("step_num")), start_ps, 0 if math.isnan(d) else round(d * 1e6)))

    if not op_rows:
        devices = sorted({n for n in process.values() if n.startswith("/device:")})
        raise TraceError(p, "no per-HLO-op events: no complete ('X') event on an 'XLA Ops' thread of a "
                            f"/device:... process (device processes: {devices or 'none'}); capture the profile "
                            "on TPU with jax.profiler.trace around jitted steps")

    ops = _ops_frame(op_rows, module_rows)
    modules = pd.DataFrame(
        {
            "device": [r[0] for r in module_rows],
            "device_id": pd.Series([r[1] for r in module_rows], dtype="int64"),
            "name": [r[2] for r in module_rows],
            "hlo_module": [r[3] for r in module_rows],
            "program_id": pd.Series([r[4] for r in module_rows], dtype="UInt64"),
            "run_id": [r[5] for r in module_rows],
            "start_us": pd.Series([r[6] / 1e6 for r in module_rows], dtype="float64"),
            "duration_us": pd.Series([r[7] / 1e6 for r in module_rows], dtype="float64"),
        },
        columns=list(MODULE_COLUMNS),
    ).sort_values(["device_id", "start_us"], kind="stable").reset_index(drop=True)
    steps = pd.DataFrame(
        {
            "device": [r[0] for r in step_rows],
            "device_id": pd.Series([r[1] for r in step_rows], dtype="int64"),
            "thread": [r[2] for r in step_rows],
            "name": [r[3] for r in step_rows],
            "step_num": pd.Series([r[4] for r in step_rows], dtype="Int64"),
            "start_us": pd.Series([r[5] / 1e6 for r in step_rows], dtype="float64"),
            "duration_us": pd.Series([r[6] / 1e6 for r in step_rows], dtype="float64"),
        },
        columns=list(STEP_COLUMNS),
    )
    devices = tuple(sorted({r[0] for r in op_rows}, key=lambda n: (len(n), n)))
    return ChromeTrace(spath, ops, modules, steps, devices, unit)


def _as_int(v: Any) -> int | None:
    if isinstance(v, bool) or v is None:
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, str) and v.strip().lstrip("-").isdigit():
        return int(v)
    return None


def _ops_frame(op_rows: list[tuple], module_rows: list[tuple]) -> pd.DataFrame:
    """Op rows -> DataFrame: module from args or from the enclosing module run, self time per device."""
    import pandas as pd
    from bisect import bisect_right

    spans: dict[str, list[tuple[int, int, str, int | None]]] = defaultdict(list)
    for r in module_rows:
        spans[r[0]].append((r[6], r[6] + r[7], r[3], r[4]))
    by_dev: dict[str, list[tuple]] = defaultdict(list)
    for r in op_rows:
        by_dev[r[0]].append(r)
    cols: dict[str, list] = {c: [] for c in OP_COLUMNS}
    for dev in sorted(by_dev, key=lambda n: (len(n), n)):
        rows = by_dev[dev]
        rows.sort(key=lambda r: (r[3], -r[4]))
        dev_spans = sorted(spans.get(dev, ()))
        starts = [s[0] for s in dev_spans]
        selfs = _self_times([r[3] for r in rows], [r[4] for r in rows])
        for r, self_ps in zip(rows, selfs):
            pname, dev_id, name, start, dur, args = r
            module = args.get("hlo_module")
            program_id = _as_int(args.get("program_id"))
            if not module and starts:
                j = bisect_right(starts, start) - 1
                if j >= 0 and start < dev_spans[j][1]:
                    module = dev_spans[j][2]
                    program_id = program_id if program_id is not None else dev_spans[j][3]
            cols["device"].append(pname)
            cols["device_id"].append(dev_id)
            cols["name"].append(name)
            cols["hlo_module"].append(str(module or ""))
            cols["program_id"].append(program_id)
            cols["start_us"].append(start / 1e6)
            cols["duration_us"].append(dur / 1e6)
            cols["self_us"].append(self_ps / 1e6)
            cols["long_name"].append(str(args.get("long_name", "")))
            cols["category"].append(str(args.get("hlo_category", "")))
            cols["model_flops"].append(_num(args.get("model_flops")))
            cols["bytes_accessed"].append(_num(args.get("bytes_accessed")))
            cols["raw_bytes_accessed"].append(_num(args.get("raw_bytes_accessed")))
            cols["tf_op"].append(str(args.get("tf_op", "")))
            cols["source"].append(str(args.get("source", "")))
    frame = pd.DataFrame(cols, columns=list(OP_COLUMNS))
    frame["device_id"] = frame["device_id"].astype("int64")
    frame["program_id"] = pd.Series(cols["program_id"], dtype="UInt64")
    for c in ("start_us", "duration_us", "self_us", "model_flops", "bytes_accessed", "raw_bytes_accessed"):
        frame[c] = frame[c].astype("float64")
    return frame


# --------------------------------------------------------------------------------------------------------
# One instruction line


@dataclass(frozen=True)
class ParsedLine:
    """One HLO instruction line, parsed inside a tiny module made for it.

    Attributes:
        instruction: the instruction (attributes decoded by hloscope's parser).
        module: the tiny module: one parameter per printed operand (its printed shape), stub computations for
            the called ones (a scalar ``add``), and the instruction as ``ROOT``.
        operand_shapes: the printed shape of each operand, in order (None where the line printed none).
    """

    instruction: HloInstruction
    module: HloModule
    operand_shapes: tuple[Shape | None, ...]


_HEAD = re.compile(r"\s*(?:ROOT\s+)?%?([^\s=%{}(),\"]+)\s*=\s*")
_OPCODE = re.compile(r"\s*([a-z][a-z0-9\-_]*)\s*\(")
_CALLEE = re.compile(r"(?:^|[\s,])(?:calls|to_apply|condition|body|branch_computations|true_computation|"
                     r"false_computation|async_wrapped_computation|select|scatter|called_computations)="
                     r"(\{[^}]*\}|%?[^\s,{}]+)")
_TILES = re.compile(r"T(?:\([^()]*\))+")


def _close(text: str, open_pos: int) -> int:
    """Index of the ')' matching the '(' at ``open_pos`` (strings skipped), or -1."""
    depth = 0
    i = open_pos
    n = len(text)
    while i < n:
        ch = text[i]
        if ch == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            i = j
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
    return (f"%{name} (stub.a: f32[], stub.b: f32[]) -> f32[] {{\n  %stub.a = f32[] parameter(0)\n"
            f"  %stub.b = f32[] parameter(1)\n  ROOT %stub.add = f32[] add(f32[] %stub.a, f32[] %stub.b)\n}}\n")


@lru_cache(maxsize=16384)
def parse_line(long_name: str, *, tiles: bool = True) -> ParsedLine:
    """Parse one HLO instruction line as printed by XLA (``%name = shape opcode(shape %a, ...), attrs``).

    Each operand becomes a parameter of its printed shape; each called computation a stub that adds two f32
    scalars (so a reducer costs 1 FLOP per application: callers decide whether that assumption holds).

    Args:
        long_name: the line (a trace's ``args.long_name``, or an XProf ``expression``).
        tiles: keep the layouts' tiles ``T(...)``; False parses every shape untiled (dense sizes).

    Raises:
        ValueError: the text is not one instruction with printed operand shapes (the message says why).
    """
    from hloscope.parsers import _hlo_re as r
    from hloscope.parsers._errors import HloParseError
    from hloscope.parsers._hlo_text import parse_hlo_text

    text = long_name.strip()
    if not tiles:
        text = _TILES.sub("", text).replace(":}", "}").replace(":S(", ":S(")
    head = _HEAD.match(text)
    if head is None:
        raise ValueError("not an HLO instruction line ('%name = shape opcode(...)')")
    try:
        shape, pos = r._shape_at(text, head.end())
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
    rest = text[close + 1:]
    params = []
    shapes: list[Any] = []
    seen: dict[str, str] = {}
    if opcode not in ("parameter", "constant", "iota", "partition-id", "replica-id", "after-all", "rng-get-and-update-state"):
        for k, piece in enumerate(_split_top(text[open_pos + 1:close])):
            piece = r.strip_comments(piece).strip() if "/" in piece else piece
            if " " not in piece.strip():
                shapes.append(None)
                continue
            try:
                oshape, opos = r._shape_at(piece, 0)
            except ValueError:
                raise ValueError(f"operand {k} ({piece[:40]!r}) has no printed shape") from None
            oname = piece[opos:].strip().lstrip("%")
            if not oname or " " in oname:
                raise ValueError(f"operand {k} ({piece[:40]!r}) is not 'shape %name'")
            shape_text = piece[:opos].strip()
            if oname not in seen:
                seen[oname] = shape_text
                params.append(f"  %{oname} = {shape_text} parameter({len(params)})\n")
            shapes.append(oshape)
    callees: list[str] = []
    for value in _CALLEE.findall(rest):
        names = r.name_list(value) if value.startswith("{") else (r.name_value(value),)
        for n in names:
            if n not in callees and n not in seen:
                callees.append(n)
    line = text[head.start(1) - (1 if text[head.start(1) - 1:head.start(1)] == "%" else 0):]
    if line.startswith("ROOT"):
        line = line[4:].lstrip()
    src = "HloModule line\n\n" + "".join(_stub(c) for c in callees) + \
        "\nENTRY %line.entry {\n" + "".join(params) + "  ROOT " + line + "\n}\n"
    try:
        module = parse_hlo_text(src, source="<long_name>")
    except HloParseError as e:
        raise ValueError(f"hloscope's HLO parser rejects the line: {e.msg if hasattr(e, 'msg') else e}") from None
    inst = module.entry.root
    del shape
    return ParsedLine(inst, module, tuple(shapes))


@dataclass(frozen=True)
class LineCost:
    """What hloscope's rules say about one instruction from its line alone.

    Attributes:
        opcode: the instruction's opcode ("" when the line did not parse).
        flops, transcendentals: None when the line does not determine them (fusion body, called reducer,
            async wrapper, opaque custom call, control flow).
        bytes_read, bytes_written: HBM bytes at the boundary (hloscope's rule for the opcode), None when the line
            does not determine them.
        comm_bytes, comm_kind, group_size: collectives (wire bytes per device; None when N is not printed).
        applications: for an op applying a called computation (reduce, all-reduce, scatter, map, ...): how
            many times it applies it; FLOPs are ``applications x cost(callee)``, so 0 applications determine 0.
        flags: the rule's flags.
        why: a short reason when a value is None.
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
    flags: frozenset[str] = frozenset()
    why: str = ""

    @property
    def bytes_accessed(self) -> float | None:
        if self.bytes_read is None or self.bytes_written is None:
            return None
        return self.bytes_read + self.bytes_written


#: Opcodes whose cost is that of a called computation the line does not print.
_BODY_OPCODES = frozenset({"fusion", "while", "conditional", "call", "async-start", "async-update", "async-done"})
#: Opcodes whose FLOPs are ``applications x cost(called computation)``.
_APPLYING = frozenset({"reduce", "reduce-window", "select-and-scatter", "scatter", "map", "all-reduce",
                       "all-reduce-start", "reduce-scatter"})


@lru_cache(maxsize=16384)
def line_cost_detail(long_name: str, *, padded: bool = True) -> LineCost:
    """Cost one HLO instruction line with hloscope's rules (``hloscope.cost.RULES``), as far as the line
    determines it.

    Determined: every unfused op whose rule needs only operand and result shapes and printed attributes --
    elementwise (1 FLOP or transcendental per output element), dot / convolution (``dot_flops`` /
    ``valid_taps``), data movement (slice reads only the slice, dynamic-update-slice is in place, ...),
    collectives with printed replica groups, sort, custom calls hloscope knows. Bytes of a fusion are its
    boundary: operands read plus result written.

    Not determined (None): a fusion's FLOPs (they are its body's), control flow and async wrappers (their
    callee), the FLOPs of an op applying a called computation (reduce, all-reduce, scatter, ...) unless it
    applies it 0 times, an opaque custom call's FLOPs, wire bytes of a collective with ``replica_groups={}``.

    Args:
        long_name: the instruction's line, operand shapes printed.
        padded: charge TPU tile-padded sizes (``Shape.padded_size_bytes``, hloscope's convention, what XLA's
            compile-time TPU cost analysis does); False charges dense sizes (what libtpu's profiler reports).
    """
    try:
        parsed = parse_line(long_name, tiles=padded)
    except ValueError as e:
        return LineCost(why=f"unparsed: {e}")
    inst = parsed.instruction
    opcode = inst.opcode
    if any(s is None for s in parsed.operand_shapes):
        return LineCost(opcode, why="operand shapes not printed")
    if opcode in _BODY_OPCODES or (opcode.endswith(("-start", "-update", "-done"))
                                   and "calls" in inst.called_computations):
        if opcode == "fusion":
            out = inst.shape.padded_size_bytes
            read = sum(s.padded_size_bytes for s in parsed.operand_shapes if s is not None)
            return LineCost(opcode, None, None, read, out, why="fusion: FLOPs are the body's")
        return LineCost(opcode, why=f"{opcode}: the cost is the called computation's")
    cost = _rule_cost(parsed)
    if cost is None:
        return LineCost(opcode, why=f"no hloscope rule for {opcode!r}")
    flops: float | None = cost.flops
    transcendentals: float | None = cost.transcendentals
    applications = None
    why = ""
    if opcode in _APPLYING:
        # The stub reducer costs exactly 1 FLOP, so the rule's FLOPs are the number of applications.
        applications = cost.flops
        if opcode in ("all-reduce", "all-reduce-start", "reduce-scatter"):
            pass
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
                    cost.group_size, applications, cost.flags, why)


def _rule_cost(parsed: ParsedLine) -> OpCost | None:
    from hloscope.cost import RULES
    from hloscope.cost._types import CostContext
    from hloscope.cost.module import module_cost

    inst = parsed.instruction
    if RULES.get(inst.opcode) is None:
        return None
    mc = module_cost(parsed.module)
    for row in mc.rows:
        if row.instruction is inst:
            return row.cost
    ctx = CostContext(parsed.module, parsed.module.entry, lambda name: module_cost(parsed.module).rows[0].cost)
    return RULES[inst.opcode](inst, ctx)  # pragma: no cover - the root is always a row


def line_cost(long_name: str, *, padded: bool = True) -> tuple[float | None, float | None]:
    """``(flops, bytes_accessed)`` of one HLO instruction line by hloscope's rules; None where the line alone
    does not determine the value (see :func:`line_cost_detail`; a fusion's FLOPs need its body)."""
    c = line_cost_detail(long_name, padded=padded)
    return c.flops, c.bytes_accessed
