"""Locate the ``*.xplane.pb`` files of one profiling run, check profile paths, and inflate gzip-compressed
profiles with a bound on the inflated size.

``jax.profiler.trace(log_dir)`` writes ``log_dir/plugins/profile/<run>/<host>.xplane.pb`` (plus
``<host>.trace.json.gz``), where ``<run>`` is the capture time ``YYYY_MM_DD_HH_MM_SS``. Every capture into the
same ``log_dir`` adds a run; a multi-host capture puts one xplane file per host in the run directory.

Paths: :func:`checked_path` turns a path the system cannot look up (a NUL character, a name longer than the
system allows) into a ``TraceError`` naming it, instead of the ``ValueError`` / ``OSError`` of ``os``.

Gzip: ``*.xplane.pb.gz`` and ``*.trace.json.gz`` are inflated through :func:`open_gzip` / :func:`gunzip`, which
stop with a ``TraceError`` once more than :func:`inflate_limit` bytes came out (a gzip bomb inflates ~1000x).
The limit is the environment variable ``HLOSCOPE_MAX_INFLATED_BYTES`` (bytes, or with a binary suffix ``K``,
``M``, ``G``, ``T``: ``16G``; ``0``: no limit); unset, ``max(256 MiB, 64 x the compressed size)``. Real
profiles inflate 3.4-4.3x (xplane) and 11-14x (Chrome JSON) (``docs/chrome_trace.md``), so 64x leaves
four-fold headroom over the most compressible one seen, and the 256 MiB floor lets small files through.
"""

from __future__ import annotations

import errno
import gzip
import io
import os
import re
from pathlib import Path

from hloscope._regex import LazyPattern
from hloscope.errors import escaped
from hloscope.parsers._trace_error import TraceError

__all__ = ["checked_path", "find_xplane_files", "gunzip", "inflate_limit", "open_gzip"]

XPLANE_SUFFIXES = (".xplane.pb", ".xplane.pb.gz")
_CHROME_SUFFIXES = (".trace.json.gz", ".trace.json")
_RUN_NAME_RE = LazyPattern(r"^\d{4}_\d{2}_\d{2}_\d{2}_\d{2}_\d{2}$")
_HOW = "capture one with `with jax.profiler.trace(log_dir): ...` and pass log_dir"


#: The environment variable that bounds the inflated size of a gzip-compressed profile (see the module docstring).
INFLATE_ENV = "HLOSCOPE_MAX_INFLATED_BYTES"
_INFLATE_FLOOR = 256 << 20
_INFLATE_RATIO = 64
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
_SIZE_RE = LazyPattern(r"(\d{1,20})\s*([KMGT]?)(?:i?B)?", re.IGNORECASE)
#: Longest path, and longest name in it, that the readers look up (bytes; Linux PATH_MAX and NAME_MAX).
_PATH_MAX = 4096
_NAME_MAX = 255


def shown_path(s: str) -> str:
    """``s`` printable on one line: control characters escaped (``\\x00``, ``\\n``, ``\\x1b``:
    ``hloscope.errors.escaped``), and cut to about 200 characters (its start and end kept) when longer."""
    t = escaped(s)
    return t if len(t) <= 200 else f"{t[:120]}...({len(s)} characters)...{t[-60:]}"


def checked_path(path: str | os.PathLike[str]) -> Path:
    """``path`` as a ``Path``, when the system can look it up at all.

    Raises:
        TraceError: (naming the path, escaped and shortened by :func:`shown_path`) the path holds a NUL
            character, cannot be encoded as a file name, or is longer than the system allows (4095 bytes in
            all, 255 per name).
    """
    s = os.fsdecode(path) if isinstance(path, bytes) else os.fspath(path)
    if isinstance(s, bytes):
        s = os.fsdecode(s)
    if "\x00" in s:
        raise TraceError(shown_path(s), "the path contains a NUL character (\\x00), which no file name can "
                                        "hold; expected the path of a profile file or directory")
    try:
        encoded = os.fsencode(s)
    except UnicodeError:
        raise TraceError(shown_path(s), "the path cannot be encoded as a file name (a lone surrogate "
                                        "character); expected the path of a profile file or directory") from None
    if len(encoded) >= _PATH_MAX or any(len(part) > _NAME_MAX for part in encoded.split(os.sep.encode())):
        raise TraceError(shown_path(s), f"the path is too long to look up ({len(encoded)} bytes; the system allows "
                                        f"{_PATH_MAX - 1} in all and {_NAME_MAX} per name); expected the path of "
                                        "a profile file or directory")
    return Path(s)


