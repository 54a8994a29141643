"""The ``*.xplane.pb`` files of one profiling run as the one op-events table (:func:`read_xspace_events`).

Builds :class:`hloscope.parsers.events.TraceEvents` (schema and dtypes in :mod:`hloscope.parsers.events`) on the
per-file readers: :func:`~hloscope.parsers._xspace_ops._op_segments` (the op events of a file, names as
integer codes), :func:`~hloscope.parsers._xspace_steps._step_markers` and
:func:`~hloscope.parsers._xspace_hlo.hlo_protos`, every file read through
:func:`~hloscope.parsers._xspace_file.open_xspace` (events decoded line by line from the file). Name columns
become ``category`` columns straight from the codes, so no string is created per event.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from hloscope._regex import LazyPattern
from hloscope.parsers._xspace_file import _release_freed_memory, open_xspace
from hloscope.parsers._xspace_hlo import hlo_protos, hlo_text_printer
from hloscope.parsers._xspace_names import DEVICE_KIND_STATS, HOST_PLANE, _stat_names, _stat_value
from hloscope.parsers._xspace_ops import _op_segments
from hloscope.parsers._xspace_plane import _Strings
from hloscope.parsers._xspace_steps import _step_markers
from hloscope.parsers.events import MODULE_RUN_COLUMNS, OP_COLUMNS, STEP_COLUMNS, TraceEvents

_XPLANE_SUFFIX = ".xplane.pb"
_DIGITS = LazyPattern(r"(\d+)")


def host_name(path: str | os.PathLike[str]) -> str:
    """The host that wrote an xplane file: its name up to ``.xplane.pb`` (``localhost``, ``t1v-n-0-w-3``)."""
    name = Path(path).name
    i = name.find(_XPLANE_SUFFIX)
    return name[:i] if i > 0 else name


def _int64_or_none(step):
    """A step number as the ``Int64`` column holds it: None (NA) when it is beyond 64 bits."""
    return step if step is None or -(1 << 63) <= step < 1 << 63 else None


def _natural(s: str) -> tuple:
    """Sort key that orders the numbers inside names by value: ``GPU:2`` before ``GPU:10`` (a run of digits
    compares by its length without leading zeros, then its digits: no ``int`` of a 5000-digit run)."""
    parts = _DIGITS.split(s)
    return tuple((len(p.lstrip("0")), p.lstrip("0")) if i % 2 else p for i, p in enumerate(parts))


def read_xspace_events(files: list[str | os.PathLike[str]], reference_ns: int | None = None) -> TraceEvents:
    """Read the xplane files of one run (one per host) into one op-events table.

    Per file (rules of :func:`~hloscope.parsers._xspace.op_events` and
    :func:`~hloscope.parsers._xspace.step_events`; ``docs/xspace.md``): the op events of every device and host
    plane, the step markers, the TPU ``XLA Modules`` events and the embedded HLO protos.

    * ``ops`` (``OP_COLUMNS``): ``host`` is the file's name up to ``.xplane.pb``; ``device`` the plane name;
      ``stream`` the line name; ``instruction`` the ``hlo_op`` (TPU: the event name when there is none);
      ``name`` the event's name (a kernel name on GPU); ``module`` the ``hlo_module`` (TPU: from the enclosing
      ``XLA Modules`` event when absent, else ``""``). ``step``: the step marker whose ``[start, start +
      duration)`` holds the event's start -- markers of the same host and device when that device has any
      (TPU ``Steps`` lines), else the host's ``StepTraceAnnotation`` markers; of overlapping markers, the one
      that starts last at or before the event; NA when none holds it, or the marker has no step number. Rows
      sorted by host, device, stream (numbers in names by value: ``GPU:2`` before ``GPU:10``), then start
      (then longest first); category values sorted the same way.
    * ``steps`` (``STEP_COLUMNS``): the markers, sorted like the ops. ``module_runs`` (``MODULE_RUN_COLUMNS``):
      one row per event of a TPU ``XLA Modules`` line; empty (with the columns) for CPU and GPU captures.
    * ``hlo_modules``: module name -> ``HloProtoEntry.to_text`` (a zero-argument callable printing the HLO
      with jaxlib when called; ``TraceError`` naming the file and module when the proto is corrupted:
      ``hloscope.parsers._xspace_hlo.hlo_text_printer``); the first proto of a module name over the files wins
      (protos in compilation order). ``hlo_sources``: module name -> ``"<file>:<metadata name>"``.
    * ``platform``: ``"cpu"`` when every op event is on ``/host:CPU``, ``"gpu"`` when any is on a
      ``/device:GPU:N`` plane, else ``"tpu"``. ``device_kind``: the ``device_type_string`` (TPU) or
      ``gpu_device_name`` (NVIDIA GPU) stat of the device planes that hold op events (else of any device
      plane), None when absent (CPU; the ROCm captures seen carry only ``device_vendor``).

    dtypes: ``host``, ``device``, ``stream``, ``module``, ``instruction``, ``name`` category (str values);
    ``device_id`` int32; ``program_id`` UInt64; ``step`` Int64; ``start_ps``, ``duration_ps``, ``self_ps``
    int64 (ps). The same-named columns of ``steps`` and ``module_runs`` have the same dtypes.

    Host clocks: each file's line timestamps are relative to its own capture start, the ``profile_start_time``
    stat (ns since the epoch) of its ``Task Environment`` plane; every file's times are shifted by its start
    minus ``reference_ns`` (default: the first file's start), so that the hosts of one run line up (a single
    file is not shifted; a file without the stat neither).

    Args:
        files: the ``*.xplane.pb`` (or ``.xplane.pb.gz``) files of one run, e.g. from
            :func:`hloscope.parsers._trace_dir.find_xplane_files`.
        reference_ns: the capture start to line the files up on (``hloscope.pod`` passes the run's first file's,
            reading one file per task).

    Returns:
        A :class:`TraceEvents`. A run without op events gives an empty ``ops`` table (``read_trace`` turns
        that into an error).

    Raises:
        TraceError: a file is missing, unreadable, corrupted or not an XSpace.
    """
    paths = [Path(f) for f in files]
    strings = _Strings()
    per_file = []  # (host, _OpSegments) of each file
    markers: list[tuple] = []  # (host, plane, device_id, name, step, start, duration)
    module_runs: list[tuple] = []  # (host, plane, device_id, module, program_id, start, duration)
    hlo_modules: dict[str, Any] = {}
    hlo_sources: dict[str, str] = {}
    kinds: list[tuple[bool, str]] = []  # (the plane has op events, its device kind)
    notes: list[str] = []
    for path in paths:
        host = host_name(path)
        ix = open_xspace(path)
        seg = _op_segments(ix, strings)  # first: it collects the host's step markers in the same pass
        _release_freed_memory()  # (the scanner's freed temporaries)
        per_file.append((host, seg))
        # Host clocks: a file's times are relative to its own capture start (profile_start_time); shifted onto
        # the reference's so that hosts line up (0 for one file, or a file without the stat).
        start_ns = profile_start_ns(ix)
        if reference_ns is None:
            reference_ns = start_ns
        shift = (start_ns - reference_ns) * 1000 if start_ns is not None and reference_ns is not None else 0
        if shift:
            seg.cols["start"] = [a + shift for a in seg.cols["start"]]
        markers.extend((host, p, d, name, _int64_or_none(step), start + shift, dur)
                       for p, d, _, name, step, start, dur in _step_markers(ix))
        module_runs.extend((host, p, d, module, pid, start + shift, end - start)
                           for p, d, start, end, module, pid in seg.module_runs)
        in_file: dict[str, list] = {}
        for entry in hlo_protos(ix):
            in_file.setdefault(entry.module_name, []).append(entry)
            if entry.module_name not in hlo_modules:
                hlo_modules[entry.module_name] = hlo_text_printer(entry, path)
                hlo_sources[entry.module_name] = f"{path}:{entry.metadata_name}"
        notes.extend(_recompiled(path, seg, strings, in_file))
        op_planes = {p for p, _, _ in seg.segments}
        for plane in ix.planes:
            kind = _device_kind(plane) if plane.name.startswith("/device:") else None
            if kind:
                kinds.append((plane.name in op_planes, kind))
        if not seg.segments:
            notes.append(f"{path}: no per-HLO-op events in this file")
    ops = _ops_frame(per_file, strings, markers)
    _release_freed_memory()  # (the per-line pieces the table was joined from)
    platform = _platform(set(ops["device"].cat.categories))
    on_ops = [k for has_ops, k in kinds if has_ops] or [k for _, k in kinds]
    device_kind = on_ops[0] if on_ops else None
    if len(set(on_ops)) > 1:
        notes.append(f"devices of several kinds: {', '.join(sorted(set(on_ops)))}; device_kind is the first, "
                     f"{device_kind}")
    return TraceEvents(
        ops=ops,
        steps=_steps_frame(markers),
        module_runs=_module_runs_frame(module_runs),
        hlo_modules=hlo_modules,
        hlo_sources=hlo_sources,
        platform=platform,
        device_kind=device_kind,
        files=[str(p) for p in paths],
        notes=notes,
    )


def _recompiled(path: Path, seg, strings: _Strings, protos: dict[str, list]) -> list[str]:
    """Notes on modules of one file that have several HLO protos (compilations with one name) of which one
    that is not the first ran: its events are joined with the first one's HLO."""
    import numpy as np

    notes = []
    for name, entries in protos.items():
        code = strings.get(name)
        if len(entries) < 2 or code is None:
            continue
        ran = set()
        for module, pid, ok in zip(seg.cols["module"], seg.cols["pid"], seg.cols["pid_ok"]):
            mask = (module == code) & ok
            if mask.any():
                ran.update(np.unique(pid[mask]).tolist())
        first = entries[0].program_id
        others = sorted(p for p in ran if p != first)
        if others:
            notes.append(f"{path}: module {name} was compiled {len(entries)} times "
                         f"({', '.join(e.metadata_name for e in entries)}); the events of program ids "
                         f"{', '.join(map(str, others))} are joined with the HLO of the first, {name}({first})")
    return notes


