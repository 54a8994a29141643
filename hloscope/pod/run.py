"""A run directory of many host files as one report, the per-host work on Dask (:func:`analyze_run`).

The driver reads what every host shares once -- the HLO protos and the device kind of the first readable host
file, never its events -- costs the modules and classifies every instruction (``ops_frame(..., all_rows=True)``),
then maps ``hloscope.pod.host.reduce_host`` over the host files: each task reads one file and returns its
``OpTotals`` and ``HostPart`` (kilobytes). The driver merges them into the same tables a serial read of all the
files gives (``hloscope.analysis.scored_trace_report``: one tail for both). A host file that cannot be read is
named in the notes and in ``coverage["failed_hosts"]``; the other hosts still make the report.

Where the tasks run (``dask.distributed``): an existing cluster (``client=``, or ``scheduler=`` an address), a
local cluster of ``workers`` processes (default: one per core, at most one per file), or this process
(``workers=0``).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hloscope.pod.host import HostResult
    from hloscope.result import Report
    from hloscope.roofline.chips import ChipSpec


#: Without ``client``, ``scheduler`` or ``workers``, a run smaller than this is read host by host in this process:
#: starting a local cluster takes ~1-2 s, more than reading tens of MB (benchmarks/pod_scale.py: 64 hosts of
#: 52 kB, 3.3 MB, took 1.6 s host by host, 2.1 s on a 2-worker cluster started for it).
LOCAL_CLUSTER_FROM_BYTES = 64 * 2**20


def analyze_run(path: str | os.PathLike[str], run: str | None = None, chip: str | ChipSpec | None = None,
                client: Any = None, workers: int | None = None, scheduler: str | None = None,
                progress: bool = False) -> Report:
    """The report of a profile's run directory, one Dask task per host file.

    Args:
        path: a log dir, its ``plugins/profile`` dir, a run dir, or one ``*.xplane.pb``
            (``parsers._trace_dir.find_xplane_files``).
        run: the run to read (default: the newest).
        chip: as ``hloscope.analyze``'s (default: the device kind's chip, or the host for CPU traces).
        client: a ``dask.distributed.Client`` to run the tasks on.
        workers: without ``client``/``scheduler``: processes of a local cluster (default: the machine's cores, at
            most one per file, for a run of at least ``LOCAL_CLUSTER_FROM_BYTES``, else this process; ``0``: run
            the tasks in this process, one after another).
        scheduler: the address of a running Dask scheduler (``tcp://host:8786``).
        progress: show a progress bar over hosts on the terminal (stderr), when it is one.

    Returns:
        ``Report`` -- the tables a serial read gives; ``coverage["hosts"]`` the number of host files,
        ``coverage["failed_hosts"]`` those that could not be read (``{"file", "error"}``),
        ``coverage["host_task_seconds"]`` the tasks' time summed and ``coverage["peak_task_rss_bytes"]`` the
        largest peak resident memory of a process that ran one (a worker's, or this process's).

    Raises:
        TraceError: no host file holds an HLO proto or every one fails (each named), or no op events at all.
        ConfigError: ``dask.distributed`` is not installed.
    """
    from hloscope.analysis import _resolve_chip, command_buffer_note, scored_trace_report
    from hloscope.cost import module_cost
    from hloscope.parsers import parse_hlo_text
    from hloscope.parsers._trace_dir import find_xplane_files
    from hloscope.parsers._trace_error import TraceError
    from hloscope.parsers._xspace_events import read_xspace_header
    from hloscope.parsers.events import _NO_OPS
    from hloscope.roofline.join import OpTotals, measured_times
    from hloscope.roofline.tables import ops_frame
    from hloscope.steps.breakdown import static_op_info
    from hloscope.steps.schedule import async_done_pairs

    where, files = find_xplane_files(path, run)
    header, unread = None, []
    for f in files:
        try:
            header = read_xspace_header(f)
        except TraceError as err:
            unread.append(str(err).splitlines()[0])
            continue
        if header[0]:
            break
    if header is None or not header[0]:
        raise TraceError(where, "no host file holds the HLO protos (the /host:metadata plane) to join events with"
                         + (f"; unreadable: {'; '.join(unread[:3])}" if unread else ""))
    printers, sources, platform, device_kind, reference_ns = header
    chip_notes: list[str] = []
    spec = _resolve_chip(chip, platform, device_kind, chip_notes)
    texts = {name: printer() for name, printer in printers.items()}
    modules = {name: parse_hlo_text(text, source=sources.get(name, str(where))) for name, text in texts.items()}
    costs = {name: module_cost(m) for name, m in modules.items()}
    info = static_op_info(ops_frame(list(costs.values()), spec, all_rows=True))
    pairs = async_done_pairs(modules.values())
    results = _map_hosts([str(f) for f in files], (info, pairs, texts if platform == "gpu" else None, reference_ns),
                         client, workers, scheduler, progress)
    ok = [r for r in results if r.error is None]
    failed = [r for r in results if r.error is not None]
    if not ok:
        raise TraceError(where, "every host file failed: " + "; ".join(r.error for r in failed[:3]))
    totals = OpTotals.merged([r.totals for r in ok])
    if not totals.per_op:
        raise TraceError(where, _NO_OPS)
    measured = measured_times(totals)
    notes = list(dict.fromkeys(n for r in ok for n in r.notes))
    notes += [f"host {r.host} not read: {r.error}" for r in failed]
    by_name, by_gemm = sum(r.rejoined[0] for r in ok), sum(r.rejoined[1] for r in ok)
    if by_name or by_gemm:
        notes.append(command_buffer_note(by_name, by_gemm))
    notes += chip_notes
    hlo_modules = [modules[name] for name in sorted(measured.runs) if name in modules]
    report = scored_trace_report([costs[m.name] for m in hlo_modules], spec, measured, [r.file for r in ok],
                                 set(modules), notes, hlo_modules, lambda ops: [r.part for r in ok])
    report.coverage["hosts"] = len(results)
    report.coverage["failed_hosts"] = [{"file": r.file, "error": r.error} for r in failed]
    report.coverage["host_task_seconds"] = sum(r.seconds for r in results)
    report.coverage["peak_task_rss_bytes"] = max(r.peak_rss_bytes for r in results)
    return report


def _map_hosts(files: list[str], shared_args: tuple, client, workers, scheduler, progress) -> list[HostResult]:
    """``reduce_host`` of every file, in file order, on the cluster the arguments name (module docstring);
    ``shared_args``: its arguments after the path, the same for every file."""
    from hloscope.pod.host import reduce_host, reduce_hosts

    sizes = [os.path.getsize(f) if os.path.exists(f) else 0 for f in files]
    if workers is None and client is None and scheduler is None:
        workers = 0 if sum(sizes) < LOCAL_CLUSTER_FROM_BYTES else None
    if client is None and scheduler is None and (workers == 0 or len(files) == 1):
        return [reduce_host(f, *shared_args) for f in _shown(files, progress)]
    Client, LocalCluster = _dask()
    own = None
    if client is None:
        if scheduler is not None:
            client = own = Client(scheduler)
        else:
            client = own = Client(_local_cluster(workers or min(os.cpu_count() or 1, len(files))))
    try:
        from hloscope.pod.host import warm_up

        client.run(warm_up)
        shared = client.scatter(list(shared_args[:3]), broadcast=True)
        batches = _batches(files, sizes, len(client.scheduler_info().get("workers", {})) or 1)
        futures = client.map(reduce_hosts, batches, info=shared[0], async_pairs=shared[1], hlo_texts=shared[2],
                             reference_ns=shared_args[3], pure=False)
        order = {f.key: i for i, f in enumerate(futures)}
        results: list[Any] = [None] * len(batches)
        from distributed import as_completed

        for fut in _shown(as_completed(futures), progress, total=len(batches)):
            results[order[fut.key]] = fut.result()
        return [r for batch in results for r in batch]
    finally:
        if own is not None:
            cluster = own.cluster
            own.close()
            if cluster is not None:
                cluster.close()


#: A task reads host files until it holds at least this many bytes of them (one file at a time), or the run is
#: split into ``4 x workers`` tasks, whichever gives more tasks: a file of tens of MB is one task; 64 files of
#: 52 kB are 8 tasks on 2 workers, not 64 scheduler round trips.
BATCH_BYTES = 32 * 2**20


def _batches(files: list[str], sizes: list[int], workers: int) -> list[list[str]]:
    """``files`` (of ``sizes`` bytes) in consecutive batches (see ``BATCH_BYTES``), each file in one batch, order
    kept."""
    by_count = max(1, -(-len(files) // (4 * workers)))  # at most this many files per task
    out: list[list[str]] = []
    cur: list[str] = []
    held = 0
    for f, size in zip(files, sizes):
        if cur and (held + size > BATCH_BYTES or len(cur) >= by_count):
            out.append(cur)
            cur, held = [], 0
        cur.append(f)
        held += size
    if cur:
        out.append(cur)
    return out


def _local_cluster(n: int):
    """A LocalCluster of ``n`` single-threaded worker processes, without Dask's ``MALLOC_TRIM_THRESHOLD_=65536``
    for its workers (``distributed.nanny.pre-spawn-environ``): glibc then stops adapting its mmap threshold and
    every large numpy/pandas buffer of a host file's tables is mapped and faulted in anew -- measured here, one
    35 MB host file took 1.1 s in such a worker and 0.41 s in this process (0.44 s without the setting)."""
    import dask

    _, LocalCluster = _dask()
    environ = dict(dask.config.get("distributed.nanny.pre-spawn-environ", {}))
    environ.pop("MALLOC_TRIM_THRESHOLD_", None)
    with dask.config.set({"distributed.nanny.pre-spawn-environ": environ}):
        return LocalCluster(n_workers=n, threads_per_worker=1, processes=True, dashboard_address=None)


def _dask():
    try:
        from distributed import Client, LocalCluster
    except ImportError:  # pragma: no cover - a declared dependency
        from hloscope.errors import ConfigError

        raise ConfigError("many host files run on Dask: pip install 'dask[distributed]'") from None
    return Client, LocalCluster


def _shown(items, progress: bool, total: int | None = None):
    """``items``, with a rich progress bar over hosts on stderr when ``progress`` and stderr is a terminal."""
    import sys

    if not progress or not sys.stderr.isatty():
        yield from items
        return
    from rich.console import Console
    from rich.errors import LiveError
    from rich.progress import Progress

    bar = Progress(console=Console(stderr=True), transient=True)
    try:
        bar.start()
    except LiveError:  # another live display (the CLI's status line) holds the terminal
        yield from items
        return
    try:
        task = bar.add_task("hosts", total=total if total is not None else len(items))
        for item in items:
            yield item
            bar.advance(task)
    finally:
        bar.stop()
