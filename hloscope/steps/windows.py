"""Where each step of each device begins and ends (:func:`step_windows`), from what the trace records.

Sources, best first (the ``source`` column says which one a window came from):

1. ``device steps``: a device's own step markers -- TPU ``Steps`` lines, XProf's derived step lines
   (``TraceEvents.steps`` rows of that device);
2. ``host steps``: ``jax.profiler.StepTraceAnnotation(name, step_num=i)`` regions of the host that ran the
   device (``TraceEvents.steps`` rows on the host plane, ``device_id`` -1), applied to every device of that host;
3. ``module runs``: each execution of a module on the device (TPU ``XLA Modules`` lines,
   ``TraceEvents.module_runs``), numbered in time order per device;
4. ``trace``: no markers and no module lines (CPU and GPU traces captured without ``StepTraceAnnotation``):
   one window from the device's first op to its last, said so in a note -- never a guessed step boundary.

A marker that appears twice with one step number on a device (two nested annotations) keeps its widest region.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

    from hloscope.parsers.events import TraceEvents

#: Columns of :func:`step_windows`' table.
WINDOW_COLUMNS = ("host", "device", "device_id", "step", "module", "source", "start_ps", "end_ps")


def step_windows(events: TraceEvents, devices: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """One row per (device, step): the step's window on that device.

    Args:
        events: the reader's ``TraceEvents`` (``steps``, ``module_runs``).
        devices: the devices that ran op events: columns ``host``, ``device``, ``device_id``, ``first_ps``,
            ``last_ps`` (the first op's start and the last op's end on that device).

    Returns:
        ``(windows, notes)``: ``windows`` with ``WINDOW_COLUMNS`` (``step`` an int, ``module`` ``""`` except
        for module-run windows), sorted by device then start; ``notes`` says which source was used where.
    """
    import pandas as pd

    markers = events.steps
    runs = events.module_runs
    rows: list[tuple] = []
    used: dict[str, int] = {}
    by_device, by_host = _marker_index(markers)
    for host, device, device_id, first_ps, last_ps in devices[
            ["host", "device", "device_id", "first_ps", "last_ps"]].itertuples(index=False, name=None):
        key = (str(host), str(device), int(device_id))
        if key in by_device:
            mine, source = by_device[key], "device steps"
        elif str(host) in by_host:
            mine, source = by_host[str(host)], "host steps"
        else:
            mine, source = [], ""
        if mine:
            rows.extend((host, device, device_id, step, "", source, s, e) for step, s, e in mine)
        elif len(runs):
            r = runs[(runs["host"] == host) & (runs["device"] == device) & (runs["device_id"] == device_id)]
            r = r.sort_values("start_ps", kind="stable")
            if len(r):
                source = "module runs"
                rows.extend((host, device, device_id, i, str(m), source, int(s), int(s) + int(d))
                            for i, (m, s, d) in enumerate(r[["module", "start_ps", "duration_ps"]]
                                                         .itertuples(index=False, name=None)))
            else:
                source = "trace"
                rows.append((host, device, device_id, 0, "", source, int(first_ps), int(last_ps)))
        else:
            source = "trace"
            rows.append((host, device, device_id, 0, "", source, int(first_ps), int(last_ps)))
        used[source] = used.get(source, 0) + 1
    windows = pd.DataFrame(rows, columns=list(WINDOW_COLUMNS))
    notes = []
    if used.get("trace"):
        notes.append(f"steps: {used['trace']} device(s) have no step markers (jax.profiler.StepTraceAnnotation) "
                     "and no module-run lines: the whole trace is one step there (wall time = first op start to "
                     "last op end)")
    if used.get("module runs"):
        notes.append(f"steps: {used['module runs']} device(s) have no step markers: each module execution "
                     "(XLA Modules line) is one step")
    return windows, notes


def _marker_index(markers: pd.DataFrame) -> tuple[dict[tuple[str, str, int], list], dict[str, list]]:
    """The markers as ``_widest`` regions: per device (its own markers, ``device_id >= 0``) and per host (the
    host plane's, ``device_id < 0``)."""
    by_device: dict[tuple[str, str, int], list] = {}
    by_host: dict[str, list] = {}
    if not len(markers):
        return by_device, by_host
    hosts = markers["host"].astype(str)
    devices = markers["device"].astype(str)
    own = markers["device_id"] >= 0
    for (h, d, i), g in markers[own].groupby([hosts[own], devices[own], markers.loc[own, "device_id"]], sort=False):
        by_device[(h, d, int(i))] = _widest(g)
    for h, g in markers[~own].groupby(hosts[~own], sort=False):
        by_host[h] = _widest(g)
    return by_device, by_host


def _widest(m: pd.DataFrame) -> list[tuple[int, int, int]]:
    """One region per step number, the widest kept, in time order; a marker without a number is a step of its
    own, numbered by its place in time order."""
    import pandas as pd

    best: dict[tuple[str, int], tuple[int, int]] = {}
    for i, (step, s, d) in enumerate(m[["step", "start_ps", "duration_ps"]].itertuples(index=False, name=None)):
        k = ("nth", i) if pd.isna(step) else ("step", int(step))
        if k not in best or d > best[k][1] - best[k][0]:
            best[k] = (int(s), int(s) + int(d))
    ordered = sorted(best.items(), key=lambda kv: kv[1][0])
    return [(k[1] if k[0] == "step" else n, s, e) for n, (k, (s, e)) in enumerate(ordered)]
