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


# -- what a parse and an analysis leave behind -------------------------------------------------------------

_LONG_BODY = "\n".join([
    "HloModule m",
    "",
    "%add (a: f32[], b: f32[]) -> f32[] {",
    "  %a = f32[] parameter(0)",
    "  %b = f32[] parameter(1)",
    "  ROOT %s = f32[] add(%a, %b)",
    "}",
    "",
    "%long (p: f32[8]) -> f32[] {",  # (a computation other than the entry, long enough to be kept as rows)
    "  %p = f32[8]{0} parameter(0)",
    "  %z = f32[] constant(0)",
    "  %r = f32[] reduce(f32[8]{0} %p, f32[] %z), dimensions={0}, to_apply=%add, metadata={op_name=\"jit(f)/sum\"}",
    *[f"  %n{k} = f32[] negate(%r)" for k in range(140)],
    "  ROOT %o = f32[] negate(%r)",
    "}",
    "",
    "ENTRY %main (p: f32[8]) -> f32[] {",
    "  %p = f32[8]{0} parameter(0)",
    "  ROOT %l = f32[] call(%p), to_apply=%long",
    "}",
    "",
])

#: Shapes left to the parser (XLA's own test texts): its shape inference reads the instructions before.
_SHAPELESS = """\
HloModule m

ENTRY test {
  ROOT root = add(f32[10] parameter(0), multiply(f32[10] parameter(1), f32[10] parameter(2)))
}
"""


def _hloscope_garbage() -> list:
    """What a full collection finds unreachable now, of hloscope's own types (a cycle of a parse or an analysis
    runs through its instructions, computations, parser or cost contexts). Not the collection's count: another
    test's threads (Dask's, tornado's futures) may leave garbage of their own meanwhile."""
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        gc.collect()
        return [o for o in gc.garbage if type(o).__module__.startswith("hloscope")]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()


def _collector_off():
    gc.collect()
    was = gc.isenabled()
    gc.disable()
    return was


@pytest.mark.parametrize("text", [_LONG_BODY, _SHAPELESS], ids=["lazy-body", "inferred-shapes"])
def test_a_parsed_module_is_freed_when_dropped_without_the_collector(text: str) -> None:
    """Every instruction holds its parser (its attribute decoder), and the parser keeps the module's computations
    only through a weak reference, and none of its instructions: dropping the module frees it by reference
    counting, bodies built after the parse and attributes decoded included -- the cyclic collector is not needed
    (it runs rarely on the oldest generation, where ``paused_gc`` moves a parse's objects: a cycle kept every module
    a process analyzed)."""
    import weakref

    from hloscope.parsers import parse_hlo_text

    def read(text: str):
        module = parse_hlo_text(text)
        for comp in module.computations:
            for inst in comp.instructions:  # (builds the lazy body)
                inst.attributes, inst.metadata
        return module

    read(text)  # (a first read compiles patterns and imports what it decodes: garbage of its own, once)
    was = _collector_off()
    try:
        module = read(text)
        parser = module.entry.instructions[-1]._decoder
        assert parser.done.get(module.entry.name) is module.entry  # (the parser still finds them by name)
        gone = weakref.ref(module)
        del module
        assert gone() is None
        assert parser.done.get("main") is None and list(parser.done.values()) == []
        del parser
        assert _hloscope_garbage() == []  # (nor an instruction kept by the parser: the index of its inference)
    finally:
        if was:
            gc.enable()


def test_an_analysis_leaves_no_cyclic_garbage() -> None:
    """``hloscope.analyze`` of a module, its tables made, then dropped: nothing is left for the collector (the cost
    walk's contexts held the walk's bound method, a cycle, until 2026-11-29)."""
    from pathlib import Path

    import hloscope

    text = (Path(__file__).resolve().parents[1] / "fixtures" / "hlo" / "cpu_transformer_scan.hlo.txt").read_text()
    for t in (text, _LONG_BODY):  # (a first analysis imports and fills caches: garbage of its own, once)
        report = hloscope.analyze(t, chip="tpu-v5e")
        report.ops, report.modules
    del report
    was = _collector_off()
    try:
        for t in (text, _LONG_BODY):
            report = hloscope.analyze(t, chip="tpu-v5e")
            report.ops, report.modules
            del report
            assert _hloscope_garbage() == []
    finally:
        if was:
            gc.enable()
