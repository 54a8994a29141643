"""Reader of XLA's HLO text (``HloModule::ToString``) into the ``hloscope.hlo`` model.

It reads everything XLA's own parser (``xla/hlo/parser/hlo_parser.cc``) reads -- tests/parsers/test_corpus.py
holds it to that on ~7,600 real texts -- and is fast where it matters, on XLA's own output. Three paths:

  1. Whole bodies (``_Parser._block``): a computation as XLA prints it, one instruction per line with XLA's
     spacing, is read in one pass (``_block_rows.block_rows``: compiled, or ``re.findall``). Its rows are then
     checked as a whole -- unique names, one root, shapes, parameter numbers, operands naming instructions of
     the body, called computations as plain names -- with a few passes in C over their columns
     (``_Parser._lazy_body``), and the computation keeps them (``_LazyBody``): it answers for its names,
     opcodes, shapes and operands from them, and builds its ``HloInstruction`` objects only on first use
     (``HloComputation``). The cost model reads fused computations through those columns and never builds most
     of them. A body whose check fails is built at once, one short step per instruction (``_Parser._rows``), or
     read by the next path.
  2. Lines (the loop in ``_Parser._body``): one regex match per line (``_hlo_re.INSTRUCTION_FAST``) for bodies
     with comments, blank lines or other spacing.
  3. Tokens (``_Parser._general_instruction``): anything else -- a value over several lines, comments between
     tokens, several instructions on a line, instructions written in place as operands, shapes left out (they
     are inferred, ``_infer_shape``), computations written in place -- as XLA's lexer reads it, over absolute
     positions, jumping between brackets and quotes with ``re.search``.

Attributes are kept as text and decoded on first access (``decode``), shapes and metadata are parsed once per
distinct text, and cross-references (operands, called computations) are checked in one pass at the end. Every
failure is an ``HloParseError`` naming the source, line, column, computation and instruction.
"""

from __future__ import annotations

import re
from itertools import chain, compress, repeat
from operator import attrgetter, itemgetter
from typing import Any, Iterable, Sequence

from hloscope.hlo import (
    CALLED_COMPUTATION_ROLES,
    DecodedAttributes,
    HloComputation,
    HloInstruction,
    HloModule,
    Metadata,
    Shape,
    StackFrame,
)
from hloscope._gc import paused_gc
from hloscope.parsers import _hlo_re as r
from hloscope.parsers._block_rows import block_rows
from hloscope.parsers._errors import HloParseError
from hloscope.parsers._hlo_attrs import ASYNC_FORMS, ATTRIBUTE_PARSERS, KNOWN_OPCODES, LIST_CALL_KEYS

#: Placeholder shape of an instruction printed without one, until ``_infer_shape`` replaces it.
_INFERRED = Shape("inferred")
_SHAPE_PRESERVING = frozenset(
    "abs acos acosh add and asin asinh atan2 atanh cbrt ceil clamp compare copy cosh cosine count-leading-zeros "
    "divide erf exponential exponential-minus-one floor imag is-finite log log-plus-one logistic maximum minimum "
    "mulhi multiply negate not opt-barrier or popcnt power real remainder round-nearest-afz round-nearest-even "
    "rsqrt select shift-left shift-right-arithmetic shift-right-logical sign sine sinh sqrt subtract tan tanh "
    "xor".split()
)
_NO_CALLS: dict[str, tuple[str, ...]] = {}
_SIGIL_FINDALL = r.SIGIL_NAME.findall
_NAME = attrgetter("name")
_G0, _G1, _G2, _G3, _G4, _G5, _G6 = (itemgetter(i) for i in range(7))
#: Bodies of fewer lines are built at once. Below it, the checks in bulk and the column reads of the cost model
#: cost more per body than building its instructions: with 16, the fixtures' transformer modules (bodies of
#: 20-60 lines) costed 15-20% slower than when built at once, and the plugin's analysis of them 5-15% slower
#: (benchmarks/plugin_overhead.py); with 128 the plugin's analysis is back within a few percent of building
#: everything (the cost model's column reads remain ~1 ms slower on them), and the 52 MB module of
#: benchmarks/parse.py keeps 90% of its instructions in lazy bodies.
_LAZY_MIN_LINES = 128
#: Known opcodes whose operand list names instructions (a parameter's holds its number, a constant's its value).
_NAMES_OPERANDS = KNOWN_OPCODES - {"parameter", "constant"}
_OPERANDS = attrgetter("operands")
_CALLED_COMPUTATIONS = attrgetter("called_computations")
_CALL_KEYS = sorted(set(CALLED_COMPUTATION_ROLES) | LIST_CALL_KEYS, key=lambda k: (-len(k), k))
#: Cheap test for an attribute naming a called computation, then the exact pattern.
_CALL_KEY_HINT = re.compile(r"(?:%s)=" % "|".join(map(re.escape, _CALL_KEYS)))
_CALL_KEY = re.compile(r"(?:^|,)\s*(%s)=(\{[^}]*\}|[^\s,]+)" % "|".join(map(re.escape, _CALL_KEYS)))
_TABLE_NAMES = frozenset({"FileNames", "FunctionNames", "FileLocations", "StackFrames"})
_TABLE_ROW = re.compile(r"[ \t]*(\d+)[ \t]+([^\n]*?)[ \t\r]*$", re.MULTILINE)
#: ``INSTRUCTION_FAST`` anchored to end at a line end (the match covers exactly one line).
_INSTRUCTION_LINE = re.compile(r.INSTRUCTION_FAST.pattern + r"(?=\n|\Z)", re.VERBOSE)
_MODULE_HEADER = re.compile(r"\s*HloModule[ \t]+([^\s,]+)")
_MODULE_SEPARATOR = re.compile(r"^//[ \t]*-----[^\n]*$", re.MULTILINE)
_ATTRIBUTE_KEY = re.compile(r",\s*([A-Za-z_][\w.\-]*)\s*=")
_BRACKET_OR_QUOTE = re.compile(r'[{}\[\]()"]')
_SKIP_BLANKS = re.compile(r"[ \t]*")
_LONE_SHAPE = re.compile(r"[a-z][a-z0-9]*\s*\[[^\]]*\](?:\s*\{[^}]*\})?")
_BRACKET_OR_COMMA = re.compile(r"[,(){}\[\]]")
_BRACKET_QUOTE_COMMA = re.compile(r'[{}\[\]()",]')
#: An instruction written in place as an operand: an opcode right before '(' (not part of a name).
_NESTED_OPERAND = re.compile(r"(?<![\w.%\-])[a-z][a-z0-9\-_]*\s*\(")
#: What XLA's lexer skips between tokens: white space (line breaks included) and ``/* */`` and ``//`` comments.
_SKIP = re.compile(r"(?:\s+|/\*.*?\*/|//[^\n]*)*", re.DOTALL)
_MODULE_KEYWORD = re.compile(r"HloModule\s")
_AFTER_ENTRY = frozenset(" \t\r\n%/")
_COMPUTATION_NAME = re.compile(r"%?([^\s(){}=%,/\"]+)")
#: The start of a one-line computation header, up to its parameter list (``_computation_header``).
_HEADER_LINE = re.compile(r"(ENTRY[ \t]+)?%?([^\s(){}=%,/\"]+)[ \t]*\(")


