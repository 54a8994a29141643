"""The exception of every trace reader (XSpace, Chrome trace, profile directories)."""

from __future__ import annotations

import os

from hloscope.errors import HloscopeError


class TraceError(HloscopeError):
    """A profile that hloscope cannot read: missing, empty, corrupted, or not an XSpace.

    The message is one line: ``<path>: <what is wrong>; <what was expected / how to fix it>``.

    Attributes:
        path: the offending file or directory (``str``; ``"<bytes>"`` for in-memory input).
        msg: the message without the path prefix.
    """

    def __init__(self, path: str | os.PathLike[str], msg: str) -> None:
        self.path = os.fspath(path)
        self.msg = msg
        super().__init__(f"{self.path}: {msg}")

    def __reduce__(self):  # picklable despite the two-argument constructor
        return (type(self), (self.path, self.msg))
