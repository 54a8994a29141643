"""The buffer assigner in C (``_buffer_assign.assign_run``) equals the Python assigner
(``assignment._py_assign``, its specification) on the liveness of every fixture and corpus module and on random
buffer sets -- every allocation, its buffers in order, the temp set, its peak and the peak's time -- and a small
set's assignment is the one worked by hand from XLA's rules (``assignment``'s docstring)."""

from __future__ import annotations

import random
from pathlib import Path
from types import SimpleNamespace

import pytest

from hloscope.memory import assignment, liveness
from hloscope.memory.liveness import Buffer, Liveness
from hloscope.parsers import parse_hlo_text

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


@pytest.fixture(scope="module")
def assign_run(compiled_twin):
    return compiled_twin(assignment.assign_run, "hloscope.memory._buffer_assign")


def _outcome(a: assignment.Assignment) -> tuple:
    return ([(x.kind, x.size_bytes, x.buffers, x.live_out, x.readonly) for x in a.allocations], a.temp_buffers,
            a.temp_bytes, a.peak_time)


def _both(lv: Liveness, assign_run, monkeypatch) -> tuple[tuple, tuple]:
    """(Python outcome, C outcome) of ``lv``."""
    monkeypatch.setattr(assignment, "assign_run", assign_run)
    monkeypatch.setattr(assignment, "PURE_PYTHON", False)
    return _outcome(assignment._py_assign(lv)), _outcome(assignment.assign_buffers(lv))


def _assigns_the_same(paths: list[Path], assign_run, monkeypatch) -> tuple[int, int]:
    """Returns (modules compared, buffers assigned)."""
    checked = buffers = 0
    for path in paths:
        try:
            lv = liveness.analyze_liveness(parse_hlo_text(path.read_text(encoding="utf-8", errors="replace")))
        except Exception:  # noqa: BLE001 - not one module, or one the walk refuses (tests of the walk cover it)
            continue
        want, got = _both(lv, assign_run, monkeypatch)
        assert got == want, path.name
        checked += 1
        buffers += len(lv.buffers)
    return checked, buffers


def test_every_fixture_assigns_the_same(assign_run, monkeypatch) -> None:
    paths = sorted((FIXTURES / "hlo").glob("*.hlo.txt")) + sorted(FIXTURES.glob("dump/*/*after_optimizations.txt"))
    checked, buffers = _assigns_the_same(paths, assign_run, monkeypatch)
    assert checked >= 40 and buffers > 1_500, (checked, buffers)


def test_every_corpus_module_assigns_the_same(assign_run, monkeypatch, corpus_dir, hlo_paths) -> None:
    paths = hlo_paths(1_500_000, fixtures=False)
    paths += sorted((corpus_dir / "hlo_generic").glob("*llama31_8b_bf16_1x8.hlo"))  # (22,000 buffers)
    checked, buffers = _assigns_the_same(paths, assign_run, monkeypatch)
    assert checked >= 300 and buffers > 100_000, (checked, buffers)


def _buffer(i: int, size: int, start: int, end: int, kind: str = "temp", live_out: bool = False,
            aliased: bool = False, table: bool = False, share: tuple[int, ...] = (), post_order: int = 0) -> Buffer:
    return Buffer(i, size, 0, start, end, kind, live_out, aliased, table, ("c", f"b{i}"), None, share, post_order)


def _random_liveness(rng: random.Random) -> Liveness:
    times = rng.randrange(1, 40)
    n = rng.randrange(1, 60)
    sizes = [rng.choice((0, 4, 16, 64, 100, 256, 1024)) for _ in range(8)]
    buffers = []
    for i in range(n):
        start = rng.randrange(0, times)
        end = min(times - 1, start + rng.randrange(0, 12))
        kind = rng.choices(("temp", "parameter", "constant", "output"), (8, 2, 1, 2))[0]
        live_out = kind == "output" or (kind == "parameter" and rng.random() < 0.3)
        share = tuple(rng.sample(range(n), min(n, rng.randrange(0, 3))))
        buffers.append(_buffer(i, rng.choice(sizes), start, end, kind, live_out,
                               aliased=kind == "parameter" and live_out, table=rng.random() < 0.1, share=share,
                               post_order=rng.randrange(0, 20)))
    operands = {i: tuple(rng.sample(range(n), min(n, rng.randrange(0, 4)))) for i in range(n) if rng.random() < 0.7}
    copies = {i: frozenset(rng.sample(range(n), min(n, rng.randrange(1, 3)))) for i in range(n) if rng.random() < 0.15}
    return Liveness([("c", f"t{t}") for t in range(times)], buffers, operands, copies, True, rng.random() < 0.5)


def test_random_buffer_sets_assign_the_same(assign_run, monkeypatch) -> None:
    rng = random.Random(16)
    temps = shared = 0
    for _ in range(3_000):
        want, got = _both(_random_liveness(rng), assign_run, monkeypatch)
        assert got == want
        temps += bool(want[1])
        shared += sum(len(ids) > 1 for _, _, ids, _, _ in want[0])
    assert temps > 2_000 and shared > 1_000, (temps, shared)  # (the sets exercise both paths)


