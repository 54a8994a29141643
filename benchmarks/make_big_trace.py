"""Record a large, real JAX profiler trace on CPU for ``benchmarks/trace.py`` (never committed).

Usage (from the repository root)::

    python benchmarks/make_big_trace.py                  # 48 layers, 5 steps -> the cache dir, prints the path
    python benchmarks/make_big_trace.py --out DIR        # log dir to write instead (wiped first)
    python benchmarks/make_big_trace.py --layers 24 --steps 3 --unroll
    python benchmarks/make_big_trace.py --steps 25 --direct --tile 6   # the ~1.1 GB trace of `trace.py --big`
    python benchmarks/make_big_trace.py --source fixtures/profile/gpu_mlp_train_nocb/plugins/profile/run0/localhost.xplane.pb \
        --tile 31000                                                    # the ~1.0 GB GPU trace of `trace.py --gpu`

Program: the ``transformer_train_step`` of ``fixtures/make_hlo_fixtures.py`` (pre-LN transformer block under
``lax.scan`` over the stacked layer weights, value_and_grad + SGD), f32, with ``--layers`` (48) layers and the
small ``DIMS`` below (the layer count makes the trace big -- one thunk event per op per layer per device -- while
small matrices keep each step, and so the capture, fast on 2 cores), sharded on a (data=2, model=4) mesh of 8 host
CPU devices (``--xla_force_host_platform_device_count=8``, set before jax is imported). ``--unroll`` uses
``lax.scan(..., unroll=True)`` instead of a ``while`` loop (several MB of HLO; compiles in a minute or two).

Procedure as in ``fixtures/make_profile.py``: random parameters and data (NumPy seed 0), one warm-up step
(compile) outside the trace, then ``--steps`` (5) steps between ``jax.profiler.start_trace(logdir)`` and its stop,
each in ``jax.profiler.StepTraceAnnotation("train", step_num=i)`` and blocked on.

Large traces: the profiler holds ~28x the capture's size in memory (a 145 MB capture peaks at ~3.8 GiB RSS), so a
~1 GB capture does not fit in 23 GB. ``--direct`` writes the session's XSpace bytes itself (no
``.trace.json.gz``; faster, same XSpace); ``--tile K`` then repeats every line's events K times in time
(:func:`tile_xspace`: ``steps x K`` steps, step numbers renumbered), which reads as one long capture of the same
program.

``--source PATH --tile K``: no recording; the existing capture ``PATH`` (e.g. the bundled H100 one) is tiled K
times the same way (``correlation_id`` stats renumbered too, so that each copy's kernels pair with their own
launches; device planes keep their lines, stats and metadata), into
``$HLOSCOPE_BENCH_CACHE/tiled_<capture>_x<K>_<hash of the file>/plugins/profile/<run>/<file>``. This is how a
large GPU trace is made without a GPU: ``gpu_mlp_train_nocb`` (5 steps, 70 kB) tiled 31000 times is 1.015 GB,
155,000 steps (~15 s, ~0.7 GB peak RSS).

Output: ``<logdir>/plugins/profile/<YYYY_MM_DD_HH_MM_SS>/<host>.xplane.pb`` (plus the profiler's
``.trace.json.gz`` without ``--direct``). The default log dir is
``$HLOSCOPE_BENCH_CACHE/trace_<layers>l_<steps>s[_unrolled][_direct][_x<K>]_<key>`` (``HLOSCOPE_BENCH_CACHE``
defaults to ``~/.cache/hloscope-bench``), where ``<key>`` hashes ``RECIPE``, ``DIMS``, ``make_hlo_fixtures.py`` and
the jax version: an existing capture for the same key is reused unless ``--force``. The last line printed is the
``.xplane.pb`` path.

With the defaults the file is ~35 MB (~650 k events; ~30 s to make on 2 cores); ``--steps 25 --direct --tile 6``
gives ~1.1 GB (19.4 M events, 150 steps; ~35 s, ~4.4 GiB peak RSS).
"""

from __future__ import annotations

import argparse
import glob
import hashlib
import os
import shutil
import sys
import time
from pathlib import Path


HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO / "fixtures"))

from protowire import encode_varint  # noqa: E402  (the wire format, shared with the fixture scripts)

