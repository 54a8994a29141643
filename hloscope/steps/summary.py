"""The steps table read across devices (:func:`across_devices`) and across steps (:func:`step_summary`).

Across the devices of one step: the step's wall time is the longest device's; busy, idle and the parts of busy
time are the *mean* over devices (means add up: ``compute_s + memory_s + exposed_comm_s + other_s + idle_s`` is
the mean wall time, so a step draws as one stacked bar); the slowest device is the one that finished last and the
straggler gap how much later it finished than the median device.

Across steps: the median and worst step, the first traced step (often slower: compilation, autotuning, caches
warming) marked and left out of the median when there are at least three steps.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

#: Columns of :func:`across_devices`.
ACROSS_COLUMNS = [
    "step", "module", "first", "start_s", "wall_s", "devices", "busy_s", "idle_s", "compute_s", "memory_s",
    "exposed_comm_s", "other_s", "comm_s", "overlapped_comm_s", "comm_hidden_fraction", "roofline_s",
    "roofline_fraction", "slowest_device", "straggler_gap_s",
]
_MEANS = ("busy_s", "idle_s", "compute_s", "memory_s", "exposed_comm_s", "other_s", "comm_s", "overlapped_comm_s",
          "roofline_s")


def device_label(host: str, device: str, device_id: int, with_host: bool = False) -> str:
    """A short device name: ``GPU:0`` (``/device:GPU:0``), ``TPU:3``, ``CPU:5`` (XLA:CPU thunks of device ordinal
    5 on ``/host:CPU``); ``host/GPU:0`` with ``with_host`` (traces of several hosts)."""
    kind = device.rsplit("/", 1)[-1].split(":", 1)[-1]
    short = kind if device_id < 0 or kind.endswith(f":{device_id}") else f"{kind.split(':')[0]}:{device_id}"
    return f"{host}/{short}" if with_host else short


def across_devices(steps: pd.DataFrame) -> pd.DataFrame:
    """One row per step (and module, for module-run windows): ``ACROSS_COLUMNS``, in time order."""
    import pandas as pd

    fast = _across_uniform(steps)
    if fast is not None:
        return fast
    rows = []
    hosts = steps["host"].nunique() > 1
    for (step, module), g in steps.groupby(["step", "module"], sort=False):
        comm = float(g["comm_s"].sum())
        finish = g["finish_s"].fillna(g["busy_s"])
        slow = int(finish.to_numpy().argmax())
        means = {c: float(g[c].mean()) for c in _MEANS}
        wall = float(g["wall_s"].max())
        rows.append({
            "step": int(step), "module": module, "first": bool(g["first"].any()), "start_s": float(g["start_s"].min()),
            "wall_s": wall, "devices": len(g), **means,
            "comm_hidden_fraction": float(g["overlapped_comm_s"].sum()) / comm if comm > 0 else math.nan,
            "roofline_fraction": means["roofline_s"] / wall if wall > 0 else math.nan,
            "slowest_device": device_label(*g[["host", "device", "device_id"]].iloc[slow], with_host=hosts),
            "straggler_gap_s": float(finish.max() - finish.median()),
        })
    return pd.DataFrame(rows, columns=ACROSS_COLUMNS).sort_values("start_s", kind="stable").reset_index(drop=True)


def _across_uniform(steps: pd.DataFrame) -> pd.DataFrame | None:
    """:func:`across_devices` computed on (groups x devices) arrays when every (step, module) group has the same
    number of rows (the usual table: one row per device per step window), else None (the caller loops).

    The same values bit for bit as the per-group pandas calls: means are numpy's pairwise sums of the row's values
    with NaN as 0 over the count of the others (``nanops.nanmean``), applied to each contiguous row of the array;
    max/min skip NaN; medians are ``np.median`` of the non-NaN values. Thousands of steps (a long GPU capture: one
    window per step and device) take milliseconds instead of ~1 ms of pandas calls per step.
    """
    import numpy as np
    import pandas as pd

    n = len(steps)
    if not n or steps["first"].dtype != bool or steps["step"].isna().any() or steps["module"].isna().any():
        return None
    step_codes, step_values = pd.factorize(steps["step"])
    module_codes, module_values = pd.factorize(steps["module"])
    group, pairs = pd.factorize(step_codes.astype(np.int64) * len(module_values) + module_codes)
    sizes = np.bincount(group)
    d = int(sizes[0])
    if (sizes != d).any():
        return None
    rows = np.argsort(group, kind="stable").reshape(len(pairs), d)  # each group's rows, in table order

    def col(name):
        return np.ascontiguousarray(steps[name].to_numpy(np.float64)[rows])

    def nansum(a):
        return np.where(np.isnan(a), 0.0, a).sum(axis=1)

    def nanmean(a):
        count = (~np.isnan(a)).sum(axis=1).astype(np.float64)
        with np.errstate(all="ignore"):
            out = nansum(a) / count
        out[count == 0] = np.nan
        return out

    def nanext(a, fill, how):
        nan = np.isnan(a)
        out = how(np.where(nan, fill, a), axis=1)
        out[nan.all(axis=1)] = np.nan
        return out

    def nanmedian(a):
        nan = np.isnan(a)
        out = np.median(a, axis=1)
        for i in np.flatnonzero(nan.any(axis=1)):
            out[i] = np.median(a[i][~nan[i]]) if not nan[i].all() else np.nan
        return out

    means = {c: nanmean(col(c)) for c in _MEANS}
    comm = nansum(col("comm_s"))
    finish = col("finish_s")
    busy = col("busy_s")
    finish = np.where(np.isnan(finish), busy, finish)
    slow = rows[np.arange(len(pairs)), finish.argmax(axis=1)]
    wall = nanext(col("wall_s"), -np.inf, np.max)
    with np.errstate(all="ignore"):
        hidden = np.where(comm > 0, nansum(col("overlapped_comm_s")) / comm, np.nan)
        roof = np.where(wall > 0, means["roofline_s"] / wall, np.nan)
    hosts = steps["host"].nunique() > 1
    host, device, device_id = (steps[c].to_numpy()[slow] for c in ("host", "device", "device_id"))
    first = steps["first"].to_numpy()[rows].any(axis=1)
    out = pd.DataFrame({
        "step": np.array([int(v) for v in step_values[pairs // len(module_values)]], dtype=np.int64),
        "module": np.asarray(module_values, dtype=object)[pairs % len(module_values)],
        "first": first, "start_s": nanext(col("start_s"), np.inf, np.min), "wall_s": wall,
        "devices": np.full(len(pairs), d, np.int64), **means, "comm_hidden_fraction": hidden,
        "roofline_fraction": roof,
        "slowest_device": [device_label(h, v, i, with_host=hosts) for h, v, i in zip(host, device, device_id)],
        "straggler_gap_s": nanext(finish, -np.inf, np.max) - nanmedian(finish),
    }, columns=ACROSS_COLUMNS)
    return out.sort_values("start_s", kind="stable").reset_index(drop=True)


def step_summary(steps: pd.DataFrame) -> dict[str, Any]:
    """Median and worst step, the first step, and the typical idle and exposed communication time.

    Returns:
        ``{"steps", "devices", "first_step", "first_wall_s", "median_wall_s", "worst_step", "worst_wall_s",
        "median_idle_s", "median_exposed_comm_s", "comm_hidden_fraction", "worst_straggler", "worst_straggler_gap_s",
        "median_excludes_first"}`` (seconds; NaN/None where there are no steps).
    """
    per = across_devices(steps) if len(steps) else None
    if per is None or not len(per):
        return {"steps": 0}
    rest = per[~per["first"]] if len(per) >= 3 and per["first"].any() else per
    worst = per.loc[per["wall_s"].idxmax()]
    first = per[per["first"]]
    comm = float(per["comm_s"].sum())
    strag = per.loc[per["straggler_gap_s"].idxmax()]
    return {
        "steps": len(per), "devices": int(per["devices"].max()),
        "first_step": int(first["step"].iloc[0]) if len(first) else None,
        "first_wall_s": float(first["wall_s"].iloc[0]) if len(first) else math.nan,
        "median_wall_s": float(rest["wall_s"].median()), "median_excludes_first": rest is not per,
        "worst_step": int(worst["step"]), "worst_wall_s": float(worst["wall_s"]),
        "median_idle_s": float(rest["idle_s"].median()),
        "median_exposed_comm_s": float(rest["exposed_comm_s"].median()),
        "comm_hidden_fraction": float(per["overlapped_comm_s"].sum()) / comm if comm > 0 else math.nan,
        "worst_straggler": strag["slowest_device"] if int(strag["devices"]) > 1 else None,
        "worst_straggler_gap_s": float(strag["straggler_gap_s"]),
    }


#: A device is a straggler when its ready time exceeds the median device's by more than this share ...
STRAGGLER_SHARE = 0.10
#: ... and by more than this share of the median step wall time (noise on tiny steps is not a straggler).
STRAGGLER_MIN_OF_WALL = 0.05
#: Columns of :func:`per_device`.
DEVICE_COLUMNS = ["host", "device", "device_id", "steps", "wall_s", "busy_s", "idle_s", "exposed_comm_s",
                  "late_start_s", "own_s", "ready_s"]
#: Columns of :func:`stragglers`.
STRAGGLER_COLUMNS = ["host", "device", "device_id", "ready_s", "median_ready_s", "excess_s", "late_start_s",
                     "ops"]


def per_device(steps: pd.DataFrame) -> pd.DataFrame:
    """One row per device: medians over its steps of wall, busy, idle and exposed-communication time, of its late
    start (window start to its first op), of ``own_s = wall - idle - exposed communication`` (the time it worked
    rather than waited) and of ``ready_s = late_start + own`` -- when the device would have been ready for the
    step's end had it never waited for another: a device the others wait for has the largest."""
    import pandas as pd

    s = steps.assign(own_s=steps["wall_s"] - steps["idle_s"] - steps["exposed_comm_s"])
    s = s.assign(ready_s=s["late_start_s"].fillna(0.0) + s["own_s"])
    g = s.groupby(["host", "device", "device_id"], sort=True)
    out = g[["wall_s", "busy_s", "idle_s", "exposed_comm_s", "late_start_s", "own_s", "ready_s"]].median()
    out.insert(0, "steps", g.size())
    return out.reset_index()[DEVICE_COLUMNS] if len(out) else pd.DataFrame(columns=DEVICE_COLUMNS)


