"""Build a large multi-host ("pod") profile run directory for scale tests, from the real 2-process captures.

Usage (from the repository root)::

    python benchmarks/make_pod_run.py                          # 64 hosts -> the cache dir, prints the run dir
    python benchmarks/make_pod_run.py --hosts 256 --out DIR    # log dir to write instead (wiped first)
    python benchmarks/make_pod_run.py --source normal          # replicate fixtures/profile/cpu_multihost
    python benchmarks/make_pod_run.py --skew-us 200            # also shift each host's clock (see below)
    python benchmarks/make_pod_run.py --copy-bytes             # plain byte copies, nothing rewritten

Output: ``<out>/plugins/profile/run0/host000.xplane.pb`` ... ``host<N-1>.xplane.pb`` (``--hosts`` N, default
64; hloscope names a host after its file's stem) and ``<out>/pod_run.json`` (which source file each host is a
copy of, the device ids, the shifts).  The default ``<out>`` is
``$HLOSCOPE_BENCH_CACHE/pod_run_<N>h_<source>`` (``HLOSCOPE_BENCH_CACHE`` defaults to
``~/.cache/hloscope-bench``).  The last line printed is the run directory.  Nothing runs jax.

What is real and what is replicated:

* Real: the source files, ``fixtures/profile/cpu_multihost_slow`` (default; ``--source normal``:
  ``fixtures/profile/cpu_multihost``), made by ``fixtures/make_pod_profiles.py``: P (2) real JAX processes
  under ``jax.distributed`` on one machine, 2 CPU devices each, a data-parallel MLP train step whose gradient
  all-reduce runs across the processes over Gloo, one XSpace per process.  In the slow capture process 1
  sleeps 20 ms inside each step before dispatching it, so its devices start late and process 0's devices
  wait in the all-reduce.  Every event, duration, step annotation and embedded HLO module of every output
  file comes from one of those files.
* Replicated: host ``--slow-index`` (default 17) is a copy of the source's slowed host (``host1``); every
  other host is a copy of a non-slowed source host (``host0``; with more source hosts, they are used in
  turn).  With ``--source normal`` there is no slowed host and all source hosts are used in turn.  So the
  N hosts' timelines are those of P real hosts repeated: the fast hosts' all-reduces wait for the slowed
  host as they did in the capture, but the embedded HLO still describes P*2 devices (replica groups,
  ``num_partitions``), and the copies of one source host are identical (same clock unless ``--skew-us``).
* Rewritten (unless ``--copy-bytes``), by a wire-level walk of the XSpace protobuf that copies every other
  byte as it is (schema: ``tsl/profiler/protobuf/xplane.proto``; no generated ``xplane_pb2`` ships in this
  venv -- the ``xprof`` package carries other ``*_pb2`` modules only):

  * device numbering, so that device ids are unique over the pod as in a real one: the event stats
    ``device_ordinal`` and ``global_device_id`` (``jax.Device.id``, ``2048 * process + local``) become
    ``2048 * k + local`` on host k, and ``partition`` (``2 * process + local``) becomes ``2 * k + local``;
  * ``XSpace.hostnames`` becomes ``["host<k>"]``;
  * with ``--skew-us S`` (default 0: no shift), host k's clock is shifted by a fixed offset drawn uniformly
    from [-S, S] microseconds (``random.Random(k)``; whole nanoseconds).  The profiler stores every line's
    ``timestamp_ns`` *relative to the capture's start* (``PostProcessSingleHostXSpace`` normalizes them; in
    these files they are a few microseconds) and the start itself, in wall-clock ns, as the
    ``profile_start_time`` stat of the ``Task Environment`` plane (with ``profile_stop_time``): an event's
    wall-clock time is ``profile_start_time + line.timestamp_ns + offset_ps / 1000``.  So a host clock
    offset is those two plane stats moved by the offset, and nothing else; the relative event times are
    left as they are.  (Without ``--skew-us`` every copy keeps its source's ``profile_start_time``: the
    copies of one source host start at the same instant, and the slowed host's copy is as far from them as
    host1 was from host0 in the capture.)  Real pods' host clocks disagree by microseconds to milliseconds;
    keep S well under the 20 ms sleep to keep the slowed host recognizable.

  The rewrite is checked after writing: each output file's planes, lines, events (names, start times,
  durations) equal its source's, its ``profile_start_time`` / ``profile_stop_time`` differ by exactly the
  host's shift, and its device ids are the host's (read back with ``jax.profiler.ProfileData`` when jax is
  importable, else skipped with a note).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO / "fixtures"))

from protowire import encode_varint, fields  # noqa: E402  (the wire format, shared with the fixture scripts)
SOURCES = {"slow": REPO / "fixtures" / "profile" / "cpu_multihost_slow",
           "normal": REPO / "fixtures" / "profile" / "cpu_multihost"}
DEVICE_ID_STRIDE = 2048  # jax CPU device ids: 2048 * process_index + local ordinal
DEVICE_ID_STATS = ("device_ordinal", "global_device_id")
PARTITION_STATS = ("partition",)
TIME_PLANE_STATS = ("profile_start_time", "profile_stop_time")


# ---------------------------------------------------------------- protobuf wire format


def _signed(v):
    return v - (1 << 64) if v >= 1 << 63 else v


def _len_field(fno, payload):
    return encode_varint(fno << 3 | 2) + encode_varint(len(payload)) + bytes(payload)


def _varint_field(fno, v):
    return encode_varint(fno << 3) + encode_varint(v)


# XSpace: planes=1, hostnames=4.  XPlane: name=2, lines=3, stat_metadata=5 (map<int64, XStatMetadata>:
# key=1, value=2; XStatMetadata: id=1, name=2), stats=6.  XLine: events=4.
# XEvent: stats=4.  XStat: metadata_id=1, uint64_value=3, int64_value=4.


def _stat_names(plane):
    names = {}
    for fno, wt, val, _ in fields(plane):
        if fno == 5 and wt == 2:
            key, name = None, None
            for f2, w2, v2, _ in fields(val):
                if f2 == 1 and w2 == 0:
                    key = _signed(v2)
                elif f2 == 2 and w2 == 2:
                    for f3, w3, v3, _ in fields(v2):
                        if f3 == 2 and w3 == 2:
                            name = bytes(v3).decode("utf-8", "replace")
            if key is not None and name is not None:
                names[key] = name
    return names


def _rewrite_stat(stat, fn):
    """fn(value) -> new value for the stat's uint64/int64 value; other stats unchanged."""
    out = bytearray()
    for fno, wt, val, raw in fields(stat):
        if fno in (3, 4) and wt == 0:
            new = fn(_signed(val) if fno == 4 else val)
            out += _varint_field(fno, new)
        else:
            out += raw
    return bytes(out)


