"""Numbers for people: SI prefixes and durations, shared by the terminal, HTML and diff renderers."""

from __future__ import annotations

import math


def si(value: float | None, unit: str) -> str:
    """``1.23 G<unit>``-style, 3 significant digits; ``-`` for None/NaN."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    for factor, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= factor:
            return f"{value / factor:.3g} {prefix}{unit}"
    return f"{value:.3g} {unit}"


def duration(seconds: float | None) -> str:
    """Seconds as ``s`` / ``ms`` / ``µs`` / ``ns``, 3 significant digits; ``-`` for None/NaN."""
    if seconds is None or (isinstance(seconds, float) and math.isnan(seconds)):
        return "-"
    for factor, unit in ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs")):
        if abs(seconds) >= factor:
            return f"{seconds / factor:.3g} {unit}"
    return f"{seconds * 1e9:.3g} ns"
