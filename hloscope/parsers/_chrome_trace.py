"""Reader for Chrome-trace profiles (``*.trace.json.gz``): the op-events table of ``hloscope.parsers.events``.

JAX's profiler (through xprof) writes a Chrome "Trace Event Format" file next to the XSpace; xprof's trace
viewer serves the same JSON. On TPU each executed HLO op is one complete event (``"ph": "X"``) on the thread
``XLA Ops`` of a device process named ``/device:TPU:<n>`` (process and thread names come from ``"ph": "M"``
metadata events), with libtpu's own numbers in ``args``: ``long_name`` (the instruction's HLO text, one line,
without the fused computation's body), ``model_flops``, ``bytes_accessed``, ``device_duration_ps``,
``hlo_category``, ``tf_op``, ``source``. Module runs are the events of the ``XLA Modules`` thread, named
``<module>(<program id>)``; step markers the events of a device's ``Steps`` thread and host events whose
``args`` carry ``step_num``. What real files hold is in ``docs/chrome_trace.md``.

Public function: :func:`read_chrome_events` -- a ``.trace.json.gz`` (or plain ``.trace.json``) to a
``TraceEvents``, streaming the JSON (``_json_stream``) so that host events (most of a big trace) are never held
in memory. Costing the ops' HLO lines is ``hloscope.cost.trace_lines``'s job; this module imports nothing from
``hloscope.cost``, ``hloscope.roofline`` or ``hloscope.report``.

Hostile input. Every error is a ``TraceError`` whose message starts with the path. Which damage rejects the
file and which only an event:

* The file is rejected (``TraceError`` naming the character offset and, inside ``traceEvents``, the event's
  index): it is missing, not gzip or not JSON, truncated, inflates past ``HLOSCOPE_MAX_INFLATED_BYTES``
  (``hloscope.parsers._trace_dir``), is nested deeper than Python's JSON decoder allows, holds an integer of
  more than 4300 digits, has no ``traceEvents`` array, or holds no HLO op event. Past such damage nothing can
  be trusted (the decoder cannot tell where the broken value ends).
* One event is skipped, and counted in a note naming the reason and the index of the first such event
  (``3 events skipped: ts is not a finite number ... (first: event 17 of traceEvents)``): it is not a JSON
  object; its ``pid`` or ``tid`` is not an integer or a string (a list, an object, a fraction, a bool: such
  ids cannot be matched to the metadata events); it is an op, module-run or step event (``"X"`` on a device
  line, or a host event with ``step_num``) whose ``ts`` or ``dur`` is not a finite number of microseconds
  (number or numeric string) whose picoseconds lie within +-2**62 (53 days) -- ``dur`` must also be >= 0 and
  ``ts`` may be negative (it is on the trace's own clock) -- or whose ``name`` is not a string. A single bad
  event in a 1 GB trace should not hide the rest, and a skipped event is never given made-up times.
* An ``args`` value of the wrong type is read as absent, and counted in a note: ``long_name``,
  ``hlo_category``, ``tf_op``, ``source``, ``hlo_module`` that are not strings; ``model_flops`` /
  ``bytes_accessed`` that are not finite numbers >= 0 (NaN then, as when absent); ``device_duration_ps`` that
  is not an integer in [0, 2**62) (``dur`` is used then); ``program_id`` / ``step_num`` that are not
  integers within 64 bits. A process name ``/device:<KIND>:<n>`` with ``n`` over 2**31 - 1 gives device id -1.
"""

from __future__ import annotations

import math
import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hloscope._regex import LazyPattern
from hloscope.parsers._json_stream import TopKey, open_text, trace_items
from hloscope.parsers._trace_error import TraceError

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np
    import pandas as pd

    from hloscope.parsers.events import TraceEvents

__all__ = ["TraceError", "read_chrome_events"]

XLA_OPS_THREAD = "XLA Ops"
XLA_MODULES_THREAD = "XLA Modules"
STEPS_THREAD = "Steps"

