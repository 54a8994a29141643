"""The protobuf wire-format scanner of XSpace lines: every event of a line decoded at once with numpy.

Reading events through the protobuf API costs a Python wrapper object per event and per stat (~4 us per
event on a CPU capture), which was nearly all of op_events' time. Instead every line is taken as its
serialized bytes (``SerializeToString`` of a decoded line, or the file's bytes via ``open_xspace``) and
decoded with numpy, a chunk of events at once: one vectorized step per field ("lockstep"), so the number
of numpy calls grows with the fields per event, not with the events. upb splits a line into its events
(``_split_line``: ``events`` read as ``repeated bytes``). Only the stats op_events and step_events need
(hlo_op, hlo_module, program_id, device_ordinal, correlation_id, step_num, group_id) are decoded; values
that are neither integers nor ``ref_value`` names (rare) go through a per-stat Python path with
``_stat_value``'s rules. Results are identical to the per-event loop this replaced (checked on the corpus,
the CPU captures and randomized XSpaces with every stat kind), ~6x faster on a 35 MB CPU capture.

Wire format (https://protobuf.dev/programming-guides/encoding/): a field is a varint key
``(field_number << 3) | wire_type`` then a varint (type 0), 8 bytes (type 1), a varint length and that many
bytes (type 2), or 4 bytes (type 5). Fields may come in any order and repeat; the last value of a singular
field (and of a oneof) wins -- both rules are kept here. A field whose wire type does not match the
schema is an unknown field to upb, and is skipped here too.

Entry points: :func:`_scan_line` (one serialized ``XLine`` -> :class:`_ScannedLine` chunks), its windowed form
:func:`_scan_line_windows` (a line of a file read a window at a time: the same chunks, for lines of hundreds of
MB, such as the host thread of a long GPU capture) and
:func:`_wire_stat_value` (one scanned stat -> its Python value). Wire errors raise :class:`_Malformed`, which
the callers turn into ``TraceError`` with the file's path, and so do times no profile holds (a line
``timestamp_ns`` beyond +-2**61 / 1000, an event ``offset_ps`` beyond +-2**61 or a ``duration_ps`` outside
[0, 2**61)): computed with, they would wrap around int64 into silently wrong numbers.
"""

from __future__ import annotations

import struct
import zlib
from typing import Any

from google.protobuf.message import DecodeError

from hloscope.parsers._xspace_names import _U64, _as_int64


class _Malformed(ValueError):
    """Bytes that break the protobuf wire format (callers turn it into :class:`TraceError`)."""


_EVENT_TAG = 0x22  # XLine.events: field 4, length-delimited
_MID_TAG = 0x08  # XStat.metadata_id / XEvent.metadata_id: field 1, varint


def _py_varint(buf, p: int) -> tuple[int, int]:
    """The varint at ``buf[p]``: (value as uint64, position after it)."""
    result = shift = 0
    while True:
        try:
            b = buf[p]
        except IndexError:
            raise _Malformed(f"truncated varint at byte {p}") from None
        p += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result & _U64, p
        shift += 7
        if shift > 63:
            raise _Malformed(f"varint longer than 10 bytes at byte {p}")


def _py_skip(buf, p: int, wire_type: int) -> int:
    """Position after the payload of a field of ``wire_type`` whose key ended at ``p``."""
    if wire_type == 0:
        return _py_varint(buf, p)[1]
    if wire_type == 2:
        n, p = _py_varint(buf, p)
        return p + n
    if wire_type == 1:
        return p + 8
    if wire_type == 5:
        return p + 4
    raise _Malformed(f"wire type {wire_type} at byte {p} (groups are not used by XSpace)")


