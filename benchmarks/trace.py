"""Trace benchmark: hloscope's profile -> per-op table against XProf's ``hlo_stats`` (or ``roofline_model``) tool,
same file, one run.

Usage (from the repository root)::

    python benchmarks/trace.py                      # the CPU trace of make_big_trace.py (recorded once, cached)
    python benchmarks/trace.py --big                # its ~1.1 GB version (25 steps captured, tiled 6 times)
    python benchmarks/trace.py --gpu                # ~1.0 GB GPU trace: the bundled H100 capture tiled 31000 times,
                                                    # against XProf's roofline_model
    python benchmarks/trace.py --trace PATH         # any *.xplane.pb, or a log/run dir holding one
    python benchmarks/trace.py --repeat 5 --chip tpu-v5e --stages

Without ``--trace`` the trace is one ``benchmarks/make_big_trace.py`` records (48-layer scanned transformer train
step on 8 host CPU devices: 5 steps, ~35 MB; with ``--big`` 25 steps tiled 6 times in time, ~1.1 GB), cached
under ``$HLOSCOPE_BENCH_CACHE`` (default ``~/.cache/hloscope-bench``), never in the repository. With ``--gpu``
it is the bundled H100 capture ``fixtures/profile/gpu_mlp_train_nocb`` (5 steps of a bf16 MLP train step, one
kernel event per HLO op) with its events repeated ``--tile`` (31000) times in time (``make_big_trace.py --source
... --tile K``: a long capture made by replicating the real one's steps, not a recorded one; no GPU needed), and
XProf's tool is ``roofline_model``, which builds rows from the ``/device:GPU:0`` plane.

Every measurement runs in a fresh child process; the tools alternate run by run, so machine load affects all
alike, and the best wall time of ``--repeat`` runs is kept.

* ``hloscope report`` (CLI): the whole process a user runs, ``python -m hloscope report DIR --chip CHIP``
  (imports, reading, costing, scoring, the printed tables), DIR the capture's log dir (the file itself when it
  is not under ``plugins/profile/<run>/``). Wall time around the process; peak RSS its ``ru_maxrss`` (from
  ``os.wait4``; the process has no children).
* ``hloscope analyze``: ``hloscope.analyze(path, chip=CHIP)`` in a child that first imports everything and warms
  up on the bundled ``fixtures/profile/cpu_train_step`` (imports and first calls not timed). ``--serial`` adds
  the same with the read-ahead thread of the XSpace reader off (``_xspace_file._PREFETCH_MIN_BYTES``).
* ``XProf hlo_stats`` (``--xprof-tool``; ``roofline_model`` with ``--gpu``):
  ``xprof.convert.raw_to_tool_data.xspace_to_tool_data([path], TOOL, {"use_saved_result": False})`` in a child
  warmed up the same way, on a copy of the file in a fresh temporary directory (XProf caches ``*.op_stats*.pb``
  next to the file; the copy keeps the cache and the next run clean). Rows: ``hlo_stats`` returns one table
  (``{"cols", "rows"}``), ``roofline_model`` a list of two (the roofline rows -- per step and ``Total`` -- and
  its diagnostics); the first table's rows are counted. Note: XProf's ``hlo_stats`` returns no rows for the CPU
  traces (it logs "Scheduled 0 OpMetricsDb generation tasks": its op metrics come from device planes); the row
  count is printed so that stays visible.
* ``--chip`` defaults to ``h100``: with a CPU trace and no chip, hloscope would score against the calibrated
  ``host`` chip and, if ``hloscope calibrate`` never ran, measure the host on the fly (seconds of noise); the
  chip only changes the scoring, not the parsing.
* peak RSS: the child's ``ru_maxrss`` (MiB; includes the interpreter and imports, and for the in-process rows
  the warm-up), and for the in-process rows the same minus the RSS just before the timed call ("over
  imports"); both against the file size.
* joined fraction: ``report.coverage["joined_time_fraction"]``: the share of op-event time whose op joined an
  HLO instruction with a cost.

``--stages`` adds, in one child, the stages of ``analyze`` on a trace (``analysis._traced``) timed one by one.
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
path, fixture, chip, serial = sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5] == "serial"
if serial:  # the XSpace reader without its read-ahead thread
    from hloscope.parsers import _xspace_file
    _xspace_file._PREFETCH_MIN_BYTES = 1 << 62
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
path, fixture, tool = sys.argv[2], sys.argv[3], sys.argv[4]
def run(src):
    with tempfile.TemporaryDirectory() as d:  # fresh dir: XProf writes cached op stats next to the file
        dst = os.path.join(d, os.path.basename(src))
        shutil.copyfile(src, dst)
        t0, c0 = time.perf_counter(), time.process_time()
        data, _ = raw_to_tool_data.xspace_to_tool_data([dst], tool, {"use_saved_result": False})
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    if data is None:
        raise SystemExit(f"XProf {tool} returned no data")
    table = json.loads(data)
    table = (table[0] if table else {}) if isinstance(table, list) else table  # roofline_model: [rows, diagnostics]
    rows = table.get("rows") or []
    # roofline_model: column "step" is a step number or "Total" (the whole profile)
    total = sum(1 for r in rows if r.get("c") and r["c"][0].get("v") == "Total") if tool == "roofline_model" else None
    return wall, cpu, len(rows), total
run(fixture)  # warm-up
before = rss_mb()
wall, cpu, rows, total = run(path)
print(json.dumps({"wall": wall, "cpu": cpu, "peak_mb": peak_mb(), "before_mb": before, "rows": rows,
                  "total_rows": total}))
'''

_STAGES = _PRELUDE + r'''
import gc
from pathlib import Path
import hloscope
from jax._src.lib import xla_client  # noqa: F401
from hloscope import analysis as A
from hloscope.cost import module_cost
from hloscope.parsers.events import read_trace
from hloscope.parsers._command_buffer import join_command_buffer_kernels
from hloscope.roofline.join import measured_times, named_modules
from hloscope.steps.breakdown import host_parts
from hloscope.steps.schedule import async_done_pairs
path, fixture, chip = Path(sys.argv[2]), sys.argv[3], sys.argv[4]
hloscope.analyze(fixture, chip=chip)  # warm-up
rows = []
def timed(label, fn):
    gc.collect()
    t0 = time.perf_counter()
    out = fn()
    rows.append((label, time.perf_counter() - t0, rss_mb(), peak_mb()))
    return out
# the steps of analysis._traced for an XSpace, one by one
events = timed("read_trace (XSpace -> op events, steps)", lambda: read_trace(path, None))
n_ops = len(events.ops)
events.ops = named_modules(events.ops)
modules = timed("HLO protos -> text -> parsed modules", lambda: A._trace_modules(events, [], path))
events.ops, _ = join_command_buffer_kernels(events.ops, modules)
measured = timed("measured_times (join)", lambda: measured_times(events))
hlo = [modules[n] for n in sorted(measured.runs) if n in modules]
costs = timed("module_cost", lambda: [module_cost(m) for m in hlo])
spec = A._resolve_chip(chip, events.platform, events.device_kind, [])
pairs = async_done_pairs(hlo) if hlo else None
report = timed("scored_trace_report (ops table, steps)", lambda: A.scored_trace_report(
    costs, spec, measured, events.files, set(modules), [], hlo, lambda ops: host_parts(events, ops, pairs)))
print(json.dumps({"rows": rows, "op_events": n_ops, "steps": len(events.steps)}))
'''


def _cli(target: Path, chip: str) -> dict:
    """``python -m hloscope report TARGET --chip CHIP`` as a user runs it: wall time and peak RSS of the process."""
    import time

    env = dict(os.environ, JAX_PLATFORMS="cpu", PYTHONPATH=str(REPO))
    cmd = [sys.executable, "-m", "hloscope", "report", str(target), "--chip", chip]
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, cwd=REPO)
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed (exit {proc.returncode}):\n{err.decode()[-4000:]}")
    return {"wall": wall, "cpu": usage.ru_utime + usage.ru_stime, "peak_mb": usage.ru_maxrss / 1024}


def _log_dir(path: Path) -> Path:
    """The capture's log dir (``<dir>/plugins/profile/<run>/<host>.xplane.pb``), else the file itself."""
    parents = path.parents
    if len(parents) >= 4 and parents[1].name == "profile" and parents[2].name == "plugins":
        return parents[3]
    return path


