"""The optional C extensions (``setup.py``: built at install when a C compiler is there): each function looked up
once, None when its extension was not built; and ``HLOSCOPE_PURE_PYTHON``, which makes hloscope use the Python
twin of every one (tests compare the two; each twin's module says which one is the specification)."""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable

#: ``HLOSCOPE_PURE_PYTHON`` is set (to anything but ``0``): use the Python twins even where C was built.
PURE_PYTHON = os.environ.get("HLOSCOPE_PURE_PYTHON", "") not in ("", "0")


def compiled(module: str, name: str) -> Callable | None:
    """The function ``name`` of the C extension ``module`` (``hloscope.parsers._block_scan``, ...), or None when
    the extension was not built -- or was built from an older source that lacks ``name`` (an editable install
    whose sources moved on since ``pip install -e .``): the Python twin runs instead."""
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError):
        return None
