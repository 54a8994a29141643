"""``json.dumps(doc, indent=1, allow_nan=False)``, the same text, several times faster on report documents.

Python's ``json`` uses its C encoder only without ``indent``; with it every value goes through the pure-Python
encoder (0.42 s for the 29 MB report of mixtral's 28,000 ops). Two faster paths print what it would print:

* Tables: a list of at least ``_TABLE_MIN_ROWS`` plain dicts that all hold the same string keys in the same
  order (a report's ``ops``), or a ``Rows`` (``Report.to_json`` hands its tables over as their columns, the
  dicts never made), are printed by columns. A column of plain scalars (exact ``str``, ``int``, ``float``,
  ``bool``, None, with at most one of the three numeric types: ``1``, ``1.0`` and ``True`` are equal but print
  differently) is printed through a cache of the text of each distinct value, its key included (mixtral's
  368,000 floats hold 437 distinct values, and ``float.__repr__`` was most of ``json``'s time); a string column
  of mostly distinct values by ``encode_basestring_ascii`` mapped over it. ``0.0 == -0.0``: a float column that
  holds a negative zero is printed value by value, as is any other column (lists and dicts -- a cache of the
  lists of strings --, subclasses, mixed numbers), through the general path. Anything raised on the way
  (NaN, a value JSON cannot hold, a circular reference) drops the table to the general path, which raises what
  ``json.dumps`` raises, in its order; below that point no table is tried again. Where the C extension was
  built, a table is printed by one call of ``_json_table.c`` instead (float columns read from their arrays;
  ``_emit_table`` is its twin, and prints any table it hands back).
* The general path: runs of scalar items are encoded by the C encoder with the item separator set to the newline
  and indentation that ``indent=1`` would print at that depth (``json.JSONEncoder(separators=...)``), and only
  the containers are walked in Python. Scalars are printed by the same C code either way (``float.__repr__``,
  ``int.__repr__``, ``encode_basestring_ascii``; keys that are not strings converted as ``json`` does), and
  anything else is handed to ``json.dumps`` itself, re-indented (its text holds no raw newline but those it
  printed). A container met again inside itself is ``json``'s ValueError.

tests/report/test_json_text.py holds it to ``json.dumps`` on fixture reports, random documents and tables.
"""

from __future__ import annotations

import json
import math
from array import array
from collections.abc import Callable
from functools import cache, partial
from itertools import compress
from json.encoder import encode_basestring_ascii
from operator import is_not, itemgetter
from typing import Any

from hloscope._columns import CodedStrings
from hloscope._compiled import PURE_PYTHON, compiled

_SCALAR = (str, int, float, type(None))  # (bool is an int)
#: The exact types a table column may hold to be printed through a cache of its distinct values.
_PLAIN = frozenset({str, int, float, bool, type(None)})
#: Equal values of two of these types print differently: one at most in a cached column.
_NUMBERS = frozenset({int, float, bool})
_FLOATS = frozenset({float, type(None)})
_STR = frozenset({str})
#: The empty text of the containers a column of them is printed for.
_EMPTY = {list: "[]", dict: "{}"}
#: Fewer rows than this are printed by the general path (the table path's cost is mostly per column).
_TABLE_MIN_ROWS = 8
_NEGATIVE_ZERO = array("d", [-0.0]).tobytes()
_not_none = partial(is_not, None)
#: In the markers of the containers being printed (``id``s, never negative): print no table by columns.
_GENERAL_ONLY = -1
_encoders: dict[int, Any] = {}


class Rows:
    """A list of dicts that all have the keys ``keys``, in that order, held as its columns: ``dumps_indent1``
    prints it as that list without the dicts being made. Not JSON to anything else.

    A column is a list, a one-dimensional float64 numpy array standing for the list of its values as Python
    floats with each NaN or infinite one as None (``listed``: what a report's float column is in JSON, converted
    only where the Python path prints it), or a ``_columns.CodedStrings`` standing for the list of
    ``categories[codes]`` (a report's column of repeated strings, printed from its few values)."""

    __slots__ = ("keys", "columns", "count")

    def __init__(self, keys: list[str], columns: list[Any], count: int) -> None:
        if len(keys) != len(columns) or any(len(c) != count for c in columns):
            raise ValueError("Rows: one column of `count` values per key")
        self.keys, self.columns, self.count = list(keys), columns, count

    def records(self) -> list[dict[str, Any]]:
        """The list of dicts."""
        if not self.keys:
            return [{} for _ in range(self.count)]
        return [dict(zip(self.keys, row)) for row in zip(*map(listed, self.columns))]