def _child(code: str, *args: str) -> dict:
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    proc = subprocess.run([sys.executable, "-c", code, str(REPO), *args], capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise SystemExit(f"benchmark child failed (exit {proc.returncode}):\n{proc.stderr[-4000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


GPU_SOURCE = REPO / "fixtures" / "profile" / "gpu_mlp_train_nocb" / "plugins" / "profile" / "run0" / "localhost.xplane.pb"
GPU_TILE = 31000  # x 32.4 kB of events per copy of the 5-step capture: 1.015 GB, 155,000 steps


def resolve_trace(arg: str | None, big: bool = False, gpu: bool = False, tile: int = GPU_TILE) -> Path:
    if arg is None:
        sys.path.insert(0, str(HERE))
        from make_big_trace import ensure_tiled, ensure_trace

        if gpu:
            return ensure_tiled(GPU_SOURCE, tile)
        return ensure_trace(steps=25, direct=True, tile=6) if big else ensure_trace()
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
    ap.add_argument("--big", action="store_true", help="without --trace: the ~1.1 GB trace (make_big_trace.py "
                    "--steps 25 --direct --tile 6; ~35 s to make, once)")
    ap.add_argument("--gpu", action="store_true", help="without --trace: the bundled H100 capture (fixtures/profile/"
                    "gpu_mlp_train_nocb) tiled --tile times (make_big_trace.py --source; once, ~15 s), against "
                    "XProf's roofline_model")
    ap.add_argument("--tile", type=int, default=GPU_TILE, help=f"with --gpu: copies of the capture (default "
                    f"{GPU_TILE}: ~1.0 GB)")
    ap.add_argument("--xprof-tool", choices=["hlo_stats", "roofline_model"],
                    help="XProf tool to time (default: roofline_model with --gpu, else hlo_stats)")
    ap.add_argument("--chip", default="h100", help="chip to score against (default h100; see the docstring)")
    ap.add_argument("--repeat", type=int, default=3, help="runs per tool, each in a fresh process; best kept")
    ap.add_argument("--stages", action="store_true", help="also time the stages of analyze on the trace")
    ap.add_argument("--no-xprof", action="store_true", help="skip XProf (e.g. when it is not installed)")
    ap.add_argument("--no-analyze", action="store_true", help="skip the in-process hloscope.analyze row")
    ap.add_argument("--serial", action="store_true", help="add analyze with the reader's read-ahead thread off")
    ap.add_argument("--json", type=Path, help="also write the numbers to this JSON file")
    args = ap.parse_args(argv)

    path = resolve_trace(args.trace, args.big, args.gpu, args.tile)
    warm = GPU_SOURCE if args.gpu else FIXTURE  # warm-up: a small capture of the same kind
    fixture = warm if warm.is_file() else path
    xtool = args.xprof_tool or ("roofline_model" if args.gpu else "hlo_stats")
    xname = f"XProf {xtool}"
    size_mb = path.stat().st_size / 2**20
    target = _log_dir(path)
    print(f"trace: {path} ({size_mb:.1f} MiB, {path.stat().st_size / 1e9:.3f} GB); CLI target {target}", flush=True)

    tools: dict[str, tuple] = {"hloscope report (CLI)": ("cli",)}
    if not args.no_analyze:
        tools["hloscope analyze"] = ("child", _HLOSCOPE, str(path), str(fixture), args.chip, "threads")
    if args.serial:
        tools["hloscope analyze, serial read"] = ("child", _HLOSCOPE, str(path), str(fixture), args.chip, "serial")
    if not args.no_xprof:
        tools[xname] = ("child", _XPROF, str(path), str(fixture), xtool)
    runs: dict[str, list[dict]] = {t: [] for t in tools}
    for i in range(args.repeat):  # alternate the tools, so that machine load hits all of them alike
        for tool, how in tools.items():
            runs[tool].append(_cli(target, args.chip) if how[0] == "cli" else _child(*how[1:]))
        print(f"  run {i + 1}/{args.repeat}: " + ", ".join(f"{t} {r[-1]['wall']:.2f} s" for t, r in runs.items()),
              flush=True)

    out = {"trace": str(path), "file_mb": size_mb, "chip": args.chip, "repeat": args.repeat, "xprof_tool": xtool,
           "runs": runs, "summary": {}}
    print()
    print(f"{'':32}{'wall s':>8}{'cpu s':>8}{'peak RSS':>10}{'/file':>7}{'over imports':>14}{'/file':>7}"
          f"{'/XProf':>8}")
    xprof = min(runs[xname], key=lambda r: r["wall"]) if xname in runs else None
    for tool, rs in runs.items():
        best = min(rs, key=lambda r: r["wall"])
        peak = max(r["peak_mb"] for r in rs)
        over = max(r["peak_mb"] - r["before_mb"] for r in rs) if "before_mb" in rs[0] else float("nan")
        ratio = best["wall"] / xprof["wall"] if xprof else float("nan")
        out["summary"][tool] = {"wall": best["wall"], "cpu": best["cpu"], "peak_mb": peak, "over_imports_mb": over,
                                "ratio_to_xprof": ratio, "joined": best.get("joined")}
        print(f"{tool:32}{best['wall']:8.2f}{best['cpu']:8.2f}{peak:10.0f}{peak / size_mb:6.2f}x{over:14.0f}"
              f"{over / size_mb:6.2f}x{ratio:7.2f}x")
    print()
    print(f"file {size_mb:.1f} MiB; targets (issue #16): the hloscope CLI <= 0.3x XProf's wall time, its peak RSS "
          f"<= 1.5x the file. RSS in MiB; 'over imports' = peak minus the RSS just before the timed call.")
    if "hloscope analyze" in runs:
        best_h = min(runs["hloscope analyze"], key=lambda r: r["wall"])
        print(f"joined time fraction: {100 * best_h['joined']:.2f} % ({best_h['ops']} op rows, {best_h['steps']} "
              f"steps, {best_h['devices']} devices); chip {args.chip}; best of {args.repeat} runs, each in a fresh "
              f"process")
    if xprof:
        note = f"  (XProf builds no {xtool} rows from the CPU thunk events of /host:CPU)" if not xprof["rows"] else ""
        if xprof.get("total_rows") is not None:
            note += f" ({xprof['total_rows']} 'Total' rows, the rest per step)"
        print(f"{xname} rows: {xprof['rows']}{note}")

    if args.stages:
        st = _child(_STAGES, str(path), str(fixture), args.chip)
        out["stages"] = st
        print()
        print(f"stages of analyze ({st['op_events']} op events, {st['steps']} step markers; RSS after / peak so "
              f"far, MiB):")
        for label, seconds, rss, peak in st["rows"]:
            print(f"  {label:44}{seconds:8.2f} s{rss:8.0f}{peak:8.0f}")
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))
    return 0

if __name__ == "__main__":
    sys.exit(main())
