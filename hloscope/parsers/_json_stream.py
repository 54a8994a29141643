"""Decode a large JSON trace one event at a time, without holding the file's text or its parsed tree.

A Chrome trace (``*.trace.json.gz``) is one JSON object ``{"displayTimeUnit": ..., "traceEvents": [...]}``
(or a bare array of events) of up to hundreds of MB, most of it host events the reader drops. The text is
read in ``_CHUNK`` characters at a time and each array element is decoded by ``json.JSONDecoder.raw_decode``,
so memory grows with what the caller keeps, not with the file.

Public functions: :func:`open_text` (gzip or plain, by magic bytes; gzip inflated through
``hloscope.parsers._trace_dir.open_gzip``, which stops past ``HLOSCOPE_MAX_INFLATED_BYTES``) and
:func:`trace_items` (the events, and the top-level keys as :class:`TopKey`).

Every error is a ``TraceError`` naming the file, the character offset in the (inflated) text and, inside
``traceEvents``, the event's index: text that is not JSON or is truncated, a value nested deeper than Python's
decoder allows (``RecursionError``), an integer of more than 4300 digits, one value longer than 64 Mi
characters, a ``traceEvents`` that is not an array.
"""

from __future__ import annotations

import io
import json
import zlib
from pathlib import Path
from typing import Any, Iterator, NamedTuple

from hloscope._regex import LazyPattern
from hloscope.parsers._trace_error import TraceError

__all__ = ["TopKey", "open_text", "trace_items"]

#: Characters read per chunk.
_CHUNK = 1 << 20
#: Longest single JSON value (one event) buffered while waiting for it to complete, in characters.
_MAX_VALUE = 64 << 20
_BLANK = LazyPattern(r"[ \t\r\n]*")


class _Stream:
    """A text stream read in chunks, decoded one JSON value at a time (``json.JSONDecoder.raw_decode``).

    Attributes:
        base: characters of the text dropped before ``buf`` (``base + pos`` is the offset in the whole text).
        event: index of the ``traceEvents`` element being decoded, None outside the array (for messages).
    """

    __slots__ = ("fh", "buf", "pos", "eof", "path", "decoder", "base", "event")

    def __init__(self, fh: io.TextIOBase, path: str) -> None:
        self.fh = fh
        self.buf = ""
        self.pos = 0
        self.eof = False
        self.path = path
        self.decoder = json.JSONDecoder()
        self.base = 0
        self.event: int | None = None

    def _more(self, size: int = 0) -> bool:
        """Append at least one more chunk (``size`` characters when larger) to the buffer; False at the end."""
        if self.eof:
            return False
        chunk = _read(self.fh, self.path)
        if not chunk:
            self.eof = True
            return False
        if size > len(chunk):
            parts, got = [chunk], len(chunk)
            while got < size:
                part = _read(self.fh, self.path)
                if not part:
                    self.eof = True
                    break
                parts.append(part)
                got += len(part)
            chunk = "".join(parts)
        if self.pos:
            self.base += self.pos
            self.buf = self.buf[self.pos:]
            self.pos = 0
        self.buf += chunk
        return True

    def where(self, pos: int | None = None) -> str:
        """``at character N`` (of the whole text) and, inside ``traceEvents``, ``(event K)``."""
        at = f"at character {self.base + (self.pos if pos is None else pos):,}"
        return at if self.event is None else f"{at} (event {self.event} of traceEvents)"

    def peek(self) -> str:
        """The next non-blank character ("" at the end), not consumed."""
        while True:
            buf = self.buf
            pos = self.pos = _BLANK.match(buf, self.pos).end()
            if pos < len(buf):
                return buf[pos]
            if not self._more():
                return ""

    def expect(self, chars: str, what: str = "") -> str:
        """Consume the next non-blank character, which must be one of ``chars`` (``what``: what it opens or
        closes, for the message)."""
        ch = self.peek()
        if not ch or ch not in chars:
            raise TraceError(self.path, f"is not a JSON trace: expected {' or '.join(repr(c) for c in chars)}"
                                        f"{what} {self.where()}, found {ch or 'end of file'!r}; "
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
                # A value cut by the chunk boundary is incomplete: read more (doubling what is buffered, so a
                # long value is decoded O(length) times in all), up to a bound on one value's size (a malformed
                # file must not be buffered whole).
                if len(self.buf) - self.pos < _MAX_VALUE and self._more(len(self.buf) - self.pos):
                    continue
                if len(self.buf) - self.pos >= _MAX_VALUE:
                    raise TraceError(self.path, f"is not valid JSON: a value {self.where()} is still incomplete "
                                                f"after {_MAX_VALUE:,} characters ({e.msg}); expected a complete "
                                                "Chrome trace (*.trace.json.gz), re-copy the file") from None
                raise TraceError(self.path, f"is not valid JSON ({e.msg} {self.where(e.pos)}); expected a "
                                            "complete Chrome trace (*.trace.json.gz), re-copy the file") from None
            except RecursionError:
                raise TraceError(self.path, f"holds a JSON value nested too deeply to decode {self.where()} "
                                            "(over ~1000 levels of arrays or objects); expected a Chrome trace, "
                                            "whose events nest a few levels") from None
            except ValueError as e:  # an integer of more than sys.get_int_max_str_digits() digits
                raise TraceError(self.path, f"is not a JSON trace hloscope can decode: {e} {self.where()}; "
                                            "expected a Chrome trace (*.trace.json.gz)") from None
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
                               "Chrome trace (*.trace.json.gz) in UTF-8") from None


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
        if stream.peek() != '"':
            stream.expect('"', " (a key of the top-level object)")
        key = stream.value()
        stream.expect(":")
        if key == "traceEvents":
            stream.expect("[", " (traceEvents must be an array of events)")
            yield TopKey(key, None)
            yield from _array(stream)
        else:
            yield TopKey(key, stream.value())
        if stream.expect(",}") == "}":
            return


def _array(stream: _Stream) -> Iterator[Any]:
    """The elements of the ``traceEvents`` array, whose '[' was read (``stream.event`` counts them)."""
    stream.event = 0
    if stream.peek() == "]":
        stream.pos += 1
        stream.event = None
        return
    while True:
        yield stream.value()
        if stream.expect(",]") == "]":
            stream.event = None
            return
        stream.event += 1


def open_text(path: Path) -> io.TextIOBase:
    """``path`` as UTF-8 text: gunzipped when it starts with the gzip magic bytes (reads past the inflation
    limit raise ``TraceError``, ``hloscope.parsers._trace_dir.open_gzip``), else read as is. The caller closes
    it. Raises OSError."""
    from hloscope.parsers._trace_dir import open_gzip

    with open(path, "rb") as fh:
        head = fh.read(2)
    if head == b"\x1f\x8b":
        return io.TextIOWrapper(open_gzip(path), encoding="utf-8")
    return open(path, encoding="utf-8")  # noqa: SIM115 - closed by the caller