class Printed:
    """A value of a document printed ahead of the document (``printed_ahead``): ``dumps_indent1`` and
    ``pieces_indent1`` put its pieces where the value stands, when it stands at the indentation ``level`` it was
    printed for (else they print ``value`` there as usual)."""

    __slots__ = ("value", "level", "pieces")

    def __init__(self, value: Any, level: int, pieces: list[str | bytes]) -> None:
        self.value, self.level, self.pieces = value, level, pieces


def printed_ahead(value: Any, level: int) -> Any:
    """``value`` printed now, as ``pieces_indent1`` would print it where it stands at indentation ``level`` (a
    value of a top-level dict stands at level 1), for a document made later: a ``Printed``, or ``value`` itself
    where printing it raised (the document then raises where that value stands, in ``json.dumps``'s order)."""
    out = _WriterPieces()
    try:
        _emit(value, level, out, set())
    except Exception:  # noqa: BLE001 - raised again, in its place, when the document is printed
        return value
    return Printed(value, level, list(out))


def listed(column: Any) -> list[Any]:
    """A column of ``Rows`` as a list: a list as it is; a float64 array's values as Python floats, NaN and
    infinities as None."""
    if type(column) is list:
        return column
    if type(column) is CodedStrings:
        return column.tolist()
    import numpy as np

    values = column.tolist()
    for i in np.flatnonzero(~np.isfinite(column)).tolist():
        values[i] = None
    return values


def dumps_indent1(doc: Any) -> str:
    """``json.dumps(doc, indent=1, allow_nan=False)`` (with any ``Rows`` in ``doc`` as its ``records()``).

    Raises:
        ValueError: a float is NaN or infinite (as ``allow_nan=False``), or a container holds itself.
        TypeError: a value JSON cannot hold (as ``json.dumps``).
    """
    out: list[str] = []
    _emit(doc, 0, out, set())
    return "".join(out)


def pieces_indent1(doc: Any) -> list[str | bytes]:
    """``dumps_indent1(doc)`` in pieces, not joined, for a writer that writes them one by one: a table printed by
    ``_json_table.c`` is ASCII bytes (a large report's table text is tens of MB: joining it, or encoding it to
    write it, would copy it once more each). Raises as ``dumps_indent1``."""
    out = _WriterPieces()
    _emit(doc, 0, out, set())
    return out


class _WriterPieces(list):
    """The pieces ``pieces_indent1`` gathers: where ``_emit_table`` may put bytes."""

    __slots__ = ()


def _encoder(level: int):
    """The C encoder of scalars and flat containers whose items sit at indentation ``level + 1``."""
    enc = _encoders.get(level)
    if enc is None:
        enc = _encoders[level] = json.JSONEncoder(allow_nan=False, separators=(",\n" + " " * (level + 1), ": ")).encode
    return enc


def _emit(obj: Any, level: int, out: list[str], markers: set[int]) -> None:
    if isinstance(obj, _SCALAR):
        out.append(_encoder(level)(obj))
    elif isinstance(obj, dict):
        _emit_dict(obj, level, out, markers)
    elif isinstance(obj, (list, tuple)):
        _emit_list(obj, level, out, markers)
    elif type(obj) is Rows:
        _emit_rows(obj, level, out, markers)
    elif type(obj) is Printed:
        if obj.level != level:
            _emit(obj.value, level, out, markers)
        elif type(out) is _WriterPieces:
            out.extend(obj.pieces)
        else:  # (dumps_indent1 joins str: a table's bytes are ASCII)
            out.extend(p if type(p) is str else p.decode("ascii") for p in obj.pieces)
    else:  # (anything else: json.dumps's own answer, a TypeError for most)
        out.append(json.dumps(obj, indent=1, allow_nan=False).replace("\n", "\n" + " " * level))


def _enter(obj: Any, markers: set[int]) -> int:
    """``json``'s ``check_circular``: a container inside itself is a ValueError."""
    marker = id(obj)
    if marker in markers:
        raise ValueError("Circular reference detected")
    markers.add(marker)
    return marker


