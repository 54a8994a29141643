"""Reader for profiler XSpace files (``*.xplane.pb``): HLO protos, per-op events and step markers.

An XSpace is what ``jax.profiler.trace(log_dir)`` writes to ``log_dir/plugins/profile/<run>/<host>.xplane.pb``.
Schema: ``tsl/profiler/protobuf/xplane.proto`` (see :mod:`hloscope.parsers._xspace_schema`). Names of planes,
lines and stats follow ``xla/tsl/profiler/utils/xplane_schema.cc``; what each platform actually writes is
documented in ``docs/xspace.md``.

Public functions:

* :func:`read_xspace` -- bytes on disk to an ``XSpace`` message, with :class:`TraceError` for bad input.
* :func:`open_xspace` -- the lean alternative for large files: an :class:`XSpaceIndex` (plane metadata
  decoded, lines located but not decoded) that the functions below accept in place of the message.
* :func:`hlo_protos` -- the serialized ``xla.HloProto`` of every compiled module (``/host:metadata`` plane).
* :func:`hlo_proto_to_text` -- one of those protos printed as HLO text by jaxlib.
* :func:`op_events` -- one row per executed HLO op (TPU ``XLA Ops`` line, GPU kernels, CPU thunks).
* :func:`step_events` -- one row per step marker (device ``Steps`` lines, host ``step_num`` annotations).
"""

from __future__ import annotations

import functools
import gzip
import mmap
import os
import re
import struct
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from google.protobuf.message import DecodeError, Message

from hloscope.parsers import _xspace_schema as _schema
from hloscope.parsers._trace_error import TraceError

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = [
    "HloProtoEntry",
    "TraceError",
    "XSpaceIndex",
    "hlo_module_proto",
    "hlo_proto_to_text",
    "hlo_protos",
    "op_events",
    "open_xspace",
    "parse_xspace",
    "read_xspace",
    "step_events",
]

# Names from xla/tsl/profiler/utils/xplane_schema.cc (checked against real files, see docs/xspace.md).
METADATA_PLANE = "/host:metadata"
HOST_PLANE = "/host:CPU"
XLA_OPS_LINE = "XLA Ops"
XLA_MODULES_LINE = "XLA Modules"
STEPS_LINE = "Steps"
STAT_HLO_PROTO = "Hlo Proto"
STAT_HLO_OP = "hlo_op"
STAT_HLO_MODULE = "hlo_module"
STAT_PROGRAM_ID = "program_id"
STAT_DEVICE_ORDINAL = "device_ordinal"
STAT_CORRELATION_ID = "correlation_id"
STAT_STEP_NUM = "step_num"
STAT_GROUP_ID = "group_id"

# Lines that xprof *derives* from raw GPU stream lines when it post-processes an XSpace. A raw capture has
# none of them; if one is present its events duplicate the kernels, so op_events never reads them on GPU.
_GPU_DERIVED_LINES = frozenset(
    {
        XLA_OPS_LINE,
        XLA_MODULES_LINE,
        STEPS_LINE,
        "Async XLA Ops",
        "Framework Ops",
        "Framework Name Scope",
        "Source code",
        "Launch Stats",
        "Host Offload Ops",
        "_counters_",
    }
)

_DEVICE_RE = re.compile(r"^/device:(TPU|GPU):(\d+)$")
_MODULE_KEY_RE = re.compile(r"^(?P<name>.*)\((?P<id>-?\d+)\)$")  # "jit_f(6)", "jit_step(1203...885)"
_U64 = (1 << 64) - 1
_RECAPTURE = (
    "re-capture the profile with jax.profiler.trace(log_dir) and pass log_dir/plugins/profile/<run>/*.xplane.pb"
)

OP_EVENT_COLUMNS = (
    "plane",
    "device_id",
    "line",
    "name",
    "hlo_op",
    "hlo_module",
    "program_id",
    "start_ps",
    "duration_ps",
    "self_ps",
)
STEP_EVENT_COLUMNS = ("plane", "device_id", "line", "name", "step_num", "start_ps", "end_ps", "duration_ps")


# --------------------------------------------------------------------------------------------------------
# Reading


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
    p = Path(path)
    if not p.exists():
        raise TraceError(p, f"no such file; expected a *.xplane.pb profile; {_RECAPTURE}")
    if p.is_dir():
        raise TraceError(
            p,
            "is a directory, expected one *.xplane.pb file; "
            "use find_xplane_files(dir) to locate the files of a run",
        )
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
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as e:
            raise TraceError(source, f"gzip-compressed but truncated or corrupted ({e}); {_RECAPTURE}") from e
    xspace = _schema.XSpace()
    try:
        xspace.ParseFromString(data)
    except (DecodeError, RuntimeError, ValueError) as e:
        detail = str(e).replace("\n", " ")
        raise TraceError(
            source,
            f"not an XSpace protobuf (truncated or corrupted at decode: {detail}); {_RECAPTURE}",
        ) from None
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
        return [_LineRef(name, functools.partial(self._read, a, b)) for a, b, name in self._lines[plane]]

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
    p = Path(path)
    if not p.exists():
        raise TraceError(p, f"no such file; expected a *.xplane.pb profile; {_RECAPTURE}")
    if p.is_dir():
        raise TraceError(
            p,
            "is a directory, expected one *.xplane.pb file; "
            "use find_xplane_files(dir) to locate the files of a run",
        )
    try:
        st = p.stat()
        if st.st_size == 0:
            raise TraceError(p, f"file is empty (0 bytes), expected a serialized XSpace; {_RECAPTURE}")
        with open(p, "rb") as f:
            if f.read(2) == b"\x1f\x8b":
                f.seek(0)
                try:
                    data = gzip.decompress(f.read())
                except (OSError, EOFError, zlib.error) as e:
                    raise TraceError(p, f"gzip-compressed but truncated or corrupted ({e}); {_RECAPTURE}") from e
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
    rest = []
    try:
        p = 0
        while p < n:
            key, q = _py_varint(buf, p)
            f, wt = key >> 3, key & 7
            if wt == 2:
                ln, r = _py_varint(buf, q)
                end = r + ln
                if end > n:
                    raise _Malformed(f"field {f} at byte {p} runs past the end of the file")
                if f == 1:
                    plane, plane_lines = _index_plane(buf, r, end)
                    planes.append(plane)
                    lines.append(plane_lines)
                else:
                    rest.append(buf[p:end])
            else:
                end = _py_skip(buf, q, wt)
                if end > n:
                    raise _Malformed(f"field {f} at byte {p} runs past the end of the file")
                rest.append(buf[p:end])
            p = end
        header = _schema.XSpace.FromString(b"".join(rest))
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
        if wt == 2:
            ln, r = _py_varint(buf, q)
            end = r + ln
        else:
            end = r = _py_skip(buf, q, wt)
        if end > b:
            raise _Malformed(f"field {f} at byte {p} runs past the end of its plane")
        if f == 3 and wt == 2:
            lines.append((r, end, _line_name_hint(buf, r, end)))
        elif runs and runs[-1][1] == p:
            runs[-1][1] = end
        else:
            runs.append([p, end])
        p = end
    plane = _schema.XPlane.FromString(b"".join(buf[s:e] for s, e in runs))
    return plane, lines


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


