"""The optional C extensions (``setup.py``: built at install when a C compiler is there): each function looked up
once, None when its extension was not built; and ``HLOSCOPE_PURE_PYTHON``, which makes hloscope use the Python
twin of every one (tests compare the two; each twin's module says which one is the specification)."""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable

#: ``HLOSCOPE_PURE_PYTHON`` is set (to anything but ``0``): use the Python twins even where C was built.
PURE_PYTHON = os.environ.get("HLOSCOPE_PURE_PYTHON", "") not in ("", "0")


#: The interface version each extension must declare (its ``ABI`` constant; none declared reads 0): raised, in
#: the C file and here together, when a function's arguments or results change, so that a build from an older
#: source is not called the new way (its functions read as missing).
ABI = {"hloscope.cost._cost_walk": 4, "hloscope.parsers._attribute_scan": 2}


def compiled(module: str, name: str) -> Callable | None:
    """The function ``name`` of the C extension ``module`` (``hloscope.parsers._block_scan``, ...), or None when
    the extension was not built -- or was built from an older source that lacks ``name`` or declares an older
    ``ABI`` (an editable install whose sources moved on since ``pip install -e .``): the Python twin runs
    instead."""
    try:
        found = importlib.import_module(module)
    except ImportError:
        return None
    if getattr(found, "ABI", 0) != ABI.get(module, 0):
        return None
    return getattr(found, name, None)
