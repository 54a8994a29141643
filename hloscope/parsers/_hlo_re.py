"""Regular expressions of HLO text, and the small functions that turn a match into a value.

The grammar is XLA's printer/parser (``xla/hlo/parser/hlo_parser.cc``, ``xla/hlo/ir/hlo_instruction.cc``
``ToString``; ``xla/shape_util.cc`` and ``xla/layout.cc`` for shapes). Converters raise ``ValueError`` with a
short reason; the parser adds the location.
"""

from __future__ import annotations

import functools
import re
import warnings
from typing import TYPE_CHECKING, Final

from hloscope._regex import LazyPattern
from hloscope.hlo import Layout, Shape
from hloscope.parsers._hlo_groups import replica_groups as replica_groups  # (its home; read from here too)

if TYPE_CHECKING:  # pragma: no cover
    from hloscope.hlo_values import ConvolutionDimensionNumbers, PaddingDimension, SliceRange, WindowDimension

# --------------------------------------------------------------------------------------------------
# Instruction lines
# --------------------------------------------------------------------------------------------------

#: The common one-line instruction: ``[ROOT] %name = <array shape> opcode(<operands without parens>)<rest>``.
#: Lines this does not match (tuple shapes, operands with tuple shapes, multi-line values) take the
#: general path in ``_hlo_instruction``.
INSTRUCTION_FAST: Final = LazyPattern(
    r"""
    [ \t]*(ROOT[ \t]+)?          # 1: root marker
    %?([^\s=%]+)[ \t]*=[ \t]*    # 2: name, with or without the % sigil
    ([a-z][a-z0-9]*\[[^\]\n]*\](?:\{[^}\n]*\})?)[ \t]+   # 3: array shape with optional layout
    ([a-z][a-z0-9\-_]*)          # 4: opcode
    \(([^()\n]*)\)               # 5: operands (no nested parentheses, on this line)
    ([^\n]*)                     # 6: attributes and trailing comment, rest of the line
    """,
    re.VERBOSE,
)

#: Start of any instruction: root marker and name, up to the shape.
INSTRUCTION_HEAD: Final = LazyPattern(r"\s*(ROOT\s+)?%?([^\s=%{}(),\"]+)\s*=\s*")
OPCODE: Final = LazyPattern(r"\s*([a-z][a-z0-9\-_]*)\s*\(")

#: ``%name`` references inside an operand list or attribute value.
SIGIL_NAME: Final = LazyPattern(r"%([^\s,(){}]+)")

#: Attribute boundaries: ``, key=``. A value is checked for balanced brackets and quotes before the split
#: is trusted (``_hlo_lexer.split_attributes``); a string or nested value holding ``, key=`` goes to the scanner.
ATTRIBUTE_SPLIT: Final = LazyPattern(r",[ \t]*([A-Za-z_][\w.\-]*)=")


#: One ``"..."`` string with backslash escapes. It may span lines (XLA's test inputs put multi-line configs in
#: ``backend_config="..."``); see ``INSTRUCTION_IN_STRING``.
STRING: Final = LazyPattern(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)

#: A line inside a string that reads like an instruction: the string was left open, and its closing quote is
#: really the opening quote of a later string.
INSTRUCTION_IN_STRING: Final = LazyPattern(r"\n[ \t]*(?:ROOT[ \t]+)?%?[\w.\-]+[ \t]*=[ \t]*(?:\(|[a-z][a-z0-9]*\[)")

#: Characters the value scanner stops at.
VALUE_STOP: Final = LazyPattern(r'[,\n{}\[\]()"/]')
#: ``VALUE_STOP`` outside brackets, where white space also ends a value (XLA's lexer splits tokens there).
VALUE_STOP_TOP: Final = LazyPattern(r'[ \t,\n{}\[\]()"/]')

#: ``key=value`` pairs inside ``metadata={...}`` and the module's source tables.
BRACED_FIELD: Final = LazyPattern(r'([A-Za-z_][\w]*)=("[^"\\]*(?:\\.[^"\\]*)*"|[^\s,}]+)')


