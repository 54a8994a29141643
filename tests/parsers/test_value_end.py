"""The attribute-value scanner's one-step read of a bracketed group -- in C (``_attribute_scan.group_end``) and by
its specification (``_hlo_lexer.py_group_end``: ``_hlo_re.NESTED_BRACKETS``) -- ends every value where the
bracket-by-bracket scan ends it, or raises the same error."""

from __future__ import annotations

import random

import pytest

from hloscope._compiled import compiled
from hloscope.parsers import _hlo_lexer, _hlo_re
from hloscope.parsers._errors import HloParseError
from hloscope.parsers._hlo_lexer import ParserBase

#: The one-step reads: the bracket-by-bracket scan alone (never one step), the regex, C where it was built.
READERS = {"never": lambda src, at: -1, "regex": _hlo_lexer.py_group_end,
           "c": compiled("hloscope.parsers._attribute_scan", "group_end")}
#: Pieces an attribute value is built from: every character the scanner stops at, comments (closed and not),
#: strings (closed and not), blanks before and after a brace, line breaks.
_PIECES = ["{", "}", "[", "]", "(", ")", ",", " ", " {", "\n", "/*c*/", "/* } */", "/*", "//x\n", "/", "a", "0",
           '"s"', '"}"', '"', "may-alias", "f32[4]{0}", "{0}: (0, {}, may-alias)"]


def _end(value: str, monkeypatch: pytest.MonkeyPatch, blank_ends: bool = True, reader: str = "never") -> object:
    monkeypatch.setattr(_hlo_lexer, "_group_end", READERS[reader])
    try:
        return ParserBase(value + ", next=1\n", "<test>")._value_end(0, "", blank_ends)
    except HloParseError as e:
        return ("error", str(e))
    finally:
        monkeypatch.undo()


@pytest.mark.parametrize("value", [
    "{ {0}: (0, {}, may-alias), {1}: (1, {}, may-alias) }",
    "{(s32[], f32[4096]{0}, /*index=5*/f32[4]{0})->(f32[4]{0})}",
    "{a // comment }\n}", "{a / b}", "{/*}*/}", "{(})", '{"}"}', "{a /* open", "{{{{{{{{{{x}}}}}}}}}}",
    "[1,2]{1,0} x", "{} {a}", "{",
])
@pytest.mark.parametrize("reader", ["regex", "c"])
def test_known_values(value: str, reader: str, monkeypatch: pytest.MonkeyPatch) -> None:
    if READERS[reader] is None:
        pytest.skip("the C extension was not built")
    assert _end(value, monkeypatch, reader=reader) == _end(value, monkeypatch)


@pytest.mark.parametrize("reader", ["regex", "c"])
def test_random_values(reader: str, monkeypatch: pytest.MonkeyPatch) -> None:
    if READERS[reader] is None:
        pytest.skip("the C extension was not built")
    rng = random.Random(16)
    fast_path = 0
    for _ in range(3000):
        value = "".join(rng.choice(_PIECES) for _ in range(rng.randint(1, 14)))
        if rng.random() < 0.7:
            value = "{" + value + "}"
        fast_path += READERS[reader](value, 0) >= 0
        for blank_ends in (True, False):
            assert _end(value, monkeypatch, blank_ends, reader) == _end(value, monkeypatch, blank_ends), repr(value)
    assert fast_path > 300  # (the one-step read was taken often enough to be tested)


def test_c_reads_what_the_regex_reads_and_deeper() -> None:
    """``group_end`` ends a group where ``NESTED_BRACKETS`` does, wherever the regex matches; past its 8 levels
    too (where the regex hands the group to the loop), and never where a string or an open comment is inside."""
    group_end = READERS["c"]
    if group_end is None:
        pytest.skip("the C extension was not built")
    rng = random.Random(44)
    matched = 0
    for _ in range(5000):
        value = "{" + "".join(rng.choice(_PIECES) for _ in range(rng.randint(1, 14)))
        at = rng.randrange(len(value))
        m = _hlo_re.NESTED_BRACKETS.match(value, at)
        if m is not None:
            matched += 1
            assert group_end(value, at) == m.end(), (value, at)
        elif '"' not in value[at:]:
            assert group_end(value, at) == -1 or value[at] in "{[(", (value, at)
    assert matched > 300
    deep = "(" * 20 + "x /* ) */ // )\n" + ")" * 20 + ", y"
    assert _hlo_re.NESTED_BRACKETS.match(deep) is None and group_end(deep, 0) == len(deep) - 3
    assert group_end('{"}"}', 0) == -1 and group_end("{a /* open", 0) == -1 and group_end("x{}", 0) == -1