# --------------------------------------------------------------------------------------------------------
# Stats


def _stat_value(stat, stat_names: dict[int, str]) -> Any:
    """Value of one XStat; ``ref_value`` resolved to the referenced XStatMetadata name, gzip strings inflated."""
    kind = stat.WhichOneof("value")
    if kind is None:
        return None
    if kind == "ref_value":
        return stat_names.get(stat.ref_value, "")
    if kind == "compressed_str_value":
        try:
            return zlib.decompress(stat.compressed_str_value, zlib.MAX_WBITS | 32).decode("utf-8", "replace")
        except zlib.error:
            return ""
    return getattr(stat, kind)


def _stat_names(plane) -> dict[int, str]:
    return {k: v.name for k, v in plane.stat_metadata.items()}


def _stat_ids(stat_names: dict[int, str], wanted: dict[str, str]) -> dict[int, str]:
    """Map stat-metadata ids whose name is in ``wanted`` to ``wanted[name]`` (a short field key)."""
    return {k: wanted[n] for k, n in stat_names.items() if n in wanted}


def _as_program_id(value: Any) -> int | None:
    """Program ids are uint64 fingerprints on TPU; a negative int64 is the same 64 bits reinterpreted."""
    if value is None or isinstance(value, (bytes, float)):
        return None
    if isinstance(value, str):
        try:
            value = int(value)
        except ValueError:
            return None
    return int(value) & _U64


def _split_module_key(key: str) -> tuple[str, int | None]:
    """``"jit_f(6)"`` -> ``("jit_f", 6)``; a name without a ``(id)`` suffix is returned unchanged."""
    m = _MODULE_KEY_RE.match(key)
    if not m:
        return key, None
    return m.group("name"), int(m.group("id")) & _U64


def _device_id(plane_name: str) -> tuple[str | None, int]:
    m = _DEVICE_RE.match(plane_name)
    if not m:
        return None, -1
    return m.group(1), int(m.group(2))


# --------------------------------------------------------------------------------------------------------
# HLO protos


@dataclass(frozen=True)
class HloProtoEntry:
    """One compiled module's HLO as embedded by JAX in the ``/host:metadata`` plane.

    Attributes:
        module_name: the HLO module name (``"jit_train_step"``): the ``hlo_module`` stat of op events.
        program_id: the executable's program id (``program_id`` stat of op events), or None if unknown.
        metadata_name: the XEventMetadata name as stored (``"jit_train_step(17)"``).
        hlo_proto: the serialized ``xla.HloProto`` (``xla/service/hlo.proto``; wraps the HloModuleProto
            as field 1 ``hlo_module``, plus the buffer assignment as field 3).
    """

    module_name: str
    program_id: int | None
    metadata_name: str
    hlo_proto: bytes

    def to_text(self, *, short_parsable: bool = False) -> str:
        """Print this module as HLO text; see :func:`hlo_proto_to_text`."""
        return hlo_proto_to_text(self.hlo_proto, short_parsable=short_parsable)

    def __repr__(self) -> str:  # keep the bytes out of reprs and pytest diffs
        return (
            f"HloProtoEntry(module_name={self.module_name!r}, program_id={self.program_id!r}, "
            f"metadata_name={self.metadata_name!r}, hlo_proto=<{len(self.hlo_proto)} bytes>)"
        )


