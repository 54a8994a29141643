"""``paused_gc``: the cyclic garbage collector paused while a large object graph is built."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def paused_gc() -> Iterator[None]:
    """Pause the cyclic garbage collector for the block, restoring its previous state after.

    Parsing and costing a module allocate a few objects per instruction and free almost nothing: the collector
    would walk the growing graph again and again (measured on the 52 MB module of ``benchmarks/parse.py``: +45%
    time for the parse, +40-170% for the cost walk, growing with what else the process holds) and can find no
    garbage in it. ``timeit`` pauses it for the same reason. Reference counting still frees everything it can.
    """
    paused = gc.isenabled()
    if paused:
        gc.disable()
    try:
        yield
    finally:
        if paused:
            if not gc.get_freeze_count():
                # Move what the block made straight to the oldest generation: the young collections would each
                # walk all of it once more to find nothing (~0.1 s on that module). freeze() and unfreeze() are
                # list splices, O(1); skipped when the process froze objects of its own (a pre-fork freeze).
                gc.freeze()
                gc.unfreeze()
            gc.enable()