def _emit_dict(obj: dict, level: int, out: list[str], markers: set[int]) -> None:
    if not obj:
        out.append("{}")
        return
    pad = "\n" + " " * (level + 1)
    enc = _encoder(level)
    items = list(obj.items())
    nested = [i for i, (_, v) in enumerate(items) if not isinstance(v, _SCALAR)]
    if not nested:
        out.append("{" + pad + enc(obj)[1:-1] + "\n" + " " * level + "}")
        return
    marker = _enter(obj, markers)
    out.append("{")
    sep = ""
    start = 0
    for i in nested + [len(items)]:
        if i > start:  # a run of scalar items: one C encoding
            out.append(sep + pad + enc(dict(items[start:i]))[1:-1])
            sep = ","
        if i < len(items):
            key, value = items[i]
            out.append(sep + pad + enc(key if isinstance(key, str) else _key_text(key)) + ": ")
            _emit(value, level + 1, out, markers)
            sep = ","
        start = i + 1
    out.append("\n" + " " * level + "}")
    markers.discard(marker)


def _key_text(key: Any) -> str:
    """A dict key that is not a string as ``json`` turns it into one (the C encoder does the same for the keys of
    the scalar runs)."""
    if key is True:
        return "true"
    if key is False:
        return "false"
    if key is None:
        return "null"
    if isinstance(key, float):
        return json.JSONEncoder(allow_nan=False).encode(key)
    if isinstance(key, int):
        return int.__repr__(key)
    raise TypeError(f"keys must be str, int, float, bool or None, not {type(key).__name__}")


def _emit_list(obj: list | tuple, level: int, out: list[str], markers: set[int]) -> None:
    if not obj:
        out.append("[]")
        return
    if all(isinstance(v, _SCALAR) for v in obj):
        out.append("[\n" + " " * (level + 1) + _encoder(level)(list(obj))[1:-1] + "\n" + " " * level + "]")
        return
    marker = _enter(obj, markers)
    columns = _columns(obj) if len(obj) >= _TABLE_MIN_ROWS and _GENERAL_ONLY not in markers else None
    if columns is None:
        _emit_items(obj, level, out, markers)
    elif not _emit_table(*columns, level, out, markers):
        _emit_items_general_only(obj, level, out, markers)
    markers.discard(marker)


def _emit_items(obj: list | tuple, level: int, out: list[str], markers: set[int]) -> None:
    pad = "\n" + " " * (level + 1)
    out.append("[")
    for i, value in enumerate(obj):
        out.append(("," if i else "") + pad)
        _emit(value, level + 1, out, markers)
    out.append("\n" + " " * level + "]")


def _emit_items_general_only(obj: list | tuple, level: int, out: list[str], markers: set[int]) -> None:
    """``_emit_items`` where a table could not be printed by columns: by the general path down to the value that
    raises (with the exception ``json.dumps`` raises first), and no table inside tried again."""
    markers.add(_GENERAL_ONLY)
    _emit_items(obj, level, out, markers)
    markers.discard(_GENERAL_ONLY)


def _emit_rows(rows: Rows, level: int, out: list[str], markers: set[int]) -> None:
    if not rows.count:
        out.append("[]")
    elif not rows.keys or not all(type(k) is str for k in rows.keys) or _GENERAL_ONLY in markers:
        _emit(rows.records(), level, out, markers)
    elif not _emit_table(rows.keys, rows.columns, level, out, markers):
        _emit_items_general_only(rows.records(), level, out, markers)


def _columns(rows: list | tuple) -> tuple[list[str], list[list[Any]]] | None:
    """The keys and columns of a list of plain dicts that all have the same string keys in the same order, or
    None."""
    if set(map(type, rows)) != {dict}:
        return None
    keys = list(rows[0])
    if not keys or not all(type(k) is str for k in keys) or not all(map(keys.__eq__, map(list, rows))):
        return None
    return keys, [list(map(itemgetter(key), rows)) for key in keys]