def hlo_protos(xspace) -> list[HloProtoEntry]:
    """Extract the serialized HLO protos that JAX embeds in a profile.

    They live in the plane named ``/host:metadata``: one XEventMetadata per compiled module, named
    ``<module>(<program_id>)``, carrying an XStat named ``Hlo Proto`` whose ``bytes_value`` is a serialized
    ``xla.HloProto``. Newer JAX (0.10) also adds a ``program_id`` stat; older captures only have the suffix.

    Args:
        xspace: a decoded XSpace (from :func:`read_xspace`).

    Returns:
        One entry per module, in ascending metadata-id order (compilation order); empty if the profile has
        no metadata plane (e.g. captured with HLO proto collection disabled).
    """
    out: list[HloProtoEntry] = []
    for plane in xspace.planes:
        if plane.name != METADATA_PLANE:
            continue
        names = _stat_names(plane)
        ids = _stat_ids(names, {STAT_HLO_PROTO: "proto", STAT_PROGRAM_ID: "pid"})
        if "proto" not in ids.values():
            continue
        for mid in sorted(plane.event_metadata):
            md = plane.event_metadata[mid]
            proto = None
            pid = None
            for st in md.stats:
                key = ids.get(st.metadata_id)
                if key == "proto":
                    kind = st.WhichOneof("value")
                    if kind == "bytes_value":
                        proto = st.bytes_value
                    elif kind == "str_value":  # never seen, but cheap to accept
                        proto = st.str_value.encode("latin-1", "replace")
                elif key == "pid":
                    pid = _as_program_id(_stat_value(st, names))
            if proto is None:
                continue
            module_name, suffix_id = _split_module_key(md.name)
            out.append(
                HloProtoEntry(
                    module_name=module_name,
                    program_id=pid if pid is not None else suffix_id,
                    metadata_name=md.name,
                    hlo_proto=bytes(proto),
                )
            )
    return out


def hlo_module_proto(serialized: bytes) -> bytes:
    """The serialized ``xla.HloModuleProto`` inside an ``xla.HloProto`` (returned as is if it is one already).

    ``xla/service/hlo.proto``: ``message HloProto { HloModuleProto hlo_module = 1; ... }``. The bytes in an
    XSpace are an HloProto; jaxlib's ``HloModule.from_serialized_hlo_module_proto`` wants the inner module.

    Args:
        serialized: a serialized HloProto or HloModuleProto.

    Returns:
        The serialized HloModuleProto.
    """
    outer = _schema.HloProtoHeader()
    try:
        outer.ParseFromString(serialized)
    except DecodeError:
        return serialized
    if not outer.hlo_module:
        return serialized
    inner = _schema.HloModuleHeader()
    try:
        inner.ParseFromString(outer.hlo_module)
    except DecodeError:
        return serialized  # field 1 was HloModuleProto.name, i.e. the input is a bare module
    return outer.hlo_module if inner.name else serialized


def hlo_proto_to_text(serialized: bytes, *, short_parsable: bool = False) -> str:
    """Print a serialized ``xla.HloProto`` (or bare ``HloModuleProto``) as HLO text, using jaxlib.

    Args:
        serialized: ``HloProtoEntry.hlo_proto`` or any serialized HloProto / HloModuleProto.
        short_parsable: False (default) prints jaxlib's default form (``%names``, ``metadata={...}``
            with op_name and source lines); True prints ``HloPrintOptions.short_parsable()``: no ``%``, no
            metadata -- the form of the derived ``*.hlo.txt`` files in the test corpus.

    Returns:
        The module text, starting with ``HloModule <name>, ...``.

    Raises:
        ValueError: jaxlib rejects the bytes (not an HLO proto, or from an incompatible XLA).
        ImportError: jaxlib is not installed.
    """
    from jax._src.lib import xla_client as xc  # lazy: jaxlib import costs ~1 s

    module_bytes = hlo_module_proto(serialized)
    try:
        module = xc.hlo.HloModule.from_serialized_hlo_module_proto(module_bytes)
    except Exception as e:  # jaxlib raises XlaRuntimeError / JaxRuntimeError
        raise ValueError(f"jaxlib cannot deserialize this HLO proto ({len(serialized)} bytes): {e}") from e
    if short_parsable:
        return module.to_string(xc.hlo.HloPrintOptions.short_parsable())
    return module.to_string()




# --------------------------------------------------------------------------------------------------------
# Lines as bytes: the vectorized event scanner
#
# Reading events through the protobuf API costs a Python wrapper object per event and per stat (~4 us per
# event on a CPU capture), which was nearly all of op_events' time. Instead every line is taken as its
# serialized bytes (``SerializeToString`` of a decoded line, or the file's bytes via ``open_xspace``) and
# decoded with numpy, a chunk of events at once: one vectorized step per field ("lockstep"), so the number
# of numpy calls grows with the fields per event, not with the events. upb splits a line into its events
# (``_split_line``: ``events`` read as ``repeated bytes``). Only the stats op_events and step_events need
# (hlo_op, hlo_module, program_id, device_ordinal, correlation_id, step_num, group_id) are decoded; values
# that are neither integers nor ``ref_value`` names (rare) go through a per-stat Python path with
# ``_stat_value``'s rules. Results are identical to the per-event loop this replaced (checked on the corpus,
# the CPU captures and randomized XSpaces with every stat kind), ~6x faster on a 35 MB CPU capture.
#
# Wire format (https://protobuf.dev/programming-guides/encoding/): a field is a varint key
# ``(field_number << 3) | wire_type`` then a varint (type 0), 8 bytes (type 1), a varint length and that many
# bytes (type 2), or 4 bytes (type 5). Fields may come in any order and repeat; the last value of a singular
# field (and of a oneof) wins -- both rules are kept here. A field whose wire type does not match the
# schema is an unknown field to upb, and is skipped here too.


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


def _as_int64(v: int) -> int:
    return v - (1 << 64) if v >> 63 else v


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


def _scan_line(buf, a: int, b: int, want, chunk: int = _CHUNK):
    """Decode the events of the serialized XLine ``buf[a:b]`` and their stats whose metadata id is in ``want``
    (sorted int64 array): yields a :class:`_ScannedLine` per chunk of at most ``chunk`` events, in order."""
    import numpy as np

    d = np.frombuffer(buf, np.uint8)
    name, timestamp_ns, starts, ends = _split_line(buf, a, b, d)
    for c in range(0, starts.shape[0], chunk):
        out = _ScannedLine()
        out.buf = buf
        out.name = name
        out.timestamp_ns = timestamp_ns
        _scan_events(out, d, starts[c : c + chunk], ends[c : c + chunk], want)
        yield out


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


