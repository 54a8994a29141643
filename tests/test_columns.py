"""``hloscope._columns``: a DataFrame's columns read from the stored arrays equal what pandas' ``Series`` gives, and
a DataFrame made from columns equals what ``pd.DataFrame`` makes of them."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

import hloscope
from hloscope._columns import (CodedStrings, ColumnTable, column_array, column_codes, column_list, column_value,
                               dtype_kinds, frame_from_columns, head_records, table_from_columns)


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


def _assert_same_frame(got: pd.DataFrame, want: pd.DataFrame) -> None:
    """Equal values (NaN equal to NaN), dtypes, column index and row index, and the same block layout."""
    pd.testing.assert_frame_equal(got, want, check_exact=True, check_dtype=True, check_index_type=True,
                                  check_column_type=True)
    assert list(got.columns) == list(want.columns)
    assert [str(d) for d in got.dtypes] == [str(d) for d in want.dtypes]
    assert got._mgr.nblocks == want._mgr.nblocks


def _as_built(df: pd.DataFrame) -> dict:
    """A table's columns as the tables hand them over: float, int and bool columns as their numpy arrays, text
    columns as lists of strings."""
    return {name: (df[name].to_numpy().copy() if df[name].dtype.kind in "fiub" else df[name].tolist())
            for name in df.columns}


def test_frame_from_columns_equals_pandas_on_real_tables(tables) -> None:
    built = 0
    for df in tables:
        columns = _as_built(df)
        if not len(df) or not columns:
            continue
        _assert_same_frame(frame_from_columns(columns), pd.DataFrame(columns, columns=list(columns)))
        order = np.arange(len(df))[::-1].copy()
        want = pd.DataFrame(columns, columns=list(columns)).take(order)
        want.index = pd.RangeIndex(len(want))
        _assert_same_frame(frame_from_columns(columns, order), want)
        built += 1
    assert built >= 6


@pytest.mark.parametrize("columns", [
    {"text": ["a", "b", "c"], "x": np.array([1.0, math.nan, -0.0]), "n": [1, 2, 3], "flag": np.array([True, False, True])},
    {"f": [1.5, math.nan, math.inf], "i": np.array([1, 2, 3], dtype=np.int64)},
    {"big": [1, 2**63], "s": ["x", "y"]},  # (beyond int64: pandas' own inference)
    {"mixed": [1, 2.5], "none": [None, "a"]},  # (mixed types, None: pandas' own inference)
    {"f32": np.array([1.0, 2.0], dtype=np.float32), "s": ["x", "y"]},  # (a dtype kept by pandas' path)
    {"tuple": ("a", "b"), "s": ["x", "y"]},
    {"empty": [], "also": []},
    {"ints": [np.int64(1), np.int64(2)]},  # (numpy scalars: pandas' own inference)
    {"sub": [np.str_("x"), "y"], "nan": ["a", math.nan]},  # (a str subclass: a string column; NaN: pandas')
    {"bytes": [b"x", b"y"], "bools": [True, False]},
])
def test_frame_from_columns_equals_pandas_on_made_columns(columns) -> None:
    want = pd.DataFrame(columns, columns=list(columns))
    _assert_same_frame(frame_from_columns(columns), want)
    if len(want) > 1:
        order = np.array([1, 0])
        taken = want.take(order)
        taken.index = pd.RangeIndex(len(taken))
        _assert_same_frame(frame_from_columns(columns, order), taken)


def test_frame_from_columns_keeps_a_str_subclass_as_pandas_does() -> None:
    got = frame_from_columns({"s": [np.str_("x"), "y"]})["s"].array
    want = pd.DataFrame({"s": [np.str_("x"), "y"]})["s"].array
    assert got.dtype == want.dtype
    assert [type(v) for v in got] == [type(v) for v in want]


def test_frame_from_columns_of_different_lengths_raises_as_pandas() -> None:
    columns = {"a": [1.0, 2.0], "b": ["x"]}
    with pytest.raises(ValueError):
        pd.DataFrame(columns)
    with pytest.raises(ValueError):
        frame_from_columns(columns)


def test_frame_from_columns_copies_the_arrays() -> None:
    """The table holds its own copy: changing the array handed over leaves it as it was."""
    values = np.array([1.0, 2.0])
    df = frame_from_columns({"a": values, "b": ["x", "y"]})
    values[0] = 9.0
    assert df["a"].tolist() == [1.0, 2.0]


def test_frame_from_columns_without_pandas_constructor_is_pandas(monkeypatch) -> None:
    monkeypatch.delattr(pd.DataFrame, "_from_arrays")
    columns = {"a": np.array([1.0, 2.0]), "b": ["x", "y"]}
    _assert_same_frame(frame_from_columns(columns), pd.DataFrame(columns))


def test_the_modules_table_made_by_columns_equals_one_made_from_records(tables) -> None:
    """``modules_frame`` makes its table from its rows' columns: the same frame as from the row dicts."""
    for df in tables:
        if "mfu" not in df.columns or not len(df):
            continue
        records = df.astype(object).where(df.notna(), math.nan).to_dict("records")
        records = [{k: (v.item() if hasattr(v, "item") else v) for k, v in r.items()} for r in records]
        columns = {c: [r[c] for r in records] for c in df.columns}
        _assert_same_frame(frame_from_columns(columns), pd.DataFrame(records, columns=list(df.columns)))


