"""Reading one ``*.xplane.pb``: the whole XSpace decoded (:func:`read_xspace`), or the file indexed without
decoding its events (:func:`open_xspace`); and the lines of either, as serialized bytes for the scanner.

An XSpace is what ``jax.profiler.trace(log_dir)`` writes to ``log_dir/plugins/profile/<run>/<host>.xplane.pb``;
schema ``tsl/profiler/protobuf/xplane.proto`` (message classes: :mod:`hloscope.parsers._xspace_schema`).
Every error is a one-line :class:`TraceError` naming the file and how to get a good one; a break of the
protobuf wire format is located by its byte offset (of the inflated bytes for ``*.xplane.pb.gz``). Compressed
files are inflated with a bound (``HLOSCOPE_MAX_INFLATED_BYTES``, ``hloscope.parsers._trace_dir.gunzip``).
"""

from __future__ import annotations

import functools
import mmap
import os
import re
import sys
from pathlib import Path
from typing import Any

from google.protobuf.message import DecodeError, Message

from hloscope._regex import LazyPattern
from hloscope.parsers import _xspace_schema as _schema
from hloscope.parsers._trace_dir import checked_path, gunzip, lookup
from hloscope.parsers._trace_error import TraceError
from hloscope.parsers._xspace_names import _RECAPTURE
from hloscope.parsers._xspace_wire import _Malformed, _py_skip, _py_varint, _scan_line, _scan_line_windows


#: Most planes per file, and lines per plane, that the index holds (each costs ~100 bytes of memory, and can
#: be encoded in 2 bytes): real profiles have a few planes and up to thousands of lines (one per thread or
#: stream); more means corrupted or hostile bytes.
_MAX_PLANES = 1 << 16
_MAX_LINES = 1 << 20
_DEVICE_NUMBER = LazyPattern(r"^/device:[A-Za-z_]+:(\d+)")

# --------------------------------------------------------------------------------------------------------
# Reading


def _profile_path(path: str | os.PathLike[str]) -> Path:
    """``path`` as a ``Path`` when it names an existing file; else the ``TraceError`` both readers raise."""
    p = checked_path(path)
    kind = lookup(p)
    if kind is None:
        raise TraceError(p, f"no such file; expected a *.xplane.pb profile; {_RECAPTURE}")
    if kind == "dir":
        raise TraceError(p, "is a directory, expected one *.xplane.pb file; use find_xplane_files(dir) to "
                         "locate the files of a run")
    return p


def read_xspace(path: str | os.PathLike[str]) -> Message:
    """Read and decode one ``*.xplane.pb`` file (plain or gzip-compressed).

    Besides protobuf decoding errors, the decoded message is sanity-checked: arbitrary bytes (a text file,
    another protobuf) can decode "successfully", so an XSpace with no planes, or with no plane named
    ``/host:...`` or ``/device:...`` (every profiler capture has one), is rejected too.

    Args:
        path: the ``.xplane.pb`` (or ``.xplane.pb.gz``) file.

    Returns:
        The decoded ``tensorflow.profiler.XSpace`` message (class from
        :mod:`hloscope.parsers._xspace_schema`; schema ``tsl/profiler/protobuf/xplane.proto``).

    Raises:
        TraceError: the file is missing, is a directory, is empty, does not decode as an XSpace (truncated
            or corrupted bytes), or decodes to something that is not a profile.
    """
    p = _profile_path(path)
    try:
        data = p.read_bytes()
    except OSError as e:
        raise TraceError(p, f"cannot be read ({e.strerror or e}); check the path and its permissions") from e
    return parse_xspace(data, source=p)