def lookup(p: Path) -> str | None:
    """What ``p`` is: ``"file"``, ``"dir"``, ``"other"`` (a device, a socket), or None when it does not exist.

    Raises:
        TraceError: the system cannot look it up (permission denied, a loop of symbolic links, ...).
    """
    import stat

    try:
        mode = p.stat().st_mode
    except FileNotFoundError:
        return None
    except OSError as e:
        if e.errno in (errno.ENOTDIR, errno.ENOENT):
            return None
        raise TraceError(shown_path(str(p)), f"cannot be looked up ({e.strerror or e}); check the path and its "
                                             "permissions") from None
    except ValueError:
        return None
    if stat.S_ISDIR(mode):
        return "dir"
    return "file" if stat.S_ISREG(mode) else "other"


def inflate_limit(compressed_size: int) -> int:
    """The most bytes a gzip-compressed profile of ``compressed_size`` bytes may inflate to: the environment
    variable ``HLOSCOPE_MAX_INFLATED_BYTES`` when set (``0``: no limit), else ``max(256 MiB, 64 x
    compressed_size)``.

    Raises:
        ConfigError: the variable is not a byte count (``8589934592``, ``8G``, ``512MiB``, ``0``).
    """
    raw = os.environ.get(INFLATE_ENV, "").strip()
    if not raw:
        return max(_INFLATE_FLOOR, _INFLATE_RATIO * compressed_size)
    m = _SIZE_RE.fullmatch(raw)
    if m is None:
        from hloscope.errors import ConfigError

        raise ConfigError(f"{INFLATE_ENV}={raw!r} is not a number of bytes; expected e.g. 8589934592, 8G, "
                          "512MiB, or 0 for no limit")
    n = int(m.group(1)) * _UNITS[m.group(2).upper()]
    return n if n > 0 else 1 << 62


def _too_big(path: str | os.PathLike[str], limit: int) -> TraceError:
    how = (f"the limit set by {INFLATE_ENV}" if os.environ.get(INFLATE_ENV, "").strip()
           else f"the default limit, {_INFLATE_RATIO}x the compressed size and at least {_INFLATE_FLOOR >> 20} MiB")
    return TraceError(path, f"gzip-compressed, and inflates to more than {limit:,} bytes ({how}): a gzip bomb, or "
                            f"a profile far more compressible than real ones; to read it anyway set {INFLATE_ENV} "
                            "to a larger size (e.g. 16G) or to 0 for no limit")


class _CappedGzip(io.RawIOBase):
    """A gzip stream that raises ``TraceError`` once more than ``limit`` bytes have been inflated."""

    def __init__(self, gz: gzip.GzipFile, path: str | os.PathLike[str], limit: int, owned=None) -> None:
        super().__init__()
        self._gz = gz
        self._owned = owned  # the compressed file, closed with this stream
        self._path = path
        self._limit = limit
        self.inflated = 0

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        n = self._gz.readinto(b)
        self.inflated += n
        if self.inflated > self._limit:
            raise _too_big(self._path, self._limit)
        return n

    def close(self) -> None:
        if not self.closed:
            try:
                self._gz.close()
            finally:
                if self._owned is not None:
                    self._owned.close()
        super().close()


def open_gzip(path: Path) -> io.BufferedReader:
    """``path``, a gzip file, opened for reading its inflated bytes, which raise ``TraceError`` past
    :func:`inflate_limit` (memory stays one buffer of 1 MiB). The caller closes it.

    Raises:
        OSError: the file cannot be opened. Reads raise ``TraceError`` past the limit, and ``OSError`` /
        ``EOFError`` / ``zlib.error`` on corrupted or truncated data.
    """
    fh = open(path, "rb")  # noqa: SIM115 - closed with the returned stream
    try:
        size = os.fstat(fh.fileno()).st_size
        limit = inflate_limit(size)
    except BaseException:
        fh.close()
        raise
    return io.BufferedReader(_CappedGzip(gzip.GzipFile(fileobj=fh, mode="rb"), path, limit, owned=fh),
                             buffer_size=1 << 20)


