"""What the pytest plugin's analysis costs next to JAX's compile of the tested function.

Usage (from the repository root)::

    python benchmarks/plugin_overhead.py                 # CPU backend, and deviceless TPU v5e when libtpu is installed
    python benchmarks/plugin_overhead.py --repeat 7      # best of 7 instead of 5
    python benchmarks/plugin_overhead.py --json out.json

Programs (all sharded over 8 host devices, mesh data=2 x model=4; f32 on the CPU backend, bf16 deviceless):

* ``mlp``: the 2-layer MLP train step of tests/plugin (value_and_grad + SGD), 256 -> 512 -> 256.
* ``transformer-Nl``: a pre-LN transformer block train step (MHA + GELU MLP, d_model 256, 4 heads, seq 128,
  batch 8) applied N times in a Python loop (so the HLO grows with N), N = 2 and 8.

For each program and target, the best of ``--repeat`` runs of:

* ``compile``: ``jax.jit(fn).lower(*args).compile()`` on a *fresh* function object each run (JAX's in-memory
  caches keyed on the function would otherwise turn the compile into a lookup). ``lower`` is reported on its own
  too; the ratio is taken against ``lower + compile``, which is what ``hloscope.analyze(fn, *args)`` pays for JAX.
* ``analysis``: what the plugin adds per test -- ``hloscope.analyze(compiled)`` (``compiled.as_text()``, parse,
  cost, score, the ops and modules tables), the baseline record of the report, the stored baseline's text read
  (``baseline.from_json``) and the comparison with it: the fixture's ``analyze`` + ``check_baseline`` of a test
  that has its baseline, minus reading the one small file. (Until 2026-11-25 this row printed the record's JSON
  text, ``to_json``, instead of reading the stored one: that runs only with ``--hloscope-update``; reading
  is 0.08-0.2 ms cheaper.) ``report`` is the ``hloscope.analyze(compiled)`` part alone.
* ``in turns``: the median over the runs of ``analysis`` / ``lower + compile`` of the same turn (a compile, then
  an analysis, ``--repeat`` times: ``in_turns``), beside the ratio of the two rows' best times, which may come
  from different stretches of a drifting host.
* ``as_text``: JAX's ``compiled.as_text()`` alone (best of its turns), the first step of ``analysis``
  (hloscope cannot read a ``Compiled`` any other way), taken right after a compile of its own in each turn, as
  the analysis takes it (until stop 52 it ran after the analysis, on warm caches: the CPU mlp's 0.2 ms where the
  analysis's own call took 0.8, and "the rest" counted the difference as hloscope's); ``the rest``: the median
  over the turns of (``analysis`` - ``as_text``) / ``lower + compile``, hloscope's own share. For a deviceless TPU executable (an
  unloaded ``jaxlib`` ``Executable``) ``as_text`` re-creates the module each call (``hlo_modules()``: ~60 ms of
  the 8-layer program's ~70, against ~0.01 ms for the CPU backend's loaded executable, which holds its module):
  3-5% of that program's lower + compile is JAX's before hloscope reads a line.

A compile, an analysis, a second compile and an ``as_text`` are taken in turn, ``--repeat`` times
(``in_turns``): the analysis and the lone ``as_text`` each run right after a compile, on the caches the compile
left, as the plugin's analysis does in a test.

Measured warm (modules imported). The one-time import of what the analysis needs (pandas, hloscope's parser,
cost model and tables) is measured separately in a fresh interpreter that has already imported JAX: it is paid
once per pytest session (per xdist worker), not per test.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks.parse import times_interleaved  # noqa: E402


def _setup_env() -> None:
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    flags = os.environ.get("XLA_FLAGS", "")
    if "--xla_force_host_platform_device_count" not in flags:
        os.environ["XLA_FLAGS"] = (flags + " --xla_force_host_platform_device_count=8").strip()
    os.environ.setdefault("JAX_ENABLE_COMPILATION_CACHE", "false")


def in_turns(fns: list[Callable[[], Any]], repeat: int) -> list[list[float]]:
    """``parse.times_interleaved`` with the collector off while each call runs: ``out[k][turn]``."""
    return times_interleaved(fns, repeat, collector=False)


def best_of(fn: Callable[[], Any], repeat: int) -> float:
    return min(in_turns([fn], repeat)[0])


# ---- programs ----------------------------------------------------------------------------------------


def mlp_program(mesh: Any, dtype: Any) -> tuple[Callable[[], Callable[..., Any]], tuple[Any, ...]]:
    import jax
    import jax.numpy as jnp
    from jax.sharding import NamedSharding, PartitionSpec as P

    def sds(shape: tuple[int, ...], spec: Any) -> Any:
        return jax.ShapeDtypeStruct(shape, dtype, sharding=NamedSharding(mesh, spec))

    def make() -> Callable[..., Any]:
        def loss(p: Any, x: Any) -> Any:
            h = jax.nn.relu(x @ p["w1"])
            return jnp.mean((h @ p["w2"]).astype(jnp.float32) ** 2)

        def step(p: Any, x: Any) -> Any:
            g = jax.grad(loss)(p, x)
            return jax.tree.map(lambda a, b: a - 0.1 * b, p, g)

        return step

    params = {"w1": sds((256, 512), P(None, "model")), "w2": sds((512, 256), P("model", None))}
    return make, (params, sds((64, 256), P("data", None)))


def transformer_program(mesh: Any, dtype: Any, layers: int) -> tuple[Callable[[], Callable[..., Any]], tuple[Any, ...]]:
    import jax
    import jax.numpy as jnp
    from jax.sharding import NamedSharding, PartitionSpec as P

    d, h, ff, seq, batch = 256, 4, 1024, 128, 8
    hd = d // h

    def sds(shape: tuple[int, ...], spec: Any) -> Any:
        return jax.ShapeDtypeStruct(shape, dtype, sharding=NamedSharding(mesh, spec))

    def layer_specs() -> dict[str, Any]:
        return {
            "ln1": sds((d,), P()), "ln2": sds((d,), P()),
            "wq": sds((d, h, hd), P(None, "model", None)), "wk": sds((d, h, hd), P(None, "model", None)),
            "wv": sds((d, h, hd), P(None, "model", None)), "wo": sds((h, hd, d), P("model", None, None)),
            "w1": sds((d, ff), P(None, "model")), "w2": sds((ff, d), P("model", None)),
        }

    def make() -> Callable[..., Any]:
        def norm(x: Any, g: Any) -> Any:
            x32 = x.astype(jnp.float32)
            y = x32 * jax.lax.rsqrt(jnp.mean(x32 * x32, axis=-1, keepdims=True) + 1e-6)
            return (y * g.astype(jnp.float32)).astype(x.dtype)

        def block(p: Any, x: Any) -> Any:
            y = norm(x, p["ln1"])
            q = jnp.einsum("bsd,dhk->bhsk", y, p["wq"])
            k = jnp.einsum("bsd,dhk->bhsk", y, p["wk"])
            v = jnp.einsum("bsd,dhk->bhsk", y, p["wv"])
            a = jax.nn.softmax((jnp.einsum("bhqk,bhsk->bhqs", q, k) / hd**0.5).astype(jnp.float32), axis=-1)
            o = jnp.einsum("bhqs,bhsk->bhqk", a.astype(x.dtype), v)
            x = x + jnp.einsum("bhqk,hkd->bqd", o, p["wo"])
            y = norm(x, p["ln2"])
            return x + jax.nn.gelu(y @ p["w1"]) @ p["w2"]

        def loss(ps: Any, x: Any) -> Any:
            for p in ps:
                x = block(p, x)
            return jnp.mean(x.astype(jnp.float32) ** 2)

        def step(ps: Any, x: Any) -> Any:
            g = jax.grad(loss)(ps, x)
            return jax.tree.map(lambda a, b: a - 0.1 * b, ps, g)

        return step

    params = [layer_specs() for _ in range(layers)]
    return make, (params, sds((batch, seq, d), P("data", None, None)))


# ---- measuring -----------------------------------------------------------------------------------------


def measure(name: str, target: str, make: Callable[[], Callable[..., Any]], args: tuple[Any, ...], chip: str,
            repeat: int) -> dict[str, Any]:
    import jax

    from hloscope.analysis import analyze
    from hloscope.compare import baseline as bl
    from hloscope.compare import compare
    from hloscope.roofline.chips import get_chip

    spec = get_chip(chip)
    compiled = jax.jit(make()).lower(*args).compile()  # warm-up (tracing machinery, libtpu)
    stored_text = bl.to_json(bl.record(analyze(compiled, chip=spec)))  # (the test's baseline file)

    lower_s = best_of(lambda: jax.jit(make()).lower(*args), repeat)

    def analysis() -> None:
        report = analyze(compiled, chip=spec)
        bl.record(report)  # (check_baseline records the run, then reads the file and compares)
        stored = bl.from_json(stored_text)
        compare(bl.BaselineReport(stored, spec), report, rules=0.05).verdict

    def compile_it() -> None:
        jax.jit(make()).lower(*args).compile()

    # (``as_text`` right after a compile of its own, as the analysis's first step runs: on the caches a compile
    # leaves it takes several times its warm time -- the CPU mlp's 0.8 ms against 0.2 --, all of it JAX's)
    compiles, analyses, _, as_texts = in_turns([compile_it, analysis, compile_it, compiled.as_text], repeat)
    total_s, analysis_s, as_text_s = min(compiles), min(analyses), min(as_texts)
    turn_ratio = statistics.median(a / c for c, a in zip(compiles, analyses))
    own_ratio = statistics.median(max(a - t, 0.0) / c for c, a, t in zip(compiles, analyses, as_texts))
    report_s = best_of(lambda: analyze(compiled, chip=spec), repeat)
    text = compiled.as_text()
    return {"program": name, "target": target, "chip": chip, "hlo_chars": len(text),
            "ops": int(len(analyze(compiled, chip=spec).ops)), "lower_s": lower_s, "lower_compile_s": total_s,
            "report_s": report_s, "analysis_s": analysis_s, "ratio": analysis_s / total_s, "turn_ratio": turn_ratio,
            "as_text_s": as_text_s, "own_ratio": own_ratio}


_IMPORT_PROBE = r"""
import os, time
import jax, jax.numpy as jnp
jax.jit(lambda x: x + 1).lower(jnp.ones(2)).compile()
t0 = time.perf_counter()
import hloscope.pytest_plugin as p
from hloscope.roofline.chips import get_chip
t1 = time.perf_counter()
from hloscope.analysis import analyze
from hloscope.compare import baseline as bl
bl.record(analyze(jax.jit(lambda x: x * 2).lower(jnp.ones(2)).compile(), chip=get_chip("tpu-v5e")))
t2 = time.perf_counter()
print(t1 - t0, t2 - t1)
"""


def import_cost() -> tuple[float, float]:
    """(plugin import, first analysis including its lazy imports) in a fresh interpreter, seconds."""
    out = subprocess.run([sys.executable, "-c", _IMPORT_PROBE], check=True, capture_output=True, text=True,
                         cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}).stdout.split()
    return float(out[0]), float(out[1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=5, help="timed runs per row; the best is reported")
    ap.add_argument("--json", type=Path, help="also write the rows as JSON here")
    ap.add_argument("--no-deviceless", action="store_true", help="skip the deviceless TPU rows")
    args = ap.parse_args(argv)
    _setup_env()

    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.sharding import Mesh

    targets: list[tuple[str, list[Any], Any, str]] = [("cpu", list(jax.devices()), jnp.float32, "tpu-v5e")]
    if not args.no_deviceless and importlib.util.find_spec("libtpu") is not None:
        from jax.experimental import topologies

        targets.append(("deviceless v5e:2x4", list(topologies.get_topology_desc("v5e:2x4", "tpu").devices),
                        jnp.bfloat16, "tpu-v5e"))
    rows = []
    for target, devices, dtype, chip in targets:
        mesh = Mesh(np.array(devices[:8], dtype=object).reshape(2, 4), ("data", "model"))
        programs = [("mlp", *mlp_program(mesh, dtype))]
        programs += [(f"transformer-{n}l", *transformer_program(mesh, dtype, n)) for n in (2, 8)]
        for name, make, fn_args in programs:
            row = measure(name, target, make, fn_args, chip, args.repeat)
            rows.append(row)
            print(f"{name:16s} {target:20s} HLO {row['hlo_chars'] / 1e3:7.0f} kB {row['ops']:5d} ops  "
                  f"lower {row['lower_s'] * 1e3:7.1f} ms  lower+compile {row['lower_compile_s'] * 1e3:8.1f} ms  "
                  f"report {row['report_s'] * 1e3:6.1f} ms  analysis {row['analysis_s'] * 1e3:6.1f} ms  = "
                  f"{row['ratio']:6.1%}  (in turns {row['turn_ratio']:5.1%}; as_text {row['as_text_s'] * 1e3:5.1f} ms; "
                  f"the rest {row['own_ratio']:5.1%})",
                  flush=True)
    imp, first = import_cost()
    print(f"one-time: plugin import {imp * 1e3:.0f} ms; first analysis with its lazy imports (pandas, parser, "
          f"cost model) {first * 1e3:.0f} ms")
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "plugin_import_s": imp, "first_analysis_s": first,
                                         "jax": jax.__version__}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
