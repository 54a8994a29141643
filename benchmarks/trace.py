"""Trace benchmark: hloscope's profile -> per-op table against XProf's ``hlo_stats`` tool, same file, one run.

Usage (from the repository root)::

    python benchmarks/trace.py                      # the big CPU trace of make_big_trace.py (recorded once, cached)
    python benchmarks/trace.py --trace PATH         # any *.xplane.pb, or a log/run dir holding one
    python benchmarks/trace.py --repeat 5 --chip tpu-v5e

Without ``--trace`` the trace is the one ``benchmarks/make_big_trace.py`` records (48-layer scanned transformer
train step, 5 steps, 8 host CPU devices; ~35 MB), cached under ``$HLOSCOPE_BENCH_CACHE`` (default
``~/.cache/hloscope-bench``), never in the repository.

Every measurement runs in a fresh child process that first imports everything and warms up on the bundled
``fixtures/profile/cpu_train_step`` capture, so import and first-call costs are excluded; hloscope and XProf
children alternate, so machine load affects both alike, and the best wall time of ``--repeat`` runs is kept.

* ``hloscope``: ``hloscope.analyze(path, chip=CHIP)`` -- read the XSpace, per-op events and steps, HLO protos
  -> text -> parsed module, costs, roofline scores, the ``ops`` / ``modules`` tables. ``--chip`` defaults to
  ``h100``: with a CPU trace and no chip, ``analyze`` would score against the calibrated ``host`` chip and, if
  ``hloscope calibrate`` never ran, measure the host on the fly (seconds of noise); the chip only changes the
  scoring, not the parsing.
* ``hloscope, open_xspace``: the same, with the child reading files through ``open_xspace`` (the lean reader:
  events decoded line by line from the file) where ``analyze`` calls ``read_xspace`` (which decodes the whole
  XSpace); identical to the row above once ``analyze`` uses ``open_xspace`` itself. ``--no-lean`` skips it.
* ``XProf``: ``xprof.convert.raw_to_tool_data.xspace_to_tool_data([path], "hlo_stats", {"use_saved_result":
  False})`` on a copy of the file in a fresh temporary directory (XProf caches ``*.op_stats*.pb`` next to the
  file; the copy keeps both the repository and the next run clean). Note: XProf's ``hlo_stats`` returns no
  rows for these CPU traces (it logs "Scheduled 0 OpMetricsDb generation tasks": its op metrics come from
  device planes); the row count is printed so that stays visible.
* peak RSS: the hloscope child's ``ru_maxrss`` (which includes the interpreter, numpy/pandas/jaxlib imports and
  the warm-up), and the same minus the RSS just before ``analyze`` ("over imports"); both against the file size.
* joined fraction: ``report.coverage["joined_time_fraction"]``: the share of op-event time whose op joined an
  HLO instruction with a cost.

``--stages`` adds a breakdown of the parsing stages (``read_xspace`` / ``open_xspace``, ``op_events``,
``step_events``, HLO text -> model -> cost), one child process for all.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
HERE = Path(__file__).resolve().parent
FIXTURE = REPO / "fixtures" / "profile" / "cpu_train_step" / "plugins" / "profile" / "run0" / "localhost.xplane.pb"

_PRELUDE = r'''
import json, os, resource, sys, time
sys.path.insert(0, sys.argv[1])
def rss_mb():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")
def peak_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
'''

_HLOSCOPE = _PRELUDE + r'''
import hloscope
from jax._src.lib import xla_client  # noqa: F401  (analyze prints HLO protos with it)
path, fixture, chip, lean = sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5] == "lean"
if lean:  # what analyze does if _traced reads files with open_xspace instead of read_xspace
    from hloscope.parsers import _xspace
    _xspace.read_xspace = _xspace.open_xspace
hloscope.analyze(fixture, chip=chip)  # warm-up
before = rss_mb()
t0, c0 = time.perf_counter(), time.process_time()
report = hloscope.analyze(path, chip=chip)
wall, cpu = time.perf_counter() - t0, time.process_time() - c0
print(json.dumps({"wall": wall, "cpu": cpu, "peak_mb": peak_mb(), "before_mb": before,
                  "joined": report.coverage.get("joined_time_fraction"), "ops": len(report.ops),
                  "steps": report.coverage.get("steps"), "devices": report.coverage.get("devices")}))
'''

_XPROF = _PRELUDE + r'''
import shutil, tempfile
from xprof.convert import raw_to_tool_data
path, fixture = sys.argv[2], sys.argv[3]
def run(src):
    with tempfile.TemporaryDirectory() as d:  # fresh dir: XProf writes cached op stats next to the file
        dst = os.path.join(d, os.path.basename(src))
        shutil.copyfile(src, dst)
        t0, c0 = time.perf_counter(), time.process_time()
        data, _ = raw_to_tool_data.xspace_to_tool_data([dst], "hlo_stats", {"use_saved_result": False})
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    if data is None:
        raise SystemExit("XProf hlo_stats returned no data")
    return wall, cpu, len(json.loads(data).get("rows", []))
run(fixture)  # warm-up
before = rss_mb()
wall, cpu, rows = run(path)
print(json.dumps({"wall": wall, "cpu": cpu, "peak_mb": peak_mb(), "before_mb": before, "rows": rows}))
'''

_STAGES = _PRELUDE + r'''
import gc
from hloscope.cost import module_cost
from hloscope.parsers import parse_hlo_text
from hloscope.parsers import _xspace as X
path, fixture = sys.argv[2], sys.argv[3]
def timed(fn):
    gc.collect()
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0
x = X.read_xspace(fixture); X.op_events(x); X.step_events(x); X.hlo_protos(x)[0].to_text()  # warm-up
if hasattr(X, "open_xspace"):
    X.op_events(X.open_xspace(fixture))
rows = []
x, t = timed(lambda: X.read_xspace(path)); rows.append(("read_xspace (decode all)", t))
events = sum(len(line.events) for plane in x.planes for line in plane.lines)
ops, t = timed(lambda: X.op_events(x)); rows.append(("op_events(decoded)", t))
steps, t = timed(lambda: X.step_events(x)); rows.append(("step_events(decoded)", t))
entries, t = timed(lambda: X.hlo_protos(x)); rows.append(("hlo_protos", t))
del x
if hasattr(X, "open_xspace"):
    ix, t = timed(lambda: X.open_xspace(path)); rows.append(("open_xspace (index only)", t))
    ops2, t = timed(lambda: X.op_events(ix)); rows.append(("op_events(index)", t))
    steps2, t = timed(lambda: X.step_events(ix)); rows.append(("step_events(index, after op_events)", t))
    assert ops.equals(ops2) and steps.equals(steps2), "op_events/step_events differ between message and index"
text, t = timed(lambda: entries[0].to_text()); rows.append(("HLO proto -> text (jaxlib)", t))
module, t = timed(lambda: parse_hlo_text(text)); rows.append(("parse_hlo_text", t))
_, t = timed(lambda: module_cost(module)); rows.append(("module_cost", t))
print(json.dumps({"rows": rows, "events": events, "op_events": len(ops), "steps": len(steps),
                  "hlo_chars": len(text)}))
'''


def _child(code: str, *args: str) -> dict:
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    proc = subprocess.run([sys.executable, "-c", code, str(REPO), *args], capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise SystemExit(f"benchmark child failed (exit {proc.returncode}):\n{proc.stderr[-4000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def resolve_trace(arg: str | None) -> Path:
    if arg is None:
        sys.path.insert(0, str(HERE))
        from make_big_trace import ensure_trace

        return ensure_trace()
    p = Path(arg)
    if p.is_file():
        return p
    sys.path.insert(0, str(REPO))
    from hloscope.parsers._trace_dir import find_xplane_files

    _, files = find_xplane_files(p)
    if len(files) != 1:
        raise SystemExit(f"{p}: {len(files)} .xplane.pb files in the run; pass one with --trace FILE")
    return files[0]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trace", help="*.xplane.pb file or log/run dir (default: the make_big_trace.py trace)")
    ap.add_argument("--chip", default="h100", help="chip to score against (default h100; see the docstring)")
    ap.add_argument("--repeat", type=int, default=3, help="runs per tool, each in a fresh process; best kept")
    ap.add_argument("--stages", action="store_true", help="also time hloscope's parsing stages")
    ap.add_argument("--no-xprof", action="store_true", help="skip XProf (e.g. when it is not installed)")
    ap.add_argument("--no-lean", action="store_true", help="skip the open_xspace variant of analyze")
    ap.add_argument("--json", type=Path, help="also write the numbers to this JSON file")
    args = ap.parse_args(argv)

    path = resolve_trace(args.trace)
    fixture = FIXTURE if FIXTURE.is_file() else path
    size_mb = path.stat().st_size / 2**20
    print(f"trace: {path} ({size_mb:.1f} MiB)", flush=True)

    sys.path.insert(0, str(REPO))
    from hloscope.parsers import _xspace

    tools = {"hloscope analyze": ("eager",)}
    if hasattr(_xspace, "open_xspace") and not args.no_lean:
        tools["hloscope analyze, open_xspace"] = ("lean",)
    if not args.no_xprof:
        tools["XProf hlo_stats"] = ()
    runs: dict[str, list[dict]] = {t: [] for t in tools}
    for i in range(args.repeat):  # alternate the tools, so that machine load hits all of them alike
        for tool, extra in tools.items():
            code = _XPROF if tool.startswith("XProf") else _HLOSCOPE
            chip = () if tool.startswith("XProf") else (args.chip,)
            runs[tool].append(_child(code, str(path), str(fixture), *chip, *extra))
        print(f"  run {i + 1}/{args.repeat}: " + ", ".join(f"{t} {r[-1]['wall']:.2f} s" for t, r in runs.items()),
              flush=True)

    out = {"trace": str(path), "file_mb": size_mb, "chip": args.chip, "repeat": args.repeat, "runs": runs,
           "summary": {}}
    print()
    print(f"{'':32}{'wall s':>8}{'cpu s':>8}{'peak RSS':>10}{'/file':>7}{'over imports':>14}{'/file':>7}"
          f"{'/XProf':>8}")
    xprof = min(runs["XProf hlo_stats"], key=lambda r: r["wall"]) if "XProf hlo_stats" in runs else None
    for tool, rs in runs.items():
        best = min(rs, key=lambda r: r["wall"])
        peak = max(r["peak_mb"] for r in rs)
        over = max(r["peak_mb"] - r["before_mb"] for r in rs)
        ratio = best["wall"] / xprof["wall"] if xprof else float("nan")
        out["summary"][tool] = {"wall": best["wall"], "cpu": best["cpu"], "peak_mb": peak, "over_imports_mb": over,
                                "ratio_to_xprof": ratio, "joined": best.get("joined")}
        print(f"{tool:32}{best['wall']:8.2f}{best['cpu']:8.2f}{peak:10.0f}{peak / size_mb:6.1f}x{over:14.0f}"
              f"{over / size_mb:6.1f}x{ratio:7.2f}x")
    print()
    best_h = min(runs["hloscope analyze"], key=lambda r: r["wall"])
    print(f"file {size_mb:.1f} MiB; targets: hloscope <= 0.5x XProf's wall time, peak RSS <= 2x the file, joined "
          f">= 99 %. RSS in MiB; 'over imports' = peak minus the RSS just before the timed call.")
    print(f"joined time fraction: {100 * best_h['joined']:.2f} % ({best_h['ops']} op rows, {best_h['steps']} "
          f"steps, {best_h['devices']} devices); chip {args.chip}; best of {args.repeat} runs, each in a fresh "
          f"process")
    if xprof:
        note = "  (XProf builds no hlo_stats rows from the CPU thunk events of /host:CPU)" if not xprof["rows"] else ""
        print(f"XProf hlo_stats rows: {xprof['rows']}{note}")

    if args.stages:
        st = _child(_STAGES, str(path), str(fixture))
        out["stages"] = st
        print()
        print(f"stages ({st['events']} events, {st['op_events']} op events, {st['steps']} steps, "
              f"HLO text {st['hlo_chars'] / 1e6:.2f} MB):")
        for label, seconds in st["rows"]:
            print(f"  {label:38}{seconds:8.3f} s")
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
