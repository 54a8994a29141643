"""Step markers of an XSpace: device ``Steps`` lines and host ``StepTraceAnnotation`` regions (:func:`step_events`).

On an :class:`~hloscope.parsers._xspace_file.XSpaceIndex` the host plane's markers are collected by
:func:`~hloscope.parsers._xspace_ops.op_events` in the same pass over the host lines (``XSpaceIndex._steps``),
so reading them again costs nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from hloscope._regex import LazyPattern
from hloscope.parsers._xspace_file import XSpaceIndex, _LineRef, _plane_sources, _scan_ref
from hloscope.parsers._xspace_names import HOST_PLANE, STEP_EVENT_COLUMNS, STEPS_LINE, _device_id
from hloscope.parsers._xspace_plane import _KEY_CODE, _STEP_STATS, _PlaneOps
from hloscope.parsers._xspace_wire import _ScannedLine

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd


#: A step number as a stat or an event name writes it: ASCII digits, at most 20 (no int64 has more; ``int()``
#: would also take ``"\u00b2"``-like digits of other scripts, ``"1_000"``, and refuses more than 4300 digits).
_STEP_TEXT = LazyPattern(r"[+-]?[0-9]{1,20}")
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1


def _as_step(v: Any) -> int | None:
    """A step number from a stat value (or an event name): an int as is, a string of ASCII digits (white space
    around allowed) parsed; None for anything else -- a bool, a float, other text (``"\u00b2"``, ``"1_000"``,
    thousands of digits) -- and for a number outside int64 (the ``step_num`` column is ``Int64``). Never raises.
    """
    if isinstance(v, bool) or v is None:
        return None
    if isinstance(v, str):
        t = v.strip()
        if not _STEP_TEXT.fullmatch(t):
            return None
        v = int(t)
    elif not isinstance(v, int):
        return None
    return v if _INT64_MIN <= v <= _INT64_MAX else None


def _step_rows_of(ctx: _PlaneOps, sl: _ScannedLine, host: bool) -> list[tuple]:
    """Step markers of one scanned line: ``(start, duration, line, name, step)`` (see :func:`step_events`)."""
    import numpy as np

    step: dict[int, Any] = {}
    group: dict[int, Any] = {}
    if sl.st_ev.size:
        keys = ctx.stat_keys(sl)
        sel = np.flatnonzero((keys == _KEY_CODE["step"]) | (keys == _KEY_CODE["group"]))
        for i, v in zip(sel, ctx.python_values(sl, sel)):  # in stat order: the last one wins
            (step if keys[i] == _KEY_CODE["step"] else group)[int(sl.st_ev[i])] = v
    if host:
        if ctx.md_step:
            cand = [i for i, m in enumerate(sl.ev_mid.tolist()) if i in step or m in ctx.md_step]
        else:
            cand = sorted(step)
    else:
        cand = range(sl.ev_mid.shape[0])
    rows = []
    base = sl.timestamp_ns * 1000
    for i in cand:
        if sl.ev_skip[i]:
            continue
        mid = int(sl.ev_mid[i])
        mds = ctx.md_step.get(mid)
        s = step[i] if i in step else (mds.get("step") if mds else None)
        g = group[i] if i in group else (mds.get("group") if mds else None)
        if host and s is None:
            continue  # host plane: only step annotations
        name = ctx.md_name[ctx.md_index(np.array([mid], np.int64))[0]]
        s = _as_step(s)
        if s is None:
            s = _as_step(name)  # a device Steps event named by its number
        if s is None:
            s = _as_step(g)
        rows.append((base + int(sl.ev_off[i]), int(sl.ev_dur[i]), sl.name, name, s))
    return rows


def _host_steps(ctx: _PlaneOps, lines: list[_LineRef], source: str) -> list[tuple]:
    rows = []
    for ref in lines:
        for sl in _scan_ref(ref, ctx.want, source):
            rows.extend(_step_rows_of(ctx, sl, host=True))
    rows.sort(key=lambda r: (r[0], -r[1]))
    return rows


def _step_markers(xspace) -> list[tuple[str, int, str, str, int | None, int, int]]:
    """The rows of :func:`step_events` as tuples ``(plane, device_id, line, name, step or None, start_ps,
    duration_ps)``, in plane order, per plane sorted by (start, -duration)."""
    source = xspace.path if isinstance(xspace, XSpaceIndex) else "<xspace>"
    out = []
    for plane_i, (plane, lines) in enumerate(_plane_sources(xspace)):
        pname = plane.name
        kind, dev = _device_id(pname)
        if kind is None and pname != HOST_PLANE:
            continue
        if kind is None and isinstance(xspace, XSpaceIndex) and plane_i in xspace._steps:
            rows = xspace._steps[plane_i]
        else:
            ctx = _PlaneOps(plane, _STEP_STATS)
            if kind is None:
                if "step" not in ctx.ids.values() and not ctx.md_step:
                    continue  # no step_num stat anywhere on this plane
                rows = _host_steps(ctx, lines, source)
            else:
                rows = []
                for ref in lines:
                    if ref.name is not None and ref.name != STEPS_LINE:
                        continue
                    for sl in _scan_ref(ref, ctx.want, source):
                        if sl.name != STEPS_LINE:
                            break
                        rows.extend(_step_rows_of(ctx, sl, host=False))
                rows.sort(key=lambda r: (r[0], -r[1]))
        out.extend((pname, dev, lname, name, step, start, dur) for start, dur, lname, name, step in rows)
    return out


def step_events(xspace) -> pd.DataFrame:
    """One row per step marker.

    Sources:

    * Device planes (``/device:TPU:<n>``, ``/device:GPU:<n>``): every event of a line named ``Steps``
      (written by TPU runtimes, and by xprof when it post-processes GPU traces). The step number is the
      ``step_num`` stat, else the event name when it is an integer, else the ``group_id`` stat.
    * Host plane ``/host:CPU``: every event carrying a ``step_num`` stat, i.e. a
      ``jax.profiler.StepTraceAnnotation(name, step_num=i)`` region (the event name is ``name``).

    Args:
        xspace: a decoded XSpace (from :func:`read_xspace`), or an :class:`XSpaceIndex` (from
            :func:`open_xspace`; its host-plane markers are found by :func:`op_events` in the same pass
            when that ran first).

    Returns:
        A DataFrame with columns ``plane`` (str), ``device_id`` (int64, -1 on host), ``line`` (str),
        ``name`` (str), ``step_num`` (Int64, nullable), ``start_ps``, ``end_ps``, ``duration_ps`` (int64;
        absolute picoseconds as in :func:`op_events`), sorted by plane order then start.
    """
    import pandas as pd

    out: dict[str, list] = {c: [] for c in STEP_EVENT_COLUMNS}
    for pname, dev, lname, name, step, start, dur in _step_markers(xspace):
        out["plane"].append(pname)
        out["device_id"].append(dev)
        out["line"].append(lname)
        out["name"].append(name)
        out["step_num"].append(step)
        out["start_ps"].append(start)
        out["end_ps"].append(start + dur)
        out["duration_ps"].append(dur)

    return pd.DataFrame(
        {
            "plane": pd.Series(out["plane"], dtype=object),
            "device_id": pd.Series(out["device_id"], dtype="int64"),
            "line": pd.Series(out["line"], dtype=object),
            "name": pd.Series(out["name"], dtype=object),
            "step_num": pd.Series(out["step_num"], dtype="Int64"),
            "start_ps": pd.Series(out["start_ps"], dtype="int64"),
            "end_ps": pd.Series(out["end_ps"], dtype="int64"),
            "duration_ps": pd.Series(out["duration_ps"], dtype="int64"),
        },
        columns=list(STEP_EVENT_COLUMNS),
    )