# --------------------------------------------------------------------------------------------------------
# Sources of lines: a decoded XSpace message, or an XSpaceIndex over the file


class _LineRef:
    """One line of a plane: its name if known without scanning, and a way to get its serialized bytes."""

    __slots__ = ("name", "_fetch")

    def __init__(self, name: str | None, fetch) -> None:
        self.name = name  # None: not known before the line is scanned
        self._fetch = fetch

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


def _scan_ref(ref: _LineRef, want, source: str):
    """:func:`_scan_line` of one line (chunks of decoded events), wire-format errors as :class:`TraceError`."""
    buf, a, b = ref.bytes()
    try:
        yield from _scan_line(buf, a, b, want)
    except _Malformed as e:
        raise TraceError(source, f"corrupted event data ({e}); {_RECAPTURE}") from None


# --------------------------------------------------------------------------------------------------------
# Op events

_OP_STATS = {
    STAT_HLO_OP: "op",
    STAT_HLO_MODULE: "module",
    STAT_PROGRAM_ID: "pid",
    STAT_DEVICE_ORDINAL: "dev",
    STAT_CORRELATION_ID: "corr",
}
_STEP_STATS = {STAT_STEP_NUM: "step", STAT_GROUP_ID: "group"}
_KEY_CODE = {k: i for i, k in enumerate(("op", "module", "pid", "dev", "corr", "step", "group"))}


def _resolve_md_stats(plane, names: dict[int, str], ids: dict[int, str]) -> dict[int, dict[str, Any]]:
    """Wanted stats attached to each XEventMetadata (shared by all its events), resolved once."""
    out: dict[int, dict[str, Any]] = {}
    if not ids:
        return out
    for mid, md in plane.event_metadata.items():
        d = None
        for st in md.stats:
            key = ids.get(st.metadata_id)
            if key is not None:
                if d is None:
                    d = {}
                d[key] = _stat_value(st, names)
        if d:
            out[mid] = d
    return out


def _self_times(starts: list[int], durs: list[int]) -> list[int]:
    """Duration minus the durations of directly nested events, for one line sorted by (start, -duration).

    An event is nested in another only if it lies entirely within it. Events that merely overlap -- GPU
    stream timestamps often overlap their neighbour by a few ns -- are siblings, which is also how xprof
    computes self time. Stack sweep, O(n).
    """
    n = len(starts)
    child = [0] * n
    ends = [s + d for s, d in zip(starts, durs)]
    stack: list[int] = []  # indices of open events, each containing the next one up
    for i in range(n):
        s = starts[i]
        e = ends[i]
        while stack and (ends[stack[-1]] <= s or ends[stack[-1]] < e):
            stack.pop()
        if stack:
            child[stack[-1]] += durs[i]
        stack.append(i)
    return [max(d - c, 0) for d, c in zip(durs, child)]


def _self_times_np(starts, durs):
    """:func:`_self_times` for int64 arrays, vectorized.

    The stack sweep's parent of event ``i`` is the nearest earlier event ``j`` with ``end_j >= end_i`` and
    ``end_j > start_i`` (it starts no later, sorted by start): any event between them that the sweep kept
    on its stack would be nearer, and one it popped cannot contain ``i``. Found by pointer jumping -- each
    candidate that fails is replaced by its own candidate, which is never further than needed because
    everything between them ends before ``max(end_i, start_i + 1)`` -- in O(log n) vector steps.
    """
    import numpy as np

    n = starts.shape[0]
    if n == 0:
        return np.zeros(0, np.int64)
    ends = starts + durs
    need = np.empty(n + 1, np.int64)  # 1-based; slot 0 is a virtual root that contains everything
    need[0] = 0
    np.maximum(ends, starts + 1, out=need[1:])
    end = np.empty(n + 1, np.int64)
    end[0] = np.iinfo(np.int64).max
    end[1:] = ends
    cand = np.arange(-1, n, dtype=np.int64)
    cand[0] = 0
    open_ = np.flatnonzero(end[cand] < need)
    while open_.size:
        cand[open_] = cand[cand[open_]]
        open_ = open_[end[cand[open_]] < need[open_]]
    parent = cand[1:] - 1
    child = np.zeros(n, np.int64)
    nested = parent >= 0
    np.add.at(child, parent[nested], durs[nested])
    return np.maximum(durs - child, 0)


class _Codes:
    """Python values interned as small ints (0 is None), so that per-event columns are int arrays."""

    def __init__(self) -> None:
        self.values: list[Any] = [None]
        self._index: dict[tuple[type, Any], int] = {}

    def code(self, value: Any) -> int:
        if value is None:
            return 0
        key = (type(value), value)
        c = self._index.get(key)
        if c is None:
            c = self._index[key] = len(self.values)
            self.values.append(value)
        return c