def _nested_brackets(levels: int) -> str:
    """A regex for one bracketed group nesting at most ``levels`` deep and holding no string, read as
    ``_value_end`` reads it: any of ``{[(`` opens, any of ``}])`` closes (the scanner does not pair kinds
    either), and comments (``/*...*/``, ``//`` to the line's end) and a lone ``/`` are skipped. Possessive
    throughout, so it never backtracks."""
    plain = r'(?:[^{}\[\]()"/]++|/\*(?:[^*]++|\*(?!/))*+\*/|//[^\n]*+|/(?![*/]))'
    group = ""
    for _ in range(levels):
        group = rf"[{{\[(](?:{plain}|{group})*+[}}\])]" if group else rf"[{{\[(]{plain}*+[}}\])]"
    return group


#: One bracketed group up to 8 deep without strings, which the value scanner (``_value_end``) takes in one step
#: instead of bracket by bracket (the module header of the corpus's llama holds 65 kB of ``input_output_alias``
#: and ``entry_computation_layout``: ~20,000 brackets, ~5 ms bracket by bracket). Where it does not match, the
#: scanner goes bracket by bracket.
NESTED_BRACKETS: Final = LazyPattern(_nested_brackets(8))

OPENERS: Final = frozenset("{[(")
CLOSERS: Final = frozenset("}])")


def unquote(text: str) -> str:
    """The content of a ``"..."`` HLO string with C escapes resolved (``\\"``, ``\\\\``, ``\\n``)."""
    body = text[1:-1]
    if "\\" not in body:
        return body
    with warnings.catch_warnings():  # (an escape Python does not know, `\d`, is kept as printed: no warning)
        warnings.simplefilter("ignore", DeprecationWarning)
        try:
            return body.encode("latin-1", "backslashreplace").decode("unicode_escape")
        except UnicodeDecodeError:  # a malformed escape (`\x` without digits): keep the text as printed
            return body


# --------------------------------------------------------------------------------------------------
# Shapes
# --------------------------------------------------------------------------------------------------

ARRAY_SHAPE: Final = LazyPattern(r"([a-z][a-z0-9]*)(?:\[([^\]]*)\])?(?:\{([^}]*)\})?")
#: ``ARRAY_SHAPE`` with the white space XLA's lexer allows between its parts (``s32 [4] {0}``); a ``{`` is a
#: layout only when a digit, ``:`` or ``}`` follows it (else it opens a computation body).
ARRAY_SHAPE_LOOSE: Final = LazyPattern(r"([a-z][a-z0-9]*)(?:\s*\[([^\]]*)\])?(?:\s*\{(?=\s*[\d:}])([^}]*)\})?")
_TILE_GROUP: Final = LazyPattern(r"\(([^)]*)\)")
_MEMORY_SPACE: Final = LazyPattern(r"S\((\d+)\)")
_COMMENT: Final = LazyPattern(r"/\*.*?\*/|//[^\n]*", re.DOTALL)


def strip_comments(text: str) -> str:
    """``text`` without its ``/* */`` and ``//`` comments (for values outside strings)."""
    return _COMMENT.sub("", text)