def _device_kind(plane) -> str | None:
    """The device's name from a device plane's own stats (``DEVICE_KIND_STATS``, first found), or None.

    A plane that names no device but states its vendor, compute capability, core count and memory size (the
    ROCm captures of the corpus: ``device_vendor = "AMD"``, ``compute_cap_major/minor`` 9/4, ``core_count``
    304, ``memory_size`` 192 GiB) is described from those: ``"AMD GPU (gfx9.4, 304 CUs, 192 GiB HBM)"``, a
    form ``hloscope.roofline.chips.get_device_spec`` resolves by vendor and HBM capacity.
    """
    names = _stat_names(plane)
    found = {}
    for st in plane.stats:
        key = names.get(st.metadata_id)
        if key in DEVICE_KIND_STATS or key in _DESCRIBING_STATS:
            value = _stat_value(st, names)
            if isinstance(value, str):
                value = value.strip()
            if value not in (None, ""):
                found[key] = value
    named = next((found[k] for k in DEVICE_KIND_STATS if isinstance(found.get(k), str)), None)
    if named is not None:
        return named
    vendor, memory = found.get("device_vendor"), found.get("memory_size")
    if not isinstance(vendor, str) or not isinstance(memory, int) or memory <= 0:
        return None
    parts = []
    if isinstance(found.get("compute_cap_major"), int) and isinstance(found.get("compute_cap_minor"), int):
        prefix = "gfx" if vendor == "AMD" else "sm_"
        parts.append(f"{prefix}{found['compute_cap_major']}.{found['compute_cap_minor']}")
    if isinstance(found.get("core_count"), int):
        parts.append(f"{found['core_count']} {'CUs' if vendor == 'AMD' else 'SMs'}")
    parts.append(f"{memory / 2**30:.0f} GiB HBM")
    return f"{vendor} GPU ({', '.join(parts)})"