_DEVICE_RE = LazyPattern(r"^/device:([A-Za-z_]+):(\d+)")
_MODULE_KEY_RE = LazyPattern(r"^(?P<name>.*)\((?P<id>-?\d+)\)$")  # "jit_f(6)", "jit_step(5120112285394406626)"
_U64 = (1 << 64) - 1
#: Bound on the magnitude of a time in picoseconds (2**62 ps = 53 days): start + duration stays within int64.
_MAX_PS = 1 << 62
_I32 = (1 << 31) - 1
_TRACE_SUFFIXES = (".trace.json.gz", ".trace.json", ".json.gz", ".json", ".gz")
#: The ``args`` of device events that are kept (the rest, e.g. ``source_stack``, is dropped while streaming).
_KEPT_ARGS = frozenset({"long_name", "hlo_category", "model_flops", "bytes_accessed", "tf_op", "source",
                        "device_duration_ps", "hlo_module", "program_id", "step_num"})


# --------------------------------------------------------------------------------------------------------
# Scanning the events


class _OpColumns:
    """The ``XLA Ops`` events, one list per field, in file order. Strings are codes into ``_Scan.strings``.

    Attributes:
        device: code of the process name; device_id: its ``n``; name: code of the event name;
        start, duration: integer picoseconds; text, category, op_name, source: codes of ``args.long_name``,
        ``hlo_category``, ``tf_op``, ``source`` (the code of ``""`` when absent); flops, nbytes:
        ``model_flops``, ``bytes_accessed`` (NaN when absent); module, program: ``args.hlo_module`` and
        ``args.program_id``, None when absent.
    """

    __slots__ = ("device", "device_id", "name", "start", "duration", "text", "category", "flops", "nbytes",
                 "op_name", "source", "module", "program")

    def __init__(self) -> None:
        for k in self.__slots__:
            setattr(self, k, [])

    def __len__(self) -> int:
        return len(self.start)


@dataclass
class _Scan:
    """What one pass over the file keeps. Times are integer picoseconds.

    Attributes:
        ops: the ``XLA Ops`` events (:class:`_OpColumns`).
        strings: the distinct strings of ``ops``, each once; a string's code is its index.
        module_runs: per ``XLA Modules`` event: (device name, device id, module, program id or None, start,
            duration).
        steps: per step marker: (process name, device id (-1 on the host), name, step or None, start,
            duration).
        process: pid -> process name; labels: pid -> ``process_labels``.
        skipped: reason -> [count, index of the first event] of events skipped (``"skipped: ..."``) or of
            ``args`` values read as absent (``"absent: ..."``); see the module docstring.
    """

    ops: _OpColumns = field(default_factory=_OpColumns)
    strings: list[str] = field(default_factory=list)
    module_runs: list[tuple] = field(default_factory=list)
    steps: list[tuple] = field(default_factory=list)
    process: dict[Any, str] = field(default_factory=dict)
    labels: dict[Any, str] = field(default_factory=dict)
    skipped: dict[str, list[int]] = field(default_factory=dict)

    def count(self, reason: str, index: int) -> None:
        """Count one event skipped, or one value read as absent, for ``reason`` (event ``index``)."""
        seen = self.skipped.get(reason)
        if seen is None:
            self.skipped[reason] = [1, index]
        else:
            seen[0] += 1

    def notes(self) -> list[str]:
        """The counts as notes, one per reason."""
        out = []
        for reason, (n, first) in self.skipped.items():
            kind, _, why = reason.partition(": ")
            what = (f"{n} event{'s' if n > 1 else ''} skipped: {why}" if kind == "skipped"
                    else f"{n} event{'s' if n > 1 else ''}: {why}, read as absent")
            out.append(f"{what} (first: event {first} of traceEvents)")
        return out


def _num(v: Any) -> float:
    """A JSON number or numeric string as float; NaN when absent or not a number (bools are not numbers;
    an integer too large for a float is infinite)."""
    t = type(v)
    if t is float:
        return v
    if t is int:
        try:
            return float(v)
        except OverflowError:
            return math.inf if v > 0 else -math.inf
    if t is str:
        try:
            return float(v)
        except ValueError:
            return math.nan
    return math.nan


def _count(v: Any) -> float | None:
    """A libtpu count (``model_flops``, ``bytes_accessed``): a finite number >= 0 as float; NaN when absent;
    None when present but not such a number."""
    if v is None:
        return math.nan
    x = _num(v)
    return x if math.isfinite(x) and x >= 0 else None


