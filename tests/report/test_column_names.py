"""No column of a report table shadows a ``pandas.DataFrame`` attribute: ``report.ops.flags`` must be the
column, not pandas' ``DataFrame.flags`` (nor ``.count`` the method, ``.shape`` the tuple)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

import hloscope
from hloscope.roofline.tables import MODULE_COLUMNS, OP_COLUMNS

HLO = Path(__file__).resolve().parents[2] / "fixtures" / "hlo" / "cpu_mlp_1dev.hlo.txt"
ATTRIBUTES = frozenset(dir(pd.DataFrame))


def test_no_report_column_is_a_dataframe_attribute():
    report = hloscope.analyze(HLO, chip="tpu-v5e")
    tables = {"ops": report.ops, "modules": report.modules}  # (made on first use from the columns kept)
    assert {n for n, v in vars(report).items() if isinstance(v, pd.DataFrame)} == {"_ops", "_modules"}
    assert list(tables["ops"].columns) == OP_COLUMNS and list(tables["modules"].columns) == MODULE_COLUMNS
    clashes = {t: [c for c in df.columns if c in ATTRIBUTES] for t, df in tables.items()}
    assert clashes == {"ops": [], "modules": []}