def test_each_frame_has_its_own_column_index() -> None:
    """The column index is made once per set of names, and each frame gets its own copy: naming one frame's
    columns leaves the next frame's unnamed."""
    columns = {"a": np.array([1.0, 2.0]), "b": ["x", "y"]}
    first = frame_from_columns(columns)
    first.columns.name = "renamed"
    second = frame_from_columns(columns)
    assert second.columns.name is None and first.columns is not second.columns
    _assert_same_frame(second, pd.DataFrame(columns))


# -- tables kept as their columns (ColumnTable) ------------------------------------------------------------------


@pytest.fixture(scope="module")
def kept(fixtures_dir) -> list[tuple[ColumnTable, pd.DataFrame]]:
    """The tables static analyses keep as columns (``Report.table``, the advice), each with the DataFrame the
    report makes of it."""
    out = []
    for name in ("cpu_collectives.hlo.txt", "cpu_transformer_scan_grad.hlo.txt", "tpu-v5e_collectives.hlo.txt",
                 "tpu-v5e_mlp_large.hlo.txt"):
        report = hloscope.analyze(fixtures_dir / "hlo" / name, chip="tpu-v5e")
        tables = [report.table("ops"), report.table("modules"), report._advice_table()]
        frames = [report.ops, report.modules, report.advice]
        out += [(t, f) for t, f in zip(tables, frames) if isinstance(t, ColumnTable)]
    assert len(out) >= 9 and any(len(t) > 100 for t, _ in out) and any(len(t.columns) == 8 for t, _ in out)
    return out


def test_kept_columns_read_as_their_frame_does(kept) -> None:
    for table, frame in kept:
        assert table.columns == list(frame.columns) and len(table) == len(frame)
        assert dtype_kinds(table) == dtype_kinds(frame)
        for name, kind in zip(frame.columns, dtype_kinds(frame)):
            assert _same(column_list(table, name), column_list(frame, name)), name
            if kind in "fiub":
                np.testing.assert_array_equal(column_array(table, name), column_array(frame, name))
        for got, want in zip(head_records(table, 7), frame.head(7).to_dict(orient="records")):
            assert list(got) == list(want) and _same(list(got.values()), [
                v.item() if hasattr(v, "item") else v for v in want.values()])


def test_one_value_reads_as_the_column_list(kept, tables) -> None:
    """``column_value(t, name, i)`` is ``column_list(t, name)[i]`` (same type, NaN for NaN) for every row of every
    column of the kept tables and the DataFrames, negative positions too; a coded column's list is not made."""
    for table in [t for t, _ in kept] + tables:
        for name in table.columns:
            listed = column_list(table, name)
            rows = list(range(len(listed))) + [-1, -len(listed)] if listed else []
            assert _same([column_value(table, name, i) for i in rows], [listed[i] for i in rows]), name
            with pytest.raises(IndexError):
                column_value(table, name, len(listed))
    coded = ColumnTable(["s"], [("str", None)], 3, {"s": (np.array([1, 0, 1]), np.array(["a", "b"], object))})
    assert [column_value(coded, "s", i) for i in range(3)] == ["b", "a", "b"]
    assert coded._arrays["s"] == ("str", None)  # (read through the codes: no object array made)


def test_an_advice_row_reads_values_not_columns(kept) -> None:
    from hloscope.advice._common import OpsColumns

    table = max((t for t, _ in kept), key=len)
    report = type("R", (), {"table": lambda self, name: table})()
    ops = OpsColumns(report)
    for name in table.columns:
        assert _same([ops.row(i)[name] for i in (0, len(table) - 1)], [column_list(table, name)[i]
                                                                      for i in (0, len(table) - 1)])
    assert ops._lists == {}


def test_the_frame_of_a_column_table_is_frame_from_columns() -> None:
    columns = {"a": np.array([3.0, 1.0, 2.0]), "b": ["x", "y", "z"], "c": [1, 2, 3], "d": [0.5, math.nan, 2.5],
               "e": np.array([True, False, True])}
    for order in (None, np.array([1, 2, 0])):
        table = table_from_columns(columns, order)
        assert isinstance(table, ColumnTable)
        _assert_same_frame(table.frame(), frame_from_columns(columns, order))
    assert isinstance(table_from_columns({"a": [1, None]}), pd.DataFrame)  # (not plain: the DataFrame at once)
    assert isinstance(table_from_columns({"a": []}), pd.DataFrame)  # (no rows: pandas' dtypes for them)


def test_setting_a_column_of_a_column_table() -> None:
    table = table_from_columns({"a": np.array([1.0, 2.0]), "b": ["x", "y"]})
    table["c"] = 0.0  # (one value for every row, as a DataFrame takes it)
    table["a"] = [5.0, math.nan]
    _assert_same_frame(table.frame(), pd.DataFrame({"a": [5.0, math.nan], "b": ["x", "y"], "c": [0.0, 0.0]}))
    with pytest.raises(TypeError):
        table["d"] = [1, None]  # (not a plain column)