class _PlaneOps:
    """Per-plane lookups for op_events: stat ids, and the wanted metadata stats as arrays over metadata ids."""

    def __init__(self, plane, stats: dict[str, str]) -> None:
        import numpy as np

        self.names = _stat_names(plane)
        self.ids = _stat_ids(self.names, stats)
        self.want = np.array(sorted(self.ids), np.int64)
        self.want_code = np.array([_KEY_CODE[self.ids[i]] for i in sorted(self.ids)], np.int8)
        md_stats = _resolve_md_stats(plane, self.names, self.ids)
        keys = sorted(plane.event_metadata)
        self.md_ids = np.array(keys, np.int64)
        self.codes = _Codes()
        code = self.codes.code
        # one slot per metadata id plus a last slot (index -1) for ids without metadata
        m = len(keys) + 1
        self.md_name = np.empty(m, object)
        self.md_name[:-1] = [plane.event_metadata[k].name for k in keys]
        self.md_name[-1] = ""
        self.md_op = np.zeros(m, np.int64)
        self.md_module = np.zeros(m, np.int64)
        self.md_pid = np.zeros(m, np.uint64)
        self.md_pid_ok = np.zeros(m, bool)
        self.md_dev = np.zeros(m, np.int64)
        self.md_dev_ok = np.zeros(m, bool)
        self.md_corr = np.zeros(m, bool)
        self.md_step = {}
        for i, k in enumerate(keys):
            d = md_stats.get(k)
            if not d:
                continue
            self.md_op[i] = code(d.get("op"))
            self.md_module[i] = code(d.get("module"))
            pid = _as_program_id(d.get("pid"))
            if pid is not None:
                self.md_pid[i], self.md_pid_ok[i] = pid, True
            dev = d.get("dev")
            if not (dev is None or isinstance(dev, (str, bytes, float))):
                self.md_dev[i], self.md_dev_ok[i] = _as_int64(int(dev) & _U64), True
            self.md_corr[i] = "corr" in d
            if "step" in d or "group" in d:
                self.md_step[k] = d

    def md_index(self, mids):
        """Position of each event's metadata in the ``md_*`` arrays (-1: no such metadata)."""
        import numpy as np

        if not self.md_ids.size:
            return np.full(mids.shape[0], -1, np.int64)
        pos = np.minimum(np.searchsorted(self.md_ids, mids), self.md_ids.size - 1)
        return np.where(self.md_ids[pos] == mids, pos, -1)

    def stat_keys(self, sl: _ScannedLine):
        """The key of each wanted stat of a scanned line, as codes (``_KEY_CODE``: "op" -> 0, ...)."""
        import numpy as np

        return self.want_code[np.searchsorted(self.want, sl.st_mid)]

    def value_codes(self, sl: _ScannedLine, sel):
        """Codes (see ``_Codes``) of the values of stats ``sel``; refs resolved once per distinct ref."""
        import numpy as np

        kind = sl.st_kind[sel]
        out = np.zeros(sel.shape[0], np.int64)
        ref = np.flatnonzero(kind == 7)
        if ref.size:
            u, inv = np.unique(sl.st_val[sel[ref]], return_inverse=True)
            ucodes = np.array([self.codes.code(self.names.get(int(r), "")) for r in u], np.int64)
            out[ref] = ucodes[inv]
        for j in np.flatnonzero(kind != 7):
            i = sel[j]
            out[j] = self.codes.code(
                _wire_stat_value(sl.buf, int(kind[j]), int(sl.st_val[i]), int(sl.st_vs[i]), int(sl.st_ve[i]),
                                 self.names)
            )
        return out

    def python_values(self, sl: _ScannedLine, sel) -> list[Any]:
        return [
            _wire_stat_value(sl.buf, int(sl.st_kind[i]), int(sl.st_val[i]), int(sl.st_vs[i]), int(sl.st_ve[i]),
                             self.names)
            for i in sel
        ]


def _line_op_rows(ctx: _PlaneOps, sl: _ScannedLine, *, skip_correlated: bool, every_event: bool):
    """The op events of one scanned line as a dict of arrays (unsorted), or None if it has none.

    Keys: line (the line name), start, dur, name (object), op (object), module (object), pid (uint64),
    pid_ok (bool), dev (int64), dev_ok (bool). The rules of the per-event loop this replaced: event stats
    override metadata stats, ``ref_value`` stats are names, events with ``correlation_id`` are skipped on the
    host plane, an op needs a truthy ``hlo_op`` unless ``every_event`` (then the metadata name).
    """
    import numpy as np

    n = sl.ev_mid.shape[0]
    if n == 0:
        return None
    md = ctx.md_index(sl.ev_mid)
    op = ctx.md_op[md]
    corr = ctx.md_corr[md]
    stats: dict[int, Any] = {}  # key code -> (stat indices, their events), the last stat of each event
    if sl.st_ev.size:
        keys = ctx.stat_keys(sl)
        for key in ("op", "module", "pid", "dev", "corr"):
            sel = np.flatnonzero(keys == _KEY_CODE[key])
            if sel.size:
                sel = _last_per_event(sl.st_ev, sel)
                stats[key] = (sel, sl.st_ev[sel])
    if "op" in stats:
        sel, ev = stats["op"]
        op[ev] = ctx.value_codes(sl, sel)
    if "corr" in stats:
        corr[stats["corr"][1]] = True

    values = ctx.codes.values
    truthy = np.fromiter((bool(v) for v in values), bool, len(values))
    has_op = truthy[op]
    keep = ~sl.ev_skip
    if not every_event:
        keep &= has_op
    if skip_correlated:
        keep &= ~corr
    rows = np.flatnonzero(keep)
    if not rows.size:
        return None
    row_of = np.full(n, -1, np.int64)  # event -> row
    row_of[rows] = np.arange(rows.size)
    md = md[rows]
    module = ctx.md_module[md]
    pid = ctx.md_pid[md]
    pid_ok = ctx.md_pid_ok[md]
    dev = ctx.md_dev[md]
    dev_ok = ctx.md_dev_ok[md]
    for key in ("module", "pid", "dev"):
        if key not in stats:
            continue
        sel, ev = stats[key]
        r = row_of[ev]
        sel = sel[r >= 0]
        r = r[r >= 0]
        if key == "module":
            module[r] = ctx.value_codes(sl, sel)
            continue
        kind = sl.st_kind[sel]
        ints = (kind == 3) | (kind == 4)
        if key == "pid":  # int64 program ids are the same 64 bits as uint64
            pid[r[ints]] = sl.st_val[sel[ints]]
            pid_ok[r[ints]] = True
            other = np.flatnonzero(~ints)
            for j, v in zip(other, ctx.python_values(sl, sel[other])):
                p = _as_program_id(v)
                pid_ok[r[j]] = p is not None
                if p is not None:
                    pid[r[j]] = p
        else:  # dev: an integer stat, else unknown
            dev[r] = sl.st_val[sel].view(np.int64)
            dev_ok[r] = ints

    op_str = np.empty(len(values), object)
    op_str[:] = [v if type(v) is str else str(v) for v in values]
    mod_str = np.empty(len(values), object)
    mod_str[:] = ["" if v is None else v if type(v) is str else str(v) for v in values]
    name = ctx.md_name[md]
    op_col = op_str[op[rows]]
    if every_event:
        op_col = np.where(has_op[rows], op_col, name)
    return {
        "line": sl.name,
        "start": sl.timestamp_ns * 1000 + sl.ev_off[rows],
        "dur": sl.ev_dur[rows],
        "name": name,
        "op": op_col,
        "module": mod_str[module],
        "pid": pid,
        "pid_ok": pid_ok,
        "dev": dev,
        "dev_ok": dev_ok,
    }


