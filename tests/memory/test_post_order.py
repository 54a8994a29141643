"""XLA's post order of a computation (``liveness.post_order``): its C twin (``_post_order.c``) equals the Python
specification on every computation of the fixture and corpus modules and on random graphs, and the order is the
one worked by hand for a small computation."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from hloscope.memory import liveness
from hloscope.parsers import parse_hlo_text

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "hlo"


@pytest.fixture(scope="module")
def c_post_order(compiled_twin):
    return compiled_twin(liveness.c_post_order, "hloscope.memory._post_order")


def test_a_small_computation_by_hand() -> None:
    """Roots (instructions no other uses) in printed order, each walked to its operands, first operand first: the
    unused ``p2`` is the first root met, then ``r``'s walk reaches ``b``, whose first operand ``a`` reaches
    ``p1`` before ``p0``; an operand that is no instruction (``outside``) is passed over."""
    names = ["p0", "p1", "p2", "a", "b", "r"]
    operands = [(), (), (), ("p1", "p0"), ("a", "p1"), ("b", "a", "outside")]
    assert liveness.py_post_order(names, operands) == ["p2", "p1", "p0", "a", "b", "r"]


def test_every_computation(c_post_order, corpus_dir) -> None:
    paths = sorted(FIXTURES.glob("*.hlo.txt"))
    paths += sorted(p for d in ("hlo_cpu", "hlo_gpu", "hlo_tpu") for p in (corpus_dir / d).glob("*")
                    if p.suffix in (".hlo", ".txt") and p.stat().st_size < 5_000_000)
    checked = 0
    for path in paths:
        try:
            module = parse_hlo_text(path.read_text(encoding="utf-8", errors="replace"))
        except Exception:  # noqa: BLE001 - texts that are not one module (XLA test files)
            continue
        for comp in module.computations:
            names = comp.names
            operands = comp.operand_lists(range(len(names)))
            assert c_post_order(names, operands) == liveness.py_post_order(names, operands), (path.name, comp.name)
            checked += 1
    assert checked > 2000, checked


def test_random_graphs(c_post_order) -> None:
    """Operands anywhere (cycles included, which the parser rejects), names printed twice, names that are no
    instruction, lists and tuples."""
    rng = random.Random(16)
    for _ in range(3000):
        n = rng.randint(0, 12)
        names = [f"i{rng.randint(0, n + 2)}" if rng.random() < 0.15 else f"i{k}" for k in range(n)]
        pool = names + ["x", "y"]
        operands = [tuple(rng.choice(pool) for _ in range(rng.randint(0, 4))) if pool else () for _ in range(n)]
        if rng.random() < 0.5:
            names, operands = tuple(names), [list(o) for o in operands]
        assert c_post_order(names, operands) == liveness.py_post_order(names, operands), (names, operands)


def test_bad_arguments(c_post_order) -> None:
    with pytest.raises(ValueError, match="differ in length"):
        c_post_order(["a"], [])
    with pytest.raises(TypeError):
        c_post_order(["a"], [5])