DIMS = {"batch": 8, "seq": 32, "d_model": 64, "n_heads": 4, "d_head": 16, "d_ff": 256}
RECIPE = 1  # bump when record() changes what is captured: the cache key hashes it, DIMS, the model and jax
DEFAULT_LAYERS = 48
DEFAULT_STEPS = 5


def cache_dir() -> Path:
    return Path(os.environ.get("HLOSCOPE_BENCH_CACHE") or Path.home() / ".cache" / "hloscope-bench")


def default_logdir(layers: int, steps: int, unroll: bool, direct: bool = False, tile: int = 1) -> Path:
    from importlib.metadata import version  # not `import jax`: jax reads JAX_PLATFORMS when imported

    recipe = repr((RECIPE, DIMS)) + (REPO / "fixtures" / "make_hlo_fixtures.py").read_text() + version("jax")
    key = hashlib.sha256(recipe.encode()).hexdigest()[:12]
    name = f"trace_{layers}l_{steps}s" + ("_unrolled" if unroll else "") + ("_direct" if direct else "")
    return cache_dir() / f"{name}{f'_x{tile}' if tile > 1 else ''}_{key}"


def tiled_logdir(source: Path, tile: int) -> Path:
    """Cache log dir of ``source`` (an existing ``.xplane.pb``) tiled ``tile`` times: named after the capture's
    log dir (``gpu_mlp_train_nocb`` for the bundled H100 fixture), keyed by a hash of its bytes."""
    key = hashlib.sha256(repr(RECIPE).encode() + source.read_bytes()).hexdigest()[:12]
    parents = source.resolve().parents
    name = parents[3].name if len(parents) >= 4 and parents[1].name == "profile" else source.name.split(".")[0]
    return cache_dir() / f"tiled_{name}_x{tile}_{key}"


def ensure_tiled(source: Path, tile: int) -> Path:
    """The cached ``source`` tiled ``tile`` times (:func:`tile_xspace`), made first if missing; its path."""
    logdir = tiled_logdir(source, tile)
    path = find_xplane(logdir)
    if path is None:
        print(f"tiling {source} {tile} times (once; cached under {logdir}) ...", file=sys.stderr, flush=True)
        path = _tile_into(source, logdir, tile)
    return path