def _module_spans(ctx: _PlaneOps, lines: list[_LineRef], source: str):
    """TPU ``XLA Modules`` line: sorted starts, ends, module names and program ids for enclosure lookups."""

    spans = []
    for ref in lines:
        if ref.name is not None and ref.name != XLA_MODULES_LINE:
            continue
        for sl in _scan_ref(ref, ctx.want, source):
            if sl.name != XLA_MODULES_LINE:
                break
            _add_module_spans(ctx, sl, spans)
    spans.sort(key=lambda sp: (sp[0], sp[1], sp[2], -1 if sp[3] is None else sp[3]))  # None pids first
    return spans


def _add_module_spans(ctx: _PlaneOps, sl: _ScannedLine, spans: list) -> None:
    import numpy as np

    keys = ctx.stat_keys(sl) if sl.st_ev.size else np.zeros(0, np.int8)
    pids: dict[int, list] = {}
    for i in np.flatnonzero(keys == _KEY_CODE["pid"]):
        v = _wire_stat_value(sl.buf, int(sl.st_kind[i]), int(sl.st_val[i]), int(sl.st_vs[i]), int(sl.st_ve[i]),
                             ctx.names)
        pids.setdefault(int(sl.st_ev[i]), []).append(_as_program_id(v))
    md = ctx.md_index(sl.ev_mid)
    for i in range(sl.ev_mid.shape[0]):
        module, pid = _split_module_key(ctx.md_name[md[i]])
        for p in pids.get(i, ()):
            pid = p or pid
        start = sl.timestamp_ns * 1000 + int(sl.ev_off[i])
        spans.append((start, start + int(sl.ev_dur[i]), module, pid))


def _fill_from_modules(rows: dict, spans) -> None:
    """Module and program id of TPU ops that lack them, from the enclosing ``XLA Modules`` event."""
    import numpy as np

    if not spans:
        return
    starts = np.array([s[0] for s in spans], np.int64)
    ends = np.array([s[1] for s in spans], np.int64)
    need = np.flatnonzero((rows["module"] == "") | ~rows["pid_ok"])
    if not need.size:
        return
    st = rows["start"][need]
    j = np.searchsorted(starts, st, side="right") - 1
    inside = (j >= 0) & (st < ends[np.maximum(j, 0)])
    for i, jj in zip(need[inside], j[inside]):
        _, _, mname, mpid = spans[jj]
        if not rows["module"][i]:
            rows["module"][i] = mname
        if not rows["pid_ok"][i] and mpid is not None:
            rows["pid"][i] = mpid
            rows["pid_ok"][i] = True


def _step_rows_of(ctx: _PlaneOps, sl: _ScannedLine, host: bool) -> list[tuple]:
    """Step markers of one scanned line: ``(start, duration, line, name, step)`` (see :func:`step_events`)."""
    import numpy as np

    step: dict[int, Any] = {}
    group: dict[int, Any] = {}
    if sl.st_ev.size:
        keys = ctx.stat_keys(sl)
        sel = np.flatnonzero((keys == _KEY_CODE["step"]) | (keys == _KEY_CODE["group"]))
        for i, v in zip(sel, ctx.python_values(sl, sel)):  # in stat order: the last one wins
            (step if keys[i] == _KEY_CODE["step"] else group)[int(sl.st_ev[i])] = v
    if host:
        if ctx.md_step:
            cand = [i for i, m in enumerate(sl.ev_mid.tolist()) if i in step or m in ctx.md_step]
        else:
            cand = sorted(step)
    else:
        cand = range(sl.ev_mid.shape[0])
    rows = []
    base = sl.timestamp_ns * 1000
    for i in cand:
        if sl.ev_skip[i]:
            continue
        mid = int(sl.ev_mid[i])
        mds = ctx.md_step.get(mid)
        s = step[i] if i in step else (mds.get("step") if mds else None)
        g = group[i] if i in group else (mds.get("group") if mds else None)
        if host and s is None:
            continue  # host plane: only step annotations
        name = ctx.md_name[ctx.md_index(np.array([mid], np.int64))[0]]
        s = _as_step(s)
        if s is None and name.strip().isdigit():
            s = int(name)
        if s is None:
            s = _as_step(g)
        rows.append((base + int(sl.ev_off[i]), int(sl.ev_dur[i]), sl.name, name, s))
    return rows


