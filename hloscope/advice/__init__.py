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

    from hloscope.result import Report

__all__ = ["ADVICE_COLUMNS", "Advice", "advise"]

#: The columns of :func:`advise`'s table (the fields of ``Advice``).
ADVICE_COLUMNS = ["rule", "module", "ops", "evidence", "action", "gain_s", "gain_basis", "source"]


def advise(report: Report) -> pd.DataFrame:
    """Every rule's advice on ``report``, largest gain first (``ADVICE_COLUMNS``; empty when none applies).

    Rules that need an op's shapes or neighbours read the report's parsed modules (``Report.hlo_modules``); a
    report read from JSON has none, and those rules say nothing.
    """
    import dataclasses

    import pandas as pd

    from hloscope.advice import below_roof, collectives, exposed_comm, fusion_chain, matmul_batch, precision
    from hloscope.advice._common import shares

    share = shares(report.ops)  # (made once: a groupby over the whole table, ~1.5 ms on 21,000 rows)
    found = []
    for rule in (matmul_batch, collectives, exposed_comm, precision, fusion_chain, below_roof):
        found.extend(rule.advise(report, share))
    table = pd.DataFrame([dataclasses.asdict(a) for a in found], columns=ADVICE_COLUMNS)
    return table.sort_values("gain_s", ascending=False, kind="stable").reset_index(drop=True)