def _time_ps(us: Any) -> int | None:
    """Microseconds (a JSON number or numeric string) to integer picoseconds; None when not a finite number
    whose picoseconds lie within +-2**62."""
    t = type(us)
    if t is int:
        ps = us * 1_000_000
    else:
        v = _num(us) if t is not float else us
        if not math.isfinite(v) or abs(v) >= _MAX_PS / 1e6:
            return None
        ps = round(v * 1e6)
    return ps if -_MAX_PS < ps < _MAX_PS else None


def _int_in(v: Any, lo: int, hi: int) -> int | None:
    """An int (or integer string) within ``[lo, hi)`` from a JSON value; else None (bools and floats are
    not integers)."""
    t = type(v)
    if t is int:
        i = v
    elif t is str and len(v) <= 24:
        try:
            i = int(v)
        except ValueError:
            return None
    else:
        return None
    return i if lo <= i < hi else None


def _id(v: Any) -> Any:
    """A ``pid`` / ``tid`` as a key: an int or a string as is, an integral float as int, None when absent;
    else ``_BAD`` (lists, objects, bools and fractions cannot be matched to metadata events)."""
    t = type(v)
    if v is None or t is int or t is str:
        return v
    if t is float and v.is_integer():
        return int(v)
    return _BAD


_BAD = object()


def _split_module_key(key: str) -> tuple[str, int | None]:
    """``"jit_f(6)"`` -> ``("jit_f", 6)`` (the id as unsigned 64-bit); a name without ``(id)``, or whose id is
    not a 64-bit integer, is unchanged."""
    m = _MODULE_KEY_RE.match(key)
    if not m or len(m.group("id")) > 21:
        return key, None
    i = int(m.group("id"))
    return (m.group("name"), i & _U64) if -(1 << 63) <= i <= _U64 else (key, None)


