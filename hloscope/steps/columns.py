"""The overlap columns of the ops and modules tables, from the schedule (``hloscope.steps.schedule``) and, for a
trace, from the measured step breakdown (``hloscope.steps.breakdown``).

Ops: ``overlap_window_s`` (async collectives: roofline seconds of the work scheduled between start and done),
``exposed_comm_s`` and ``overlapped_comm_s`` (collectives of a trace: measured seconds during which the device did
/ did not run other work), each per module run like the other columns.
Modules: ``exposed_comm_roofline_s`` (the schedule's bound, ``schedule.async_overlap``), ``exposed_comm_s`` (the
sum of its collectives' measured exposure) and ``comm_hidden_fraction`` (overlapped over overlapped + exposed).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable

from hloscope._columns import column_array, column_list
from hloscope.roofline.tables import communicates

if TYPE_CHECKING:
    import pandas as pd

    from hloscope.hlo import HloModule
    from hloscope.steps.breakdown import StepBreakdown


def add_overlap_columns(ops: pd.DataFrame, modules: pd.DataFrame, hlo_modules: Iterable[HloModule],
                        breakdown: StepBreakdown | None = None) -> None:
    """Fill the overlap columns of ``ops`` and ``modules`` in place (they stay NaN where nothing says)."""
    import numpy as np

    from hloscope.steps.schedule import async_overlap

    hlo_modules = list(hlo_modules)
    if not len(ops) or not len(modules):
        return
    comm = communicates(ops)
    if hlo_modules and not comm:  # (the common small program: no collective, nothing exposed; no pandas work)
        if not (column_array(modules, "exposed_comm_roofline_s") == 0.0).all():  # (modules_frame may have)
            modules["exposed_comm_roofline_s"] = 0.0
    elif hlo_modules:
        windows, exposed_roof = async_overlap(hlo_modules, ops)
        if windows:
            ops["overlap_window_s"] = [windows.get(k, np.nan) for k in _keys(ops)]
        modules["exposed_comm_roofline_s"] = [float(exposed_roof.get(name, np.nan))
                                              for name in column_list(modules, "name")]
    if breakdown is not None:
        keys = _keys(ops)
        per_op = breakdown.op_overlap
        ops["exposed_comm_s"] = [per_op[k][0] if k in per_op else np.nan for k in keys]
        ops["overlapped_comm_s"] = [per_op[k][1] if k in per_op else np.nan for k in keys]
        slow = breakdown.slowest_participant
        ops["slowest_participant_s"] = [slow.get(k, np.nan) for k in keys]
        exp = ops.groupby("module")["exposed_comm_s"].sum(min_count=1)
        ovl = ops.groupby("module")["overlapped_comm_s"].sum(min_count=1)
        ran = modules["name"].isin(set(ops.loc[ops["measured_s"].notna(), "module"]))
        modules["exposed_comm_s"] = modules["name"].map(exp).where(ran).astype(float)
        # A module that ran without collectives exposes none.
        modules.loc[ran & modules["exposed_comm_s"].isna(), "exposed_comm_s"] = 0.0
        total = modules["name"].map(exp).astype(float) + modules["name"].map(ovl).astype(float)
        modules["comm_hidden_fraction"] = (modules["name"].map(ovl).astype(float) / total.where(total > 0))


def _keys(ops: pd.DataFrame) -> list[tuple[str, str]]:
    """(module, instruction) of each row of ``ops``."""
    return list(zip(column_list(ops, "module"), column_list(ops, "instruction")))
