"""The rows of a computation body printed the way XLA prints it: one instruction per line, read in one pass.

``block_rows(src, pos)`` is the first step of the parser's whole-body path (``_Parser._block`` in
``_hlo_text.py``). Two implementations give the same result: ``py_block_rows`` (``str.find``, ``re.findall``
and three ``str.count`` passes: the specification) and, when the optional extension ``_block_scan`` was
compiled at install (``setup.py``; it needs a C compiler), the same scan as one pass in C, about three times
faster on XLA's output (benchmarks/README.md).
``block_rows`` is the C one when present; set ``HLOSCOPE_PURE_PYTHON=1`` to use the Python one.
tests/parsers/test_block_rows.py holds the two equal on every fixture and corpus text and on mutated lines.
A change to one is a change to both; after editing the C file, rebuild it in place with ``pip install -e .``.
"""

from __future__ import annotations

import re

from hloscope._compiled import PURE_PYTHON, compiled
from hloscope._regex import LazyPattern
from hloscope.hlo import _NOTHING_DECODED as NOTHING_DECODED
from hloscope.hlo import HloInstruction

#: One whole line holding one instruction, its line break included: root marker (``ROOT `` or empty), name sigil
#: (``%`` or empty), name, shape, opcode, operands, attributes (from their ``,``, or empty; not ending in a
#: character that leaves a value open: such a line is read by the line-by-line loop). The spacing is XLA's
#: exactly (one blank around ``=`` and after the shape; other spacing takes the line-by-line path); an array
#: shape holds no blank, a tuple shape nests at most 4 levels of parentheses (layout tiles ``T(8,128)`` count).
#: The shape is validated later, by ``parse_shape``. The operand list may hold tuple shapes nested as deep, each
#: opening the list or following its ", " (XLA prints operand shapes in some dumps: ``conditional(s32[] %i, ()
#: %t)``, ``get-tuple-element((f32[], s32[]) %w)``), read by ``operand_list``; a ``(`` after anything else (an
#: operand written as an instruction in place, ``add(f32[] constant(1), %x)``) is for the line-by-line loop.
_TUPLE = r"\((?:[^()\n]|\((?:[^()\n]|\((?:[^()\n]|\([^()\n]*\))*\))*\))*\)"  # parentheses 4 deep, no line break
BLOCK_LINE = LazyPattern(
    r"^ *(ROOT )?(%?)([^\s=%]+) = "
    r"([a-z][^ \n]*|" + _TUPLE + r") "  # array, or tuple
    r"([a-z][a-z0-9\-_]*)\(((?:[^()\n]|(?:(?<=\()|(?<=, ))" + _TUPLE + r")*)\)(,[^\n]*[^\n,={\[(: \t\r]|)\n",
    re.MULTILINE,
)

Row = tuple[str, str, str, str, str, str, str]


def py_block_rows(src: str, pos: int) -> tuple[int, list[Row]] | None:
    """A computation body read in one pass: ``(stop, rows)``, where ``stop`` is the position of the first line
    from ``pos`` that starts with ``}`` and ``rows`` holds the ``BLOCK_LINE`` groups of each line before it, in
    order. None when the body needs a closer look: no such line or no line before it, an odd number of ``"``
    (a string left open, or over lines), a line that is not one ``BLOCK_LINE`` (a comment, a blank line, other
    spacing, a value continued on the next line), or a `` = `` after a line's ``name = `` that is not inside a
    string closed on that line (a second instruction on the line; ``second_equals``). A `` = `` inside a string
    (``backend_config="... = ..."``, as Transformer Engine's custom calls print) is attribute text.

    ``pos`` must follow a ``\n`` (``1 <= pos <= len(src)``); raises ``ValueError`` otherwise.
    """
    if not 1 <= pos <= len(src) or src[pos - 1] != "\n":
        raise ValueError(f"block_rows(): pos={pos} does not follow a line break")
    end = src.find("\n}", pos - 1)
    if end < pos:
        return None
    stop = end + 1
    if src.count('"', pos, stop) & 1:
        return None
    rows = BLOCK_LINE.findall(src, pos, stop)
    n = len(rows)
    if src.count("\n", pos, stop) != n:
        return None
    if src.count(" = ", pos, stop) != n:  # more than one a line somewhere: in a string, or a second instruction
        for line in src[pos:stop].split("\n"):
            if line.count(" = ") > 1 and second_equals(line, line.index(" = ") + 3):
                return None
    return stop, rows