def _scan(p: Path, fh) -> _Scan:
    """One streaming pass over the events of an open trace file (see :class:`_Scan`; bad events are skipped
    and counted in ``skipped``, as the module docstring says).

    Raises:
        TraceError: the JSON is malformed or has no ``traceEvents``.
    """
    out = _Scan()
    process = out.process
    thread: dict[tuple[Any, Any], str] = {}
    devices: dict[Any, tuple[str, int] | None] = {}  # pid -> (process name, device id), None: not a device
    pending: list[tuple] = []  # (index, pid, tid, event) of "X" events of processes not named yet (any order)
    module_runs, steps = out.module_runs, out.steps
    ops = out.ops
    count = out.count
    o_device, o_device_id, o_name, o_start, o_duration = (ops.device.append, ops.device_id.append,
                                                          ops.name.append, ops.start.append, ops.duration.append)
    o_text, o_category, o_flops, o_nbytes = ops.text.append, ops.category.append, ops.flops.append, ops.nbytes.append
    o_op_name, o_source, o_module, o_program = (ops.op_name.append, ops.source.append, ops.module.append,
                                                ops.program.append)
    codes: dict[str, int] = {}  # string -> code: op lines repeat every step, each is stored once
    strings = out.strings

    def code(v: str | None) -> int:
        if v is None:
            v = ""
        c = codes.get(v)
        if c is None:
            c = codes[v] = len(strings)
            strings.append(v)
        return c
    saw_events = False

    def device(pid: Any) -> tuple[str, int] | None | bool:
        """(name, id) of a device process, None for another named process, False while unnamed."""
        d = devices.get(pid, False)
        if d is False and pid in process:
            m = _DEVICE_RE.match(process[pid])
            n = int(m.group(2)) if m and len(m.group(2)) <= 10 else -1
            d = devices[pid] = (process[pid], n if n <= _I32 else -1) if m else None
        return d

    def text_arg(get, key: str, index: int) -> str | None:
        v = get(key)
        if v is None or type(v) is str:
            return v
        count(f"absent: args.{key} is not a string", index)
        return None

    def times(ev: dict, index: int, what: str) -> tuple[int, int] | None:
        """(start, duration) in ps, or None (counted) when ``ts`` or ``dur`` is unusable."""
        start = _time_ps(ev.get("ts"))
        if start is None:
            count(f"skipped: {what} whose ts is not a finite number of microseconds within +-2**62 ps", index)
            return None
        dur_v = ev.get("dur")
        dur = 0 if dur_v is None else _time_ps(dur_v)
        if dur is None or dur < 0:
            count(f"skipped: {what} whose dur is not a finite number of microseconds in [0, 2**62 ps)", index)
            return None
        return start, dur

    def named(ev: dict, index: int, what: str) -> str | None:
        name = ev.get("name", "")
        if type(name) is str:
            return name
        count(f"skipped: {what} whose name is not a string", index)
        return None

    def take(ev: dict, dev: tuple[str, int], pid: Any, tid: Any, index: int) -> None:
        tname = thread.get((pid, tid), "")
        if tname not in (XLA_OPS_THREAD, XLA_MODULES_THREAD, STEPS_THREAD):
            return
        what = {XLA_OPS_THREAD: "op event", XLA_MODULES_THREAD: "module run", STEPS_THREAD: "step marker"}[tname]
        name = named(ev, index, what)
        span = None if name is None else times(ev, index, what)
        if span is None:
            return
        start_ps, dur_ps = span
        args = ev.get("args")
        if not isinstance(args, dict):
            args = {}
        get = args.get
        device_ps = get("device_duration_ps")
        if device_ps is not None:
            if type(device_ps) is float:
                d = round(device_ps) if math.isfinite(device_ps) and 0 <= device_ps < _MAX_PS else None
            else:
                d = _int_in(device_ps, 0, _MAX_PS)
            if d is None:
                count("absent: args.device_duration_ps is not an integer in [0, 2**62) (dur used)", index)
            else:
                dur_ps = d
        if tname == XLA_OPS_THREAD:
            module = text_arg(get, "hlo_module", index)
            flops, nbytes = _count(get("model_flops")), _count(get("bytes_accessed"))
            if flops is None:
                count("absent: args.model_flops is not a finite number >= 0", index)
            if nbytes is None:
                count("absent: args.bytes_accessed is not a finite number >= 0", index)
            program = get("program_id")
            program_id = None if program is None else _int_in(program, -(1 << 63), 1 << 64)
            if program is not None and program_id is None:
                count("absent: args.program_id is not a 64-bit integer", index)
            o_device(code(dev[0]))
            o_device_id(dev[1])
            o_name(code(name))
            o_start(start_ps)
            o_duration(dur_ps)
            o_text(code(text_arg(get, "long_name", index)))
            o_category(code(text_arg(get, "hlo_category", index)))
            o_flops(math.nan if flops is None else flops)
            o_nbytes(math.nan if nbytes is None else nbytes)
            o_op_name(code(text_arg(get, "tf_op", index)))
            o_source(code(text_arg(get, "source", index)))
            o_module(module if module else None)
            o_program(None if program_id is None else program_id & _U64)
        elif tname == XLA_MODULES_THREAD:
            module, program_id = _split_module_key(name)
            module_runs.append((dev[0], dev[1], module, program_id, start_ps, dur_ps))
        else:
            steps.append((dev[0], dev[1], name, _step(get("step_num", name), "step_num" in args, index),
                          start_ps, dur_ps))

    def _step(v: Any, given: bool, index: int) -> int | None:
        step = _int_in(v, -(1 << 63), 1 << 63)
        if step is None and given and v is not None:
            count("absent: args.step_num is not a 64-bit integer", index)
        return step

    def host_step(ev: dict, pid: Any, index: int) -> None:
        name = named(ev, index, "step marker")
        span = None if name is None else times(ev, index, "step marker")
        if span is not None:
            steps.append((process.get(pid, ""), -1, name, _step(ev["args"].get("step_num"), True, index), *span))

    index = -1
    with fh:
        for ev in trace_items(fh, str(p)):
            if type(ev) is TopKey:
                saw_events = saw_events or ev.name == "traceEvents"
                continue
            index += 1
            if type(ev) is not dict:
                count("skipped: not a JSON object", index)
                continue
            ph = ev.get("ph")
            if ph != "X" and ph != "M":
                continue
            pid, tid = _id(ev.get("pid")), _id(ev.get("tid"))
            if pid is _BAD or tid is _BAD:
                count("skipped: pid or tid is not an integer or a string", index)
                continue
            if ph == "X":
                dev = device(pid)
                if dev:
                    take(ev, dev, pid, tid, index)
                elif dev is None:
                    args = ev.get("args")
                    if isinstance(args, dict) and "step_num" in args:
                        host_step(ev, pid, index)
                else:
                    args = ev.get("args")
                    if isinstance(args, dict) and len(args) > len(_KEPT_ARGS):
                        ev["args"] = {k: v for k, v in args.items() if k in _KEPT_ARGS}
                    pending.append((index, pid, tid, ev))
            else:
                args = ev.get("args")
                args = args if isinstance(args, dict) else {}
                kind = ev.get("name")
                if kind == "process_name":
                    process[pid] = str(args.get("name", ""))
                elif kind == "thread_name":
                    thread[(pid, tid)] = str(args.get("name", ""))
                elif kind == "process_labels" and args.get("labels"):
                    out.labels[pid] = str(args["labels"])
    if not saw_events:
        raise TraceError(p, "has no traceEvents array; expected a Chrome trace (*.trace.json.gz from "
                            "jax.profiler / xprof), not another JSON file")
    for index, pid, tid, ev in pending:
        dev = device(pid)
        if dev:
            take(ev, dev, pid, tid, index)
        elif isinstance(ev.get("args"), dict) and "step_num" in ev["args"]:
            host_step(ev, pid, index)
    return out


