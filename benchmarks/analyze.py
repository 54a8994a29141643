"""End-to-end analysis speed of HLO modules: ``hloscope.analyze(text, chip=...)`` against XLA's parse (issue #16).

Usage (from the repository root)::

    python benchmarks/analyze.py                    # the corpus modules of issue #16 and the 52 MB module
    python benchmarks/analyze.py --stages           # plus where analyze's time goes, per module
    python benchmarks/analyze.py --hlo A.hlo B.hlo  # any HLO text files instead
    python benchmarks/analyze.py --small            # small modules (2-20 kB): median analyze time
    python benchmarks/analyze.py --cli              # plus `hloscope report FILE --format json` as a process
    python benchmarks/analyze.py --flax-gpt         # plus a flax GPT's step compiled deviceless for TPU v5e

Rows (all in one process, on the same text; best of ``--repeat`` wall times, the rows' calls taken in turn,
``parse.times_interleaved``):

* ``XLA parse``: ``xla_client.hlo.hlo_module_from_text(text)`` -- the yardstick.
* ``parse``: ``hloscope.parsers.parse_hlo_text(text)``.
* ``analyze``: ``hloscope.analyze(text, chip=CHIP)`` -- parse, cost, score, the ops and modules tables (kept as
  their columns, ``_columns.ColumnTable``), the overlap columns: what a user's call returns.
* ``+ frames``: the same, then ``report.ops`` and ``report.modules`` -- the two DataFrames made of those columns
  (a user who reads the tables pays for them; the JSON, the terminal report and the plugin's baseline do not).
  Issue #16's target is read on this row: analyze with its tables >= 2x.
* ``ratio`` = XLA's time / hloscope's (above 1: faster than XLA's parse), of the best times.
* ``turns a``, ``turns f``: the median over the turns of XLA's time / analyze's (``+ frames``'s) in the same turn
  (``parse.times_interleaved``): on a host whose speed drifts, the best times of two rows may come from
  different stretches; a turn's calls run within a second of each other.
* ``--cli``: ``python -m hloscope report FILE --chip CHIP --format json`` as a child process (best of N), beside
  ``python -c "import hloscope.cli, numpy"`` (interpreter start and the imports a report of HLO text needs: it
  imports no pandas) and XLA's parse again, all taken in turn; target: the report within 1.5x of (XLA parse / 2 +
  interpreter start), from those turns (the best times, and the median over the turns of the report's time over
  its turn's target). The start with
  pandas (what a report imported until 2026-11-28, and what the target was computed from then) is printed
  beside it. Also ``python -m hloscope memory FILE --chip CHIP --format json`` as a process (no target: it
  parses and walks the module, without costing it).

``--small``: every fixture and corpus HLO text of 2-20 kB (post-optimization modules of all sizes users' tests
compile), analyze median and 90th percentile per module; target: median <= 3 ms.

The corpus is read from ``../shared/corpus`` (``--corpus DIR``); the 52 MB module is ``parse.py``'s generated
module (cached under ``$HLOSCOPE_BENCH_CACHE``; generated once, 2-3 minutes). ``--flax-gpt`` adds
``flax_gpt.py``'s module (a flax.linen GPT train step compiled deviceless for TPU v5e, 1.9 MB: what the plugin's
deviceless target hands hloscope; compiled once, ~20 s, needs flax and libtpu, cached there too).
"""

from __future__ import annotations

import argparse
import gc
import os
import stat
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
os.environ.setdefault("JAX_PLATFORMS", "cpu")

from benchmarks.parse import best_of, generated_module, times_interleaved  # noqa: E402

#: issue #16's corpus modules (file name endings under the corpus).
CORPUS_MODULES = [
    "gemma2_2b_keras_jax.hlo",
    "gemma3_1b_flax_call.hlo",
    "hlo_llama31_8b_bf16_1x8.hlo",
    "hlo_mixtral_8x7b_bf16_1x8.hlo",
    "hlo_gemma4_2b_bf16.hlo",
]


def corpus_files(corpus: Path) -> list[Path]:
    found = []
    for name in CORPUS_MODULES:
        hits = sorted(p for p in corpus.glob(f"*/*__{name}"))
        if hits:
            found.append(hits[0])
        else:
            print(f"(not in the corpus: {name})", file=sys.stderr)
    return found


