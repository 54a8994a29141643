"""One instruction: from a one-line match (``_fast_instruction``), or token by token (``_general_instruction``).

The token path reads anything XLA's parser reads: a value over several lines, comments between tokens,
instructions written in place as operands (``_nested_operands``), computations written in place as attribute
values (``_inline_computation``), shapes left out (``INFERRED``, see ``_hlo_infer``). ``_called`` reads the
called computations of a one-line attribute text; ``_build`` makes an instruction of the token path, its
attributes decoded at once.
"""

from __future__ import annotations

import re

from hloscope._regex import LazyPattern
from hloscope.hlo import CALLED_COMPUTATION_ROLES, HloComputation, HloInstruction, Shape
from hloscope.parsers import _hlo_re as r
from hloscope.parsers._hlo_attrs import KNOWN_OPCODES, KNOWN_OR_ASYNC, LIST_CALL_KEYS
from hloscope.parsers._hlo_decode import Decoder
from hloscope.parsers._hlo_infer import INFERRED
from hloscope.parsers._hlo_lexer import SKIP, operand_list

#: The called computations of an instruction that calls none (shared: never written to).
NO_CALLS: dict[str, tuple[str, ...]] = {}
#: The attribute keys that name called computations, longest first: ``_CALL_KEY``'s alternatives, in its order
#: (``build_rows`` in _block_scan.c reads them in the same order).
CALL_KEYS = tuple(sorted(set(CALLED_COMPUTATION_ROLES) | LIST_CALL_KEYS, key=lambda k: (-len(k), k)))
_CALL_KEY_PROBES = tuple(k + "=" for k in CALL_KEYS)


def has_call_key(text: str) -> bool:
    """Cheap test for an attribute naming a called computation (then ``_CALL_KEY`` reads it exactly): whether
    some ``key=`` of a call key occurs in ``text``, as the regex ``(?:calls|to_apply|...)=`` would find -- one
    substring search per key, several times faster than that alternation over a long metadata text (issue
    #16)."""
    for probe in _CALL_KEY_PROBES:
        if probe in text:
            return True
    return False


#: Known opcodes whose instruction never names a called computation (XLA: only call, conditional, while, fusion,
#: map, reduce, reduce-window, scan, scatter, select-and-scatter, sort, all-reduce(-start), reduce-scatter,
#: custom-call and the async ops take one; XLA's parser refuses a call key on any other). XLA prints called
#: computations with '%' where it prints names with it (``calls=%f``); a hand-written text may not
#: (``true_computation=T``, or no '%' anywhere): for a line of any other opcode without ``=%``, ``has_call_key``
#: looks for the keys (``names_calls``).
NEVER_CALLS = KNOWN_OPCODES - {"call", "conditional", "while", "fusion", "map", "reduce", "reduce-window", "scan",
                               "scatter", "select-and-scatter", "sort", "all-reduce", "all-reduce-start",
                               "reduce-scatter", "custom-call", "async-start", "async-update", "async-done"}


def names_calls(opcode: str, rest: str) -> bool:
    """Whether a line names called computations in its attribute text ``rest`` (then ``_called`` reads them):
    ``=%`` or ``={%``, or, for an opcode that may call, a call key. (One rule for every path of the parser:
    the block scanner's rows, the line-by-line loop and its fast path.)"""
    return "=%" in rest or "={%" in rest or (opcode not in NEVER_CALLS and has_call_key(rest))


_CALL_KEY = LazyPattern(r"(?:^|,)\s*(%s)=(\{[^}]*\}|[^\s,]+)" % "|".join(map(re.escape, CALL_KEYS)))
#: An instruction written in place as an operand: an opcode right before '(' (not part of a name).
_NESTED_OPERAND = LazyPattern(r"(?<![\w.%\-])[a-z][a-z0-9\-_]*\s*\(")


class InstructionReader(Decoder):
    """The reads of one instruction."""

    __slots__ = ()

    def _body(self, comp_name: str, is_entry: bool, pos: int, lineno: int, header_pos: int,
              start_line: int) -> tuple[HloComputation, int, int]:
        """Read a computation's body (``_hlo_text._Parser._body``; a computation written in place is one)."""
        raise NotImplementedError  # pragma: no cover - _Parser defines it

    def _fast_instruction(self, m: re.Match[str], lineno: int, offset: int) -> HloInstruction | None:
        """Build the instruction from a one-line match, or None when the general path must decide.

        Only the structure is read here; the attribute text is kept for ``decode`` (on first access).
        """
        root, name, shape_text, opcode, operand_text, rest = m.groups()
        called = NO_CALLS
        if rest:
            rest = rest.strip()
            if rest:
                if (rest[0] != "," or rest[-1] in ",=" or rest.count("{") != rest.count("}")
                        or rest.count('"') & 1 or " = " in rest):
                    return None  # continued on the next line, or quoting the split cannot trust
                if names_calls(opcode, rest):
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
            operands = operand_list(operand_text) if operand_text else ()
        if opcode not in KNOWN_OR_ASYNC:
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
        skip = SKIP.match
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
        shape = self.shapes.get(shape_text) if shape_text else INFERRED
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
        skip = SKIP.match
        operands: list[str] = []
        for s, e in self._top_level_items(start, end):
            q = skip(src, s).end()
            if q >= e:
                continue
            shape: Shape | None = INFERRED
            om = r.OPCODE.match(src, q)
            if om is None or om.end() > e:
                if src.startswith("(", q):
                    qq = self._matching(q, "(", "") + 1
                else:
                    sm = r.ARRAY_SHAPE_LOOSE.match(src, q)
                    qq = sm.end() if sm is not None and sm.end() <= e else q
                om = r.OPCODE.match(src, qq) if qq > q else None
                if om is None or om.end() > e:
                    operands.extend(operand_list(src[s:e]))
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
            operands = operand_list(operand_text)
        if opcode not in KNOWN_OR_ASYNC:
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
        inst = HloInstruction(name, opcode, shape, operands, called or NO_CALLS, is_root, lineno, literal,
                              number, "<decoded>" if rest else "", self)
        if rest:
            inst._decoded = self._decoded(rest, name, pos)
        return inst

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

