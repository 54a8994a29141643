"""A DataFrame's columns read as values, without making a ``Series`` for each, and a DataFrame made from columns
without pandas inferring each column's dtype again (issue #16: the pytest plugin's small tables).

``df[name]`` builds a ``Series`` with its index and copy-on-write references: ~18 us in pandas 3.1, against
~1 us for the column's stored array. The analysis of a small program reads some 60 columns (the modules table's
totals, the overlap columns, the comparison with a baseline), so a test paid about a millisecond for them.

Both helpers read the stored array through ``DataFrame._get_column_array`` (pandas' own read-only accessor
since pandas 1.3; a private method, so each falls back to ``df[name]`` when it is absent or when ``name`` is
not one column: a duplicated label). What they return is a copy (a list, or an array made by ``np.asarray``
with a dtype, which copies where the stored dtype differs): the caller may change it without touching the
table. tests/test_columns.py holds them equal to the ``Series`` path on every column of real reports.

``frame_from_columns`` is ``pd.DataFrame(columns)`` for the plain columns the tables are made of (numpy arrays,
lists of strings, floats or ints): it makes each column's array with the dtype pandas would infer and hands
them to ``DataFrame._from_arrays`` (pandas' own constructor from finished arrays, private; a frame of any other
column, or a pandas without it, is made by ``pd.DataFrame``). tests/test_columns.py holds the two equal, dtypes
and column index included.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache, lru_cache, partial
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

__all__ = ["column_array", "column_list", "frame_from_columns"]


def _stored(df: pd.DataFrame, name: str) -> Any:
    """The stored array (ndarray or ExtensionArray) of column ``name``, or None where only ``df[name]`` will do."""
    get = getattr(df, "_get_column_array", None)
    if get is None:
        return None
    loc = df.columns.get_loc(name)  # (KeyError for a missing column, as df[name])
    return get(loc) if type(loc) is int else None


def column_list(df: pd.DataFrame, name: str) -> list:
    """``df[name].tolist()``: the column's values as Python objects, in row order.

    Raises:
        KeyError: no column ``name``.
    """
    values = _stored(df, name)
    return df[name].tolist() if values is None else values.tolist()


def column_array(df: pd.DataFrame, name: str, dtype: Any = float) -> np.ndarray:
    """``df[name].to_numpy(dtype=dtype)``: the column as a numpy array of ``dtype`` (a copy where the stored
    array is not of that dtype; else the stored array itself, marked read-only here so that no caller writes
    into the table).

    Raises:
        KeyError: no column ``name``. ValueError, TypeError: values that do not convert to ``dtype``.
    """
    import numpy as np

    values = _stored(df, name)
    if values is None:
        return df[name].to_numpy(dtype=dtype)
    out = np.asarray(values, dtype=dtype)
    if out is values:  # (the stored array itself: a read-only view of it)
        out = out.view()
        out.flags.writeable = False
    return out


def frame_from_columns(columns: dict[str, Any], order: Any = None) -> pd.DataFrame:
    """``pd.DataFrame(columns, columns=list(columns))``, with its rows taken in ``order`` (an integer array of row
    positions, or None for the rows as they are): the same frame, dtypes, blocks and indexes, made ~2x faster on a
    small table (the CPU mlp's ops table: 0.24 -> 0.11 ms) and without ``DataFrame.take`` after.

    Each column is made as pandas stores what it infers for it: a one-dimensional float64, int64 or bool array as
    it is (copied into its block), a list of exact ``str`` as the string array pandas makes of one (without
    checking each value again where those arrays hold Python strings; a ``str`` subclass's values kept, as pandas
    keeps them), a list of exact ``float`` as a float64 array, a list of exact ``int`` within int64 as an int64
    array. A frame with any other column (a list of mixed types, None, numpy scalars...), no rows, or columns of
    different lengths, is made by ``pd.DataFrame`` itself (then taken in ``order``). The column index is made
    once per set of names (``_column_index``).

    Raises:
        what ``pd.DataFrame`` raises for such columns (columns of different lengths: ValueError).
    """
    import pandas as pd

    values = list(columns.values())
    count = len(values[0]) if values else 0
    arrays = _plain_arrays(values, count) if count and hasattr(pd.DataFrame, "_from_arrays") else None
    if arrays is None:
        df = pd.DataFrame(columns, columns=list(columns))
        if order is not None:
            df = df.take(order)
            df.index = pd.RangeIndex(len(df))
        return df
    string_array = _string_array()
    out = []
    for kind, array in arrays:
        if order is not None:
            array = array[order]
        out.append(string_array(array) if kind == "str" else array)
    return pd.DataFrame._from_arrays(out, columns=_column_index(tuple(columns)).copy(),
                                     index=pd.RangeIndex(len(out[0])), verify_integrity=False)


@lru_cache(maxsize=32)
def _column_index(names: tuple) -> pd.Index:
    """The column index of a table with these column names, made once (``pd.Index`` of 37 strings infers their
    dtype: ~0.18 ms on a cold cache, a tenth of a small program's analysis). Each frame gets its own ``copy``
    of it (an Index's values are immutable, its ``name`` is not)."""
    import pandas as pd

    return pd.Index(list(names))


#: The numpy dtypes a column array is kept in as it is (pandas' own for a float, int or bool column).
_ARRAY_KINDS = frozenset({"float64", "int64", "bool"})


def _plain_arrays(values: list, count: int) -> list[tuple[str, Any]] | None:
    """(kind, numpy array) of each column -- ``"str"`` for an object array of exact strings, ``""`` for a finished
    array --, or None where a column is not plain (``frame_from_columns``)."""
    import numpy as np

    out = []
    for column in values:
        if len(column) != count:
            return None
        if type(column) is np.ndarray:
            if column.ndim != 1 or column.dtype.name not in _ARRAY_KINDS:
                return None
            out.append(("", column))
            continue
        if type(column) is not list:
            return None
        if _all_strings(column):
            out.append(("str", np.fromiter(column, dtype=object, count=count)))
            continue
        types = set(map(type, column))
        if types == _FLOAT:
            out.append(("", np.array(column, dtype=np.float64)))
        elif types == _INT:
            try:
                out.append(("", np.array(column, dtype=np.int64)))
            except OverflowError:  # (pandas keeps larger ints as uint64 or objects)
                return None
        else:
            return None
    return out


def _all_strings(column: list) -> bool:
    """Whether every value of ``column`` is a ``str`` (subclasses too, as pandas' string inference takes them, and
    keeps them): ``str.join`` checks it in C (~10x faster than the set of the values' types on a large table)."""
    try:
        "".join(column)
    except TypeError:
        return False
    return True


_INT = frozenset({int})
_FLOAT = frozenset({float})


@cache
def _string_array() -> Callable[[Any], Any]:
    """The maker of the array pandas stores a column of strings in, from an object array of them (pandas'
    inferred dtype for such a column: ``str`` in pandas 3, stored as Python strings or by pyarrow; ``object``
    before)."""
    import pandas as pd

    dtype = pd.DataFrame({"a": ["a"]}).dtypes.iloc[0]
    if dtype == object:
        return lambda array: array
    if isinstance(dtype, pd.StringDtype) and dtype.storage == "python" and hasattr(
            pd.arrays.StringArray, "_simple_new"):
        return partial(pd.arrays.StringArray._simple_new, dtype=dtype)
    return partial(pd.array, dtype=dtype)  # (pyarrow's strings: made by pandas from the objects)
