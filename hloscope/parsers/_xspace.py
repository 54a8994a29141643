"""Reader for profiler XSpace files (``*.xplane.pb``): HLO protos, per-op events and step markers.

An XSpace is what ``jax.profiler.trace(log_dir)`` writes to ``log_dir/plugins/profile/<run>/<host>.xplane.pb``.
Schema: ``tsl/profiler/protobuf/xplane.proto`` (see :mod:`hloscope.parsers._xspace_schema`). Names of planes,
lines and stats follow ``xla/tsl/profiler/utils/xplane_schema.cc``; what each platform actually writes is
documented in ``docs/xspace.md``.

Public functions:

* :func:`read_xspace` -- bytes on disk to an ``XSpace`` message, with :class:`TraceError` for bad input.
* :func:`hlo_protos` -- the serialized ``xla.HloProto`` of every compiled module (``/host:metadata`` plane).
* :func:`hlo_proto_to_text` -- one of those protos printed as HLO text by jaxlib.
* :func:`op_events` -- one row per executed HLO op (TPU ``XLA Ops`` line, GPU kernels, CPU thunks).
* :func:`step_events` -- one row per step marker (device ``Steps`` lines, host ``step_num`` annotations).
"""

from __future__ import annotations

import gzip
import os
import re
import zlib
from bisect import bisect_right
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from google.protobuf.message import DecodeError, Message