def parse_xspace(data: bytes, *, source: str | os.PathLike[str] = "<bytes>") -> Message:
    """Decode serialized XSpace bytes (gzip accepted) with the same checks as :func:`read_xspace`.

    Args:
        data: the file contents.
        source: path used in error messages.

    Returns:
        The decoded XSpace message.

    Raises:
        TraceError: empty, undecodable, or not an XSpace.
    """
    if not data:
        raise TraceError(source, f"file is empty (0 bytes), expected a serialized XSpace; {_RECAPTURE}")
    if data[:2] == b"\x1f\x8b":  # gzip magic: xplane.pb.gz as some tools store them
        data = gunzip(data, source)
    xspace = _schema.XSpace()
    try:
        xspace.ParseFromString(data)
    except (DecodeError, RuntimeError, ValueError) as e:
        detail = str(e).replace("\n", " ")
        _index_xspace(data, source, data, None)  # raises with the byte offset where the wire format breaks
        raise TraceError(
            source,
            f"not an XSpace protobuf (truncated or corrupted inside an event or stat at decode: {detail}); "
            f"{_RECAPTURE}",
        ) from None
    for plane in xspace.planes:
        try:
            _check_plane_name(plane.name, "a plane")
        except _Malformed as e:
            raise TraceError(source, f"not an XSpace profile: {e}; {_RECAPTURE}") from None
    if not xspace.planes:
        raise TraceError(
            source,
            f"decodes as a protobuf but holds no XPlanes ({len(data)} bytes) -- not an XSpace profile; "
            f"{_RECAPTURE}",
        )
    if not any(plane.name.startswith("/") for plane in xspace.planes):
        # Every profiler capture has a "/host:..." or "/device:..." plane. Foreign protobufs (an HloProto, say)
        # decode "successfully" with their strings landing in XPlane.name.
        shown = ", ".join(repr(p.name[:40]) for p in list(xspace.planes)[:3])
        raise TraceError(
            source,
            f"decodes as a protobuf but has no /host: or /device: plane (plane names: {shown}) -- not an "
            f"XSpace profile (random or foreign bytes); {_RECAPTURE}",
        )
    return xspace


class XSpaceIndex:
    """An ``*.xplane.pb`` indexed without decoding its events (from :func:`open_xspace`).

    Each plane's metadata is decoded (name, ``event_metadata``, ``stat_metadata``, plane ``stats``: what
    :func:`hlo_protos` reads); its lines are only located. :func:`op_events` and :func:`step_events` accept an
    index in place of a decoded XSpace and return the same tables, reading and decoding one line at a time,
    so memory stays near the largest line plus the results -- a decoded XSpace takes ~7x the file size.

    Attributes:
        path: the file (``str``).
        planes: one ``XPlane`` message per plane, holding everything but its lines.
        hostnames: ``XSpace.hostnames``.
    """

    def __init__(self, path: str, planes: list, lines: list[list[tuple[int, int, str | None]]],
                 hostnames: list[str], data: bytes | None, stamp: tuple[int, int] | None) -> None:
        self.path = path
        self.planes = planes
        self.hostnames = hostnames
        self._lines = lines  # per plane: (start, end, name if known before the events) of each line's bytes
        self._data = data  # the (decompressed) bytes, or None: lines are read from the file when needed
        self._stamp = stamp  # (size, mtime_ns) of the file when indexed
        self._steps: dict[int, list[tuple]] = {}  # host-plane step markers found by op_events, by plane

    def __repr__(self) -> str:
        return (f"XSpaceIndex({self.path!r}, planes={[p.name for p in self.planes]!r}, "
                f"lines={sum(map(len, self._lines))})")

    def _line_refs(self, plane: int) -> list[_LineRef]:
        return [_LineRef(name, functools.partial(self._read, a, b), (a, b), self._read_at)
                for a, b, name in self._lines[plane]]

    def _read_at(self, a: int, b: int) -> tuple[Any, int]:
        """Bytes ``[a, b)`` of the (decompressed) file: ``(buf, base)`` with them at ``buf[a - base:b - base]``."""
        if self._data is not None:
            return self._data, 0
        data, _, _ = self._read(a, b)
        return data, a

    def _read(self, a: int, b: int) -> tuple[bytes, int, int]:
        if self._data is not None:
            return self._data, a, b
        try:
            st = os.stat(self.path)
            if (st.st_size, st.st_mtime_ns) != self._stamp:
                raise TraceError(self.path, "the file changed since open_xspace indexed it; open it again")
            with open(self.path, "rb") as f:
                f.seek(a)
                data = f.read(b - a)
        except OSError as e:
            raise TraceError(self.path, f"cannot be read ({e.strerror or e}); check the path") from e
        if len(data) != b - a:
            raise TraceError(self.path, "the file shrank since open_xspace indexed it; open it again")
        return data, 0, len(data)