def _np_varint(d, p):
    """Varints at positions ``p`` (int64 array, all >= 0) of the byte array ``d``: (uint64 values, positions
    after them)."""
    import numpy as np

    if p.size == 0:
        return np.zeros(0, np.uint64), p.copy()
    n = d.shape[0]
    if int(p.max()) >= n:
        raise _Malformed("a field runs past the end of the data")
    b = d[p]
    more = np.flatnonzero(b >= 0x80)
    if not more.size:  # all one byte
        return b.astype(np.uint64), p + 1
    val = (b & 0x7F).astype(np.uint64)
    after = p + 1
    shift = 7
    while more.size:
        if shift > 63:
            raise _Malformed("varint longer than 10 bytes")
        q = after[more]
        if int(q.max()) >= n:
            raise _Malformed("truncated varint")
        b = d[q]
        val[more] |= (b & 0x7F).astype(np.uint64) << np.uint64(shift)
        after[more] = q + 1
        more = more[b >= 0x80]
        shift += 7
    return val, after


def _np_fields(d, p, end):
    """One field of each message at ``p`` (all before ``end``), vectorized.

    Returns ``(field, wire_type, value, payload_start, next)``: ``value`` is the varint of wire types 0 and 2
    (the length for 2), ``payload_start`` where the value or bytes begin, ``next`` where the next field begins.
    """
    import numpy as np

    key, q = _np_varint(d, p)
    field = key >> np.uint64(3)
    wt = (key & np.uint64(7)).astype(np.int8)
    if ((wt == 3) | (wt == 4) | (wt > 5)).any():
        raise _Malformed("unsupported wire type (groups) in an event or stat")
    isvar = (wt == 0) | (wt == 2)
    if isvar.all():
        v, r = _np_varint(d, q)
    else:
        v = np.zeros(q.shape[0], np.uint64)
        r = q.copy()
        sel = np.flatnonzero(isvar)
        v[sel], r[sel] = _np_varint(d, q[sel])
    nxt = r.copy()
    ld = wt == 2
    if ld.any():
        if (v[ld] > np.uint64(1 << 62)).any():
            raise _Malformed("length-delimited field longer than the data")
        nxt[ld] += v[ld].astype(np.int64)
    nxt[wt == 1] += 8
    nxt[wt == 5] += 4
    if (nxt > end).any():
        raise _Malformed("a field runs past the end of its message")
    return field, wt, v, np.where(ld, r, q), nxt


def _walk_line(buf, a: int, b: int) -> tuple[str, int, list[int]]:
    """Split the serialized XLine ``buf[a:b]``: (name, timestamp_ns, byte positions of its event fields).

    A per-event Python loop (an event field is the key byte 0x22 and, under 128 bytes, a one-byte length);
    the fallback of :func:`_split_line`.
    """
    tags: list[int] = []
    add = tags.append
    name = ""
    ts = 0
    p = a
    try:
        while p < b:
            if buf[p] == _EVENT_TAG:
                n = buf[p + 1]
                if n < 0x80:
                    add(p)
                    p += 2 + n
                    continue
            key, q = _py_varint(buf, p)
            f, wt = key >> 3, key & 7
            if wt == 2:
                n, q = _py_varint(buf, q)
                if f == 4:
                    add(p)
                elif f == 2:
                    name = bytes(buf[q : q + n]).decode("utf-8", "replace")
                q += n
            elif wt == 0 and f == 3:
                v, q = _py_varint(buf, q)
                ts = _as_int64(v)
            else:
                q = _py_skip(buf, q, wt)
            p = q
    except IndexError:
        raise _Malformed(f"line truncated at byte {p}") from None
    if p != b:
        raise _Malformed(f"line field runs past the end of the line (byte {p} > {b})")
    return name, ts, tags


_LINE_SPLIT = None