def parse_layout(text: str) -> Layout:
    """Decode the text between a shape's layout braces: ``1,0:T(8,128)(2,1)S(1)``."""
    if ":" not in text:  # the common case, minor-to-major only
        try:
            return Layout(tuple(map(int, text.split(","))) if text.strip() else (), (), 0, text)
        except ValueError:
            pass
    m2m_text, _, rest = text.partition(":")
    minor_to_major = tuple(int(d) for d in m2m_text.split(",") if d.strip()) if m2m_text.strip() else ()
    tiles: tuple[tuple[int, ...], ...] = ()
    memory_space = 0
    if rest:
        t = rest.find("T(")
        if t >= 0:
            groups = []
            pos = t + 1
            while True:
                m = _TILE_GROUP.match(rest, pos)
                if m is None:
                    break
                tile = tuple(-1 if v.strip() == "*" else int(v) for v in m.group(1).split(",") if v.strip())
                if tile and (min(tile) < 1 or max(tile) > INT64_MAX) and any(
                        (t < 1 or t > INT64_MAX) and v.strip() != "*" for t, v in zip(tile, m.group(1).split(","))):
                    raise ValueError(f"layout {{{text}}}: tile ({m.group(1)}) has an entry that is not a size from 1 "
                                     "to 2**63-1 (or '*')")
                groups.append(tile)
                pos = m.end()
            tiles = tuple(groups)
        m = _MEMORY_SPACE.search(rest)
        if m:
            memory_space = int(m.group(1))
    return Layout(minor_to_major, tiles, memory_space, text)


def _parse_dims(text: str) -> tuple[tuple[int, ...], tuple[bool, ...]]:
    if not text:
        return (), ()
    if "<" not in text and "?" not in text:  # static dims, the common case
        try:
            return tuple(map(int, text.split(","))), ()
        except ValueError:
            pass
    dims = []
    dynamic = []
    for d in text.split(","):
        d = d.strip()
        if d.startswith("<="):
            dims.append(int(d[2:]))
            dynamic.append(True)
        elif d == "?":
            dims.append(0)  # unbounded dynamic: no size is known
            dynamic.append(True)
        else:
            dims.append(int(d))
            dynamic.append(False)
    return tuple(dims), tuple(dynamic)


#: Largest dimension, tile entry, element count and byte size of an array: XLA's sizes are ``int64_t``
#: (``ShapeUtil::ValidateShape``: a shape whose size "may overflow int64_t" is invalid).
INT64_MAX: Final = (1 << 63) - 1
#: Dimensions as XLA's shape parser reads them (``ParseDimensionSizes``): decimal integers >= 0, ``<=N`` (dynamic,
#: bounded by N) or ``?`` (unbounded dynamic).
_DIMS: Final = LazyPattern(r"\s*(?:(?:<=\s*)?\d+|\?)\s*(?:,\s*(?:(?:<=\s*)?\d+|\?)\s*)*", re.ASCII)
_DIM: Final = LazyPattern(r"\s*(?:(?:<=\s*)?\d+|\?)\s*", re.ASCII)


def parse_array_shape(match: re.Match[str]) -> Shape:
    """Build an array (or token) shape from an ``ARRAY_SHAPE`` match. Raises ValueError for a shape XLA would not
    take (``check_array``)."""
    element_type, dims_text, layout_text = match.groups()
    dims, dynamic = _parse_dims(dims_text or "")
    layout = parse_layout(layout_text) if layout_text is not None else None
    if dims_text or layout is not None:
        check_array(dims_text or "", dims, layout)
    shape = Shape(element_type, dims, dynamic if any(dynamic) else (), layout)
    if dims:
        check_size(shape)
    return shape


def check_array(dims_text: str, dims: tuple[int, ...], layout: Layout | None) -> None:
    """The checks of XLA's shape parser and ``LayoutUtil::ValidateLayoutForShape`` that keep sizes sound: every
    dimension an integer from 0 to ``INT64_MAX`` (or ``<=N``, ``?``); a printed ``minor_to_major`` a permutation
    of the dimensions (``parse_layout`` checks the tiles: entries positive, ``*`` aside). Raises ValueError naming
    the first problem.

    Run once per distinct shape text (the parser shares one ``Shape`` per text), so it costs nothing per
    instruction."""
    if dims_text and _DIMS.fullmatch(dims_text) is None:
        bad = next((d for d in dims_text.split(",") if _DIM.fullmatch(d) is None), dims_text)
        raise ValueError(f"dimension {bad.strip()!r} is not a size: XLA's dimensions are integers >= 0, "
                         "'<=N' (dynamic, at most N) or '?' (unbounded)")
    if dims and max(dims) > INT64_MAX:
        raise ValueError(f"dimension {max(dims)} is larger than XLA's int64 sizes allow")
    if layout is None:
        return
    m2m = layout.minor_to_major
    if m2m and (len(m2m) != len(dims) or sorted(m2m) != list(range(len(dims)))):
        of = f"the {len(dims)} dimensions 0..{len(dims) - 1}" if len(dims) > 1 else (
            "the 1 dimension 0" if dims else "a scalar's 0 dimensions")
        raise ValueError(f"layout {{{layout.raw}}}: minor_to_major {list(m2m)} is not a permutation of {of}")


