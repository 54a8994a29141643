"""Where each step went, per device: busy and idle time, busy time by bound class, exposed communication, gaps.

:func:`step_breakdown` takes the trace's op events and the scored ops table (no re-parsing, no re-scoring) and
measures, on each device, the union of its op intervals over every step window (``hloscope.steps.windows``).
The op classes come from the ops table: an event is *communication* when its op is a collective (category
``collective``, or any op with a ``comm_kind``: async wrappers of collectives, ``send``/``recv``), or, unjoined,
when its name is a collective opcode or an NCCL/RCCL kernel; it is a *container* when its op is control flow
(``while``, ``conditional``, ``call``) or another op event of the same stream nests inside it (``self_ps`` below
``duration_ps``: the thunk of a ``while`` around its body's thunks); every other event is a *leaf* of the bound
class of its op (compute, memory; ``unknown`` for unjoined ops or unknown costs).

With ``U(X)`` the union of the intervals of the events in ``X``, measured inside the window:

==========================  ==========================================================================
column                      definition
==========================  ==========================================================================
``wall_s``                  the window's length
``busy_s``                  ``|U(all events)|``
``idle_s``                  ``wall_s - busy_s``: nothing ran (input pipeline, host work, launch gaps)
``compute_s``               ``|U(compute-bound leaves)|``
``memory_s``                ``|U(compute- or memory-bound leaves)| - compute_s``
``exposed_comm_s``          ``|U(comm) ∪ U(non-comm leaves)| - |U(non-comm leaves)|``: communication during
                            which the device did no other work
``other_s``                 ``busy_s - compute_s - memory_s - exposed_comm_s``: leaves of unknown bound, and
                            container time with nothing inside it running
``comm_s``                  ``|U(comm)|``; ``overlapped_comm_s = comm_s - exposed_comm_s`` (hidden under
                            other work); ``comm_hidden_fraction = overlapped_comm_s / comm_s``
==========================  ==========================================================================

so that ``compute_s + memory_s + exposed_comm_s + other_s + idle_s = wall_s``: the stacked bar of a step. The
priority (compute over memory over unknown) only decides which class gets time when ops of several classes run at
once on one device. Per collective *event*, ``overlapped`` is the part of its interval covered by
``U(non-comm leaves)`` and ``exposed`` the rest (``op_overlap``, the ops table's ``exposed_comm_s`` and
``overlapped_comm_s``); two collectives running at once each count their own exposure there, once in the union.

An async collective's ``*-start`` and ``*-done`` events on one device (a TPU's ``XLA Ops`` line shows both: the
start issues the transfer, the done waits for it) are one *flight*, from the start's begin to the done's end:
the start event is stretched over it and the done absorbed, so that the work scheduled between them counts as
hiding it and the done's wait as exposed. Where the trace shows the transfer itself (GPU NCCL kernels on their
own stream, joined to the ``*-start``), there is no done event on the device and the kernel's interval is used.

This is the temporal breakdown of HTA (``TemporalBreakdown``: idle/compute/non-compute) and XProf's overview
page, with the comm/compute overlap of HTA's ``CommCompOverlap`` measured per collective instead of per rank; the
book's Part 1 ("How to Scale Your Model", "overlap communication with compute") is the reason to measure it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping

from hloscope._regex import LazyPattern

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

    from hloscope.parsers.events import TraceEvents
    from hloscope.roofline.join import OpTotals

#: The steps table's columns, in order (docs/report.md, "Steps").
STEP_COLUMNS = [
    "step", "host", "device", "device_id", "module", "source", "first", "start_s", "wall_s", "busy_s", "idle_s",
    "compute_s", "memory_s", "exposed_comm_s", "other_s", "comm_s", "overlapped_comm_s", "comm_hidden_fraction",
    "roofline_s", "roofline_fraction", "late_start_s", "finish_s", "longest_gap_s", "events", "by_category_s",
]
#: The gaps table's columns (the longest idle gaps of the trace, longest first).
GAP_COLUMNS = ["step", "host", "device", "device_id", "start_s", "duration_s", "before", "after"]
#: Per device and op: the self time over the whole trace and the device's number of step windows (what a
#: straggler's ops are compared with: ``hloscope.steps.summary.stragglers``).
DEVICE_OP_COLUMNS = ["host", "device", "device_id", "module", "instruction", "self_ps", "windows"]
#: A collective instance, the same on every host: the step, the op, its n-th execution in the step; with the
#: longest duration (ps) of its participants, and how many there were.
INSTANCE_COLUMNS = ["step", "module", "instruction", "k", "max_ps", "count"]
#: Gaps kept in the gaps table.
TOP_GAPS = 20

#: An unjoined event whose instruction (or kernel) name says it is communication.
_COMM_NAME = LazyPattern(
    r"^(all-reduce|all-gather|reduce-scatter|all-to-all|ragged-all-to-all|collective-permute|collective-broadcast"
    r"|send|recv)(?![a-z])|nccl|rccl", re.IGNORECASE)
_SEND_RECV = frozenset({"send", "recv", "send-done", "recv-done"})
_COMPUTE, _MEMORY, _UNKNOWN = 0, 1, 2


@dataclass
class StepBreakdown:
    """What :func:`step_breakdown` measured.

    Attributes:
        steps: one row per (step, device), ``STEP_COLUMNS`` (seconds; ``start_s`` from the trace's first op).
        gaps: the ``TOP_GAPS`` longest idle gaps, ``GAP_COLUMNS``, named by the ops before and after them.
        op_overlap: (module, instruction) of each collective that ran -> (exposed seconds, overlapped seconds)
            per module run and device (the unit of the ops table's ``measured_s``).
        notes: how the windows were found, in words.
        device_ops: ``DEVICE_OP_COLUMNS`` of every device (for ``summary.stragglers``).
        slowest_participant: (module, instruction) of each collective -> its slowest participant's seconds per
            module run and device, its instances joined across hosts.
    """

    steps: pd.DataFrame
    gaps: pd.DataFrame
    op_overlap: dict[tuple[str, str], tuple[float, float]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    device_ops: pd.DataFrame | None = None
    slowest_participant: dict[tuple[str, str], float] = field(default_factory=dict)


@dataclass
class HostPart:
    """The breakdown of one host's events, before it is merged with the other hosts' (``merge_parts``): what a
    Dask task of ``hloscope.pod`` returns for its host file -- small tables, never the events.

    Attributes:
        steps: ``STEP_COLUMNS`` rows with ``start_ps`` (absolute) in place of ``start_s``.
        gaps: the host's ``TOP_GAPS`` longest gaps, ``GAP_COLUMNS`` with ``start_ps`` and ``duration_ps``.
        exposure_ps: (module, instruction) of each collective -> (exposed ps, overlapped ps) summed over the
            host's events.
        origin_ps: the host's earliest op start or step-window start.
        notes: how its windows were found.
        device_ops: ``DEVICE_OP_COLUMNS``: each device's self time per op over the trace, and its windows.
        collective_instances: ``INSTANCE_COLUMNS``: each collective instance -- (step, op, n-th of that op in
            the step) -- with the longest of its participants' durations on this host, and their number.
    """

    steps: pd.DataFrame
    gaps: pd.DataFrame
    exposure_ps: dict[tuple[str, str], tuple[int, int]]
    origin_ps: int
    notes: list[str] = field(default_factory=list)
    device_ops: pd.DataFrame | None = None
    collective_instances: pd.DataFrame | None = None


def step_breakdown(events: TraceEvents, ops: pd.DataFrame, runs: Mapping[str, float],
                   async_pairs: Mapping[tuple[str, str], str] | None = None) -> StepBreakdown:
    """Measure every step of every device (see the module docstring for each column's definition).

    Each host's events are measured on their own (``host_part``) and the parts merged (``merge_parts``): what
    ``hloscope.pod`` does with one Dask task per host file, so that both give the same tables.

    Args:
        events: the trace's ``TraceEvents``, ``ops`` with unknown modules named (``roofline.join.named_modules``).
        ops: the scored ops table (``roofline.tables.OP_COLUMNS``) of the same trace, or any table with its
            static columns ``module``, ``instruction``, ``category``, ``opcode``, ``comm_kind``, ``bound``,
            ``roofline_s`` for every instruction the events name.
        runs: module -> executions over all devices (``roofline.join.Measured.runs``): the divisor that makes
            ``op_overlap`` per module run and device.
        async_pairs: (module, ``*-done`` instruction) -> its ``*-start`` (``schedule.async_done_pairs``); for a
            TPU Chrome trace, read from each done's HLO line when not given. A collective's start and done events
            on one device are one flight: from the start event's begin to the done event's end, attributed to
            the start (see the module docstring).

    Returns:
        ``StepBreakdown``.
    """
    return merge_parts(host_parts(events, ops, async_pairs), runs)


def host_parts(events: TraceEvents, ops: pd.DataFrame,
               async_pairs: Mapping[tuple[str, str], str] | None = None) -> list[HostPart]:
    """``host_part`` of each host of ``events`` (in host order), classified by ``ops`` (``step_breakdown``'s
    arguments); a TPU Chrome trace's async pairs read from its HLO lines when ``async_pairs`` is None."""
    if async_pairs is None and "hlo_text" in events.ops.columns:
        async_pairs = pairs_from_lines(events.ops)
    info = static_op_info(ops)
    return [host_part(h, info, async_pairs or {}) for h in split_hosts(events)]


def static_op_info(ops: pd.DataFrame) -> dict[tuple[str, str], tuple]:
    """(module, instruction) -> (category, opcode, comm_kind, bound, roofline_s) of a scored ops table."""
    cols = ops[["category", "opcode", "comm_kind", "bound", "roofline_s"]].itertuples(index=False, name=None)
    return {(m, i): r for m, i, r in zip(ops["module"], ops["instruction"], cols)}


def split_hosts(events: TraceEvents) -> list[TraceEvents]:
    """One ``TraceEvents`` per host (in host order), each with that host's ops, steps and module runs."""
    import dataclasses

    hosts = sorted({str(h) for h in events.ops["host"].unique()})
    if len(hosts) <= 1:
        return [events]
    out = []
    idx = events.ops.groupby("host", observed=True, sort=False).indices
    for h in hosts:
        out.append(dataclasses.replace(
            events, ops=events.ops.iloc[idx[h]],
            steps=events.steps[events.steps["host"].astype(str) == h],
            module_runs=events.module_runs[events.module_runs["host"].astype(str) == h]))
    return out


def host_part(events: TraceEvents, info: Mapping[tuple[str, str], tuple],
              async_pairs: Mapping[tuple[str, str], str], totals: OpTotals | None = None) -> HostPart:
    """The breakdown of one host's events (``events`` holds one host; see ``step_breakdown``).

    An event's roofline time is its op's ``roofline_s`` (per module run and device) times the host's runs of the
    module over the host's events of the op (``roofline.join.measured_times`` of this host alone; ``totals``:
    the host's ``OpTotals`` when the caller has them already).
    """
    import numpy as np
    import pandas as pd

    from hloscope.roofline.join import measured_times
    from hloscope.steps.intervals import covered, union
    from hloscope.steps.windows import step_windows

    ev = events.ops
    start = ev["start_ps"].to_numpy(np.int64)
    end = start + ev["duration_ps"].to_numpy(np.int64)
    nested = ev["self_ps"].to_numpy(np.int64) < ev["duration_ps"].to_numpy(np.int64)
    pair, names = _op_pairs(ev)
    counts = np.bincount(pair, minlength=len(names))
    host_runs = measured_times(totals if totals is not None else events).runs
    op = _op_info(info, names, counts, host_runs)
    is_comm = op["comm"][pair]
    is_container = (op["container"][pair] | nested) & ~is_comm
    bound = op["bound"][pair]
    roof_op = op["roofline_per_event_s"]  # per op; taken per device below (no float64 column per event)
    leaf = ~is_comm & ~is_container
    end, absorbed = _async_flights(ev, start, end, pair, names, op["comm"], async_pairs)
    is_comm &= ~absorbed

    groups = _device_groups(ev)
    devices = pd.DataFrame(
        [(h, d, i, int(start[ix].min()), int(end[ix].max())) for (h, d, i), ix in groups.items()],
        columns=["host", "device", "device_id", "first_ps", "last_ps"])
    windows, notes = step_windows(events, devices)
    origin = int(min(devices["first_ps"].min(), windows["start_ps"].min())) if len(devices) else 0

    rows: list[dict] = []
    gap_rows: list[tuple] = []
    device_ops: list[tuple] = []
    instances: list[pd.DataFrame] = []
    comm_rows = np.flatnonzero(is_comm)  # collective events: their exposed / overlapped ps, in row order
    exposed_ps = np.zeros(comm_rows.size, np.int64)
    overlapped_ps = np.zeros(comm_rows.size, np.int64)
    self_all = ev["self_ps"].to_numpy(np.int64)
    win_of = {k: g for k, g in windows.groupby(["host", "device", "device_id"], sort=False)} if len(windows) else {}
    # categories (sorted) and each event's, through its op: every op of ``names`` has events, so the
    # categories of the ops are those of the events
    cat_names, op_cat = np.unique(op["category"].astype(str), return_inverse=True)
    op_cat = op_cat.reshape(-1)
    for (host, device, device_id), ix in groups.items():
        w = win_of.get((host, device, device_id), windows.iloc[0:0])
        lo = w["start_ps"].to_numpy(np.int64)
        hi = w["end_ps"].to_numpy(np.int64)
        s, e = start[ix], end[ix]
        u_all = union(s, e)  # (an absorbed done lies inside its flight: no need to drop it here)
        c, lf = is_comm[ix], leaf[ix]
        u_leaf = union(s[lf], e[lf])
        u_comm = union(s[c], e[c])
        u_comm_leaf = union(s[c | lf], e[c | lf])
        cmp = lf & (bound[ix] == _COMPUTE)
        cm = lf & (bound[ix] <= _MEMORY)
        busy = covered(*u_all, lo, hi)
        n_leaf = covered(*u_leaf, lo, hi)
        comm = covered(*u_comm, lo, hi)
        exposed = covered(*u_comm_leaf, lo, hi) - n_leaf
        compute = covered(*union(s[cmp], e[cmp]), lo, hi)
        memory = covered(*union(s[cm], e[cm]), lo, hi) - compute
        if c.any():  # each collective event: the part of it other work covers
            ci = ix[c]
            over = covered(*u_leaf, s[c], e[c])
            at = np.searchsorted(comm_rows, ci)
            overlapped_ps[at] = over
            exposed_ps[at] = (e[c] - s[c]) - over
        # Events of a window: those starting in it (windows of one device are in time order).
        wi = np.searchsorted(lo, s, side="right") - 1
        inside = (wi >= 0) & (s < hi[np.maximum(wi, 0)])
        wi_in = wi[inside]
        n_win = len(lo)
        pair_in = pair[ix][inside]
        roof_in = roof_op[pair_in]
        roof_w = np.bincount(wi_in, weights=np.nan_to_num(roof_in), minlength=n_win)
        unknown_roof = np.bincount(wi_in, weights=np.isnan(roof_in), minlength=n_win)
        del roof_in
        n_events = np.bincount(wi_in, minlength=n_win)
        finish = np.full(n_win, np.iinfo(np.int64).min)
        np.maximum.at(finish, wi_in, np.minimum(e[inside], hi[wi_in]))
        first = np.full(n_win, np.iinfo(np.int64).max)
        np.minimum.at(first, wi_in, s[inside])
        own = np.bincount(pair[ix], weights=self_all[ix], minlength=len(names))
        for k in np.flatnonzero(own).tolist():
            device_ops.append((str(host), str(device), int(device_id), names[k][0], names[k][1], int(own[k]),
                               len(lo)))
        ci_in = inside & c  # collective instances: (step, op, n-th of that op in the step) -> duration
        if ci_in.any():
            steps_of_w = w["step"].to_numpy()
            inst = pd.DataFrame({"step": steps_of_w[wi[ci_in]], "pair": pair[ix][ci_in],
                                 "dur": e[ci_in] - s[ci_in]})
            inst["k"] = inst.groupby(["step", "pair"]).cumcount()
            instances.append(inst)
        n_cat = len(cat_names)
        cell = wi_in * n_cat + op_cat[pair_in]  # (window, category) of each event in a window
        by_cat = np.bincount(cell, weights=self_all[ix][inside], minlength=n_win * n_cat).reshape(n_win, n_cat)
        cat_seen = np.bincount(cell, minlength=n_win * n_cat).reshape(n_win, n_cat)
        longest, top = _gaps(u_all, lo, hi, s, e, ix)
        if n_win:  # one row per window, as column arrays (the same numbers as per-row Python arithmetic)
            rows.append(_window_rows(w, str(host), str(device), int(device_id), lo, hi, busy, compute, memory,
                                     exposed, comm, roof_w, unknown_roof, n_events, first, finish, longest,
                                     [str(c) for c in cat_names], by_cat, cat_seen))
        steps_of = w["step"].tolist()
        gap_rows.extend((int(steps_of[k]), str(host), str(device), int(device_id), g0, g1 - g0, before, after)
                        for k, g0, g1, before, after in top)
    part_columns = ["start_ps" if c == "start_s" else c for c in STEP_COLUMNS]
    if rows:
        steps = pd.DataFrame({c: (np.concatenate([r[c] for r in rows]) if isinstance(rows[0][c], np.ndarray)
                                  else [v for r in rows for v in r[c]]) for c in part_columns}, columns=part_columns)
    else:
        steps = pd.DataFrame([], columns=part_columns)
    del rows
    if len(steps):
        first_step = steps.groupby(["host", "device", "device_id"], sort=False)["start_ps"].transform("min")
        steps["first"] = (steps["start_ps"] == first_step) & (steps["source"] != "trace")
    gap_columns = [{"start_s": "start_ps", "duration_s": "duration_ps"}.get(c, c) for c in GAP_COLUMNS]
    gaps = pd.DataFrame(gap_rows, columns=gap_columns).sort_values("duration_ps", ascending=False, kind="stable")
    gaps = gaps.head(TOP_GAPS).reset_index(drop=True)  # (labels only for the gaps kept)
    gaps["before"] = [_event_label(ev, j) for j in gaps["before"].tolist()]
    gaps["after"] = [_event_label(ev, j) for j in gaps["after"].tolist()]
    exposure = _exposure(pair[comm_rows], names, exposed_ps, overlapped_ps)
    coll = pd.DataFrame(columns=INSTANCE_COLUMNS)
    if instances:
        allinst = pd.concat(instances, ignore_index=True)
        g = allinst.groupby(["step", "pair", "k"])["dur"].agg(["max", "count"]).reset_index()
        coll = pd.DataFrame({"step": g["step"], "module": [names[p][0] for p in g["pair"]],
                             "instruction": [names[p][1] for p in g["pair"]], "k": g["k"], "max_ps": g["max"],
                             "count": g["count"]})[INSTANCE_COLUMNS]
    return HostPart(steps, gaps, exposure, origin, notes,
                    pd.DataFrame(device_ops, columns=DEVICE_OP_COLUMNS), coll)


def merge_parts(parts: list[HostPart], runs: Mapping[str, float]) -> StepBreakdown:
    """One ``StepBreakdown`` of several hosts' parts (in host order): times from the earliest host's origin,
    the longest gaps of all, each collective's exposure per module run and device (``runs``)."""
    import pandas as pd

    origin = min((p.origin_ps for p in parts), default=0)
    frames = [p.steps for p in parts if len(p.steps)]
    steps = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(
        columns=["start_ps" if c == "start_s" else c for c in STEP_COLUMNS])
    steps.insert(steps.columns.get_loc("start_ps"), "start_s", (steps["start_ps"].astype("int64") - origin) / 1e12)
    steps = steps.drop(columns="start_ps")[STEP_COLUMNS]
    if len(steps):
        steps["roofline_fraction"] = steps["roofline_s"] / steps["wall_s"].where(steps["wall_s"] > 0)
        steps = steps.sort_values(["start_s", "host", "device_id"], kind="stable").reset_index(drop=True)
    gap_frames = [p.gaps for p in parts if len(p.gaps)]
    gaps = pd.concat(gap_frames, ignore_index=True) if gap_frames else pd.DataFrame(
        columns=[{"start_s": "start_ps", "duration_s": "duration_ps"}.get(c, c) for c in GAP_COLUMNS])
    gaps = gaps.sort_values("duration_ps", ascending=False, kind="stable").head(TOP_GAPS).reset_index(drop=True)
    gaps["start_ps"] = (gaps["start_ps"].astype("int64") - origin) / 1e12
    gaps["duration_ps"] = gaps["duration_ps"].astype("int64") / 1e12
    gaps = gaps.rename(columns={"start_ps": "start_s", "duration_ps": "duration_s"})[GAP_COLUMNS]
    exposure: dict[tuple[str, str], tuple[int, int]] = {}
    for p in parts:
        for k, (x, o) in p.exposure_ps.items():
            x0, o0 = exposure.get(k, (0, 0))
            exposure[k] = (x0 + x, o0 + o)
    op_overlap = {k: (x / 1e12 / (runs.get(k[0]) or 1.0), o / 1e12 / (runs.get(k[0]) or 1.0))
                  for k, (x, o) in exposure.items()}
    notes = list(dict.fromkeys(n for p in parts for n in p.notes))
    dev_frames = [p.device_ops for p in parts if p.device_ops is not None and len(p.device_ops)]
    device_ops = pd.concat(dev_frames, ignore_index=True) if dev_frames else pd.DataFrame(columns=DEVICE_OP_COLUMNS)
    return StepBreakdown(steps, gaps, op_overlap, notes, device_ops, _slowest_participant(parts, runs))


def _slowest_participant(parts: list[HostPart], runs: Mapping[str, float]) -> dict[tuple[str, str], float]:
    """(module, instruction) of each collective -> seconds of its slowest participant per module run and device:
    each instance -- joined across hosts by step, op and its n-th execution in the step -- counts the longest of
    its participants' durations, summed over instances and divided by the runs per device (``runs`` over the
    participants of an instance)."""
    import pandas as pd

    frames = [p.collective_instances for p in parts
              if p.collective_instances is not None and len(p.collective_instances)]
    if not frames:
        return {}
    allinst = pd.concat(frames, ignore_index=True)
    g = allinst.groupby(["module", "instruction", "step", "k"]).agg(
        max_ps=("max_ps", "max"), count=("count", "sum")).reset_index()
    out = {}
    for (m, i), x in g.groupby(["module", "instruction"]):
        per_device_runs = (runs.get(m) or 1.0) / max(float(x["count"].max()), 1.0)
        out[(m, i)] = float(x["max_ps"].sum()) / 1e12 / per_device_runs
    return out


#: A done's operand in its HLO line: the first ``%name`` after ``-done(`` (its type, a tuple, comes first).
_DONE_OPERAND = LazyPattern(r"-done\([^%]*%([A-Za-z0-9_.\-]+)")


def pairs_from_lines(ev: pd.DataFrame) -> dict[tuple[str, str], str]:
    """(module, done) -> start from the HLO lines of a TPU Chrome trace (``%x-done = ... x-done(<type> %x-start)``)."""
    pairs = {}
    done = ev["instruction"].astype(str).str.contains("-done", regex=False)
    for m, inst, text in ev.loc[done, ["module", "instruction", "hlo_text"]].drop_duplicates(
            ["module", "instruction"]).itertuples(index=False, name=None):
        found = _DONE_OPERAND.search(str(text))
        if found:
            pairs[(str(m), str(inst))] = found.group(1)
    return pairs


def _async_flights(ev: pd.DataFrame, start: np.ndarray, end: np.ndarray, pair: np.ndarray,
                   names: list[tuple[str, str]], op_is_comm: np.ndarray, async_pairs: Mapping[tuple[str, str], str]
                   ) -> tuple[np.ndarray, np.ndarray]:
    """Join each collective done event to the latest start event of its start instruction on the same device
    (and stream group): the start's interval is stretched to the done's end, the done marked absorbed.
    ``op_is_comm``: per op of ``names`` (not per event), whether it is communication.

    Returns:
        ``(end, absorbed)``: the new end of every event, and which done events now lie inside a flight.
    """
    import numpy as np

    absorbed = np.zeros(len(end), bool)
    index = {n: k for k, n in enumerate(names)}
    wanted = {}
    for k, (m, inst) in enumerate(names):
        st = async_pairs.get((m, inst))
        if st is not None and op_is_comm[k] and (m, st) in index:
            wanted[k] = index[(m, st)]
    if not wanted:
        return end, absorbed  # (unchanged: no copy of the whole column)
    end = end.copy()
    device = ev.groupby(["host", "device", "device_id"], observed=True, sort=False).ngroup().to_numpy()
    for done_k, start_k in wanted.items():
        d_rows = np.flatnonzero(pair == done_k)
        s_rows = np.flatnonzero(pair == start_k)
        for dev in np.unique(device[d_rows]):
            dr = d_rows[device[d_rows] == dev]
            sr = s_rows[device[s_rows] == dev]
            if not len(sr):
                continue
            sr = sr[np.argsort(start[sr], kind="stable")]
            j = np.searchsorted(start[sr], start[dr], side="right") - 1  # the latest start before each done
            ok = j >= 0
            # one done per start: where two dones find the same start, the later one keeps it
            chosen = {}
            for row, jj in zip(dr[ok].tolist(), j[ok].tolist()):
                chosen[jj] = row
            for jj, row in chosen.items():
                s_row = sr[jj]
                end[s_row] = max(end[s_row], end[row])
                absorbed[row] = True
    return end, absorbed


#: Most (host, device, device_id) groups of one host that :func:`_device_groups` finds by one pass per group;
#: beyond it pandas' groupby is used.
_MAX_DEVICE_PASSES = 64


def _device_groups(ev: pd.DataFrame) -> dict[tuple, np.ndarray]:
    """``ev.groupby(["host", "device", "device_id"], observed=True, sort=True).indices``: the rows (int64, in
    order) of each device, keys in sorted order -- without pandas' per-row group codes (several int64 columns
    of the table's length), when ``host`` and ``device`` are categoricals without missing values and the table
    has few devices (one host's): one boolean pass over the rows per (host, device) and per device id."""
    import numpy as np
    import pandas as pd

    def pandas_groups() -> dict[tuple, np.ndarray]:
        return ev.groupby(["host", "device", "device_id"], observed=True, sort=True).indices

    host, device = ev["host"], ev["device"]
    if not (isinstance(host.dtype, pd.CategoricalDtype) and isinstance(device.dtype, pd.CategoricalDtype)):
        return pandas_groups()
    h_codes, d_codes = host.cat.codes.to_numpy(), device.cat.codes.to_numpy()
    if h_codes.size and (h_codes.min() < 0 or d_codes.min() < 0):  # missing values: groupby drops those rows
        return pandas_groups()
    n_dev = len(device.cat.categories)
    hd = h_codes.astype(np.int64) * n_dev + d_codes  # (host, device) of each row, in category order
    pairs = pd.unique(hd)
    if len(pairs) > _MAX_DEVICE_PASSES:
        return pandas_groups()
    ids = ev["device_id"].to_numpy()
    h_cats, d_cats = host.cat.categories, device.cat.categories
    out: dict[tuple, np.ndarray] = {}
    passes = 0
    for k in sorted(pairs.tolist()):
        rows = np.flatnonzero(hd == k)
        sub = ids[rows]
        found = pd.unique(sub)
        passes += len(found)
        if passes > _MAX_DEVICE_PASSES:
            return pandas_groups()
        for i in sorted(found.tolist()):
            out[(h_cats[k // n_dev], d_cats[k % n_dev], i)] = rows if len(found) == 1 else rows[sub == i]
    return out


def _op_pairs(ev: pd.DataFrame) -> tuple[np.ndarray, list[tuple[str, str]]]:
    """Each event's index into the distinct (module, instruction) pairs of the events, and those pairs.

    The index is ``int32`` (4 bytes per event) when the pairs fit, else ``int64``."""
    import numpy as np

    from hloscope.parsers.events import dense_codes

    mod = ev["module"].astype("category")
    ins = ev["instruction"].astype("category")
    n = len(ins.cat.categories) + 1
    wide = (len(mod.cat.categories) + 1) * n >= 1 << 31
    kt = np.int64 if wide else np.int32
    key = mod.cat.codes.to_numpy().astype(kt) * kt(n)
    key += ins.cat.codes.to_numpy().astype(kt)
    if key.size and 0 <= key.min() and key.max() < max(1 << 24, 4 * key.size):
        uniq, inv = dense_codes(key, int(key.max()) + 1)  # (a few modules x instructions: no sort of the events)
    else:
        uniq, inv = np.unique(key, return_inverse=True)
    del key
    m_cat, i_cat = list(mod.cat.categories), list(ins.cat.categories)
    names = [(str(m_cat[k // n]) if k // n >= 0 else "", str(i_cat[k % n]) if k % n < len(i_cat) else "")
             for k in uniq.tolist()]
    return inv.reshape(-1), names


def _op_info(info: Mapping[tuple[str, str], tuple], names: list[tuple[str, str]], counts: np.ndarray,
             runs: Mapping[str, float]) -> dict[str, np.ndarray]:
    """Per distinct (module, instruction): communication?, container?, bound code, roofline seconds of one
    event (the op's ``roofline_s`` per module run and device, times the runs over the events of the op: both of
    the events at hand), category."""
    import numpy as np

    n = len(names)
    comm = np.zeros(n, bool)
    container = np.zeros(n, bool)
    bound = np.full(n, _UNKNOWN, np.int8)
    roof = np.full(n, np.nan)
    category = np.empty(n, object)
    for k, (m, i) in enumerate(names):
        r = info.get((m, i))
        if r is None or r[0] == "unjoined":
            comm[k] = bool(_COMM_NAME.search(i))
            category[k] = "collective" if comm[k] else "unjoined"
            continue
        cat, opcode, comm_kind, bnd, roofline_s = r
        comm[k] = cat == "collective" or bool(comm_kind) or opcode in _SEND_RECV
        container[k] = cat == "control" and not comm[k]
        bound[k] = {"compute": _COMPUTE, "memory": _MEMORY}.get(bnd, _UNKNOWN)
        if counts[k] > 0:
            roof[k] = roofline_s * runs.get(m, 1.0) / counts[k]
        category[k] = "collective" if comm[k] else cat
    return {"comm": comm, "container": container, "bound": bound, "roofline_per_event_s": roof,
            "category": category}


def _window_rows(w: pd.DataFrame, host: str, device: str, device_id: int, lo, hi, busy, compute, memory, exposed,
                 comm, roof_w, unknown_roof, n_events, first, finish, longest, cat_names: list[str], by_cat,
                 cat_seen) -> dict[str, Any]:
    """The step rows of one device's windows ``w`` as columns (numpy arrays; lists for strings and the
    ``by_category_s`` dicts): int64 times in ps from :func:`host_part`, seconds as ``ps / 1e12`` in float64 --
    the values a per-window ``int`` / ``float`` computation gives, without a Python dict per window."""
    import numpy as np

    n = len(lo)
    wall = hi - lo
    has = n_events > 0
    nan = np.full(n, np.nan)
    with np.errstate(all="ignore"):
        hidden = np.where(comm != 0, (comm - exposed) / np.where(comm != 0, comm, 1), np.nan)
        late = np.where(has, (first - lo) / 1e12, np.nan)
        done = np.where(has, (finish - lo) / 1e12, np.nan)
    at, cat = np.nonzero(cat_seen)  # by window, then category: the order of each window's dict
    values = (by_cat[at, cat] / 1e12).tolist()
    names = [cat_names[j] for j in cat.tolist()]
    bounds = np.searchsorted(at, np.arange(n + 1)).tolist()
    return {
        "step": np.array([int(v) for v in w["step"].tolist()], np.int64), "host": [host] * n,
        "device": [device] * n, "device_id": np.full(n, device_id, np.int64), "module": w["module"].tolist(),
        "source": w["source"].tolist(), "first": np.zeros(n, bool), "start_ps": lo.astype(np.int64),
        "wall_s": wall / 1e12, "busy_s": busy / 1e12, "idle_s": (wall - busy) / 1e12, "compute_s": compute / 1e12,
        "memory_s": memory / 1e12, "exposed_comm_s": exposed / 1e12,
        "other_s": (busy - compute - memory - exposed) / 1e12, "comm_s": comm / 1e12,
        "overlapped_comm_s": (comm - exposed) / 1e12, "comm_hidden_fraction": hidden,
        "roofline_s": np.where((unknown_roof == 0) | (roof_w != 0), roof_w, np.nan), "roofline_fraction": nan,
        "events": n_events.astype(np.int64), "late_start_s": late, "finish_s": done, "longest_gap_s": longest / 1e12,
        "by_category_s": [dict(zip(names[a:b], values[a:b])) for a, b in zip(bounds[:-1], bounds[1:])],
    }


def _gaps(u_all: tuple[np.ndarray, np.ndarray], lo: np.ndarray, hi: np.ndarray, s: np.ndarray, e: np.ndarray,
          ix: np.ndarray) -> tuple[np.ndarray, list[tuple[int, int, int, int, int]]]:
    """Per window its longest idle gap (ps, ``intervals.gaps``), and the device's ``TOP_GAPS`` longest gaps as
    ``(window, start, end, event before, event after)`` (row numbers of the events table, -1 for none)."""
    import numpy as np

    from hloscope.steps.intervals import gaps

    win, g0, g1 = gaps(*u_all, lo, hi)
    longest = np.zeros(len(lo), np.int64)
    np.maximum.at(longest, win, g1 - g0)
    pick = np.argsort(-(g1 - g0), kind="stable")[:TOP_GAPS]
    by_end = np.argsort(e, kind="stable")
    by_start = np.argsort(s, kind="stable")
    top = []
    for p in pick.tolist():
        a = np.searchsorted(e[by_end], g0[p], side="right") - 1
        b = np.searchsorted(s[by_start], g1[p], side="left")
        before = int(ix[by_end[a]]) if a >= 0 else -1
        after = int(ix[by_start[b]]) if b < len(s) else -1
        top.append((int(win[p]), int(g0[p]), int(g1[p]), before, after))
    return longest, top


def _event_label(ev: pd.DataFrame, j: int) -> str:
    """``instruction`` (``module``) of event row ``j``; ``""`` for none."""
    if j < 0:
        return ""
    inst = str(ev["instruction"].iat[j]) or str(ev["name"].iat[j])
    return f"{inst} ({ev['module'].iat[j]})"


def _exposure(comm_pair: np.ndarray, names: list[tuple[str, str]], exposed_ps: np.ndarray,
              overlapped_ps: np.ndarray) -> dict[tuple[str, str], tuple[int, int]]:
    """(module, instruction) of each collective -> (exposed ps, overlapped ps) summed over its events.

    ``comm_pair``: the op (index into ``names``) of each collective event, in row order; ``exposed_ps`` and
    ``overlapped_ps`` (int64, ps): the same events' exposed and overlapped time."""
    import numpy as np

    n = len(names)
    exp = np.bincount(comm_pair, weights=exposed_ps, minlength=n)
    ovl = np.bincount(comm_pair, weights=overlapped_ps, minlength=n)
    seen = np.bincount(comm_pair, minlength=n) > 0
    return {names[k]: (int(exp[k]), int(ovl[k])) for k in np.flatnonzero(seen).tolist()}
