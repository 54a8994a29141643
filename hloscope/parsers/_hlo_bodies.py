"""Whole bodies read in one pass: the rows of ``block_rows`` checked in bulk and kept (``LazyBody``), or built.

``_hlo_text._Parser._block`` reads a body XLA printed, one instruction a line, with ``block_rows``. A long body
is checked as a whole by ``_lazy_body`` -- unique names, one root, shapes, parameter numbers, operands naming
instructions of the body, called computations as plain names -- with a few passes in C over the columns of its
rows, and kept as a ``LazyBody``: the computation answers for its names, opcodes, shapes and operands from those
columns, and builds its ``HloInstruction`` objects on first use. Any other body is built at once, one short
step per row (``_rows``).
"""

from __future__ import annotations

import re
from itertools import chain, compress, repeat
from operator import itemgetter
from typing import Iterable, Sequence

from hloscope._regex import LazyPattern
from hloscope.hlo import CALLED_COMPUTATION_ROLES, HloInstruction, Shape
from hloscope._gc import paused_gc
from hloscope.parsers import _hlo_re as r
from hloscope.parsers._block_rows import build_rows
from hloscope.parsers._hlo_attrs import KNOWN_OR_ASYNC
from hloscope.parsers._hlo_instruction import CALL_KEYS, NEVER_CALLS, NO_CALLS, InstructionReader, has_call_key
from hloscope.parsers._hlo_lexer import operand_list

_SIGIL_FINDALL = r.SIGIL_NAME.findall
#: An operand's ``/*index=N*/`` comment between ", " and its ``%`` name (XLA: before every fifth operand).
_INDEX_COMMENT = LazyPattern(r", /\*index=[0-9]+\*/%")
_G0, _G1, _G2, _G3, _G4, _G5, _G6 = (itemgetter(i) for i in range(7))
#: Opcodes (``KNOWN_OR_ASYNC``) whose operand list names instructions (a parameter's holds its number, a constant's
#: its value).
_NAMES_OPERANDS = KNOWN_OR_ASYNC - {"parameter", "constant"}


