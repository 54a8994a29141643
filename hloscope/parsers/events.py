"""The op-events table: what every trace reader returns, whatever the file format.

A profile says what the program *did*: which HLO instruction ran on which device, when, for how long. The
XSpace reader (``*.xplane.pb``, ``hloscope.parsers._xspace``) and the Chrome-trace reader
(``*.trace.json.gz``, ``hloscope.parsers._chrome_trace``) both return a :class:`TraceEvents` with the tables
below, so that the join-and-score stage (``hloscope.roofline.tables``) has one input. Times are integer
picoseconds on the trace's own clock (XSpace ``line.timestamp_ns * 1000 + offset_ps``, each host file shifted
onto the first file's capture start -- ``profile_start_time`` -- so that hosts line up; Chrome ``ts``
microseconds * 1e6); names are pandas ``category`` columns (a trace repeats a few hundred names
millions of times).

``ops`` -- one row per op event (``OP_COLUMNS``, then the optional ``OP_EXTRA_COLUMNS``):

================  =============  ==========================================================================
column            dtype          meaning
================  =============  ==========================================================================
``host``          category       the host that wrote the file (its file name's stem: ``localhost``)
``device``        category       device (or host plane) name as the trace gives it: ``/device:TPU:0``,
                                 ``/device:GPU:0``, ``/host:CPU``
``device_id``     int32          ``N`` of ``/device:{TPU,GPU}:N``; for CPU thunks the ``device_ordinal``
                                 stat; -1 when unknown
``stream``        category       the line / thread: ``XLA Ops``, a GPU stream, a host thread
``program_id``    UInt64         the executable's program id (nullable)
``module``        category       HLO module name (``jit_train_step``); ``""`` when unknown
``instruction``   category       HLO instruction name as printed in the module (``fusion.12``)
``name``          category       the event's own name: a kernel name on GPU, else the instruction
``step``          Int64          the step marker the event starts in (nullable: no markers, or outside)
``start_ps``      int64          start
``duration_ps``   int64          duration (TPU Chrome traces: ``device_duration_ps`` when given)
``self_ps``       int64          duration minus op events nested directly inside it on the same stream
================  =============  ==========================================================================

``OP_EXTRA_COLUMNS`` exist only where the format carries them (TPU Chrome traces): ``hlo_text`` (the
instruction's HLO line, XLA's ``long_name``), ``hlo_category``, ``xla_flops`` and ``xla_bytes_accessed``
(libtpu's own numbers for one execution, NaN when absent), ``op_name`` (framework op, ``tf_op``) and
``source`` (``file:line``).

``steps`` (``STEP_COLUMNS``): ``host``, ``device``, ``device_id``, ``name``, ``step`` (Int64), ``start_ps``,
``duration_ps`` -- step markers: device ``Steps`` lines, host ``StepTraceAnnotation`` regions.

``module_runs`` (``MODULE_RUN_COLUMNS``): ``host``, ``device``, ``device_id``, ``module``, ``program_id``,
``start_ps``, ``duration_ps`` -- one row per execution of a module on a device (TPU ``XLA Modules`` lines);
empty where the trace has no such line (CPU and GPU XSpaces).

Readers import nothing from ``hloscope.cost``, ``hloscope.roofline`` or ``hloscope.report``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

OP_COLUMNS = ("host", "device", "device_id", "stream", "program_id", "module", "instruction", "name", "step",
              "start_ps", "duration_ps", "self_ps")
OP_EXTRA_COLUMNS = ("hlo_text", "hlo_category", "xla_flops", "xla_bytes_accessed", "op_name", "source")
STEP_COLUMNS = ("host", "device", "device_id", "name", "step", "start_ps", "duration_ps")
MODULE_RUN_COLUMNS = ("host", "device", "device_id", "module", "program_id", "start_ps", "duration_ps")
#: Module name the join stage gives op events whose ``module`` is unknown (``""``).
NO_MODULE = "(no module)"


@dataclass
class TraceEvents:
    """What a profile holds, in the one schema of the module docstring.

    Attributes:
        ops: op events (``OP_COLUMNS`` [+ ``OP_EXTRA_COLUMNS``]), sorted by host, device, stream, start.
        steps: step markers (``STEP_COLUMNS``); empty when the trace has none.
        module_runs: module executions (``MODULE_RUN_COLUMNS``); empty when the trace has none.
        hlo_modules: module name -> a zero-argument callable returning the module's HLO text (XSpace files
            embed each executable's HLO proto; Chrome traces embed none). The callable names its source in
            the text it returns (``<file>:<metadata name>``) via ``hlo_sources``.
        hlo_sources: module name -> a label of where its HLO came from (for error messages).
        platform: ``"tpu"``, ``"gpu"`` or ``"cpu"``: the kind of device the ops ran on.
        device_kind: the device's own name when the trace states it (``"NVIDIA H100 80GB HBM3"``,
            ``"TPU v6 lite"``), else None; ``hloscope.roofline.chips.get_device_spec`` maps it to a chip.
        files: the files read, in order.
        notes: what the reader noticed (skipped lines, assumptions), in words.
    """

    ops: pd.DataFrame
    steps: pd.DataFrame
    module_runs: pd.DataFrame
    hlo_modules: dict[str, Any] = field(default_factory=dict)
    hlo_sources: dict[str, str] = field(default_factory=dict)
    platform: str = "cpu"
    device_kind: str | None = None
    files: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


_NO_OPS = ("no per-HLO-op events in this trace (expected XLA Ops lines on /device:TPU, kernels with hlo_op stats on "
           "/device:GPU, or CPU thunks with hlo_op stats); re-capture with jax.profiler.trace around jitted steps")
_CHROME_SUFFIXES = (".trace.json.gz", ".trace.json")


def read_trace(path: str | os.PathLike[str], run: str | None = None) -> TraceEvents:
    """Read a profile into the op-events table, whatever its format.

    Args:
        path: a Chrome trace (``*.trace.json`` / ``*.trace.json.gz``, read by
            ``hloscope.parsers._chrome_trace.read_chrome_events``); else anything
            ``hloscope.parsers._trace_dir.find_xplane_files`` accepts -- a log dir, its ``plugins/profile``
            dir, a run dir, one ``*.xplane.pb`` -- whose run's files are read by
            ``hloscope.parsers._xspace.read_xspace_events``.
        run: for a log dir, the run (subdirectory of ``plugins/profile``) to read; default the newest. For a
            Chrome trace, None or the name of the directory holding it.

    Returns:
        The :class:`TraceEvents` of the profile, with at least one op event.

    Raises:
        TraceError: the path or run does not exist (a broken symbolic link among them) or cannot be looked up
            or listed (permission denied, a NUL character, too long), a file is unreadable or corrupted, or the
            trace holds no per-op events (the error names the run dir, or the Chrome trace file; control
            characters of names escaped). Never an ``OSError``.
    """
    from hloscope.parsers._trace_dir import checked_path, lookup
    from hloscope.parsers._trace_error import TraceError

    p = checked_path(path)  # a path no system can look up (a NUL, too long): a TraceError naming it
    if p.name.endswith(_CHROME_SUFFIXES) and lookup(p) == "file":  # lookup: permission denied is a TraceError
        if run is not None and run != p.parent.name:
            raise TraceError(p, f"run={run!r} was requested but this file is in {p.parent.name!r}; pass the log "
                                "dir to choose among runs, or drop run=")
        from hloscope.parsers._chrome_trace import read_chrome_events

        events, where = read_chrome_events(p), p
    else:
        from hloscope.parsers._trace_dir import find_xplane_files
        from hloscope.parsers._xspace_events import read_xspace_events

        where, files = find_xplane_files(p, run)
        events = read_xspace_events(files)
    if events.ops.empty:
        raise TraceError(where, _NO_OPS)
    return events


def dense_codes(key, size: int):
    """``np.unique(key, return_inverse=True)`` for integer keys in ``[0, size)`` (a few modules x instructions,
    hosts x devices): the distinct keys in increasing order, and each key's index among them in ``key``'s dtype
    -- by a lookup table of ``size`` entries instead of a sort of the keys (an events table holds millions of
    rows and few distinct keys)."""
    import numpy as np

    seen = np.zeros(size, bool)
    seen[key] = True
    uniq = np.flatnonzero(seen)
    lut = np.zeros(size, key.dtype)
    lut[uniq] = np.arange(uniq.size, dtype=key.dtype)
    return uniq, lut[key]
