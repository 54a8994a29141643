"""Predicted memory footprint against XLA's own: for every program of the test generator's catalogue
(tests/generator/programs.py), compiled for the CPU backend and for deviceless TPUs, compare
``hloscope.memory.footprint`` of ``compiled.as_text()`` with ``compiled.memory_analysis()`` of the same
executable: argument, output and alias bytes (expected exact) and temp bytes (issue #18: within 10 %).

Usage: python benchmarks/memory_vs_xla.py [--targets cpu,tpu-v5e] [--only NAME,...] [--verbose]
Prints one row per (program, target) and a summary; exit status 0 always (a survey, not a gate).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")
if "--xla_force_host_platform_device_count" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8").strip()
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "generator"))

import jax  # noqa: E402

import hloscope  # noqa: E402
from hloscope.memory import footprint  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--targets", default="cpu,tpu-v5e")
    parser.add_argument("--only", default="")
    args = parser.parse_args()
    import pytest  # the generator helpers call pytest.skip

    from programs import CATALOGUE
    from test_programs import TARGETS, mesh_for, with_shardings

    only = set(filter(None, args.only.split(",")))
    rows = []
    for target in args.targets.split(","):
        for prog in CATALOGUE:
            if only and prog.name not in only:
                continue
            if prog.targets is not None and target not in prog.targets:
                continue
            try:
                mesh = mesh_for(prog, target)
                built = prog.build(mesh)
                compiled = jax.jit(built.fn).lower(*with_shardings(built.args, built.specs, mesh)).compile()
            except (Exception, pytest.skip.Exception) as err:  # noqa: BLE001 - a survey: say and go on
                print(f"{prog.name:28s} {target:8s} not compiled: {type(err).__name__}: {str(err)[:80]}")
                continue
            xla = compiled.memory_analysis()
            t0 = time.perf_counter()
            fp = footprint(hloscope.parse_hlo(compiled.as_text()))
            dt = time.perf_counter() - t0
            ratio = fp.temp_bytes / xla.temp_size_in_bytes if xla.temp_size_in_bytes else (
                1.0 if fp.temp_bytes == 0 else float("inf"))
            exact = (fp.argument_bytes == xla.argument_size_in_bytes and fp.output_bytes == xla.output_size_in_bytes
                     and fp.alias_bytes == xla.alias_size_in_bytes)
            rows.append((prog.name, target, ratio, exact))
            flag = "" if 0.9 <= ratio <= 1.1 else "  <-- temp"
            flag += "" if exact else (f"  <-- args {fp.argument_bytes}/{xla.argument_size_in_bytes} out "
                                      f"{fp.output_bytes}/{xla.output_size_in_bytes} alias "
                                      f"{fp.alias_bytes}/{xla.alias_size_in_bytes}")
            print(f"{prog.name:28s} {target:8s} temp xla {xla.temp_size_in_bytes:>12,d} hloscope {fp.temp_bytes:>12,d} "
                  f"({ratio:6.3f}) {dt * 1e3:6.1f} ms{flag}")
    within = sum(1 for r in rows if 0.9 <= r[2] <= 1.1)
    exact = sum(1 for r in rows if r[3])
    print(f"\n{len(rows)} programs: temp within 10% of XLA: {within}; argument/output/alias bytes exact: {exact}")


if __name__ == "__main__":
    main()
