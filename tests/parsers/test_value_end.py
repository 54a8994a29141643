"""The attribute-value scanner's one-step read of a bracketed group (``_hlo_re.NESTED_BRACKETS``) ends every
value where the bracket-by-bracket scan ends it, or raises the same error."""

from __future__ import annotations

import random
import re

import pytest

from hloscope.parsers import _hlo_re
from hloscope.parsers._errors import HloParseError
from hloscope.parsers._hlo_lexer import ParserBase

_NEVER = re.compile(r"(?!)")
#: Pieces an attribute value is built from: every character the scanner stops at, comments (closed and not),
#: strings (closed and not), blanks before and after a brace, line breaks.
_PIECES = ["{", "}", "[", "]", "(", ")", ",", " ", " {", "\n", "/*c*/", "/* } */", "/*", "//x\n", "/", "a", "0",
           '"s"', '"}"', '"', "may-alias", "f32[4]{0}", "{0}: (0, {}, may-alias)"]


def _end(value: str, monkeypatch: pytest.MonkeyPatch | None, blank_ends: bool = True) -> object:
    if monkeypatch is not None:
        monkeypatch.setattr(_hlo_re, "NESTED_BRACKETS", _NEVER)
    try:
        return ParserBase(value + ", next=1\n", "<test>")._value_end(0, "", blank_ends)
    except HloParseError as e:
        return ("error", str(e))
    finally:
        if monkeypatch is not None:
            monkeypatch.undo()


@pytest.mark.parametrize("value", [
    "{ {0}: (0, {}, may-alias), {1}: (1, {}, may-alias) }",
    "{(s32[], f32[4096]{0}, /*index=5*/f32[4]{0})->(f32[4]{0})}",
    "{a // comment }\n}", "{a / b}", "{/*}*/}", "{(})", '{"}"}', "{a /* open", "{{{{{{{{{{x}}}}}}}}}}",
    "[1,2]{1,0} x", "{} {a}", "{",
])
def test_known_values(value: str, monkeypatch: pytest.MonkeyPatch) -> None:
    assert _end(value, None) == _end(value, monkeypatch)


def test_random_values(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(16)
    fast_path = 0
    for _ in range(3000):
        value = "".join(rng.choice(_PIECES) for _ in range(rng.randint(1, 14)))
        if rng.random() < 0.7:
            value = "{" + value + "}"
        fast_path += bool(_hlo_re.NESTED_BRACKETS.match(value))
        for blank_ends in (True, False):
            assert _end(value, None, blank_ends) == _end(value, monkeypatch, blank_ends), repr(value)
    assert fast_path > 300  # (the one-step read was taken often enough to be tested)