def op_events(xspace) -> pd.DataFrame:
    """One row per executed HLO op, from every device and host plane of an XSpace.

    Sources (names verified on real files, see ``docs/xspace.md``):

    * TPU planes ``/device:TPU:<n>``: every event of the line ``XLA Ops``; the HLO op is the ``hlo_op`` stat
      if present, else the event-metadata name. Module and program id come from stats, else from the
      enclosing event of the ``XLA Modules`` line (named ``<module>(<program_id>)``).
    * GPU planes ``/device:GPU:<n>``: kernel / memcpy events of the raw stream lines (``Stream #<k>...``)
      that carry an ``hlo_op`` stat (``hlo_module``, ``program_id`` alongside). One HLO op may launch several
      kernels: each kernel is its own row (``name`` = kernel name). Lines xprof derives when it
      post-processes a trace (``XLA Ops``, ``Steps``, ...) are skipped so nothing is counted twice.
    * Host plane ``/host:CPU``: CPU-backend thunk events (stats ``hlo_op``, ``hlo_module``, ``program_id``,
      ``device_ordinal``, ``run_id``). Events that also carry ``correlation_id`` are GPU kernel *launches*
      annotated with the op they launch and are skipped.

    Stats may sit on the event or on its XEventMetadata (event wins); ``ref_value`` stats are resolved to
    the referenced stat-metadata name.

    Args:
        xspace: a decoded XSpace (from :func:`read_xspace`), or an :class:`XSpaceIndex` (from
            :func:`open_xspace`: same result, without holding the decoded events in memory).

    Returns:
        A DataFrame with columns (one row per op event; per plane and line, sorted by start):

        * ``plane`` (str): plane name, e.g. ``/device:GPU:0``.
        * ``device_id`` (int64): ``N`` of ``/device:{TPU,GPU}:N``; for host thunks the ``device_ordinal``
          stat; -1 when unknown.
        * ``line`` (str): line name (GPU stream, ``XLA Ops``, host thread name).
        * ``name`` (str): event name: kernel name on GPU, op name on TPU/CPU.
        * ``hlo_op`` (str): HLO instruction name (``fusion.12``), as in the module's HLO text.
        * ``hlo_module`` (str): HLO module name (``jit_train_step``), ``""`` if unknown.
        * ``program_id`` (UInt64, nullable): the executable's program id; joins :func:`hlo_protos`.
        * ``start_ps`` (int64): absolute start, ``line.timestamp_ns * 1000 + event.offset_ps``.
        * ``duration_ps`` (int64): event duration.
        * ``self_ps`` (int64): duration minus the durations of op events directly nested in it on the same
          line (a ``while`` thunk contains its body's thunks); equals ``duration_ps`` for leaf ops.

    Raises:
        TraceError: an event or stat of the file breaks the wire format (only possible for an
            :class:`XSpaceIndex`: a decoded message is well-formed).
    """
    import numpy as np
    import pandas as pd

    source = xspace.path if isinstance(xspace, XSpaceIndex) else "<xspace>"
    cols: dict[str, list] = {c: [] for c in (*OP_EVENT_COLUMNS, "pid_ok")}
    segments: list[tuple[str, str, int]] = []  # (plane, line, rows) of each line with op events
    for plane_i, (plane, lines) in enumerate(_plane_sources(xspace)):
        pname = plane.name
        kind, dev_from_name = _device_id(pname)
        is_host = pname == HOST_PLANE
        if kind is None and not is_host:
            continue
        # On the host plane of an XSpaceIndex, step markers are collected in the same pass (step_events).
        collect_steps = is_host and isinstance(xspace, XSpaceIndex)
        ctx = _PlaneOps(plane, {**_OP_STATS, **_STEP_STATS} if collect_steps else _OP_STATS)
        if kind != "TPU" and "op" not in ctx.ids.values():
            if collect_steps and ("step" in ctx.ids.values() or ctx.md_step):
                xspace._steps[plane_i] = _host_steps(ctx, lines, source)
            continue  # GPU/host plane without any hlo_op stat: nothing to find
        step_rows: list[tuple] = []
        if kind == "TPU":
            spans = _module_spans(ctx, lines, source)
            wanted = {XLA_OPS_LINE}.__contains__
        elif kind == "GPU":
            wanted = lambda name: name not in _GPU_DERIVED_LINES  # noqa: E731
        else:
            wanted = lambda name: True  # noqa: E731
        default_dev = -1 if is_host else dev_from_name
        for ref in lines:
            if ref.name is not None and not wanted(ref.name):
                continue
            chunks = []
            for sl in _scan_ref(ref, ctx.want, source):
                if not wanted(sl.name):
                    break
                if collect_steps:
                    step_rows.extend(_step_rows_of(ctx, sl, host=True))
                rows = _line_op_rows(ctx, sl, skip_correlated=is_host, every_event=kind == "TPU")
                if rows is not None:
                    chunks.append(rows)
            sl = None
            if not chunks:
                continue
            rows = chunks[0] if len(chunks) == 1 else {
                k: (v if k == "line" else np.concatenate([c[k] for c in chunks])) for k, v in chunks[0].items()
            }
            del chunks
            if kind == "TPU":
                _fill_from_modules(rows, spans)
            # per line: sorted by (start, -duration), stable (ties keep event order), then self times
            order = np.lexsort((-rows["dur"], rows["start"]))
            start = rows["start"][order]
            dur = rows["dur"][order]
            segments.append((pname, rows["line"], start.shape[0]))
            cols["name"].append(rows["name"][order])
            cols["hlo_op"].append(rows["op"][order])
            cols["hlo_module"].append(rows["module"][order])
            cols["program_id"].append(rows["pid"][order])
            cols["pid_ok"].append(rows["pid_ok"][order])
            if kind == "GPU":  # the device id comes from the plane name, not from a device_ordinal stat
                cols["device_id"].append(np.full(start.shape[0], default_dev, np.int64))
            else:
                cols["device_id"].append(np.where(rows["dev_ok"][order], rows["dev"][order], default_dev))
            cols["start_ps"].append(start)
            cols["duration_ps"].append(dur)
            cols["self_ps"].append(_self_times_np(start, dur))
        if collect_steps:
            step_rows.sort(key=lambda r: (r[0], -r[1]))
            xspace._steps[plane_i] = step_rows

    def take(name, dtype):  # one column, its per-line pieces freed as soon as they are joined
        parts = cols.pop(name)
        return np.concatenate(parts) if parts else np.zeros(0, dtype)

    counts = [n for _, _, n in segments]
    data = {}
    for col, k in (("plane", 0), ("line", 1)):
        names = np.empty(len(segments), object)
        names[:] = [seg[k] for seg in segments]
        data[col] = pd.Series(np.repeat(names, counts), dtype=object, copy=False)
    pid = take("program_id", np.uint64)
    data["program_id"] = pd.Series(pd.arrays.IntegerArray(pid, ~take("pid_ok", bool)), dtype="UInt64")
    for col in ("name", "hlo_op", "hlo_module"):
        data[col] = pd.Series(take(col, object), dtype=object, copy=False)
    for col in ("device_id", "start_ps", "duration_ps", "self_ps"):
        data[col] = pd.Series(take(col, np.int64), dtype="int64", copy=False)
    # copy=False: the columns are not consolidated into 2-D blocks (which would copy the whole table once)
    return pd.DataFrame({c: data.pop(c) for c in OP_EVENT_COLUMNS}, columns=list(OP_EVENT_COLUMNS), copy=False)


