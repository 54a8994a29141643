"""The cyclic garbage collector around large object graphs: ``paused_gc`` while one is built, ``frozen_at_exit``
when the process ends with one alive."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

#: Set by ``frozen_at_exit``: the process ends after what it runs now (``paused_gc`` then freezes what it made).
_exiting = False


@contextmanager
def paused_gc() -> Iterator[None]:
    """Pause the cyclic garbage collector for the block, restoring its previous state after.

    Parsing and costing a module allocate a few objects per instruction and free almost nothing: the collector
    would walk the growing graph again and again (measured on the 52 MB module of ``benchmarks/parse.py``: +45%
    time for the parse, +40-170% for the cost walk, growing with what else the process holds) and can find no
    garbage in it. ``timeit`` pauses it for the same reason. Reference counting still frees everything it can.

    On leaving, everything the collector tracks is moved to its oldest generation (``gc.freeze()`` then
    ``gc.unfreeze()``, two list splices in CPython), so the first young collections after the block do not walk
    the new graph again either (~0.1 s on that module). What else the process had in the young generations
    moves with it: cyclic garbage among those objects waits for the next full collection instead of a young
    one. Not done when the process holds frozen objects of its own (``gc.get_freeze_count()``, e.g. before a
    fork), which ``unfreeze`` would release -- unless the process is about to exit (``frozen_at_exit``): then
    what the block made is frozen too (left young, its first collection after the block walked it all: 0.03 s
    of the memory model's 0.23 s in ``hloscope report`` on the corpus's mixtral module).
    """
    paused = gc.isenabled()
    if paused:
        gc.disable()
    try:
        yield
    finally:
        if paused:
            if _exiting:
                gc.freeze()
            elif not gc.get_freeze_count():
                gc.freeze()
                gc.unfreeze()
            gc.enable()


def frozen_at_exit() -> None:
    """Freeze everything the collector tracks (``gc.freeze()``), for a process about to exit.

    The interpreter's shutdown runs one last full collection, which walks every tracked object: after a
    report of a large module, millions of them, and none garbage (measured: 0.17 s of the 1.5 s that
    ``hloscope report`` takes on the corpus's mixtral module; 0.03 s frozen). Frozen objects are not walked.
    Only for the command-line entry points, never in a process that goes on (frozen cyclic garbage is never
    collected until ``gc.unfreeze()``): atexit handlers and the freeing of objects by reference counting still
    run as usual. ``paused_gc`` blocks run after it freeze what they make as well.
    """
    global _exiting
    _exiting = True
    gc.freeze()
