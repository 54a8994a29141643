"""Memory and garbage-collector footprint of a parse+cost, in a fresh process.

Usage (from the repository root)::

    python benchmarks/parse_memory.py                 # the generated module of parse.py (cached there)
    python benchmarks/parse_memory.py --hlo FILE.txt  # any HLO text file instead

Prints, for ``module_cost(parse_hlo_text(text))`` with the text already read: the growth of the process's peak
resident set (``resource.getrusage``, ``ru_maxrss``: kB on Linux), the objects the cyclic collector tracks
afterwards (``len(gc.get_objects())``), and the time of one full collection (``gc.collect()``) with the parsed
module and its costs alive -- what every later full collection in a user's process pays for holding them.
Linux only (``ru_maxrss`` units differ elsewhere).
"""

from __future__ import annotations

import argparse
import gc
import resource
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hlo", type=Path, help="HLO text file (default: parse.py's generated module)")
    ap.add_argument("--layers", type=int, default=48, help="layers of the generated module")
    args = ap.parse_args(argv)
    if args.hlo is None:
        sys.path.insert(0, str(REPO / "benchmarks"))
        from parse import generated_module

        path = generated_module(args.layers)
    else:
        path = args.hlo
    text = path.read_text()

    from hloscope.cost import module_cost
    from hloscope.parsers import parse_hlo_text

    gc.collect()
    before_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    module = parse_hlo_text(text, str(path))
    cost = module_cost(module)
    seconds = time.perf_counter() - t0
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    gc.collect()
    t1 = time.perf_counter()
    gc.collect()
    collect_s = time.perf_counter() - t1
    print(f"{path.name}: {len(text) / 1e6:.2f} MB of text, {len(cost.rows)} cost rows")
    print(f"parse+cost            {seconds:8.3f} s")
    print(f"peak resident growth  {(peak_kb - before_kb) / 1024:8.0f} MB")
    print(f"objects tracked by gc {len(gc.get_objects()):8d}")
    print(f"one full collection   {collect_s:8.3f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