def parse_hlo_text(text: str, source: str = "<string>") -> HloModule:
    """Parse one HLO module from its text form (as ``compiled.as_text()`` or an XLA dump prints it).

    Args:
        text: the module text. A text without an ``HloModule`` header is read as one module whose entry is
            the ``ENTRY`` computation (else the last one), as XLA's parser does.
        source: where the text came from, for error messages.

    Returns:
        The parsed ``HloModule``.

    Raises:
        HloParseError: on text that is not HLO: the message names ``source``, line, column, the enclosing
            computation and instruction, and what was expected.
    """
    with paused_gc():  # the parse builds a large graph holding no garbage (see ``paused_gc``)
        return _Parser(text, source).parse()


def split_modules(text: str) -> list[str]:
    """Split a file holding several modules separated by ``// -----`` lines (XLA's test files)."""
    return [part for part in _MODULE_SEPARATOR.split(text) if part.strip()]


class _Parser:
    __slots__ = ("src", "source", "shapes", "metadata", "unknown_opcodes", "frames", "computation", "inline",
                 "line_starts", "done", "pending", "anon", "infer_for", "infer_index", "inline_depth", "lazy")

    def __init__(self, src: str, source: str) -> None:
        self.src = src
        self.source = source
        self.shapes: dict[str, Shape] = {}
        self.metadata: dict[str, Metadata] = {}
        self.unknown_opcodes: set[str] = set()
        self.frames: dict[int, StackFrame] = {}
        self.computation = ""
        self.inline: list[HloComputation] = []
        self.line_starts: list[int] = []
        #: Computations finished so far, by name (shape inference of ``call``/``conditional`` reads their roots).
        self.done: dict[str, HloComputation] = {}
        #: Instructions written in place inside an operand list, waiting to join the computation.
        self.pending: list[HloInstruction] = []
        self.anon: dict[str, int] = {}
        self.infer_for: list[HloInstruction] | None = None
        self.infer_index: dict[str, HloInstruction] = {}
        self.inline_depth = 0
        #: Bodies whose instructions are built on first use (``_lazy_body``), by computation name.
        self.lazy: dict[str, _LazyBody] = {}

    # -- errors ------------------------------------------------------------------------------------

    def error(self, msg: str, pos: int, instruction: str = "") -> HloParseError:
        return HloParseError(msg, self.src, pos, source=self.source, computation=self.computation,
                             instruction=instruction)

    # -- module --------------------------------------------------------------------------------------

    def parse(self) -> HloModule:
        src = self.src
        n = len(src)
        pos = 0
        lineno = 1
        name = ""
        header: dict[str, str] = {}
        tables: dict[str, dict[int, str]] = {}
        computations: list[HloComputation] = []
        seen_header = False
        skip = _SKIP.match
        while True:
            p = skip(src, pos).end()
            if p > pos:
                lineno += src.count("\n", pos, p)
                pos = p
            if pos >= n:
                break
            ch = src[pos]
            if ch == "/":  # what _SKIP left: an unterminated comment, or a lone '/'
                if src.startswith("/*", pos):
                    raise self.error("unterminated '/*' comment", pos)
                raise self.error("expected a computation header such as 'ENTRY %main (p: f32[2]) -> f32[2] {'",
                                 pos)
            if ch == "#":  # not XLA syntax, but scripts paste HLO after '#' notes; skip the line
                eol = src.find("\n", pos)
                pos = n if eol < 0 else eol
                continue
            if ch == "H" and _MODULE_KEYWORD.match(src, pos):
                if seen_header or computations:
                    raise self.error("a second 'HloModule' header: one text holds one module "
                                     "(split files of several at their '// -----' lines)", pos)
                seen_header = True
                name, header, end = self._module_header(pos)
                lineno += src.count("\n", pos, end)
                pos = end
                continue
            eol = src.find("\n", pos)
            if eol < 0:
                eol = n
            word = src[pos:eol].rstrip()
            if word in _TABLE_NAMES:
                pos, lineno = self._table(eol + 1, lineno + 1, tables.setdefault(word, {}))
                continue
            if ch == "}":
                raise self.error("'}' with no computation open", pos)
            if tables and not self.frames:
                self.frames.update(_resolve_stack_frames(tables))
            comp, pos, lineno = self._computation(pos, lineno)
            for inline in self.inline:
                computations.append(inline)
            self.inline.clear()
            computations.append(comp)
            self.done[comp.name] = comp
        if not computations:
            raise self.error("expected at least one computation ('ENTRY %name (...) -> shape {')", n)
        if tables and not self.frames:
            self.frames.update(_resolve_stack_frames(tables))
        return self._finish(name, header, computations)

    def _module_header(self, offset: int) -> tuple[str, dict[str, str], int]:
        src = self.src
        m = _MODULE_HEADER.match(src, offset)
        if m is None:
            raise self.error("expected 'HloModule <name>'", offset)
        pairs, end = self._attribute_pairs(m.end(), "")
        return m.group(1), dict(pairs), end

    def _table(self, pos: int, lineno: int, rows: dict[int, str]) -> tuple[int, int]:
        src = self.src
        while pos < len(src):
            m = _TABLE_ROW.match(src, pos)
            if m is None:
                break
            rows[int(m.group(1))] = m.group(2)
            pos, lineno = m.end() + 1, lineno + 1
        return pos, lineno

    # -- computations ----------------------------------------------------------------------------------

    def _computation_header(self, pos: int) -> tuple[str, bool, int]:
        """Read ``[ENTRY] %name [(params)] [-> shape] {`` from ``pos`` (line breaks and comments allowed
        anywhere, as XLA's lexer skips them); return the name, whether it is the entry, and the position after
        the ``{``."""
        src = self.src
        eol = src.find("\n", pos)
        if eol > pos and src.startswith(" {", eol - 2):  # as XLA prints it: `[ENTRY ]%name (...) -> shape {`
            m = _HEADER_LINE.match(src, pos)
            if m is not None and src.find(") -> ", m.end(), eol) >= 0:
                return m.group(2), m.group(1) is not None, eol
        n = len(src)
        skip = _SKIP.match
        start = pos
        is_entry = False
        if src.startswith("ENTRY", pos) and (pos + 5 >= n or src[pos + 5] in _AFTER_ENTRY):
            is_entry = True
            pos = skip(src, pos + 5).end()
        m = _COMPUTATION_NAME.match(src, pos)
        if m is None:
            raise self.error("expected a computation header such as 'ENTRY %main (p: f32[2]) -> f32[2] {'",
                             start)
        comp_name = m.group(1)
        p = skip(src, m.end()).end()
        if src.startswith("(", p):
            p = skip(src, self._matching(p, "(", "") + 1).end()
        if src.startswith("->", p):
            p = skip(src, p + 2).end()
            if src.startswith("(", p):
                end = self._matching(p, "(", "") + 1
            else:
                sm = r.ARRAY_SHAPE_LOOSE.match(src, p)
                if sm is None:
                    raise self.error(f"expected the result shape of computation {comp_name!r} after '->'", p)
                end = sm.end()
            p = skip(src, end).end()
        if not src.startswith("{", p):
            if p == skip(src, m.end()).end() and not is_entry:
                # Nothing header-like after the first word: not HLO at all, most likely.
                raise self.error("expected a computation header such as 'ENTRY %main (p: f32[2]) -> f32[2] {'",
                                 start)
            raise self.error(f"expected '{{' opening the body of computation {comp_name!r}", p)
        return comp_name, is_entry, p + 1

    def _computation(self, pos: int, lineno: int) -> tuple[HloComputation, int, int]:
        comp_name, is_entry, body = self._computation_header(pos)
        return self._body(comp_name, is_entry, body, lineno + self.src.count("\n", pos, body), pos, lineno)

    def _body(self, comp_name: str, is_entry: bool, pos: int, lineno: int, header_pos: int,
              start_line: int) -> tuple[HloComputation, int, int]:
        """Read a computation's instructions from ``pos`` (just after its ``{``) through its closing ``}``;
        return the computation, the position after the ``}`` and the line there."""
        src = self.src
        n = len(src)
        outer = self.computation
        self.computation = comp_name
        instructions: list[HloInstruction] = []
        append = instructions.append
        root = ""
        if src.startswith("\n", pos):
            pos, lineno = pos + 1, lineno + 1
        params: list[HloInstruction] | None = None
        if pos == 0 or src[pos - 1] == "\n":
            block = self._block(pos, lineno, instructions, is_entry)
            if block is not None:
                pos, lineno, root, params, lazy = block
                if lazy is not None:  # (only when the body ends with "}\n")
                    self.lazy[comp_name] = lazy
                    comp = HloComputation(comp_name, None, root, is_entry,
                                          tuple([lazy.shapes[lazy.parameter_index[k]]
                                                 for k in sorted(lazy.parameter_index)]),
                                          start_line, source=lazy)
                    self.computation = outer
                    return comp, pos + 2, lineno + 1
                if src.startswith("}\n", pos):  # the usual end: the next line is not a continuation
                    return self._computation_end(comp_name, is_entry, instructions, root, params, header_pos,
                                                 start_line, outer, pos + 2, lineno + 1)
        last_start = pos
        fast = _INSTRUCTION_LINE.match
        shapes = self.shapes
        known = KNOWN_OPCODES
        findall = _SIGIL_FINDALL
        while True:
            m = fast(src, pos)
            if m is not None:
                # Inlined fast path (see _fast_instruction for the same logic with comments).
                is_root, name, shape_text, opcode, operand_text, rest = m.groups()
                inst = None
                if rest:
                    rest = rest.strip()
                    if rest and (rest[0] != "," or rest[-1] in ",=" or rest.count("{") != rest.count("}")
                                 or rest.count('"') & 1 or " = " in rest):
                        rest = None
                if rest is None:
                    pass
                elif "%" in operand_text and opcode in known:
                    called = _NO_CALLS
                    if rest and ("=%" in rest or "={%" in rest):
                        called = self._called(rest, lineno)
                    if called is not None:
                        shape = shapes.get(shape_text)
                        if shape is None:
                            shape = self._shape(shape_text, m.start(3), name)
                        operands = findall(operand_text)
                        if len(operands) != operand_text.count(", ") + 1:
                            operands = _operand_list(operand_text)  # mixed `%a, b`, or no blank after ','
                        inst = HloInstruction(name, opcode, shape, tuple(operands), called,
                                              is_root is not None, lineno, "", -1, rest, self)
                else:
                    inst = self._fast_instruction(m, lineno, pos)
                if inst is not None:
                    if inst.is_root:
                        if root:
                            raise self.error(f"second ROOT {inst.name!r}; {root!r} is already the root", m.start(1),
                                             inst.name)
                        root = inst.name
                    append(inst)
                    last_start = pos
                    pos, lineno = m.end() + 1, lineno + 1
                    continue
            if pos >= n:
                self.computation = ""  # the message names it
                raise self.error(f"computation {comp_name!r} is not closed with '}}' (truncated file?)", n)
            eol = src.find("\n", pos)
            if eol < 0:
                eol = n
            stripped = src[pos:eol].strip()
            if not stripped or stripped.startswith("//"):
                pos, lineno = eol + 1, lineno + 1
                continue
            if stripped.startswith("/*"):
                start = src.index("/*", pos)
                close = src.find("*/", start + 2)
                if close < 0:
                    raise self.error("unterminated '/*' comment", start)
                lineno += src.count("\n", pos, close)
                pos = close + 2
                continue
            if stripped.startswith("}"):
                brace = src.index("}", pos)
                _, end = self._attribute_pairs(brace + 1, "")  # `}, execution_thread="..."`
                lineno += src.count("\n", pos, end)
                pos = end
                break
            if stripped.startswith(",") and instructions:
                # The attribute list of the instruction before continues on this line: read that one again,
                # whole, on the general path.
                prev = instructions.pop()
                if prev.is_root:
                    root = ""
                pos, lineno = last_start, prev.line
            inst, end = self._general_instruction(pos, lineno)
            if self.pending:
                for nested in self.pending:
                    if nested.shape is _INFERRED:
                        nested = self._infer_shape(nested, instructions, pos)
                    append(nested)
                self.pending.clear()
            if inst.shape is _INFERRED:
                inst = self._infer_shape(inst, instructions, pos)
            if inst.is_root:
                if root:
                    raise self.error(f"second ROOT {inst.name!r}; {root!r} is already the root",
                                     self._locate(inst.line, "ROOT"), inst.name)
                root = inst.name
            append(inst)
            last_start = pos
            lineno += src.count("\n", pos, end)
            pos = end
        return self._computation_end(comp_name, is_entry, instructions, root, params, header_pos, start_line,
                                     outer, pos, lineno)

    def _computation_end(self, comp_name: str, is_entry: bool, instructions: list[HloInstruction], root: str,
                         params: list[HloInstruction] | None, header_pos: int, start_line: int, outer: str,
                         pos: int, lineno: int) -> tuple[HloComputation, int, int]:
        if not instructions:
            raise self.error(f"computation {comp_name!r} has no instructions", header_pos)
        if not root:
            root = instructions[-1].name  # XLA's parser takes the last instruction as the root.
        if params is None:  # (else the block read the whole body, and its parameters)
            params = [inst for inst in instructions if inst.opcode == "parameter"]
        if len(params) > 1:
            params.sort(key=_parameter_number)
        comp = HloComputation(comp_name, tuple(instructions), root, is_entry, tuple([p.shape for p in params]),
                              start_line)
        self.computation = outer
        return comp, pos, lineno

    def _block(self, pos: int, lineno: int, instructions: list[HloInstruction], is_entry: bool = False
               ) -> tuple[int, int, str, list[HloInstruction] | None, _LazyBody | None] | None:
        """The fast path for a whole body: when every line from ``pos`` (a line start) to the first ``}`` at the
        start of a line is a complete one-line instruction -- as in every computation XLA prints -- read them all
        in one pass (``block_rows``). Returns the position of that ``}`` line, its line number, the root's name, and
        either the parameters (the instructions appended to ``instructions``) or a ``_LazyBody`` that builds
        them on first use (``_lazy_body``; not for the entry computation, which every reader builds, nor for
        bodies of fewer than ``_LAZY_MIN_LINES`` lines). None (nothing appended) when any line needs the
        line-by-line loop, which then reads the body from ``pos`` again (and reports any error with its
        position)."""
        src = self.src
        found = block_rows(src, pos)
        if found is None:
            return None  # a line that is not a one-line instruction (comment, blank, continuation, ...)
        stop, matches = found
        n_lines = len(matches)
        if n_lines >= _LAZY_MIN_LINES and not is_entry and src.startswith("}\n", stop):
            lazy = self._lazy_body(matches, lineno)
            if lazy is not None:
                return stop, lineno + n_lines, lazy.root, None, lazy
        rows = self._rows(matches, lineno)
        if rows is None:
            return None
        out, root, params = rows
        instructions.extend(out)
        return stop, lineno + n_lines, root, params, None

    def _lazy_body(self, matches: list[tuple[str, ...]], lineno: int) -> _LazyBody | None:
        """Check a body read by ``_block`` without building its instructions: everything ``_rows`` and
        ``_finish`` would check of it (one instruction a line, unique names, one root, shapes, parameter
        numbers, operands naming instructions of the body, called computations as plain names), each over the
        whole body at once. Returns the ``_LazyBody`` that builds the instructions on first use, or None when a
        check fails or the body needs a closer look: the instructions are then built at once (``_rows``), and
        any error is reported from there."""
        n = len(matches)
        names = tuple(map(_G2, matches))
        name_set = set(names)
        if len(name_set) != n:
            return None
        marks = list(map(_G0, matches))
        roots = n - marks.count("")
        if roots > 1:
            return None
        root = names[marks.index("ROOT ")] if roots else names[-1]
        shapes = self.shapes
        shape_texts = list(map(_G3, matches))
        for text in set(shape_texts).difference(shapes):
            try:
                shapes[text] = r.parse_shape(text)
            except ValueError:
                return None
        opcodes = tuple(map(_G4, matches))
        opcode_set = set(opcodes)
        unknown = opcode_set.difference(KNOWN_OPCODES)
        parameter_index: dict[int, int] = {}
        if "parameter" in opcode_set:
            selected = list(map("parameter".__eq__, opcodes))
            try:
                numbers = list(map(int, map(_G5, compress(matches, selected))))
            except ValueError:
                return None
            parameter_index = dict(zip(numbers, compress(range(n), selected)))
            if len(parameter_index) != len(numbers):
                return None  # a number taken twice: left to the checks of the instructions built at once
        rests = list(map(_G6, matches))
        sigils = list(map(_G1, matches))
        if "" in sigils:  # a name printed without '%': its called computations are found by key (as in _rows)
            hint = _CALL_KEY_HINT.search
            calling = [i for i, (sigil, rest) in enumerate(zip(sigils, rests))
                       if rest and (("=%" in rest or "={%" in rest) if sigil else hint(rest))]
        else:  # (most attribute texts hold no '%' at all: found in C)
            calling = [i for i in compress(range(n), map(str.__contains__, rests, repeat("%")))
                       if "=%" in rests[i] or "={%" in rests[i]]
        called = {}
        for i in calling:
            c = self._called(rests[i], lineno + i)
            if c is None:
                return None  # a computation written in place
            if c:
                called[i] = c
        used = _used_names(matches, opcodes, unknown)
        if not name_set.issuperset(used):
            return None
        if unknown:
            self.unknown_opcodes.update(unknown.difference(ASYNC_FORMS))
        return _LazyBody(self, matches, lineno, names, opcodes, tuple(map(shapes.__getitem__, shape_texts)),
                         parameter_index, called, used, root)

    def _rows(self, matches: list[tuple[str, ...]], lineno: int,
              called_at: dict[int, dict[str, tuple[str, ...]]] | None = None
              ) -> tuple[list[HloInstruction], str, list[HloInstruction]] | None:
        """Build the instructions of ``block_rows`` rows (one a line, the first on line
        ``lineno``); return them, the root's name (``""`` when no ROOT) and the parameters. None when a row needs
        the line-by-line loop. ``called_at``: the called computations of the rows that call any, by row index,
        when ``_lazy_body`` read them already."""
        shapes = self.shapes
        known = KNOWN_OPCODES
        findall = _SIGIL_FINDALL
        new = HloInstruction
        operand_list = _operand_list
        no_calls = _NO_CALLS
        out: list[HloInstruction] = []
        append = out.append
        params: list[HloInstruction] = []
        root = ""
        ln = lineno
        # The rows come from ``block_rows``: no line ends with a value left open (`calls={`, `condition=`: the
        # body of a computation written in place) and none holds a second ` = ` (a second instruction on the
        # line); such bodies went to the line-by-line loop. (Braces left unbalanced otherwise, like quotes
        # paired across lines, are caught when the attributes are decoded; XLA never prints them.)
        for is_root, sigil, name, shape_text, opcode, operand_text, rest in matches:
            called = no_calls
            if rest and (("%" in rest and ("=%" in rest or "={%" in rest)) if sigil else _CALL_KEY_HINT.search(rest)):
                called = self._called(rest, ln) if called_at is None else called_at.get(ln - lineno, no_calls)
                if called is None:
                    return None
            shape = shapes.get(shape_text)
            if shape is None:
                try:
                    shape = shapes[shape_text] = r.parse_shape(shape_text)
                except ValueError:
                    return None
            if opcode in known:
                if operand_text[:1] == "%":
                    if "/" in operand_text:
                        operands = tuple(findall(operand_text))
                        if len(operands) != operand_text.count(", ") + 1:
                            operands = operand_list(operand_text)
                    else:
                        operands = tuple(operand_text[1:].split(", %"))
                        if len(operands) != operand_text.count(",") + 1:  # a comma left inside an operand:
                            operands = operand_list(operand_text)  # `%a,%b`, `%a, b`, operand shapes
                    inst = new(name, opcode, shape, operands, called, is_root != "", ln, "", -1, rest, self)
                elif opcode == "parameter":
                    try:
                        number = int(operand_text)
                    except ValueError:
                        return None
                    inst = new(name, opcode, shape, (), called, is_root != "", ln, "", number, rest, self)
                    params.append(inst)
                elif opcode == "constant":
                    inst = new(name, opcode, shape, (), called, is_root != "", ln, operand_text, -1, rest, self)
                else:
                    inst = new(name, opcode, shape, operand_list(operand_text) if operand_text else (), called,
                               is_root != "", ln, "", -1, rest, self)
            else:
                if opcode not in ASYNC_FORMS:
                    self.unknown_opcodes.add(opcode)
                inst = new(name, opcode, shape, operand_list(operand_text) if operand_text else (), called,
                           is_root != "", ln, "", -1, rest, self)
            if is_root:
                if root:
                    return None
                root = name
            append(inst)
            ln += 1
        return out, root, params

    def _infer_shape(self, inst: HloInstruction, before: list[HloInstruction], pos: int) -> HloInstruction:
        """Shape of an instruction printed without one, which XLA's parser infers (``ShapeInference``).

        hloscope infers what the test files of XLA leave out: elementwise ops, ``tuple``,
        ``get-tuple-element``, ``after-all``, ``while``, ``call``, ``conditional``, ``transpose``, ``pad``,
        ``concatenate``, ``dot``, ``convolution``, ``reduce``, ``reduce-window`` and ``sort``; the result has no
        layout. Any other opcode without a shape is an error.
        """
        if self.infer_for is not before:  # an index of the instructions so far, kept up to date
            self.infer_for, self.infer_index = before, {}
        by_name = self.infer_index
        if len(by_name) < len(before):
            for i in before[len(by_name):]:
                by_name[i.name] = i
        shapes = []
        for operand in inst.operands:
            found = by_name.get(operand)
            if found is None:
                raise self.error(f"operand {operand!r} of {inst.name!r} (printed without a shape) is not an "
                                 "instruction before it in this computation", pos, inst.name)
            shapes.append(found.shape)

        def root_shape(name: str) -> Shape | None:
            comp = self.done.get(name)
            return comp.root.shape if comp is not None else None

        try:
            shape = _inferred_shape(inst.opcode, shapes, inst.attributes, inst.called_computations, root_shape)
        except (ValueError, IndexError, KeyError, TypeError, AttributeError) as e:
            raise self.error(f"cannot infer the shape of {inst.name!r} ({inst.opcode}): {e}", pos,
                             inst.name) from None
        if shape is None:
            raise self.error(f"instruction {inst.name!r} has no shape, and hloscope does not infer the shape of "
                             f"{inst.opcode!r}", pos, inst.name)
        inst.shape = shape
        return inst

    # -- instructions ----------------------------------------------------------------------------------

    def _fast_instruction(self, m: re.Match[str], lineno: int, offset: int) -> HloInstruction | None:
        """Build the instruction from a one-line match, or None when the general path must decide.

        Only the structure is read here; the attribute text is kept for ``decode`` (on first access).
        """
        root, name, shape_text, opcode, operand_text, rest = m.groups()
        called = _NO_CALLS
        if rest:
            rest = rest.strip()
            if rest:
                if (rest[0] != "," or rest[-1] in ",=" or rest.count("{") != rest.count("}")
                        or rest.count('"') & 1 or " = " in rest):
                    return None  # continued on the next line, or quoting the split cannot trust
                if ("=%" in rest or "={%" in rest) if "%" in rest else _CALL_KEY_HINT.search(rest):
                    called = self._called(rest, lineno)
                    if called is None:
                        return None
        shape = self.shapes.get(shape_text)
        if shape is None:
            shape = self._shape(shape_text, m.start(3), name)
        if opcode == "parameter":
            try:
                number = int(operand_text)
            except ValueError:
                raise self.error(f"parameter number must be an integer, found {operand_text!r}",
                                 m.start(5), name) from None
            return HloInstruction(name, opcode, shape, (), called, root is not None, lineno, "", number, rest,
                                  self)
        elif opcode == "constant":
            return HloInstruction(name, opcode, shape, (), called, root is not None, lineno, operand_text, -1,
                                  rest, self)
        else:
            operands = _operand_list(operand_text) if operand_text else ()
        if opcode not in KNOWN_OPCODES and opcode not in ASYNC_FORMS:
            self.unknown_opcodes.add(opcode)
        return HloInstruction(name, opcode, shape, operands, called, root is not None, lineno, "", -1, rest, self)

    def _called(self, rest: str, lineno: int) -> dict[str, tuple[str, ...]] | None:
        """Called computations named in a one-line attribute text, or None when a value is not a plain name
        list (an inline computation: the general path handles it)."""
        called: dict[str, tuple[str, ...]] = {}
        for key, value in _CALL_KEY.findall(rest):
            if value.startswith("{") and "=" in value:
                return None
            role = CALLED_COMPUTATION_ROLES.get(key, "calls")
            names = r.name_list(value) if value.startswith("{") else (r.name_value(value),)
            called[role] = called.get(role, ()) + names
        return called

    def _general_instruction(self, pos: int, lineno: int) -> tuple[HloInstruction, int]:
        """Read one instruction token by token from ``pos``, as XLA's parser does: line breaks and comments may
        fall between any two tokens. Returns the instruction and the position just after its last token."""
        src = self.src
        skip = _SKIP.match
        m = r.INSTRUCTION_HEAD.match(src, pos)
        if m is None:
            raise self.error("expected an instruction such as '%name = f32[2]{0} add(%a, %b)'",
                             skip(src, pos).end())
        root, name = m.group(1), m.group(2)
        start = skip(src, m.end()).end()
        if r.OPCODE.match(src, start) and not src.startswith("b(", start):
            shape_text = ""  # shape omitted: XLA infers it; see _infer_shape
            pos = start
        elif src.startswith("(", start) or src.startswith("b(", start):
            end = self._matching(src.index("(", start), "(", name)
            shape_text = src[start:end + 1]
            pos = end + 1
        else:
            sm = r.ARRAY_SHAPE_LOOSE.match(src, start)
            if sm is None:
                raise self.error("expected a shape such as f32[2,3]{1,0}", start, name)
            shape_text = sm.group()
            pos = sm.end()
        shape = self.shapes.get(shape_text) if shape_text else _INFERRED
        if shape is None:
            shape = self._shape(shape_text, start, name)
        pos = skip(src, pos).end()
        om = r.OPCODE.match(src, pos)
        if om is None:
            raise self.error("expected an opcode and '(' after the shape", pos, name)
        opcode = om.group(1)
        open_paren = om.end() - 1
        close = self._matching(open_paren, "(", name)
        operand_text = src[open_paren + 1:close]
        operands = None
        if "(" in operand_text and opcode != "constant" and _NESTED_OPERAND.search(operand_text):
            operands = self._nested_operands(open_paren + 1, close, lineno)
        pairs, end = self._attribute_pairs(close + 1, name)
        return self._build(name, opcode, shape, operand_text, pairs, root is not None, lineno, m.start(2),
                           operands), end

    def _nested_operands(self, start: int, end: int, lineno: int, depth: int = 0) -> tuple[str, ...]:
        """Operands of an operand list that holds instructions written in place (``add(f32[10] parameter(0),
        multiply(a, b))``, which XLA's parser accepts): each such instruction is read, named ``<opcode>.anon``
        (``.1``, ``.2``, ... when taken, as XLA names them) and queued in ``pending`` to join the computation
        before the instruction that uses it."""
        src = self.src
        if depth > r.MAX_NESTING:
            raise self.error(f"instructions written in place nest deeper than {r.MAX_NESTING} levels", start)
        skip = _SKIP.match
        operands: list[str] = []
        for s, e in self._top_level_items(start, end):
            q = skip(src, s).end()
            if q >= e:
                continue
            shape: Shape | None = _INFERRED
            om = r.OPCODE.match(src, q)
            if om is None or om.end() > e:
                if src.startswith("(", q):
                    qq = self._matching(q, "(", "") + 1
                else:
                    sm = r.ARRAY_SHAPE_LOOSE.match(src, q)
                    qq = sm.end() if sm is not None and sm.end() <= e else q
                om = r.OPCODE.match(src, qq) if qq > q else None
                if om is None or om.end() > e:
                    operands.extend(_operand_list(src[s:e]))
                    continue
                shape_text = src[q:qq]
                shape = self.shapes.get(shape_text) or self._shape(shape_text, q, "")
            opcode = om.group(1)
            open_paren = om.end() - 1
            close = self._matching(open_paren, "(", "")
            base = f"{opcode}.anon"
            count = self.anon.get(base, 0)
            self.anon[base] = count + 1
            name = base if count == 0 else f"{base}.{count}"
            text = src[open_paren + 1:close]
            inner = None
            if "(" in text and opcode != "constant" and _NESTED_OPERAND.search(text):
                inner = self._nested_operands(open_paren + 1, close, lineno, depth + 1)
            self.pending.append(self._build(name, opcode, shape, text, [], False, lineno, q, inner))
            operands.append(name)
        return tuple(operands)

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

    def _attribute_pairs(self, pos: int, name: str) -> tuple[list[tuple[str, str]], int]:
        """Read ``, key=value`` pairs from ``pos``; return them and the position just after the last value.

        The list ends at the first token that is not a ``,`` (line breaks and comments skipped, so a list may
        continue on the next line, and a computation's ``}`` may close right after it on the same line).
        """
        src = self.src
        n = len(src)
        eol = src.find("\n", pos)
        if eol < 0:
            eol = n
        line = src[pos:eol]
        if "//" not in line and "/*" not in line:
            quick = _split_attributes(line)
            if quick is not None:
                nxt = _SKIP.match(src, eol).end()
                if nxt >= n or src[nxt] != ",":
                    return quick, eol
        skip = _SKIP.match
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
            pairs.append((km.group(1), src[vstart:vend].rstrip()))
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

    def _build(self, name: str, opcode: str, shape: Shape, operand_text: str,
               pairs: list[tuple[str, str]], is_root: bool, lineno: int, pos: int,
               nested: tuple[str, ...] | None = None) -> HloInstruction:
        """An instruction from the general path, its attributes decoded at once (``nested``: the operands
        when the operand list held instructions written in place)."""
        literal = ""
        number = -1
        if opcode == "parameter":
            try:
                number = int(operand_text)
            except ValueError:
                raise self.error(f"parameter number must be an integer, found {operand_text!r}", pos, name) from None
            operands: tuple[str, ...] = ()
        elif opcode == "constant":
            literal = operand_text
            operands = ()
        elif nested is not None:
            operands = nested
        else:
            operands = _operand_list(operand_text)
        if opcode not in KNOWN_OPCODES and opcode not in ASYNC_FORMS:
            self.unknown_opcodes.add(opcode)
        called: dict[str, tuple[str, ...]] = {}
        rest = []
        for key, value in pairs:
            if key in CALLED_COMPUTATION_ROLES or key in LIST_CALL_KEYS:
                role = CALLED_COMPUTATION_ROLES.get(key, "calls")
                if value.startswith("{") and "=" in value:
                    names: tuple[str, ...] = (self._inline_computation(f"{name}.{key}", value, pos, lineno),)
                else:
                    names = r.name_list(value) if value.startswith("{") else (r.name_value(value),)
                called[role] = called.get(role, ()) + names
            else:
                rest.append((key, value))
        inst = HloInstruction(name, opcode, shape, operands, called or _NO_CALLS, is_root, lineno, literal,
                              number, "<decoded>" if rest else "", self)
        if rest:
            inst._decoded = self._decoded(rest, name, pos)
        return inst

    def decode(self, inst: HloInstruction) -> DecodedAttributes:
        """Decode an instruction's kept attribute text (``AttributeDecoder`` protocol)."""
        text = inst.attribute_text
        pairs = None if "//" in text or "/*" in text else _split_attributes(text)
        pos = -1  # the line's offset, looked up only when needed (the table of line starts costs a pass)
        if pairs is None:
            # A string or nested value holds ", key=": scan the line properly.
            pos = self._line_pos(inst.line)
            start = self.src.find(text, pos) if text else -1
            if start < 0:
                raise self.error("cannot locate the attribute text of this instruction", pos, inst.name)
            pairs, _ = self._attribute_pairs(start, inst.name)
        pairs = [(k, v) for k, v in pairs if k not in CALLED_COMPUTATION_ROLES and k not in LIST_CALL_KEYS]
        try:
            return self._decoded(pairs, inst.name, pos, inst.line)
        except HloParseError as e:
            # Name the computation in the message (found only now: an instruction does not know its computation).
            owner = next((c.name for c in self.done.values() if any(i is inst for i in c.instructions)), "")
            raise HloParseError(e.msg, e.doc, e.pos, source=e.source, computation=owner,
                                instruction=e.instruction) from None

    def _decoded(self, pairs: list[tuple[str, str]], name: str, pos: int, line: int = 0) -> DecodedAttributes:
        """Decode ``pairs``; ``pos`` is the instruction's offset, or -1 to look it up from ``line`` for an
        error message."""
        attributes: dict[str, Any] = {}
        metadata = None
        backend_config = ""
        frontend: dict[str, str] = {}
        sharding = ""
        for key, value in pairs:
            if key == "metadata":
                metadata = self.metadata.get(value)
                if metadata is None:
                    metadata = self._metadata(value)
            elif key == "backend_config":
                backend_config = r.unquote(value) if value.startswith('"') else value
            elif key == "frontend_attributes":
                try:
                    frontend = r.frontend_attributes(value)
                except Exception as e:  # noqa: BLE001
                    pos = pos if pos >= 0 else self._line_pos(line)
                    at = self.src.find("frontend_attributes=", pos)
                    raise self.error(f"bad frontend_attributes: {e}", pos if at < 0 else at, name) from None
            elif key == "sharding":
                sharding = value
            else:
                parser = ATTRIBUTE_PARSERS.get(key)
                if parser is None:
                    attributes[key] = value
                else:
                    if "/*" in value and value[0] != '"':
                        value = r.strip_comments(value)  # `lhs_contracting_dims={/*k*/1}` (XLA test files)
                    try:
                        attributes[key] = parser(value)
                    except Exception as e:  # noqa: BLE001 - any failure of a converter is a bad value
                        pos = pos if pos >= 0 else self._line_pos(line)
                        at = self.src.find(key + "=", pos)
                        raise self.error(f"bad value for {key}: {e}", pos if at < 0 else at, name) from None
        return DecodedAttributes(attributes, metadata, backend_config, frontend, sharding)

    def _inline_computation(self, comp_name: str, body: str, pos: int, lineno: int) -> str:
        """Parse an anonymous computation written in place (``to_apply={ a = ... ROOT ... }``), which XLA's
        parser accepts; it joins the module under ``comp_name``, before the computation that calls it."""
        at = self.src.find(body, pos)
        if at < 0:  # pragma: no cover - the value was read from the text after pos
            raise self.error(f"cannot locate the computation written in place for {comp_name!r}", pos)
        if comp_name in self.done or comp_name in self.anon:
            k = 1
            while f"{comp_name}.{k}" in self.done or f"{comp_name}.{k}" in self.anon:
                k += 1
            comp_name = f"{comp_name}.{k}"
        self.anon[comp_name] = 0  # taken, also for computations written in place inside this one
        if self.inline_depth >= r.MAX_NESTING:
            raise self.error(f"computations written in place nest deeper than {r.MAX_NESTING} levels", at)
        self.inline_depth += 1
        pending, self.pending = self.pending, []
        line = lineno + self.src.count("\n", pos, at)
        try:
            comp, _, _ = self._body(comp_name, False, at + 1, line, at, line)
        finally:
            self.inline_depth -= 1
        self.pending = pending
        self.inline.append(comp)
        self.done[comp_name] = comp
        return comp_name

    def _metadata(self, value: str) -> Metadata:
        fields = r.braced_fields(value)
        op_name = fields.get("op_name", "")
        op_type = fields.get("op_type", "")
        source_file = fields.get("source_file", "")
        try:
            source_line = int(fields.get("source_line", 0))
            frame = int(fields.get("stack_frame_id", 0))
        except ValueError:
            source_line, frame = 0, 0
        source_file = r.unquote(source_file) if source_file.startswith('"') else source_file
        if not source_file and frame:
            resolved = self.frames.get(frame)
            if resolved is not None:
                source_file, source_line = resolved.file_name, resolved.line
        md = Metadata(r.unquote(op_type) if op_type.startswith('"') else op_type,
                      r.unquote(op_name) if op_name.startswith('"') else op_name,
                      source_file, source_line, frame, value)
        self.metadata[value] = md
        return md

    # -- cross references ------------------------------------------------------------------------------

    def _finish(self, name: str, header: dict[str, str], computations: list[HloComputation]) -> HloModule:
        by_name: dict[str, HloComputation] = {}
        for comp in computations:
            self.computation = comp.name
            if comp.name in by_name:
                self.computation = ""  # the message names it
                raise self.error(f"duplicate computation name {comp.name!r} (the first is at line "
                                 f"{by_name[comp.name].line})", self._locate(comp.line, comp.name))
            by_name[comp.name] = comp
            if not comp.is_built:
                continue  # checked as a whole body when read (_lazy_body)
            instructions = comp.instructions
            local = set(map(_NAME, instructions))
            if len(local) != len(instructions):
                seen: set[str] = set()
                for inst in instructions:
                    if inst.name in seen:
                        first = next(i for i in instructions if i.name == inst.name)
                        raise self.error(f"duplicate instruction name {inst.name!r} (the first is at line "
                                         f"{first.line})", self._locate(inst.line, inst.name), inst.name)
                    seen.add(inst.name)
            if not local.issuperset(chain.from_iterable(map(_OPERANDS, instructions))):
                for inst in instructions:
                    if inst.operands and not local.issuperset(inst.operands):
                        op = next(o for o in inst.operands if o not in local)
                        raise self.error(f"operand {op!r} is not an instruction of computation {comp.name!r}",
                                         self._locate(inst.line, op, after="("), inst.name)
        for comp in computations:
            self.computation = comp.name
            lazy = self.lazy.get(comp.name) if not comp.is_built else None
            if lazy is not None:
                for callee in chain.from_iterable(chain.from_iterable(c.values() for c in lazy.called.values())):
                    if callee not in by_name:
                        # Build the one instruction that names it, to say which.
                        index = next(i for i, c in lazy.called.items() if callee in chain.from_iterable(c.values()))
                        inst = comp.instruction_at(index)
                        role = next(role for role, names in inst.called_computations.items() if callee in names)
                        raise self.error(f"{role}={callee!r} names no computation of this module",
                                         self._locate(inst.line, callee, after=")"), inst.name)
                continue
            for inst in filter(_CALLED_COMPUTATIONS, comp.instructions):
                for role, names in inst.called_computations.items():
                    for callee in names:
                        if callee not in by_name:
                            raise self.error(f"{role}={callee!r} names no computation of this module",
                                             self._locate(inst.line, callee, after=")"), inst.name)
        self.computation = ""
        self.lazy = {}  # (the computations hold their bodies; once built, nothing else should keep the rows)
        entries = [c for c in computations if c.is_entry]
        if len(entries) > 1:
            raise self.error(f"more than one ENTRY computation: {entries[0].name!r}, {entries[1].name!r}",
                             self._line_pos(entries[1].line))
        entry = entries[0] if entries else computations[-1]
        return HloModule(
            name or entry.name,
            tuple(computations),
            entry.name,
            header,
            _header_int(header, "num_partitions"),
            _header_int(header, "replica_count"),
            self.frames,
            self.source,
            frozenset(self.unknown_opcodes),
        )

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


