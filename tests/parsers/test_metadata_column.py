"""The ops table's bulk metadata reader: ``Decoder.metadata_column`` with the compiled reading
(``_attribute_scan.metadata_column``) against its specification ``Decoder.py_metadata_column`` on every
instruction of every fixture and corpus module, and both against the property read row by row
(``[inst.metadata for inst in insts]``, the full decode where it must) -- on fresh parses, since what a decoder
has read before changes which rows each path answers. Hand-made texts reach the rules the corpus rarely shows:
escapes, numbers that are not plain digits, stack frames, instructions decoded when parsed.

When the extension is missing the comparison with C skips, except where a C compiler is on the PATH.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from hloscope.hlo import Metadata
from hloscope.parsers import metadata_column, parse_hlo_text
from hloscope.parsers import _hlo_decode

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "hlo"


@pytest.fixture(scope="module")
def compiled(compiled_twin):
    return compiled_twin(_hlo_decode.c_metadata_column, "hloscope.parsers._attribute_scan")


def _instructions(text: str) -> list:
    module = parse_hlo_text(text)
    return [i for c in module.computations for i in c.instructions]


def _key(values: list) -> list:
    """Values for exact comparison: the unread mark by name, Metadata field by field with types (``repr``)."""
    return ["unread" if v is _hlo_decode._UNREAD else repr(tuple(v)) if isinstance(v, Metadata) else repr(v)
            for v in values]


def _c_reading(compiled, insts: list) -> list:
    decoder = insts[0]._decoder
    return compiled(insts, decoder.metadata_by_text, decoder.metadata, decoder.frames, Metadata,
                    decoder._metadata, _hlo_decode._UNREAD)


def _check(text: str, compiled) -> int:
    """C reading == Python reading, and the column == the properties; the number of rows read."""
    first, second, third = _instructions(text), _instructions(text), _instructions(text)
    if not first:
        return 0
    c_read = _c_reading(compiled, first)
    py_read = second[0]._decoder.py_metadata_column(second)
    assert _key(c_read) == _key(py_read)
    assert _key(metadata_column(first)) == _key([i.metadata for i in third])
    return len(first)


def test_every_fixture_module(compiled) -> None:
    rows = sum(_check(path.read_text(encoding="utf-8"), compiled) for path in sorted(FIXTURES.glob("*.hlo.txt")))
    assert rows > 2000, rows


def test_corpus_modules(compiled, corpus_dir: Path) -> None:
    rows = 0
    for path in sorted(corpus_dir.glob("hlo_*/*")):
        if path.suffix not in (".hlo", ".txt") or path.stat().st_size > 5_000_000:
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        try:
            parse_hlo_text(text)
        except Exception:  # noqa: BLE001 - not one module (XLA's test files hold several)
            continue
        rows += _check(text, compiled)
    assert rows > 100_000, rows


_FRAMES = """
FileNames
1 "/src/model.py"

FunctionNames
1 "f"

FileLocations
1 {file_name_id=1 function_name_id=1 line=42 end_line=42 column=1 end_column=2}

