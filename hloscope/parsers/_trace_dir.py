"""Locate the ``*.xplane.pb`` files of one profiling run.

``jax.profiler.trace(log_dir)`` writes ``log_dir/plugins/profile/<run>/<host>.xplane.pb`` (plus
``<host>.trace.json.gz``), where ``<run>`` is the capture time ``YYYY_MM_DD_HH_MM_SS``. Every capture into the
same ``log_dir`` adds a run; a multi-host capture puts one xplane file per host in the run directory.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from hloscope.parsers._trace_error import TraceError

__all__ = ["find_xplane_files"]

XPLANE_SUFFIXES = (".xplane.pb", ".xplane.pb.gz")
_RUN_NAME_RE = re.compile(r"^\d{4}_\d{2}_\d{2}_\d{2}_\d{2}_\d{2}$")
_HOW = "capture one with `with jax.profiler.trace(log_dir): ...` and pass log_dir"


def _is_xplane(p: Path) -> bool:
    return p.is_file() and p.name.endswith(XPLANE_SUFFIXES)


def _xplanes_in(d: Path) -> list[Path]:
    try:
        return sorted(p for p in d.iterdir() if _is_xplane(p))
    except OSError:
        return []


def _subdirs(d: Path) -> list[Path]:
    try:
        return sorted(p for p in d.iterdir() if p.is_dir())
    except OSError:
        return []


def _newest(runs: list[Path]) -> Path:
    """Newest run: by name when every name is a capture timestamp, else by the newest xplane file mtime."""
    if all(_RUN_NAME_RE.match(r.name) for r in runs):
        return max(runs, key=lambda r: r.name)

    def mtime(r: Path) -> float:
        files = _xplanes_in(r)
        return max((f.stat().st_mtime for f in files), default=r.stat().st_mtime)

    return max(runs, key=lambda r: (mtime(r), r.name))


def find_xplane_files(path: str | os.PathLike[str], run: str | None = None) -> tuple[Path, list[Path]]:
    """Find the xplane files of one profiling run.

    Accepted inputs:

    * a log dir containing ``plugins/profile/<run>/`` (what ``jax.profiler.trace`` was given);
    * the ``plugins/profile`` dir itself (its subdirectories are the runs);
    * a run dir (holds ``*.xplane.pb`` files directly);
    * one ``*.xplane.pb`` (or ``*.xplane.pb.gz``) file.

    Args:
        path: one of the above.
        run: the run (subdirectory name) to pick; default: the newest run that holds xplane files. Newest
            is by name when all run names are capture timestamps (``2026_01_11_21_26_41``), else by file
            modification time. When ``path`` is a run dir or a file, ``run`` must be None or its run name.

    Returns:
        ``(run_dir, files)``: the run directory and its xplane files (one per host), sorted by name.

    Raises:
        TraceError: ``path`` does not exist; is a file that is not an xplane file; is a directory with no
            runs and no xplane files; the named ``run`` does not exist (the message lists the available
            runs); or the chosen run holds no xplane files.
    """
    p = Path(path)
    if not p.exists():
        raise TraceError(p, f"no such file or directory; expected a profile log dir or a *.xplane.pb; {_HOW}")

    if p.is_file():
        if not p.name.endswith(XPLANE_SUFFIXES):
            hint = (
                " (that is the trace-viewer JSON; the *.xplane.pb next to it holds the HLO and the op events)"
                if p.name.endswith((".trace.json.gz", ".trace.json"))
                else ""
            )
            raise TraceError(p, f"not a *.xplane.pb file{hint}; pass the .xplane.pb or its log dir")
        _check_run_name(p.parent, run, p)
        return p.parent, [p]

    direct = _xplanes_in(p)
    if direct:
        _check_run_name(p, run, p)
        return p, direct

    profile_dir = p / "plugins" / "profile"
    if profile_dir.is_dir():
        runs_root = profile_dir
    elif p.name == "profile" and p.parent.name == "plugins":
        runs_root = p
    elif (p / "profile").is_dir() and p.name == "plugins":
        runs_root = p / "profile"
    else:
        runs = [d for d in _subdirs(p) if _xplanes_in(d)]
        if not runs:
            raise TraceError(
                p,
                f"holds no plugins/profile/<run>/ directory and no *.xplane.pb files; expected a profile "
                f"log dir; {_HOW}",
            )
        runs_root = p  # a dir whose subdirectories are runs (copied without plugins/profile)

    runs = _subdirs(runs_root)
    if not runs:
        raise TraceError(runs_root, f"holds no run directories; expected <run>/<host>.xplane.pb; {_HOW}")

    if run is not None:
        chosen = runs_root / run
        if not chosen.is_dir():
            avail = ", ".join(r.name for r in runs)
            raise TraceError(runs_root, f"has no run named {run!r}; available runs: {avail}")
        files = _xplanes_in(chosen)
        if not files:
            raise TraceError(chosen, f"run {run!r} holds no *.xplane.pb files (capture incomplete?); {_HOW}")
        return chosen, files

    with_files = [r for r in runs if _xplanes_in(r)]
    if not with_files:
        avail = ", ".join(r.name for r in runs)
        raise TraceError(
            runs_root, f"none of its runs ({avail}) holds a *.xplane.pb file (capture incomplete?); {_HOW}"
        )
    chosen = _newest(with_files)
    return chosen, _xplanes_in(chosen)


def _check_run_name(run_dir: Path, run: str | None, given: Path) -> None:
    if run is not None and run != run_dir.name:
        raise TraceError(
            given,
            f"run={run!r} was requested but this path is (in) run {run_dir.name!r}; pass the log dir to choose "
            f"among runs, or drop run=",
        )