def gunzip(data, source: str | os.PathLike[str]) -> bytes:
    """Inflate gzip-compressed ``data`` (bytes, or a binary file positioned at its start) whole, stopping
    past :func:`inflate_limit` (of ``len(data)``, or of the file's size).

    Raises:
        TraceError: (naming ``source``) the data inflates past the limit, or is truncated or corrupted (the
            message gives how many bytes were inflated before).
    """
    import zlib

    if isinstance(data, (bytes, bytearray, memoryview)):
        size, fileobj = len(data), io.BytesIO(data)
    else:
        size, fileobj = os.fstat(data.fileno()).st_size, data
    limit = inflate_limit(size)
    gz = gzip.GzipFile(fileobj=fileobj, mode="rb")
    chunks = []
    n = 0
    try:
        while True:
            chunk = gz.read(min(1 << 24, limit - n + 1))
            if not chunk:
                break
            n += len(chunk)
            if n > limit:
                raise _too_big(source, limit)
            chunks.append(chunk)
    except (OSError, EOFError, zlib.error) as e:
        raise TraceError(source, f"gzip-compressed but truncated or corrupted after {n:,} inflated bytes ({e}); "
                                 "expected a complete .gz file, re-copy it") from None
    return b"".join(chunks)


def _kind_of_entry(p: Path) -> str | None:
    """``lookup(p)`` for an entry of a listed directory, with an entry the system will not look up (permission
    denied, a loop of symbolic links) None, as if absent: one bad entry does not hide the others."""
    try:
        return lookup(p)
    except TraceError:
        return None


def _entries(d: Path) -> list[Path]:
    """The entries of directory ``d``, sorted; none when it cannot be listed (see :func:`_unlisted`)."""
    try:
        return sorted(d.iterdir())
    except (OSError, ValueError):
        return []


def _xplanes_in(d: Path) -> list[Path]:
    """The ``*.xplane.pb`` / ``*.xplane.pb.gz`` regular files (or links to one) directly in ``d``, sorted."""
    return [p for p in _entries(d) if p.name.endswith(XPLANE_SUFFIXES) and _kind_of_entry(p) == "file"]


def _subdirs(d: Path) -> list[Path]:
    """The directories (or links to one) directly in ``d``, sorted."""
    return [p for p in _entries(d) if _kind_of_entry(p) == "dir"]


def _unlisted(d: Path) -> str | None:
    """Why directory ``d`` cannot be listed (``"Permission denied"``), or None when it can."""
    try:
        with os.scandir(d):
            return None
    except OSError as e:
        return e.strerror or type(e).__name__
    except ValueError as e:  # a path os cannot pass to the system (checked_path refuses these earlier)
        return str(e)


def _not_an_xplane(p: Path) -> str | None:
    """What the entry ``p``, named like an xplane file, is instead of a readable file (``"a directory"``, ``"a
    broken symbolic link"``, ...), or None when it is one."""
    import stat

    try:
        mode = p.stat().st_mode
    except FileNotFoundError:
        return "a broken symbolic link" if os.path.islink(p) else "removed while listed"
    except OSError as e:
        return ("a loop of symbolic links" if e.errno == errno.ELOOP
                else f"cannot be looked up: {e.strerror or type(e).__name__}")
    except ValueError:
        return "cannot be looked up"
    if stat.S_ISREG(mode):
        return None
    return "a directory" if stat.S_ISDIR(mode) else "not a regular file"


def _skipped(base: Path, dirs: list[Path]) -> str:
    """For a message about ``base`` saying no xplane file was found in ``dirs``: the directories that could
    not be listed and the entries named ``*.xplane.pb`` that are no readable file, relative to ``base``
    (``"; skipped: run0 (cannot be listed: Permission denied), run1/a.xplane.pb (a directory)"``), or ``""``.
    At most 8 are named."""
    def rel(p: Path) -> str:
        try:
            return str(p.relative_to(base))
        except ValueError:
            return str(p)

    found = []
    for d in dirs:
        why = _unlisted(d)
        if why is not None:
            found.append(f"{rel(d)} (cannot be listed: {why})")
            continue
        for p in _entries(d):
            if p.name.endswith(XPLANE_SUFFIXES):
                what = _not_an_xplane(p)
                if what is not None:
                    found.append(f"{rel(p)} ({what})")
    if not found:
        return ""
    more = f", and {len(found) - 8} more" if len(found) > 8 else ""
    return "; skipped: " + ", ".join(found[:8]) + more