def check_size(shape: Shape) -> None:
    """ValueError when an array's element count or (tile-padded) byte size passes ``INT64_MAX``."""
    if shape.element_count > INT64_MAX or shape.padded_size_bytes > INT64_MAX or shape.size_bytes > INT64_MAX:
        raise ValueError(f"{shape.element_count} elements ({max(shape.size_bytes, shape.padded_size_bytes)} "
                         "bytes) are more than XLA's int64 sizes allow")


def parse_shape(text: str) -> Shape:
    """Parse a complete shape: an array ``f32[2,3]{1,0}``, a token, or a tuple of any depth.

    Raises:
        ValueError: when ``text`` is not exactly one shape.
    """
    text = text.strip()
    if "/" in text:
        text = _COMMENT.sub("", text)
    if text.startswith("("):
        items = _printed_items(text)
        if items is not None or _FLAT_TUPLE.fullmatch(text):  # (a loop state: hundreds of arrays, one pass)
            if items is None:
                items = [_array_shape(m.group()) for m in ARRAY_SHAPE_LOOSE.finditer(text, 1, len(text) - 1)]
            return Shape("tuple", tuple_shapes=tuple(items))
    shape, pos = _shape_at(text, 0)
    if text[pos:].strip():
        raise ValueError(f"unexpected {text[pos:pos + 20]!r} after shape")
    return shape


def _printed_items(text: str) -> list[Shape] | None:
    """The array shapes of a flat tuple printed as XLA prints one -- ``(`` item ``, `` item ... ``)``, each item
    exactly one ``ARRAY_SHAPE_LOOSE`` match -- else None. What ``_FLAT_TUPLE`` and ``finditer`` give for such a
    text (an item's match cannot run on into the ``,`` that follows it), by one ``split`` and a match per distinct
    item instead of a pattern over the whole text: a loop state repeats a few item texts (the corpus's mixtral
    module: 977 items, 11 distinct, 24.6 kB; 2.1 -> 0.6 ms with the tuple's ``Shape``). Items XLA never prints
    (a ", " inside brackets, other white space, a nested tuple) give None: ``_FLAT_TUPLE`` decides those."""
    if not text.endswith(")"):
        return None
    items = text[1:-1].split(", ")
    shapes = dict.fromkeys(items)
    fullmatch = ARRAY_SHAPE_LOOSE.fullmatch
    for item in shapes:
        if fullmatch(item) is None:
            return None
        shapes[item] = _array_shape(item)
    return list(map(shapes.__getitem__, items))


#: A tuple of one or more array shapes and nothing else: the items ``_shape_at`` reads one by one, matched in one
#: step. Each item is atomic (``(?>...)``: ``ARRAY_SHAPE_LOOSE``'s own match at that point, as ``_shape_at`` takes
#: it, never a shorter one the rest of the pattern would settle for), between the white space ``_shape_at`` skips;
#: an item can only begin with a letter, so ``finditer`` over the text inside the parentheses finds exactly these
#: items. Anything else (``()``, a trailing ',', a nested tuple, a buffer ``b(...)``) goes to ``_shape_at``.
_FLAT_TUPLE: Final = LazyPattern(r"\([ \t\n]*(?>{0})(?:[ \t\n]*,[ \t\n]*(?>{0}))*[ \t\n]*\)".format(
    ARRAY_SHAPE_LOOSE.pattern))

