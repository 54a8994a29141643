"""``hloscope._gc.paused_gc``: the collector's state around a large build."""

from __future__ import annotations

import gc

import pytest

from hloscope._gc import paused_gc


@pytest.fixture
def collector_on():
    was = gc.isenabled()
    gc.enable()
    yield
    if not was:
        gc.disable()


def test_pauses_and_restores(collector_on) -> None:
    with paused_gc():
        assert not gc.isenabled()
        junk = [[i] for i in range(10_000)]  # tracked containers, young
    assert gc.isenabled()
    assert gc.get_count()[0] < 100, "what the block made left the youngest generation"
    assert gc.get_freeze_count() == 0
    del junk


def test_leaves_a_disabled_collector_disabled() -> None:
    was = gc.isenabled()
    gc.disable()
    try:
        with paused_gc():
            pass
        assert not gc.isenabled()
    finally:
        if was:
            gc.enable()


def test_does_not_unfreeze_what_the_process_froze(collector_on) -> None:
    kept = [[i] for i in range(10_000)]  # tracked objects alive throughout: frozen below, and staying frozen
    gc.freeze()
    try:
        assert gc.get_freeze_count() >= len(kept)
        with paused_gc():
            [[i] for i in range(1000)]
        # (an unfreeze would leave none; the count itself may drop by frozen objects freed meanwhile)
        assert gc.get_freeze_count() >= len(kept)
    finally:
        gc.unfreeze()


_PROBE = """
import gc, sys
sys.argv = ["hloscope", "chips"]
from hloscope.cli import {entry}
rc = {entry}({args})
print(rc, gc.get_freeze_count() > 0)
"""


@pytest.mark.parametrize("entry, args, frozen", [("console_main", "", True), ("main", "['chips']", False)])
def test_only_the_command_line_entry_freezes_the_collector(entry: str, args: str, frozen: bool) -> None:
    """``hloscope`` and ``python -m hloscope`` freeze the collector before the interpreter exits (its last full
    collection walked every object of the analysis); ``main``, which tests and scripts call in-process, does not."""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", _PROBE.format(entry=entry, args=args)], capture_output=True,
                         text=True, check=True).stdout.split()
    assert out[-2:] == ["0", str(frozen)]  # (after the chips table)


_EXITING_PROBE = """
import gc
from hloscope._gc import frozen_at_exit, paused_gc
gc.enable()
frozen_at_exit()
before = gc.get_freeze_count()
with paused_gc():
    kept = [[i] for i in range(10_000)]
print(gc.isenabled(), gc.get_freeze_count() - before >= 10_000, gc.get_count()[0] < 100)
"""


def test_a_process_frozen_for_exit_freezes_what_paused_blocks_make() -> None:
    """After ``frozen_at_exit`` (the command line, once its analysis is made), a ``paused_gc`` block cannot move
    what it made to the oldest generation (``unfreeze`` would release the process's frozen objects); it freezes
    it instead, so the next young collection does not walk it (in a child: freezing is for good)."""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", _EXITING_PROBE], capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == ["True", "True", "True"]