def stages(text: str, chip_id: str) -> dict[str, float]:
    """Seconds of each stage of a static analyze (one run, after a warm-up)."""
    from hloscope.cost import module_cost
    from hloscope.parsers import parse_hlo_text
    from hloscope.roofline.chips import get_chip
    from hloscope.roofline.tables import modules_frame, ops_frame
    from hloscope.steps.columns import add_overlap_columns

    chip = get_chip(chip_id)
    out: dict[str, float] = {}
    gc.collect()
    t = time.perf_counter()
    m = parse_hlo_text(text)
    out["parse"] = time.perf_counter() - t
    t = time.perf_counter()
    costs = [module_cost(m)]
    out["cost"] = time.perf_counter() - t
    t = time.perf_counter()
    ops = ops_frame(costs, chip, as_table=True)
    out["ops table"] = time.perf_counter() - t
    t = time.perf_counter()
    table = modules_frame(costs, ops, chip, schedule_known=True, as_table=True)
    out["modules table"] = time.perf_counter() - t
    t = time.perf_counter()
    add_overlap_columns(ops, table, [m])
    out["overlap columns"] = time.perf_counter() - t
    t = time.perf_counter()
    ops.frame(), table.frame()
    out["the two DataFrames"] = time.perf_counter() - t
    return out


def _with_frames(report):
    """``report`` after its two DataFrames are made (``Report.ops``, ``Report.modules``)."""
    report.ops, report.modules
    return report


def module_rows(paths: list[Path], chip: str, repeat: int, show_stages: bool, cli: bool) -> None:
    import hloscope
    from hloscope.parsers import parse_hlo_text
    from jax._src.lib import xla_client as xc

    print(f"{'module':<44} {'MB':>6} {'XLA parse s':>11} {'parse s':>8} {'ratio':>6} {'analyze s':>9} {'ratio':>6} "
          f"{'+ frames s':>10} {'ratio':>6} {'turns a':>8} {'turns f':>8}")
    for path in paths:
        text = path.read_text()
        xc.hlo.hlo_module_from_text(text)
        _with_frames(hloscope.analyze(text, chip=chip))  # warm-up (imports, first calls)
        turns = times_interleaved([
            lambda: xc.hlo.hlo_module_from_text(text), lambda: parse_hlo_text(text),
            lambda: hloscope.analyze(text, chip=chip), lambda: _with_frames(hloscope.analyze(text, chip=chip))],
            repeat)
        xla, parse, analyze, framed = map(min, turns)
        in_turn = [statistics.median(x / t for x, t in zip(turns[0], row)) for row in turns[2:]]
        name = path.name.split("__")[-1][:44]
        print(f"{name:<44} {len(text) / 1e6:6.2f} {xla:11.3f} {parse:8.3f} {xla / parse:5.2f}x {analyze:9.3f} "
              f"{xla / analyze:5.2f}x {framed:10.3f} {xla / framed:5.2f}x {in_turn[0]:7.2f}x {in_turn[1]:7.2f}x",
              flush=True)
        if show_stages:
            s = stages(text, chip)
            print("    " + ", ".join(f"{k} {v * 1e3:.1f} ms" for k, v in s.items()), flush=True)
        if cli:
            commands = [[sys.executable, "-c", "import hloscope.cli, numpy"],
                        [sys.executable, "-c", "import hloscope.cli, pandas"],
                        [sys.executable, "-m", "hloscope", "report", str(path), "--chip", chip, "--format", "json"],
                        [sys.executable, "-m", "hloscope", "memory", str(path), "--chip", chip, "--format", "json"]]
            times = _with_processes(lambda: xc.hlo.hlo_module_from_text(text), commands, repeat)
            xla, start, with_pandas, report, memory = map(min, times)
            in_turn = statistics.median(r / (1.5 * (x / 2 + s)) for x, s, r in zip(times[0], times[1], times[3]))
            print(f"    report --format json (process) {report:.3f} s; interpreter + imports {start:.3f} s "
                  f"(with pandas {with_pandas:.3f} s); XLA parse in the same turns {xla:.3f} s; target <= 1.5 x "
                  f"({xla / 2:.3f} + {start:.3f}) = {1.5 * (xla / 2 + start):.3f} s (with pandas' start "
                  f"{1.5 * (xla / 2 + with_pandas):.3f} s); median over the turns of report / its turn's target "
                  f"{in_turn:.2f}; memory --format json (process, no target) {memory:.3f} s", flush=True)


