"""The one-attribute reader and the metadata fields reader: the compiled ones (``_attribute_scan.c``) against
their specifications, ``py_attribute_value`` and ``py_metadata_fields``, on every attribute text of the fixtures
and the public corpus, on hand-made cases worked from the specifications, and on thousands of real texts mutated
at random, in text of each of ``str``'s three storage widths; and ``HloInstruction.metadata`` / ``attribute``
(which read through them) against a full decode.

When the extension is missing the comparisons skip, except where a C compiler is on the PATH (a broken install).
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from hloscope.parsers import parse_hlo_text
from hloscope.parsers._attribute_value import (
    KNOWN, KNOWN_IF_READ, UNKNOWN, c_attribute_value, c_metadata_fields, py_attribute_value, py_metadata_fields,
)
from hloscope.parsers._block_rows import BLOCK_LINE

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "hlo"
KEYS = ("metadata", "kind", "backend_config", "dimensions", "to_apply", "sharding", "custom_call_target",
        "replica_groups", "calls", "frontend_attributes")


@pytest.fixture(scope="module")
def compiled(compiled_twin):
    return compiled_twin(c_attribute_value, "hloscope.parsers._attribute_scan")


def _attribute_texts(text: str) -> list[str]:
    """The attribute texts of the one-line instructions of ``text``, as the parser keeps them."""
    return sorted({row[6].strip() for row in BLOCK_LINE.findall(text) if row[6]})


def _fixture_texts() -> list[str]:
    return sorted({t for path in sorted(FIXTURES.glob("*.hlo.txt")) for t in _attribute_texts(path.read_text())})


@pytest.mark.parametrize("key", KEYS)
def test_every_fixture_attribute_text(compiled, key: str) -> None:
    texts = _fixture_texts()
    assert len(texts) > 1000
    for text in texts:
        assert compiled(text, key) == py_attribute_value(text, key), (key, text)


def test_corpus_attribute_texts(compiled, corpus_dir: Path) -> None:
    seen = set()
    for path in sorted(corpus_dir.glob("hlo_*/*")):
        if path.suffix not in (".hlo", ".txt"):
            continue
        for text in _attribute_texts(path.read_text(encoding="utf-8", errors="replace")):
            if text not in seen:
                seen.add(text)
                for key in ("metadata", "kind", "backend_config"):
                    assert compiled(text, key) == py_attribute_value(text, key), (path.name, key, text)
    assert len(seen) > 20_000, len(seen)


# Expected answers worked from the specification (py_attribute_value's docstring), not read off either reader.
CASES = [
    (", kind=kLoop, calls=%f", "kind", (KNOWN, "kLoop")),
    (", kind=kLoop, calls=%f", "metadata", (KNOWN, "")),  # absent
    (', a="kind=x"', "kind", (UNKNOWN, "")),  # the key only inside a string: a full decode tells
    (', a="x", metadata={op_name="y"}', "metadata", (UNKNOWN, "")),  # a string before the key
    (", metadata={op_name=\"y\"}", "metadata", (KNOWN, '{op_name="y"}')),
    (", metadata={op_name=\"y\" source_line=3}, backend_config={}", "metadata",
     (KNOWN, '{op_name="y" source_line=3}')),
    (", kind=a, kind=b", "kind", (UNKNOWN, "")),  # twice
    (", kind=a,", "kind", (UNKNOWN, "")),  # ends in a separator
    (", kind=a ", "kind", (UNKNOWN, "")),
    (", kind=a\n", "kind", (UNKNOWN, "")),
    (", kind=a // x", "kind", (UNKNOWN, "")),
    (", kind=a /* x */", "kind", (UNKNOWN, "")),
    ("kind=a, x=1", "x", (UNKNOWN, "")),  # does not start with ", name="
    (", d={0, kind=a", "kind", (UNKNOWN, "")),  # brackets unbalanced before the key
    (", kind=b c", "kind", (KNOWN_IF_READ, "b c")),  # not one token
    (", kind=mesh[a]", "kind", (KNOWN_IF_READ, "mesh[a]")),
    (', kind="s"', "kind", (KNOWN_IF_READ, '"s"')),
    (", metadata={op_name=\"a, b=c\"}", "metadata", (KNOWN_IF_READ, '{op_name="a')),  # split inside the string
    (", metadata={op_name=\"a\"", "metadata", (KNOWN_IF_READ, '{op_name="a"')),  # not closed
    (", metadata={op_name=\"a}", "metadata", (KNOWN_IF_READ, '{op_name="a}')),  # string left open
    (", metadata={op_name=\"a\\\"}\"}", "metadata", (KNOWN, '{op_name="a\\"}"}')),  # an escaped quote
    (", metadata={op_name=\"a\\\\\"}", "metadata", (KNOWN, '{op_name="a\\\\"}')),  # an escaped backslash
    (", metadata={op_name=(\"}", "metadata", (KNOWN_IF_READ, '{op_name=("}')),
    (", metadata={a=(}", "metadata", (KNOWN_IF_READ, "{a=(}")),  # unbalanced outside the strings
    (", metadata={a=\"(\"}", "metadata", (KNOWN, '{a="("}')),  # balanced once the strings are out
    (", x=\u03bb1, kind=k", "kind", (KNOWN, "k")),  # a non-ASCII letter in a value
    (", \u03bbx=1, kind=k", "kind", (UNKNOWN, "")),  # a key must start with [A-Za-z_]
    (", k\u03bb=1, kind=v, x\u03bb=2", "kind", (KNOWN, "v")),  # ... then \w: Unicode letters end the value
    (", kind=\u2003v\u2003", "kind", (KNOWN, "v")),  # Unicode blanks stripped
    (", kind=\t", "kind", (UNKNOWN, "")),
    (", kind=", "kind", (UNKNOWN, "")),  # empty
    ("", "kind", (KNOWN, "")),
    (", kind=k\U0001f600", "kind", (KNOWN, "k\U0001f600")),
]


@pytest.mark.parametrize("text, key, expected", CASES)
def test_hand_made_cases(text: str, key: str, expected: tuple[int, str]) -> None:
    assert py_attribute_value(text, key) == expected
    if c_attribute_value is not None:
        assert c_attribute_value(text, key) == expected


_SPECIALS = [" ", ",", ", ", "=", '"', "\\", "{", "}", "(", ")", "[", "]", "\n", "\t", "/", "//", "/*", ", x=",
             ", metadata=", ", kind=", "mesh[", "\u00e9", "\u03bb", "\u2003", "\U0001f600", "_", "-", "."]


def _mutated(rng: random.Random, texts: list[str], specials: list[str]) -> str:
    """One of ``texts`` with one to three characters removed, or ``specials`` inserted, at random places."""
    text = rng.choice(texts)
    for _ in range(rng.randint(1, 3)):
        at = rng.randrange(len(text) + 1)
        if rng.random() < 0.3 and text:
            text = text[:at] + text[at + 1:]
        else:
            text = text[:at] + rng.choice(specials) + text[at:]
    return text


def test_mutated_real_texts(compiled) -> None:
    """Real attribute texts with a few characters inserted or removed: both readers agree for every key."""
    texts = _fixture_texts()[:3000]
    rng = random.Random(20261125)
    statuses = {UNKNOWN: 0, KNOWN: 0, KNOWN_IF_READ: 0}
    for case in range(6000):
        text = _mutated(rng, texts, _SPECIALS)
        for key in ("metadata", "kind", "x", "dimensions"):
            expected = py_attribute_value(text, key)
            assert compiled(text, key) == expected, (key, text)
            statuses[expected[0]] += 1
    assert min(statuses.values()) > 200, statuses  # every outcome is exercised


def test_bad_arguments(compiled) -> None:
    with pytest.raises(TypeError):
        compiled(", a=1")
    with pytest.raises(TypeError):
        compiled(b", a=1", "a")


def test_metadata_and_attributes_read_alone_equal_the_full_decode() -> None:
    """``HloInstruction.metadata`` and ``attribute`` (read from one key's text where the reader answers) against
    the full decode of the same instruction, on a fixture module and on texts the reader leaves to the decode."""
    text = (FIXTURES / "cpu_transformer_scan_grad.hlo.txt").read_text()
    texts = [text,
             'HloModule m\n\nENTRY %e (p: f32[2]) -> f32[2] {\n  %p = f32[2]{0} parameter(0)\n'
             '  ROOT %n = f32[2]{0} negate(%p), metadata={op_name="a, b=c" source_file="f.py" source_line=7}\n}\n']
    for source in texts:
        alone = parse_hlo_text(source)
        decoded = parse_hlo_text(source)
        for comp_a, comp_d in zip(alone.computations, decoded.computations):
            for a, d in zip(comp_a.instructions, comp_d.instructions):
                full = d.attributes  # (decodes d's whole text first)
                assert a.metadata == d.metadata, a.name
                assert a.attribute("kind") == full.get("kind"), a.name
    last = parse_hlo_text(texts[1]).entry.root
    assert last.metadata.op_name == "a, b=c" and last.metadata.source == "f.py:7"


@pytest.fixture(scope="module")
def compiled_fields(compiled_twin):
    return compiled_twin(c_metadata_fields, "hloscope.parsers._attribute_scan")


def _metadata_values(texts: list[str]) -> list[str]:
    return sorted({v for v in (py_attribute_value(t, "metadata")[1] for t in texts) if v})


def test_every_fixture_and_corpus_metadata_value(compiled_fields, corpus_dir: Path) -> None:
    texts = _fixture_texts()
    for path in sorted(corpus_dir.glob("hlo_*/*")):
        if path.suffix in (".hlo", ".txt"):
            texts += _attribute_texts(path.read_text(encoding="utf-8", errors="replace"))
    values = _metadata_values(texts)
    assert len(values) > 10_000, len(values)
    for value in values + texts[:5000]:  # (and whole attribute texts: any text is an input)
        assert compiled_fields(value) == py_metadata_fields(value), value


# (value, expected: op_type, op_name, source_file, source_line, stack_frame_id), worked from BRACED_FIELD's regex.
FIELD_CASES = [
    ('{op_type="add" op_name="jit(f)/add" source_file="/a.py" source_line=12}',
     ('"add"', '"jit(f)/add"', '"/a.py"', "12", "")),
    ("{stack_frame_id=7}", ("", "", "", "", "7")),
    ('{op_name="a" op_name="b"}', ("", '"b"', "", "", "")),  # repeated: the last one
    ('{op_name="a\\"b" source_line=3}', ("", '"a\\"b"', "", "3", "")),  # an escaped quote stays in the string
    ('{op_name="a b, c}" source_line=3}', ("", '"a b, c}"', "", "3", "")),  # blanks, ',' and '}' inside a string
    ('{op_name="open source_line=3}', ("", '"open', "", "3", "")),  # a string left open: a bare run, then on
    ('{op_name="a\\\nb" source_line=4}', ("", '"a\\', "", "4", "")),  # backslash, line break: no string
    ("{1op_name=x}", ("", "x", "", "", "")),  # a key starts with a letter or '_': found from 'o'
    ("{xop_name=y op_name=z}", ("", "z", "", "", "")),
    ("{op_name= source_line=5}", ("", "", "", "5", "")),  # no value: no field
    ("{op_name=\u00e9t\u00e9 source_line=6}", ("", "\u00e9t\u00e9", "", "6", "")),
    ("{op_name\u00e9=1 op_name=2}", ("", "2", "", "", "")),  # a Unicode letter continues a key
    ("{source_line=\u20038}", ("", "", "", "", "")),  # a Unicode blank ends a value
    ("", ("", "", "", "", "")),
]


@pytest.mark.parametrize("value, expected", FIELD_CASES)
def test_metadata_field_cases(value: str, expected: tuple) -> None:
    assert py_metadata_fields(value) == expected
    if c_metadata_fields is not None:
        assert c_metadata_fields(value) == expected


def test_mutated_metadata_values(compiled_fields) -> None:
    values = _metadata_values(_fixture_texts())[:2000]
    assert len(values) > 500
    rng = random.Random(20261126)
    specials = _SPECIALS + ["op_name=", "source_line=", "stack_frame_id=", '"\\', "\\\n", "op_type="]
    found = 0
    for case in range(6000):
        value = _mutated(rng, values, specials)
        expected = py_metadata_fields(value)
        assert compiled_fields(value) == expected, value
        found += sum(map(bool, expected))
    assert found > 6000