def open_xspace(path: str | os.PathLike[str]) -> XSpaceIndex:
    """Index one ``*.xplane.pb`` file (plain or gzip) for :func:`op_events`, :func:`step_events` and
    :func:`hlo_protos`, without decoding its events.

    The lean alternative to :func:`read_xspace` for large profiles: the file is walked once (field keys and
    lengths; memory-mapped, so untouched event bytes are never loaded), plane metadata is decoded, and
    lines are read back one at a time when the tables are built. Checks and error messages are those of
    :func:`read_xspace`, except that a corrupted event is only detected when its line is read.

    Args:
        path: the ``.xplane.pb`` (or ``.xplane.pb.gz``) file.

    Returns:
        An :class:`XSpaceIndex`.

    Raises:
        TraceError: the file is missing, is a directory, is empty, does not follow the XSpace wire format,
            or is not a profile.
    """
    p = _profile_path(path)
    try:
        st = p.stat()
        if st.st_size == 0:
            raise TraceError(p, f"file is empty (0 bytes), expected a serialized XSpace; {_RECAPTURE}")
        with open(p, "rb") as f:
            if f.read(2) == b"\x1f\x8b":
                f.seek(0)
                data = gunzip(f, p)
                if not data:
                    raise TraceError(p, f"file is empty (0 bytes), expected a serialized XSpace; {_RECAPTURE}")
                return _index_xspace(data, p, data, None)
            mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
            try:
                return _index_xspace(mm, p, None, (st.st_size, st.st_mtime_ns))
            finally:
                mm.close()
    except OSError as e:
        raise TraceError(p, f"cannot be read ({e.strerror or e}); check the path and its permissions") from e


def _index_xspace(buf, path: Path, data: bytes | None, stamp) -> XSpaceIndex:
    """Walk XSpace fields (planes = 1, hostnames = 4, ...) and each plane's fields (lines = 3)."""
    n = len(buf)
    planes = []
    lines = []
    rest: list[list[int]] = []  # byte ranges of the fields other than planes, contiguous ones merged
    try:
        p = 0
        while p < n:
            key, q = _py_varint(buf, p)
            f, wt = key >> 3, key & 7
            if f == 0:
                raise _Malformed(f"field number 0 at byte {p:,} (no protobuf message has one)")
            if wt == 2:
                ln, r = _py_varint(buf, q)
                end = r + ln
                if end > n:
                    raise _Malformed(f"field {f} at byte {p:,} runs past the end of the file")
                if f == 1:
                    if len(planes) >= _MAX_PLANES:
                        raise _Malformed(f"more than {_MAX_PLANES:,} planes (at byte {p:,}); a profile has a few")
                    plane, plane_lines = _index_plane(buf, r, end)
                    planes.append(plane)
                    lines.append(plane_lines)
                    p = end
                    continue
            else:
                end = _py_skip(buf, q, wt)
                if end > n:
                    raise _Malformed(f"field {f} at byte {p:,} runs past the end of the file")
            _add_range(rest, p, end)
            p = end
        size = sum(b - a for a, b in rest)
        try:
            header = _schema.XSpace.FromString(b"".join(buf[a:b] for a, b in rest))
        except DecodeError as e:
            raise _Malformed(f"the XSpace's fields other than planes ({size:,} bytes) do not decode ({e})") from None
    except (_Malformed, DecodeError, RuntimeError, ValueError) as e:
        if isinstance(e, TraceError):
            raise
        detail = str(e).replace("\n", " ")
        raise TraceError(
            path, f"not an XSpace protobuf (truncated or corrupted at decode: {detail}); {_RECAPTURE}"
        ) from None
    if not planes:
        raise TraceError(
            path,
            f"decodes as a protobuf but holds no XPlanes ({n} bytes) -- not an XSpace profile; {_RECAPTURE}",
        )
    if not any(plane.name.startswith("/") for plane in planes):
        shown = ", ".join(repr(pl.name[:40]) for pl in planes[:3])
        raise TraceError(
            path,
            f"decodes as a protobuf but has no /host: or /device: plane (plane names: {shown}) -- not an "
            f"XSpace profile (random or foreign bytes); {_RECAPTURE}",
        )
    return XSpaceIndex(os.fspath(path), planes, lines, list(header.hostnames), data, stamp)


