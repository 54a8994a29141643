"""``_json_table.table_text`` (C) prints what its Python twin ``_json_text._emit_table`` prints, and hands back
(None) exactly what it leaves to Python; float64 columns of ``Rows`` print as their values with NaN and
infinities as null. The expected texts come from ``json.dumps(..., indent=1)`` of the same rows as dicts."""

from __future__ import annotations

import json
import math
import random

import numpy as np
import pytest

from hloscope.result import _json_text
from hloscope.result._json_text import Rows, dumps_indent1, listed

table_text = pytest.importorskip("hloscope.result._json_table").table_text


def _keys(keys):
    return [json.dumps(k) + ": " for k in keys]


def _expected(keys, columns, level=0):
    """The rows as dicts, printed by ``json.dumps`` at ``level`` (its text re-indented as a nested list is)."""
    records = [dict(zip(keys, row)) for row in zip(*map(listed, columns))]
    return json.dumps(records, indent=1, allow_nan=False).replace("\n", "\n" + " " * level)


STRINGS = ["", "a", 'q"uote', "back\\slash", "new\nline", "ctl\x01\x1f\x7f", "ünï", "tab\t\r\b\f", "🙂 astral",
           "x" * 80, "{]", "\u2028"]
FLOATS = [0.0, -0.0, 1e-300, 1.5, -2.25e17, 1e16, 123456.789, 5e-324, 1.7976931348623157e308, 0.1 + 0.2]


def _cell(rng: random.Random):
    kind = rng.randrange(8)
    if kind == 0:
        return rng.choice(STRINGS)
    if kind == 1:
        return rng.randint(-10**20, 10**20)
    if kind == 2:
        return rng.choice(FLOATS)
    if kind == 3:
        return rng.choice([True, False])
    if kind == 4:
        return None
    if kind == 5:
        return rng.random()
    if kind == 6:
        return [rng.choice(STRINGS) for _ in range(rng.randrange(3))]
    return rng.choice(STRINGS) + str(rng.randrange(10))  # (a new object each time: no cache hit by address)


@pytest.mark.parametrize("level", [0, 1, 3])
def test_random_tables_print_as_json_dumps(level):
    rng = random.Random(1625 + level)
    for _ in range(300):
        keys = [rng.choice(["k", "key", 'q"', "é", "", "a b", "🙂"]) + str(i) for i in range(rng.randrange(1, 6))]
        count = rng.randrange(1, 12)
        columns = [[_cell(rng) for _ in range(count)] for _ in keys]
        assert table_text(_keys(keys), columns, level) == _expected(keys, columns, level)


def test_many_rows_print_as_json_dumps_with_the_caches_full():
    """More distinct floats and strings than the 4,096-entry caches hold: colliding entries are replaced."""
    rng = random.Random(7)
    n = 20_000
    columns = [[rng.random() * 10 ** rng.randrange(-5, 20) for _ in range(n)],
               [f"op.{i % 9000}" for i in range(n)],
               [rng.choice(FLOATS) for _ in range(n)]]
    keys = ["x", "name", "y"]
    assert table_text(_keys(keys), columns, 1) == _expected(keys, columns, 1)


def test_ints_at_the_edges_of_64_bits_print_as_int_repr():
    """Ints that fit in 64 bits are printed by the table's own digit loop, others by ``int.__repr__``."""
    ints = [0, -1, 7, 10, -10, 2**63 - 1, -2**63, 2**63, -2**63 - 1, 2**64, 10**30, -10**30, 123456789012345678]
    assert table_text(_keys(["n"]), [ints], 1) == _expected(["n"], [ints], 1)


def test_float64_columns_print_their_values_with_nan_as_null():
    values = np.array([1.0, math.nan, -0.0, math.inf, -math.inf, 2.5e-310, 1e300], dtype=np.float64)
    columns = [values, ["a", "b", "c", "d", "e", "f", "g"]]
    text = table_text(_keys(["v", "s"]), columns, 0)
    assert text == _expected(["v", "s"], columns)
    assert json.loads(text)[1] == {"v": None, "s": "b"}
    assert json.loads(text)[2]["v"] == 0.0 and text.count("-0.0") == 1


@pytest.mark.parametrize("column", [
    [1.0, math.nan],  # a NaN float object: Python raises json's ValueError
    [1.0, math.inf],
    [1, object()],  # a value JSON cannot hold: Python raises json's TypeError
    [np.float64(1.5), 2.0],  # a float subclass: the Python path prints it
    ["a", np.str_("b")],  # a str subclass
    [{"a": 1}, {}],  # a dict
    [["a", 1], []],  # a list of something else than strings
    [("a",), ()],  # a tuple
    np.array([1.0, 2.0], dtype=np.float32),  # not float64
    np.array([1.0, 2.0, 3.0, 4.0])[::2],  # not contiguous
    np.array([[1.0], [2.0]]),  # two dimensions
    (1.0, 2.0),  # neither a list nor a buffer
])
def test_values_it_does_not_print_are_left_to_python(column):
    assert table_text(_keys(["k", "other"]), [column, ["x", "y"]], 0) is None


def test_columns_of_other_lengths_or_keys_that_are_not_ascii_are_left_to_python():
    assert table_text(_keys(["a", "b"]), [[1, 2], [1]], 0) is None
    assert table_text(_keys(["a", "b"]), [np.zeros(3), [1, 2]], 0) is None
    assert table_text(['"\u00e9": '], [[1]], 0) is None
    assert table_text([], [], 0) is None
    assert table_text(_keys(["a"]), [[]], 0) is None
    with pytest.raises(TypeError):
        table_text(_keys(["a"]), ([1],), 0)