# Device-plane stats that describe a device which states no name (``_device_kind``).
_DESCRIBING_STATS = frozenset({"device_vendor", "compute_cap_major", "compute_cap_minor", "core_count",
                               "memory_size"})


def _platform(devices: set[str]) -> str:
    if all(d.startswith(HOST_PLANE) for d in devices):
        return "cpu"
    return "gpu" if any(d.startswith("/device:GPU") for d in devices) else "tpu"


def _categorical(codes, values: list[str]):
    """``pd.Categorical`` of ``values[codes]`` whose categories are the values used, in natural order.

    Args:
        codes: int array (n,), each in ``[0, len(values))``.
        values: the string of each code.
    """
    import numpy as np
    import pandas as pd

    used = np.flatnonzero(np.bincount(codes, minlength=len(values))) if codes.size else np.zeros(0, np.int64)
    cats = [values[i] for i in used]
    order = sorted(range(len(cats)), key=lambda k: _natural(cats[k]))
    lut = np.zeros(len(values), np.int32)
    lut[used[order]] = np.arange(len(order), dtype=np.int32)
    dtype = pd.CategoricalDtype(pd.Index([cats[k] for k in order], dtype="str"))
    return pd.Categorical.from_codes(lut[codes], dtype=dtype, validate=False)


def _categorical_of(labels: list[str]):
    """``pd.Categorical`` of a short list of strings (steps, module runs)."""
    import numpy as np

    strings = _Strings()
    return _categorical(np.asarray(strings.codes(labels), np.int32), strings.values)