def _index_plane(buf, a: int, b: int):
    """One plane: an ``XPlane`` of all fields but ``lines``, and (start, end, name hint) of each line."""
    runs: list[list[int]] = []  # byte ranges of the non-line fields, contiguous ones merged
    lines = []
    p = a
    while p < b:
        key, q = _py_varint(buf, p)
        f, wt = key >> 3, key & 7
        if f == 0:
            raise _Malformed(f"field number 0 at byte {p:,} of the plane at bytes {a:,}-{b:,}")
        if wt == 2:
            ln, r = _py_varint(buf, q)
            end = r + ln
        else:
            end = r = _py_skip(buf, q, wt)
        if end > b:
            raise _Malformed(f"field {f} at byte {p:,} runs past the end of its plane (bytes {a:,}-{b:,})")
        if f == 3 and wt == 2:
            if len(lines) >= _MAX_LINES:
                raise _Malformed(f"more than {_MAX_LINES:,} lines in the plane at bytes {a:,}-{b:,}; a plane "
                                 "has one per thread or stream")
            lines.append((r, end, _line_name_hint(buf, r, end)))
        else:
            _add_range(runs, p, end)
        p = end
    try:
        plane = _schema.XPlane.FromString(b"".join(buf[s:e] for s, e in runs))
    except DecodeError as e:
        raise _Malformed(f"the plane at bytes {a:,}-{b:,} does not decode ({e})") from None
    _check_plane_name(plane.name, f"the plane at bytes {a:,}-{b:,}")
    return plane, lines


def _add_range(ranges: list[list[int]], a: int, b: int) -> None:
    """Append the byte range ``[a, b)`` to ``ranges``, merged into the last one when they touch."""
    if ranges and ranges[-1][1] == a:
        ranges[-1][1] = b
    else:
        ranges.append([a, b])


def _check_plane_name(name: str, where: str) -> None:
    """A plane named ``/device:<KIND>:<n>`` must have ``n`` < 2**31 (device ordinals are 32-bit)."""
    m = _DEVICE_NUMBER.match(name)
    if m and (len(m.group(1)) > 10 or int(m.group(1)) > 0x7FFFFFFF):
        raise _Malformed(f"{where} is named {name[:60]!r}: a device number beyond 2**31 - 1")


def _line_name_hint(buf, a: int, b: int) -> str | None:
    """A line's name from the fields before its first event (None if an event comes first)."""
    name = ""
    p = a
    while p < b:
        key, q = _py_varint(buf, p)
        f, wt = key >> 3, key & 7
        if f == 4:
            return name if name else None  # set before the events, or maybe after them
        if wt == 2:
            n, q = _py_varint(buf, q)
            if f == 2:
                name = bytes(buf[q : q + n]).decode("utf-8", "replace")
            q += n
        else:
            q = _py_skip(buf, q, wt)
        p = q
    return name


_LIBC_TRIM = None


def _release_freed_memory() -> None:
    """Hand the C heap's free pages back to the system (glibc ``malloc_trim(0)``; nothing elsewhere).

    Reading a large profile allocates and frees many mid-sized numpy temporaries (per chunk of events, per line;
    some from the scanning thread's own malloc arena); the freed memory stays in the process (the RSS) unless
    trimmed: ~0.5 GB for a 1 GB file. Called between reading stages; takes milliseconds.
    """
    global _LIBC_TRIM
    if _LIBC_TRIM is None:
        _LIBC_TRIM = False
        if sys.platform.startswith("linux"):
            try:
                import ctypes

                libc = ctypes.CDLL(None)  # the process's own symbols: glibc's when it is the C library
                if hasattr(libc, "malloc_trim"):
                    libc.malloc_trim.argtypes = [ctypes.c_size_t]
                    libc.malloc_trim.restype = ctypes.c_int
                    _LIBC_TRIM = libc.malloc_trim
            except OSError:
                pass
    if _LIBC_TRIM:
        _LIBC_TRIM(0)


# --------------------------------------------------------------------------------------------------------
# Sources of lines: a decoded XSpace message, or an XSpaceIndex over the file


class _LineRef:
    """One line of a plane: its name if known without scanning, a way to get its serialized bytes, and where
    they lie in the file (``span``: byte range, None for a decoded message's line)."""

    __slots__ = ("name", "_fetch", "span", "read_at")

    def __init__(self, name: str | None, fetch, span: tuple[int, int] | None = None, read_at=None) -> None:
        self.name = name  # None: not known before the line is scanned
        self._fetch = fetch
        self.span = span
        self.read_at = read_at  # (a, b) -> (buf, base): any byte range of the source, for lines read in windows

    def bytes(self) -> tuple[Any, int, int]:
        return self._fetch()


def _message_line(line) -> _LineRef:
    def fetch():
        raw = line.SerializeToString()
        return raw, 0, len(raw)

    return _LineRef(line.name, fetch)


def _plane_sources(xspace) -> list[tuple[Any, list[_LineRef]]]:
    """(plane without its lines -- name, stat_metadata, event_metadata --, its lines) for every plane."""
    if isinstance(xspace, XSpaceIndex):
        return [(plane, xspace._line_refs(i)) for i, plane in enumerate(xspace.planes)]
    return [(plane, [_message_line(line) for line in plane.lines]) for plane in xspace.planes]


