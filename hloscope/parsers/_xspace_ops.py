"""Per-op events of an XSpace: one row per executed HLO op (TPU ``XLA Ops``, GPU kernels, CPU thunks).

:func:`_op_segments` is the one pass over the planes: per line, the op events as arrays, names as
:class:`~hloscope.parsers._xspace_plane._Strings` codes, sorted by start, with self times. Two tables are
built from it: :func:`op_events` (one file, the per-file columns ``OP_EVENT_COLUMNS``, names as Python
strings) and ``read_xspace_events`` (:mod:`hloscope.parsers._xspace_events`: the op-events schema of
:mod:`hloscope.parsers.events`, names as categoricals straight from the codes).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from hloscope.parsers._xspace_file import (
    XSpaceIndex,
    _LineRef,
    _plane_sources,
    _release_freed_memory,
    _scan_ref,
    _scan_refs,
)
from hloscope.parsers._xspace_names import (
    _GPU_DERIVED_LINES,
    HOST_PLANE,
    OP_EVENT_COLUMNS,
    XLA_MODULES_LINE,
    XLA_OPS_LINE,
    _as_program_id,
    _device_id,
    _split_module_key,
)
from hloscope.parsers._xspace_plane import _KEY_CODE, _OP_STATS, _STEP_STATS, _PlaneOps, _Strings
from hloscope.parsers._xspace_steps import _host_steps, _step_rows_of
from hloscope.parsers._xspace_wire import _last_per_event, _ScannedLine, _wire_stat_value

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd


# --------------------------------------------------------------------------------------------------------
# Self times


def _self_times(starts: list[int], durs: list[int]) -> list[int]:
    """Duration minus the durations of directly nested events, for one line sorted by (start, -duration).

    An event is nested in another only if it lies entirely within it. Events that merely overlap -- GPU
    stream timestamps often overlap their neighbour by a few ns -- are siblings, which is also how xprof
    computes self time. Stack sweep, O(n).
    """
    n = len(starts)
    child = [0] * n
    ends = [s + d for s, d in zip(starts, durs)]
    stack: list[int] = []  # indices of open events, each containing the next one up
    for i in range(n):
        s = starts[i]
        e = ends[i]
        while stack and (ends[stack[-1]] <= s or ends[stack[-1]] < e):
            stack.pop()
        if stack:
            child[stack[-1]] += durs[i]
        stack.append(i)
    return [max(d - c, 0) for d, c in zip(durs, child)]


def _self_times_np(starts, durs):
    """:func:`_self_times` for int64 arrays, vectorized.

    The stack sweep's parent of event ``i`` is the nearest earlier event ``j`` with ``end_j >= end_i`` and
    ``end_j > start_i`` (it starts no later, sorted by start): any event between them that the sweep kept
    on its stack would be nearer, and one it popped cannot contain ``i``. Found by pointer jumping -- each
    candidate that fails is replaced by its own candidate, which is never further than needed because
    everything between them ends before ``max(end_i, start_i + 1)`` -- in O(log n) vector steps.
    """
    import numpy as np

    n = starts.shape[0]
    if n == 0:
        return np.zeros(0, np.int64)
    ends = starts + durs
    need = np.empty(n + 1, np.int64)  # 1-based; slot 0 is a virtual root that contains everything
    need[0] = 0
    np.maximum(ends, starts + 1, out=need[1:])
    end = np.empty(n + 1, np.int64)
    end[0] = np.iinfo(np.int64).max
    end[1:] = ends
    cand = np.arange(-1, n, dtype=np.int64)
    cand[0] = 0
    open_ = np.flatnonzero(end[cand] < need)
    while open_.size:
        cand[open_] = cand[cand[open_]]
        open_ = open_[end[cand[open_]] < need[open_]]
    parent = cand[1:] - 1
    child = np.zeros(n, np.int64)
    nested = parent >= 0
    np.add.at(child, parent[nested], durs[nested])
    return np.maximum(durs - child, 0)


# --------------------------------------------------------------------------------------------------------
# One line


def _line_op_rows(ctx: _PlaneOps, sl: _ScannedLine, strings: _Strings, *, skip_correlated: bool,
                  every_event: bool):
    """The op events of one scanned line as a dict of arrays (unsorted), or None if it has none.

    Keys: line (the line name), start, dur (int64 ps), name, op, module (int32 codes of ``strings``), pid
    (uint64), pid_ok (bool), dev (int64), dev_ok (bool). The rules of the per-event loop this replaced: event stats
    override metadata stats, ``ref_value`` stats are names, events with ``correlation_id`` are skipped on the
    host plane, an op needs a truthy ``hlo_op`` unless ``every_event`` (then the metadata name).
    """
    import numpy as np

    n = sl.ev_mid.shape[0]
    if n == 0:
        return None
    md = ctx.md_index(sl.ev_mid)
    op = ctx.md_op[md]
    corr = ctx.md_corr[md]
    stats: dict[int, Any] = {}  # key code -> (stat indices, their events), the last stat of each event
    if sl.st_ev.size:
        keys = ctx.stat_keys(sl)
        for key in ("op", "module", "pid", "dev", "corr"):
            sel = np.flatnonzero(keys == _KEY_CODE[key])
            if sel.size:
                sel = _last_per_event(sl.st_ev, sel)
                stats[key] = (sel, sl.st_ev[sel])
    if "op" in stats:
        sel, ev = stats["op"]
        op[ev] = ctx.value_codes(sl, sel)
    if "corr" in stats:
        corr[stats["corr"][1]] = True

    values = ctx.codes.values
    truthy = np.fromiter((bool(v) for v in values), bool, len(values))
    has_op = truthy[op]
    keep = ~sl.ev_skip
    if not every_event:
        keep &= has_op
    if skip_correlated:
        keep &= ~corr
    rows = np.flatnonzero(keep)
    if not rows.size:
        return None
    row_of = np.full(n, -1, np.int64)  # event -> row
    row_of[rows] = np.arange(rows.size)
    md = md[rows]
    module = ctx.md_module[md]
    pid = ctx.md_pid[md]
    pid_ok = ctx.md_pid_ok[md]
    dev = ctx.md_dev[md]
    dev_ok = ctx.md_dev_ok[md]
    for key in ("module", "pid", "dev"):
        if key not in stats:
            continue
        sel, ev = stats[key]
        r = row_of[ev]
        sel = sel[r >= 0]
        r = r[r >= 0]
        if key == "module":
            module[r] = ctx.value_codes(sl, sel)
            continue
        kind = sl.st_kind[sel]
        ints = (kind == 3) | (kind == 4)
        if key == "pid":  # int64 program ids are the same 64 bits as uint64
            pid[r[ints]] = sl.st_val[sel[ints]]
            pid_ok[r[ints]] = True
            other = np.flatnonzero(~ints)
            for j, v in zip(other, ctx.python_values(sl, sel[other])):
                p = _as_program_id(v)
                pid_ok[r[j]] = p is not None
                if p is not None:
                    pid[r[j]] = p
        else:  # dev: an integer stat, else unknown
            dev[r] = sl.st_val[sel].view(np.int64)
            dev_ok[r] = ints

    op_codes, module_codes = ctx.value_str_codes(strings)
    name = ctx.name_codes(strings)[md]
    op_col = op_codes[op[rows]]
    if every_event:
        op_col = np.where(has_op[rows], op_col, name)
    return {
        "line": sl.name,
        "start": sl.timestamp_ns * 1000 + sl.ev_off[rows],
        "dur": sl.ev_dur[rows],
        "name": name,
        "op": op_col,
        "module": module_codes[module],
        "pid": pid,
        "pid_ok": pid_ok,
        "dev": dev,
        "dev_ok": dev_ok,
    }


# --------------------------------------------------------------------------------------------------------
# TPU module runs (XLA Modules lines)


def _module_spans(ctx: _PlaneOps, lines: list[_LineRef], source: str):
    """TPU ``XLA Modules`` line: sorted starts, ends, module names and program ids for enclosure lookups."""

    spans = []
    for ref in lines:
        if ref.name is not None and ref.name != XLA_MODULES_LINE:
            continue
        for sl in _scan_ref(ref, ctx.want, source):
            if sl.name != XLA_MODULES_LINE:
                break
            _add_module_spans(ctx, sl, spans)
    spans.sort(key=lambda sp: (sp[0], sp[1], sp[2], -1 if sp[3] is None else sp[3]))  # None pids first
    return spans


#: Digits of the longest ``(id)`` suffix read as a program id: a uint64 has at most 20 (``-`` and 19 for an
#: int64); ``int()`` refuses more than 4300, and a longer run of digits is no program id.
_MAX_ID_DIGITS = 20


def _module_key(name: str) -> tuple[str, int | None]:
    """``_split_module_key`` (``"jit_f(6)"`` -> ``("jit_f", 6)``) for any event name: when the ``(id)`` suffix
    is no 64-bit integer written in ASCII digits -- more than 20 digits (thousands of them), digits of another
    script, or a number outside ``[-2**63, 2**64 - 1]`` -- the name is kept whole, id and all, with no program
    id (``(name, None)``), rather than raising or wrapping the number into an id no program has. Never raises."""
    open_ = name.rfind("(")
    if open_ >= 0 and name.endswith(")"):
        inner = name[open_ + 1:-1]
        digits = inner.removeprefix("-")
        if digits.isdigit() and (not digits.isascii() or len(digits) > _MAX_ID_DIGITS
                                 or not -(1 << 63) <= int(inner) < 1 << 64):
            return name, None
    try:
        return _split_module_key(name)
    except ValueError:  # belt and braces: a suffix ``int()`` refuses
        return name, None


def _add_module_spans(ctx: _PlaneOps, sl: _ScannedLine, spans: list) -> None:
    import numpy as np

    keys = ctx.stat_keys(sl) if sl.st_ev.size else np.zeros(0, np.int8)
    pids: dict[int, list] = {}
    for i in np.flatnonzero(keys == _KEY_CODE["pid"]):
        v = _wire_stat_value(sl.buf, int(sl.st_kind[i]), int(sl.st_val[i]), int(sl.st_vs[i]), int(sl.st_ve[i]),
                             ctx.names)
        pids.setdefault(int(sl.st_ev[i]), []).append(_as_program_id(v))
    md = ctx.md_index(sl.ev_mid)
    for i in range(sl.ev_mid.shape[0]):
        module, pid = _module_key(ctx.md_name[md[i]])
        for p in pids.get(i, ()):
            pid = p or pid
        start = sl.timestamp_ns * 1000 + int(sl.ev_off[i])
        spans.append((start, start + int(sl.ev_dur[i]), module, pid))


def _fill_from_modules(rows: dict, spans, strings: _Strings) -> None:
    """Module and program id of TPU ops that lack them, from the enclosing ``XLA Modules`` event."""
    import numpy as np

    if not spans:
        return
    starts = np.array([s[0] for s in spans], np.int64)
    ends = np.array([s[1] for s in spans], np.int64)
    empty = strings.code("")
    need = np.flatnonzero((rows["module"] == empty) | ~rows["pid_ok"])
    if not need.size:
        return
    st = rows["start"][need]
    j = np.searchsorted(starts, st, side="right") - 1
    inside = (j >= 0) & (st < ends[np.maximum(j, 0)])
    for i, jj in zip(need[inside], j[inside]):
        _, _, mname, mpid = spans[jj]
        if rows["module"][i] == empty:
            rows["module"][i] = strings.code(mname)
        if not rows["pid_ok"][i] and mpid is not None:
            rows["pid"][i] = mpid
            rows["pid_ok"][i] = True


# --------------------------------------------------------------------------------------------------------
# All planes


@dataclass
class _OpSegments:
    """The op events of one XSpace from :func:`_op_segments`, one segment per line that has any.

    Attributes:
        segments: ``(plane name, line name, rows)`` of each segment, in file order.
        cols: per column, one array per segment: ``name``, ``op``, ``module`` (``int32`` codes of the
            ``_Strings`` given), ``pid`` (uint64) and ``pid_ok`` (bool: the program id is known),
            ``device_id`` (int32; int64 for a line with an id beyond int32), ``start``, ``dur``, ``self``
            (int64 ps). Each segment sorted by (start, -duration), ties in event order.
        module_runs: ``(plane name, device id, start ps, end ps, module, program id or None)`` of every event
            of the ``XLA Modules`` lines of TPU planes, per plane sorted by start.
    """

    segments: list[tuple[str, str, int]] = field(default_factory=list)
    cols: dict[str, list] = field(default_factory=lambda: {c: [] for c in _SEGMENT_COLUMNS})
    module_runs: list[tuple[str, int, int, int, str, Any]] = field(default_factory=list)


#: Lines with at least this many op events hand their freed temporaries back to the system when done
#: (:func:`~hloscope.parsers._xspace_file._release_freed_memory`).
_TRIM_ROWS = 1 << 18

_SEGMENT_COLUMNS = ("name", "op", "module", "pid", "pid_ok", "device_id", "start", "dur", "self")


def _op_segments(xspace, strings: _Strings) -> _OpSegments:
    """The op events of every plane (rules: :func:`op_events`), line by line, names interned in ``strings``.

    On an :class:`XSpaceIndex` the host plane's step markers are collected in the same pass
    (``xspace._steps``, read by ``step_events``).

    Raises:
        TraceError: an event or stat breaks the wire format (an :class:`XSpaceIndex` only).
    """
    import numpy as np

    source = xspace.path if isinstance(xspace, XSpaceIndex) else "<xspace>"
    out = _OpSegments()
    cols = out.cols
    for plane_i, (plane, lines) in enumerate(_plane_sources(xspace)):
        pname = plane.name
        kind, dev_from_name = _device_id(pname)
        is_host = pname == HOST_PLANE
        if kind is None and not is_host:
            continue
        # On the host plane of an XSpaceIndex, step markers are collected in the same pass (step_events).
        collect_steps = is_host and isinstance(xspace, XSpaceIndex)
        ctx = _PlaneOps(plane, {**_OP_STATS, **_STEP_STATS} if collect_steps else _OP_STATS)
        if kind != "TPU" and "op" not in ctx.ids.values():
            if collect_steps and ("step" in ctx.ids.values() or ctx.md_step):
                xspace._steps[plane_i] = _host_steps(ctx, lines, source)
            continue  # GPU/host plane without any hlo_op stat: nothing to find
        step_rows: list[tuple] = []
        if kind == "TPU":
            spans = _module_spans(ctx, lines, source)
            out.module_runs.extend((pname, dev_from_name, *sp) for sp in spans)
            wanted = {XLA_OPS_LINE}.__contains__
        elif kind == "GPU":
            wanted = lambda name: name not in _GPU_DERIVED_LINES  # noqa: E731
        else:
            wanted = lambda name: True  # noqa: E731
        default_dev = -1 if is_host else dev_from_name
        todo = [ref for ref in lines if ref.name is None or wanted(ref.name)]
        for ref, scanned in _scan_refs(todo, ctx.want, source):  # (read ahead in a thread on large planes)
            chunks = []
            for sl in scanned:
                if not wanted(sl.name):
                    break
                if collect_steps:
                    step_rows.extend(_step_rows_of(ctx, sl, host=True))
                rows = _line_op_rows(ctx, sl, strings, skip_correlated=is_host, every_event=kind == "TPU")
                if rows is not None:
                    chunks.append(rows)
            sl = None
            if not chunks:
                continue
            rows = chunks[0] if len(chunks) == 1 else {
                k: (v if k == "line" else np.concatenate([c[k] for c in chunks])) for k, v in chunks[0].items()
            }
            del chunks
            if kind == "TPU":
                _fill_from_modules(rows, spans, strings)
            # per line: sorted by (start, -duration), stable (ties keep event order), then self times
            order = np.lexsort((-rows["dur"], rows["start"]))
            start = rows["start"][order]
            dur = rows["dur"][order]
            out.segments.append((pname, rows["line"], start.shape[0]))
            cols["name"].append(rows["name"][order])
            cols["op"].append(rows["op"][order])
            cols["module"].append(rows["module"][order])
            cols["pid"].append(rows["pid"][order])
            cols["pid_ok"].append(rows["pid_ok"][order])
            if kind == "GPU":  # the device id comes from the plane name, not from a device_ordinal stat
                cols["device_id"].append(np.full(start.shape[0], default_dev, np.int64))
            else:
                dev = np.where(rows["dev_ok"][order], rows["dev"][order], default_dev)
                # int32 when every id fits (the events table's dtype): half the memory of the column
                small = dev.size == 0 or (-(1 << 31) <= dev.min() and dev.max() < 1 << 31)
                cols["device_id"].append(dev.astype(np.int32) if small else dev)
            cols["start"].append(start)
            cols["dur"].append(dur)
            cols["self"].append(_self_times_np(start, dur))
            if start.shape[0] >= _TRIM_ROWS:
                del rows, order, start, dur
                _release_freed_memory()  # the line's temporaries, so they do not pile up in the heap
        if collect_steps:
            step_rows.sort(key=lambda r: (r[0], -r[1]))
            xspace._steps[plane_i] = step_rows
    return out


def op_events(xspace) -> pd.DataFrame:
    """One row per executed HLO op, from every device and host plane of an XSpace.

    Sources (names verified on real files, see ``docs/xspace.md``):

    * TPU planes ``/device:TPU:<n>``: every event of the line ``XLA Ops``; the HLO op is the ``hlo_op`` stat
      if present, else the event-metadata name. Module and program id come from stats, else from the
      enclosing event of the ``XLA Modules`` line (named ``<module>(<program_id>)``).
    * GPU planes ``/device:GPU:<n>``: kernel / memcpy events of the raw stream lines (``Stream #<k>...``)
      that carry an ``hlo_op`` stat (``hlo_module``, ``program_id`` alongside). One HLO op may launch several
      kernels: each kernel is its own row (``name`` = kernel name). Lines xprof derives when it
      post-processes a trace (``XLA Ops``, ``Steps``, ...) are skipped so nothing is counted twice.
    * Host plane ``/host:CPU``: CPU-backend thunk events (stats ``hlo_op``, ``hlo_module``, ``program_id``,
      ``device_ordinal``, ``run_id``). Events that also carry ``correlation_id`` are GPU kernel *launches*
      annotated with the op they launch and are skipped.

    Stats may sit on the event or on its XEventMetadata (event wins); ``ref_value`` stats are resolved to
    the referenced stat-metadata name.

    Args:
        xspace: a decoded XSpace (from :func:`read_xspace`), or an :class:`XSpaceIndex` (from
            :func:`open_xspace`: same result, without holding the decoded events in memory).

    Returns:
        A DataFrame with columns (one row per op event; per plane and line, sorted by start):

        * ``plane`` (str): plane name, e.g. ``/device:GPU:0``.
        * ``device_id`` (int64): ``N`` of ``/device:{TPU,GPU}:N``; for host thunks the ``device_ordinal``
          stat; -1 when unknown.
        * ``line`` (str): line name (GPU stream, ``XLA Ops``, host thread name).
        * ``name`` (str): event name: kernel name on GPU, op name on TPU/CPU.
        * ``hlo_op`` (str): HLO instruction name (``fusion.12``), as in the module's HLO text.
        * ``hlo_module`` (str): HLO module name (``jit_train_step``), ``""`` if unknown.
        * ``program_id`` (UInt64, nullable): the executable's program id; joins :func:`hlo_protos`.
        * ``start_ps`` (int64): absolute start, ``line.timestamp_ns * 1000 + event.offset_ps``.
        * ``duration_ps`` (int64): event duration.
        * ``self_ps`` (int64): duration minus the durations of op events directly nested in it on the same
          line (a ``while`` thunk contains its body's thunks); equals ``duration_ps`` for leaf ops.

    Raises:
        TraceError: an event or stat of the file breaks the wire format (only possible for an
            :class:`XSpaceIndex`: a decoded message is well-formed).
    """
    import numpy as np
    import pandas as pd

    strings = _Strings()
    seg = _op_segments(xspace, strings)
    cols = seg.cols

    def take(name, dtype):  # one column, its per-line pieces freed as soon as they are joined
        parts = cols.pop(name)
        return np.concatenate(parts) if parts else np.zeros(0, dtype)

    counts = [n for _, _, n in seg.segments]
    data = {}
    for col, k in (("plane", 0), ("line", 1)):
        names = np.empty(len(seg.segments), object)
        names[:] = [s[k] for s in seg.segments]
        data[col] = pd.Series(np.repeat(names, counts), dtype=object, copy=False)
    pid = take("pid", np.uint64)
    data["program_id"] = pd.Series(pd.arrays.IntegerArray(pid, ~take("pid_ok", bool)), dtype="UInt64")
    values = strings.array()
    for col, key in (("name", "name"), ("hlo_op", "op"), ("hlo_module", "module")):
        data[col] = pd.Series(values[take(key, np.int32)], dtype=object, copy=False)
    for col, key in (("device_id", "device_id"), ("start_ps", "start"), ("duration_ps", "dur"), ("self_ps", "self")):
        data[col] = pd.Series(take(key, np.int64), dtype="int64", copy=False)
    # copy=False: the columns are not consolidated into 2-D blocks (which would copy the whole table once)
    return pd.DataFrame({c: data.pop(c) for c in OP_EVENT_COLUMNS}, columns=list(OP_EVENT_COLUMNS), copy=False)
