"""Writing a file so that no reader ever sees half of it, and nothing else is ever replaced.

Every file hloscope writes for a user -- a report (``hloscope report -o``), a baseline (the pytest plugin), the
calibrated host chip -- goes through ``write_file``: the text goes to a temporary file beside the destination,
which then replaces it (``os.replace``, atomic on POSIX and Windows). An existing file is either left as it was
or holds the whole new text.

That is only right for a regular file. A destination that exists and is something else -- ``/dev/null``,
``/dev/stdout``, a named pipe, the ``/dev/fd/N`` of a shell's ``>(...)`` -- is written to directly: replacing
it would put a regular file in place of the device (root may write in ``/dev``: ``-o /dev/null`` used to turn
``/dev/null`` into a file) or fail where no file can be made (``/dev/fd``). A symbolic link is followed, so the
link stays and the file it names is replaced.
"""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from pathlib import Path
from typing import IO, Callable

__all__ = ["write_file"]


def write_file(path: str | os.PathLike[str], write: Callable[[IO[str]], None], *, newline: str | None = None,
               fsync: bool = False) -> Path:
    """Call ``write(stream)`` on a text stream (UTF-8; ``newline`` as ``open`` takes it) that ends up as
    ``path``: atomically for a regular file or a new one (see the module docstring), directly for anything else
    that exists. The new file gets the mode of the file it replaces, else the mode ``open`` gives (0666 less the
    umask). With ``fsync``, the data reaches the disk before the file is replaced.

    Returns:
        The path written (a symbolic link resolved).

    Raises:
        OSError: ``path`` is a directory (``IsADirectoryError``), its directory is missing
            (``FileNotFoundError``, naming the directory) or cannot be written (``PermissionError``, naming it),
            and what ``write`` raises -- then the destination is as it was and no temporary file is left.
    """
    target = Path(path)
    if target.is_symlink():
        target = Path(os.path.realpath(target))
    try:
        mode = target.stat().st_mode
    except FileNotFoundError:
        mode = None
    if mode is not None and stat.S_ISDIR(mode):
        raise IsADirectoryError(errno.EISDIR, "is a directory, not a file", str(path))
    if mode is not None and not stat.S_ISREG(mode):
        with open(target, "w", encoding="utf-8", newline=newline) as stream:  # a device, a pipe, a socket
            write(stream)
        return target
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    except OSError as e:  # (named by the directory, not by a temporary file the user never asked for)
        raise type(e)(e.errno, e.strerror, str(target.parent)) from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline=newline) as stream:
            write(stream)
            if fsync:
                stream.flush()
                os.fsync(stream.fileno())
        # mkstemp makes the file private (0600): give it the old file's mode, or what a plain open() would.
        if mode is None:
            umask = os.umask(0)
            os.umask(umask)
            mode = 0o666 & ~umask
        os.chmod(tmp, stat.S_IMODE(mode))
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return target