# --------------------------------------------------------------------------------------------------------
# Intervals, vectorized


def _self_ps(group: np.ndarray, start: np.ndarray, dur: np.ndarray) -> np.ndarray:
    """Duration minus the durations of the events nested directly inside, per group (one stream).

    Rows are sorted by (group, start, -duration). An event's parent is the nearest earlier event of its group
    that contains it (ends at or after its end, and after its start): events that merely overlap are siblings,
    as in xprof. Parents are found by pointer jumping: each row starts from the row before it; a candidate that
    does not contain the row is replaced by the candidate's own candidate, which skips only rows ending before
    the row's end (they cannot contain it either). O(n log n) vector steps at worst.

    Args:
        group, start, dur: int64 arrays of one length n (group: any per-stream key).

    Returns:
        int64 self durations (never below 0).
    """
    import numpy as np

    n = start.shape[0]
    if n == 0:
        return np.zeros(0, np.int64)
    end = start + dur
    # 1-based rows; row 0 is a virtual root that contains everything.
    need = np.empty(n + 1, np.int64)
    need[0] = 0
    np.maximum(end, start + 1, out=need[1:])
    ends = np.empty(n + 1, np.int64)
    ends[0] = np.iinfo(np.int64).max
    ends[1:] = end
    cand = np.arange(-1, n, dtype=np.int64)  # row i+1's first candidate is row i
    cand[0] = 0
    first = np.ones(n, bool)
    first[1:] = group[1:] != group[:-1]
    cand[1:][first] = 0  # the first row of a group has only the root above it
    todo = np.flatnonzero(ends[cand] < need)
    while todo.size:
        cand[todo] = cand[cand[todo]]
        todo = todo[ends[cand[todo]] < need[todo]]
    parent = cand[1:] - 1
    nested = parent >= 0
    child = np.zeros(n, np.int64)
    np.add.at(child, parent[nested], dur[nested])
    return np.maximum(dur - child, 0)