def _stat_id(stat):
    for fno, wt, val, _ in fields(stat):
        if fno == 1 and wt == 0:
            return _signed(val)
    return 0


def _rewrite_stats_in(msg, stats_field, stat_fns):
    """Rewrite the XStats of a message (field stats_field) whose metadata id is in stat_fns."""
    out = bytearray()
    for fno, wt, val, raw in fields(msg):
        if fno == stats_field and wt == 2 and _stat_id(val) in stat_fns:
            out += _len_field(fno, _rewrite_stat(val, stat_fns[_stat_id(val)]))
        else:
            out += raw
    return bytes(out)


def _rewrite_line(line, event_stat_fns):
    """The XLine with its events' stats rewritten (XLine.events = 4, XEvent.stats = 4)."""
    out = bytearray()
    for fno, wt, val, raw in fields(line):
        if fno == 4 and wt == 2 and event_stat_fns:
            out += _len_field(4, _rewrite_stats_in(val, 4, event_stat_fns))
        else:
            out += raw
    return bytes(out)


def _rewrite_plane(plane, shift_ns, remap_device, remap_partition):
    names = _stat_names(plane)
    event_fns = {}
    if remap_device is not None:
        for sid, n in names.items():
            if n in DEVICE_ID_STATS:
                event_fns[sid] = remap_device
            elif n in PARTITION_STATS:
                event_fns[sid] = remap_partition
    plane_fns = {sid: (lambda v: v + shift_ns) for sid, n in names.items() if n in TIME_PLANE_STATS} \
        if shift_ns else {}
    out = bytearray()
    for fno, wt, val, raw in fields(plane):
        if fno == 3 and wt == 2 and event_fns:
            out += _len_field(3, _rewrite_line(val, event_fns))
        elif fno == 6 and wt == 2 and _stat_id(val) in plane_fns:
            out += _len_field(6, _rewrite_stat(val, plane_fns[_stat_id(val)]))
        else:
            out += raw
    return bytes(out)


