"""The columns of CostRows made in C (``hloscope/cost/_cost_walk.c``) equal their Python specifications:
``cost_totals`` the module totals of ``module.py_summed``, ``table_columns`` the kept rows and fields of
``tables._table_columns`` -- on every fixture and corpus module, and on rows built to reach each rule's edges (NaN
and infinite values, huge ints, values summing to zero, flags, timings, counts that are not floats)."""

from __future__ import annotations

import math
import random

import pytest

from hloscope.cost import module as walk
from hloscope.cost import module_cost
from hloscope.cost._types import OpCost
from hloscope.parsers import parse_hlo_text
from hloscope.roofline import tables


def _summed_key(cost: OpCost) -> tuple:
    """An OpCost for exact comparison: ``repr`` tells NaN, -0.0 and ints from floats apart, to the last bit."""
    return repr(tuple(cost)[:7]), cost.flags


def _columns_key(columns: tuple) -> tuple:
    """``table_columns``'s answer for exact comparison: rows, instructions and costs are the same objects; the
    numbers and timings print the same (``repr``, as above)."""
    return (tuple(tuple(map(id, c)) for c in columns[:3]), tuple(repr(c) for c in columns[3:]))


def _outcome(function, key, *args):
    try:
        return ("value", key(function(*args)))
    except Exception as e:  # noqa: BLE001 - both sides must raise the same
        return ("error", type(e).__name__)


@pytest.fixture(scope="module")
def twins(compiled_twin):
    return (compiled_twin(walk.c_cost_totals, "hloscope.cost._cost_walk"),
            compiled_twin(tables.c_table_columns(), "hloscope.cost._cost_walk"))


def _summed_with(cost_totals, rows, monkeypatch):
    monkeypatch.setattr(walk, "cost_totals", cost_totals)
    monkeypatch.setattr(walk, "_C_TOTALS", 0)
    try:
        return walk.summed(rows)
    finally:
        monkeypatch.undo()


def _check(rows, twins, monkeypatch, rng=None):
    cost_totals, table_columns = twins
    assert (_outcome(_summed_with, _summed_key, cost_totals, rows, monkeypatch)
            == _outcome(walk.py_summed, _summed_key, rows))
    timings_choices = [None]
    if rng is not None:
        timings_choices.append([rng.choice([None, (1e-6, 1.0)]) for _ in rows])
    for timings in timings_choices:
        for keep_all in (False, True):
            assert (_outcome(table_columns, _columns_key, rows, timings, keep_all)
                    == _outcome(tables._table_columns, _columns_key, rows, timings, keep_all))


def test_every_module(twins, monkeypatch, hlo_paths) -> None:
    paths = hlo_paths(5_000_000)
    rng = random.Random(16)
    checked = 0
    for path in paths:
        try:
            module = parse_hlo_text(path.read_text(encoding="utf-8", errors="replace"))
        except Exception:  # noqa: BLE001 - texts that are not one module (XLA test files): not costed
            continue
        _check(module_cost(module).rows, twins, monkeypatch, rng)
        checked += 1
    assert checked > 300, checked


_VALUES = [0, 0.0, -0.0, 1, 3.5, -3.5, 2**60 + 1, 10**400, math.nan, math.inf, -math.inf, 1e308]
_KINDS = ["", "all-reduce", "all-gather", None]  # (None: not a kind hloscope makes, but the rule is "all but \"\"")


def test_edge_rows(twins, monkeypatch) -> None:
    module = parse_hlo_text("HloModule m\n\nENTRY %e (p: f32[8]) -> f32[8] {\n  ROOT %p = f32[8]{0} parameter(0)\n}\n")
    inst = module.entry.instructions[0]
    rng = random.Random(7)
    for _ in range(2000):
        rows = []
        for _ in range(rng.randint(0, 12)):
            fields = [rng.choice(_VALUES) for _ in range(5)]
            cost = OpCost(*fields, rng.choice(_KINDS), rng.choice([0, 2, 4, 8]),
                          frozenset(rng.sample(["a", "b"], rng.randint(0, 2)) if rng.random() < 0.2 else ()))
            count = rng.choice([1.0, 2.0, 0.5, 1e300]) if rng.random() < 0.95 else rng.choice([1, 2])
            rows.append(walk.CostRow("e", inst, cost, count))
        _check(rows, twins, monkeypatch, rng)


def test_edge_rows_sharing_cost_objects(twins, monkeypatch) -> None:
    """Rows that share a few cost objects, as the cost walk's rows do: ``table_columns`` reads each cost once,
    except one for which reading raises (a huge int among floats, flags of no truth value), whose rows are read
    one by one and raise, or not, as each row's own needs say (a row kept for its timing never sums its cost)."""
    module = parse_hlo_text("HloModule m\n\nENTRY %e (p: f32[8]) -> f32[8] {\n  ROOT %p = f32[8]{0} parameter(0)\n}\n")
    inst = module.entry.instructions[0]
    rng = random.Random(11)
    for _ in range(1000):
        pool = []
        for _ in range(rng.randint(1, 4)):
            fields = [rng.choice(_VALUES + [0.5, 2.0]) for _ in range(5)]
            pool.append(OpCost(*fields, rng.choice(_KINDS), rng.choice([0, 2, 8]),
                               frozenset({"a"}) if rng.random() < 0.2 else frozenset()))
        rows = [walk.CostRow("e", inst, rng.choice(pool), rng.choice([1.0, 3.0])) for _ in range(rng.randint(0, 10))]
        _check(rows, twins, monkeypatch, rng)


def test_values_that_sum_to_zero_are_dropped_as_python_drops_them(twins) -> None:
    """(1 + -1 + 0 + 0 + 0) == 0: the row does no work by Python's arithmetic, and neither side keeps it."""
    module = parse_hlo_text("HloModule m\n\nENTRY %e (p: f32[8]) -> f32[8] {\n  ROOT %p = f32[8]{0} parameter(0)\n}\n")
    row = walk.CostRow("e", module.entry.instructions[0], OpCost(1, -1), 1.0)
    assert twins[1]([row], None, False)[0] == [] == tables._table_columns([row], None, False)[0]


def test_instructions_of_another_class_are_read_by_their_attributes(twins) -> None:
    """The C walk reads an ``HloInstruction``'s slots directly; an instruction of another class (here a subclass
    whose ``name`` and ``shape`` are properties) is read through its attributes, as the Python side reads it."""
    from hloscope.hlo import HloInstruction

    module = parse_hlo_text("HloModule m\n\nENTRY %e (p: f32[8]) -> f32[8] {\n  ROOT %p = f32[8]{0} parameter(0)\n}\n")
    base = module.entry.instructions[0]
    twins[1]([walk.CostRow("e", base, OpCost(1.0), 1.0)], None, True)  # (the C side has seen an HloInstruction)

    class Renamed(HloInstruction):
        __slots__ = ()

        @property
        def name(self):  # noqa: ANN202 - shadows the slot
            return "renamed"

        @property
        def shape(self):  # noqa: ANN202
            return "a shape"

    other = object.__new__(Renamed)
    for slot in HloInstruction.__slots__:  # (every slot set, name and shape too: the properties must win)
        if hasattr(base, slot):
            HloInstruction.__dict__[slot].__set__(other, getattr(base, slot))
    rows = [walk.CostRow("e", other, OpCost(2.0), 1.0), walk.CostRow("e", base, OpCost(3.0), 1.0)]
    got, want = twins[1](rows, None, True), tables._table_columns(rows, None, True)
    assert got[5][1] == want[5][1] == ["renamed", base.name]
    assert got[5][3] == want[5][3] == ["a shape", base.shape]