class _LazyBody:
    """``hlo.InstructionSource`` of a body that ``_Parser._lazy_body`` checked: its ``block_rows`` rows
    and the columns made from them; the instructions are built from the rows on first use."""

    __slots__ = ("parser", "rows", "line", "names", "opcodes", "shapes", "parameter_index", "called", "used",
                 "root")

    def __init__(self, parser: _Parser, rows: list[tuple[str, ...]], line: int, names: tuple[str, ...],
                 opcodes: tuple[str, ...], shapes: tuple[Shape, ...], parameter_index: dict[int, int],
                 called: dict[int, dict[str, tuple[str, ...]]], used: list[str], root: str) -> None:
        self.parser = parser
        self.rows = rows
        self.line = line
        self.names = names
        self.opcodes = opcodes
        self.shapes = shapes
        self.parameter_index = parameter_index
        #: instruction index -> called computations, for the instructions that call any.
        self.called = called
        #: every operand name, in order (``operand_names``).
        self.used = used
        self.root = root

    def build(self, index: int) -> HloInstruction:
        called = self.called.get(index)
        return self._built([self.rows[index]], self.line + index, {0: called} if called else {})[0]

    def build_all(self) -> list[HloInstruction]:
        return self._built(self.rows, self.line, self.called)

    def _built(self, rows: list[tuple[str, ...]], line: int, called: dict[int, dict[str, tuple[str, ...]]]
               ) -> list[HloInstruction]:
        if len(rows) > 1:
            with paused_gc():  # (see parse_hlo_text)
                built = self.parser._rows(rows, line, called)
        else:
            built = self.parser._rows(rows, line, called)
        if built is None:  # pragma: no cover - _lazy_body checked everything _rows checks
            raise RuntimeError(f"hloscope: could not build the instructions checked at line {line}")
        return built[0]

    def operands(self, index: int) -> tuple[str, ...]:
        row = self.rows[index]
        text = row[5]
        if text[:1] == "%" and "," not in text and "/" not in text and row[4] in KNOWN_OPCODES:
            return (text[1:],)  # one operand (bitcast, slice, ...): what _row_operands reads, sooner
        return _row_operands(row[4], text)

    def operand_names(self, indices: Iterable[int] | None = None) -> list[str]:
        if indices is None:
            return self.used
        picked = list(indices)
        picked_opcodes = list(map(self.opcodes.__getitem__, picked))
        return _used_names(list(map(self.rows.__getitem__, picked)), picked_opcodes,
                           set(picked_opcodes).difference(KNOWN_OPCODES))


