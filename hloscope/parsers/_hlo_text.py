"""Reader of XLA's HLO text (``HloModule::ToString``) into the ``hloscope.hlo`` model.

It reads everything XLA's own parser (``xla/hlo/parser/hlo_parser.cc``) reads -- tests/parsers/test_corpus.py
holds it to that on ~7,600 real texts -- and is fast where it matters, on XLA's own output. Three paths:

  1. Whole bodies (``_Parser._block``): a computation as XLA prints it, one instruction per line with XLA's
     spacing, is read in one pass (``_block_rows.block_rows``: compiled, or ``re.findall``). Its rows are then
     checked as a whole -- unique names, one root, shapes, parameter numbers, operands naming instructions of
     the body, called computations as plain names -- with a few passes in C over their columns
     (``_hlo_bodies``: ``_lazy_body``), and the computation keeps them (``LazyBody``): it answers for its names,
     opcodes, shapes and operands from them, and builds its ``HloInstruction`` objects only on first use
     (``HloComputation``). The cost model reads fused computations through those columns and never builds most
     of them. A body whose check fails is built at once, one short step per instruction (``_hlo_bodies``:
     ``_rows``), or read by the next path.
  2. Lines (the loop in ``_Parser._body``): one regex match per line (``_hlo_re.INSTRUCTION_FAST``) for bodies
     with comments, blank lines or other spacing.
  3. Tokens (``_hlo_instruction``: ``_general_instruction``): anything else -- a value over several lines,
     comments between tokens, several instructions on a line, instructions written in place as operands, shapes
     left out (they are inferred, ``_hlo_infer``), computations written in place -- as XLA's lexer reads it
     (``_hlo_lexer``), over absolute positions, jumping between brackets and quotes with ``re.search``.

Attributes are kept as text and decoded on first access (``_hlo_decode``), shapes and metadata are parsed once
per distinct text, and cross-references (operands, called computations) are checked in one pass at the end
(``_Parser._finish``). Every failure is an ``HloParseError`` naming the source, line, column, computation and
instruction.

This module holds the entry point and the grammar of modules and computations (``_Parser``); the parser's other
parts are the classes it is built on, one module each, bottom up: ``_hlo_lexer.ParserBase`` (the state of a
parse, errors, lexical reads), ``_hlo_decode.Decoder`` (attributes, metadata, stack frames),
``_hlo_infer.ShapeInference``, ``_hlo_instruction.InstructionReader`` (paths 2 and 3, one instruction) and
``_hlo_bodies.BodyReader`` (path 1).
"""

from __future__ import annotations

import re
import weakref
from itertools import chain, compress, repeat
from operator import attrgetter, is_, itemgetter, methodcaller

from hloscope._regex import LazyPattern
from hloscope.hlo import CALLED_COMPUTATION_ROLES, ELEMENT_BITS, HloComputation, HloInstruction, HloModule
from hloscope._compiled import PURE_PYTHON, compiled
from hloscope._gc import paused_gc
from hloscope.parsers import _hlo_re as r
from hloscope.parsers._block_rows import block_rows, read_computations
from hloscope.parsers._hlo_attrs import KNOWN_OR_ASYNC
from hloscope.parsers._hlo_bodies import BodyReader, LazyBody
from hloscope.parsers._hlo_decode import resolve_stack_frames
from hloscope.parsers._hlo_infer import INFERRED, ShapeInference
from hloscope.parsers._hlo_instruction import CALL_KEYS, NEVER_CALLS, NO_CALLS, names_calls
from hloscope.parsers._hlo_lexer import SKIP, operand_list

_SIGIL_FINDALL = r.SIGIL_NAME.findall
_NAME = attrgetter("name")
#: Bodies of fewer lines are built at once. Below it, the checks in bulk and the column reads of the cost model
#: cost more per body than building its instructions: with 16, the fixtures' transformer modules (bodies of
#: 20-60 lines) costed 15-20% slower than when built at once, and the plugin's analysis of them 5-15% slower
#: (benchmarks/plugin_overhead.py); with 128 the plugin's analysis is back within a few percent of building
#: everything (the cost model's column reads remain ~1 ms slower on them), and the 52 MB module of
#: benchmarks/parse.py keeps 90% of its instructions in lazy bodies.
_LAZY_MIN_LINES = 128
#: Opcodes XLA puts in no fused computation: control flow and calls, collectives, host transfers and async pairs
#: (its fusion passes fuse none of them). Not ``fusion``: TPU output fusions hold nested fusions.
_NEVER_FUSED = frozenset({
    "while", "call", "conditional", "async-start", "async-update", "async-done", "send", "send-done", "recv",
    "recv-done", "infeed", "outfeed", "after-all", "all-reduce", "all-gather", "reduce-scatter", "all-to-all",
    "ragged-all-to-all", "collective-permute", "collective-broadcast", "all-reduce-start", "all-reduce-done",
    "all-gather-start", "all-gather-done", "collective-permute-start", "collective-permute-done",
})
_G3 = itemgetter(3)
_G4 = itemgetter(4)