def _tile_into(source: Path, logdir: Path, tile: int) -> Path:
    """Write ``source`` tiled ``tile`` times as ``<logdir>/plugins/profile/<run>/<file>`` (the source's run
    dir and file names when it lies in a log dir, else ``run0``); ``logdir`` is wiped first."""
    source = source.resolve()
    run = source.parent.name if source.parents[1].name == "profile" else "run0"
    shutil.rmtree(logdir, ignore_errors=True)
    path = logdir / "plugins" / "profile" / run / source.name
    path.parent.mkdir(parents=True)
    t0 = time.perf_counter()
    tile_xspace(source, path, tile)
    print(f"tiled {tile} times in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    return path


def find_xplane(logdir: Path) -> Path | None:
    found = sorted(glob.glob(str(logdir / "plugins" / "profile" / "*" / "*.xplane.pb")))
    return Path(found[-1]) if found else None


def _stop_direct(logdir: Path) -> None:
    """Stop the running ``jax.profiler.start_trace`` session and write only its XSpace, as
    ``<logdir>/plugins/profile/<YYYY_MM_DD_HH_MM_SS>/<host>.xplane.pb``.

    ``jax.profiler.stop_trace`` exports through the profiler's TensorBoard writer, which also converts the
    capture into ``.trace.json.gz``: for a ~1 GB capture that conversion needs over 20 GB of memory. The
    session's ``stop()`` returns the same serialized XSpace (collected and post-processed by the profiler as
    for the export) without the JSON. Uses jax's private ``_profile_state`` (jax 0.10): a benchmark helper.
    """
    import socket

    from jax._src import profiler as jax_profiler

    state = jax_profiler._profile_state
    with state.lock:
        session = state.profile_session
        if session is None:
            raise RuntimeError("no profiler session is running")
        data = session.stop()
        state.reset()
    run = logdir / "plugins" / "profile" / time.strftime("%Y_%m_%d_%H_%M_%S")
    run.mkdir(parents=True, exist_ok=True)
    (run / f"{socket.gethostname()}.xplane.pb").write_bytes(data)


def tile_xspace(src: Path, dst: Path, copies: int) -> int:
    """Write to ``dst`` the XSpace ``src`` with the events of every line repeated ``copies`` times in time.

    Copy ``k`` (0 = the original) of a line's events has its ``offset_ps`` moved by ``k`` periods, a period
    being the capture's span (first event start to last event end over all lines, ps) plus 1 ms; the
    ``step_num`` stats of the step annotations are raised by ``k`` times the number of steps of the capture,
    and the ``correlation_id`` stats (which pair a GPU kernel with its launch on the host) by ``k`` times
    (largest correlation id + 1), so that every copy's steps and launches are new ones. Metadata (names,
    stats, HLO protos) is shared, as in one long capture of the same program; line ``duration_ps`` and the
    ``Task Environment`` plane's ``profile_stop_time`` are widened to match. Works for any capture: the CPU
    ones of :func:`record` and a GPU one such as ``fixtures/profile/gpu_mlp_train_nocb`` (device planes
    ``/device:GPU:N`` keep their lines, stats and metadata). Lines are decoded one at a time (memory ~ the
    output's size).

    Returns:
        The size of ``dst`` in bytes.
    """
    import numpy as np

    sys.path.insert(0, str(REPO))
    from hloscope.parsers import _xspace_schema as schema
    from hloscope.parsers._xspace_file import open_xspace
    from hloscope.parsers._xspace_wire import _scan_line

    ix = open_xspace(src)
    data = src.read_bytes()
    first, last = None, None

    def stat_id(plane, name):
        return next((k for k, m in plane.stat_metadata.items() if m.name == name), None)

    step_ids = [stat_id(plane, "step_num") for plane in ix.planes]
    corr_ids = [stat_id(plane, "correlation_id") for plane in ix.planes]
    step_events = {}  # (plane, line) -> events with a step_num stat
    max_corr = -1
    for plane_i in range(len(ix.planes)):
        want = np.array(sorted({i for i in (step_ids[plane_i], corr_ids[plane_i]) if i is not None}), np.int64)
        for line_i, (a, b, _) in enumerate(ix._lines[plane_i]):
            for sl in _scan_line(data, a, b, want):
                is_step = sl.st_mid == (-1 if step_ids[plane_i] is None else step_ids[plane_i])
                if is_step.any():
                    step_events[plane_i, line_i] = (step_events.get((plane_i, line_i), 0)
                                                    + len(set(sl.st_ev[is_step].tolist())))
                is_corr = (sl.st_mid == (-1 if corr_ids[plane_i] is None else corr_ids[plane_i])) & \
                    ((sl.st_kind == 3) | (sl.st_kind == 4))
                if is_corr.any():
                    max_corr = max(max_corr, int(sl.st_val[is_corr].max()))
                if sl.ev_off.size:
                    lo = sl.timestamp_ns * 1000 + int(sl.ev_off.min())
                    hi = sl.timestamp_ns * 1000 + int((sl.ev_off + sl.ev_dur).max())
                    first = lo if first is None else min(first, lo)
                    last = hi if last is None else max(last, hi)
    if first is None:
        raise SystemExit(f"{src}: no events to tile")
    period_ps = last - first + 10**9
    header = schema.XSpace(hostnames=ix.hostnames)
    tmp = dst.with_suffix(".partial")
    with open(tmp, "wb") as out:
        for plane_i, plane in enumerate(ix.planes):
            n_steps = max((n for (p, _), n in step_events.items() if p == plane_i), default=0)
            raise_by = {}  # stat metadata id -> raised by this much per copy
            if step_ids[plane_i] is not None and n_steps:
                raise_by[step_ids[plane_i]] = n_steps
            if corr_ids[plane_i] is not None and max_corr >= 0:
                raise_by[corr_ids[plane_i]] = max_corr + 1
            lines = []  # per line: its serialized pieces (the line's fields, then its events, copy by copy)
            for line_i, (a, b, _) in enumerate(ix._lines[plane_i]):
                line = schema.XLine.FromString(data[a:b])
                line.duration_ps = line.duration_ps * copies if line.duration_ps else 0
                base = schema.XLine()
                base.events.extend(line.events)
                del line.events[:]
                # the line's other fields first, then all events: one contiguous run, as the profiler writes
                parts = [line.SerializeToString(), base.SerializeToString()]
                del line
                bumps = [(i, j, st.WhichOneof("value"), raise_by[st.metadata_id])
                         for i, e in enumerate(base.events) for j, st in enumerate(e.stats)
                         if st.metadata_id in raise_by and st.WhichOneof("value") in ("int64_value", "uint64_value")]
                for k in range(1, copies):
                    rep = schema.XLine()
                    rep.CopyFrom(base)
                    shift = k * period_ps
                    events = rep.events
                    for e in events:
                        e.offset_ps += shift
                    for i, j, field, by in bumps:
                        st = events[i].stats[j]
                        setattr(st, field, getattr(st, field) + k * by)
                    parts.append(rep.SerializeToString())  # only events: concatenating appends them
                    del rep, events
                size = sum(map(len, parts))
                lines.append([b"\x1a" + encode_varint(size)] + parts)
                del parts, base
            rest = schema.XPlane()
            rest.CopyFrom(plane)
            if plane.name == "Task Environment":  # the capture's end, on the host clock (ns)
                stop = stat_id(plane, "profile_stop_time")
                for st in rest.stats:
                    if st.metadata_id == stop and st.WhichOneof("value") in ("int64_value", "uint64_value"):
                        field = st.WhichOneof("value")
                        setattr(st, field, getattr(st, field) + (copies - 1) * period_ps // 1000)
            rest_bytes = rest.SerializeToString()
            size = len(rest_bytes) + sum(len(p) for parts in lines for p in parts)
            out.write(b"\x0a" + encode_varint(size))
            out.write(rest_bytes)
            for parts in lines:
                out.writelines(parts)
            del lines
        out.write(header.SerializeToString())
    os.replace(tmp, dst)
    return dst.stat().st_size


def record(logdir: Path, layers: int, steps: int, unroll: bool, direct: bool = False) -> Path:
    """Capture the trace into ``logdir`` (wiped first); returns the ``.xplane.pb`` path.

    ``direct``: write the XSpace bytes of the profiler session directly (:func:`_stop_direct`; no
    ``.trace.json.gz``), which is what makes captures of a GB fit in memory.

    Must run before anything imported jax in this process (jax reads ``JAX_PLATFORMS`` at import; without it
    an installed libtpu is initialised, and its profiler plugin can crash the trace).
    """
    if "jax" in sys.modules:
        raise RuntimeError("record() must run in a process that has not imported jax yet")
    from host_devices import use_host_cpu_devices  # (fixtures/ is on the path: see the imports)

    use_host_cpu_devices(8)
    import functools

    import jax
    import numpy as np
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

    import make_hlo_fixtures as mf

    if len(jax.devices()) < 8:
        raise SystemExit(f"need 8 host devices, got {jax.devices()} (was jax imported with other XLA_FLAGS?)")
    d = dict(DIMS, n_layers=layers)
    mesh = Mesh(np.array(jax.devices()[:8]).reshape(2, 4), ("data", "model"))
    shapes, specs = mf.transformer_param_specs(d)
    rng = np.random.default_rng(0)
    params = {}
    for k, shp in shapes.items():
        if k.endswith("_g"):
            v = np.ones(shp, np.float32)
        elif k.endswith("_b"):
            v = np.zeros(shp, np.float32)
        else:
            v = (rng.standard_normal(shp) / np.sqrt(d["d_model"])).astype(np.float32)
        params[k] = jax.device_put(v, NamedSharding(mesh, specs[k]))
    act = (d["batch"], d["seq"], d["d_model"])
    aspec = NamedSharding(mesh, P("data", None, None))
    x = jax.device_put(rng.standard_normal(act).astype(np.float32), aspec)
    y = jax.device_put(rng.standard_normal(act).astype(np.float32), aspec)
    pshard = {k: NamedSharding(mesh, s) for k, s in specs.items()}
    step = jax.jit(
        functools.partial(mf.transformer_train_step, unroll=True if unroll else 1),
        in_shardings=(pshard, aspec, aspec),
        out_shardings=(pshard, NamedSharding(mesh, P())),
    )

    t0 = time.perf_counter()
    params, loss = step(params, x, y)  # compile + warm-up, outside the trace
    loss.block_until_ready()
    print(f"compiled and warmed up in {time.perf_counter() - t0:.1f} s", file=sys.stderr)

    shutil.rmtree(logdir, ignore_errors=True)
    t0 = time.perf_counter()
    jax.profiler.start_trace(str(logdir))
    try:
        for i in range(steps):
            with jax.profiler.StepTraceAnnotation("train", step_num=i):
                params, loss = step(params, x, y)
                loss.block_until_ready()
    finally:
        if direct:
            _stop_direct(logdir)
        else:
            jax.profiler.stop_trace()
    print(f"traced {steps} steps (and wrote the capture) in {time.perf_counter() - t0:.1f} s; "
          f"final loss {float(loss):.4f}", file=sys.stderr)
    path = find_xplane(logdir)
    if path is None:
        raise SystemExit(f"the profiler wrote no .xplane.pb under {logdir}")
    return path


def ensure_trace(layers: int = DEFAULT_LAYERS, steps: int = DEFAULT_STEPS, unroll: bool = False,
                 direct: bool = False, tile: int = 1) -> Path:
    """The cached trace for these settings, recorded in a child process first if missing.

    A child process keeps the caller's jax (if any) away from the 8-device XLA flags.
    """
    import subprocess

    logdir = default_logdir(layers, steps, unroll, direct, tile)
    path = find_xplane(logdir)
    if path is not None:
        return path
    cmd = [sys.executable, str(Path(__file__).resolve()), "--layers", str(layers), "--steps", str(steps)]
    if unroll:
        cmd.append("--unroll")
    if direct:
        cmd.append("--direct")
    if tile > 1:
        cmd += ["--tile", str(tile)]
    print(f"recording the benchmark trace (once; cached under {logdir}) ...", file=sys.stderr, flush=True)
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    path = find_xplane(logdir)
    if path is None:
        raise SystemExit(f"no trace under {logdir}")
    return path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, help="log dir to write (default: under the cache dir, see above)")
    ap.add_argument("--layers", type=int, default=DEFAULT_LAYERS)
    ap.add_argument("--steps", type=int, default=DEFAULT_STEPS)
    ap.add_argument("--unroll", action="store_true", help="unrolled layers instead of a while loop")
    ap.add_argument("--direct", action="store_true",
                    help="write the session's XSpace bytes directly (no .trace.json.gz): needed for ~1 GB captures")
    ap.add_argument("--tile", type=int, default=1,
                    help="repeat the capture's events this many times in time (tile_xspace): steps x tile steps")
    ap.add_argument("--source", type=Path,
                    help="tile this existing *.xplane.pb (e.g. the bundled H100 capture fixtures/profile/"
                    "gpu_mlp_train_nocb/plugins/profile/run0/localhost.xplane.pb) --tile times instead of "
                    "recording on CPU; --layers/--steps/--unroll/--direct do not apply")
    ap.add_argument("--force", action="store_true", help="re-record even if the cache has this trace")
    args = ap.parse_args(argv)

    if args.out is not None:
        logdir = args.out.resolve()
        if REPO in logdir.parents or logdir == REPO:
            raise SystemExit(f"{logdir} is inside the repository; big traces must not be committed")
    elif args.source is not None:
        logdir = tiled_logdir(args.source, args.tile)
    else:
        logdir = default_logdir(args.layers, args.steps, args.unroll, args.direct, args.tile)
    path = None if args.force or args.out is not None else find_xplane(logdir)
    if path is None:
        if args.source is not None:
            path = _tile_into(args.source, logdir, args.tile)
        elif args.tile > 1:
            base = logdir.with_name(logdir.name + ".base")
            src = record(base, args.layers, args.steps, args.unroll, args.direct)
            shutil.rmtree(logdir, ignore_errors=True)
            path = logdir / src.relative_to(base)
            path.parent.mkdir(parents=True)
            t0 = time.perf_counter()
            tile_xspace(src, path, args.tile)
            print(f"tiled {args.tile} times in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
            shutil.rmtree(base)
        else:
            path = record(logdir, args.layers, args.steps, args.unroll, args.direct)
    else:
        print(f"cached: {logdir}", file=sys.stderr)
    print(f"{path.stat().st_size / 1e6:.1f} MB", file=sys.stderr)
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