def _with_processes(xla_parse: Callable[[], object], commands: list[list[str]], repeat: int) -> list[list[float]]:
    """Wall times of ``xla_parse()`` in this process and of each command as a child process, taken in turn
    (``times_interleaved``), after one untimed run of each command. The child may write bytecode caches
    (``PYTHONDONTWRITEBYTECODE`` dropped from its environment): with it set, as in some sandboxes, every module
    edited since its cache was written is compiled again at every start, which no user's install does."""
    if not stat.S_ISCHR(os.stat(os.devnull).st_mode):  # (a report's tens of MB would be written to a file)
        sys.exit(f"{os.devnull} is not a character device here: the report rows would time writing to a file. "
                 f"Restore it (as root: rm {os.devnull} && mknod -m 666 {os.devnull} c 1 3).")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}

    def process(cmd: list[str]) -> Callable[[], object]:
        return lambda: subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, cwd=REPO, env=env)

    for cmd in commands:
        process(cmd)()
    return times_interleaved([xla_parse, *map(process, commands)], repeat)


def small_modules(corpus: Path, chip: str, repeat: int) -> None:
    import hloscope
    from jax._src.lib import xla_client as xc

    paths = [p for p in sorted((REPO / "fixtures").rglob("*")) + sorted(corpus.glob("hlo_*/*"))
             if p.is_file() and p.suffix in (".txt", ".hlo") and 2_000 <= p.stat().st_size <= 20_000]
    times, framed, ratios, skipped = [], [], [], 0
    for path in paths:
        text = path.read_text(errors="replace")
        try:
            hloscope.analyze(text, chip=chip)
        except Exception:  # noqa: BLE001 - not one module (XLA test files holding several, malformed inputs)
            skipped += 1
            continue
        a = best_of(lambda: hloscope.analyze(text, chip=chip), repeat)
        times.append(a)
        framed.append(best_of(lambda: _with_frames(hloscope.analyze(text, chip=chip)), repeat))
        try:
            x = best_of(lambda: xc.hlo.hlo_module_from_text(text), repeat)
            ratios.append(a / x)
        except Exception:  # noqa: BLE001 - XLA rejects some corpus texts hloscope reads
            pass
    times.sort()
    framed.sort()
    print(f"small modules (2-20 kB): {len(times)} analyzed ({skipped} texts refused with a located error: several "
          "modules in one file, test inputs that are not one module)")
    print(f"  analyze median {statistics.median(times) * 1e3:.2f} ms, p90 {times[int(0.9 * len(times))] * 1e3:.2f} ms,"
          f" max {times[-1] * 1e3:.2f} ms; median analyze / XLA parse {statistics.median(ratios):.1f}x "
          f"({len(ratios)} XLA reads); target: median <= 3 ms")
    print(f"  analyze + frames (report.ops, report.modules) median {statistics.median(framed) * 1e3:.2f} ms, "
          f"p90 {framed[int(0.9 * len(framed))] * 1e3:.2f} ms, max {framed[-1] * 1e3:.2f} ms")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hlo", nargs="*", type=Path, help="HLO text files (default: issue #16's modules)")
    ap.add_argument("--corpus", type=Path, default=REPO.parent / "shared" / "corpus")
    ap.add_argument("--chip", default="tpu-v5e")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--stages", action="store_true")
    ap.add_argument("--cli", action="store_true")
    ap.add_argument("--small", action="store_true", help="only the small-module median")
    ap.add_argument("--no-big", action="store_true", help="skip the 52 MB generated module")
    ap.add_argument("--flax-gpt", action="store_true", help="add a flax GPT step compiled deviceless (flax_gpt.py)")
    args = ap.parse_args(argv)
    if args.small:
        small_modules(args.corpus, args.chip, max(args.repeat, 5))
        return 0
    paths = args.hlo or corpus_files(args.corpus)
    if not args.hlo and not args.no_big:
        paths.append(generated_module(48))
    if args.flax_gpt:
        from benchmarks.flax_gpt import cached_text

        paths.append(cached_text())
    module_rows(paths, args.chip, args.repeat, args.stages, args.cli)
    return 0


if __name__ == "__main__":
    sys.exit(main())
