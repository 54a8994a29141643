"""Sets of time intervals on one device, in integer picoseconds: unions, coverage and gaps (numpy, vectorised).

A device runs ops on several streams at once (XLA:CPU's thunk executor on several threads, a GPU's compute and
collective streams), so "the device was busy" is the *union* of its op intervals, and "this collective was
hidden" is the part of its interval that the union of the device's other work covers. Every measure of
``hloscope.steps`` is one of the three functions below applied to such unions.

Intervals are half-open ``[start, end)``; empty ones (``end <= start``) contribute nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np


def union(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The union of intervals as sorted, disjoint, non-touching intervals.

    Args:
        starts, ends: int64 arrays of one length (any order).

    Returns:
        ``(starts, ends)`` of the union, sorted; intervals that overlap or touch are merged.
    """
    import numpy as np

    keep = ends > starts
    s, e = starts[keep], ends[keep]
    if s.size == 0:
        return s.astype(np.int64), e.astype(np.int64)
    order = np.argsort(s, kind="stable")
    s, e = s[order], e[order]
    reach = np.maximum.accumulate(e)  # the furthest end of everything started so far
    new = np.empty(s.size, bool)
    new[0] = True
    new[1:] = s[1:] > reach[:-1]  # starts after all earlier intervals ended: a new merged interval
    first = np.flatnonzero(new)
    last = np.append(first[1:], s.size) - 1
    return s[first].astype(np.int64), reach[last].astype(np.int64)


def covered(u_starts: np.ndarray, u_ends: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """How much of each window ``[lo[i], hi[i])`` a union covers.

    Args:
        u_starts, u_ends: a union as :func:`union` returns it.
        lo, hi: int64 arrays of windows (any order, may overlap each other).

    Returns:
        int64 array: the covered picoseconds of each window (0 for an empty window).
    """
    import numpy as np

    lo = np.asarray(lo, np.int64)
    hi = np.maximum(np.asarray(hi, np.int64), lo)
    if u_starts.size == 0:
        return np.zeros(lo.shape, np.int64)
    # Covered time before t: whole intervals ending at or before t, plus the part of the one holding t.
    cum = np.concatenate(([0], np.cumsum(u_ends - u_starts)))

    def before(t: np.ndarray) -> np.ndarray:
        k = np.searchsorted(u_starts, t, side="right")  # intervals starting at or before t
        inside = np.where(k > 0, np.minimum(t, u_ends[np.maximum(k - 1, 0)]) - u_starts[np.maximum(k - 1, 0)], 0)
        return cum[np.maximum(k - 1, 0)] * (k > 0) + np.maximum(inside, 0)

    return before(hi) - before(lo)


def gaps(u_starts: np.ndarray, u_ends: np.ndarray, lo: np.ndarray, hi: np.ndarray
         ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The parts of each window ``[lo[i], hi[i])`` a union leaves uncovered.

    The gaps of the union are ``(-inf, us[0]), (ue[0], us[1]), ..., (ue[-1], +inf)``; a window's idle pieces are
    the gap holding its start (clipped to the window) and every gap starting inside it (clipped at ``hi``).

    Args:
        u_starts, u_ends: a union as :func:`union` returns it.
        lo, hi: int64 arrays of windows in time order, not overlapping one another.

    Returns:
        ``(window, starts, ends)``: for every idle piece, the index of its window and its bounds (int64); leading
        and trailing pieces included, the pieces of one window in no particular order.
    """
    import numpy as np

    lo = np.asarray(lo, np.int64)
    hi = np.asarray(hi, np.int64)
    far = np.iinfo(np.int64).max
    gs = np.concatenate(([-far], u_ends)).astype(np.int64)
    ge = np.concatenate((u_starts, [far])).astype(np.int64)
    q = np.searchsorted(u_ends, lo, side="right")  # the gap lo falls in, when it falls in one
    lead = lo < ge[q]
    inner_s, inner_e = gs[1:], ge[1:]
    wi = np.searchsorted(lo, inner_s, side="right") - 1
    wc = np.maximum(wi, 0)
    ok = (wi >= 0) & (inner_s > lo[wc]) & (inner_s < hi[wc]) if len(lo) else np.zeros(len(inner_s), bool)
    win = np.concatenate((np.flatnonzero(lead), wi[ok])).astype(np.int64)
    g0 = np.concatenate((lo[lead], inner_s[ok]))
    g1 = np.concatenate((np.minimum(ge[q[lead]], hi[lead]), np.minimum(inner_e[ok], hi[wi[ok]])))
    keep = g1 > g0
    return win[keep], g0[keep], g1[keep]
