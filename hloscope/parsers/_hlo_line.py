"""Parse one HLO instruction line, as a TPU Chrome trace (``args.long_name``) or XProf (``hlo_op_expression``)
prints it: ``%name = shape opcode(shape %a, shape %b), attrs``.

The line is parsed by hloscope's HLO text parser inside a tiny module made for it: each printed operand
becomes a parameter of its printed shape, each called computation (``calls=``, ``to_apply=``, ...) a stub,
and the instruction the ``ROOT``. Costing the result is ``hloscope.cost.trace_lines``'s job, not this one's.

Public functions:

* :func:`canonical_line` -- the line with every ``%name`` renamed by position (lines that differ only in names
  parse, and cost, the same; caches key on this form), and the original names.
* :func:`parse_line` -- the line to a :class:`ParsedLine`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

from hloscope._regex import LazyPattern

if TYPE_CHECKING:  # pragma: no cover
    from hloscope.hlo import HloInstruction, HloModule, Shape

__all__ = ["ParsedLine", "canonical_line", "parse_line"]

#: ``%name`` tokens (instruction, operand and computation names) of a line.
_SIGIL = LazyPattern(r"%([^\s,(){}=]+)")
_INDEX_COMMENT = LazyPattern(r"/\*.*?\*/", re.DOTALL)
_HEAD = LazyPattern(r"\s*(?:ROOT\s+)?%([^\s=]+)\s*=\s*")
_OPCODE = LazyPattern(r"\s*([a-z][a-z0-9\-_]*)\s*\(")
_CALLEE = LazyPattern(r"(?:^|[\s,])(?:calls|to_apply|condition|body|branch_computations|true_computation|"
                      r"false_computation|async_wrapped_computation|select|scatter|called_computations)="
                      r"(\{[^}]*\}|%[^\s,{}]+)")
_TILES = LazyPattern(r"T(?:\([^()]*\))+")
_NO_OPERANDS = frozenset({"parameter", "constant", "iota", "partition-id", "replica-id", "after-all",
                          "rng-get-and-update-state"})


def canonical_line(long_name: str) -> tuple[str, tuple[str, ...]]:
    """``long_name`` with ``/*...*/`` comments removed and every ``%name`` renamed ``%n<i>`` (i = order of first
    appearance; the instruction's own name is ``n0``), and the original names, in that order. Lines that differ
    only in names (layer 3's ``fusion.812`` and layer 4's ``fusion.815``) parse and cost the same: caches key
    on this form."""
    text = long_name.strip()
    if "/*" in text:
        text = _INDEX_COMMENT.sub("", text)
    names: dict[str, str] = {}

    def rename(m: re.Match[str]) -> str:
        n = m.group(1)
        c = names.get(n)
        if c is None:
            c = names[n] = f"n{len(names)}"
        return "%" + c

    return _SIGIL.sub(rename, text), tuple(names)


@dataclass(frozen=True)
class ParsedLine:
    """One HLO instruction line, parsed inside a tiny module made for it.

    Attributes:
        instruction: the instruction (attributes decoded by hloscope's parser on first access).
        module: the tiny module: one parameter per distinct printed operand (of its printed shape), a stub for
            each called computation (a scalar f32 ``add``), and the instruction as ``ROOT``.
        operand_shapes: the printed shape of each operand, in order (one per operand, repeats included).
    """

    instruction: HloInstruction
    module: HloModule
    operand_shapes: tuple[Shape, ...]


def _close(text: str, open_pos: int) -> int:
    """Index of the ')' matching the '(' at ``open_pos`` (strings skipped), or -1."""
    depth = 0
    i = open_pos
    n = len(text)
    while i < n:
        ch = text[i]
        if ch == '"':
            i += 1
            while i < n and text[i] != '"':
                i += 2 if text[i] == "\\" else 1
        elif ch in "({[":
            depth += 1
        elif ch in ")}]":
            depth -= 1
            if depth == 0:
                return i if ch == ")" else -1
        i += 1
    return -1


def _split_top(text: str) -> list[str]:
    """``text`` split at the commas outside brackets, pieces stripped, empty pieces dropped."""
    parts = []
    depth = 0
    start = 0
    for i, ch in enumerate(text):
        if ch in "({[":
            depth += 1
        elif ch in ")}]":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


def _stub(name: str) -> str:
    return (f"%{name} (s.a: f32[], s.b: f32[]) -> f32[] {{\n  %s.a = f32[] parameter(0)\n"
            f"  %s.b = f32[] parameter(1)\n  ROOT %s.add = f32[] add(f32[] %s.a, f32[] %s.b)\n}}\n\n")


def parse_line(long_name: str, *, tiles: bool = True) -> ParsedLine:
    """Parse one HLO instruction line as XLA prints it: ``%name = shape opcode(shape %a, ...), attrs``.

    Each operand becomes a parameter of its printed shape and each called computation a stub adding two f32
    scalars (a reducer then costs 1 FLOP per application; ``hloscope.cost.trace_lines.line_cost_detail`` never
    reports a FLOP count that depends on that assumption). Names are kept as printed. Results are cached on the
    text (parse :func:`canonical_line`'s form to share them between lines that differ only in names).

    Args:
        long_name: the line: a trace's ``args.long_name``, or an XProf ``expression`` / ``hlo_op_expression``
            (``/*index=N*/`` comments are ignored).
        tiles: keep the layouts' tiles ``T(...)``; False drops them, so every size is dense.

    Raises:
        ValueError: the text is not one instruction with printed operand shapes (the message says why).
    """
    text = long_name.strip()
    if "/*" in text:
        text = _INDEX_COMMENT.sub("", text)
    return _parse(text, tiles)


@lru_cache(maxsize=8192)
def _parse(text: str, tiles: bool) -> ParsedLine:
    from hloscope.parsers import _hlo_re as r
    from hloscope.parsers._errors import HloParseError
    from hloscope.parsers._hlo_text import parse_hlo_text

    if not tiles:
        text = _TILES.sub("", text)
    head = _HEAD.match(text)
    if head is None:
        raise ValueError("not an HLO instruction line ('%name = shape opcode(...)')")
    try:
        _, pos = r._shape_at(text, head.end())
    except ValueError as e:
        raise ValueError(f"no result shape: {e}") from None
    om = _OPCODE.match(text, pos)
    if om is None:
        raise ValueError("no opcode and '(' after the result shape")
    open_pos = om.end() - 1
    close = _close(text, open_pos)
    if close < 0:
        raise ValueError("unbalanced operand list (the line may be truncated)")
    opcode = om.group(1)
    params: list[str] = []
    shapes: list[Shape] = []
    seen: set[str] = set()
    if opcode not in _NO_OPERANDS:
        for k, piece in enumerate(_split_top(text[open_pos + 1:close])):
            try:
                oshape, opos = r._shape_at(piece, 0)
            except ValueError:
                raise ValueError(f"operand {k} ({piece[:40]!r}) has no printed shape") from None
            oname = piece[opos:].strip()
            if not oname.startswith("%") or any(c in oname for c in " \t\n"):
                raise ValueError(f"operand {k} ({piece[:40]!r}) is not 'shape %name'")
            if oname not in seen:
                seen.add(oname)
                params.append(f"  {oname} = {piece[:opos].strip()} parameter({len(params)})\n")
            shapes.append(oshape)
    callees: list[str] = []
    for value in _CALLEE.findall(text, close):
        for n in (r.name_list(value) if value.startswith("{") else (r.name_value(value),)):
            if n not in callees and "%" + n not in seen:
                callees.append(n)
    src = ("HloModule line\n\n" + "".join(_stub(c) for c in callees) + "ENTRY %line.entry {\n" + "".join(params)
           + "  ROOT " + text[head.start(1) - 1:] + "\n}\n")
    try:
        module = parse_hlo_text(src, source="<long_name>")
    except HloParseError as e:
        raise ValueError(f"hloscope's HLO parser rejects the line: {str(e).splitlines()[0]}") from None
    return ParsedLine(module.entry.root, module, tuple(shapes))
