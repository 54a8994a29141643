"""``parse_shape``'s reads of a flat tuple of arrays (``_hlo_re._printed_items``: split at ", ";
``_hlo_re._FLAT_TUPLE``: one pattern) against the element-by-element reader they stand in for
(``_hlo_re._shape_at``): the same ``Shape`` (or the same ValueError) for every tuple shape text of the fixtures and
the public corpus, for mutations of them, and for the edge cases by hand."""

from __future__ import annotations

import random
import re
from pathlib import Path

from hloscope.parsers import _hlo_re
from hloscope.parsers._hlo_re import parse_shape

REPO = Path(__file__).resolve().parents[2]
CORPUS = REPO.parent / "shared" / "corpus"  # (read when present: the fixtures alone otherwise)

#: Tuple shape texts as XLA prints them in instruction and computation signatures (arrays, layouts, operand
#: index comments), enough to collect them from a file; which of them the fast path takes is the test's question.
_TUPLE_TEXT = re.compile(r"\((?:[a-z][a-z0-9]*\[[^\]]*\](?:\{[^}]*\})?(?:, |, /\*index=\d+\*/)?)+\)")


def _element_by_element(text: str):
    """What ``parse_shape`` returned before the fast path: ``_shape_at`` over the whole text."""
    text = text.strip()
    if "/" in text:
        text = _hlo_re._COMMENT.sub("", text)
    shape, pos = _hlo_re._shape_at(text, 0)
    if text[pos:].strip():
        raise ValueError(f"unexpected {text[pos:pos + 20]!r} after shape")
    return shape


def _outcome(read, text: str):
    try:
        return "shape", read(text)
    except ValueError:
        return "error", None


def _tuple_texts(corpus: Path | None) -> list[str]:
    files = sorted((REPO / "fixtures").rglob("*.txt")) + sorted((REPO / "fixtures").rglob("*.hlo"))
    if corpus is not None:
        files += sorted(corpus.glob("hlo_*/*.hlo"))
    found: set[str] = set()
    for path in files:
        found.update(m.group() for m in _TUPLE_TEXT.finditer(path.read_text(errors="replace")))
    return sorted(found)


HAND = [
    "()", "( )", "(f32[2],)", "(f32[2] , s32[])", "(\tf32[2],\ns32[]\n)", "(f32[2]{1,0:T(8,128)}, s32[])",
    "(b(f32[2]))", "(token[], f32[])", "(f32[2] {0})", "(f32 [2], s32\r[])", "(f32[2]{0)}", "(f32[2)",
    "(f32[2], (s32[], u8[4]))", "(f32[2]) x", "(f32[2], /*index=1*/s32[])", "(F32[2])", "(f32[2]{})",
    "(f32[2]{1,0}S(1))", "(f32[2]{0:S(1)}, pred[])",
    # (split at ", " by ``_printed_items``: a ", " inside brackets, doubled or missing items, repeated items)
    "(f32[2, 3])", "(f32[2]{1, 0})", "(f32[2]{1,0:T(8, 128)}, s32[])", "(f32[2],  s32[])", "(f32[2], s32[],)",
    "(f32[2], , s32[])", "(f32[2], f32[2], s32[], f32[2])", "(f32[2]{1,0}, f32[2]{0,1}, f32[2]{1,0})",
    "(f32[3,2]{0,1}, f32[3,2]{1,0}, f32[3,2]{0,0})", "(f32[2]x, s32[])", "(f32[2]", "f32[2], s32[])",
]


def test_hand_cases_read_alike() -> None:
    for text in HAND:
        assert _outcome(parse_shape, text) == _outcome(_element_by_element, text), text
    # (the cases the fast paths are for are taken by them: the test would pass vacuously otherwise)
    assert _hlo_re._FLAT_TUPLE.fullmatch("(f32[2]{1,0:T(8,128)}, s32[])")
    assert not _hlo_re._FLAT_TUPLE.fullmatch("(f32[2],)")
    assert len(_hlo_re._printed_items("(f32[2,3]{1,0:T(8,128)}, s32[], f32[2,3]{1,0:T(8,128)})")) == 3
    assert _hlo_re._printed_items("(f32[2, 3])") is None and _hlo_re._printed_items("(f32[2] , s32[])") is None


def test_fixture_and_corpus_tuples_read_alike() -> None:
    texts = _tuple_texts(CORPUS if CORPUS.is_dir() else None)
    assert texts, "no tuple shapes found in the fixtures"
    rng = random.Random(16)
    taken = printed = 0
    for text in texts:
        variants = [text]
        for _ in range(2):
            i = rng.randrange(len(text))
            c = rng.choice(" ,\t\n(){}[]b0a:/*")
            variants += [text[:i] + c + text[i + 1:], text[:i] + c + text[i:]]
        for variant in variants:
            assert _outcome(parse_shape, variant) == _outcome(_element_by_element, variant), variant[:120]
        taken += bool(_hlo_re._FLAT_TUPLE.fullmatch(_hlo_re._COMMENT.sub("", text)))
        printed += _hlo_re._printed_items(_hlo_re._COMMENT.sub("", text)) is not None
    assert taken > len(texts) // 2  # (most real tuple shapes are flat tuples of arrays)
    assert printed > len(texts) // 2  # (and most as XLA prints them, taken by the split; not "f32[2, 3]")
