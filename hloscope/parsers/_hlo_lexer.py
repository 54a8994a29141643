"""The base of the HLO text parser: the state of one parse, its errors and where they are, and the lexical reads
every path of the parser shares.

``ParserBase`` holds what a parse keeps (the source text, the shapes and metadata parsed so far, the computations
read so far, ...) and reads the text the way XLA's lexer does: brackets matched over strings and nesting
(``_matching``), strings (``_string_end``), attribute values (``_value_end``) and ``, key=value`` lists
(``_attribute_pairs``, with ``split_attributes`` for the common one-line case), comma-separated items
(``_top_level_items``) and operand lists (``operand_list``). ``error`` makes the ``HloParseError`` of a position
(``_locate`` and ``_line_pos`` find one from a line number). The parser itself is ``_hlo_text._Parser``.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from hloscope._compiled import PURE_PYTHON, compiled
from hloscope._regex import LazyPattern
from hloscope.hlo import HloComputation, HloInstruction, Metadata, Shape
from hloscope.parsers import _hlo_re as r
from hloscope.parsers._errors import HloParseError

if TYPE_CHECKING:  # pragma: no cover
    from hloscope.hlo_values import StackFrame
    from hloscope.parsers._hlo_bodies import LazyBody

_ATTRIBUTE_KEY = LazyPattern(r",\s*([A-Za-z_][\w.\-]*)\s*=")
_BRACKET_OR_QUOTE = LazyPattern(r'[{}\[\]()"]')
_SKIP_BLANKS = LazyPattern(r"[ \t]*")
_LONE_SHAPE = LazyPattern(r"[a-z][a-z0-9]*\s*\[[^\]]*\](?:\s*\{[^}]*\})?")
_BRACKET_OR_COMMA = LazyPattern(r"[,(){}\[\]]")
#: An operand list as XLA prints it with operand shapes (``s32[] %i, f32[2,3]{1,0} %x, () %t, (s32[], f32[4]{0})
#: %w``): each item a plain array shape (static dimensions, a layout of minor-to-major numbers) or a tuple of them,
#: a blank, and ``%name``. In such a list every top-level comma is an item's ", " and each item's last token is
#: its ``%name``: the names are ``_SHAPED_NAME``'s matches, as ``operand_list`` reads them item by item.
_PLAIN_ARRAY = r"[a-z][a-z0-9]*\[[0-9,]*\](?:\{[0-9,]*\})?"
_SHAPED_ITEM = rf"(?:{_PLAIN_ARRAY}|\((?:{_PLAIN_ARRAY}(?:, {_PLAIN_ARRAY})*)?\)) %[^\s,%(){{}}\[\]/]+"
_SHAPED_OPERANDS = LazyPattern(rf"{_SHAPED_ITEM}(?:, {_SHAPED_ITEM})*")
_SHAPED_NAME = LazyPattern(r" %([^\s,%(){}\[\]/]+)")
#: An operand list of names alone, without sigils, joined by ", " (``a.1, b.2``, as XLA prints names without
#: ``%``): ``operand_list`` reads each item as it stands.
_PLAIN_NAMES = LazyPattern(r"[^\s,%(){}\[\]/]+(?:, [^\s,%(){}\[\]/]+)*")
_BRACKET_QUOTE_COMMA = LazyPattern(r'[{}\[\]()",]')
#: What XLA's lexer skips between tokens: white space (line breaks included) and ``/* */`` and ``//`` comments.
SKIP = LazyPattern(r"(?:\s+|/\*.*?\*/|//[^\n]*)*", re.DOTALL)


def py_group_end(src: str, at: int) -> int:
    """The index just after the bracketed group opening at ``src[at]``, holding no string and nesting at most 8
    deep, read in one step (``_hlo_re.NESTED_BRACKETS``); -1 where ``_value_end`` must go bracket by bracket.
    The specification of ``_attribute_scan.group_end``, which reads any depth (the loop reaches the same end)."""
    m = r.NESTED_BRACKETS.match(src, at)
    return -1 if m is None else m.end()


_group_end = (None if PURE_PYTHON else compiled("hloscope.parsers._attribute_scan", "group_end")) or py_group_end


class ParserBase:
    """The state of one parse and the reads every path shares; ``_hlo_text._Parser`` adds the grammar.

    The slots here are the whole parser's: the classes built on this one add methods only (``__slots__ = ()``).
    """

    __slots__ = ("src", "source", "shapes", "metadata", "metadata_by_text", "unknown_opcodes", "frames",
                 "computation", "inline", "line_starts", "done", "pending", "anon", "infer_for", "infer_index",
                 "inline_depth", "lazy", "checked")

    def __init__(self, src: str, source: str) -> None:
        self.src = src
        self.source = source
        self.shapes: dict[str, Shape] = {}
        self.metadata: dict[str, Metadata] = {}
        #: An instruction's whole attribute text -> its metadata read alone (``Decoder.metadata_of``): gemma2's
        #: 13,761 instructions hold 8,850 distinct attribute texts.
        self.metadata_by_text: dict[str, Metadata | None] = {}
        self.unknown_opcodes: set[str] = set()
        self.frames: dict[int, StackFrame] = {}
        self.computation = ""
        self.inline: list[HloComputation] = []
        self.line_starts: list[int] = []
        #: Computations finished so far, by name (shape inference of ``call``/``conditional`` reads their roots);
        #: after the parse, ``_hlo_text.ModuleComputations`` (the module's, held weakly).
        self.done: dict[str, HloComputation] = {}
        #: Instructions written in place inside an operand list, waiting to join the computation.
        self.pending: list[HloInstruction] = []
        self.anon: dict[str, int] = {}
        self.infer_for: list[HloInstruction] | None = None
        self.infer_index: dict[str, HloInstruction] = {}
        self.inline_depth = 0
        #: Bodies whose instructions are built on first use (``_lazy_body``), by computation name.
        self.lazy: dict[str, LazyBody] = {}
        #: ``id``s of the computations whose bodies ``read_computations`` checked as ``_finish`` would.
        self.checked: set[int] = set()

    # -- errors ------------------------------------------------------------------------------------

    def error(self, msg: str, pos: int, instruction: str = "") -> HloParseError:
        return HloParseError(msg, self.src, pos, source=self.source, computation=self.computation,
                             instruction=instruction)

    def _locate(self, lineno: int, word: str, after: str = "") -> int:
        """Offset of ``word`` (a whole name, with or without ``%``) on line ``lineno``, searching from the first
        ``after`` on it; the line's start when it is not there (it may continue on later lines)."""
        start = self._line_pos(lineno)
        end = self.src.find("\n", start)
        end = len(self.src) if end < 0 else end
        if after:
            k = self.src.find(after, start, end)
            start = k if k >= 0 else start
        m = re.compile(r"(?<![\w.\-%])%?" + re.escape(word) + r"(?![\w.\-])").search(self.src, start, end)
        return m.start() if m else self._line_pos(lineno)

    def _line_pos(self, lineno: int) -> int:
        """Offset of the start of 1-based line ``lineno`` (table built once, on first need)."""
        starts = self.line_starts
        if not starts:
            starts.append(0)
            find = self.src.find
            pos = find("\n")
            while pos >= 0:
                starts.append(pos + 1)
                pos = find("\n", pos + 1)
        return starts[lineno - 1] if 0 < lineno <= len(starts) else len(self.src)

    # -- tokens ------------------------------------------------------------------------------------

    def _top_level_items(self, start: int, end: int) -> list[tuple[int, int]]:
        """Spans of the comma-separated items of ``src[start:end]`` (commas inside brackets and strings do not
        split)."""
        src = self.src
        items = []
        depth = 0
        item = pos = start
        search = _BRACKET_QUOTE_COMMA.search
        while True:
            m = search(src, pos, end)
            if m is None:
                items.append((item, end))
                return items
            ch = m.group()
            at = m.start()
            if ch == '"':
                sm = r.STRING.match(src, at, end)
                pos = sm.end() if sm is not None else end
                continue
            if ch in r.OPENERS:
                depth += 1
            elif ch in r.CLOSERS:
                depth -= 1
            elif depth == 0:
                items.append((item, at))
                item = at + 1
            pos = at + 1

    def _attribute_pairs(self, pos: int, name: str, quick: bool = True) -> tuple[list[tuple[str, str]], int]:
        """Read ``, key=value`` pairs from ``pos``; return them and the position just after the last value.

        The list ends at the first token that is not a ``,`` (line breaks and comments skipped, so a list may
        continue on the next line, and a computation's ``}`` may close right after it on the same line).
        ``quick``: split the rest of the line at its keys when that is safe (``split_attributes``), which takes
        the whole rest of the line for the list; False scans token by token, for a list that may be followed
        by more on its line.
        """
        src = self.src
        n = len(src)
        eol = src.find("\n", pos)
        if eol < 0:
            eol = n
        line = src[pos:eol]
        if quick and "//" not in line and "/*" not in line:
            quick = split_attributes(line)
            if quick is not None:
                nxt = SKIP.match(src, eol).end()
                if nxt >= n or src[nxt] != ",":
                    return quick, eol
        skip = SKIP.match
        pairs = []
        while True:
            p = skip(src, pos).end()
            if p >= n or src[p] != ",":
                if src.startswith("/*", p):
                    raise self.error("unterminated '/*' comment", p, name)
                return pairs, pos
            km = _ATTRIBUTE_KEY.match(src, p)
            if km is None:
                raise self.error("expected 'key=value' after ','", skip(src, p + 1).end(), name)
            vstart = skip(src, km.end()).end()
            vend = self._value_end(vstart, name, km.group(1) != "literal")
            if vend == vstart:
                raise self.error(f"expected a value for {km.group(1)!r}", vstart, name)
            value = src[vstart:vend].rstrip()
            if km.group(1) == "device_ids" and pairs and pairs[-1][1].startswith("mesh["):
                pairs[-1] = join_device_ids(pairs[-1], value)
            else:
                pairs.append((km.group(1), value))
            pos = vend

    def _value_end(self, pos: int, name: str, blank_ends: bool = True) -> int:
        """End of an attribute value: the next ',', line break, comment or (``blank_ends``) blank outside
        brackets and strings, or a closing bracket that this value did not open. A blank does not end the value
        when a ``{`` follows it (``mesh[...] {...}``); a custom call's ``literal=f32[] 0.1`` holds a blank."""
        src = self.src
        depth = 0
        opened: list[int] = []
        search = r.VALUE_STOP.search
        search0 = r.VALUE_STOP_TOP.search
        nested = _group_end
        while True:
            m = search0(src, pos) if depth == 0 else search(src, pos)
            if m is None:
                if depth:
                    raise self.error("unclosed bracket in attribute value (truncated file?)", opened[-1], name)
                return len(src)
            ch = m.group()
            at = m.start()
            if ch == " " or ch == "\t":
                nxt = _SKIP_BLANKS.match(src, at).end()
                if blank_ends and not src.startswith("{", nxt):
                    return at
                pos = nxt
                continue
            if ch == '"':
                pos = self._string_end(at, name)
                continue
            if ch == "/":
                nxt = src[at + 1:at + 2]
                if nxt == "*":
                    if depth == 0:
                        return at
                    close = src.find("*/", at + 2)
                    if close < 0:
                        raise self.error("unterminated '/*' comment", at, name)
                    pos = close + 2
                    continue
                if nxt == "/":
                    if depth == 0:
                        return at
                    eol = src.find("\n", at)
                    pos = len(src) if eol < 0 else eol
                    continue
            elif ch in r.OPENERS:
                whole = nested(src, at) if depth == 0 else -1
                if whole >= 0:  # (the end bracket by bracket would reach: the group read in one step)
                    pos = whole
                    continue
                depth += 1
                opened.append(at)
            elif ch in r.CLOSERS:
                if depth == 0:
                    return at
                depth -= 1
                opened.pop()
            elif depth == 0:
                return at
            pos = at + 1

    def _string_end(self, at: int, name: str) -> int:
        """End of the string opening at ``at``; an error when it is never closed, or when, inside an instruction
        (``name``), the only closing quote lies past a line that reads like an instruction (a quote left open;
        the module header may hold whole modules in strings: ``origin_recovery_table``)."""
        s = r.STRING.match(self.src, at)
        if s is None or (name and "\n" in s.group() and r.INSTRUCTION_IN_STRING.search(self.src, at, s.end())):
            raise self.error("unterminated string", at, name)
        return s.end()

    def _matching(self, open_pos: int, opener: str, name: str) -> int:
        """Position of the bracket closing the one at ``open_pos`` (strings and nesting skipped)."""
        src = self.src
        depth = 0
        pos = open_pos
        search = _BRACKET_OR_QUOTE.search
        while True:
            m = search(src, pos)
            if m is None:
                raise self.error(f"'{opener}' is never closed (truncated file?)", open_pos, name)
            ch = m.group()
            at = m.start()
            if ch == '"':
                pos = self._string_end(at, name)
                continue
            if ch in r.OPENERS:
                depth += 1
            else:
                depth -= 1
                if depth == 0:
                    return at
            pos = at + 1

    def _shape(self, text: str, pos: int, name: str) -> Shape:
        try:
            shape = r.parse_shape(text)
        except ValueError as e:
            raise self.error(f"bad shape {text[:60]!r}: {e}", pos, name) from None
        self.shapes[text] = shape
        return shape


