"""Many host files on Dask: serial vs. a local cluster, peak memory per worker, the straggler found.

Usage (from the repository root)::

    python benchmarks/pod_scale.py                   # 64 hosts (benchmarks/make_pod_run.py), 2 workers
    python benchmarks/pod_scale.py --hosts 128 --workers 2 --repeat 3

The run directory is built by ``benchmarks/make_pod_run.py`` from the real 2-process captures of
``fixtures/make_pod_profiles.py`` (hosts renamed and renumbered, one slowed host; see that script). Each variant
runs in a fresh child process (so that its peak RSS is its own), best of ``--repeat``:

With ``--copies-of XPLANE`` the run is ``--hosts`` copies of one larger capture instead (per-host work closer to a
real pod host's hundreds of MB; the copies are identical, so there is no straggler).

* ``all at once``: ``hloscope.analysis._traced`` -- every host file read into one events table (the path a run of
  one file takes);
* ``host by host, 1 process``: ``hloscope.analyze(run, workers=0)`` -- the Dask tasks run one after another here;
* ``Dask, N workers``: ``hloscope.analyze(run, workers=N)`` -- a LocalCluster of N processes, started and stopped
  in the call (the CLI's default), and the same with a cluster started beforehand (``client=``), which is what
  the per-host work costs once a cluster is up.

Printed: seconds, speedup over ``all at once``, the child's peak RSS, the tasks' peak RSS (the largest of any
worker), the hosts found to straggle, and whether every variant's report equals the serial one.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

CHILD = r"""
import json, resource, sys, time
from pathlib import Path
import hloscope
from hloscope.analysis import _traced

def main():
    run, mode, workers = sys.argv[1], sys.argv[2], int(sys.argv[3])
    client = None
    if mode == "client":
        from distributed import Client
        from hloscope.pod.run import _local_cluster
        client = Client(_local_cluster(workers))
        from hloscope.pod.host import warm_up
        client.run(warm_up)  # a cluster that is up has imported its code
    t0 = time.perf_counter()
    if mode == "all":
        r = _traced(Path(run), None, "h100", [])
    elif mode == "client":
        r = hloscope.analyze(run, chip="h100", client=client)
    else:
        r = hloscope.analyze(run, chip="h100", workers=workers)
    dt = time.perf_counter() - t0
    doc = r.to_dict()
    cov = doc["coverage"]
    tasks_rss = cov.pop("peak_task_rss_bytes", 0)
    for k in ("hosts", "failed_hosts", "host_task_seconds"):
        cov.pop(k, None)
    print(json.dumps({"seconds": dt, "rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
                      "tasks_rss": tasks_rss, "stragglers": sorted(set(r.stragglers["host"])),
                      "doc": json.dumps(doc, sort_keys=True)}))
    if client is not None:
        client.close()

if __name__ == "__main__":
    main()
"""


def child(run: str, mode: str, workers: int) -> dict:
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    out = subprocess.run([sys.executable, "-c", CHILD, run, mode, str(workers)], capture_output=True, text=True,
                         env=env, cwd=ROOT, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def _copies(source: str, hosts: int) -> str:
    """A run dir of ``hosts`` byte copies of ``source`` (hard links where possible), under the bench cache."""
    import shutil

    cache = os.environ.get("HLOSCOPE_BENCH_CACHE", os.path.expanduser("~/.cache/hloscope-bench"))
    run = os.path.join(cache, f"pod_copies_{hosts}h_{os.path.getsize(source)}", "plugins", "profile", "run0")
    os.makedirs(run, exist_ok=True)
    for k in range(hosts):
        dest = os.path.join(run, f"host{k:03d}.xplane.pb")
        if not os.path.exists(dest):
            try:
                os.link(source, dest)
            except OSError:
                shutil.copyfile(source, dest)
    return run


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--hosts", type=int, default=64)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--run", metavar="DIR", help="an existing run dir to measure (e.g. made by make_pod_run.py "
                    "--source-dir from a 200-step capture of fixtures/make_pod_profiles.py)")
    ap.add_argument("--copies-of", metavar="XPLANE",
                    help="instead of make_pod_run.py: --hosts byte copies of this one host file (e.g. the 35 MB "
                    "capture of make_big_trace.py), renamed host000..; per-host work as a real pod host's")
    args = ap.parse_args()
    if args.run:
        run = args.run
    elif args.copies_of:
        run = _copies(args.copies_of, args.hosts)
    else:
        made = subprocess.run([sys.executable, os.path.join(HERE, "make_pod_run.py"), "--hosts", str(args.hosts)],
                              capture_output=True, text=True, check=True, cwd=ROOT)
        run = made.stdout.strip().splitlines()[-1]
    files = [f for f in os.listdir(run) if f.endswith(".xplane.pb")]
    size = sum(os.path.getsize(os.path.join(run, f)) for f in files)
    print(f"{run}: {len(files)} host files, {size / 1e6:.1f} MB; {os.cpu_count()} CPUs; best of {args.repeat}")
    variants = [("all at once", "all", 0), ("host by host, 1 process", "pod", 0),
                (f"Dask, {args.workers} workers (cluster started in the call)", "pod", args.workers),
                (f"Dask, {args.workers} workers (cluster already up)", "client", args.workers)]
    results = {}
    for label, mode, workers in variants:
        best = None
        for _ in range(args.repeat):
            r = child(run, mode, workers)
            if best is None or r["seconds"] < best["seconds"]:
                best = r
        results[label] = best
    base = results["all at once"]
    print(f"{'variant':<52} {'seconds':>8} {'speedup':>8} {'peak RSS':>10} {'task RSS':>10}  stragglers  same report")
    for label, r in results.items():
        print(f"{label:<52} {r['seconds']:8.2f} {base['seconds'] / r['seconds']:7.2f}x {r['rss'] / 1e6:8.0f} MB "
              f"{r['tasks_rss'] / 1e6:8.0f} MB  {','.join(r['stragglers']) or '-':<10}  {r['doc'] == base['doc']}")
    time.sleep(0)


if __name__ == "__main__":
    main()