def _emit_table(keys: list[str], columns: list[Any], level: int, out: list[str], markers: set[int]) -> bool:
    """The rows of ``columns`` (at least one, ``keys`` strings; lists or float64 arrays as in ``Rows``) printed by
    columns, or False with nothing printed where printing a value raised. In C where it was built
    (``_json_table.c``, which leaves any value but plain scalars and lists of strings to this path)."""
    table_text = _c_table_text()
    if table_text is not None:
        text = table_text([encode_basestring_ascii(key) + ": " for key in keys], list(map(_c_column, columns)),
                          level, type(out) is _WriterPieces)
        if text is not None:
            out.append(text)
            return True
    columns = list(map(listed, columns))
    pad1 = "\n" + " " * (level + 1)
    pad2 = "\n" + " " * (level + 2)
    cell_markers = set(markers)  # (left as it is where a cell raises half-way)
    try:
        texts = [_column_texts(encode_basestring_ascii(key) + ": ", column, level + 2, cell_markers)
                 for key, column in zip(keys, columns)]
    except Exception:  # (NaN, a value JSON cannot hold, a cycle...: the general path raises as json.dumps)
        return False
    out += ("[", pad1, "{", pad2,
            (pad1 + "}," + pad1 + "{" + pad2).join(map(("," + pad2).join, zip(*texts))),
            pad1, "}\n", " " * level, "]")
    return True


def _c_column(column: Any) -> Any:
    """A column of ``Rows`` as ``table_text`` takes it: a ``CodedStrings`` as ``(codes, categories)``, its codes an
    int64 array, its categories a list; any other as it is."""
    if type(column) is not CodedStrings:
        return column
    import numpy as np

    return np.ascontiguousarray(column.codes, dtype=np.int64), column.categories.tolist()


@cache
def _c_table_text() -> Callable | None:
    """``table_text`` of ``_json_table.c``: ``_emit_table``'s text in C (None where a cell is left to Python), or
    None when the extension was not built or ``HLOSCOPE_PURE_PYTHON`` is set."""
    return None if PURE_PYTHON else compiled("hloscope.result._json_table", "table_text")


def _column_texts(key_text: str, column: list, level: int, markers: set[int]) -> list[str]:
    """``"key": value`` for each value of a table column whose values sit at indentation ``level``."""
    n = len(column)
    types = set(map(type, column))
    if types <= _PLAIN and len(types & _NUMBERS) <= 1:
        distinct = set(column) if len(types) > 1 or type(None) not in types else {None}
        if float not in types or (types <= _FLOATS and (0.0 not in distinct or not _has_negative_zero(column, types))):
            if len(distinct) == 1:
                return [key_text + _scalar_text(column[0])] * n
            if types == _STR and 2 * len(distinct) > n:
                return list(map(key_text.__add__, map(encode_basestring_ascii, column)))
            cache = {v: key_text + _scalar_text(v) for v in distinct}
            return list(map(cache.__getitem__, column))
    elif len(types) == 1 and types <= _EMPTY.keys():  # (a list or dict in each row, most of them empty)
        texts = [key_text + _EMPTY[type(column[0])]] * n
        seen: dict[tuple, str] = {}  # (lists of strings: the text of each distinct one)
        for i in compress(range(n), map(len, column)):
            v = column[i]
            if type(v) is list and set(map(type, v)) == _STR:
                text = seen.get(key := tuple(v))
                if text is None:
                    text = seen[key] = key_text + _value_text(v, level, markers)
                texts[i] = text
            else:
                texts[i] = key_text + _value_text(v, level, markers)
        return texts
    return [key_text + _value_text(v, level, markers) for v in column]


def _has_negative_zero(column: list, types: set[type]) -> bool:
    """Whether a column of floats (and None) holds ``-0.0``, which a cache keyed by value would print as ``0.0``."""
    data = array("d", column if types == {float} else filter(_not_none, column)).tobytes()
    step = len(_NEGATIVE_ZERO)
    at = data.find(_NEGATIVE_ZERO)
    while at >= 0:
        if at % step == 0:
            return True
        at = data.find(_NEGATIVE_ZERO, at + 1)
    return False


def _scalar_text(v: Any) -> str:
    """A value of an exact type of ``_PLAIN`` as the C encoder prints it."""
    if v is None:
        return "null"
    if v is True:
        return "true"
    if v is False:
        return "false"
    if type(v) is str:
        return encode_basestring_ascii(v)
    if type(v) is float:
        if not math.isfinite(v):
            raise ValueError(f"Out of range float values are not JSON compliant: {v!r}")
        return float.__repr__(v)
    return int.__repr__(v)


def _value_text(v: Any, level: int, markers: set[int]) -> str:
    """Any value at indentation ``level``, by the general path."""
    out: list[str] = []
    _emit(v, level, out, markers)
    return "".join(out)
