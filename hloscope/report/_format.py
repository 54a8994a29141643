"""Numbers for people, as the renderers of ``hloscope.report`` name them: the one formatter is
``hloscope.units`` (shared with the comparison engine's messages and the pytest plugin)."""

from __future__ import annotations

from hloscope.units import duration, percent, quantity, si, signed

__all__ = ["duration", "percent", "quantity", "si", "signed"]
