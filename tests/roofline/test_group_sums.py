"""``roofline.tables.group_sums``: the modules table's time by bound class and FLOPs by dtype are exact sums.

The oracle is exact rational arithmetic (``fractions.Fraction``), rounded once to a float: what a correctly
rounded sum must give whatever the order of the rows.
"""

from __future__ import annotations

import math
import random
from fractions import Fraction

import pytest

from hloscope.roofline.tables import group_sums


def _exact(values: list[float]) -> float:
    return float(sum((Fraction(v) for v in values), Fraction(0)))


def test_random_groups_equal_the_rational_sum() -> None:
    rng = random.Random(20261125)
    for _ in range(300):
        n = rng.randint(1, 60)
        keys = [rng.choice(["compute", "memory", "communication"]) for _ in range(n)]
        # Magnitudes of roofline times (ns to s) with cancellation-prone spreads.
        values = [rng.uniform(0, 1) * 10.0 ** rng.randint(-9, 0) for _ in range(n)]
        got = group_sums(keys, values)
        for key in set(keys):
            assert got[key] == _exact([v for k, v in zip(keys, values) if k == key])


def test_order_does_not_matter() -> None:
    values = [0.000234603, 0.000222761, 0.000178321, 0.000171642, 0.000167601, 0.00011832, 2.716e-05, 2.252e-05,
              1.9161e-05, 1.744e-05]  # a real trace's memory-bound op times (corpus te_fused_attn)
    keys = ["memory"] * len(values)
    forward = group_sums(keys, values)["memory"]
    assert forward == group_sums(keys, values[::-1])["memory"] == _exact(values)


def test_nan_values_and_missing_keys() -> None:
    got = group_sums(["a", None, "b", math.nan, "a", "b"], [1.0, 5.0, math.nan, 7.0, 2.0, math.nan])
    assert got == {"a": 3.0, "b": 0.0}  # b has only NaN: 0, as a sum skipping NaN gives; None/NaN keys dropped
    assert list(got) == ["a", "b"]  # first-seen order


@pytest.mark.parametrize("values, expected", [
    ([math.inf, 1.0], math.inf),
    ([1e308, 1e308], math.inf),  # fsum overflows on the way: the plain sum's inf
])
def test_non_finite(values: list[float], expected: float) -> None:
    assert group_sums(["k"] * len(values), values)["k"] == expected


def test_opposite_infinities_give_nan() -> None:
    assert math.isnan(group_sums(["k", "k"], [math.inf, -math.inf])["k"])


def test_masks_and_loop_agree(monkeypatch) -> None:
    """A few string keys are summed by numpy masks; any other keys by the loop: the same sums, keys and order,
    for a list of floats and for a float64 array, NaN and infinities among the values."""
    import numpy as np

    from hloscope.roofline import tables

    rng = random.Random(7)
    for _ in range(200):
        n = rng.randint(0, 80)
        keys = [rng.choice(["bf16", "f32", "s8", "memory"]) for _ in range(n)]
        values = [rng.choice([math.nan, math.inf, rng.uniform(-1, 1) * 10.0 ** rng.randint(-12, 12)])
                  if rng.random() < 0.1 else rng.uniform(0, 1) * 10.0 ** rng.randint(-12, 12) for _ in range(n)]
        fast = group_sums(keys, values)
        fast_array = group_sums(keys, np.array(values))
        monkeypatch.setattr(tables, "_FEW_GROUPS", 0)
        slow = group_sums(keys, values)
        monkeypatch.undo()
        assert list(fast) == list(fast_array) == list(slow)
        for key in slow:
            assert repr(fast[key]) == repr(fast_array[key]) == repr(slow[key])


def test_coded_keys_sum_as_the_keys_do() -> None:
    """``group_sums_coded`` (keys as codes into a few strings, as the ops table keeps its dtype and bound
    columns): the same sums, keys and first-seen order as ``group_sums`` of the strings, checked against the
    rational oracle too; categories no row names are left out, as keys that never occur."""
    import numpy as np

    from hloscope.roofline.tables import group_sums_coded

    rng = random.Random(20261128)
    categories = np.array(["memory", "compute", "communication", "unused"], dtype=object)
    for _ in range(200):
        n = rng.randint(1, 80)
        codes = np.array([rng.randrange(3) for _ in range(n)], dtype=np.intp)
        values = np.array([math.nan if rng.random() < 0.1 else rng.uniform(0, 1) * 10.0 ** rng.randint(-9, 3)
                           for _ in range(n)])
        keys = categories[codes].tolist()
        got = group_sums_coded(codes, categories, values)
        want = group_sums(keys, values)
        assert list(got) == list(want) == list(dict.fromkeys(keys))
        for key in want:
            assert repr(got[key]) == repr(want[key])
            assert got[key] == _exact([v for k, v in zip(keys, values.tolist()) if k == key and v == v])


def test_coded_keys_by_hand() -> None:
    import numpy as np

    from hloscope.roofline.tables import group_sums_coded

    got = group_sums_coded(np.array([1, 0, 1, 1]), np.array(["bf16", "f32"], dtype=object),
                           np.array([0.5, 2.0, math.nan, 0.25]))
    assert got == {"f32": 0.75, "bf16": 2.0} and list(got) == ["f32", "bf16"]


