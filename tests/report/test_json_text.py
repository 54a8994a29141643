"""``result._json_text.dumps_indent1`` prints what ``json.dumps(doc, indent=1, allow_nan=False)`` prints: on the
report of every fixture, on random documents, and on the errors."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import pytest

from hloscope.result._json_text import dumps_indent1

ROOT = Path(__file__).resolve().parents[2]


def _reference(doc):
    return json.dumps(doc, indent=1, allow_nan=False)


@pytest.mark.parametrize("path", sorted((ROOT / "fixtures" / "hlo").glob("*.hlo.txt"))[:6]
                         + [ROOT / "fixtures" / "profile" / "cpu_train_step"], ids=lambda p: p.name)
def test_report_documents_print_as_json_dumps(path):
    import hloscope

    doc = hloscope.analyze(path, chip="h100").to_dict()
    assert dumps_indent1(doc) == _reference(doc)


def _random_value(rng: random.Random, depth: int):
    kind = rng.randrange(9 if depth < 4 else 6)
    if kind == 0:
        return rng.choice(["", "a", 'q"uote', "back\\slash", "new\nline", "ünï", "tab\t", "🙂", "x, y", "{]"])
    if kind == 1:
        return rng.randint(-10**20, 10**20)
    if kind == 2:
        return rng.choice([0.0, -0.0, 1e-300, 1.5, -2.25e17, 1e16, 123456.789, 5e-324])
    if kind == 3:
        return rng.choice([True, False])
    if kind == 4:
        return None
    if kind == 5:
        return rng.random()
    if kind == 6:
        return [_random_value(rng, depth + 1) for _ in range(rng.randrange(4))]
    if kind == 7:
        return tuple(_random_value(rng, depth + 1) for _ in range(rng.randrange(3)))
    keys = [rng.choice(["k", "key", 'q"', "é", "", "a b"]) + str(i) for i in range(rng.randrange(5))]
    return {k: _random_value(rng, depth + 1) for k in keys}


def test_random_documents_print_as_json_dumps():
    rng = random.Random(16)
    for _ in range(3000):
        doc = _random_value(rng, 0)
        assert dumps_indent1(doc) == _reference(doc), doc


def test_keys_that_are_not_strings_are_converted_as_json_does():
    doc = {"rows": [{1: "a", 2.5: [1, 2], None: {}, True: []}], "x": 1}
    assert dumps_indent1(doc) == _reference(doc)


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_nan_and_infinity_are_refused(bad):
    for doc in (bad, [1, bad], {"a": {"b": bad}}, {"a": [{"c": [bad]}]}):
        with pytest.raises(ValueError):
            _reference(doc)
        with pytest.raises(ValueError):
            dumps_indent1(doc)


def test_values_json_cannot_hold_are_a_type_error():
    with pytest.raises(TypeError):
        dumps_indent1({"a": [object()]})