#: Lines of at least this many bytes (with a known place in the file) are read and split in windows
#: (``_scan_line_windows``): same chunks, but the line is never in memory whole, nor split by upb whole.
_WINDOWED_MIN_BYTES = 32 << 20


def _scan_ref(ref: _LineRef, want, source: str):
    """:func:`_scan_line` of one line (chunks of decoded events), wire-format errors as :class:`TraceError`."""
    windowed = ref.read_at is not None and ref.span is not None and \
        ref.span[1] - ref.span[0] >= _WINDOWED_MIN_BYTES
    if windowed:
        scanned = _scan_line_windows(ref.read_at, ref.span[0], ref.span[1], want)
    else:
        buf, a, b = ref.bytes()
        scanned = _scan_line(buf, a, b, want)
    try:
        yield from scanned
    except _Malformed as e:
        where = f" in the line at bytes {ref.span[0]:,}-{ref.span[1]:,}" if ref.span else ""
        raise TraceError(source, f"corrupted event data{where} ({e}); {_RECAPTURE}") from None


#: Below this many bytes of lines, :func:`_scan_refs` scans in the calling thread (a thread costs more than it
#: saves on small profiles, and tests stay single-threaded).
_PREFETCH_MIN_BYTES = 16 << 20
#: Scanned chunks the background thread of :func:`_scan_refs` may hold ready ahead of the consumer (~5 MB each).
_PREFETCH_AHEAD = 2


def _scan_refs(refs: list[_LineRef], want, source: str):
    """:func:`_scan_ref` of several lines, in order: yields ``(ref, chunks)`` per line, ``chunks`` an iterator over
    the line's :class:`~hloscope.parsers._xspace_wire._ScannedLine` chunks (the consumer may stop it early, e.g.
    when the line turns out not to be wanted; the next line then comes as usual).

    On a large plane (lines of :data:`_PREFETCH_MIN_BYTES` or more, byte ranges known) the lines are read and
    scanned -- file read, upb split, numpy field decoding, most of which releases the GIL -- in one background
    thread, at most :data:`_PREFETCH_AHEAD` chunks ahead of the consumer, so that the consumer's per-event work
    (stat lookups, name interning, sorting) runs on another core. Memory: up to two lines' bytes at once (a
    second thread was measured: +150 MB and no faster, benchmarks/README.md). Interning stays in the consumer,
    in line order, so the tables are the same as a serial read; an error of a line (``TraceError``) is raised
    where the consumer reaches it, as in a serial read.
    """
    if len(refs) < 2 or sum((r.span[1] - r.span[0]) if r.span else 0 for r in refs) < _PREFETCH_MIN_BYTES:
        for ref in refs:
            yield ref, _scan_ref(ref, want, source)
        return
    import queue
    import threading

    from hloscope.parsers._xspace_wire import _line_split_class

    _line_split_class()  # built once here, not concurrently
    q: queue.Queue = queue.Queue(maxsize=_PREFETCH_AHEAD)
    stop = threading.Event()
    skip = [-1]  # lines up to this index were abandoned by the consumer: the producer stops scanning them

    def put(item) -> bool:
        while not stop.is_set():
            try:
                q.put(item, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def produce() -> None:
        for i, ref in enumerate(refs):
            try:
                for sl in _scan_ref(ref, want, source):
                    if i <= skip[0]:
                        break
                    if not put(("chunk", sl)):
                        return
                    del sl
            except BaseException as e:  # noqa: BLE001 -- handed to the consumer, raised there
                if not put(("error", e)):
                    return
            if not put(("end", None)):
                return

    worker = threading.Thread(target=produce, name="hloscope-xplane-scan", daemon=True)
    worker.start()
    try:
        for i, ref in enumerate(refs):
            ended = [False]  # the line's end was read by its chunk iterator

            def chunks(ended=ended):
                while True:
                    kind, payload = q.get()
                    if kind == "end":
                        ended[0] = True
                        return
                    if kind == "error":
                        raise payload  # (the producer still sends the line's end)
                    yield payload

            it = chunks()
            yield ref, it
            it.close()
            skip[0] = i
            while not ended[0]:  # what the consumer left of line i: dropped, up to the line's end
                ended[0] = q.get()[0] == "end"
    finally:
        stop.set()
        worker.join()