#: Deepest tuple nesting read (real shapes nest a few levels; this bounds the recursion on hostile input).
MAX_NESTING: Final = 100


def _shape_at(text: str, pos: int, depth: int = 0) -> tuple[Shape, int]:
    if depth > MAX_NESTING:
        raise ValueError(f"tuple shape nested deeper than {MAX_NESTING} levels")
    while pos < len(text) and text[pos] in " \t\n":
        pos += 1
    if text.startswith("(", pos):
        pos += 1
        elements = []
        while True:
            while pos < len(text) and text[pos] in " \t\n":
                pos += 1
            if text.startswith(")", pos):
                return Shape("tuple", tuple_shapes=tuple(elements)), pos + 1
            element, pos = _shape_at(text, pos, depth + 1)
            elements.append(element)
            while pos < len(text) and text[pos] in " \t\n":
                pos += 1
            if text.startswith(",", pos):
                pos += 1
            elif not text.startswith(")", pos):
                raise ValueError("expected ',' or ')' in tuple shape")
    if text.startswith("b(", pos):
        inner, pos = _shape_at(text, pos + 2, depth + 1)
        while pos < len(text) and text[pos] in " \t\n":
            pos += 1
        if not text.startswith(")", pos):
            raise ValueError("expected ')' closing a buffer shape b(...)")
        return inner, pos + 1
    m = ARRAY_SHAPE_LOOSE.match(text, pos)
    if m is None:
        raise ValueError(f"expected a shape such as f32[2,3]{{1,0}}, found {text[pos:pos + 20]!r}")
    return _array_shape(m.group()), m.end()


@functools.lru_cache(maxsize=1 << 16)
def _array_shape(text: str) -> Shape:
    """The array shape of one ``ARRAY_SHAPE_LOOSE`` text, built and checked once per distinct text (``Shape`` is
    immutable): the leaves of a module's tuple shapes -- a loop state of hundreds of arrays, printed again in each
    computation header and instruction that passes it -- repeat a few texts."""
    m = ARRAY_SHAPE_LOOSE.fullmatch(text)
    assert m is not None  # (the text of such a match)
    return parse_array_shape(m)


# --------------------------------------------------------------------------------------------------
# Attribute values
# --------------------------------------------------------------------------------------------------


def int_list(text: str) -> tuple[int, ...]:
    """``{1,2,3}`` (or ``{}``) -> ``(1, 2, 3)``."""
    body = text.strip()
    if body.startswith("{"):
        body = body[1:-1]
    body = body.strip()
    return tuple(int(v) for v in body.split(",")) if body else ()


def dim_list(text: str) -> tuple[int, ...]:
    """``int_list`` of dimension numbers or sizes (``dimensions``, ``lhs_contracting_dims``, ``slice_sizes``, ...):
    each from 0 to ``INT64_MAX``. A negative one would index from the end in Python and cost the wrong dim."""
    values = int_list(text)
    if values and (min(values) < 0 or max(values) > INT64_MAX):
        bad = next(v for v in values if not 0 <= v <= INT64_MAX)
        raise ValueError(f"{bad} is not a dimension number or size (0 to 2**63-1)")
    return values


def positive_int(text: str) -> int:
    """A count that divides (``feature_group_count``, ``batch_group_count``): 1 to ``INT64_MAX``."""
    value = int(text)
    if not 1 <= value <= INT64_MAX:
        raise ValueError(f"{value} is not a positive count")
    return value


def int_value(text: str) -> int:
    return int(text)


def bool_value(text: str) -> bool:
    if text in ("true", "false"):
        return text == "true"
    raise ValueError(f"expected true or false, found {text!r}")


def string_value(text: str) -> str:
    return unquote(text) if text.startswith('"') else text


def name_value(text: str) -> str:
    """A computation reference ``%name`` (or bare ``name``)."""
    return text[1:] if text.startswith("%") else text


