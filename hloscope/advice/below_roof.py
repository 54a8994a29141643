"""Rule ``far-below-roof``: an op of a trace that ran at under 30% of its roof and takes a large share of the
measured time -- flagged for a closer look, with what the roofline expected.

Source: the roofline's own reading ("How to Scale Your Model", Part 1): the roof is the time an op cannot beat;
an op far from it is losing time to something the roofline does not model (launch overhead, poor tiling, a
layout copy, waiting). Gain: ``lost_s = measured_s - roofline_s``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hloscope.advice._common import SIGNIFICANT_SHARE, Advice, OpsColumns, picked, shares, time_column
from hloscope.units import duration

if TYPE_CHECKING:
    import numpy as np

    from hloscope.result import Report

RULE = "far-below-roof"
SOURCE = "How to Scale Your Model, Part 1 (Rooflines): measured time vs the roofline bound"
#: Efficiency (roofline_s / measured_s) below which an op is flagged.
EFFICIENCY_BELOW = 0.30


def advise(report: Report, share: np.ndarray | None = None, ops: OpsColumns | None = None) -> list[Advice]:
    ops = OpsColumns(report) if ops is None else ops
    if time_column(ops) != "measured_s":
        return []
    share = shares(ops) if share is None else share  # (advise() hands over the one it made for every rule)
    out = []
    for i in picked((ops.array("efficiency") < EFFICIENCY_BELOW) & (share >= SIGNIFICANT_SHARE)
                    & ~ops.equal("category", "collective")):
        r = ops.row(i)
        out.append(Advice(
            RULE, r["module"], r["instruction"],
            f"{r['category']} op ran {duration(r['measured_s'])} against a {r['bound']}-bound roof of "
            f"{duration(r['roofline_s'])} (efficiency {r['efficiency']:.1%}, {share[i]:.0%} of the module's time)",
            "look closer: the roofline expected it " + (f"{r['measured_s'] / r['roofline_s']:.0f}x faster"
                                                        if r["roofline_s"] > 0 else "to take no time"),
            float(r["lost_s"]), "lost_s = measured_s - roofline_s", SOURCE))
    return out