def second_equals(line: str, start: int) -> bool:
    """Whether ``line`` (one line, no line break) holds a `` = `` from ``start`` on that is not attribute text:
    outside any ``"``-delimited string (in which ``\\`` escapes the next character, as in XLA's printed strings)
    and outside any ``backend_config={...}`` dictionary, or inside a string or such a dictionary that the line
    leaves open. (A typed-FFI custom call's ``backend_config`` is printed as an MLIR dictionary attribute,
    ``{attn_heads = 32 : i64, ...}``, as Transformer Engine's fused attention is in the corpus's llama and
    mixtral modules. A computation written in place, ``to_apply={...}``, still counts: its `` = `` is a second
    instruction.)"""
    in_string = string_equals = dict_equals = False
    depth = 0  # braces open inside a backend_config={...} dictionary
    i, n = start, len(line)
    while i < n:
        c = line[i]
        if in_string:
            if c == "\\":
                i += 1
            elif c == '"':
                in_string = string_equals = False
            elif c == "=" and line[i - 1] == " " and line[i + 1:i + 2] == " ":
                string_equals = True
        elif c == '"':
            in_string = True
        elif depth:
            if c == "{":
                depth += 1
            elif c == "}":
                depth -= 1
                if not depth:
                    dict_equals = False
            elif c == "=" and line[i - 1] == " " and line[i + 1:i + 2] == " ":
                dict_equals = True
        elif c == "{" and i - start >= _DICT_KEY_LENGTH and line.startswith(_DICT_KEY, i - _DICT_KEY_LENGTH):
            depth = 1
        elif c == "=" and i > start and line[i - 1] == " " and line[i + 1:i + 2] == " ":
            return True
        i += 1
    return string_equals or dict_equals


#: The attribute whose ``{...}`` value may hold `` = `` (``second_equals``).
_DICT_KEY = "backend_config="
_DICT_KEY_LENGTH = len(_DICT_KEY)


#: The C scanner, or None when the extension was not built.
c_block_rows = compiled("hloscope.parsers._block_scan", "block_rows")
block_rows = py_block_rows if c_block_rows is None or PURE_PYTHON else c_block_rows
#: The C builder of the common rows of ``_hlo_bodies.BodyReader._rows`` (``build_rows`` in ``_block_scan.c``;
#: other operand lists, computations written in place, unknown opcodes and shape texts are left to the Python loop,
#: which it equals on the rows it builds), or None: then the loop builds every row.
build_rows = None if PURE_PYTHON else compiled("hloscope.parsers._block_scan", "build_rows")
_set_instruction_class = None if build_rows is None else compiled("hloscope.parsers._block_scan",
                                                                   "set_instruction_class")
#: Whether ``build_rows`` makes ``HloInstruction`` objects itself, its slots filled as ``__init__`` fills them,
#: instead of calling the class (``set_instruction_class`` in ``_block_scan.c``; False without the extension, or
#: when the class's slots are not the twelve it knows).
instructions_made_in_c = _set_instruction_class is not None and bool(
    _set_instruction_class(HloInstruction, NOTHING_DECODED))
#: The C reader of whole computations that take the fast paths of ``_hlo_text._Parser._computation`` (a one-line
#: header, a body ``block_rows`` reads -- the rows ``build_rows`` leaves built by ``BodyReader._rows_into`` --, a
#: "}" line), checked as ``_finish`` checks a body and made into ``HloComputation`` objects, one after the other
#: (``read_computations`` in ``_block_scan.c``), or None: then the parser reads each computation itself.
read_computations = None if PURE_PYTHON else compiled("hloscope.parsers._block_scan", "read_computations")
