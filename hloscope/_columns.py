"""A DataFrame's columns read as values, without making a ``Series`` for each (issue #16: the pytest plugin's
small tables).

``df[name]`` builds a ``Series`` with its index and copy-on-write references: ~18 us in pandas 3.1, against
~1 us for the column's stored array. The analysis of a small program reads some 60 columns (the modules table's
totals, the overlap columns, the comparison with a baseline), so a test paid about a millisecond for them.

Both helpers read the stored array through ``DataFrame._get_column_array`` (pandas' own read-only accessor
since pandas 1.3; a private method, so each falls back to ``df[name]`` when it is absent or when ``name`` is
not one column: a duplicated label). What they return is a copy (a list, or an array made by ``np.asarray``
with a dtype, which copies where the stored dtype differs): the caller may change it without touching the
table. tests/test_columns.py holds them equal to the ``Series`` path on every column of real reports.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

__all__ = ["column_array", "column_list"]


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