# --------------------------------------------------------------------------------------------------------
# Steps


def _as_step(v: Any) -> int | None:
    if isinstance(v, bool) or v is None:
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, str) and v.strip().lstrip("-").isdigit():
        return int(v)
    return None


def _host_steps(ctx: _PlaneOps, lines: list[_LineRef], source: str) -> list[tuple]:
    rows = []
    for ref in lines:
        for sl in _scan_ref(ref, ctx.want, source):
            rows.extend(_step_rows_of(ctx, sl, host=True))
    rows.sort(key=lambda r: (r[0], -r[1]))
    return rows


def step_events(xspace) -> pd.DataFrame:
    """One row per step marker.

    Sources:

    * Device planes (``/device:TPU:<n>``, ``/device:GPU:<n>``): every event of a line named ``Steps``
      (written by TPU runtimes, and by xprof when it post-processes GPU traces). The step number is the
      ``step_num`` stat, else the event name when it is an integer, else the ``group_id`` stat.
    * Host plane ``/host:CPU``: every event carrying a ``step_num`` stat, i.e. a
      ``jax.profiler.StepTraceAnnotation(name, step_num=i)`` region (the event name is ``name``).

    Args:
        xspace: a decoded XSpace (from :func:`read_xspace`), or an :class:`XSpaceIndex` (from
            :func:`open_xspace`; its host-plane markers are found by :func:`op_events` in the same pass
            when that ran first).

    Returns:
        A DataFrame with columns ``plane`` (str), ``device_id`` (int64, -1 on host), ``line`` (str),
        ``name`` (str), ``step_num`` (Int64, nullable), ``start_ps``, ``end_ps``, ``duration_ps`` (int64;
        absolute picoseconds as in :func:`op_events`), sorted by plane order then start.
    """
    import pandas as pd

    source = xspace.path if isinstance(xspace, XSpaceIndex) else "<xspace>"
    out: dict[str, list] = {c: [] for c in STEP_EVENT_COLUMNS}
    for plane_i, (plane, lines) in enumerate(_plane_sources(xspace)):
        pname = plane.name
        kind, dev = _device_id(pname)
        if kind is None and pname != HOST_PLANE:
            continue
        if kind is None and isinstance(xspace, XSpaceIndex) and plane_i in xspace._steps:
            rows = xspace._steps[plane_i]
        else:
            ctx = _PlaneOps(plane, _STEP_STATS)
            if kind is None:
                if "step" not in ctx.ids.values() and not ctx.md_step:
                    continue  # no step_num stat anywhere on this plane
                rows = _host_steps(ctx, lines, source)
            else:
                rows = []
                for ref in lines:
                    if ref.name is not None and ref.name != STEPS_LINE:
                        continue
                    for sl in _scan_ref(ref, ctx.want, source):
                        if sl.name != STEPS_LINE:
                            break
                        rows.extend(_step_rows_of(ctx, sl, host=False))
                rows.sort(key=lambda r: (r[0], -r[1]))
        for start, dur, lname, name, step in rows:
            out["plane"].append(pname)
            out["device_id"].append(dev)
            out["line"].append(lname)
            out["name"].append(name)
            out["step_num"].append(step)
            out["start_ps"].append(start)
            out["end_ps"].append(start + dur)
            out["duration_ps"].append(dur)

    return pd.DataFrame(
        {
            "plane": pd.Series(out["plane"], dtype=object),
            "device_id": pd.Series(out["device_id"], dtype="int64"),
            "line": pd.Series(out["line"], dtype=object),
            "name": pd.Series(out["name"], dtype=object),
            "step_num": pd.Series(out["step_num"], dtype="Int64"),
            "start_ps": pd.Series(out["start_ps"], dtype="int64"),
            "end_ps": pd.Series(out["end_ps"], dtype="int64"),
            "duration_ps": pd.Series(out["duration_ps"], dtype="int64"),
        },
        columns=list(STEP_EVENT_COLUMNS),
    )