def _ops_frame(per_file: list, strings: _Strings, markers: list[tuple]):
    """The ``ops`` table: every file's segments, ordered by (host, device, stream), concatenated column by
    column; step numbers from the markers."""
    import numpy as np
    import pandas as pd

    # segments of all files, in table order; the same (host, device, stream) twice is merged and re-sorted
    segs = [(host, plane, line, f, k, n) for f, (host, seg) in enumerate(per_file)
            for k, (plane, line, n) in enumerate(seg.segments)]
    segs.sort(key=lambda s: (_natural(s[0]), _natural(s[1]), _natural(s[2])))
    counts = np.array([s[5] for s in segs], np.int64)
    bounds = np.zeros(len(segs) + 1, np.int64)
    np.cumsum(counts, out=bounds[1:])
    cols = {}
    for key, dtype in (("name", np.int32), ("op", np.int32), ("module", np.int32), ("pid", np.uint64),
                       ("pid_ok", bool), ("device_id", np.int32), ("start", np.int64), ("dur", np.int64),
                       ("self", np.int64)):
        parts = [per_file[f][1].cols[key][k] for _, _, _, f, k, _ in segs]
        for _, seg in per_file:  # each file's pieces freed as soon as they are joined
            seg.cols[key] = None
        cols[key] = np.concatenate(parts, dtype=dtype, casting="same_kind") if parts else np.zeros(0, dtype)
        del parts
    i = 0
    while i < len(segs):  # rare: two lines of one plane with the same name
        j = i + 1
        while j < len(segs) and segs[j][:3] == segs[i][:3]:
            j += 1
        if j > i + 1:
            a, b = bounds[i], bounds[j]
            order = a + np.lexsort((-cols["dur"][a:b], cols["start"][a:b]))
            for v in cols.values():
                v[a:b] = v[order]
        i = j

    steps, step_ok = _assign_steps(segs, bounds, cols["start"], markers)
    data = {}
    for col, pos in (("host", 0), ("device", 1), ("stream", 2)):
        labels = _Strings()
        seg_codes = labels.codes(s[pos] for s in segs)
        data[col] = _categorical(np.repeat(seg_codes, counts), labels.values)
    data["device_id"] = cols.pop("device_id")
    pid_ok = cols.pop("pid_ok")
    data["program_id"] = pd.arrays.IntegerArray(cols.pop("pid"), ~pid_ok)
    for col, key in (("module", "module"), ("instruction", "op"), ("name", "name")):
        data[col] = _categorical(cols.pop(key), strings.values)
    data["step"] = pd.arrays.IntegerArray(steps, ~step_ok)
    for col, key in (("start_ps", "start"), ("duration_ps", "dur"), ("self_ps", "self")):
        data[col] = cols.pop(key)
    # copy=False: the columns are not consolidated into 2-D blocks (which would copy the whole table once)
    return pd.DataFrame({c: data.pop(c) for c in OP_COLUMNS}, columns=list(OP_COLUMNS), copy=False)


#: Rows per block in :func:`_assign_steps` (its temporaries are ~40 bytes per row of a block).
_STEP_BLOCK = 1 << 20


def _assign_steps(segs: list[tuple], bounds, starts, markers: list[tuple]):
    """Step number of each op row (``(steps int64, known bool)``, see :func:`read_xspace_events`).

    Rows of one (host, device) are contiguous (``segs`` is sorted by host, device): one ``searchsorted`` of
    their starts (ps) over the markers' starts per (host, device).
    """
    import numpy as np

    n = int(bounds[-1])
    steps = np.zeros(n, np.int64)
    ok = np.zeros(n, bool)
    if not markers or not n:
        return steps, ok
    by_device: dict[tuple[str, str], list[tuple[int, int, Any]]] = {}
    for host, plane, _, _, step, start, dur in markers:
        by_device.setdefault((host, plane), []).append((start, dur, step))
    arrays = {}
    for key, rows in by_device.items():
        rows.sort(key=lambda r: (r[0], -r[1]))
        arrays[key] = (np.array([r[0] for r in rows], np.int64), np.array([r[0] + r[1] for r in rows], np.int64),
                       np.array([-1 if r[2] is None else r[2] for r in rows], np.int64),
                       np.array([r[2] is not None for r in rows], bool))
    i = 0
    while i < len(segs):
        host, plane = segs[i][0], segs[i][1]
        j = i + 1
        while j < len(segs) and segs[j][0] == host and segs[j][1] == plane:
            j += 1
        found = arrays.get((host, plane)) or arrays.get((host, HOST_PLANE))
        if found is not None:
            m_start, m_end, m_step, m_ok = found
            for a in range(int(bounds[i]), int(bounds[j]), _STEP_BLOCK):  # blocks: bounded temporaries
                b = min(a + _STEP_BLOCK, int(bounds[j]))
                t = starts[a:b]
                k = np.searchsorted(m_start, t, side="right") - 1
                np.maximum(k, 0, out=k)  # (k < 0 only where t < m_start[0]: outside every marker)
                inside = (t >= m_start[0]) & (t < m_end[k]) & m_ok[k]
                steps[a:b] = np.where(inside, m_step[k], 0)
                ok[a:b] = inside
        i = j
    return steps, ok