class BodyReader(InstructionReader):
    """The checks of a whole body in bulk (``_lazy_body``), and the building of its rows (``_rows``)."""

    __slots__ = ()

    def _lazy_body(self, matches: list[tuple[str, ...]], lineno: int) -> LazyBody | None:
        """Check a body read by ``_block`` without building its instructions: everything ``_rows`` and
        ``_finish`` would check of it (one instruction a line, unique names, one root, shapes, parameter
        numbers, operands naming instructions of the body, called computations as plain names), each over the
        whole body at once. Returns the ``LazyBody`` that builds the instructions on first use, or None when a
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
        unknown = opcode_set.difference(KNOWN_OR_ASYNC)
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
        # The rows that name called computations (``names_calls``): ``=%`` (most attribute texts hold no '%' at
        # all: found in C), or a call key on a row of an opcode that may call.
        calling = [i for i in compress(range(n), map(str.__contains__, rests, repeat("%")))
                   if "=%" in rests[i] or "={%" in rests[i]]
        may_call = opcode_set.difference(NEVER_CALLS)
        if may_call:
            found = set(calling)
            extra = [i for i in compress(range(n), map(may_call.__contains__, opcodes))
                     if i not in found and rests[i] and has_call_key(rests[i])]
            if extra:
                calling = sorted(found.union(extra))
        called = {}
        for i in calling:
            c = self._called(rests[i], lineno + i)
            if c is None:
                return None  # a computation written in place
            if c:
                called[i] = c
        used, used_in_bulk = _used_names(matches, opcodes, unknown)
        if not name_set.issuperset(used):
            return None
        if unknown:
            self.unknown_opcodes.update(unknown)
        return LazyBody(self, matches, lineno, names, opcodes, tuple(map(shapes.__getitem__, shape_texts)),
                         parameter_index, called, used, used_in_bulk, root)

    def _rows(self, matches: list[tuple[str, ...]], lineno: int,
              called_at: dict[int, dict[str, tuple[str, ...]]] | None = None
              ) -> tuple[list[HloInstruction], str, list[HloInstruction]] | None:
        """Build the instructions of ``block_rows`` rows (one a line, the first on line
        ``lineno``); return them, the root's name (``""`` when no ROOT) and the parameters. None when a row needs
        the line-by-line loop. ``called_at``: the called computations of the rows that call any, by row index,
        when ``_lazy_body`` read them already."""
        out: list[HloInstruction] = []
        params: list[HloInstruction] = []
        root = [""]
        if not self._rows_into(matches, lineno, 0, out, params, root, called_at):
            return None
        return out, root[0], params

    def _rows_into(self, matches: list[tuple[str, ...]], lineno: int, start: int, out: list[HloInstruction],
                   params: list[HloInstruction], root: list[str],
                   called_at: dict[int, dict[str, tuple[str, ...]]] | None = None) -> bool:
        """``_rows`` from row ``start`` on, the rows before it built already (into ``out``, ``params`` and
        ``root``, the ROOT's name or ``""``, as ``build_rows`` leaves them): False when a row needs the
        line-by-line loop. (``_block_scan.read_computations`` hands over the rest of a body here.)"""
        shapes = self.shapes
        known = KNOWN_OR_ASYNC
        never_calls = NEVER_CALLS
        findall = _SIGIL_FINDALL
        new = HloInstruction
        operands_of = operand_list
        no_calls = NO_CALLS
        append = out.append
        build = build_rows  # (C: the common rows, up to the next it leaves to this loop; None without it)
        retry = k = start
        n = len(matches)
        backoff = 1  # (rows C left in a row: it is asked again after 1, 2, 4, ... of them)
        # The rows come from ``block_rows``: no line ends with a value left open (`calls={`, `condition=`: the
        # body of a computation written in place) and none holds a second ` = ` (a second instruction on the
        # line); such bodies went to the line-by-line loop. (Braces left unbalanced otherwise, like quotes
        # paired across lines, are caught when the attributes are decoded; XLA never prints them.)
        while k < n:
            if build is not None and k >= retry:
                resume = build(matches, k, lineno + k, shapes, known, never_calls, new, self, out, no_calls, params,
                               root, CALL_KEYS, CALLED_COMPUTATION_ROLES)
                if resume > k:
                    k = resume  # (the rows before it built in C: jumped, not walked)
                    backoff = 1
                    continue
                retry = k + backoff
                backoff = min(2 * backoff, 64)
            is_root, sigil, name, shape_text, opcode, operand_text, rest = matches[k]
            ln = lineno + k
            k += 1
            called = no_calls
            if rest and (("%" in rest and ("=%" in rest or "={%" in rest))  # (names_calls, inlined)
                         or (opcode not in never_calls and has_call_key(rest))):
                called = self._called(rest, ln) if called_at is None else called_at.get(ln - lineno, no_calls)
                if called is None:
                    return False
            shape = shapes.get(shape_text)
            if shape is None:
                try:
                    shape = shapes[shape_text] = r.parse_shape(shape_text)
                except ValueError:
                    return False
            if opcode in known:
                if operand_text[:1] == "%":
                    if "/" in operand_text:
                        operands = tuple(findall(operand_text))
                        if len(operands) != operand_text.count(", ") + 1:
                            operands = operands_of(operand_text)
                    else:
                        operands = tuple(operand_text[1:].split(", %"))
                        if len(operands) != operand_text.count(",") + 1:  # a comma left inside an operand:
                            operands = operands_of(operand_text)  # `%a,%b`, `%a, b`, operand shapes
                    inst = new(name, opcode, shape, operands, called, is_root != "", ln, "", -1, rest, self)
                elif opcode == "parameter":
                    try:
                        number = int(operand_text)
                    except ValueError:
                        return False
                    inst = new(name, opcode, shape, (), called, is_root != "", ln, "", number, rest, self)
                    params.append(inst)
                elif opcode == "constant":
                    inst = new(name, opcode, shape, (), called, is_root != "", ln, operand_text, -1, rest, self)
                else:
                    inst = new(name, opcode, shape, operands_of(operand_text) if operand_text else (), called,
                               is_root != "", ln, "", -1, rest, self)
            else:  # (an opcode XLA does not know: kept, and listed)
                self.unknown_opcodes.add(opcode)
                inst = new(name, opcode, shape, operands_of(operand_text) if operand_text else (), called,
                           is_root != "", ln, "", -1, rest, self)
            if is_root:
                if root[0]:
                    return False
                root[0] = name
            append(inst)
        return True


class LazyBody:
    """``hlo.InstructionSource`` of a body that ``BodyReader._lazy_body`` checked: its ``block_rows`` rows
    and the columns made from them; the instructions are built from the rows on first use."""

    __slots__ = ("parser", "rows", "line", "names", "opcodes", "shapes", "parameter_index", "called", "used",
                 "used_in_bulk", "root")

    def __init__(self, parser: BodyReader, rows: list[tuple[str, ...]], line: int, names: tuple[str, ...],
                 opcodes: tuple[str, ...], shapes: tuple[Shape, ...], parameter_index: dict[int, int],
                 called: dict[int, dict[str, tuple[str, ...]]], used: list[str], used_in_bulk: bool,
                 root: str) -> None:
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
        #: whether ``used`` was read in bulk: every operand list XLA's ``%a, %b`` (``_used_names``).
        self.used_in_bulk = used_in_bulk
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
        if text[:1] == "%" and "," not in text and "/" not in text and row[4] in KNOWN_OR_ASYNC:
            return (text[1:],)  # one operand (bitcast, slice, ...): what _row_operands reads, sooner
        return _row_operands(row[4], text)

    def operand_users(self, names: set[str]) -> dict[str, list[int]]:
        """``HloComputation.operand_users``: from ``used`` (every operand name, in order) and the number of names
        of each row, counted in bulk when every operand list is XLA's ``%a, %b``."""
        import numpy as np

        opcodes = self.opcodes
        if self.used_in_bulk:
            texts = list(map(_G5, self.rows))
            has = np.fromiter(map(bool, map(_NAMES_OPERANDS.__contains__, opcodes)), bool, len(texts)) & \
                np.fromiter(map(bool, texts), bool, len(texts))
            counts = np.where(has, np.fromiter(map(str.count, texts, repeat(", ")), np.int64, len(texts)) + 1, 0)
        else:
            counts = np.array([len(self.operands(i)) for i in range(len(opcodes))], np.int64)
        rows_of_use = np.repeat(np.arange(len(opcodes)), counts).tolist()
        out: dict[str, list[int]] = {}
        for name, row in zip(self.used, rows_of_use):
            if name in names:
                found = out.get(name)
                if found is None:
                    out[name] = [row]
                elif found[-1] != row:
                    found.append(row)
        return out

    def operand_names(self, indices: Iterable[int] | None = None) -> list[str]:
        if indices is None:
            return self.used
        picked = list(indices)
        picked_opcodes = list(map(self.opcodes.__getitem__, picked))
        return _used_names(list(map(self.rows.__getitem__, picked)), picked_opcodes,
                           set(picked_opcodes).difference(KNOWN_OR_ASYNC))[0]


def _row_operands(opcode: str, text: str) -> tuple[str, ...]:
    """Operand names of one ``block_rows`` row, read as ``BodyReader._rows`` reads them."""
    if not text or opcode == "parameter" or opcode == "constant":
        return ()
    if text[0] == "%" and opcode in KNOWN_OR_ASYNC:
        if "/" in text:
            operands = tuple(_SIGIL_FINDALL(text))
            return operands if len(operands) == text.count(", ") + 1 else operand_list(text)
        operands = tuple(text[1:].split(", %"))
        return operands if len(operands) == text.count(",") + 1 else operand_list(text)
    return operand_list(text)


def _used_names(rows: list[tuple[str, ...]], opcodes: Sequence[str], unknown: set[str]) -> tuple[list[str], bool]:
    """Every operand name of ``rows``, in order, read as ``_row_operands`` reads them row by row, and whether they
    were read over the whole body at once: when every operand list is XLA's ``%a, %b`` (one join, one split), a
    list of ``k`` separators holding ``k + 1`` names. The ``/*index=5*/`` comments XLA prints before every fifth
    operand of a long list are cut first (``_row_operands`` reads the ``%`` names around them: the same names);
    a 10,000-line body of the corpus's gemma4 had gone row by row for 32 such lists."""
    if not unknown:
        texts = list(filter(None, compress(map(_G5, rows), map(_NAMES_OPERANDS.__contains__, opcodes))))
        if not texts:
            return [], True
        joined = ", ".join(texts)
        if "/" in joined:
            joined = _INDEX_COMMENT.sub(", %", joined)
        seps = joined.count(", ")
        # Each list starts with '%', and every ',', ' ' and '%' is part of a ", %" separator: split there.
        if (joined[0] == "%" and "/" not in joined and joined.count(", %") == seps and joined.count(",") == seps
                and joined.count(" ") == seps and joined.count("%") == seps + 1):
            return joined[1:].split(", %"), True
    return list(chain.from_iterable(_row_operands(opcode, text)
                                    for opcode, text in zip(opcodes, map(_G5, rows)))), False


