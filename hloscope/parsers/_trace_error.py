"""The exception of every trace reader (XSpace, Chrome trace, profile directories)."""

from __future__ import annotations

import os

from hloscope.errors import HloscopeError, escaped


class TraceError(HloscopeError):
    """A profile that hloscope cannot read: missing, empty, corrupted, or not an XSpace.

    The message is one line: ``<path>: <what is wrong>; <what was expected / how to fix it>``, with every
    control character of the path and of the names it quotes (a hostile file, host or run name: ``\\x1b[2J``,
    a line break, a NUL) shown escaped (``hloscope.errors.escaped``), never sent to the terminal as is.

    Attributes:
        path: the offending file or directory (``str``, as given; ``"<bytes>"`` for in-memory input).
        msg: the message without the path prefix (as given).
    """

    def __init__(self, path: str | os.PathLike[str], msg: str) -> None:
        self.path = os.fsdecode(path) if isinstance(path, bytes) else os.fspath(path)
        self.msg = msg
        super().__init__(escaped(f"{self.path}: {msg}"))

    def __reduce__(self):  # picklable despite the two-argument constructor
        return (type(self), (self.path, self.msg))
