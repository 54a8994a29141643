"""``identity_codes`` of ``hloscope/cost/_cost_walk.c`` (the ops table's codes for columns of few distinct objects)
equals its Python specification ``roofline.tables.py_identity_codes``, and both number objects by identity, first
seen first."""

from __future__ import annotations

import random

import numpy as np
import pytest

from hloscope._compiled import compiled
from hloscope.roofline.tables import py_identity_codes

c_identity_codes = compiled("hloscope.cost._cost_walk", "identity_codes")
IMPLEMENTATIONS = [py_identity_codes] + ([c_identity_codes] if c_identity_codes is not None else [])


@pytest.mark.parametrize("identity_codes", IMPLEMENTATIONS, ids=lambda f: f.__module__)
def test_numbers_by_identity_first_seen_first(identity_codes) -> None:
    a, b, c = "abc", object(), (1, 2)
    equal_but_other = "".join(["ab", "c"])  # (== a, not a)
    assert equal_but_other == a and equal_but_other is not a
    codes, distinct = identity_codes([b, a, b, None, c, a, equal_but_other, None])
    assert np.frombuffer(codes, np.intp).tolist() == [0, 1, 0, 2, 3, 1, 4, 2]
    assert distinct[0] is b and distinct[1] is a and distinct[2] is None and distinct[3] is c
    assert distinct[4] is equal_but_other
    codes, distinct = identity_codes([])
    assert len(codes) == 0 and distinct == []


def test_c_equals_the_specification_on_many_objects() -> None:
    """Past the C table's first growth (256 slots): thousands of distinct objects, repeated in random order."""
    if c_identity_codes is None:
        pytest.skip("the C extension was not built")
    rng = random.Random(20261128)
    pool = [object() for _ in range(5000)] + ["s%d" % k for k in range(300)]
    for n in (1, 7, 300, 20000):
        values = [rng.choice(pool) for _ in range(n)]
        want_codes, want = py_identity_codes(values)
        got_codes, got = c_identity_codes(values)
        assert bytes(got_codes) == bytes(want_codes)
        assert len(got) == len(want) and all(x is y for x, y in zip(got, want))
        assert all(got[k] is v for k, v in zip(np.frombuffer(got_codes, np.intp).tolist(), values))


def test_a_list_only() -> None:
    if c_identity_codes is None:
        pytest.skip("the C extension was not built")
    with pytest.raises(TypeError):
        c_identity_codes(("a", "b"))