@pytest.mark.parametrize("pure", [False, True])
def test_coded_by_value_whatever_the_objects(monkeypatch, pure) -> None:
    """``tables._coded``: codes by value in first-seen order, the first object of each value kept, as
    ``dict.fromkeys`` gives them -- also where equal strings are different objects (the identity pass alone
    would give "fusion" two codes)."""
    import hloscope.roofline.tables as tables

    monkeypatch.setattr(tables, "PURE_PYTHON", pure)
    a, b = "".join(["fu", "sion"]), "".join(["fus", "ion"])
    assert a == b and a is not b
    values = ["add", a, "dot", b, "add", a, "copy", b]
    codes, distinct = tables._coded(values)
    assert distinct == ["add", "fusion", "dot", "copy"] and distinct[1] is a
    assert codes.tolist() == [0, 1, 2, 1, 0, 1, 3, 1]
    assert [distinct[c] for c in codes] == values
    codes, distinct = tables._coded(["x", "y", "x"])  # (one object per value: the identity pass is the answer)
    assert codes.tolist() == [0, 1, 0] and distinct == ["x", "y"]
    codes, distinct = tables._coded([])
    assert codes.tolist() == [] and distinct == []


def test_int_column_is_the_array_the_frame_makes_of_the_list() -> None:
    """``tables._int_column``: the int64 array ``frame_from_columns`` makes of a list of ints; the list itself
    where that is not what the frame would make (a value not an int, one beyond int64, no values)."""
    import numpy as np

    from hloscope.roofline.tables import _int_column

    big = 2**40 + 1
    values = [1, 8, 1, big, 8, 1, int("8")]
    got = _int_column(values)
    assert got.dtype == np.int64 and got.tolist() == values
    assert np.array_equal(got, np.array(values, dtype=np.int64))
    for other in ([1, 2.0, 3], [1, True], [1, 2**63], []):
        assert _int_column(other) is other


def test_exact_sum_in_c_is_the_rational_sum(compiled_twin) -> None:
    """``_cost_walk.exact_sum`` (the sums of ``group_sums``' masks, on the float64 array itself) against the
    rational sum rounded once: wide magnitudes, cancellation, signed zeros and the half-even ties across partials
    (``[1e-16, 1, 1e16]`` rounds up); None wherever a value is not finite or the sum overflows on the way, where
    the caller sums the list as before, and for a buffer of anything but native float64."""
    import numpy as np

    from hloscope._compiled import compiled

    exact_sum = compiled_twin(compiled("hloscope.cost._cost_walk", "exact_sum"), "hloscope.cost._cost_walk")
    rng = random.Random(20261129)
    cases = [[], [-0.0], [-0.0, -0.0], [1e-16, 1.0, 1e16], [1e16, 1.0, 1e-16], [1.0, 1e100, 1.0, -1e100],
             [2.0**53, 1.0, 2.0**-60], [5e-324] * 1000, [0.1] * 10, [1e308, 1e308, -1e308]]
    for _ in range(3000):
        n = rng.choice([1, 2, 3, 7, 40, 300])
        cases.append([rng.choice([rng.gauss(0, 1) * 2.0 ** rng.randint(-80, 80), float(rng.randint(-9, 9)),
                                  rng.uniform(0, 1) * 10.0 ** rng.randint(-9, 0)]) for _ in range(n)])
    for values in cases:
        got = exact_sum(np.array(values, dtype=np.float64))
        try:
            fsum = math.fsum(values)
        except OverflowError:
            assert got is None
            continue
        assert got == _exact(values) == fsum and math.copysign(1.0, got) == math.copysign(1.0, fsum)
    for special in ([math.inf], [1.0, -math.inf], [math.nan, 1.0], [1.7e308, 1.7e308]):
        assert exact_sum(np.array(special)) is None
    assert exact_sum(np.zeros(3, dtype=np.float32)) is None and exact_sum(np.ones(3, dtype=">f8")) is None
    assert group_sums(["m"] * 3, np.array([0.5, 0.25, 2.0], dtype=">f8"))["m"] == 2.75  # (the list's sum, then)


def test_nansum_of_a_short_list_is_numpys_sum() -> None:
    # ``nansum`` adds a list of fewer than 8 values itself: numpy's pairwise sum adds so few one by one, from the
    # left (1e16 + 1 + 1 is 1e16 that way, 1e16 + 2 the other). The oracle is numpy's own sum of the array.
    import numpy as np

    from hloscope.roofline.tables import nansum

    rng = random.Random(20261129)
    cases = [[1e16, 1.0, 1.0], [1.0, 1e16, 1.0, 1.0], [-0.0], [], [math.nan], [math.inf, -math.inf],
             [math.nan, 2.5, -0.0, 1e-300]]
    for _ in range(2000):
        cases.append([rng.choice([math.nan, -0.0, rng.uniform(-1, 1) * 10.0 ** rng.randint(-12, 16)])
                      for _ in range(rng.randint(0, 12))])
    for values in cases:
        with np.errstate(invalid="ignore"):  # (inf + -inf)
            want = float(np.where(np.isnan(values), 0.0, values).sum()) if values else 0.0
        got = nansum(values)
        assert got == want or (math.isnan(got) and math.isnan(want)), values
        assert math.copysign(1.0, got) == math.copysign(1.0, want) or math.isnan(want), values
    assert nansum([1e16, 1.0, 1.0]) == 1e16
