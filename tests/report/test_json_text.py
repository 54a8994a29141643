"""``result._json_text.dumps_indent1`` prints what ``json.dumps(doc, indent=1, allow_nan=False)`` prints: on the
report of every fixture, on random documents, and on the errors."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import pytest

from hloscope.result._json_text import dumps_indent1

ROOT = Path(__file__).resolve().parents[2]


def _reference(doc):
    return json.dumps(doc, indent=1, allow_nan=False)


@pytest.mark.parametrize("path", sorted((ROOT / "fixtures" / "hlo").glob("*.hlo.txt"))[:6]
                         + [ROOT / "fixtures" / "profile" / "cpu_train_step"], ids=lambda p: p.name)
def test_report_documents_print_as_json_dumps(path):
    import hloscope

    doc = hloscope.analyze(path, chip="h100").to_dict()
    assert dumps_indent1(doc) == _reference(doc)


def _random_value(rng: random.Random, depth: int):
    kind = rng.randrange(9 if depth < 4 else 6)
    if kind == 0:
        return rng.choice(["", "a", 'q"uote', "back\\slash", "new\nline", "ünï", "tab\t", "🙂", "x, y", "{]"])
    if kind == 1:
        return rng.randint(-10**20, 10**20)
    if kind == 2:
        return rng.choice([0.0, -0.0, 1e-300, 1.5, -2.25e17, 1e16, 123456.789, 5e-324])
    if kind == 3:
        return rng.choice([True, False])
    if kind == 4:
        return None
    if kind == 5:
        return rng.random()
    if kind == 6:
        return [_random_value(rng, depth + 1) for _ in range(rng.randrange(4))]
    if kind == 7:
        return tuple(_random_value(rng, depth + 1) for _ in range(rng.randrange(3)))
    keys = [rng.choice(["k", "key", 'q"', "é", "", "a b"]) + str(i) for i in range(rng.randrange(5))]
    return {k: _random_value(rng, depth + 1) for k in keys}


def test_random_documents_print_as_json_dumps():
    rng = random.Random(16)
    for _ in range(3000):
        doc = _random_value(rng, 0)
        assert dumps_indent1(doc) == _reference(doc), doc


def test_keys_that_are_not_strings_are_converted_as_json_does():
    doc = {"rows": [{1: "a", 2.5: [1, 2], None: {}, True: []}], "x": 1}
    assert dumps_indent1(doc) == _reference(doc)


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_nan_and_infinity_are_refused(bad):
    for doc in (bad, [1, bad], {"a": {"b": bad}}, {"a": [{"c": [bad]}]}):
        with pytest.raises(ValueError):
            _reference(doc)
        with pytest.raises(ValueError):
            dumps_indent1(doc)


def test_values_json_cannot_hold_are_a_type_error():
    with pytest.raises(TypeError):
        dumps_indent1({"a": [object()]})


# --- tables: a list of dicts with the same keys (or a ``Rows``), printed by columns --------------------------------

from hloscope.result import _json_text  # noqa: E402
from hloscope.result._json_text import Rows  # noqa: E402


def _rows(n: int = 12) -> list[dict]:
    """A table with a column of each kind the column printer tells apart."""
    return [{
        "name": f"op.{i}",  # mostly distinct strings
        "kind": ["fusion", "ünïcode \u2603", 'q"uote\\', "tab\t\nnl", "🙂"][i % 5],  # few distinct, escaped
        "flops": [0.0, 1.5, 4718592000.0, 1e16, 5e-324, 0.1 + 0.2][i % 6],
        "maybe_s": None if i % 3 else 2.5e-7 * i,  # floats and None
        "count": [0, 1, 10**20, -7, 2**63][i % 5],  # big ints
        "big": i % 2 == 0,  # bools
        "nothing": None,
        "same": "module",  # one distinct value
        "caveats": [] if i % 4 else ["peak-fallback", "x"][: 1 + i % 2],  # mostly empty lists of strings
        "extra": {} if i % 5 else {"a": [1, {"b": None}], "c": "d"},  # nested dicts
        "tail": i,
    } for i in range(n)]


def _table_printed_by_columns(rows) -> bool:
    columns = _json_text._columns(rows)
    return columns is not None and _json_text._emit_table(*columns, 0, [], set())


def test_a_table_is_printed_by_columns_as_json_dumps():
    for n in (_json_text._TABLE_MIN_ROWS, 12, 100):
        rows = _rows(n)
        assert _table_printed_by_columns(rows)
        for doc in (rows, {"ops": rows, "x": [rows, {"deeper": rows}]}, tuple(rows)):
            assert dumps_indent1(doc) == _reference(doc)


def test_a_short_list_of_dicts_is_printed_by_the_general_path():
    rows = _rows(_json_text._TABLE_MIN_ROWS - 1)
    assert dumps_indent1(rows) == _reference(rows)


@pytest.mark.parametrize("column", [
    [0.0, -0.0, 1.0] * 4,  # a negative zero: not through the cache (0.0 == -0.0)
    [None, -0.0, 0.0] * 4,
    [-0.0] * 12,
    [1, 1.0, True, 0, 0.0, False, None] * 2,  # equal values of other types print differently
    [1, True] * 6,
    ["a", 1, None, 2.5] * 3,
    [float("1e300"), 1e-300, -1.0] * 4,
    [[], [1, 2], ["a"], ["a"], ["a", "b"], [["x"]], [{}]] * 2,  # lists, not only of strings
    [{}, {"a": 1}, {"a": [1]}, {"b": {}}] * 3,
    [[], {}, (), ("t",)] * 3,  # containers of several types, tuples
    [(), ("a",), ("a", "b")] * 4,
    ["é", "\x00\x1f", "\u2028", "\ud83d", "🙂", ""] * 2,  # non-ASCII, control, lone surrogate
    [2 ** 200, -2 ** 70, 0] * 4,
])
def test_any_column_prints_as_json_dumps(column):
    rows = [{"k": 0, "col": v, "z": "z"} for v in column]
    assert _table_printed_by_columns(rows)
    assert dumps_indent1(rows) == _reference(rows)


class _Str(str):
    pass


class _Int(int):
    pass


class _Float(float):
    def __repr__(self):
        return "not what json prints"


def test_a_negative_zero_is_found_only_where_it_is():
    import struct

    straddling = struct.unpack("<d", b"\x80" + bytes(5) + b"\xf0\x3f")[0]  # (0.0 then it: -0.0's bytes, unaligned)
    assert not _json_text._has_negative_zero([0.0, straddling] * 3, {float})
    assert not _json_text._has_negative_zero([None, 0.0, straddling, None], {float, type(None)})
    assert _json_text._has_negative_zero([0.0, straddling, -0.0], {float})
    assert _json_text._has_negative_zero([None, -0.0], {float, type(None)})
    rows = [{"f": v} for v in [0.0, straddling] * 6]
    assert dumps_indent1(rows) == _reference(rows)


def test_subclasses_print_as_json_dumps():
    import enum

    class Level(enum.IntEnum):
        LOW = 1

    for column in ([_Str("a"), "a", _Str('q"')], [_Int(5), 5, True], [_Float(1.5), 1.5, _Float(-0.0)],
                   [Level.LOW, 1, 2]):
        rows = [{"col": v, "i": i} for i, v in enumerate(column * 4)]
        assert dumps_indent1(rows) == _reference(rows)


def test_rows_that_are_not_a_table_print_as_json_dumps():
    base = _rows(12)
    reordered = base[:5] + [dict(reversed(list(base[5].items())))] + base[6:]  # same keys, not the same order
    missing = base[:5] + [{k: v for k, v in base[5].items() if k != "flops"}] + base[6:]
    not_str_keys = [{1: "a", None: 2, 2.5: 3, True: 4} for _ in range(12)]
    subclass = base[:5] + [type("D", (dict,), {})(base[5])] + base[6:]
    mixed = base[:5] + [[1, 2], "x", None] + base[5:]
    empty = [{} for _ in range(12)]
    for rows in (reordered, missing, not_str_keys, subclass, mixed, empty):
        assert _json_text._columns(rows) is None
        assert dumps_indent1(rows) == _reference(rows)


def _raised(f, doc):
    try:
        f(doc)
    except Exception as e:  # noqa: BLE001
        return type(e)
    return None


@pytest.mark.parametrize("bad", [
    {2: {"flops": math.nan}},
    {2: {"flops": math.inf}, 9: {"name": object()}},  # ValueError first, in row order
    {2: {"tail": object()}, 9: {"flops": -math.inf}},  # TypeError first, in row order (not in column order)
    {3: {"caveats": ["a", math.nan]}},
    {4: {"extra": {"a": object()}}},
    {5: {"count": 10 ** 5000}},  # (more digits than int.__repr__ prints: ValueError)
])
def test_a_table_raises_what_json_dumps_raises(bad):
    rows = _rows(12)
    for i, changes in bad.items():
        rows[i] = dict(rows[i], **changes)
    expected = _raised(_reference, rows)
    assert expected in (ValueError, TypeError)
    assert _raised(dumps_indent1, rows) is expected
    assert _raised(dumps_indent1, {"a": [1, {"b": rows}]}) is expected
    assert _raised(dumps_indent1, Rows(list(rows[0]), [[r[k] for r in rows] for k in rows[0]], len(rows))) \
        is expected


def test_a_container_inside_itself_is_a_value_error():
    rows = _rows(12)
    rows[3] = dict(rows[3], extra=rows)
    loop: dict = {"a": 1}
    loop["self"] = loop
    cyclic = [1, 2]
    cyclic.append(cyclic)
    for doc in (rows, loop, cyclic, {"rows": [rows[3]] * 10}):
        with pytest.raises(ValueError):
            _reference(doc)
        with pytest.raises(ValueError):
            dumps_indent1(doc)
    shared = {"a": [1, 2]}
    doc = [{"x": shared, "y": shared} for _ in range(12)]  # (the same container twice is no cycle)
    assert dumps_indent1(doc) == _reference(doc)


def test_random_tables_print_as_json_dumps():
    rng = random.Random(7)
    for _ in range(300):
        n = rng.randrange(1, 20)
        kinds = [rng.randrange(4) for _ in range(rng.randrange(1, 6))]
        pool = [_random_value(rng, 3) for _ in range(3)]
        rows = []
        for _ in range(n):
            row = {}
            for j, kind in enumerate(kinds):
                if kind == 0:  # one type: few distinct values
                    row[f"c{j}"] = rng.choice([0.0, -0.0, 2.5, 1e-7])
                elif kind == 1:
                    row[f"c{j}"] = rng.choice(pool)
                elif kind == 2:
                    row[f"c{j}"] = _random_value(rng, 2)
                else:
                    row[f"c{j}"] = rng.choice([None, "x", "ÿ", rng.randint(-5, 5)])
            rows.append(row)
        doc = {"rows": rows}
        assert dumps_indent1(doc) == _reference(doc), doc


def test_rows_print_as_their_records():
    rows = _rows(30)
    keys = list(rows[0])
    table = Rows(keys, [[r[k] for r in rows] for k in keys], len(rows))
    assert table.records() == rows
    assert dumps_indent1({"ops": table}) == _reference({"ops": rows})
    short = Rows(keys, [[r[k] for r in rows[:2]] for k in keys], 2)  # (no minimum: columns whatever the count)
    assert dumps_indent1([short]) == _reference([rows[:2]])
    assert dumps_indent1(Rows(keys, [[] for _ in keys], 0)) == "[]"
    assert dumps_indent1(Rows([], [], 3)) == _reference([{}, {}, {}])
    odd_keys = Rows([1, "a"], [[1, 2], [3, 4]], 2)
    assert dumps_indent1(odd_keys) == _reference(odd_keys.records())
    with pytest.raises(ValueError):
        Rows(["a", "b"], [[1]], 1)


@pytest.mark.parametrize("path", sorted((ROOT / "fixtures" / "hlo").glob("*.hlo.txt"))[:6]
                         + [ROOT / "fixtures" / "profile" / "cpu_train_step"], ids=lambda p: p.name)
def test_report_to_json_prints_the_tables_from_their_columns(path):
    import hloscope

    report = hloscope.analyze(path, chip="h100")
    doc = report.to_dict()
    assert _table_printed_by_columns(doc["ops"])
    with_rows = report._document(tables_as_rows=True)
    assert isinstance(with_rows["ops"], Rows) and with_rows["ops"].records() == doc["ops"]
    assert report.to_json() == _reference(doc)


def test_a_value_printed_ahead_prints_as_in_its_place():
    from hloscope.result._json_text import Printed, pieces_indent1, printed_ahead

    table = Rows(["a", "b"], [[1.5] * 9, ["x"] * 9], 9)
    doc = {"n": 1, "ops": [{"k": [1, 2]}, 3], "table": table}
    expected = _reference({"n": 1, "ops": [{"k": [1, 2]}, 3], "table": table.records()})
    ahead = dict(doc, ops=printed_ahead(doc["ops"], 1), table=printed_ahead(table, 1))
    assert isinstance(ahead["table"], Printed) and isinstance(ahead["ops"], Printed)
    assert dumps_indent1(ahead) == expected
    assert "".join(p if isinstance(p, str) else p.decode("ascii") for p in pieces_indent1(ahead)) == expected
    # Printed for another indentation than where it ends up: printed again there.
    assert dumps_indent1({"outer": {"inner": printed_ahead(table, 1)}}) == _reference(
        {"outer": {"inner": table.records()}})


def test_a_value_that_cannot_be_printed_ahead_raises_in_its_place():
    from hloscope.result._json_text import printed_ahead

    bad = [math.nan]
    assert printed_ahead(bad, 1) is bad
    with pytest.raises(ValueError):
        dumps_indent1({"a": printed_ahead(bad, 1)})


def test_json_pieces_read_the_memory_after_printing_the_tables_ahead():
    import hloscope

    report = hloscope.analyze(ROOT / "fixtures" / "hlo" / "cpu_mlp_1dev.hlo.txt", chip="h100")
    expected = hloscope.analyze(ROOT / "fixtures" / "hlo" / "cpu_mlp_1dev.hlo.txt", chip="h100").to_json()
    seen = []
    pieces = report._json_pieces(lambda: seen.append(report._memory))
    assert seen == [None]  # (called once, before the footprints were computed)
    assert "".join(p if isinstance(p, str) else p.decode("ascii") for p in pieces) == expected
