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