def rewrite_xspace(raw, *, shift_ns=0, host_index=None, src_process=0, local_devices=2, hostname=None):
    """The XSpace bytes with host k's device numbering / hostname / clock shift (see the module docstring)."""
    remap_device = remap_partition = None
    if host_index is not None:
        def remap_device(v):
            return DEVICE_ID_STRIDE * host_index + (v - DEVICE_ID_STRIDE * src_process)

        def remap_partition(v):
            return local_devices * host_index + (v - local_devices * src_process)
    b = memoryview(raw)
    out = bytearray()
    wrote_host = False
    for fno, wt, val, field_raw in fields(b):
        if fno == 1 and wt == 2:
            out += _len_field(1, _rewrite_plane(val, shift_ns, remap_device, remap_partition))
        elif fno == 4 and wt == 2 and hostname is not None:
            if not wrote_host:
                out += _len_field(4, hostname.encode())
                wrote_host = True
        else:
            out += field_raw
    if hostname is not None and not wrote_host:
        out += _len_field(4, hostname.encode())
    return bytes(out)


# ---------------------------------------------------------------- check


def _read(path):
    """(events [(plane, line, name, start_ns, duration_ns)], device ids, Task Environment times) of a file."""
    from jax.profiler import ProfileData

    pd = ProfileData.from_file(str(path))
    rows, devices, times = [], set(), {}
    for p in pd.planes:
        if p.name == "Task Environment":
            times = {k: v for k, v in p.stats if k in TIME_PLANE_STATS}
        for line in p.lines:
            for e in line.events:
                rows.append((p.name, line.name, e.name, e.start_ns, e.duration_ns))
                devices.update(v for k, v in e.stats if k in DEVICE_ID_STATS)
    return rows, devices, times


def check(pairs):
    """[(src, dst, shift_ns, device ids)]: dst's events equal src's, its clock moved by shift_ns, its devices.

    Returns a note saying what was checked.
    """
    try:
        os.environ.setdefault("JAX_PLATFORMS", "cpu")
        import jax.profiler  # noqa: F401
    except ImportError:
        return "not checked (jax not importable)"
    cache = {}
    for src, dst, shift, devices in pairs:
        if src not in cache:
            cache[src] = _read(src)
        (a, _, ta), (b, db, tb) = cache[src], _read(dst)
        if a != b:
            raise SystemExit(f"{dst}: events differ from its source {src}'s")
        if {k: v + shift for k, v in ta.items()} != tb:
            raise SystemExit(f"{dst}: {tb} is not its source's {ta} shifted by {shift} ns")
        if db != set(devices):
            raise SystemExit(f"{dst}: device ids {sorted(db)}, expected {devices}")
    return f"checked {len(pairs)} files against their sources with jax.profiler.ProfileData"


# ---------------------------------------------------------------- main


def cache_dir() -> Path:
    return Path(os.environ.get("HLOSCOPE_BENCH_CACHE") or Path.home() / ".cache" / "hloscope-bench")


