"""Numbers for people: the one formatter of quantities, durations and changes.

Every message and renderer of hloscope formats numbers here -- the terminal, HTML and diff renderers
(``hloscope.report``), the comparison engine's failure messages (``hloscope.compare``) and the pytest plugin's
assertions -- so ``3.13 µs`` or ``1.57 MB`` reads the same everywhere. Pure functions of numbers; imports
nothing from hloscope.

>>> quantity(3.126e-6, "s"), quantity(1.5e6, "B"), quantity(1.12e7, "FLOP"), quantity(float("nan"), "B")
('3.13 µs', '1.5 MB', '11.2 MFLOP', '-')
>>> change(2.0, 3.0), change(0, 1), percent(-0.25)
('+50.0%', 'new', '-25.0%')
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["quantity", "si", "duration", "change", "percent", "signed"]

_PREFIXES = ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))
_TIME = ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs"), (1e-9, "ns"))


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def quantity(value: Any, unit: str) -> str:
    """``value`` with an SI prefix and 3 significant digits: ``3.13 µs`` (unit ``"s"``: s, ms, µs, ns, ps),
    ``1.57 MB``, ``11.2 MFLOP``, ``2.5 k`` (no unit). ``-`` for None/NaN; ``0 s`` for a zero time; values that
    are not numbers as text."""
    if _missing(value):
        return "-"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        if hasattr(value, "item"):  # numpy scalar
            return quantity(value.item(), unit)
        return str(value)
    v = float(value)
    if math.isinf(v):
        return f"{'-' if v < 0 else ''}inf {unit}".rstrip()
    if unit == "s":
        if v == 0:
            return "0 s"
        for scale, name in _TIME:
            if abs(v) >= scale:
                return f"{v / scale:.3g} {name}"
        return f"{v / 1e-12:.3g} ps"
    for scale, prefix in _PREFIXES:
        if abs(v) >= scale:
            return f"{v / scale:.3g} {prefix}{unit}"
    return f"{v:.3g} {unit}".rstrip()


def si(value: Any, unit: str) -> str:
    """``quantity(value, unit)``: the name the renderers use."""
    return quantity(value, unit)


def duration(seconds: Any) -> str:
    """Seconds as ``s`` / ``ms`` / ``µs`` / ``ns`` / ``ps``: ``quantity(seconds, "s")``."""
    return quantity(seconds, "s")


def signed(value: Any, unit: str) -> str:
    """``quantity`` with an explicit sign for a positive value: ``+1.5 MB``; ``0`` for zero."""
    if _missing(value):
        return "-"
    if not value:
        return "0"
    return ("+" if value > 0 else "") + quantity(value, unit)


def percent(fraction: Any) -> str:
    """A relative change as ``+12.5%`` (one decimal; changes below 0.05% print as ``+0.0%``); ``-`` for
    None/NaN."""
    if _missing(fraction):
        return "-"
    f = float(fraction)
    if math.isinf(f):
        return "+inf%" if f > 0 else "-inf%"
    return f"{0.0 if abs(f) < 5e-4 else f:+.1%}"


def change(old: Any, new: Any) -> str:
    """The relative change from ``old`` to ``new``: ``+12.5%``; ``new`` when ``old`` is 0 (and ``new`` is
    not); ``""`` when either is not a number."""
    if isinstance(old, bool) or isinstance(new, bool) or not isinstance(old, (int, float)) \
            or not isinstance(new, (int, float)):
        return ""
    if _missing(old) or _missing(new):
        return "-"
    if old == 0:
        return "+0.0%" if new == 0 else "new"
    return percent((new - old) / old)


def parse_fraction(text: str | float, where: str) -> float:
    """A fraction: ``0.05`` or ``5%``. ``where`` names the setting's origin for the error.

    Raises:
        hloscope.errors.ConfigError: ``invalid value '5x' from <where>: expected a fraction such as 0.05 or a
            percentage such as 5%``; a negative value.
    """
    from hloscope.errors import ConfigError

    if isinstance(text, (int, float)) and not isinstance(text, bool):
        value = float(text)
    else:
        s = str(text).strip()
        try:
            value = float(s[:-1]) / 100 if s.endswith("%") else float(s)
        except ValueError:
            raise ConfigError(f"invalid value {text!r} from {where}: expected a fraction such as 0.05 or a "
                              f"percentage such as 5%") from None
    if not (0 <= value < 100) or value != value:
        raise ConfigError(f"invalid value {text!r} from {where}: must be >= 0 (0.05 means 5%)")
    return value
