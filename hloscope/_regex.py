"""Regular expressions compiled on first use.

A module-level ``re.compile`` runs at import, whether or not the pattern is ever used: ~0.1-2 ms a pattern
(``sre_compile`` is Python code), ~60 patterns in the modules a report imports, two thirds of them never used on the
C extensions' path (the line-by-line parser's, the TOML error locators', the chip-name readers'). ``LazyPattern``
keeps ``re.compile``'s arguments and compiles at the first attribute read, then keeps each attribute it was asked
for (``match``, ``findall``, ...) as its own, so later reads cost what a compiled pattern's do
(benchmarks/README.md, stop 44).
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["LazyPattern"]


class LazyPattern:
    """``re.compile(pattern, flags)`` on first use; reads as the compiled ``re.Pattern`` (``match``, ``search``,
    ``fullmatch``, ``findall``, ``finditer``, ``sub``, ``split``, ``groups``, ...). ``pattern`` is the source
    string without compiling. Raises ``re.error`` at the first use of a bad pattern (tests/test_first_use.py compiles
    every one of hloscope's)."""

    def __init__(self, pattern: str, flags: int = 0) -> None:
        self.pattern = pattern
        self._flags = flags

    def compiled(self) -> re.Pattern[str]:
        """The compiled pattern (``re``'s own cache makes a second call cheap)."""
        return re.compile(self.pattern, self._flags)

    def __getattr__(self, name: str) -> Any:  # (only for names not set on the instance yet)
        if name.startswith("__"):
            raise AttributeError(name)
        value = getattr(self.compiled(), name)
        setattr(self, name, value)
        return value

    def __repr__(self) -> str:
        return f"LazyPattern({self.pattern!r}, {self._flags!r})"