def _row_operands(opcode: str, text: str) -> tuple[str, ...]:
    """Operand names of one ``block_rows`` row, read as ``_Parser._rows`` reads them."""
    if not text or opcode == "parameter" or opcode == "constant":
        return ()
    if text[0] == "%" and opcode in KNOWN_OPCODES:
        if "/" in text:
            operands = tuple(_SIGIL_FINDALL(text))
            return operands if len(operands) == text.count(", ") + 1 else _operand_list(text)
        operands = tuple(text[1:].split(", %"))
        return operands if len(operands) == text.count(",") + 1 else _operand_list(text)
    return _operand_list(text)


def _used_names(rows: list[tuple[str, ...]], opcodes: Sequence[str], unknown: set[str]) -> list[str]:
    """Every operand name of ``rows``, in order, read as ``_row_operands`` reads them row by row; over the whole
    body at once when every operand list is XLA's ``%a, %b`` (one join, one split)."""
    if not unknown:
        texts = list(filter(None, compress(map(_G5, rows), map(_NAMES_OPERANDS.__contains__, opcodes))))
        if not texts:
            return []
        joined = ", ".join(texts)
        seps = joined.count(", ")
        # Each list starts with '%', and every ',', ' ' and '%' is part of a ", %" separator: split there.
        if (joined[0] == "%" and "/" not in joined and joined.count(", %") == seps and joined.count(",") == seps
                and joined.count(" ") == seps and joined.count("%") == seps + 1):
            return joined[1:].split(", %")
    return list(chain.from_iterable(_row_operands(opcode, text) for opcode, text in zip(opcodes, map(_G5, rows))))