def _shown_path(p: Path) -> str:
    """``p`` relative to the repository when inside it, else as is (a --source-dir elsewhere)."""
    try:
        return str(p.relative_to(REPO))
    except ValueError:
        return str(p)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hosts", type=int, default=64, help="number of hosts (files) in the run (default 64)")
    ap.add_argument("--source", choices=list(SOURCES), default="slow",
                    help="capture to replicate: slow (cpu_multihost_slow, default) or normal (cpu_multihost)")
    ap.add_argument("--source-dir", type=Path,
                    help="a capture dir of fixtures/make_pod_profiles.py to replicate instead of --source's "
                    "(e.g. one made with --steps 200 --out DIR: larger host files)")
    ap.add_argument("--slow-index", type=int, default=17, help="host index that gets the slowed host (default 17)")
    ap.add_argument("--out", type=Path, help="log dir to write (wiped first); default under the bench cache")
    ap.add_argument("--skew-us", type=float, default=0.0,
                    help="shift host k's clock by a fixed offset in [-S, S] us (default 0: none)")
    ap.add_argument("--copy-bytes", action="store_true",
                    help="plain byte copies: no device renumbering, hostname or clock rewrite")
    ap.add_argument("--no-check", action="store_true", help="skip reading the outputs back")
    a = ap.parse_args(argv)
    if a.hosts < 1:
        ap.error("--hosts must be >= 1")
    if a.copy_bytes and a.skew_us:
        ap.error("--skew-us needs the rewrite (drop --copy-bytes)")

    src_root = a.source_dir if a.source_dir is not None else SOURCES[a.source]
    timing = json.loads((src_root / "timing.json").read_text())
    src_run = src_root / "plugins" / "profile" / "run0"
    src_files = {int(p.name[len("host"):-len(".xplane.pb")]): p for p in sorted(src_run.glob("host*.xplane.pb"))}
    if not src_files:
        raise SystemExit(f"no host*.xplane.pb in {src_run}; run fixtures/make_pod_profiles.py")
    slowed = timing.get("slowed_process")
    local_devices = int(timing.get("local_devices_per_process", 2))
    if slowed is not None and not 0 <= a.slow_index < a.hosts:
        ap.error(f"--slow-index {a.slow_index} is not a host of {a.hosts}")
    fast = [i for i in sorted(src_files) if i != slowed]

    out = a.out or cache_dir() / f"pod_run_{a.hosts}h_{a.source}"
    shutil.rmtree(out, ignore_errors=True)
    run_dir = out / "plugins" / "profile" / "run0"
    run_dir.mkdir(parents=True)
    width = max(3, len(str(a.hosts - 1)))
    hosts, pairs, raw_cache = [], [], {}
    fast_k = 0
    for k in range(a.hosts):
        if slowed is not None and k == a.slow_index:
            src = slowed
        else:
            src = fast[fast_k % len(fast)]
            fast_k += 1
        name = f"host{k:0{width}d}"
        dst = run_dir / f"{name}.xplane.pb"
        shift_ns = round(random.Random(k).uniform(-a.skew_us, a.skew_us) * 1e3) if a.skew_us else 0
        if a.copy_bytes:
            shutil.copyfile(src_files[src], dst)
        else:
            if src not in raw_cache:
                raw_cache[src] = src_files[src].read_bytes()
            dst.write_bytes(rewrite_xspace(raw_cache[src], shift_ns=shift_ns, host_index=k, src_process=src,
                                           local_devices=local_devices, hostname=name))
        devices = ([DEVICE_ID_STRIDE * src + j for j in range(local_devices)] if a.copy_bytes
                   else [DEVICE_ID_STRIDE * k + j for j in range(local_devices)])
        hosts.append({"host": name, "source": _shown_path(src_files[src]), "source_process": src,
                      "slowed": src == slowed, "shift_ns": shift_ns, "device_ids": devices,
                      "bytes": dst.stat().st_size})
        pairs.append((src_files[src], dst, shift_ns, devices))
    note = "not checked (--no-check)" if a.no_check else check(pairs)
    total = sum(h["bytes"] for h in hosts)
    meta = {
        "description": __doc__.split("\n\n")[0],
        "source": _shown_path(src_root), "source_timing": timing.get("description"),
        "hosts": a.hosts, "slowed_host": hosts[a.slow_index]["host"] if slowed is not None else None,
        "sleep_s": timing.get("sleep_s"), "copy_bytes": a.copy_bytes, "skew_us": a.skew_us,
        "total_bytes": total, "check": note, "per_host": hosts,
    }
    (out / "pod_run.json").write_text(json.dumps(meta, indent=1))
    print(f"{a.hosts} hosts from {_shown_path(src_root)} ({total} bytes; slowed host: "
          f"{meta['slowed_host']}; {note})", file=sys.stderr)
    print(run_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