def split_attributes(text: str) -> list[tuple[str, str]] | None:
    """Split one line's ``, key=value`` list at its key boundaries when that is safe: every value balanced
    and every string closed. None means "scan it properly" (a value continues on the next line, or a string
    holds ``, key=``)."""
    text = text.rstrip()
    if not text:
        return []
    if text[-1] == ",":
        return None
    parts = r.ATTRIBUTE_SPLIT.split(text)
    if parts[0].strip():
        return None
    pairs = []
    for k in range(1, len(parts), 2):
        value = parts[k + 1].strip()
        if not value:
            return None  # the value is on the next line
        first = value[0]
        if first == "{":
            if value[-1] != "}":
                return None  # e.g. `{1,2} next = ...`: an instruction follows on the same line
        elif first == '"':
            if value[-1] != '"':
                return None
        elif first == "(" and parts[k] == "device_ids" and pairs and pairs[-1][1].startswith("mesh["):
            # `replica_groups=mesh[...], device_ids=(...) {...}`: one value.
            if value.count("(") != value.count(")") or value.count("{") != value.count("}") or '"' in value:
                return None
            pairs[-1] = join_device_ids(pairs[-1], value)
            continue
        elif " " in value or "\t" in value:
            if not value.startswith("mesh["):
                return None
        check = r.STRING.sub("", value) if '"' in value else value
        if ('"' in check or check.count("{") != check.count("}") or check.count("(") != check.count(")")
                or check.count("[") != check.count("]")):
            return None
        pairs.append((parts[k], value))
    return pairs