def _steps_frame(markers: list[tuple]):
    """The ``steps`` table (``STEP_COLUMNS``) from ``(host, plane, device_id, name, step, start, duration)``."""
    import numpy as np
    import pandas as pd

    rows = sorted(markers, key=lambda r: (_natural(r[0]), _natural(r[1]), r[5], -r[6]))
    step = [r[4] for r in rows]
    return pd.DataFrame({
        "host": _categorical_of([r[0] for r in rows]),
        "device": _categorical_of([r[1] for r in rows]),
        "device_id": np.array([r[2] for r in rows], np.int32),
        "name": _categorical_of([r[3] for r in rows]),
        "step": pd.arrays.IntegerArray(np.array([0 if s is None else s for s in step], np.int64),
                                       np.array([s is None for s in step], bool)),
        "start_ps": np.array([r[5] for r in rows], np.int64),
        "duration_ps": np.array([r[6] for r in rows], np.int64),
    }, columns=list(STEP_COLUMNS))


def _module_runs_frame(runs: list[tuple]):
    """The ``module_runs`` table (``MODULE_RUN_COLUMNS``) from ``(host, plane, device_id, module, program_id,
    start, duration)``."""
    import numpy as np
    import pandas as pd

    rows = sorted(runs, key=lambda r: (_natural(r[0]), _natural(r[1]), r[5], -r[6]))
    pid = [r[4] for r in rows]
    return pd.DataFrame({
        "host": _categorical_of([r[0] for r in rows]),
        "device": _categorical_of([r[1] for r in rows]),
        "device_id": np.array([r[2] for r in rows], np.int32),
        "module": _categorical_of([r[3] for r in rows]),
        "program_id": pd.arrays.IntegerArray(np.array([0 if p is None else p for p in pid], np.uint64),
                                             np.array([p is None for p in pid], bool)),
        "start_ps": np.array([r[5] for r in rows], np.int64),
        "duration_ps": np.array([r[6] for r in rows], np.int64),
    }, columns=list(MODULE_RUN_COLUMNS))


def read_xspace_header(path: str | os.PathLike[str]
                       ) -> tuple[dict[str, Any], dict[str, str], str, str | None, int | None]:
    """What a run's driver needs of one host file before its events are read (``hloscope.pod``): the HLO protos
    (module name -> text printer, as ``read_xspace_events``' ``hlo_modules``; and ``hlo_sources``), the platform
    (``"gpu"``/``"tpu"`` when a plane of such a device exists, else ``"cpu"``), the device kind of the device
    planes (None when none states it) and the capture start (``profile_start_ns``). Reads the plane metadata
    only, never the events.

    Raises:
        TraceError: the file is missing, unreadable, corrupted or not an XSpace.
    """
    p = Path(path)
    ix = open_xspace(p)
    hlo_modules: dict[str, Any] = {}
    hlo_sources: dict[str, str] = {}
    for entry in hlo_protos(ix):
        if entry.module_name not in hlo_modules:
            hlo_modules[entry.module_name] = hlo_text_printer(entry, p)
            hlo_sources[entry.module_name] = f"{p}:{entry.metadata_name}"
    names = [plane.name for plane in ix.planes]
    platform = ("gpu" if any(n.startswith("/device:GPU") for n in names)
                else "tpu" if any(n.startswith("/device:TPU") for n in names) else "cpu")
    kinds = [k for k in (_device_kind(plane) for plane in ix.planes if plane.name.startswith("/device:")) if k]
    return hlo_modules, hlo_sources, platform, kinds[0] if kinds else None, profile_start_ns(ix)


def profile_start_ns(ix) -> int | None:
    """The ``profile_start_time`` stat (ns) of the file's ``Task Environment`` plane, or None."""
    for plane in ix.planes:
        if plane.name != "Task Environment":
            continue
        names = _stat_names(plane)
        for st in plane.stats:
            if names.get(st.metadata_id) == "profile_start_time":
                value = _stat_value(st, names)
                return int(value) if isinstance(value, int) and not isinstance(value, bool) else None
    return None
