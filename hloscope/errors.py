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
``ModuleChoiceError``             ``module=`` / ``--module`` naming no module of a dump dir, or several
``UnreadablePathError``           an HLO file or dump dir the system will not read: permission denied, a
                                  directory where a file is expected, an I/O error (``path: ...``)
``MissingPathError``              an HLO path that names nothing, or a broken symbolic link (also a
                                  ``FileNotFoundError``, as ``open`` raises)
================================  ====================================================================

The CLI maps every ``HloscopeError`` to exit status 2 with its one-line message on stderr (``hloscope.cli``),
and a ``FileNotFoundError`` (``MissingPathError`` among them) to exit status 3. Profile paths the system will
not read raise ``TraceError`` instead (it is about a profile).
The classes live where they are raised (the two path errors, raised by several readers, here) and are
re-exported here and from ``hloscope`` (but for the two path errors and ``ModuleChoiceError``, which
``hloscope.analysis`` defines: importable from here).

Messages show input paths and names through :func:`escaped`: a control character in a hostile file name
(``\\x1b[2J``, a line break, a NUL) is shown escaped, never sent to the terminal.
"""

from __future__ import annotations

import errno
import os


def escaped(text: str) -> str:
    """``text`` with every character ``str.isprintable`` refuses shown as ``repr`` shows it: ASCII control
    characters (``\\x00``-``\\x1f``, ``\\x7f``; ``\\n``, ``\\t``), so also the ESC that starts an ANSI
    escape sequence (``\\x1b[31m``), C1 controls (``\\x9b``), Unicode format and separator characters
    (``\\u202e``, ``\\u2028``) and lone surrogates (``\\udcff``, an undecodable byte of a file name, which
    stderr could not even encode). Printable text, non-ASCII letters included, is unchanged; the result is one
    printable line, and escaping it again changes nothing."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


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
        super().__init__(escaped(f"{self.path}: {reason}"))

    def __reduce__(self):  # picklable despite the two-argument constructor (xdist, Dask)
        return (type(self), (self.path, self.reason))


class ComparisonError(HloscopeError):
    """Two reports that cannot be compared: scored against different chips, or with no module in common."""


class ConfigError(HloscopeError):
    """A setting that cannot be honoured: a bad option value, or a compile target that cannot be built."""


class UnreadablePathError(HloscopeError):
    """An input path the system will not read: permission denied, a directory where a file is expected (or a
    file where a directory is), a loop of symbolic links, an I/O error. Raised for HLO files and XLA dump dirs
    (``hloscope.parse_hlo``, ``hloscope.analyze``); profile readers raise ``TraceError``.

    The message is one line: ``<path>: <what is wrong>; <how to fix it>``, the path escaped (:func:`escaped`).

    Attributes:
        path: the path (``str``, as given).
        reason: what is wrong, and what to do.
    """

    def __init__(self, path: str | os.PathLike[str] | bytes, reason: str) -> None:
        self.path = os.fsdecode(path) if isinstance(path, bytes) else os.fspath(path)
        self.reason = reason
        super().__init__(str(self))

    def __str__(self) -> str:  # (before OSError's in the method order of MissingPathError)
        return escaped(f"{self.path}: {self.reason}")

    def __reduce__(self):  # picklable despite the two-argument constructor (xdist, Dask)
        return (type(self), (self.path, self.reason))

    @classmethod
    def from_os_error(cls, path: str | os.PathLike[str], err: OSError) -> UnreadablePathError:
        """The error for ``err``, raised while reading ``path``: a ``MissingPathError`` for ``ENOENT`` (a
        broken symbolic link among them), else an ``UnreadablePathError``; it names the file ``err`` names when
        that is another (a module file in a dump dir), else ``path``."""
        where = err.filename if isinstance(err.filename, (str, bytes)) and err.filename else path
        why = err.strerror or type(err).__name__
        if isinstance(err, FileNotFoundError):
            return MissingPathError(where, "no such file or directory (a broken symbolic link, or removed while it "
                                           "was read)")
        if isinstance(err, IsADirectoryError):
            return UnreadablePathError(where, f"is a directory ({why}); expected an HLO text file, or an XLA dump "
                                              "directory holding *after_optimizations.txt files")
        if isinstance(err, NotADirectoryError):
            return UnreadablePathError(where, f"a part of the path is not a directory ({why})")
        if isinstance(err, PermissionError):
            return UnreadablePathError(where, f"cannot be read ({why}); check its permissions and those of the "
                                              "directories above it")
        return UnreadablePathError(where, f"cannot be read ({why}); check the path")


class MissingPathError(UnreadablePathError, FileNotFoundError):
    """An input path that names nothing, or a symbolic link to nothing: an ``UnreadablePathError`` that is also
    the ``FileNotFoundError`` ``open`` raises (``errno`` ``ENOENT``), so ``except FileNotFoundError`` still
    catches it and the CLI exits 3, as for any path not found."""

    def __init__(self, path: str | os.PathLike[str] | bytes, reason: str) -> None:
        super().__init__(path, reason)
        self.errno, self.strerror, self.filename = errno.ENOENT, reason, self.path


def __getattr__(name: str):
    # The subclasses that live with their readers (the parser, the trace reader, the chip table, the baseline
    # files, the dump-dir module choice of ``analyze``) load on first use, so ``import hloscope.errors`` stays
    # free of those modules.
    where = {"HloParseError": "hloscope.parsers._errors", "TraceError": "hloscope.parsers._trace_error",
             "ChipSpecError": "hloscope.roofline.chips", "UnknownChipError": "hloscope.roofline.chips",
             "BaselineError": "hloscope.compare.baseline", "ModuleChoiceError": "hloscope.analysis"}.get(name)
    if where is None:
        raise AttributeError(f"module 'hloscope.errors' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(where), name)