def _not_fused(matches: list[tuple[str, ...]]) -> bool:
    """Whether a body (``block_rows`` rows) is surely no fused computation: it holds an opcode of
    ``_NEVER_FUSED``, or it reads one tuple-shaped parameter, as a while loop's body and condition do (XLA gives a
    fusion its operands' arrays as parameters). Such a body -- a loop body, a branch, a called computation -- is
    costed by every cost walk, so ``_block`` builds it at once instead of checking it in bulk and building it on
    first use (``_lazy_body`` then ``LazyBody.build_all``: ~1 us an instruction more); only fused computations of
    one structure share a cost without being built (cost/structure.py). A wrong guess costs speed, never a
    result: the two paths make the same instructions. Measured: the corpus's gemma4 module, whose scanned layer is
    a 10,000-line while body, analyzed ~10% faster; the 52 MB module of benchmarks/parse.py unchanged."""
    opcodes = list(map(_G4, matches))
    if not _NEVER_FUSED.isdisjoint(opcodes):
        return True
    if opcodes.count("parameter") != 1:
        return False
    return _G3(matches[opcodes.index("parameter")]).startswith("(")


_OPERANDS = attrgetter("operands")
_CALLED_COMPUTATIONS = attrgetter("called_computations")
_VALUES = methodcaller("values")


#: A computation's instructions, None while its body is lazy (``HloComputation.is_built``).
_BODY = attrgetter("_instructions")
_TABLE_NAMES = frozenset({"FileNames", "FunctionNames", "FileLocations", "StackFrames"})
_TABLE_ROW = LazyPattern(r"[ \t]*(\d+)[ \t]+([^\n]*?)[ \t\r]*$", re.MULTILINE)
#: The lines from a position that each match ``_TABLE_ROW`` (a number, white space, the rest of the line).
_TABLE_BLOCK = LazyPattern(r"(?:[ \t]*\d+[ \t][^\n]*(?:\n|\Z))*")
_FIRST = itemgetter(0)
_SECOND = itemgetter(1)
#: ``INSTRUCTION_FAST`` anchored to end at a line end (the match covers exactly one line).
_INSTRUCTION_LINE = LazyPattern(r.INSTRUCTION_FAST.pattern + r"(?=\n|\Z)", re.VERBOSE)
_MODULE_HEADER = LazyPattern(r"\s*HloModule[ \t]+([^\s,]+)")
_MODULE_SEPARATOR = LazyPattern(r"^//[ \t]*-----[^\n]*$", re.MULTILINE)
_MODULE_KEYWORD = LazyPattern(r"HloModule\s")
_AFTER_ENTRY = frozenset(" \t\r\n%/")
_COMPUTATION_NAME = LazyPattern(r"%?([^\s(){}=%,/\"]+)")
#: The start of a one-line computation header, up to its parameter list (``_computation_header``).
_HEADER_LINE = LazyPattern(r"(ENTRY[ \t]+)?%?([^\s(){}=%,/\"]+)[ \t]*\(")


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