def join_device_ids(mesh: tuple[str, str], device_ids: str) -> tuple[str, str]:
    """``(key, "mesh[...]")`` and the text of a ``device_ids=`` attribute after it as one pair: XLA prints a mesh
    that numbers its devices as ``mesh['x'=2,'y'=4], device_ids=([4,2]T(1,0)) {'y'}`` (``Mesh::ToString``), whose
    ``, device_ids=`` reads like the start of the next attribute."""
    return mesh[0], f"{mesh[1]}, device_ids={device_ids}"


def operand_list(text: str) -> tuple[str, ...]:
    """Operand names of an operand list in any form XLA's parser takes: ``%a, %b``, ``a, b`` (no sigil), with
    operand shapes (``f32[2,3]{1,0} %a``), mixed, with ``/*index=N*/`` comments. Each name is the last token of
    its top-level comma-separated entry; an entry that is only a shape names nothing (XLA reads none)."""
    if "/" in text:
        text = r.strip_comments(text)
    elif _SHAPED_OPERANDS.fullmatch(text):  # (before-optimization dumps: most of their operand lists)
        return tuple(_SHAPED_NAME.findall(text))
    elif _PLAIN_NAMES.fullmatch(text):  # (names printed without '%')
        return tuple(text.split(", "))
    if "(" not in text and "[" not in text and "{" not in text:
        pieces = text.split(",")
    else:
        pieces = []
        depth = 0
        start = 0
        for m in _BRACKET_OR_COMMA.finditer(text):
            ch = m.group()
            if ch == ",":
                if depth == 0:
                    pieces.append(text[start:m.start()])
                    start = m.end()
            elif ch in "({[":
                depth += 1
            else:
                depth -= 1
        pieces.append(text[start:])
    names = []
    for piece in pieces:
        piece = piece.strip()
        if not piece:
            continue
        last = piece.rsplit(None, 1)[-1] if " " in piece or "\t" in piece or "\n" in piece else piece
        sigil = last.rfind("%")
        if sigil >= 0:  # `%a`, or `f32[2]{0}%a` (no blank after the operand's shape)
            last = last[sigil + 1:]
        elif last[-1] in "]}" and _LONE_SHAPE.fullmatch(piece):
            continue
        names.append(last)
    return tuple(names)