def test_a_small_set_by_hand(assign_run, monkeypatch) -> None:
    """Times 0-9. Taken largest first, live out first at equal size, then by post order:

    - 0, a 64-byte parameter aliased to an output, [0, 9]: its own allocation (reusable);
    - 1, a 64-byte output [5, 9]: the parameter's allocation is busy then -> a new output allocation;
    - 2, a 64-byte temp [0, 2]: the output allocation is free until 5 -> joins it (allocation 1);
    - 3, a 32-byte temp [0, 3] whose defining instruction reads 2: 2's allocation is busy until 2, the
      parameter's always -> temp;
    - 4, a 32-byte temp [3, 4] that may take over 3 (a share candidate): allocation 1 is free then, but 4 is a
      copy of 2, which is there -> refused -> temp;
    - 5, a 16-byte constant: a read-only allocation;
    - 6, a 0-byte temp: nowhere.

    Temps 3 [0, 3] and 4 [3, 4], each rounded to 64 bytes (the CPU's ``CPU_ALIGNMENT_BYTES``): 64 + 64 at time
    3, less the 32 bytes 4 takes over from 3 there = 96, less the topmost's 32 bytes of rounding = 64, first
    reached at time 3."""
    buffers = [
        _buffer(0, 64, 0, 9, "parameter", live_out=True, aliased=True),
        _buffer(1, 64, 5, 9, "output", live_out=True, post_order=5),
        _buffer(2, 64, 0, 2, post_order=1),
        _buffer(3, 32, 0, 3, post_order=2),
        _buffer(4, 32, 3, 4, share=(3,), post_order=3),
        _buffer(5, 16, 0, 9, "constant"),
        _buffer(6, 0, 2, 2),
    ]
    lv = Liveness([("c", f"t{t}") for t in range(10)], buffers, {3: (2,), 4: (3,)}, {4: frozenset({2})}, True,
                  False)
    want = ([("parameter", 64, [0], True, False), ("output", 64, [1, 2], True, False),
             ("constant", 16, [5], False, True)], [3, 4], 64, 3)
    python, c = _both(lv, assign_run, monkeypatch)
    assert python == want
    assert c == want


def test_bad_arguments(assign_run) -> None:
    ok = [_buffer(0, 16, 0, 1)]
    with pytest.raises(TypeError, match="assign_run"):
        assign_run(tuple(ok), {}, {}, False, 2, 64)
    with pytest.raises(TypeError, match="assign_run"):
        assign_run(ok, {}, {}, False, 2)
    with pytest.raises(ValueError, match="alignment"):
        assign_run(ok, {}, {}, False, 2, 0)
    with pytest.raises(ValueError, match=r"buffers\[0\].id is 3"):
        assign_run([_buffer(3, 16, 0, 1)], {}, {}, False, 2, 64)
    with pytest.raises(ValueError, match="outside the schedule"):
        assign_run([_buffer(0, 16, 0, 7)], {}, {}, False, 2, 64)
    with pytest.raises(AttributeError):
        assign_run([SimpleNamespace(id=0)], {}, {}, False, 2, 64)


def test_sizes_beyond_the_c_range_take_the_python_assigner(assign_run, monkeypatch) -> None:
    huge = 1 << 60
    lv = Liveness([("c", "t0"), ("c", "t1")], [_buffer(0, huge, 0, 1), _buffer(1, huge, 1, 1)], {}, {}, True, True)
    with pytest.raises(OverflowError):
        assign_run(lv.buffers, {}, {}, True, 2, 1)
    python, c = _both(lv, assign_run, monkeypatch)
    assert c == python == ([], [0, 1], 2 * huge, 1)


def test_buffers_of_other_types_read_by_attribute(assign_run) -> None:
    """The C reader takes a Buffer's fields from its slots, anything else's by attribute lookup: the same
    answer from Buffers, from plain objects with those attributes, from a mix (slot reads only for the first
    one's exact type), and from a Buffer subclass whose property shadows a slot (the property wins, as in
    Python); a Buffer with a field left unset raises AttributeError as reading it in Python would."""
    rng = random.Random(7)
    fields = ("id", "size_bytes", "host_bytes", "start", "end", "kind", "live_out", "aliased_parameter",
              "is_tuple_table", "defined_by", "shape", "share_candidates", "post_order")
    for _ in range(200):
        lv = _random_liveness(rng)
        args = (lv.operand_buffers, lv.copies_of, lv.tiled, len(lv.sequence), 64)
        want = assign_run(lv.buffers, *args)
        plain = [SimpleNamespace(**{f: getattr(b, f) for f in fields}) for b in lv.buffers]
        assert assign_run(plain, *args) == want
        for first in (0, 1):  # (a Buffer first: slot reads for Buffers only; a plain object first: none)
            mixed = [b if i % 2 == first else plain[i] for i, b in enumerate(lv.buffers)]
            assert assign_run(mixed, *args) == want

    class Doubled(Buffer):
        __slots__ = ()

        @property
        def size_bytes(self):  # shadows the slot, read through it
            return 2 * Buffer.size_bytes.__get__(self)

        @size_bytes.setter
        def size_bytes(self, value):
            Buffer.size_bytes.__set__(self, value)

    one = [_buffer(0, 48, 0, 1), _buffer(1, 16, 1, 1)]
    doubled = [one[0], Doubled(*(getattr(one[1], f) for f in fields))]
    assert assign_run(one, {}, {}, False, 2, 1)[2] == 48 + 16
    assert assign_run(doubled, {}, {}, False, 2, 1)[2] == 48 + 32
    assert assign_run([Doubled(*(getattr(one[0], f) for f in fields))], {}, {}, False, 2, 1)[2] == 96
    unset = _buffer(0, 16, 0, 1)
    del unset.start
    with pytest.raises(AttributeError, match="start"):
        assign_run([unset], {}, {}, False, 2, 64)
