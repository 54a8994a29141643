"""Rule ``exposed-collective``: communication the device waits for, not hidden under other work.

Source: "How to Scale Your Model", Part 1 ("overlap communication with compute") and Part 3 (sharded
matmuls: an AllGather of weights can run while the previous layer computes); XLA's latency-hiding scheduler
places independent work between an async collective's start and done (docs/steps.md).

Trace: a collective whose measured exposed time (``exposed_comm_s``, docs/steps.md) takes a large share of the
module's time; gain ``exposed_comm_s`` (all of it hidden: an upper bound). Static report: an async collective
whose roofline time exceeds the work scheduled between its start and done (``overlap_window_s``), gain
``roofline_s - overlap_window_s``, and a synchronous one, gain its ``roofline_s``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hloscope.advice._common import (SIGNIFICANT_SHARE, Advice, OpsColumns, is_scheduled, module_totals,
                                     modules_by_name, picked, share_of_module, shares, time_column)
from hloscope.units import duration

if TYPE_CHECKING:
    import numpy as np

    from hloscope.result import Report

RULE = "exposed-collective"
SOURCE = "How to Scale Your Model, Part 1 (overlap communication with compute); XLA latency-hiding scheduler"


def advise(report: Report, share: np.ndarray | None = None, ops: OpsColumns | None = None) -> list[Advice]:
    ops = OpsColumns(report) if ops is None else ops
    share = shares(ops) if share is None else share  # (advise() hands over the one it made for every rule)
    traced = time_column(ops) == "measured_s"
    comm = _collectives_not_done(ops)
    out = []
    if traced:
        exposed_share = share_of_module(ops, "exposed_comm_s", module_totals(ops, "measured_s"))
        for i in picked(comm & (exposed_share >= SIGNIFICANT_SHARE)):
            r = ops.row(i)
            window = r["overlap_window_s"]
            where = (f"; the schedule has {duration(window)} of work between its start and done" if window == window
                     else "; it is synchronous: nothing runs beside it")
            out.append(Advice(
                RULE, r["module"], r["instruction"],
                f"{r['comm_kind']} exposed {duration(r['exposed_comm_s'])} of {duration(r['measured_s'])} "
                f"measured ({exposed_share[i]:.0%} of the module's time){where}",
                "give it independent work to hide under: start it earlier (an async collective scheduled before "
                "the work that does not need its result), or split the step so the next layer's compute runs "
                "while it is in flight",
                float(r["exposed_comm_s"]), "exposed_comm_s (all of it hidden)", SOURCE))
        return out
    modules = modules_by_name(report)
    for i in picked(comm & (share >= SIGNIFICANT_SHARE)):
        r = ops.row(i)
        module = modules.get(r["module"])
        if module is not None and not is_scheduled(module):
            continue  # (before optimization XLA has not made its collectives async yet)
        window = r["overlap_window_s"]
        gain = float(r["roofline_s"] - (window if window == window else 0.0))
        if not gain > 0:
            continue
        evidence = (f"async {r['comm_kind']}: {duration(r['roofline_s'])} at the roof, {duration(window)} of work "
                    "scheduled between start and done" if window == window else
                    f"synchronous {r['comm_kind']}: {duration(r['roofline_s'])} at the roof with nothing beside it")
        out.append(Advice(RULE, r["module"], r["instruction"], evidence,
                          "schedule more independent work between start and done (or make it async)", gain,
                          "roofline_s - overlap_window_s (synchronous: roofline_s)", SOURCE))
    return out


def _collectives_not_done(ops: OpsColumns) -> np.ndarray:
    """A bool array: rows of category ``collective`` whose opcode (as text) does not end in ``-done`` (the opcodes
    of those rows alone are read)."""
    collective = ops.equal("category", "collective")
    rows = picked(collective)
    if rows:
        opcodes = ops.column("opcode")
        collective[rows] = [not str(opcodes[i]).endswith("-done") for i in rows]
    return collective