def _line_split_class():
    """``XLine`` with ``events`` declared ``repeated bytes``: upb splits a line into its events in C."""
    global _LINE_SPLIT
    if _LINE_SPLIT is None:
        from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

        F = descriptor_pb2.FieldDescriptorProto
        fd = descriptor_pb2.FileDescriptorProto(
            name="hloscope/xline_split.proto", package="hloscope_private.xline_split", syntax="proto3"
        )
        m = fd.message_type.add(name="XLineSplit")
        m.field.add(name="name", number=2, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
        m.field.add(name="timestamp_ns", number=3, type=F.TYPE_INT64, label=F.LABEL_OPTIONAL)
        m.field.add(name="events", number=4, type=F.TYPE_BYTES, label=F.LABEL_REPEATED)
        pool = descriptor_pool.DescriptorPool()
        pool.Add(fd)
        _LINE_SPLIT = message_factory.GetMessageClass(pool.FindMessageTypeByName(
            "hloscope_private.xline_split.XLineSplit"))
    return _LINE_SPLIT


def _split_line(buf, a: int, b: int, d):
    """The events of the serialized XLine ``buf[a:b]`` (``d``: ``buf`` as a uint8 array): (name, timestamp_ns,
    payload starts, payload ends).

    upb splits the line (``events`` read as ``repeated bytes``: the lengths, in C); the positions follow from
    the lengths when the events are contiguous, which is verified byte for byte (every writer emits them
    so); otherwise, or if upb rejects the line, :func:`_walk_line` walks it in Python.
    """
    import numpy as np

    try:
        msg = _line_split_class().FromString(buf if (a == 0 and b == len(buf)) else memoryview(buf)[a:b])
    except (DecodeError, RuntimeError, ValueError):
        msg = None
    if msg is not None:
        events = msg.events
        n = len(events)
        lengths = np.fromiter(map(len, events), np.int64, count=n)
        del events
        if n == 0:
            return msg.name, msg.timestamp_ns, lengths, lengths
        p = a
        try:  # the fields before the first event (id, name, timestamp_ns)
            while p < b and buf[p] != _EVENT_TAG:
                key, q = _py_varint(buf, p)
                p = _py_skip(buf, q, key & 7)
        except (_Malformed, IndexError):
            p = b
        if p < b:
            # key byte + length varint
            head = 2 + (lengths >= 1 << 7) + (lengths >= 1 << 14) + (lengths >= 1 << 21) + (lengths >= 1 << 28)
            tagpos = np.empty(n, np.int64)
            tagpos[0] = p
            np.cumsum((head + lengths)[:-1], out=tagpos[1:])
            tagpos[1:] += p
            starts = tagpos + head
            ends = starts + lengths
            if int(ends[-1]) <= b and (d[tagpos] == _EVENT_TAG).all():
                v, after = _np_varint(d, tagpos + 1)
                if (v.view(np.int64) == lengths).all() and (after == starts).all():
                    return msg.name, msg.timestamp_ns, starts, ends
    name, ts, tags = _walk_line(buf, a, b)
    tagpos = np.array(tags, np.int64)
    lengths, starts = _np_varint(d, tagpos + 1)
    return name, ts, starts, starts + lengths.astype(np.int64)


class _ScannedLine:
    """The events of one line, decoded: numpy arrays, one entry per event (``ev_*``) or per wanted stat (``st_*``).

    ``st_ev`` indexes the events; stats are in their order within each event (so "last wins" can be applied).
    ``st_kind`` is the XStat value field number (2 double, 3 uint64, 4 int64, 5 str, 6 bytes, 7 ref,
    8 compressed str; 0: no value); ``st_val`` the varint value; ``st_vs`` / ``st_ve`` the value's bytes.
    """

    __slots__ = ("name", "timestamp_ns", "buf", "ev_mid", "ev_off", "ev_dur", "ev_skip", "st_ev", "st_mid",
                 "st_kind", "st_val", "st_vs", "st_ve")


_CHUNK = 1 << 15  # events decoded at a time: bounds the scanner's temporary arrays (~10 MB)
#: Bounds on event times (ps; 2**61 ps = 26.7 days) and line timestamps (ns), so that a start (line timestamp
#: x 1000 + offset) plus a duration stays within int64: beyond them the bytes are corrupted, not a profile.
_MAX_TIME_PS = 1 << 61
_MAX_TIME_NS = _MAX_TIME_PS // 1000


def _scan_line(buf, a: int, b: int, want, chunk: int = _CHUNK):
    """Decode the events of the serialized XLine ``buf[a:b]`` and their stats whose metadata id is in ``want``
    (sorted int64 array): yields a :class:`_ScannedLine` per chunk of at most ``chunk`` events, in order."""
    import numpy as np

    d = np.frombuffer(buf, np.uint8)
    name, timestamp_ns, starts, ends = _split_line(buf, a, b, d)
    if not -_MAX_TIME_NS < timestamp_ns < _MAX_TIME_NS:
        raise _Malformed(f"the line's timestamp_ns, {timestamp_ns}, is beyond +-2**61 ps; expected nanoseconds on "
                         "the trace's clock")
    for c in range(0, starts.shape[0], chunk):
        yield _scanned_chunk(buf, name, timestamp_ns, d, starts[c : c + chunk], ends[c : c + chunk], want, c, -a)


#: Bytes of a line read at a time by :func:`_scan_line_windows` to find its events (upb splits each window).
_WINDOW = 8 << 20


def _event_heads(lengths):
    """Bytes before each event's payload: the key byte and the length varint (minimal encoding)."""
    return 2 + (lengths >= 1 << 7) + (lengths >= 1 << 14) + (lengths >= 1 << 21) + (lengths >= 1 << 28)


def _line_fields(buf, p: int, end: int, name, ts, *, stop_at_event: bool):
    """Walk the XLine fields of ``buf[p:end]`` other than events: ``(name, timestamp_ns, position)``, the name
    and timestamp updated by the fields met (last wins, as upb), ``position`` where an event field begins
    (``stop_at_event``) or ``end``; None when an event is met without ``stop_at_event`` or a field runs past
    ``end``."""
    try:
        while p < end:
            if buf[p] == _EVENT_TAG:
                if stop_at_event:
                    return name, ts, p
                return None
            key, q = _py_varint(buf, p)
            f, wt = key >> 3, key & 7
            if wt == 2:
                n, r = _py_varint(buf, q)
                if f == 4:
                    if stop_at_event:
                        return name, ts, p
                    return None
                if f == 2 and r + n <= end:
                    name = bytes(buf[r : r + n]).decode("utf-8", "replace")
                q = r + n
            elif wt == 0 and f == 3:
                v, q = _py_varint(buf, q)
                ts = _as_int64(v)
            else:
                q = _py_skip(buf, q, wt)
            if q > end:
                return None
            p = q
    except (_Malformed, IndexError):
        return None
    return name, ts, end


def _line_layout(read, a: int, b: int, window: int):
    """The events of the XLine at ``[a, b)`` of a source read piecewise (``read(p, q)`` -> ``(buf, base)``, the
    bytes ``[p, q)`` at ``buf[p - base:q - base]``), one window of ``window`` bytes at a time: ``(name,
    timestamp_ns, position of the first event's key, event payload lengths)`` (uint32), or None when the line
    is not laid out as fields, then its events one after another, then fields (a line every writer emits) --
    or when a window holds no whole event: the caller then reads the line whole.

    Each window is split by upb (``events`` as ``repeated bytes``; a window that ends inside an event stops
    the parse there, the events before it kept) and every event is checked against the bytes -- its key byte,
    its length varint and where it ends -- so only events that really follow one another are taken.
    """
    import numpy as np

    buf, base = read(a, min(b, a + window))
    head = _line_fields(buf, a - base, min(b, a + window) - base, "", 0, stop_at_event=True)
    if head is None:
        return None
    name, ts, p = head
    p += base
    if p >= b:
        return None  # no event within the first window
    first = p
    split = _line_split_class()
    lengths = []
    while p < b:
        q = min(b, p + window)
        buf, base = read(p, q)
        d = np.frombuffer(buf, np.uint8)
        if d[p - base] != _EVENT_TAG:
            break  # the fields after the events
        msg = split()
        try:
            msg.MergeFromString(memoryview(buf)[p - base : q - base])
        except (DecodeError, RuntimeError, ValueError):
            pass  # a window that ends inside an event: the events before it were kept
        lens = np.fromiter(map(len, msg.events), np.int64, count=len(msg.events))
        del msg
        if not lens.size:
            return None
        heads = _event_heads(lens)
        tagpos = np.empty(lens.size, np.int64)
        tagpos[0] = p - base
        np.cumsum((heads + lens)[:-1], out=tagpos[1:])
        tagpos[1:] += p - base
        ends = tagpos + heads + lens
        ok = ends <= q - base
        ok[ok] &= d[tagpos[ok]] == _EVENT_TAG
        try:
            v, after = _np_varint(d, np.minimum(tagpos + 1, q - base - 1))
        except _Malformed:
            return None
        ok &= (v.view(np.int64) == lens) & (after == tagpos + heads)
        good = lens.size if ok.all() else int(np.argmin(ok))  # the events that follow one another, checked
        if not good:
            return None
        lengths.append(lens[:good].astype(np.uint32))
        p = int(ends[good - 1]) + base
        del d, buf
    if not lengths:
        return None
    if p < b:  # the fields after the events: no more events allowed
        if b - p > window:
            return None
        buf, base = read(p, b)
        tail = _line_fields(buf, p - base, b - base, name, ts, stop_at_event=False)
        if tail is None:
            return None
        name, ts, _ = tail
    return name, ts, first, np.concatenate(lengths)


def _scan_line_windows(read, a: int, b: int, want, chunk: int = _CHUNK, window: int = _WINDOW):
    """:func:`_scan_line` of the XLine at ``[a, b)`` of a source read piecewise (``read`` as for
    :func:`_line_layout`): the same chunks, each holding only its own events' bytes (``buf``), so that a line
    of hundreds of MB is never in memory whole, nor split by upb whole (whose copy of the events takes ~2x the
    line). Falls back to reading the line whole when :func:`_line_layout` declines it."""
    import numpy as np

    layout = _line_layout(read, a, b, window)
    if layout is None:
        buf, base = read(a, b)
        yield from _scan_line(buf, a - base, b - base, want, chunk)
        return
    name, timestamp_ns, pos, lengths = layout
    if not -_MAX_TIME_NS < timestamp_ns < _MAX_TIME_NS:
        raise _Malformed(f"the line's timestamp_ns, {timestamp_ns}, is beyond +-2**61 ps; expected nanoseconds on "
                         "the trace's clock")
    for c in range(0, lengths.shape[0], chunk):
        lens = lengths[c : c + chunk].astype(np.int64)
        sizes = _event_heads(lens) + lens
        offs = np.empty(lens.size, np.int64)  # each event's key, from the chunk's first
        offs[0] = 0
        np.cumsum(sizes[:-1], out=offs[1:])
        end = pos + int(offs[-1] + sizes[-1])
        buf, base = read(pos, end)
        ends = offs + sizes + (pos - base)
        starts = ends - lens
        out = _scanned_chunk(buf, name, timestamp_ns, np.frombuffer(buf, np.uint8), starts, ends, want, c, base - a)
        del lens, sizes, offs, starts, ends, buf
        pos = end
        yield out


def _scanned_chunk(buf, name: str, timestamp_ns: int, d, starts, ends, want, first: int,
                   to_line: int) -> _ScannedLine:
    """The ``_ScannedLine`` of the events whose payloads are ``d[starts[i]:ends[i]]``, events ``first``, ``first +
    1``, ... of the line; raises ``_Malformed`` for an offset or duration out of range, naming the event and its
    byte in the line (``starts[i] + to_line``)."""
    import numpy as np

    out = _ScannedLine()
    out.buf = buf
    out.name = name
    out.timestamp_ns = timestamp_ns
    _scan_events(out, d, starts, ends, want)
    bad = (out.ev_off <= -_MAX_TIME_PS) | (out.ev_off >= _MAX_TIME_PS) | (out.ev_dur < 0) | \
        (out.ev_dur >= _MAX_TIME_PS)
    if bad.any():
        k = int(np.flatnonzero(bad)[0])
        raise _Malformed(f"event {first + k} of the line (byte {int(starts[k]) + to_line:,} of the line) has "
                         f"offset_ps {int(out.ev_off[k])} and duration_ps {int(out.ev_dur[k])}; expected an "
                         "offset within +-2**61 ps and a duration in [0, 2**61) ps")
    return out


def _scan_events(out: _ScannedLine, d, starts, ends, want) -> None:
    """Fill ``out`` with the events whose payloads are ``d[starts[i]:ends[i]]``, in lockstep."""
    import numpy as np

    n = starts.shape[0]
    mid = np.zeros(n, np.int64)
    off = np.zeros(n, np.int64)
    dur = np.zeros(n, np.int64)
    occ = np.zeros(n, np.int64)
    st_s: list = []
    st_e: list = []
    st_ev: list = []
    idx = np.flatnonzero(starts < ends)
    p = starts[idx]
    e = ends[idx]
    while idx.size:
        key = d[p]
        if (key == _EVENT_TAG).all():  # only stats left: the usual case past metadata_id/offset/duration
            ln = d[p + 1]
            if (ln < 0x80).all():
                r = p + 2
                nxt = r + ln
            else:
                v, r = _np_varint(d, p + 1)
                nxt = r + v.astype(np.int64)
            if (nxt > e).any() or (nxt < r).any():
                raise _Malformed("a stat runs past the end of its event")
            st_s.append(r)
            st_e.append(nxt)
            st_ev.append(idx)
        else:
            f, wt, v, r, nxt = _np_fields(d, p, e)
            vi = v.view(np.int64)
            var = wt == 0
            m = var & (f == 1)
            mid[idx[m]] = vi[m]
            m = var & (f == 3)
            dur[idx[m]] = vi[m]
            m = var & (f == 2)  # oneof data { offset_ps = 2; num_occurrences = 5; }: the last one set wins
            if m.any():
                off[idx[m]] = vi[m]
                occ[idx[m]] = 0
            m = var & (f == 5)
            if m.any():
                occ[idx[m]] = vi[m]
                off[idx[m]] = 0
            m = np.flatnonzero((wt == 2) & (f == 4))
            if m.size:
                st_s.append(r[m])
                st_e.append(nxt[m])
                st_ev.append(idx[m])
        keep = nxt < e
        if not keep.all():
            idx = idx[keep]
            nxt = nxt[keep]
            e = e[keep]
        p = nxt
    out.ev_mid, out.ev_off, out.ev_dur = mid, off, dur
    out.ev_skip = (occ != 0) & (off == 0)  # aggregated event (num_occurrences, no timestamp)

    if st_s:
        s = np.concatenate(st_s)
        del st_s
        se = np.concatenate(st_e)
        del st_e
        sev = np.concatenate(st_ev)
        del st_ev
    else:
        s = se = sev = np.zeros(0, np.int64)
    _scan_stats(out, d, s, se, sev, want)


def _scan_stats(out: _ScannedLine, d, s, e, ev, want) -> None:
    """Fill ``out.st_*`` with the stats (byte ranges ``s``..``e`` of events ``ev``) whose metadata id is wanted."""
    import numpy as np

    n = d.shape[0]
    k = s.shape[0]
    if k == 0 or want.size == 0:
        idx = np.zeros(0, np.int64)
        p = mid = idx
        slow = idx
    else:
        # Fast path: the stat starts with its metadata_id (every writer emits fields in number order), a one-
        # or two-byte varint, matched against the wanted ids without widening the bytes.
        last = n - 1
        k0 = d[np.minimum(s, last)]
        k1 = d[np.minimum(s + 1, last)]
        room = e - s
        one = (k0 == _MID_TAG) & (k1 < 0x80) & (room >= 2)
        lut = np.zeros(128, bool)
        lut[want[want < 128]] = True
        hit1 = np.flatnonzero(one & lut[k1 & 0x7F])
        two = np.flatnonzero((k0 == _MID_TAG) & (k1 >= 0x80) & (room >= 3))
        if two.size:
            k2 = d[np.minimum(s[two] + 2, last)]
            ok2 = k2 < 0x80
            two_mid = ((k1[two] & 0x7F).astype(np.int64) | (k2.astype(np.int64) << 7))
            pos = np.minimum(np.searchsorted(want, two_mid), want.size - 1)
            hit2 = two[ok2 & (want[pos] == two_mid)]
            fast = one.copy()
            fast[two[ok2]] = True
        else:
            hit2 = two
            fast = one
        slow = np.flatnonzero(~fast)  # anything else: parsed from its first field, metadata_id 0 until seen
        idx = np.concatenate([hit1, hit2, slow])
        p = np.concatenate([s[hit1] + 2, s[hit2] + 3, s[slow]])
        mid = np.concatenate([d[s[hit1] + 1].astype(np.int64),
                              (d[s[hit2] + 1] & 0x7F).astype(np.int64) | (d[s[hit2] + 2].astype(np.int64) << 7),
                              np.zeros(slow.size, np.int64)])
        if hit2.size or slow.size:
            order = np.argsort(idx, kind="stable")
            idx, p, mid = idx[order], p[order], mid[order]
    end = e[idx]
    m = idx.shape[0]
    kind = np.zeros(m, np.int8)
    val = np.zeros(m, np.uint64)
    vs = np.zeros(m, np.int64)
    ve = np.zeros(m, np.int64)
    live = np.flatnonzero(p < end)
    if live.size:
        # Fast path: a single varint value (ref 0x38, int64 0x20, uint64 0x18) ending the stat.
        q = p[live]
        key = d[q]
        single = (key == 0x38) | (key == 0x20) | (key == 0x18)
        sel = np.flatnonzero(single)
        if sel.size:
            v, after = _np_varint(d, q[sel] + 1)
            done = after == end[live[sel]]
            sel = sel[done]
            kind[live[sel]] = (key[sel] >> 3).astype(np.int8)
            val[live[sel]] = v[done]
            single[:] = False
            single[sel] = True
            live = live[~single]
    q = p[live]
    qe = end[live]
    while live.size:
        f, wt, v, r, nxt = _np_fields(d, q, qe)
        var = wt == 0
        mm = var & (f == 1)
        mid[live[mm]] = v[mm].view(np.int64)
        mm = np.flatnonzero(((f == 3) | (f == 4) | (f == 7)) & var)
        kind[live[mm]] = f[mm].astype(np.int8)
        val[live[mm]] = v[mm]
        mm = np.flatnonzero((f == 2) & (wt == 1))
        kind[live[mm]] = 2
        vs[live[mm]] = r[mm]
        mm = np.flatnonzero(((f == 5) | (f == 6) | (f == 8)) & (wt == 2))
        kind[live[mm]] = f[mm].astype(np.int8)
        vs[live[mm]] = r[mm]
        ve[live[mm]] = nxt[mm]
        keep = nxt < qe
        live = live[keep]
        q = nxt[keep]
        qe = qe[keep]
    if slow.size:  # metadata ids only known now for the slow ones
        pos = np.minimum(np.searchsorted(want, mid), want.size - 1)
        ok = want[pos] == mid
        idx, mid, kind, val, vs, ve = idx[ok], mid[ok], kind[ok], val[ok], vs[ok], ve[ok]
    out.st_ev = ev[idx]
    out.st_mid = mid
    out.st_kind = kind
    out.st_val = val
    out.st_vs = vs
    out.st_ve = ve


def _wire_stat_value(buf, kind: int, val: int, vs: int, ve: int, names: dict[int, str]) -> Any:
    """One stat value from the wire, as :func:`_stat_value` returns it from the message."""
    if kind == 0:
        return None
    if kind == 7:
        return names.get(val, "")
    if kind == 3:
        return val
    if kind == 4:
        return _as_int64(val)
    if kind == 2:
        return struct.unpack_from("<d", buf, vs)[0]
    raw = bytes(buf[vs:ve])
    if kind == 5:
        return raw.decode("utf-8", "replace")
    if kind == 6:
        return raw
    try:  # 8: compressed_str_value
        return zlib.decompress(raw, zlib.MAX_WBITS | 32).decode("utf-8", "replace")
    except zlib.error:
        return ""


def _last_per_event(st_ev, sel):
    """``sel`` (indices of stats of one key, in stat order) reduced to the last stat of each event."""
    import numpy as np

    evs = st_ev[sel]
    if evs.size < 2:
        return sel
    # Stats of one event are in order and events are scanned in lockstep, so within one key a repeated
    # event is rare; only then pay for a sort.
    counts = np.bincount(evs)
    if counts.max() <= 1:
        return sel
    order = np.lexsort((sel, evs))  # by event, then stat order
    sel = sel[order]
    evs = evs[order]
    last = np.ones(sel.shape[0], bool)
    last[:-1] = evs[1:] != evs[:-1]
    return sel[last]
