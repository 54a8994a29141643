"""The memory model's walk over plain instructions in C (``_liveness_walk.plain_run``) equals the Python walk
(``liveness._Walk.instruction``, its specification) on every computation the walk reaches in the fixture and
corpus modules -- every list and dict the walk fills, value by value -- and a small computation's walk is the
one worked by hand. The buffers made of the walk's values in C (``_liveness_walk.make_buffers``) equal those of
``liveness.py_make_buffers`` on the same modules, built into a dataclass's slots or by calling another class."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from hloscope.memory import liveness
from hloscope.parsers import parse_hlo_text

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "hlo"
_C_MAKE_BUFFERS = liveness.c_make_buffers
_C_LINK_BUFFERS = liveness.c_link_buffers
#: What a walk fills, in the order it fills them.
STATE = ("sequence", "parent", "define_time", "last_use", "shapes", "table_len", "origin", "share",
         "operand_values", "copy_reads", "entry_params", "post_order", "now")


@pytest.fixture(scope="module")
def plain_run(compiled_twin):
    return compiled_twin(liveness.plain_run, "hloscope.memory._liveness_walk")


@pytest.fixture(scope="module")
def make_buffers(compiled_twin):
    return compiled_twin(liveness.c_make_buffers, "hloscope.memory._liveness_walk")


def _walk(text: str, run, monkeypatch) -> tuple[dict, liveness.Liveness]:
    """The walk's state and the liveness of the module ``text``, with ``run`` as ``plain_run`` (None: the
    Python walk for every instruction, and ``py_make_buffers``; else ``make_buffers`` in C too)."""
    monkeypatch.setattr(liveness, "plain_run", run)
    monkeypatch.setattr(liveness, "c_make_buffers", None if run is None else _C_MAKE_BUFFERS)
    monkeypatch.setattr(liveness, "c_link_buffers", None if run is None else _C_LINK_BUFFERS)
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


def test_every_corpus_module_walks_the_same(plain_run, monkeypatch, corpus_dir, hlo_paths) -> None:
    paths = hlo_paths(1_500_000, fixtures=False)
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


def _walked(text: str) -> tuple[liveness._Walk, int, bool]:
    """A walk of ``text``'s module up to where ``analyze_liveness`` makes its buffers: (walk, end, tiled)."""
    module = parse_hlo_text(text)
    walk = liveness._Walk(module)
    root = walk.computation(module.entry, [])
    walk.merge(root, root)
    for v in walk.leaves(root):
        walk.live_out.add(v)
    return walk, len(walk.sequence) - 1, liveness._tiled(module)


def _fields(b) -> tuple:
    return tuple(getattr(b, name) for name in (
        "id", "size_bytes", "host_bytes", "start", "end", "kind", "live_out", "aliased_parameter", "is_tuple_table",
        "defined_by", "shape", "share_candidates", "post_order"))


#: Buffer's fields in a class without slots (a plain dataclass): make_buffers calls it instead of filling slots.
_NotSlotted = dataclasses.make_dataclass("_NotSlotted", [
    (name, object) if name not in ("share_candidates", "post_order")
    else (name, object, dataclasses.field(default=() if name == "share_candidates" else 0))
    for name in liveness.Buffer._fields])


def test_buffers_made_in_c_are_the_python_ones(make_buffers) -> None:
    """A module with merged values (a while loop's state), tuple tables and live-out parameters, tiled and not,
    into Buffer's slots and through a class it must call."""
    text = (FIXTURES / "cpu_transformer_scan.hlo.txt").read_text()
    for tiled in (False, True):
        walk, end, _ = _walked(text)
        args = (end, tiled, liveness._merged_buffer, liveness.Buffer, liveness.POINTER_BYTES,
                liveness.TPU_GRANULE_BYTES)
        want, want_of = liveness.py_make_buffers(walk, *args)
        assert any(b.is_tuple_table for b in want) and any(b.kind == "parameter" for b in want)
        assert len(want) < len(walk.parent)  # (some values share a buffer)
        got, got_of = make_buffers(walk, *args)
        assert got == want and got_of == want_of
        assert all(type(b) is liveness.Buffer for b in got)
        called, called_of = make_buffers(walk, end, tiled, liveness._merged_buffer, _NotSlotted,
                                         liveness.POINTER_BYTES, liveness.TPU_GRANULE_BYTES)
        assert called_of == want_of
        assert [_fields(b) for b in called] == [_fields(b) for b in want]
        assert any(type(b) is _NotSlotted for b in called)


def test_links_made_in_c_are_the_python_ones(make_buffers, corpus_dir) -> None:
    """Share candidates, operand buffers and copies, entry for entry and in order, on a fixture and on llama (876
    merged buffers, thousands of share candidates)."""
    link_buffers = liveness.c_link_buffers
    assert link_buffers is not None
    texts = [(FIXTURES / "cpu_transformer_scan_grad.hlo.txt").read_text()]
    texts += [p.read_text() for p in sorted((corpus_dir / "hlo_generic").glob("*llama31_8b_bf16_1x8.hlo"))]
    for text in texts:
        walk, end, tiled = _walked(text)
        linked = []
        for link in (liveness.py_link_buffers, link_buffers):
            buffers, buffer_of = make_buffers(walk, end, tiled, liveness._merged_buffer, liveness.Buffer, 8, 512)
            operand_buffers, copies_of = {}, {}
            link(walk, buffers, buffer_of, operand_buffers, copies_of)
            linked.append(([b.share_candidates for b in buffers], list(operand_buffers.items()),
                           list(copies_of.items())))
        assert linked[1] == linked[0]
        shares, operands, copies = linked[0]
        assert sum(map(bool, shares)) > 10 and len(operands) > 100 and copies


def test_make_buffers_refuses_a_bad_walk(make_buffers) -> None:
    walk, end, tiled = _walked(SMALL)
    args = (end, tiled, liveness._merged_buffer, liveness.Buffer, 8, 512)
    with pytest.raises(TypeError, match="make_buffers"):
        make_buffers(walk, end)
    walk.parent[3] = 99
    with pytest.raises(ValueError, match="out of range"):
        make_buffers(walk, *args)
    walk, end, tiled = _walked(SMALL)
    walk.origin.pop()
    with pytest.raises(ValueError, match="differ in length"):
        make_buffers(walk, *args)
    walk, end, tiled = _walked(SMALL)
    walk.live_out = list(walk.live_out)
    with pytest.raises(TypeError, match="live_out must be a set"):
        make_buffers(walk, *args)