def _containing(m_start: np.ndarray, m_end: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Per time in ``t``: the index of the interval that starts last at or before it (``m_start`` sorted
    ascending), when that interval still runs at ``t`` (``t < m_end``); else -1."""
    import numpy as np

    if m_start.shape[0] == 0:
        return np.full(t.shape[0], -1, np.int64)
    j = np.searchsorted(m_start, t, side="right") - 1
    ok = j >= 0
    ok[ok] = t[ok] < m_end[j[ok]]
    return np.where(ok, j, -1)


# --------------------------------------------------------------------------------------------------------
# The tables


def _host_name(p: Path) -> str:
    """The file name up to ``.trace.json.gz`` (or ``.trace.json``, ``.json.gz``, ...): ``localhost``."""
    name = p.name
    for suffix in _TRACE_SUFFIXES:
        if name.endswith(suffix) and len(name) > len(suffix):
            return name[: -len(suffix)]
    return name


def _natural(names) -> list[str]:
    """Device names in natural order (``TPU:2`` before ``TPU:10``)."""
    return sorted(names, key=lambda n: (len(n), n))


def _cat(values) -> pd.Categorical:
    """Strings as a pandas ``category`` array."""
    import pandas as pd

    return pd.Categorical(values)


def _uint64(values: list[int | None]) -> pd.api.extensions.ExtensionArray:
    """Nullable UInt64 from Python ints (up to 2**64 - 1) and None."""
    import numpy as np
    import pandas as pd

    mask = np.fromiter((v is None for v in values), bool, len(values))
    data = np.fromiter((0 if v is None else v for v in values), np.uint64, len(values))
    return pd.arrays.IntegerArray(data, mask)


def _module_runs_frame(scan: _Scan, host: str) -> pd.DataFrame:
    """``MODULE_RUN_COLUMNS`` rows, sorted by device (natural order) then start."""
    import numpy as np
    import pandas as pd

    from hloscope.parsers.events import MODULE_RUN_COLUMNS

    rows = sorted(scan.module_runs, key=lambda r: (len(r[0]), r[0], r[4], r[5]))
    cols = list(zip(*rows)) if rows else [()] * 6
    return pd.DataFrame(
        {
            "host": _cat([host] * len(rows)),
            "device": _cat(cols[0]),
            "device_id": np.array(cols[1], np.int32),
            "module": _cat(cols[2]),
            "program_id": _uint64(list(cols[3])),
            "start_ps": np.array(cols[4], np.int64),
            "duration_ps": np.array(cols[5], np.int64),
        },
        columns=list(MODULE_RUN_COLUMNS),
    )


def _steps_frame(scan: _Scan, host: str) -> pd.DataFrame:
    """``STEP_COLUMNS`` rows (device ``Steps`` markers and host ``step_num`` regions), sorted by device id
    (host markers, -1, first), device, start."""
    import numpy as np
    import pandas as pd

    from hloscope.parsers.events import STEP_COLUMNS

    rows = sorted(scan.steps, key=lambda r: (r[1], len(r[0]), r[0], r[4], -r[5]))
    cols = list(zip(*rows)) if rows else [()] * 6
    return pd.DataFrame(
        {
            "host": _cat([host] * len(rows)),
            "device": _cat(cols[0]),
            "device_id": np.array(cols[1], np.int32),
            "name": _cat(cols[2]),
            "step": pd.array(list(cols[3]), dtype="Int64"),
            "start_ps": np.array(cols[4], np.int64),
            "duration_ps": np.array(cols[5], np.int64),
        },
        columns=list(STEP_COLUMNS),
    )


def _ops_frame(scan: _Scan, host: str, steps: pd.DataFrame) -> pd.DataFrame:
    """``OP_COLUMNS + OP_EXTRA_COLUMNS`` rows, sorted by device (natural order), start, longest first.

    The module (and program id) of an op without ``args.hlo_module`` is that of the ``XLA Modules`` event of its
    device that starts last at or before it, if that event still runs at the op's start; ``""`` when none. The
    step is that of the device's ``Steps`` marker containing the op's start, else (a device without ``Steps``
    markers) of the host's ``step_num`` marker containing it; NA when none.
    """
    import numpy as np
    import pandas as pd

    from hloscope.parsers.events import OP_COLUMNS, OP_EXTRA_COLUMNS

    ops = scan.ops
    n = len(ops)
    strings = np.array(scan.strings, dtype=object)
    device_codes = np.array(ops.device, np.int64)
    dev_names = _natural(set(strings[np.unique(device_codes)].tolist()))
    rank = {d: i for i, d in enumerate(dev_names)}
    to_rank = np.zeros(len(strings), np.int64)
    to_rank[[scan.strings.index(d) for d in dev_names]] = np.arange(len(dev_names))
    dev = to_rank[device_codes]
    start = np.array(ops.start, np.int64)
    dur = np.array(ops.duration, np.int64)
    order = np.lexsort((-dur, start, dev))
    dev, start, dur = dev[order], start[order], dur[order]

    def strings_col(values: list[int]) -> pd.Categorical:
        codes = np.array(values, np.int64)[order]
        return pd.Categorical.from_codes(codes, pd.Index(strings, dtype=object)).remove_unused_categories()

    # modules: the event's own, else the enclosing module run of its device
    module = np.array(ops.module, dtype=object)[order]
    program = np.array(ops.program, dtype=object)[order]
    missing = np.equal(module, None)
    if missing.any() and scan.module_runs:
        by_dev: dict[str, list[tuple]] = {}
        for r in scan.module_runs:
            by_dev.setdefault(r[0], []).append(r)
        for name, runs in by_dev.items():
            rows = np.flatnonzero(missing & (dev == rank[name])) if name in rank else ()
            if not len(rows):
                continue
            runs.sort(key=lambda r: (r[4], r[5]))
            j = _containing(np.array([r[4] for r in runs], np.int64),
                            np.array([r[4] + r[5] for r in runs], np.int64), start[rows])
            rows, j = rows[j >= 0], j[j >= 0]
            module[rows] = np.array([r[2] for r in runs], dtype=object)[j]
            no_id = np.equal(program[rows], None)
            program[rows[no_id]] = np.array([r[3] for r in runs], dtype=object)[j[no_id]]
    module[np.equal(module, None)] = ""

    # steps: the device's own markers, else the host's
    step = np.zeros(n, np.int64)
    no_step = np.ones(n, bool)
    if len(steps):
        s_dev = steps["device"].astype(str).to_numpy()
        s_id = steps["device_id"].to_numpy()
        host_markers = steps[s_id < 0]
        for name, d in rank.items():
            mine = steps[(s_dev == name) & (s_id >= 0)]
            markers = (mine if len(mine) else host_markers).sort_values("start_ps", kind="stable")
            if not len(markers):
                continue
            rows = np.flatnonzero(dev == d)
            m_start = markers["start_ps"].to_numpy()
            j = _containing(m_start, m_start + markers["duration_ps"].to_numpy(), start[rows])
            m_step = markers["step"].array
            values = m_step.to_numpy(dtype=np.int64, na_value=0)
            hit = j >= 0
            hit[hit] = ~m_step.isna()[j[hit]]
            step[rows[hit]] = values[j[hit]]
            no_step[rows[hit]] = False

    names = strings_col(ops.name)
    frame = pd.DataFrame(
        {
            "host": pd.Categorical.from_codes(np.zeros(n, np.int8), [host]),
            "device": pd.Categorical.from_codes(dev, dev_names),
            "device_id": np.array(ops.device_id, np.int32)[order],
            "stream": pd.Categorical.from_codes(np.zeros(n, np.int8), [XLA_OPS_THREAD]),
            "program_id": _uint64(program.tolist()),
            "module": _cat(module),
            "instruction": names,
            "name": names.copy(),
            "step": pd.arrays.IntegerArray(step, no_step),
            "start_ps": start,
            "duration_ps": dur,
            "self_ps": _self_ps(dev, start, dur),
            "hlo_text": strings_col(ops.text),
            "hlo_category": strings_col(ops.category),
            "xla_flops": np.array(ops.flops, np.float64)[order],
            "xla_bytes_accessed": np.array(ops.nbytes, np.float64)[order],
            "op_name": strings_col(ops.op_name),
            "source": strings_col(ops.source),
        },
        columns=list(OP_COLUMNS + OP_EXTRA_COLUMNS),
    )
    return frame


def _device_kind(scan: _Scan, devices: set[str]) -> str | None:
    """The chip's name when the metadata of a device process that ran ops states it (a ``process_labels``
    event, ``{"labels": "TPU v6 lite"}``), first device in natural order; else None."""
    for pid, name in sorted(scan.process.items(), key=lambda kv: (len(kv[1]), kv[1])):
        label = scan.labels.get(pid, "").strip() if name in devices else ""
        if label:
            return label
    return None


def read_chrome_events(path: str | os.PathLike[str]) -> TraceEvents:
    """Read the HLO op events, module runs and step markers of a Chrome trace (``*.trace.json.gz``) into the
    one op-events schema (``hloscope.parsers.events``).

    The file is decoded one event at a time: events of host processes are dropped as they are read (except
    step markers), device events are reduced to the fields kept and each distinct string is stored once, so memory
    grows with the device op events, not with the file (measurements in ``docs/chrome_trace.md``).

    What each column holds for a Chrome trace:

    * ``ops``: one row per complete (``"X"``) event on the ``XLA Ops`` thread of a ``/device:<KIND>:<n>``
      process, sorted by device (natural order), start, longest first. ``host``: the file name up to
      ``.trace.json(.gz)``; ``device``: the process name; ``device_id``: its ``n``; ``stream``: ``XLA Ops``;
      ``instruction`` and ``name``: the event name (the HLO instruction); ``module`` / ``program_id``: from
      ``args.hlo_module`` / ``args.program_id``, else from the device's ``XLA Modules`` event enclosing the
      start (``""`` / NA when none); ``start_ps``: ``ts`` x 1e6; ``duration_ps``: ``args.device_duration_ps``,
      else ``dur`` x 1e6; ``self_ps``: duration minus the op events nested directly inside on the same thread;
      ``step``: see ``_ops_frame``. Extra columns: ``hlo_text`` (``long_name``, ``""`` when absent),
      ``hlo_category``, ``xla_flops`` (``model_flops``), ``xla_bytes_accessed`` (``bytes_accessed``) -- float64,
      NaN when absent -- ``op_name`` (``tf_op``) and ``source``; strings are ``category``.
    * ``module_runs``: one row per ``XLA Modules`` event (``<module>(<program id>)``).
    * ``steps``: device ``Steps`` events (step: ``args.step_num``, else the name when an integer) and events of
      non-device processes whose ``args`` carry ``step_num`` (``device_id`` -1).
    * ``platform``: ``"tpu"`` when a device that ran ops is a TPU, else ``"gpu"``; ``device_kind``: the chip's
      name when the device processes' metadata states it (``process_labels``), else None; ``hlo_modules``:
      empty (Chrome traces embed no module).

    Args:
        path: a ``.trace.json.gz`` file (gzip-compressed JSON; an uncompressed ``.trace.json`` works too).

    Returns:
        A ``TraceEvents``.

    Raises:
        TraceError: (naming ``path``) the file is missing or a directory, or its path cannot be looked up (a
            NUL character, too long); is neither gzip nor JSON, or is truncated; inflates past
            ``HLOSCOPE_MAX_INFLATED_BYTES``; is damaged past one event (the module docstring lists the cases);
            has no ``traceEvents``; or holds no HLO op events on a device's ``XLA Ops`` thread.
    """
    from hloscope.parsers.events import TraceEvents  # here: events.read_trace imports this module

    from hloscope.parsers._trace_dir import checked_path, lookup

    p = checked_path(path)
    kind = lookup(p)
    if kind is None:
        raise TraceError(p, "no such file; expected a Chrome trace *.trace.json.gz (written by jax.profiler "
                            "next to the *.xplane.pb)")
    if kind == "dir":
        raise TraceError(p, "is a directory, expected one *.trace.json.gz file")
    try:
        fh = open_text(p)
    except OSError as e:
        raise TraceError(p, f"cannot be read ({e.strerror or e}); check the path and its permissions") from None
    scan = _scan(p, fh)
    if not scan.ops:
        names = sorted({n for n in scan.process.values() if n.startswith("/device:")})
        raise TraceError(p, "no per-HLO-op events: no complete ('X') event on an 'XLA Ops' thread of a "
                            f"/device:... process (device processes: {names or 'none'}); capture the profile "
                            "on TPU with jax.profiler.trace around jitted steps")
    host = _host_name(p)
    steps = _steps_frame(scan, host)
    ops = _ops_frame(scan, host, steps)
    devices = set(ops["device"].cat.categories)
    notes = scan.notes()
    unknown = int((ops["module"] == "").sum())
    if unknown:
        notes.append(f"{unknown} of {len(ops)} op events lie in no XLA Modules event and name no module")
    return TraceEvents(
        ops=ops,
        steps=steps,
        module_runs=_module_runs_frame(scan, host),
        platform="tpu" if any(_DEVICE_RE.match(d).group(1) == "TPU" for d in devices) else "gpu",
        device_kind=_device_kind(scan, devices),
        files=[str(p)],
        notes=notes,
    )
