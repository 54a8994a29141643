"""Decode a large JSON trace one event at a time, without holding the file's text or its parsed tree.

A Chrome trace (``*.trace.json.gz``) is one JSON object ``{"displayTimeUnit": ..., "traceEvents": [...]}``
(or a bare array of events) of up to hundreds of MB, most of it host events the reader drops. The text is
read in ``_CHUNK`` characters at a time and each array element is decoded by ``json.JSONDecoder.raw_decode``,
so memory grows with what the caller keeps, not with the file.

Public functions: :func:`open_text` (gzip or plain, by magic bytes) and :func:`trace_items` (the events, and
the top-level keys as :class:`TopKey`). Every error is a ``TraceError`` naming the file.
"""

from __future__ import annotations

import gzip
import io
import json
import zlib
from pathlib import Path
from typing import Any, Iterator, NamedTuple

from hloscope.parsers._trace_error import TraceError

__all__ = ["TopKey", "open_text", "trace_items"]

#: Characters read per chunk.
_CHUNK = 1 << 20
#: Longest single JSON value (one event) buffered while waiting for it to complete, in characters.
_MAX_VALUE = 64 << 20


class _Stream:
    """A text stream read in chunks, decoded one JSON value at a time (``json.JSONDecoder.raw_decode``)."""

    __slots__ = ("fh", "buf", "pos", "eof", "path", "decoder")

    def __init__(self, fh: io.TextIOBase, path: str) -> None:
        self.fh = fh
        self.buf = ""
        self.pos = 0
        self.eof = False
        self.path = path
        self.decoder = json.JSONDecoder()

    def _more(self) -> bool:
        if self.eof:
            return False
        chunk = _read(self.fh, self.path)
        if not chunk:
            self.eof = True
            return False
        if self.pos:
            self.buf = self.buf[self.pos:]
            self.pos = 0
        self.buf += chunk
        return True

    def peek(self) -> str:
        """The next non-blank character ("" at the end), not consumed."""
        while True:
            buf = self.buf
            n = len(buf)
            pos = self.pos
            while pos < n and buf[pos] in " \t\r\n":
                pos += 1
            self.pos = pos
            if pos < n:
                return buf[pos]
            if not self._more():
                return ""

    def expect(self, chars: str) -> str:
        """Consume the next non-blank character, which must be one of ``chars``."""
        ch = self.peek()
        if not ch or ch not in chars:
            raise TraceError(self.path, f"is not a JSON trace: expected {' or '.join(repr(c) for c in chars)} at "
                                        f"character {self.pos}, found {ch or 'end of file'!r}; "
                                        "expected a Chrome trace (*.trace.json.gz)")
        self.pos += 1
        return ch

    def value(self) -> Any:
        """Decode the next JSON value, reading more text while the value is incomplete."""
        self.peek()
        while True:
            try:
                value, end = self.decoder.raw_decode(self.buf, self.pos)
            except json.JSONDecodeError as e:
                # A value cut by the chunk boundary is incomplete: read more, up to a bound on one value's size
                # (a malformed file must not be buffered whole).
                if len(self.buf) - self.pos < _MAX_VALUE and self._more():
                    continue
                raise TraceError(self.path, f"is not valid JSON ({e.msg} near character {e.pos}); expected a "
                                            "complete Chrome trace (*.trace.json.gz), re-copy the file") from None
            # A number at the end of the buffer may continue in the next chunk.
            if end == len(self.buf) and not self.eof and isinstance(value, (int, float)):
                if self._more():
                    continue
            self.pos = end
            return value


def _read(fh: io.TextIOBase, path: str) -> str:
    try:
        return fh.read(_CHUNK)
    except (OSError, EOFError, zlib.error, UnicodeDecodeError) as e:
        raise TraceError(path, f"cannot be decompressed or decoded ({e}); expected a gzip-compressed JSON "
                               "Chrome trace (*.trace.json.gz)") from None


class TopKey(NamedTuple):
    """A top-level key of the trace object, yielded by :func:`trace_items` between the events."""

    name: str
    value: Any


def trace_items(fh: io.TextIOBase, path: str) -> Iterator[Any]:
    """The trace's events, decoded one at a time: the elements of the top-level array, or of the top-level
    object's ``traceEvents``.

    Each top-level key (``traceEvents`` itself, ``displayTimeUnit``, ``metadata``, ...) is yielded as a
    :class:`TopKey` (``traceEvents`` with value None, before its events). Events are yielded as decoded (any
    JSON value; the caller checks they are objects).

    Args:
        fh: the text, e.g. from :func:`open_text`.
        path: the file's name, for error messages.

    Raises:
        TraceError: the text is not JSON, is truncated, or is not an object or array at the top.
    """
    stream = _Stream(fh, path)
    first = stream.expect("{[")
    if first == "[":  # the Trace Event Format's bare "JSON Array Format"
        yield TopKey("traceEvents", None)
        yield from _array(stream)
        return
    if stream.peek() == "}":
        stream.pos += 1
        return
    while True:
        key = stream.value()
        if not isinstance(key, str):
            raise TraceError(stream.path, "is not a JSON object with string keys; expected a Chrome trace")
        stream.expect(":")
        if key == "traceEvents":
            stream.expect("[")
            yield TopKey(key, None)
            yield from _array(stream)
        else:
            yield TopKey(key, stream.value())
        if stream.expect(",}") == "}":
            return


def _array(stream: _Stream) -> Iterator[Any]:
    """The elements of an array whose '[' was read."""
    if stream.peek() == "]":
        stream.pos += 1
        return
    while True:
        yield stream.value()
        if stream.expect(",]") == "]":
            return


def open_text(path: Path) -> io.TextIOBase:
    """``path`` as UTF-8 text: gunzipped when it starts with the gzip magic bytes, else read as is. The
    caller closes it. Raises OSError."""
    with open(path, "rb") as fh:
        head = fh.read(2)
    if head == b"\x1f\x8b":
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8")
    return open(path, encoding="utf-8")  # noqa: SIM115 - closed by the caller
