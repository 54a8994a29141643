"""Values derived from a file's bytes, kept between processes in the user's cache directory.

A command line process starts from nothing: what it derives from package data -- the parsed built-in chip
table, ~10 ms of ``tomllib`` of every ``hloscope report`` -- it derives again each time. ``load`` and ``store``
keep such a value in a file of :func:`cache_dir`, as Python keeps a module's bytecode beside its source; the
value is only returned for exactly the bytes it was derived from (the cache file holds those bytes and they
are compared whole), so a stale or foreign entry can never be read as current.

Values are kept with :mod:`marshal` (dicts, lists, tuples, str, int, float, bool, None, bytes): its format
changes between Python versions, so the version is part of each entry's key. Nothing here is ever needed: a
missing, unreadable, corrupt or unwritable cache costs the derivation again, never an error. The directory is
``$HLOSCOPE_CACHE_DIR`` if set (set to the empty string: no cache at all), else ``$XDG_CACHE_HOME/hloscope``,
else ``~/.cache/hloscope`` (the XDG base directory specification's default).
"""

from __future__ import annotations

import marshal
import os
import sys
import zlib
from pathlib import Path

__all__ = ["cache_dir", "load", "store"]

#: What an entry holds besides the value: the layout of this module, the Python and marshal versions.
_KEY = f"hloscope-cache/1 python {sys.version_info[0]}.{sys.version_info[1]} marshal {marshal.version}"


def cache_dir() -> Path | None:
    """hloscope's cache directory (it need not exist), or None when ``$HLOSCOPE_CACHE_DIR`` is set empty (or
    there is no home directory to put it in)."""
    explicit = os.environ.get("HLOSCOPE_CACHE_DIR")
    if explicit is not None:
        return Path(explicit).expanduser() if explicit else None
    xdg = os.environ.get("XDG_CACHE_HOME")
    if xdg:
        return Path(xdg).expanduser() / "hloscope"
    home = Path(os.path.expanduser("~"))
    return home / ".cache" / "hloscope" if home.is_absolute() else None  # (no home: no cache, not one in ./~)


def _entry(name: str, source: bytes) -> Path | None:
    """The file of ``name``'s value for ``source`` (one file per distinct source: installs of two versions
    side by side do not overwrite each other's entry)."""
    folder = cache_dir()
    if folder is None:
        return None
    return folder / f"{name}-{zlib.crc32(source):08x}.marshal"


def load(name: str, source: bytes) -> object | None:
    """The value ``store(name, source, value)`` kept, or None where there is none for exactly these bytes."""
    path = _entry(name, source)
    if path is None:
        return None
    try:
        entry = marshal.loads(path.read_bytes())
    except (OSError, ValueError, EOFError, TypeError):
        return None
    if type(entry) is not tuple or len(entry) != 3 or entry[0] != _KEY or entry[1] != source:
        return None
    return entry[2]


def store(name: str, source: bytes, value: object) -> None:
    """Keep ``value`` (a marshal-able object derived from ``source``) for ``load``. The file is written beside
    its final name and renamed into place, so a reader sees all of it or none; any failure is ignored."""
    path = _entry(name, source)
    if path is None:
        return
    try:
        data = marshal.dumps((_KEY, source, value))
    except ValueError:  # (an object marshal does not keep, e.g. a TOML date: not cached)
        return
    part = path.with_name(f"{path.name}.{os.getpid()}.part")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(part, "xb") as out:
            out.write(data)
        os.replace(part, path)
    except OSError:
        try:
            part.unlink()
        except OSError:
            pass