from hloscope.parsers import _xspace_schema as _schema

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = [
    "HloProtoEntry",
    "TraceError",
    "hlo_module_proto",
    "hlo_proto_to_text",
    "hlo_protos",
    "op_events",
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


class TraceError(ValueError):
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
# Op events

_OP_STATS = {
    STAT_HLO_OP: "op",
    STAT_HLO_MODULE: "module",
    STAT_PROGRAM_ID: "pid",
    STAT_DEVICE_ORDINAL: "dev",
    STAT_CORRELATION_ID: "corr",
}


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


class _Columns:
    __slots__ = OP_EVENT_COLUMNS

    def __init__(self) -> None:
        for c in OP_EVENT_COLUMNS:
            setattr(self, c, [])


def _emit_line(cols: _Columns, plane_name: str, line_name: str, rows: list[tuple], default_dev: int) -> None:
    """Sort one line's op rows by start, compute self time, append to the column lists.

    ``rows`` items: ``(start_ps, duration_ps, name, hlo_op, hlo_module, program_id, device_id|None)``.
    """
    if not rows:
        return
    rows.sort(key=lambda r: (r[0], -r[1]))
    starts = [r[0] for r in rows]
    durs = [r[1] for r in rows]
    selfs = _self_times(starts, durs)
    n = len(rows)
    cols.plane.extend([plane_name] * n)
    cols.line.extend([line_name] * n)
    cols.start_ps.extend(starts)
    cols.duration_ps.extend(durs)
    cols.self_ps.extend(selfs)
    cols.name.extend([r[2] for r in rows])
    cols.hlo_op.extend([r[3] for r in rows])
    cols.hlo_module.extend([r[4] for r in rows])
    cols.program_id.extend([r[5] for r in rows])
    cols.device_id.extend([default_dev if r[6] is None else r[6] for r in rows])


def _line_ops(line, md_names, md_stats, ids, names, *, skip_correlated: bool, every_event: bool) -> list[tuple]:
    """Op rows of one line: events whose (event or metadata) stats name an ``hlo_op``.

    With ``every_event`` (TPU ``XLA Ops``) each event is an op and the metadata name is its HLO op name.
    With ``skip_correlated`` (host plane) events carrying ``correlation_id`` are skipped: on GPU runs those
    are kernel-*launch* API calls annotated with the op they launch, not op executions.

    This is the hot loop (one iteration per event of the trace): attribute lookups are hoisted into locals
    and ``ref_value`` stats -- the usual encoding of ``hlo_op`` / ``hlo_module`` -- are resolved without
    ``WhichOneof`` (a ref is never 0: stat-metadata ids start at 1).
    """
    base = line.timestamp_ns * 1000
    rows: list[tuple] = []
    append = rows.append
    empty: dict[str, Any] = {}
    ids_get = ids.get
    names_get = names.get
    md_get = md_stats.get
    pid_cache: dict[Any, int | None] = {}
    for ev in line.events:
        offset = ev.offset_ps
        if not offset and ev.num_occurrences:  # aggregated event (derived XSpaces): no timestamp
            continue
        mid = ev.metadata_id
        mds = md_get(mid, empty)
        if mds:
            op = mds.get("op")
            module = mds.get("module")
            pid = mds.get("pid")
            dev = mds.get("dev")
            corr = "corr" in mds
        else:
            op = module = pid = dev = None
            corr = False
        for st in ev.stats:
            key = ids_get(st.metadata_id)
            if key is None:
                continue
            if key == "corr":
                corr = True
                continue
            ref = st.ref_value
            v = names_get(ref, "") if ref else _stat_value(st, names)
            if key == "op":
                op = v
            elif key == "module":
                module = v
            elif key == "pid":
                pid = v
            else:
                dev = v
        if not op:
            if not every_event:
                continue
            op = md_names.get(mid, "")
        if skip_correlated and corr:
            continue
        if pid is not None:
            raw = pid
            try:
                pid = pid_cache[raw]
            except KeyError:
                pid = pid_cache[raw] = _as_program_id(raw)
        append(
            (
                base + offset,
                ev.duration_ps,
                md_names.get(mid, ""),
                op if type(op) is str else str(op),
                "" if module is None else module if type(module) is str else str(module),
                pid,
                None if dev is None or isinstance(dev, (str, bytes, float)) else int(dev),
            )
        )
    return rows


def _module_spans(plane, md_names, names) -> tuple[list[int], list[tuple[int, str, int | None]]]:
    """TPU ``XLA Modules`` line: sorted starts and (end, module name, program id) for enclosure lookups."""
    spans = []
    pid_ids = _stat_ids(names, {STAT_PROGRAM_ID: "pid"})
    for line in plane.lines:
        if line.name != XLA_MODULES_LINE:
            continue
        base = line.timestamp_ns * 1000
        for ev in line.events:
            module, pid = _split_module_key(md_names.get(ev.metadata_id, ""))
            for st in ev.stats:
                if st.metadata_id in pid_ids:
                    pid = _as_program_id(_stat_value(st, names)) or pid
            start = base + ev.offset_ps
            spans.append((start, start + ev.duration_ps, module, pid))
    spans.sort()
    return [s[0] for s in spans], [(s[1], s[2], s[3]) for s in spans]


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
        xspace: a decoded XSpace (from :func:`read_xspace`).

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
    """
    import pandas as pd

    cols = _Columns()
    for plane in xspace.planes:
        pname = plane.name
        kind, dev_from_name = _device_id(pname)
        is_host = pname == HOST_PLANE
        if kind is None and not is_host:
            continue
        names = _stat_names(plane)
        ids = _stat_ids(names, _OP_STATS)
        if kind != "TPU" and "op" not in ids.values():
            continue  # GPU/host plane without any hlo_op stat: nothing to find
        md_names = {k: v.name for k, v in plane.event_metadata.items()}
        md_stats = _resolve_md_stats(plane, names, ids)
        if kind == "TPU":
            mod_starts, mod_spans = _module_spans(plane, md_names, names)
            for line in plane.lines:
                if line.name != XLA_OPS_LINE:
                    continue
                rows = _line_ops(line, md_names, md_stats, ids, names, skip_correlated=False, every_event=True)
                if mod_starts:
                    for i, r in enumerate(rows):
                        if r[4] and r[5] is not None:
                            continue
                        j = bisect_right(mod_starts, r[0]) - 1
                        if j >= 0 and r[0] < mod_spans[j][0]:
                            _, mname, mpid = mod_spans[j]
                            rows[i] = r[:4] + (r[4] or mname, r[5] if r[5] is not None else mpid) + r[6:]
                _emit_line(cols, pname, line.name, rows, dev_from_name)
        elif kind == "GPU":
            for line in plane.lines:
                if line.name in _GPU_DERIVED_LINES:
                    continue
                rows = _line_ops(line, md_names, md_stats, ids, names, skip_correlated=False, every_event=False)
                # The device id comes from the plane name; a device_ordinal stat would not override it.
                rows = [r[:6] + (None,) for r in rows]
                _emit_line(cols, pname, line.name, rows, dev_from_name)
        else:
            for line in plane.lines:
                rows = _line_ops(line, md_names, md_stats, ids, names, skip_correlated=True, every_event=False)
                _emit_line(cols, pname, line.name, rows, -1)

    return pd.DataFrame(
        {
            "plane": pd.Series(cols.plane, dtype=object),
            "device_id": pd.Series(cols.device_id, dtype="int64"),
            "line": pd.Series(cols.line, dtype=object),
            "name": pd.Series(cols.name, dtype=object),
            "hlo_op": pd.Series(cols.hlo_op, dtype=object),
            "hlo_module": pd.Series(cols.hlo_module, dtype=object),
            "program_id": pd.Series(cols.program_id, dtype="UInt64"),
            "start_ps": pd.Series(cols.start_ps, dtype="int64"),
            "duration_ps": pd.Series(cols.duration_ps, dtype="int64"),
            "self_ps": pd.Series(cols.self_ps, dtype="int64"),
        },
        columns=list(OP_EVENT_COLUMNS),
    )


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


def step_events(xspace) -> pd.DataFrame:
    """One row per step marker.

    Sources:

    * Device planes (``/device:TPU:<n>``, ``/device:GPU:<n>``): every event of a line named ``Steps``
      (written by TPU runtimes, and by xprof when it post-processes GPU traces). The step number is the
      ``step_num`` stat, else the event name when it is an integer, else the ``group_id`` stat.
    * Host plane ``/host:CPU``: every event carrying a ``step_num`` stat, i.e. a
      ``jax.profiler.StepTraceAnnotation(name, step_num=i)`` region (the event name is ``name``).

    Args:
        xspace: a decoded XSpace (from :func:`read_xspace`).

    Returns:
        A DataFrame with columns ``plane`` (str), ``device_id`` (int64, -1 on host), ``line`` (str),
        ``name`` (str), ``step_num`` (Int64, nullable), ``start_ps``, ``end_ps``, ``duration_ps`` (int64;
        absolute picoseconds as in :func:`op_events`), sorted by plane order then start.
    """
    import pandas as pd

    out: dict[str, list] = {c: [] for c in STEP_EVENT_COLUMNS}

    def add(pname, dev, lname, name, step, start, dur):
        out["plane"].append(pname)
        out["device_id"].append(dev)
        out["line"].append(lname)
        out["name"].append(name)
        out["step_num"].append(step)
        out["start_ps"].append(start)
        out["end_ps"].append(start + dur)
        out["duration_ps"].append(dur)

    for plane in xspace.planes:
        pname = plane.name
        kind, dev = _device_id(pname)
        if kind is None and pname != HOST_PLANE:
            continue
        names = _stat_names(plane)
        ids = _stat_ids(names, {STAT_STEP_NUM: "step", STAT_GROUP_ID: "group"})
        md_names = {k: v.name for k, v in plane.event_metadata.items()}
        md_stats = _resolve_md_stats(plane, names, ids)
        rows = []
        ids_get = ids.get
        for line in plane.lines:
            if kind is not None and line.name != STEPS_LINE:
                continue
            base = line.timestamp_ns * 1000
            for ev in line.events:
                offset = ev.offset_ps
                if not offset and ev.num_occurrences:
                    continue
                mds = md_stats.get(ev.metadata_id)
                step = group = None
                if mds:
                    step = mds.get("step")
                    group = mds.get("group")
                for st in ev.stats:
                    key = ids_get(st.metadata_id)
                    if key == "step":
                        step = _stat_value(st, names)
                    elif key == "group":
                        group = _stat_value(st, names)
                if kind is None and step is None:
                    continue  # host plane: only step annotations
                name = md_names.get(ev.metadata_id, "")
                step = _as_step(step)
                if step is None and name.strip().isdigit():
                    step = int(name)
                if step is None:
                    step = _as_step(group)
                rows.append((base + offset, ev.duration_ps, line.name, name, step))
        rows.sort(key=lambda r: (r[0], -r[1]))
        for start, dur, lname, name, step in rows:
            add(pname, dev, lname, name, step, start, dur)

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