def name_list(text: str) -> tuple[str, ...]:
    """``{%a, %b}`` -> ``("a", "b")``."""
    body = text.strip()
    if body.startswith("{"):
        body = body[1:-1]
    return tuple(name_value(v.strip()) for v in body.split(",") if v.strip())


def nested_int_lists(text: str) -> tuple[tuple[int, ...], ...]:
    """``{{0,1},{2,3}}`` -> ``((0, 1), (2, 3))``; ``{}`` -> ``()``."""
    body = text.strip()
    if not (body.startswith("{") and body.endswith("}")):
        raise ValueError(f"expected {{{{...}},...}}, found {text[:40]!r}")
    body = body[1:-1].strip()
    if not body:
        return ()
    out = []
    for group in re.findall(r"\{([^{}]*)\}", body):
        group = group.strip()
        out.append(tuple(int(v) for v in group.split(",")) if group else ())
    return tuple(out)


def source_target_pairs(text: str) -> tuple[tuple[int, int], ...]:
    pairs = nested_int_lists(text)
    for p in pairs:
        if len(p) != 2:
            raise ValueError(f"source_target_pairs entry {p} is not a pair")
    return tuple((p[0], p[1]) for p in pairs)


_SLICE_RANGE: Final = LazyPattern(r"\[\s*(-?\d+)\s*:\s*(-?\d+)\s*(?::\s*(-?\d+)\s*)?\]")


def slice_ranges(text: str) -> tuple[SliceRange, ...]:
    """``{[0:2], [1:8:2]}`` -> SliceRange per dimension."""
    from hloscope.hlo_values import SliceRange

    return tuple(
        SliceRange(int(a), int(b), int(c) if c else 1) for a, b, c in _SLICE_RANGE.findall(text)
    )


def padding_config(text: str) -> tuple[PaddingDimension, ...]:
    """Pad's ``padding=0_0x1_1_2`` -> PaddingDimension per dimension (``lo_hi[_interior]``)."""
    from hloscope.hlo_values import PaddingDimension

    if not text:
        return ()
    out = []
    for dim in text.split("x"):
        parts = [int(v) for v in dim.split("_")]
        if len(parts) not in (2, 3):
            raise ValueError(f"padding entry {dim!r} is not lo_hi or lo_hi_interior")
        out.append(PaddingDimension(*parts))
    return tuple(out)


_WINDOW_KEYS: Final = {
    "size": "size",
    "stride": "stride",
    "lhs_dilate": "base_dilation",
    "rhs_dilate": "window_dilation",
    "rhs_reversal": "window_reversal",
}


def window(text: str) -> tuple[WindowDimension, ...]:
    """``{size=3x3 stride=2x2 pad=0_1x0_1 lhs_dilate=1x1 rhs_dilate=2x2}`` -> WindowDimension per dim.

    Keys follow ``window_util::ToString``; ``pad`` is ``lo_hi`` per dimension.
    """
    from hloscope.hlo_values import WindowDimension

    body = text.strip()
    if body.startswith("{"):
        body = body[1:-1]
    fields: dict[str, list[int]] = {}
    rank = 0
    for item in body.split():
        key, _, value = item.partition("=")
        if key == "pad":
            pads = [tuple(int(v) for v in d.split("_")) for d in value.split("x")]
            fields["padding_low"] = [p[0] for p in pads]
            fields["padding_high"] = [p[1] for p in pads]
            rank = max(rank, len(pads))
        elif key in _WINDOW_KEYS:
            values = [int(v) for v in value.split("x")]
            fields[_WINDOW_KEYS[key]] = values
            rank = max(rank, len(values))
        else:
            raise ValueError(f"unknown window field {key!r}")
    for key, values in fields.items():
        # XLA's ``window_util`` and verifier: sizes, strides and dilations are positive; pads may be negative.
        low = 1 if key in ("size", "stride", "base_dilation", "window_dilation") else -INT64_MAX
        if key != "window_reversal" and any(not low <= v <= INT64_MAX for v in values):
            bad = next(v for v in values if not low <= v <= INT64_MAX)
            raise ValueError(f"window {key} {bad} is out of range ({'1' if low == 1 else '-2**63+1'} to 2**63-1)")
    dims = []
    for i in range(rank):
        # XLA's parser takes a field shorter than the window (``rhs_reversal=1`` for 2 dims): the rest default.
        kwargs = {k: v[i] for k, v in fields.items() if i < len(v)}
        if "window_reversal" in kwargs:
            kwargs["window_reversal"] = bool(kwargs["window_reversal"])
        dims.append(WindowDimension(**kwargs))
    return tuple(dims)


