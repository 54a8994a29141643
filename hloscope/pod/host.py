"""The per-host task of a many-host run: read one host file and reduce it to small tables (:func:`reduce_host`).

A Dask worker runs it once per host file; what it returns -- the host's ``OpTotals`` (sums per instruction) and
its ``HostPart`` (its rows of the steps table, its longest gaps, its collectives' exposure) -- is all that
travels back: kilobytes per host, whatever the file's size. The events table lives only inside the task, so a
worker's memory is bounded by one host file.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping

if TYPE_CHECKING:
    from hloscope.roofline.join import OpTotals
    from hloscope.steps.breakdown import HostPart


@dataclass
class HostResult:
    """What one host file reduced to.

    Attributes:
        file: the host file.
        host: its host name (the file name's stem).
        totals: ``roofline.join.OpTotals`` of its events (None when it failed).
        part: ``steps.breakdown.HostPart`` (None when it failed).
        notes: what the reader noticed.
        error: the one-line error when the file could not be read (a corrupt or missing file), else None.
        rejoined: GPU command-buffer kernel events joined to instructions (by kernel name, library GEMMs by
            program order), as ``parsers._command_buffer.join_command_buffer_kernels`` counts them.
        seconds: the task's own time.
        peak_rss_bytes: the worker process's peak resident memory after the task (``resource.getrusage``;
            0 where unavailable).
    """

    file: str
    host: str
    totals: OpTotals | None = None
    part: HostPart | None = None
    notes: list[str] = field(default_factory=list)
    error: str | None = None
    seconds: float = 0.0
    peak_rss_bytes: int = 0
    rejoined: tuple[int, int] = (0, 0)


def reduce_host(path: str, info: Mapping[tuple[str, str], tuple], async_pairs: Mapping[tuple[str, str], str],
                hlo_texts: Mapping[str, str] | None = None, reference_ns: int | None = None) -> HostResult:
    """Read one host file and reduce it (see the module docstring). Never raises for bad input: a file that
    cannot be read comes back with ``error`` set, so the run's other hosts still make a report.

    Args:
        path: the host's ``*.xplane.pb``.
        info: (module, instruction) -> static op info (``steps.breakdown.static_op_info`` of the run's
            ``ops_frame(..., all_rows=True)``).
        async_pairs: (module, done) -> start (``steps.schedule.async_done_pairs``).
        hlo_texts: module name -> HLO text, for GPU captures whose command-buffer kernels are joined to
            instructions through the modules (``parsers._command_buffer``); None otherwise.
        reference_ns: the run's capture start to shift this host's clock onto (``read_xspace_events``).
    """
    import time

    from hloscope.errors import HloscopeError
    from hloscope.parsers._xspace_events import host_name, read_xspace_events
    from hloscope.roofline.join import OpTotals, named_modules
    from hloscope.steps.breakdown import host_part

    t0 = time.perf_counter()
    out = HostResult(str(path), host_name(path))
    try:
        events = read_xspace_events([path], reference_ns)
        events.ops = named_modules(events.ops)
        if hlo_texts and events.platform == "gpu":
            from hloscope.parsers import parse_hlo_text
            from hloscope.parsers._command_buffer import join_command_buffer_kernels

            modules = {n: parse_hlo_text(t, source=n) for n, t in hlo_texts.items()}
            events.ops, rejoined = join_command_buffer_kernels(events.ops, modules)
            out.rejoined = (int(rejoined["by_name"]), int(rejoined["by_gemm_order"]))
        out.totals = OpTotals.of(events)
        out.part = host_part(events, info, async_pairs, out.totals)
        out.notes = list(events.notes)
    except HloscopeError as err:
        out.error = str(err).splitlines()[0]
    except OSError as err:
        out.error = f"{path}: {err.strerror or type(err).__name__}"
    out.seconds = time.perf_counter() - t0
    out.peak_rss_bytes = _peak_rss_bytes()
    return out


def _peak_rss_bytes() -> int:
    try:
        import resource
        import sys

        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return int(peak if sys.platform == "darwin" else peak * 1024)
    except (ImportError, OSError):  # pragma: no cover - not on Linux
        return 0


def reduce_hosts(paths: list[str], info: Mapping[tuple[str, str], tuple], async_pairs: Mapping[tuple[str, str], str],
                 hlo_texts: Mapping[str, str] | None = None, reference_ns: int | None = None) -> list[HostResult]:
    """``reduce_host`` of several files, one after another (one Dask task for a batch of small host files: the
    scheduler's round trip per task costs more than reading a small file)."""
    return [reduce_host(p, info, async_pairs, hlo_texts, reference_ns) for p in paths]


def warm_up() -> None:
    """Import what ``reduce_host`` uses (run on every worker of a cluster once: a worker's first task would
    otherwise pay for importing pandas and the readers, ~0.5 s)."""
    import hloscope.parsers._xspace_events  # noqa: F401
    import hloscope.roofline.join  # noqa: F401
    import hloscope.steps.breakdown  # noqa: F401
    import hloscope.steps.windows  # noqa: F401
