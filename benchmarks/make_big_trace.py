"""Record a large, real JAX profiler trace on CPU for ``benchmarks/trace.py`` (never committed).

Usage (from the repository root)::

    python benchmarks/make_big_trace.py                  # 48 layers, 5 steps -> the cache dir, prints the path
    python benchmarks/make_big_trace.py --out DIR        # log dir to write instead (wiped first)
    python benchmarks/make_big_trace.py --layers 24 --steps 3 --unroll

Program: the ``transformer_train_step`` of ``fixtures/make_hlo_fixtures.py`` (pre-LN transformer block under
``lax.scan`` over the stacked layer weights, value_and_grad + SGD), f32, with ``--layers`` (48) layers and the
small ``DIMS`` below (the layer count makes the trace big -- one thunk event per op per layer per device -- while
small matrices keep each step, and so the capture, fast on 2 cores), sharded on a (data=2, model=4) mesh of 8 host
CPU devices (``--xla_force_host_platform_device_count=8``, set before jax is imported). ``--unroll`` uses
``lax.scan(..., unroll=True)`` instead of a ``while`` loop (several MB of HLO; compiles in a minute or two).

Procedure as in ``fixtures/make_profile.py``: random parameters and data (NumPy seed 0), one warm-up step
(compile) outside the trace, then ``--steps`` (5) steps inside ``jax.profiler.trace(logdir)``, each in
``jax.profiler.StepTraceAnnotation("train", step_num=i)`` and blocked on.

Output: ``<logdir>/plugins/profile/<YYYY_MM_DD_HH_MM_SS>/<host>.xplane.pb`` (plus the profiler's
``.trace.json.gz``). The default log dir is ``$HLOSCOPE_BENCH_CACHE/trace_<layers>l_<steps>s[_unrolled]_<key>``
(``HLOSCOPE_BENCH_CACHE`` defaults to ``~/.cache/hloscope-bench``), where ``<key>`` hashes ``RECIPE``, ``DIMS``,
``make_hlo_fixtures.py`` and the jax version: an existing capture for the same key is reused unless ``--force``.
The last line printed is the ``.xplane.pb`` path.

With the defaults the file is ~50 MB (~1.3 M events) and takes about a minute to make on 2 cores.
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

DIMS = {"batch": 8, "seq": 32, "d_model": 64, "n_heads": 4, "d_head": 16, "d_ff": 256}
RECIPE = 1  # bump when record() changes what is captured: the cache key hashes it, DIMS, the model and jax
DEFAULT_LAYERS = 48
DEFAULT_STEPS = 5


def cache_dir() -> Path:
    return Path(os.environ.get("HLOSCOPE_BENCH_CACHE") or Path.home() / ".cache" / "hloscope-bench")


def default_logdir(layers: int, steps: int, unroll: bool) -> Path:
    from importlib.metadata import version  # not `import jax`: jax reads JAX_PLATFORMS when imported

    recipe = repr((RECIPE, DIMS)) + (REPO / "fixtures" / "make_hlo_fixtures.py").read_text() + version("jax")
    key = hashlib.sha256(recipe.encode()).hexdigest()[:12]
    return cache_dir() / f"trace_{layers}l_{steps}s{'_unrolled' if unroll else ''}_{key}"


def find_xplane(logdir: Path) -> Path | None:
    found = sorted(glob.glob(str(logdir / "plugins" / "profile" / "*" / "*.xplane.pb")))
    return Path(found[-1]) if found else None


def record(logdir: Path, layers: int, steps: int, unroll: bool) -> Path:
    """Capture the trace into ``logdir`` (wiped first); returns the ``.xplane.pb`` path.

    Must run before anything imported jax in this process (jax reads ``JAX_PLATFORMS`` at import; without it
    an installed libtpu is initialised, and its profiler plugin can crash the trace).
    """
    if "jax" in sys.modules:
        raise RuntimeError("record() must run in a process that has not imported jax yet")
    os.environ["JAX_PLATFORMS"] = "cpu"
    flags = os.environ.get("XLA_FLAGS", "")
    if "--xla_force_host_platform_device_count" not in flags:
        os.environ["XLA_FLAGS"] = (flags + " --xla_force_host_platform_device_count=8").strip()
    sys.path.insert(0, str(REPO / "fixtures"))
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
    with jax.profiler.trace(str(logdir)):
        for i in range(steps):
            with jax.profiler.StepTraceAnnotation("train", step_num=i):
                params, loss = step(params, x, y)
                loss.block_until_ready()
    print(f"traced {steps} steps (and wrote the capture) in {time.perf_counter() - t0:.1f} s; "
          f"final loss {float(loss):.4f}", file=sys.stderr)
    path = find_xplane(logdir)
    if path is None:
        raise SystemExit(f"the profiler wrote no .xplane.pb under {logdir}")
    return path


def ensure_trace(layers: int = DEFAULT_LAYERS, steps: int = DEFAULT_STEPS, unroll: bool = False) -> Path:
    """The cached trace for these settings, recorded in a child process first if missing.

    A child process keeps the caller's jax (if any) away from the 8-device XLA flags.
    """
    import subprocess

    logdir = default_logdir(layers, steps, unroll)
    path = find_xplane(logdir)
    if path is not None:
        return path
    cmd = [sys.executable, str(Path(__file__).resolve()), "--layers", str(layers), "--steps", str(steps)]
    if unroll:
        cmd.append("--unroll")
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
    ap.add_argument("--force", action="store_true", help="re-record even if the cache has this trace")
    args = ap.parse_args(argv)

    if args.out is not None:
        logdir = args.out.resolve()
        if REPO in logdir.parents or logdir == REPO:
            raise SystemExit(f"{logdir} is inside the repository; big traces must not be committed")
    else:
        logdir = default_logdir(args.layers, args.steps, args.unroll)
    path = None if args.force or args.out is not None else find_xplane(logdir)
    if path is None:
        path = record(logdir, args.layers, args.steps, args.unroll)
    else:
        print(f"cached: {logdir}", file=sys.stderr)
    print(f"{path.stat().st_size / 1e6:.1f} MB", file=sys.stderr)
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
