"""The HLO of every compiled module, as JAX embeds it in a profile (``/host:metadata`` plane), and its text.

Each module is an ``XEventMetadata`` named ``<module>(<program_id>)`` with a ``Hlo Proto`` stat holding a
serialized ``xla.HloProto``; :func:`hlo_proto_to_text` prints one with jaxlib (details: ``docs/xspace.md``), and
:func:`hlo_text_printer` makes that a callable whose failure (a corrupted or foreign proto) is a ``TraceError``
naming the file and the module. What jaxlib logs on file descriptor 2 while it reads a proto (``E... RET_CHECK
failure``, a C++ stack trace) is captured, so that the CLI's stderr keeps its one line, and the first log line
is put in the error.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
from dataclasses import dataclass
from typing import Callable

from google.protobuf.message import DecodeError

from hloscope._regex import LazyPattern
from hloscope.parsers import _xspace_schema as _schema
from hloscope.parsers._trace_error import TraceError
from hloscope.parsers._xspace_names import (
    METADATA_PLANE,
    STAT_HLO_PROTO,
    STAT_PROGRAM_ID,
    _as_program_id,
    _split_module_key,
    _stat_ids,
    _stat_names,
    _stat_value,
)


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
        xspace: a decoded XSpace (``read_xspace``) or an ``XSpaceIndex`` (``open_xspace``: its planes are
            decoded without their lines, which is all this reads).

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
            module_name, suffix_id = _module_key(md.name)
            out.append(
                HloProtoEntry(
                    module_name=module_name,
                    program_id=pid if pid is not None else suffix_id,
                    metadata_name=md.name,
                    hlo_proto=bytes(proto),
                )
            )
    return out


def _module_key(name: str) -> tuple[str, int | None]:
    """``_split_module_key``, for a name whose ``(id)`` suffix may be any string of digits: an id of more than
    20 digits (no 64-bit program id has them; ``int`` refuses more than 4300) leaves the name whole."""
    open_ = name.rfind("(")
    if open_ >= 0 and len(name) - open_ > 23:
        return name, None
    return _split_module_key(name)


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
        ValueError: jaxlib rejects the bytes (not an HLO proto, or from an incompatible XLA); the message holds
            jaxlib's reason and the first line jaxlib logged.
        ImportError: jaxlib is not installed.
    """
    from jax._src.lib import xla_client as xc  # lazy: jaxlib import costs ~1 s

    module_bytes = hlo_module_proto(serialized)
    with _captured_fd2() as log:
        try:
            module = xc.hlo.HloModule.from_serialized_hlo_module_proto(module_bytes)
            if short_parsable:
                return module.to_string(xc.hlo.HloPrintOptions.short_parsable())
            return module.to_string()
        except Exception as e:  # jaxlib raises XlaRuntimeError / JaxRuntimeError
            failure = e
    why = str(failure).splitlines()[0] if str(failure) else type(failure).__name__
    logged = _first_log_line(log)
    raise ValueError(f"jaxlib cannot deserialize this HLO proto ({len(serialized):,} bytes): {why}"
                     + (f"; jaxlib logged: {logged}" if logged and logged not in why else "")) from failure


def hlo_text_printer(entry: HloProtoEntry, path: str | os.PathLike[str]) -> Callable[[], str]:
    """``entry.to_text`` as a zero-argument callable (what ``TraceEvents.hlo_modules`` holds) that raises
    ``TraceError`` naming ``path`` and the module when jaxlib rejects the proto.

    Raises (when called):
        TraceError: the embedded proto is corrupted, or from an XLA this jaxlib cannot read.
    """

    def to_text() -> str:
        try:
            return entry.to_text()
        except ValueError as e:
            raise TraceError(path, f"module {entry.metadata_name}: the embedded HLO proto cannot be read ({e}); "
                                   "the profile is corrupted or was written by an incompatible XLA: pass the "
                                   "module's HLO text with --hlo FILE (hlo=[...] in hloscope.analyze)") from None

    return to_text


_LOG_LINE = LazyPattern(r"^[EFW]\d{4} [\d:.]+\s+\d+ [^\]]*\] (.*)$", re.MULTILINE)


def _first_log_line(log: list[str]) -> str:
    """The message of the first error line of a captured glog / absl log (``E1124 ... file.cc:58] msg``)."""
    text = log[0] if log else ""
    m = _LOG_LINE.search(text)
    line = m.group(1) if m else next((ln for ln in text.splitlines() if ln.strip()), "")
    return line.strip()[:300]


@contextlib.contextmanager
def _captured_fd2():
    """While the block runs, what is written to file descriptor 2 (C++ log lines) goes to a temporary file;
    its text is appended to the yielded list when the block ends. Nothing is captured (and the list stays
    empty) when descriptor 2 is not open."""
    import tempfile

    log: list[str] = []
    try:
        saved = os.dup(2)
    except OSError:
        yield log
        return
    try:
        sys.stderr.flush()
    except (AttributeError, OSError, ValueError):
        pass
    with tempfile.TemporaryFile() as tmp:
        os.dup2(tmp.fileno(), 2)
        try:
            yield log
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            tmp.seek(0)
            log.append(tmp.read(1 << 16).decode("utf-8", "replace"))
