"""The one exception family: every error hloscope raises about its input derives from ``HloscopeError``.

``HloscopeError`` subclasses ``ValueError`` (bad input is a bad value), so ``except ValueError`` written
against older releases still catches everything. Each subclass names one kind of input; each message names
the file and, where the format has one, the line or byte offset, then what was expected:

================================  ====================================================================
class                             input (raised by)
================================  ====================================================================
``HloParseError``                 HLO text, dump dirs (``hloscope.parsers``; ``path:line:col: ...``)
``TraceError``                    XSpace ``*.xplane.pb``, Chrome traces, profile dirs (``path: ...``)
``ChipSpecError``                 a chip file or chip dict (``hloscope.roofline.chips``)
``UnknownChipError``              a chip id or device kind not in the table (lists the close matches)
``ChipRequiredError``             an HLO input without ``chip=`` (no device kind to infer one from)
``ReportSchemaError``             a report or diff JSON document (``hloscope.load_report``)
``BaselineError``                 a baseline file of the pytest plugin (never overwritten)
``ComparisonError``               two reports that cannot be compared (other chip, no common module)
``ConfigError``                   settings of the CLI or the pytest plugin, a compile target
================================  ====================================================================

The CLI maps every ``HloscopeError`` to exit status 2 with its one-line message on stderr (``hloscope.cli``).
The classes live where they are raised and are re-exported here and from ``hloscope``.
"""

from __future__ import annotations

import os


class HloscopeError(ValueError):
    """Root of every error hloscope raises about its input (see the module table)."""


class ChipRequiredError(HloscopeError):
    """No chip was given and none could be inferred from the input (HLO text names no device)."""


class ReportSchemaError(HloscopeError):
    """A JSON document that is not the report (or diff) hloscope wrote: names the file and what was found.

    Attributes:
        path: the file (``"<dict>"`` for an in-memory document).
        reason: what is wrong, and what was expected.
    """

    def __init__(self, path: str | os.PathLike[str], reason: str) -> None:
        self.path = os.fspath(path)
        self.reason = reason
        super().__init__(f"{self.path}: {reason}")

    def __reduce__(self):  # picklable despite the two-argument constructor (xdist, Dask)
        return (type(self), (self.path, self.reason))


class ComparisonError(HloscopeError):
    """Two reports that cannot be compared: scored against different chips, or with no module in common."""


class ConfigError(HloscopeError):
    """A setting that cannot be honoured: a bad option value, or a compile target that cannot be built."""


def __getattr__(name: str):
    # The subclasses that live with their readers (the parser, the trace reader, the chip table, the baseline
    # files) load on first use, so ``import hloscope.errors`` stays free of those modules.
    where = {"HloParseError": "hloscope.parsers._errors", "TraceError": "hloscope.parsers._trace_error",
             "ChipSpecError": "hloscope.roofline.chips", "UnknownChipError": "hloscope.roofline.chips",
             "BaselineError": "hloscope.compare.baseline"}.get(name)
    if where is None:
        raise AttributeError(f"module 'hloscope.errors' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(where), name)
