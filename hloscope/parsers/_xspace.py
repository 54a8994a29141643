"""Reader for profiler XSpace files (``*.xplane.pb``): HLO protos, per-op events and step markers.

An XSpace is what ``jax.profiler.trace(log_dir)`` writes to ``log_dir/plugins/profile/<run>/<host>.xplane.pb``.
Schema: ``tsl/profiler/protobuf/xplane.proto`` (see :mod:`hloscope.parsers._xspace_schema`). Names of planes,
lines and stats follow ``xla/tsl/profiler/utils/xplane_schema.cc``; what each platform actually writes is
documented in ``docs/xspace.md``.

This module gathers the public names of the reader, which lives in one module per idea:

* ``_xspace_file`` -- the file: :func:`read_xspace` (bytes to an ``XSpace`` message, :class:`TraceError` for
  bad input), :func:`open_xspace` (the lean alternative for large files: an :class:`XSpaceIndex`, plane
  metadata decoded, lines located but not decoded), and the lines of either as serialized bytes, scanned in
  order (on large planes by a read-ahead thread: ``_scan_refs``).
* ``_xspace_wire`` -- the protobuf wire-format scanner: all events of a line decoded at once with numpy.
* ``_xspace_names`` -- names of planes, lines and stats; a stat's value.
* ``_xspace_plane`` -- per-plane lookups (stat ids, metadata stats as arrays) and name interning.
* ``_xspace_ops`` -- :func:`op_events`: one row per executed HLO op (TPU ``XLA Ops``, GPU kernels, CPU
  thunks), per file, in the per-file columns ``OP_EVENT_COLUMNS``.
* ``_xspace_steps`` -- :func:`step_events`: step markers (device ``Steps`` lines, host ``step_num``
  annotations).
* ``_xspace_hlo`` -- :func:`hlo_protos` (the serialized ``xla.HloProto`` of every compiled module,
  ``/host:metadata`` plane) and :func:`hlo_proto_to_text` (printed by jaxlib).
* ``_xspace_events`` -- :func:`read_xspace_events`: the files of one run as the one op-events table of
  :mod:`hloscope.parsers.events` (``TraceEvents``), which is what the rest of hloscope reads.
"""

from __future__ import annotations

from hloscope.parsers._trace_error import TraceError
from hloscope.parsers._xspace_events import read_xspace_events
from hloscope.parsers._xspace_file import XSpaceIndex, open_xspace, parse_xspace, read_xspace
from hloscope.parsers._xspace_hlo import HloProtoEntry, hlo_module_proto, hlo_proto_to_text, hlo_protos
from hloscope.parsers._xspace_names import (  # noqa: F401  (names other modules import from here)
    HOST_PLANE,
    METADATA_PLANE,
    OP_EVENT_COLUMNS,
    STEP_EVENT_COLUMNS,
    STEPS_LINE,
    XLA_MODULES_LINE,
    XLA_OPS_LINE,
    _split_module_key,
)
from hloscope.parsers._xspace_ops import _self_times, _self_times_np, op_events  # noqa: F401
from hloscope.parsers._xspace_steps import _as_step, step_events  # noqa: F401

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
    "read_xspace_events",
    "step_events",
]
