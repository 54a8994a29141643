"""``hloscope._columns``: a DataFrame's columns read from the stored arrays equal what pandas' ``Series`` gives."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

import hloscope
from hloscope._columns import column_array, column_list


def _same(a: list, b: list) -> bool:
    """Equal lists, NaN equal to NaN, and of the same types item by item."""
    return len(a) == len(b) and all(
        type(x) is type(y) and (x == y or (isinstance(x, float) and math.isnan(x) and math.isnan(y)))
        for x, y in zip(a, b))


@pytest.fixture(scope="module")
def tables(fixtures_dir) -> list[pd.DataFrame]:
    """Every table of a static report and of a traced one (steps, gaps, advice too), and of a report read back
    from its JSON: string, float, int, bool, dict and object columns."""
    static = hloscope.analyze(fixtures_dir / "hlo" / "cpu_collectives.hlo.txt", chip="tpu-v5e")
    traced = hloscope.analyze(fixtures_dir / "profile" / "cpu_train_step")
    back = hloscope.Report.from_dict(static.to_dict())
    out = []
    for r in (static, traced, back):
        out += [r.ops, r.modules, r.advice] + [t for t in (r.steps, r.gaps) if t is not None]
    assert sum(len(t) for t in out) > 100 and any(len(t.columns) > 30 for t in out)
    return out


def test_column_list_equals_the_series(tables) -> None:
    kinds = set()
    for df in tables:
        for name in df.columns:
            assert _same(column_list(df, name), df[name].tolist()), name
            kinds.add(df[name].dtype.kind)
    assert {"f", "i", "b", "O"} <= kinds  # (text columns: object or pandas' "str" dtype, both kind "O")


def test_column_array_equals_the_series(tables) -> None:
    for df in tables:
        for name, dtype in zip(df.columns, df.dtypes):
            if dtype.kind in "fiub":
                got, want = column_array(df, name), df[name].to_numpy(dtype=float)
                assert got.dtype == want.dtype == np.float64
                np.testing.assert_array_equal(got, want)


def test_what_they_give_never_writes_into_the_table() -> None:
    df = pd.DataFrame({"a": [1.0, 2.0], "b": ["x", "y"], "c": [1, 2]})
    values = column_list(df, "b")
    values[0] = "changed"
    stored = column_array(df, "a")  # (float64 stored as float64: the stored array itself, read-only)
    with pytest.raises(ValueError):
        stored[0] = 9.0
    converted = column_array(df, "c")  # (int64 -> float64: a copy)
    converted[0] = 9.0
    assert df["a"].tolist() == [1.0, 2.0] and df["b"].tolist() == ["x", "y"] and df["c"].tolist() == [1, 2]


def test_a_missing_column_is_a_key_error() -> None:
    df = pd.DataFrame({"a": [1.0]})
    with pytest.raises(KeyError):
        column_list(df, "nope")
    with pytest.raises(KeyError):
        column_array(df, "nope")


def test_a_duplicated_label_reads_as_pandas_does() -> None:
    df = pd.DataFrame([[1.0, 2.0]], columns=["a", "a"])
    with pytest.raises(AttributeError):  # (pandas: a DataFrame, which has no tolist)
        df["a"].tolist()
    with pytest.raises(AttributeError):
        column_list(df, "a")
    np.testing.assert_array_equal(column_array(df, "a"), df["a"].to_numpy(dtype=float))


def test_without_pandas_accessor_the_series_path_runs(monkeypatch, tables) -> None:
    monkeypatch.delattr(pd.DataFrame, "_get_column_array")
    df = tables[0]
    for name in df.columns:
        assert _same(column_list(df, name), df[name].tolist()), name
    assert column_array(df, "flops").tolist() == df["flops"].tolist()