def _missing(p: Path) -> str:
    """Why a path :func:`lookup` found nothing at is missing: ``"no such file or directory"``, or for a symbolic
    link to nothing ``"is a broken symbolic link (to '...')"``."""
    if os.path.islink(p):
        try:
            target = os.readlink(p)
        except OSError:
            target = "?"
        return f"is a broken symbolic link (to {target!r})"
    return "no such file or directory"


def _newest(runs: list[Path]) -> Path:
    """Newest run: by name when every name is a capture timestamp, else by the newest xplane file mtime."""
    if all(_RUN_NAME_RE.match(r.name) for r in runs):
        return max(runs, key=lambda r: r.name)

    def mtime(r: Path) -> float:
        try:
            return max((f.stat().st_mtime for f in _xplanes_in(r)), default=r.stat().st_mtime)
        except OSError:  # removed or unreadable since it was listed
            return 0.0

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
        TraceError: ``path`` does not exist or cannot be looked up (``checked_path``: a NUL character, too
            long); is a file that is not an xplane file; is a directory with no
            runs and no xplane files; the named ``run`` does not exist (the message lists the available
            runs); or the chosen run holds no xplane files.
    """
    p = checked_path(path)
    kind = lookup(p)
    if kind is None:
        raise TraceError(p, f"{_missing(p)}; expected a profile log dir or a *.xplane.pb; {_HOW}")
    if kind == "other":
        raise TraceError(p, f"is neither a file nor a directory; expected a profile log dir or a *.xplane.pb; "
                            f"{_HOW}")
    if kind == "dir":
        why = _unlisted(p)
        if why is not None:
            raise TraceError(p, f"is a directory that cannot be listed ({why}); check its permissions")

    if kind == "file":
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
    if lookup(profile_dir) == "dir":
        runs_root = profile_dir
    elif p.name == "profile" and p.parent.name == "plugins":
        runs_root = p
    elif p.name == "plugins" and lookup(p / "profile") == "dir":
        runs_root = p / "profile"
    else:
        subdirs = _subdirs(p)
        runs = [d for d in subdirs if _xplanes_in(d)]
        if not runs:
            named = ("is a directory, not a file, and " if p.name.endswith(XPLANE_SUFFIXES + _CHROME_SUFFIXES)
                     else "")
            raise TraceError(
                p,
                f"{named}holds no plugins/profile/<run>/ directory and no *.xplane.pb files; expected a profile "
                f"log dir; {_HOW}{_skipped(p, [p, *subdirs])}",
            )
        runs_root = p  # a dir whose subdirectories are runs (copied without plugins/profile)

    why = _unlisted(runs_root)
    if why is not None:
        raise TraceError(runs_root, f"is a directory that cannot be listed ({why}); check its permissions")
    runs = _subdirs(runs_root)
    if not runs:
        raise TraceError(runs_root, f"holds no run directories; expected <run>/<host>.xplane.pb; {_HOW}")

    if run is not None:
        chosen = runs_root / run
        if lookup(chosen) != "dir":
            avail = ", ".join(r.name for r in runs)
            raise TraceError(runs_root, f"has no run named {run!r}; available runs: {avail}")
        files = _xplanes_in(chosen)
        if not files:
            raise TraceError(chosen, f"run {run!r} holds no *.xplane.pb files (capture incomplete?); {_HOW}"
                                     f"{_skipped(chosen, [chosen])}")
        return chosen, files

    with_files = [r for r in runs if _xplanes_in(r)]
    if not with_files:
        avail = ", ".join(r.name for r in runs)
        raise TraceError(
            runs_root, f"none of its runs ({avail}) holds a *.xplane.pb file (capture incomplete?); {_HOW}"
                       f"{_skipped(runs_root, runs)}"
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