def _split_attributes(text: str) -> list[tuple[str, str]] | None:
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
        elif " " in value or "\t" in value:
            if not value.startswith("mesh["):
                return None
        check = r.STRING.sub("", value) if '"' in value else value
        if ('"' in check or check.count("{") != check.count("}") or check.count("(") != check.count(")")
                or check.count("[") != check.count("]")):
            return None
        pairs.append((parts[k], value))
    return pairs


def _operand_list(text: str) -> tuple[str, ...]:
    """Operand names of an operand list in any form XLA's parser takes: ``%a, %b``, ``a, b`` (no sigil), with
    operand shapes (``f32[2,3]{1,0} %a``), mixed, with ``/*index=N*/`` comments. Each name is the last token of
    its top-level comma-separated entry; an entry that is only a shape names nothing (XLA reads none)."""
    if "/" in text:
        text = r.strip_comments(text)
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


def _header_int(header: dict[str, str], key: str) -> int:
    try:
        return int(header.get(key, 1))
    except ValueError:
        return 1


def _resolve_stack_frames(tables: dict[str, dict[int, str]]) -> dict[int, StackFrame]:
    """Join the ``FileNames``/``FunctionNames``/``FileLocations``/``StackFrames`` tables (XLA
    ``StackFrameIndexProto``, printed 1-based) into frame id -> innermost file, function and line. A field that is
    missing or not a number reads as 0 (the tables are informative; a damaged row costs its location only)."""
    frames_table = tables.get("StackFrames")
    if not frames_table:
        return {}
    files = {k: r.unquote(v) if v.startswith('"') else v for k, v in tables.get("FileNames", {}).items()}
    functions = {k: r.unquote(v) if v.startswith('"') else v for k, v in tables.get("FunctionNames", {}).items()}
    locations = {k: r.braced_fields(v) for k, v in tables.get("FileLocations", {}).items()}
    frames = {}
    for frame_id, text in frames_table.items():
        fields = r.braced_fields(text)
        loc = locations.get(_int(fields.get("file_location_id")), {})
        frames[frame_id] = StackFrame(
            files.get(_int(loc.get("file_name_id")), ""),
            functions.get(_int(loc.get("function_name_id")), ""),
            _int(loc.get("line")),
            _int(fields.get("parent_frame_id")),
        )
    return frames


