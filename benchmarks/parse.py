"""Parse-throughput benchmark: hloscope's HLO text reader against XLA's own C++ parser, in one run.

Usage (from the repository root)::

    python benchmarks/parse.py                 # generated 48-layer unrolled transformer train step (cached)
    python benchmarks/parse.py --hlo FILE.txt  # any HLO text file instead
    python benchmarks/parse.py --repeat 7      # best of 7 instead of 5

Without ``--hlo`` the module is generated once with JAX on CPU -- the train step (value_and_grad + SGD) of the
pre-LN transformer block of ``fixtures/make_hlo_fixtures.py`` with ``lax.scan(..., unroll=True)`` over
``--layers`` (48) layers, sharded on 8 host devices (mesh data=2 x model=4) -- and its post-optimization text
(``compiled.as_text()``) is cached under ``$HLOSCOPE_BENCH_CACHE`` (default: ``~/.cache/hloscope-bench``), never
in the repository. The text is about 52 MB; generating it takes 2-3 minutes on 2 cores, later runs reuse the cache.

What is measured, on the same text, in the same process (the machine's load affects all rows alike):

* ``hloscope parse``: ``hloscope.parsers.parse_hlo_text(text)``, best of N wall times.
* ``XLA parse``: ``xla_client.hlo.hlo_module_from_text(text)`` (XLA's HloParser plus module construction and
  verification of the text into an ``HloModule``), best of N.
* ``hloscope parse, built``: the parse, then every computation's ``instructions`` (long bodies are otherwise
  built on first use), as XLA's row builds every instruction.
* ``hloscope parse+cost``: parse then ``hloscope.cost.module_cost(module)``, when ``hloscope.cost`` provides it.
* ``hloscope parse, Python scanner`` and ``hloscope parse+cost, Python scanner``: the same two with the body
  scanner written in Python (``hloscope.parsers._block_rows.py_block_rows``), what an install without a C
  compiler runs; only when the optional C scanner is built (the header line says which scanner the other rows
  use).

Throughput is MB/s of HLO text (1 MB = 10**6 characters); ``ratio`` is hloscope's throughput over XLA's.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

DEFAULT_LAYERS = 48

_GENERATOR = r'''
import functools, os, sys
os.environ["JAX_PLATFORMS"] = "cpu"
flags = os.environ.get("XLA_FLAGS", "")
if "--xla_force_host_platform_device_count" not in flags:
    os.environ["XLA_FLAGS"] = (flags + " --xla_force_host_platform_device_count=8").strip()
sys.path.insert(0, os.path.join(sys.argv[1], "fixtures"))
import jax, jax.numpy as jnp
import make_hlo_fixtures as F
from jax.sharding import NamedSharding, PartitionSpec as P

layers = int(sys.argv[2])
d = dict(F.DIMS["transformer"], n_layers=layers)
mesh = F.make_mesh(jax.devices("cpu"), (2, 4))
shapes, specs = F.transformer_param_specs(d)
dtype = jnp.float32
params = {k: F.sds(shapes[k], dtype, mesh, specs[k]) for k in shapes}
act = (d["batch"], d["seq"], d["d_model"])
aspec = P("data", None, None)
ns = lambda s: NamedSharding(mesh, s)
fn = jax.jit(
    functools.partial(F.transformer_train_step, unroll=True),
    in_shardings=({k: ns(v) for k, v in specs.items()}, ns(aspec), ns(aspec)),
    out_shardings=({k: ns(v) for k, v in specs.items()}, ns(P())),
)
text = fn.lower(params, F.sds(act, dtype, mesh, aspec), F.sds(act, dtype, mesh, aspec)).compile().as_text()
with open(sys.argv[3], "w") as f:
    f.write(text)
'''


def cache_dir() -> Path:
    """The benchmarks' cache (as ``make_big_trace.py``): ``$HLOSCOPE_BENCH_CACHE``, else ~/.cache/hloscope-bench."""
    return Path(os.environ.get("HLOSCOPE_BENCH_CACHE") or Path.home() / ".cache" / "hloscope-bench")