StackFrames
1 {file_location_id=1 parent_frame_id=0}
"""

#: (attribute text after the operands, what ``inst.metadata`` holds: op_type, op_name, source_file,
#: source_line, stack_frame_id), each worked from ``Decoder._metadata`` by hand.
_CASES = [
    ('metadata={op_name="a/b" source_file="x.py" source_line=3}', ("", "a/b", "x.py", 3, 0)),
    ('metadata={op_type="Add" op_name="a\\"q\\"b"}', ("Add", 'a"q"b', "", 0, 0)),  # an escape: the Python path
    ('metadata={op_name="a" source_line=07}', ("", "a", "", 7, 0)),
    ('metadata={op_name="a" source_line=x1}', ("", "a", "", 0, 0)),  # int("x1") fails: line and frame 0
    ('metadata={op_name="a" stack_frame_id=1}', ("", "a", "/src/model.py", 42, 1)),  # resolved
    ('metadata={op_name="a" stack_frame_id=9}', ("", "a", "", 0, 9)),  # no such frame
    ('metadata={op_name="a" source_file="y.py" stack_frame_id=1}', ("", "a", "y.py", 0, 1)),  # printed wins
    ('metadata={op_name=""}', ("", "", "", 0, 0)),
    ("metadata={}", ("", "", "", 0, 0)),
    ('metadata={op_name="1234567890123456789012" source_line=1234567890123456789012}',
     ("", "1234567890123456789012", "", 1234567890123456789012, 0)),  # past 18 digits: the Python path
    ('sharding={replicated}, metadata={op_name="s"}', ("", "s", "", 0, 0)),
]


@pytest.mark.parametrize("attributes,expected", _CASES, ids=[c[0][:40] for c in _CASES])
def test_hand_made_metadata(compiled, attributes: str, expected: tuple) -> None:
    text = (f"HloModule m\n{_FRAMES}\nENTRY %e (p: f32[8]) -> f32[8] {{\n"
            f"  %p = f32[8]{{0}} parameter(0)\n"
            f"  %n = f32[8]{{0}} negate(%p), {attributes}\n"
            f"  ROOT %m = f32[8]{{0}} negate(%n), {attributes}\n}}\n")
    _check(text, compiled)
    insts = _instructions(text)
    column = metadata_column(insts)
    assert column[0] is None  # the parameter has no attributes
    assert tuple(column[1])[:5] == expected
    assert column[2] is column[1]  # one Metadata per distinct text


def test_no_metadata_and_unknown_texts(compiled) -> None:
    """A text without metadata reads None; one whose value only a full decode can read (a string before the key)
    is left to the property, which decodes it."""
    text = ("HloModule m\n\nENTRY %e (p: f32[8]) -> f32[8] {\n  %p = f32[8]{0} parameter(0)\n"
            "  %n = f32[8]{0} negate(%p), sharding={replicated}\n"
            '  ROOT %m = f32[8]{0} custom-call(%n), custom_call_target="a, metadata={x}", '
            'metadata={op_name="real"}\n}\n')
    _check(text, compiled)
    insts = _instructions(text)
    read = _c_reading(compiled, _instructions(text))
    assert read[1] is None and read[2] is _hlo_decode._UNREAD
    column = metadata_column(insts)
    assert column[1] is None and column[2].op_name == "real"


def test_mixed_decoders_read_one_by_one() -> None:
    """Instructions of two parses (two decoders, each with its own stack frames) are read by the property."""
    a = _instructions(f"HloModule a\n{_FRAMES}\nENTRY %e (p: f32[8]) -> f32[8] {{\n"
                      '  ROOT %p = f32[8]{0} parameter(0), metadata={op_name="a" stack_frame_id=1}\n}\n')
    b = _instructions("HloModule b\n\nENTRY %e (p: f32[8]) -> f32[8] {\n"
                      '  ROOT %p = f32[8]{0} parameter(0), metadata={op_name="a" stack_frame_id=1}\n}\n')
    column = metadata_column(a + b)
    assert column[0].source_file == "/src/model.py" and column[1].source_file == ""


def test_instructions_of_another_class_are_read_by_their_attributes(compiled) -> None:
    """The C reader reads ``attribute_text`` straight from the slot of the first instruction's class; a row of
    another class (here a subclass whose ``attribute_text`` is a property) is read through its attribute."""
    from hloscope.hlo import HloInstruction

    text = ('HloModule m\n\nENTRY %e (p: f32[8]) -> f32[8] {\n'
            '  %p = f32[8]{0} parameter(0), metadata={op_name="first"}\n'
            '  ROOT %n = f32[8]{0} negate(%p), metadata={op_name="second"}\n}\n')
    insts = _instructions(text)

    class Other(HloInstruction):
        __slots__ = ()

        @property
        def attribute_text(self):  # noqa: ANN202 - shadows the slot
            return ', metadata={op_name="third"}'

    other = object.__new__(Other)
    for slot in HloInstruction.__slots__:  # (every slot set, attribute_text too: the property must win)
        if hasattr(insts[1], slot):
            HloInstruction.__dict__[slot].__set__(other, getattr(insts[1], slot))
    read = _c_reading(compiled, [insts[0], other, insts[1]])
    assert [md.op_name for md in read] == ["first", "third", "second"]


def test_given_the_decoder_every_row_is_checked_and_unread_rows_listed(compiled) -> None:
    """With the decoder as eighth argument the reader answers None when a row is another parse's (the decoder's
    memos would read it wrongly: each parse has its own stack frames), else the column and the indices of the rows
    it left unread, in order -- here rows decoded already, whose metadata only the property tells."""
    a = _instructions(f"HloModule a\n{_FRAMES}\nENTRY %e (p: f32[8]) -> f32[8] {{\n"
                      '  %p = f32[8]{0} parameter(0), metadata={op_name="a" stack_frame_id=1}\n'
                      '  %n = f32[8]{0} negate(%p), metadata={op_name="n"}\n'
                      '  ROOT %m = f32[8]{0} negate(%n), metadata={op_name="m"}\n}\n')
    b = _instructions("HloModule b\n\nENTRY %e (p: f32[8]) -> f32[8] {\n"
                      '  ROOT %p = f32[8]{0} parameter(0), metadata={op_name="b"}\n}\n')
    decoder = a[0]._decoder
    args = (decoder.metadata_by_text, decoder.metadata, decoder.frames, Metadata, decoder._metadata,
            _hlo_decode._UNREAD, decoder)
    assert compiled(a + b, *args) is None and compiled(b, *args) is None
    assert compiled(a, *args)[1] == []
    a[2].attributes, a[1].attributes  # (decoded now: their kept texts are the placeholder)
    column, unread = compiled(a, *args)
    assert unread == [1, 2] and column[1] is column[2] is _hlo_decode._UNREAD
    assert column[0].source_file == "/src/model.py"
    assert [md.op_name for md in metadata_column(a)] == ["a", "n", "m"]