class _Parser(BodyReader, ShapeInference):
    """One parse: the module and computation grammar over the reads of its bases (``_hlo_lexer``,
    ``_hlo_decode``, ``_hlo_infer``, ``_hlo_instruction``, ``_hlo_bodies``)."""

    __slots__ = ()

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
        skip = SKIP.match
        while True:
            p = skip(src, pos).end()
            if p > pos:
                lineno += src.count("\n", pos, p)
                pos = p
            if pos >= n:
                break
            ch = src[pos]
            if ch == "/":  # what SKIP left: an unterminated comment, or a lone '/'
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
                self.frames.update(resolve_stack_frames(tables))
            if read_computations is not None:  # (C: this computation and those after it that take every fast path)
                read = len(computations)
                pos, lineno = read_computations(src, pos, lineno, _LAZY_MIN_LINES, self.shapes, r.parse_shape,
                                                KNOWN_OR_ASYNC, NEVER_CALLS, HloInstruction, self, NO_CALLS, CALL_KEYS,
                                                CALLED_COMPUTATION_ROLES, HloComputation, computations,
                                                self._rows_into)
                if len(computations) > read:
                    made = computations[read:]
                    self.done.update(zip(map(_NAME, made), made))
                    self.checked.update(map(id, made))
                    continue
            comp, pos, lineno = self._computation(pos, lineno)
            for inline in self.inline:
                computations.append(inline)
            self.inline.clear()
            computations.append(comp)
            self.done[comp.name] = comp
        if not computations:
            raise self.error("expected at least one computation ('ENTRY %name (...) -> shape {')", n)
        if tables and not self.frames:
            self.frames.update(resolve_stack_frames(tables))
        return self._finish(name, header, computations)

    def _module_header(self, offset: int) -> tuple[str, dict[str, str], int]:
        src = self.src
        m = _MODULE_HEADER.match(src, offset)
        if m is None:
            raise self.error("expected 'HloModule <name>'", offset)
        # Token by token: in a module printed on one line (`HloModule m, entry_computation_layout={...} ENTRY e
        # {...}`) the rest of the line is not all header. (XLA's headers of more than 5 parameters hold
        # `/*index=N*/` comments, and were always read so.)
        pairs, end = self._attribute_pairs(m.end(), "", quick=False)
        return m.group(1), dict(pairs), end

    def _table(self, pos: int, lineno: int, rows: dict[int, str]) -> tuple[int, int]:
        src = self.src
        # (the block's rows by one match and one findall: a match a row was half the parse of a small module)
        end = _TABLE_BLOCK.match(src, pos).end()
        found = _TABLE_ROW.findall(src, pos, end)
        numbers = list(map(_FIRST, found))
        if max(map(len, numbers), default=0) <= 18:
            rows.update(zip(map(int, numbers), map(_SECOND, found)))
            if end == len(src) and found and not src.endswith("\n"):
                end += 1  # (as the loop below leaves a last row without a line break)
            return end, lineno + len(found)
        while pos < len(src):  # (the loop names the row of too many digits)
            m = _TABLE_ROW.match(src, pos)
            if m is None:
                break
            if len(m.group(1)) > 18:  # (an index; int() refuses one of thousands of digits with a bare ValueError)
                raise self.error(f"a table row number of {len(m.group(1))} digits: expected an index", m.start(1))
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
        skip = SKIP.match
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
        known = KNOWN_OR_ASYNC
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
                    called = NO_CALLS
                    if rest and names_calls(opcode, rest):
                        called = self._called(rest, lineno)
                    if called is not None:
                        shape = shapes.get(shape_text)
                        if shape is None:
                            shape = self._shape(shape_text, m.start(3), name)
                        operands = findall(operand_text)
                        if len(operands) != operand_text.count(", ") + 1:
                            operands = operand_list(operand_text)  # mixed `%a, b`, or no blank after ','
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
                    if nested.shape is INFERRED:
                        nested = self._infer_shape(nested, instructions, pos)
                    append(nested)
                self.pending.clear()
            if inst.shape is INFERRED:
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
               ) -> tuple[int, int, str, list[HloInstruction] | None, LazyBody | None] | None:
        """The fast path for a whole body: when every line from ``pos`` (a line start) to the first ``}`` at the
        start of a line is a complete one-line instruction -- as in every computation XLA prints -- read them all
        in one pass (``block_rows``). Returns the position of that ``}`` line, its line number, the root's name, and
        either the parameters (the instructions appended to ``instructions``) or a ``LazyBody`` that builds
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
        if (n_lines >= _LAZY_MIN_LINES and not is_entry and src.startswith("}\n", stop)
                and not _not_fused(matches)):
            lazy = self._lazy_body(matches, lineno)
            if lazy is not None:
                return stop, lineno + n_lines, lazy.root, None, lazy
        rows = self._rows(matches, lineno)
        if rows is None:
            return None
        out, root, params = rows
        instructions.extend(out)
        return stop, lineno + n_lines, root, params, None

    # -- cross references ------------------------------------------------------------------------------

    def _finish(self, name: str, header: dict[str, str], computations: list[HloComputation]) -> HloModule:
        # (in bulk first, by C-level passes -- a module holds thousands of small computations, a reducer per
        # reduce --; a failed check goes through the loops below, which name the first offender)
        by_name: dict[str, HloComputation] = dict(zip(map(_NAME, computations), computations))
        if len(by_name) != len(computations):
            by_name = {}
            for comp in computations:
                if comp.name in by_name:
                    self.computation = ""  # (the message names it)
                    raise self.error(f"duplicate computation name {comp.name!r} (the first is at line "
                                     f"{by_name[comp.name].line})", self._locate(comp.line, comp.name))
                by_name[comp.name] = comp
        # Each computation's instructions, None for a lazy body (``is_built``), read by a C-level map: a module
        # holds thousands of computations, and three passes of properties over them were ~8% of mixtral's parse.
        bodies_of = list(map(_BODY, computations))
        # (the built ones not checked as a whole body when read -- _lazy_body, read_computations --; an empty body
        # has nothing to check)
        unchecked = set(map(id, compress(computations, bodies_of))).difference(self.checked)
        for comp in compress(computations, map(unchecked.__contains__, map(id, computations))) if unchecked else ():
            self.computation = comp.name
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
        bodies = list(filter(None, bodies_of))  # (an empty body calls nothing)
        called = c_called_names(bodies) if c_called_names is not None else None
        if called is None:
            called = py_called_names(bodies)
        every_callee_known = called <= by_name.keys()
        for comp in (computations if not every_callee_known
                     else compress(computations, map(is_, bodies_of, repeat(None)))):
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
        module = HloModule(
            name or entry.name,
            tuple(computations),
            entry.name,
            header,
            _header_int(header, "num_partitions"),
            _header_int(header, "replica_count"),
            self.frames,
            self.source,
            frozenset(self.unknown_opcodes),
            _unknown_element_types(self.shapes.values()),
            by_name,
        )
        # Every instruction keeps this parser (its decoder): from now on the parser keeps the module's computations
        # only through the module's weak reference, and none of its instructions (the index of the last shape
        # inference), so that dropping the module frees it by reference counting instead of leaving a cycle for
        # the collector's next full pass. (A lazy body is built without inference: its rows all have shapes.)
        self.done = ModuleComputations(module)
        self.infer_for, self.infer_index = None, {}
        return module


class ModuleComputations:
    """A parsed module's computations by name (``get``, ``values``, ``in``: what the parser reads of its ``done``
    dict), read through a weak reference to the module: after the parse the parser reads them only to name the
    computation of an instruction whose attributes fail to decode, and must not keep them alive (each instruction
    keeps the parser). Once the module is freed there are none."""

    __slots__ = ("_module",)

    def __init__(self, module: HloModule) -> None:
        self._module = weakref.ref(module)

    def get(self, name: str, default: HloComputation | None = None) -> HloComputation | None:
        module = self._module()
        return default if module is None else module._by_name.get(name, default)

    def values(self) -> tuple[HloComputation, ...]:
        module = self._module()
        return () if module is None else module.computations

    def __contains__(self, name: object) -> bool:
        return self.get(name) is not None  # type: ignore[arg-type]


def py_called_names(bodies: list[tuple[HloInstruction, ...]]) -> set[str]:
    """The names the instructions of ``bodies`` call: every name in the values of their ``called_computations``
    (``_block_scan.c`` ``called_names`` is this in one C pass; tests/parsers/test_read_computations.py holds the
    two equal)."""
    return set(chain.from_iterable(chain.from_iterable(map(_VALUES, filter(None, map(
        _CALLED_COMPUTATIONS, chain.from_iterable(bodies)))))))


#: ``py_called_names`` in C, or None when the extension was not built (or under ``HLOSCOPE_PURE_PYTHON``).
c_called_names = None if PURE_PYTHON else compiled("hloscope.parsers._block_scan", "called_names")


def _header_int(header: dict[str, str], key: str) -> int:
    try:
        return int(header.get(key, 1))
    except ValueError:
        return 1


def _parameter_number(inst: HloInstruction) -> int:
    return inst.parameter_number


def _unknown_element_types(shapes) -> frozenset[str]:
    """Element types of the arrays of ``shapes`` (the distinct result shapes a parse read) that ``ELEMENT_BITS``
    does not hold."""
    return frozenset({leaf.element_type for shape in shapes for leaf in shape.leaves()}.difference(ELEMENT_BITS))