def generated_module(layers: int) -> Path:
    """Path of the cached generated module text, generating it first if needed (in a child process, so that the
    benchmark's own process keeps its default XLA flags)."""
    import jax

    key = hashlib.sha256(
        (Path(REPO / "fixtures" / "make_hlo_fixtures.py").read_text() + _GENERATOR + jax.__version__).encode()
    ).hexdigest()[:12]
    path = cache_dir() / f"transformer_grad_unrolled_{layers}l_{key}.hlo.txt"
    if path.exists() and path.stat().st_size > 0:
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    print(f"generating the {layers}-layer module (once; cached at {path}) ...", file=sys.stderr, flush=True)
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", _GENERATOR, str(REPO), str(layers), str(tmp)], check=True)
    tmp.replace(path)
    print(f"generated in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    return path


def best_of(fn: Callable[[], object], repeat: int) -> float:
    """Best wall time of ``repeat`` calls, as a user runs them: the garbage collector stays on (hloscope's
    parser pauses it itself while it builds the module). The clock stops when ``fn`` returns its result, before
    the result is freed: freeing is not parsing, and it falls unevenly (XLA's module is freed at once, ~0.15 s
    on the default module; hloscope's, which holds reference cycles, by the collector later). Garbage of the
    previous call is collected before the next (``times_interleaved`` of one function)."""
    return min(times_interleaved([fn], repeat)[0])


def times_interleaved(fns: list[Callable[[], object]], repeat: int, *, collector: bool = True) -> list[list[float]]:
    """Wall times of ``repeat`` calls of each of ``fns``, taken in turn (``fns[0]``, ``fns[1]``, ..., then again),
    each timed as ``best_of`` says (garbage collected before, the result freed after the clock): ``out[k][turn]``.
    On a machine whose speed drifts over seconds (a shared host), the calls of one turn run in the same stretch
    of time, so ratios within a turn compare like with like where back-to-back runs of one row would give one row
    a quiet stretch and the next a loud one. ``collector=False``: the collector is off while each call runs (as
    ``plugin_overhead.py`` times JAX's compile beside the plugin's analysis)."""
    out: list[list[float]] = [[] for _ in fns]
    for _ in range(repeat):
        for k, fn in enumerate(fns):
            gc.collect()
            if not collector:
                gc.disable()
            try:
                t0 = time.perf_counter()
                result = fn()
                out[k].append(time.perf_counter() - t0)
            finally:
                if not collector:
                    gc.enable()
            del result
    return out


def _built(module):
    """``module`` with every instruction built (computations hand their bodies over lazily otherwise)."""
    for comp in module.computations:
        comp.instructions
    return module


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hlo", type=Path, help="HLO text file to parse (default: the generated transformer)")
    ap.add_argument("--layers", type=int, default=DEFAULT_LAYERS, help="layers of the generated module")
    ap.add_argument("--repeat", type=int, default=5, help="timed runs per row; the best is reported")
    args = ap.parse_args(argv)
    os.environ.setdefault("JAX_PLATFORMS", "cpu")

    path = args.hlo if args.hlo is not None else generated_module(args.layers)
    text = path.read_text()
    mb = len(text) / 1e6

    from jax._src.lib import xla_client as xc

    from hloscope.parsers import _block_rows, _hlo_text, parse_hlo_text

    module = parse_hlo_text(text, str(path))  # warm-up, and checks the text parses
    n_inst = sum(len(c) for c in module.computations)
    xc.hlo.hlo_module_from_text(text)  # warm-up

    rows: list[tuple[str, float]] = []
    rows.append(("hloscope parse", best_of(lambda: parse_hlo_text(text), args.repeat)))
    rows.append(("XLA parse (C++)", best_of(lambda: xc.hlo.hlo_module_from_text(text), args.repeat)))
    rows.append(("hloscope parse, built", best_of(lambda: _built(parse_hlo_text(text)), args.repeat)))
    try:
        from hloscope.cost import module_cost
    except ImportError:
        module_cost = None
    if module_cost is not None:
        module_cost(module)  # warm-up
        rows.append(("hloscope parse+cost", best_of(lambda: module_cost(parse_hlo_text(text)), args.repeat)))
    if _block_rows.block_rows is not _block_rows.py_block_rows:
        # The same, with the body scanner written in Python (where the C extension could not be built).
        _hlo_text.block_rows = _block_rows.py_block_rows
        try:
            rows.append(("hloscope parse, Python scanner", best_of(lambda: parse_hlo_text(text), args.repeat)))
            if module_cost is not None:
                rows.append(("hloscope parse+cost, Python scanner",
                             best_of(lambda: module_cost(parse_hlo_text(text)), args.repeat)))
        finally:
            _hlo_text.block_rows = _block_rows.block_rows

    xla_s = rows[1][1]
    scanner = "Python" if _block_rows.block_rows is _block_rows.py_block_rows else "C"
    print(f"{path.name}: {mb:.2f} MB, {len(module.computations)} computations, {n_inst} instructions, "
          f"best of {args.repeat}, body scanner: {scanner}")
    width = max(len(label) for label, _ in rows) + 1
    print(f"{'':{width}}{'seconds':>9}{'MB/s':>9}{'vs XLA':>9}")
    for label, seconds in rows:
        print(f"{label:{width}}{seconds:9.3f}{mb / seconds:9.1f}{xla_s / seconds:8.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
