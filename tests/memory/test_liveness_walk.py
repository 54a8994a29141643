"""The memory model's walk over plain instructions in C (``_liveness_walk.plain_run``) equals the Python walk
(``liveness._Walk.instruction``, its specification) on every computation the walk reaches in the fixture and
corpus modules -- every list and dict the walk fills, value by value -- and a small computation's walk is the
one worked by hand."""

from __future__ import annotations

from pathlib import Path

import pytest

from hloscope.memory import liveness
from hloscope.parsers import parse_hlo_text

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "hlo"
#: What a walk fills, in the order it fills them.
STATE = ("sequence", "parent", "define_time", "last_use", "shapes", "table_len", "origin", "share",
         "operand_values", "copy_reads", "entry_params", "post_order", "now")


@pytest.fixture(scope="module")
def plain_run(compiled_twin):
    return compiled_twin(liveness.plain_run, "hloscope.memory._liveness_walk")


def _walk(text: str, run, monkeypatch) -> tuple[dict, liveness.Liveness]:
    """The walk's state and the liveness of the module ``text``, with ``run`` as ``plain_run`` (None: the
    Python walk for every instruction)."""
    monkeypatch.setattr(liveness, "plain_run", run)
    module = parse_hlo_text(text)
    walk = liveness._Walk(module)
    walk.computation(module.entry, [])
    state = {k: getattr(walk, k) for k in STATE}
    state["shapes"] = [None if s is None else (s.element_type, s.dims, s.hbm_size_bytes) for s in walk.shapes]
    return state, liveness.analyze_liveness(parse_hlo_text(text))


def _texts(paths: list[Path]) -> list[tuple[str, str]]:
    out = []
    for path in paths:
        text = path.read_text(encoding="utf-8", errors="replace")
        try:
            parse_hlo_text(text)
        except Exception:  # noqa: BLE001 - texts that are not one module (XLA test files)
            continue
        out.append((path.name, text))
    return out


def _walks_the_same(texts: list[tuple[str, str]], plain_run, monkeypatch) -> tuple[int, int]:
    """Each module walked both ways: every field of the walk and the liveness equal, or the same error raised.
    Returns (modules compared, instructions walked)."""
    checked = walked = 0
    for name, text in texts:
        try:
            want, want_liveness = _walk(text, None, monkeypatch)
        except (KeyError, IndexError, ValueError) as err:  # a module the walk refuses: refused alike
            with pytest.raises(type(err)):
                _walk(text, plain_run, monkeypatch)
            continue
        got, got_liveness = _walk(text, plain_run, monkeypatch)
        for key in STATE:
            assert got[key] == want[key], (name, key)
        assert got_liveness == want_liveness, name
        checked += 1
        walked += len(want["sequence"])
    return checked, walked


def test_every_fixture_walks_the_same(plain_run, monkeypatch) -> None:
    paths = sorted(FIXTURES.glob("*.hlo.txt")) + sorted(FIXTURES.parent.glob("dump/*/*after_optimizations.txt"))
    checked, walked = _walks_the_same(_texts(paths), plain_run, monkeypatch)
    assert checked >= 40 and walked > 2_000, (checked, walked)


def test_every_corpus_module_walks_the_same(plain_run, monkeypatch, corpus_dir) -> None:
    paths = sorted(p for d in ("hlo_cpu", "hlo_gpu", "hlo_tpu", "hlo_generic") for p in (corpus_dir / d).glob("*")
                   if p.suffix in (".hlo", ".txt") and p.stat().st_size < 1_500_000)
    paths += sorted((corpus_dir / "hlo_generic").glob("*llama31_8b_bf16_1x8.hlo"))  # (unfused: 21,000 rows)
    checked, walked = _walks_the_same(_texts(paths), plain_run, monkeypatch)
    assert checked >= 300 and walked > 100_000, (checked, walked)


SMALL = """HloModule small, is_scheduled=true

ENTRY %main (p0: f32[4], p1: (f32[4], s32[])) -> f32[4] {
  %p0 = f32[4]{0} parameter(0)
  %p1 = (f32[4]{0}, s32[]) parameter(1)
  %c = f32[4]{0} constant({1, 2, 3, 4})
  %a = f32[4]{0} add(f32[4]{0} %p0, f32[4]{0} %c)
  %b = f32[8]{0} broadcast(f32[4]{0} %a), dimensions={0}
  %x = f32[4]{0} copy(f32[4]{0} %a)
  %g = f32[4]{0} get-tuple-element((f32[4]{0}, s32[]) %p1), index=0
  %m = f32[4]{0} multiply(f32[4]{0} %x, f32[4]{0} %x)
  ROOT %r = f32[4]{0} subtract(f32[4]{0} %m, f32[4]{0} %g)
}
"""


def test_a_small_computation_by_hand(plain_run, monkeypatch) -> None:
    """Values 0 (p0), 1-3 (p1: its table, then its two leaves), then one per instruction: c 4, a 5, b 6, x 7,
    m 8, r 9 (the get-tuple-element names p1's leaf 2). Times: one per instruction, in order. ``a`` may take
    over p0 or c (same 16 bytes), ``m`` over x (twice: it reads x twice), ``r`` over m and g; the broadcast and
    the copy are not elementwise; the copy reads ``a``; every value an instruction defines records its operand
    values (the constant: none)."""
    state, _ = _walk(SMALL, plain_run, monkeypatch)
    assert state["sequence"] == [("main", n) for n in ("p0", "p1", "c", "a", "b", "x", "g", "m", "r")]
    assert [o[1:] for o in state["origin"]] == [
        ("p0", "parameter"), ("p1", "parameter"), ("p1", "parameter"), ("p1", "parameter"), ("c", "constant"),
        ("a", "temp"), ("b", "temp"), ("x", "temp"), ("m", "temp"), ("r", "temp")]
    assert state["define_time"] == [0, 1, 1, 1, 2, 3, 4, 5, 7, 8]
    assert state["share"] == [(5, 0, 3), (5, 4, 3), (8, 7, 7), (8, 7, 7), (9, 8, 8), (9, 2, 8)]
    assert state["operand_values"] == {4: (), 5: (0, 4), 6: (5,), 7: (5,), 8: (7, 7), 9: (8, 2)}
    assert state["copy_reads"] == {7: (5,)}
    assert state["last_use"] == [3, -1, 8, -1, 3, 5, -1, 7, 8, -1]
    assert state["now"] == 8
    assert state == _walk(SMALL, None, monkeypatch)[0]


def test_bad_arguments(plain_run) -> None:
    module = parse_hlo_text(SMALL)
    walk = liveness._Walk(module)
    comp = module.entry
    names, opcodes, shapes = comp.names, comp.opcodes, comp.shapes
    operands = comp.operand_lists(range(len(names)))
    with pytest.raises(TypeError, match="plain_run"):
        plain_run(walk, 0, "main", list(names), opcodes, shapes, operands, {}, frozenset(), frozenset())
    with pytest.raises(ValueError, match="differ in length"):
        plain_run(walk, 0, "main", names, opcodes, shapes, operands[:-1], {}, frozenset(), frozenset())
    with pytest.raises(TypeError):
        plain_run(walk, 0, "main", names, opcodes, shapes, operands, {})
    walk.parent = ()
    with pytest.raises(TypeError, match="walk.parent must be a list"):
        plain_run(walk, 0, "main", names, opcodes, shapes, operands, {}, frozenset(), frozenset())
