"""What the pytest plugin's baseline check costs on a whole model's module, stage by stage (issue #16).

Usage (from the repository root)::

    python benchmarks/baseline_check.py                    # issue #16's corpus modules
    python benchmarks/baseline_check.py --hlo A.hlo B.hlo  # any HLO text files instead
    python benchmarks/baseline_check.py --repeat 9

A test that gates a model's train step with ``hloscope.check_baseline`` (the plugin's fixture) pays, after the
analysis, for what ``check_baseline`` does with the report (``hloscope/pytest_plugin.py``): the baseline record
of the run (``baseline.record``: the memory footprint for ``peak_bytes``, then the module totals and the
significant ops), the stored baseline read (``baseline.from_json``) and the comparison with it (``compare`` and
its verdict). The
stored baseline here is the record of the same module, so the check passes, as it does on most CI runs: the
comparison pairs the stored ops with the report's and has a row for every other op (``appeared``).

Rows, per module (best of ``--repeat``, taken in turn with the others --
``parse.times_interleaved`` -- so that a drifting host slows all of one turn):

* ``ops``: the number of the report's ops (the comparison's rows);
* ``analyze``: ``hloscope.analyze(text, chip=CHIP)`` -- for scale;
* ``memory``: ``report.memory`` (the liveness walk ``record`` runs first): the best of analyze + memory on a
  fresh report, less the best of analyze;
* ``record``: ``baseline.record(report)`` on a report whose memory is computed;
* ``check``: ``from_json`` of the stored text, ``compare(BaselineReport(stored), report)`` and its ``verdict``.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
os.environ.setdefault("JAX_PLATFORMS", "cpu")

from benchmarks.analyze import corpus_files  # noqa: E402
from benchmarks.parse import times_interleaved  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hlo", type=Path, nargs="*", help="HLO text files (default: issue #16's corpus modules)")
    ap.add_argument("--corpus", type=Path, default=REPO.parent / "shared" / "corpus")
    ap.add_argument("--chip", default="tpu-v5e")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args(argv)

    from hloscope.analysis import analyze
    from hloscope.compare import baseline as bl
    from hloscope.compare import compare
    from hloscope.roofline.chips import get_chip

    spec = get_chip(args.chip)
    paths = args.hlo or corpus_files(args.corpus)
    print(f"{'module':40s} {'ops':>6s} {'analyze':>9s} {'memory':>9s} {'record':>9s} {'check':>9s}   (best, ms)")
    for path in paths:
        text = path.read_text()
        report = analyze(text, chip=spec)
        stored_text = bl.to_json(bl.record(report))  # (its memory computed: record's first stage has its own row)

        def memory() -> object:
            return analyze(text, chip=spec).memory

        def check() -> object:
            return compare(bl.BaselineReport(bl.from_json(stored_text), spec), report, rules=0.05).verdict

        def record() -> object:
            return bl.record(report)

        times = times_interleaved([lambda: analyze(text, chip=spec), memory, record, check], args.repeat)
        best = [min(t) for t in times]
        memory_s = best[1] - best[0]  # (a fresh report's memory: its analysis taken off)
        print(f"{path.name[-40:]:40s} {len(report.ops):6d} {best[0] * 1e3:9.1f} {memory_s * 1e3:9.1f} "
              f"{best[2] * 1e3:9.1f} {best[3] * 1e3:9.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