def _labels(part: str, batch: str, feature: str) -> tuple[int, int, tuple[int, ...]]:
    spatial: dict[int, int] = {}
    b = f = -1
    for i, ch in enumerate(part):
        if ch == batch:
            b = i
        elif ch == feature:
            f = i
        elif ch.isdigit():
            spatial[int(ch)] = i
        elif ch == "?":
            pass  # a dimension with no role (cuDNN's vectorized int8 layouts: ``b01f?_01i?o->b01f?``)
        else:
            raise ValueError(f"unexpected {ch!r} in dim_labels part {part!r}")
    # XLA's parser also takes parts without batch/feature labels (``012_012->012``): those fields are -1.
    return b, f, tuple(spatial[k] for k in sorted(spatial))


def dim_labels(text: str) -> ConvolutionDimensionNumbers:
    """``b01f_01io->b01f`` -> ConvolutionDimensionNumbers (``ConvolutionDimensionNumbersToString``).

    Input labels use b/f, kernel labels i/o, output labels b/f; digits are spatial dimensions in window order.
    """
    from hloscope.hlo_values import ConvolutionDimensionNumbers

    lhs_rhs, arrow, out = text.partition("->")
    lhs, underscore, rhs = lhs_rhs.partition("_")
    if not arrow or not underscore:
        raise ValueError(f"expected dim_labels like b01f_01io->b01f, found {text!r}")
    ib, if_, isp = _labels(lhs, "b", "f")
    ki, ko, ksp = _labels(rhs, "i", "o")
    ob, of, osp = _labels(out, "b", "f")
    return ConvolutionDimensionNumbers(ib, if_, isp, ki, ko, ksp, ob, of, osp, text)


def braced_fields(text: str) -> dict[str, str]:
    """``{op_name="a" source_line=3}`` -> ``{"op_name": '"a"', "source_line": "3"}`` (values raw)."""
    return dict(BRACED_FIELD.findall(text))


def frontend_attributes(text: str) -> dict[str, str]:
    """``{_xla_stream="1",key="v"}`` -> dict with the string values unquoted; nested values kept raw."""
    body = text.strip()
    if body.startswith("{"):
        body = body[1:-1]
    out: dict[str, str] = {}
    pos = 0
    key_re = re.compile(r"\s*,?\s*([\w.\-]+)=")
    while pos < len(body):
        m = key_re.match(body, pos)
        if m is None:
            break
        pos = m.end()
        if body.startswith('"', pos):
            s = STRING.match(body, pos)
            if s is None:
                raise ValueError("unterminated string in frontend_attributes")
            out[m.group(1)] = unquote(s.group())
            pos = s.end()
        else:
            end = _scan_plain(body, pos)
            out[m.group(1)] = body[pos:end]
            pos = end
    return out


def _scan_plain(text: str, pos: int) -> int:
    """End of a value inside a braced list: the next top-level ',' or the end of ``text``."""
    depth = 0
    while True:
        m = VALUE_STOP.search(text, pos)
        if m is None:
            return len(text)
        ch = m.group()
        at = m.start()
        if ch == '"':
            s = STRING.match(text, at)
            if s is None:
                return len(text)
            pos = s.end()
            continue
        if ch in OPENERS:
            depth += 1
        elif ch in CLOSERS:
            if depth == 0:
                return at
            depth -= 1
        elif ch == "," and depth == 0:
            return at
        pos = at + 1