def stragglers(steps: pd.DataFrame, device_ops: pd.DataFrame | None, top_ops: int = 3) -> pd.DataFrame:
    """The devices whose ready time (:func:`per_device`) exceeds the median device's by more than
    ``STRAGGLER_SHARE`` (and ``STRAGGLER_MIN_OF_WALL`` of the median wall time), with the ops that make the
    difference: the ``top_ops`` whose self time per step on that device most exceeds the median over devices
    (``device_ops``), and its late start when that is where the time went."""
    import pandas as pd

    dev = per_device(steps)
    if len(dev) < 2:
        return pd.DataFrame(columns=STRAGGLER_COLUMNS)
    median_ready = float(dev["ready_s"].median())
    floor = max(STRAGGLER_SHARE * median_ready, STRAGGLER_MIN_OF_WALL * float(dev["wall_s"].median()))
    slow = dev[dev["ready_s"] - median_ready > floor]
    per_step = None
    if device_ops is not None and len(device_ops):
        per_step = device_ops.assign(self_s=device_ops["self_ps"] / 1e12 / device_ops["windows"].clip(lower=1))
        typical = per_step.groupby(["module", "instruction"])["self_s"].median().rename("median_s")
        per_step = per_step.join(typical, on=["module", "instruction"])
    rows = []
    for r in slow.itertuples(index=False):
        parts = []
        late = float(r.late_start_s) - float(dev["late_start_s"].median())
        if late > 0.25 * (r.ready_s - median_ready):
            parts.append(f"late start (+{late * 1e3:.3g} ms)")
        if per_step is not None:
            mine = per_step[(per_step["host"] == r.host) & (per_step["device"] == r.device)
                            & (per_step["device_id"] == r.device_id)]
            excess = (mine["self_s"] - mine["median_s"]).sort_values(ascending=False)
            for k in excess.index[:top_ops]:
                if excess[k] > 0:
                    parts.append(f"{mine.at[k, 'instruction']} (+{excess[k] * 1e3:.3g} ms)")
        rows.append((r.host, r.device, int(r.device_id), float(r.ready_s), median_ready,
                     float(r.ready_s) - median_ready, float(r.late_start_s), ", ".join(parts)))
    return pd.DataFrame(rows, columns=STRAGGLER_COLUMNS).sort_values("excess_s", ascending=False,
                                                                      kind="stable").reset_index(drop=True)