def _int(text: str | None) -> int:
    try:
        return int(text) if text else 0
    except ValueError:
        return 0


def _parameter_number(inst: HloInstruction) -> int:
    return inst.parameter_number


_COMPLEX_PART = {"c64": "f32", "c128": "f64"}


def _array(element_type: str, dims: list[int] | tuple[int, ...]) -> Shape:
    return Shape(element_type, tuple(dims))


def _window_out(size: int, w: Any) -> int:
    """Output extent of one window dimension (XLA ``ShapeInference::InferWindowOutputShape``)."""
    padded = (size - 1) * w.base_dilation + 1 + w.padding_low + w.padding_high if size else 0
    dilated = (w.size - 1) * w.window_dilation + 1
    return 0 if padded < dilated else (padded - dilated) // w.stride + 1


def _inferred_shape(opcode: str, shapes: list[Shape], attrs: Any, called: Any, root_shape: Any) -> Shape | None:
    """XLA's shape inference for the opcodes test files print without a shape (see ``_infer_shape``)."""
    if opcode in _SHAPE_PRESERVING:
        if opcode in ("select", "clamp"):
            base = shapes[1] if shapes[0].dims or len(shapes) < 3 else shapes[1] if shapes[1].dims else shapes[2]
            return _array(base.element_type, base.dims)
        base = shapes[0]
        if opcode in ("compare", "is-finite"):
            return _array("pred", base.dims)
        if opcode in ("real", "imag", "abs") and base.element_type in _COMPLEX_PART:
            return _array(_COMPLEX_PART[base.element_type], base.dims)
        return Shape(base.element_type, base.dims, base.dynamic_dims, base.layout)
    if opcode == "tuple":
        return Shape("tuple", tuple_shapes=tuple(shapes))
    if opcode == "get-tuple-element":
        return shapes[0].tuple_shapes[attrs["index"]]
    if opcode == "after-all":
        return Shape("token")
    if opcode == "while":
        return shapes[0]
    if opcode == "call":
        return root_shape(called["to_apply"][0])
    if opcode == "conditional":
        return root_shape(called["branch_computations"][0])
    if opcode == "sort":
        return shapes[0] if len(shapes) == 1 else Shape("tuple", tuple_shapes=tuple(shapes))
    if opcode == "transpose":
        base = shapes[0]
        return _array(base.element_type, [base.dims[d] for d in attrs["dimensions"]])
    if opcode == "concatenate":
        d = attrs["dimensions"][0]
        dims = list(shapes[0].dims)
        dims[d] = sum(s.dims[d] for s in shapes)
        return _array(shapes[0].element_type, dims)
    if opcode == "pad":
        base = shapes[0]
        dims = [max(0, p.low + p.high + n + max(0, n - 1) * p.interior) for n, p in zip(base.dims, attrs["padding"])]
        return _array(base.element_type, dims)
    if opcode == "dot":
        lhs, rhs = shapes[0], shapes[1]
        lb, lc = attrs.get("lhs_batch_dims", ()), attrs.get("lhs_contracting_dims", ())
        rb, rc = attrs.get("rhs_batch_dims", ()), attrs.get("rhs_contracting_dims", ())
        dims = [lhs.dims[d] for d in lb]
        dims += [n for d, n in enumerate(lhs.dims) if d not in lb and d not in lc]
        dims += [n for d, n in enumerate(rhs.dims) if d not in rb and d not in rc]
        return _array(_wider(lhs.element_type, rhs.element_type), dims)
    if opcode == "convolution":
        lhs, rhs = shapes[0], shapes[1]
        dn = attrs["dim_labels"]
        win = attrs.get("window", ())
        dims = [0] * len(lhs.dims)
        dims[dn.output_batch_dimension] = lhs.dims[dn.input_batch_dimension] // attrs.get("batch_group_count", 1)
        dims[dn.output_feature_dimension] = rhs.dims[dn.kernel_output_feature_dimension]
        for i, (ins, outs) in enumerate(zip(dn.input_spatial_dimensions, dn.output_spatial_dimensions)):
            dims[outs] = _window_out(lhs.dims[ins], win[i])
        return _array(_wider(lhs.element_type, rhs.element_type), dims)
    if opcode in ("reduce", "reduce-window"):
        k = len(shapes) // 2
        inputs, inits = shapes[:k], shapes[k:]
        if opcode == "reduce":
            gone = set(attrs["dimensions"])
            dims = [n for d, n in enumerate(inputs[0].dims) if d not in gone]
        else:
            dims = [_window_out(n, w) for n, w in zip(inputs[0].dims, attrs["window"])]
        outs = tuple(_array(init.element_type, dims) for init in inits)
        return outs[0] if k == 1 else Shape("tuple", tuple_shapes=outs)
    return None


def _wider(a: str, b: str) -> str:
    """The element type of a dot/convolution of ``a`` by ``b``: the wider one (XLA picks the higher
    precision type when the two differ)."""
    from hloscope.hlo import ELEMENT_BITS

    return a if ELEMENT_BITS.get(a, 0) >= ELEMENT_BITS.get(b, 0) else b
