"""Advice: what to change, by the book's rules, from the scored tables of a ``Report`` (docs/advice.md).

One module per rule, each with its source, formula and thresholds (taken from the chip spec, never for one
chip): ``matmul_batch`` (memory-bound matmuls: the batch that reaches the critical intensity), ``collectives``
(communication-bound collectives: the dimension at which the matmul beside them hides them; reduce-scatter
instead of all-reduce), ``exposed_comm`` (collectives not hidden under other work), ``precision`` (f32 and
HIGH/HIGHEST matmuls), ``fusion_chain`` (unfused memory-bound chains), ``below_roof`` (ops of a trace far below
their roof). :func:`advise` runs them all and ranks the advice by its gain (an upper bound, in seconds per
module run).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hloscope.advice._common import Advice

if TYPE_CHECKING:
    import pandas as pd

    from hloscope._columns import ColumnTable
    from hloscope.result import Report

__all__ = ["ADVICE_COLUMNS", "Advice", "advise"]

#: The columns of :func:`advise`'s table (the fields of ``Advice``).
ADVICE_COLUMNS = ["rule", "module", "ops", "evidence", "action", "gain_s", "gain_basis", "source"]


def advise(report: Report) -> pd.DataFrame:
    """Every rule's advice on ``report``, largest gain first (``ADVICE_COLUMNS``; empty when none applies).

    Rules that need an op's shapes or neighbours read the report's parsed modules (``Report.hlo_modules``); a
    report read from JSON has none, and those rules say nothing.
    """
    from hloscope._columns import as_frame

    return as_frame(advice_table(report))


def advice_table(report: Report) -> ColumnTable | pd.DataFrame:
    """``advise``'s table as its columns (``_columns.ColumnTable``; a DataFrame when it is empty): the rules read
    the ops table by its columns (``_common.OpsColumns``), and a report's JSON prints these columns, so that
    neither makes a DataFrame or imports pandas."""
    import numpy as np

    from hloscope._columns import ColumnTable, table_from_columns
    from hloscope.advice import below_roof, collectives, exposed_comm, fusion_chain, matmul_batch, precision
    from hloscope.advice._common import OpsColumns, shares
    from hloscope.roofline.tables import descending_order

    ops = OpsColumns(report)
    share = shares(ops)  # (made once for every rule)
    found = []
    for rule in (matmul_batch, collectives, exposed_comm, precision, fusion_chain, below_roof):
        found.extend(rule.advise(report, share, ops))
    if not found:
        return ColumnTable.empty(ADVICE_COLUMNS)
    columns = {c: [getattr(a, c) for a in found] for c in ADVICE_COLUMNS}
    # (largest gain first, ties and NaN gains in the rules' order, NaN last: sort_values(ascending=False,
    # kind="stable"))
    return table_from_columns(columns, descending_order(np.array(columns["gain_s"], dtype=float)))