def test_an_empty_column_table_is_pandas_empty_frame() -> None:
    table = ColumnTable.empty(["x", "y"])
    assert len(table) == 0 and table.columns == ["x", "y"] and dtype_kinds(table) == ["O", "O"]
    assert head_records(table, 5) == [] and column_list(table, "x") == []
    _assert_same_frame(table.frame(), pd.DataFrame([], columns=["x", "y"]))


def _coded(strings: list[str]) -> CodedStrings:
    categories = list(dict.fromkeys(strings))
    codes = np.array([categories.index(v) for v in strings], dtype=np.intp)
    return CodedStrings(codes, np.array(categories + ["unused"], dtype=object))


@pytest.mark.parametrize("order", [None, np.array([2, 0, 3, 1])])
def test_coded_strings_make_the_frame_of_their_strings(order) -> None:
    """A column handed over as codes into its strings (``CodedStrings``) makes the table and frame that the list
    of those strings makes; the table keeps the codes in its row order (``column_codes``)."""
    strings = ["bf16", "f32", "bf16", "s8"]
    plain = {"x": np.array([1.0, 2.0, 3.0, 4.0]), "dtype": strings, "b": ["p", "q", "r", "s"]}
    coded = dict(plain, dtype=_coded(strings))
    table = table_from_columns(coded, order)
    assert isinstance(table, ColumnTable)
    _assert_same_frame(table.frame(), frame_from_columns(plain, order))
    _assert_same_frame(frame_from_columns(coded, order), frame_from_columns(plain, order))
    codes, categories = column_codes(table, "dtype")
    assert categories[codes].tolist() == column_list(table, "dtype") == [
        strings[i] for i in (order if order is not None else range(4))]
    assert column_codes(table, "b") is None and column_codes(table.frame(), "dtype") is None


def test_a_coded_column_is_kept_as_its_codes_until_read() -> None:
    """The object array of a coded column is made when first read (``stored``, the frame), once; the report's
    JSON prints the column from its codes (``result.report._records``) without it."""
    strings = ["bf16", "f32", "bf16", "s8"]
    table = table_from_columns({"dtype": _coded(strings), "x": np.arange(4.0)}, np.array([3, 1, 0, 2]))
    assert table._arrays["dtype"] == ("str", None)  # (not made yet)
    first = table.stored("dtype")
    assert first.tolist() == ["s8", "f32", "bf16", "bf16"] and table.stored("dtype") is first


def test_coded_strings_of_other_values_go_the_list_way() -> None:
    """Categories that are not all ``str`` are read as the list of their values (here: pandas' own frame, as
    for that list); a column set anew drops its codes."""
    values = CodedStrings(np.array([0, 1, 0]), np.array(["a", None], dtype=object))
    got = table_from_columns({"v": values, "x": [1.0, 2.0, 3.0]})
    assert isinstance(got, pd.DataFrame)
    _assert_same_frame(got, pd.DataFrame({"v": ["a", None, "a"], "x": [1.0, 2.0, 3.0]}))
    table = table_from_columns({"v": _coded(["a", "b", "a"])})
    table["v"] = ["c", "c", "d"]
    assert column_codes(table, "v") is None and column_list(table, "v") == ["c", "c", "d"]


def test_columns_the_same_in_any_order_are_kept_as_they_are() -> None:
    """``unordered`` names columns whose values are the same in every row order (NaN only): the table is the one
    taking them in ``order`` would make, and their arrays are not taken."""
    nan = np.full(3, math.nan)
    columns = {"x": np.array([1.0, 2.0, 3.0]), "nan": nan, "s": ["a", "b", "c"]}
    order = np.array([2, 0, 1])
    kept = table_from_columns(columns, order, frozenset({"nan"}))
    _assert_same_frame(kept.frame(), frame_from_columns(columns, order))
    assert kept.stored("nan") is nan and column_list(kept, "x") == [3.0, 1.0, 2.0]


def test_advice_reads_coded_columns_as_it_reads_the_frame(fixtures_dir) -> None:
    """``OpsColumns.equal`` on a coded column (compared by its categories) is the row-by-row comparison the
    DataFrame of the same table gets."""
    from types import SimpleNamespace

    from hloscope.advice._common import OpsColumns

    report = hloscope.analyze(fixtures_dir / "hlo" / "tpu-v5e_collectives.hlo.txt", chip="tpu-v5e")
    table = report.table("ops")
    assert isinstance(table, ColumnTable) and column_codes(table, "category") is not None
    coded, framed = OpsColumns(report), OpsColumns(SimpleNamespace(ops=report.ops))
    assert isinstance(framed.table, pd.DataFrame)
    hits = 0
    for name, value in [("category", "collective"), ("category", "matmul"), ("bound", "memory"),
                        ("bound", "communication"), ("opcode", "fusion"), ("category", "no such"), ("bound", 3)]:
        got, want = coded.equal(name, value), framed.equal(name, value)
        assert got.dtype == bool and np.array_equal(got, want), (name, value)
        hits += int(want.sum())
    assert hits > 0
