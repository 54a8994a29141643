"""The memory footprints of an HLO text file computed by a forked child on the machine's second core, while the
parent analyzes the same file (``hloscope report --format json``, issue #16: "use the machine").

The child forks before the parent has parsed anything or imported pandas and numpy: it reads and parses the
file itself and shares no growing object graph with the parent, so neither side takes copy-on-write faults
(forking after the parse, as tried before, slowed both sides). It sends back the pickled ``MemoryFootprint``
list, which is what ``footprint`` gives in the parent for the same text and chip (the parse and the memory
model are deterministic; tests/memory/test_forked.py holds the two reports equal).

Nothing here is ever needed: where no child is started -- a system other than Linux (no ``fork``, or one
that frameworks advise against), one usable core, a second thread running (native ones included: the child would
inherit their locks held), ``HLOSCOPE_ONE_PROCESS`` set -- or the child fails or dies, the caller computes the
footprints in its own process as usual.
"""

from __future__ import annotations

import os
import pickle
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hloscope.memory.footprint import MemoryFootprint

__all__ = ["FootprintsInChild", "start_footprints"]


class FootprintsInChild:
    """A forked child computing the footprints of one HLO text file; ``result`` collects them."""

    __slots__ = ("pid", "fd")

    def __init__(self, pid: int, fd: int) -> None:
        self.pid, self.fd = pid, fd

    def result(self) -> list[MemoryFootprint] | None:
        """The child's footprints (waiting for them), or None when it failed. The payload alone tells: the
        child writes it whole, then exits, and only on success. The child is reaped when it has exited by then;
        else it is left to end on its own (tearing down its memory takes a few ms the parent need not wait for:
        the parent exits soon after, and the system reaps what it leaves)."""
        if self.pid < 0:
            return None
        chunks = []
        try:
            with os.fdopen(self.fd, "rb") as pipe:
                while chunk := pipe.read(1 << 20):
                    chunks.append(chunk)
        except OSError:
            self.cancel()
            return None
        try:
            os.waitpid(self.pid, os.WNOHANG)
        except OSError:
            pass
        self.pid = -1
        try:
            footprints = pickle.loads(b"".join(chunks))
        except Exception:  # noqa: BLE001 - none written (a failure), or cut short: computed in this process instead
            return None
        return footprints if isinstance(footprints, list) else None

    def cancel(self) -> None:
        """Stop and reap the child when its result is not wanted (the parent's analysis failed)."""
        if self.pid < 0:
            return
        try:
            os.close(self.fd)
        except OSError:
            pass
        try:
            os.kill(self.pid, 9)
            os.waitpid(self.pid, 0)
        except OSError:
            pass
        self.pid = -1


def start_footprints(path: str, chip: Any) -> FootprintsInChild | None:
    """Fork a child that parses the HLO text file ``path`` and computes ``footprint(module, chip)`` for it
    (``chip``: the ``ChipSpec`` the parent's analysis scores against); None where no child is started (see the
    module docstring). Only for a process that runs one command and exits (the command line): the child copies
    the whole process."""
    if (not sys.platform.startswith("linux") or os.environ.get("HLOSCOPE_ONE_PROCESS", "") not in ("", "0")
            or not _single_threaded() or _usable_cores() < 2):
        return None
    try:
        read_fd, write_fd = os.pipe()
    except OSError:
        return None
    for stream in (sys.stdout, sys.stderr):  # (nothing buffered is written twice)
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):
            pass
    try:
        pid = os.fork()
    except OSError:
        os.close(read_fd)
        os.close(write_fd)
        return None
    if pid == 0:  # pragma: no cover - the child (covered by tests/memory/test_forked.py through a process)
        _child(path, chip, read_fd, write_fd)
    os.close(write_fd)
    return FootprintsInChild(pid, read_fd)


def _child(path: str, chip: Any, read_fd: int, write_fd: int) -> None:  # pragma: no cover - see above
    """The child: compute, write, exit -- never returning into the parent's code, never running its exit
    handlers, never printing (the parent reports every error of the same input itself)."""
    code = 1
    try:
        os.close(read_fd)
        null = os.open(os.devnull, os.O_RDWR)  # (holding none of the parent's standard streams open)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        import warnings

        warnings.simplefilter("ignore")
        from hloscope.memory.footprint import footprint_and_model
        from hloscope.parsers import parse_hlo

        # (the module and the memory model held to os._exit: freeing them, work the exit makes needless, was ~3%
        # of mixtral's child)
        module = parse_hlo(path)
        made, _held = footprint_and_model(module, chip)
        payload = pickle.dumps([made], protocol=pickle.HIGHEST_PROTOCOL)
        with os.fdopen(write_fd, "wb") as pipe:
            pipe.write(payload)
        code = 0
    except BaseException:  # noqa: BLE001 - any failure: the parent computes the footprints itself
        pass
    finally:
        os._exit(code)


def _single_threaded() -> bool:
    """Whether this process runs one thread, native threads included (``/proc/self/task``): a fork copies no
    other thread, so any lock another one held would stay locked in the child (JAX's runtime, a BLAS pool)."""
    try:
        return len(os.listdir("/proc/self/task")) == 1
    except OSError:
        return False


def _usable_cores() -> int:
    """Cores this process may run on (its CPU affinity where the system tells it)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1