@pytest.mark.parametrize("first", [True, False])
def test_coded_columns_print_as_the_list_of_their_values(first):
    """A coded column ``(codes, values)`` prints as ``[values[c] for c in codes]`` -- first among the columns (the
    rows are counted from its codes) or not -- its values any the printer takes (strings, lists of strings)."""
    rng = random.Random(11)
    values = [rng.choice(STRINGS) + str(i) for i in range(7)] + [["a", "b\n"], []]
    codes = np.array([rng.randrange(len(values)) for _ in range(500)], dtype=np.int64)
    listed_values = [values[c] for c in codes.tolist()]
    other = [rng.random() for _ in range(500)]
    keys = ["coded", "x"] if first else ["x", "coded"]
    coded, plain = (codes, values), [listed_values, other]
    columns = [coded, other] if first else [other, coded]
    text = table_text(_keys(keys), columns, 1)
    assert text is not None
    assert text == _expected(keys, [listed_values, other] if first else [other, listed_values], 1)
    assert plain[0] == [json.loads(text)[i]["coded"] for i in range(500)]


@pytest.mark.parametrize("column", [
    (np.array([0, 2]), ["a", "b"]),  # a code past its values
    (np.array([0, -1]), ["a", "b"]),  # a negative code
    (np.array([0, 1], dtype=np.int32), ["a", "b"]),  # codes not of 64 bits
    (np.array([0, 1, 1]), ["a", "b"]),  # another length
    (np.array([0, 1]), ("a", "b")),  # values not a list
    (np.array([0, 1]), ["a", "b"], 0),  # a tuple of three
    (np.array([0, 1]), [1.0, math.nan]),  # a value the printer leaves to Python
])
def test_coded_columns_it_does_not_print_are_left_to_python(column):
    assert table_text(_keys(["k", "other"]), [column, ["x", "y"]], 0) is None


def test_rows_of_coded_strings_print_in_c_and_in_python(monkeypatch):
    """A ``CodedStrings`` column of ``Rows`` (a report's repeated strings) prints as its values, by the C printer
    (handed its codes and values: no list made) and by the Python path alike."""
    from hloscope._columns import CodedStrings, object_array

    categories = object_array(["fusion", "dot", 'q"'])
    codes = np.array([2, 0, 0, 1, 2, 1, 0], dtype=np.intp)
    rows = Rows(["opcode", "n"], [CodedStrings(codes, categories), list(range(7))], 7)
    expected = json.dumps({"ops": [{"opcode": categories[c], "n": i} for i, c in enumerate(codes.tolist())]},
                          indent=1)
    calls = []
    c_text = _json_text._c_table_text()
    if c_text is not None:
        monkeypatch.setattr(_json_text, "_c_table_text", lambda: lambda *a: calls.append(c_text(*a)) or calls[-1])
    assert dumps_indent1({"ops": rows}) == expected
    assert all(text is not None for text in calls)  # (the C printer printed the table, if built)
    monkeypatch.setattr(_json_text, "_c_table_text", lambda: None)
    assert dumps_indent1({"ops": rows}) == expected


def test_the_python_path_prints_the_same_tables(monkeypatch):
    """``dumps_indent1`` with the C printer and without it (its twin) on tables of every kind of column."""
    rng = random.Random(3)
    docs = []
    for _ in range(100):
        keys = [f"k{i}" for i in range(rng.randrange(1, 5))]
        count = rng.randrange(8, 20)
        columns = [np.array([rng.choice(FLOATS + [math.nan, math.inf]) for _ in range(count)])
                   if rng.random() < 0.3 else [_cell(rng) for _ in range(count)] for _ in keys]
        docs.append({"ops": Rows(keys, columns, count), "n": 1})
    with_c = [dumps_indent1(d) for d in docs]
    monkeypatch.setattr(_json_text, "_c_table_text", lambda: None)
    assert [dumps_indent1(d) for d in docs] == with_c
    assert with_c == [json.dumps({"ops": d["ops"].records(), "n": 1}, indent=1) for d in docs]


def test_pieces_join_to_the_text_with_tables_as_bytes(monkeypatch):
    from hloscope.result._json_text import pieces_indent1

    doc = {"ops": Rows(["a", "b"], [np.array([1.0, math.nan, 2.5]), ["x", "y\n", "z"]], 3), "rest": [1, "é"]}
    pieces = pieces_indent1(doc)
    assert any(type(p) is bytes for p in pieces) == (_json_text._c_table_text() is not None)  # (not in pure mode)
    assert b"".join(p if type(p) is bytes else p.encode() for p in pieces) == dumps_indent1(doc).encode()
    monkeypatch.setattr(_json_text, "_c_table_text", lambda: None)
    assert "".join(pieces_indent1(doc)) == dumps_indent1(doc) == json.dumps(
        {"ops": doc["ops"].records(), "rest": [1, "é"]}, indent=1)


def test_the_command_line_writes_what_to_json_prints(tmp_path, capsys):
    """``hloscope report --format json``: to stdout (a text stream without a binary buffer, here: the bytes are
    decoded) and to a file (bytes written to its buffer), the text of ``Report.to_json`` and a newline."""
    import hloscope
    from hloscope.cli import main

    path = "fixtures/hlo/tpu-v5e_transformer_scan_grad.hlo.txt"
    expected = hloscope.analyze(path, chip="tpu-v5e").to_json() + "\n"
    assert main(["report", path, "--chip", "tpu-v5e", "--format", "json"]) == 0
    assert capsys.readouterr().out == expected
    out = tmp_path / "r.json"
    assert main(["report", path, "--chip", "tpu-v5e", "--format", "json", "-o", str(out)]) == 0
    assert out.read_bytes() == expected.encode()
