"""Computations that cost the same: a key of what the cost rules read of a computation, its names left out.

A model's layers compile to fused computations that differ only in their names (``%fused_computation.12``,
``%add.345``) and metadata (``op_name`` holds the layer's path): the 8-layer transformer of
``benchmarks/plugin_overhead.py`` prints 731 fused computations on the CPU backend and 839 deviceless on TPU
v5e, of 59 and 54 structures. ``_Analyzer`` (``cost/module.py``) costs one computation of each structure --
its work (``computation_work``) and its boundary bytes (``FusionBytes``) -- and hands that to the others.

Two computations with the same ``StructureKeys.key`` have, instruction by instruction, the same opcode, the
same result shape object (the parser interns shapes by their text, layout included), the same operands as
positions in the body, the same parameter number and literal, the same root, called computations of the same
keys in the same roles, and the same attribute text once the ``metadata={...}`` value is cut out and each
called computation's name is masked. A cost rule reads nothing else of an instruction (no rule reads a name,
a line or the metadata: tests/cost/test_structure.py costs every fixture and corpus module with and without
the shared costs and compares every row), so equal keys give equal costs. The key is conservative: where it
cannot be sure -- a body kept lazy by the parser (not built; the key would build it), an instruction whose
attributes were decoded at parse time (its text is a placeholder), a called computation's name found in its
caller's text more often than it is called, a metadata value ``attribute_value`` cannot delimit alone -- it
is None and the computation is costed on its own.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Callable, Sequence

from hloscope._compiled import PURE_PYTHON, compiled
from hloscope._regex import LazyPattern
from hloscope.parsers._attribute_value import KNOWN
from hloscope.parsers._attribute_value import attribute_value as _attribute_value

if TYPE_CHECKING:
    from hloscope.hlo import HloInstruction, HloModule

#: The attribute text of an instruction decoded when it was parsed (``parsers._hlo_instruction``): not its text.
_PLACEHOLDER = "<decoded>"
#: What a called computation's name is replaced with in its caller's attribute text (no name holds it).
_MASK = "\x00"
#: ``py_structure_fields``'s mark of a text not yet in ``bare``.
_MISSING = object()


class StructureKeys:
    """``key(name)``: a small int per distinct structure of the module's computations (see the module
    docstring), or None where the key cannot be sure; made on first use and kept.

    Args:
        module: the parsed module.
        texts: a memo of ``without_metadata`` to fill and read (the cost walk's, shared with ``attribute_key``);
            a new one when None.
    """

    __slots__ = ("module", "_by_name", "_ids", "_texts")

    def __init__(self, module: HloModule, texts: dict[str, str | None] | None = None) -> None:
        self.module = module
        self._by_name: dict[str, int | None] = {}
        self._ids: dict[tuple, int] = {}
        #: attribute text -> the text without its metadata value (a layer repeats the texts of the one before
        #: whenever its metadata is the same); ``texts``, when given, is shared with ``attribute_key``'s memo.
        self._texts: dict[str, str | None] = {} if texts is None else texts

    def key(self, name: str) -> int | None:
        """The structure id of computation ``name``, or None. Raises KeyError for a name the module lacks."""
        try:
            return self._by_name[name]
        except KeyError:
            pass
        found = self._by_name[name] = self._make(name)
        return found

    def _make(self, name: str) -> int | None:
        comp = self.module.computation(name)
        if not comp.is_built:
            return None
        return (py_structure_key if PURE_PYTHON else c_structure_key or py_structure_key)(
            comp.instructions, comp.name_index(), self._texts, without_metadata, self.key, self._ids, comp.root_index)


def py_structure_key(insts: Sequence[HloInstruction], index: dict[str, int], bare: dict[str, str | None],
                     without_metadata: Callable[[str], str | None], key_of: Callable[[str], int | None],
                     ids: dict[tuple, int], root_index: int) -> int | None:
    """The structure id of a computation of instructions ``insts`` (its name -> position map ``index``, its
    root at ``root_index``): its ``py_structure_fields``, each called computation's name masked in its caller's
    text and that computation's key (``key_of``: ``StructureKeys.key``) in its role, the whole looked up in
    ``ids`` (key -> id), a new id (``len(ids)``) kept there when it is not. None where the key cannot be sure: a
    field it cannot read, a called computation's name found in the text more often than it is called, a callee
    without a key. (``_cost_walk.c`` ``structure_key`` is its C form; tests hold the two equal.)"""
    read = py_structure_fields(insts, index, bare, without_metadata)
    if read is None:
        return None
    fields, calling = read
    callees: list = []
    for k, at in calling:
        calls = insts[k].called_computations
        text = fields[at]
        called = [callee for names in calls.values() for callee in names]
        distinct = set(called)
        if any(text.count(callee) != called.count(callee) for callee in distinct):
            return None  # (a called computation's name is also part of something else the text holds)
        for callee in distinct:
            text = text.replace(callee, _MASK)
        fields[at] = text
        keys = []
        for role, names in calls.items():
            found = tuple(map(key_of, names))
            if None in found:
                return None
            keys.append((role, found))
        callees.append((k, tuple(keys)))
    key = (tuple(fields), tuple(callees), root_index)
    found = ids.get(key)
    if found is None:
        found = ids[key] = len(ids)
    return found


def py_structure_fields(insts: Sequence[HloInstruction], index: dict[str, int], bare: dict[str, str | None],
                        without_metadata: Callable[[str], str | None]) -> tuple[list, list] | None:
    """What ``StructureKeys`` keys a computation by, instruction by instruction: ``(fields, calls)``. ``fields``
    holds, per instruction in order, its opcode, ``id(shape)``, its number of operands, each operand's position
    (``index[name]``), its attribute text without metadata (``bare[text]``, else ``without_metadata(text)``,
    then kept in ``bare``), its literal and its parameter number; ``calls`` holds ``(instruction index, position
    of its text in fields)`` for each instruction with called computations. None when an operand is not in
    ``index`` or a text's bare form is None. (``_cost_walk.c`` ``structure_fields`` is its C form; tests hold
    the two equal.)"""
    fields: list = []
    calls: list = []
    for i, inst in enumerate(insts):
        operands = inst.operands
        fields += (inst.opcode, id(inst.shape), len(operands))
        for name in operands:
            at = index.get(name)
            if at is None:
                return None
            fields.append(at)
        text = inst.attribute_text
        b = bare.get(text, _MISSING)
        if b is _MISSING:
            b = bare[text] = without_metadata(text)
        if b is None:
            return None
        if inst.called_computations:
            calls.append((i, len(fields)))
        fields += (b, inst.literal, inst.parameter_number)
    return fields, calls


def attribute_key(inst: HloInstruction, shape_of: Callable[[str], object], work: Callable[[str], object],
                  collective: bool, bare: dict[str, str | None]) -> tuple | None:
    """A key under which instructions of one computation cost the same, for an opcode whose rule reads
    attributes and called computations besides shapes (a dot, a reduce, a collective, a custom call): the
    opcode, ``id`` of the result shape and of each operand's (``shape_of``: the parser interns shapes by
    text), the attribute text with its metadata value cut out (``without_metadata``), each called
    computation's name masked (each distinct name in the order first called) and the ``channel_id`` value of a
    collective (``collective``) cut out, and, per role, the ``work`` (``computation_work``: what
    ``CostContext.computation_cost`` gives a rule) of each called computation. ``bare`` keeps each text's form
    without metadata (a layer's texts repeat under ``scan``).

    Sound for the same reason as ``StructureKeys``: no rule reads an instruction's name, line, metadata or the
    names of its called computations, only their costs; a collective's rule reads whether ``channel_id`` is
    there, never its value (``collective.group_size``). None -- the instruction costed on its own -- for a
    placeholder text, a metadata value ``attribute_value`` cannot delimit alone, a called computation's name
    found in the text other than where it is called, a ``channel_id`` not printed once as digits, or an
    operand or called computation the module lacks (the rule then fails as it did).

    ``_cost_walk.c`` makes the same key in C (``shared_rows``; ``attribute_key_of`` alone): this function is its
    specification (tests/cost/test_shared_costs.py holds the two equal).
    """
    text = inst.attribute_text
    found = bare.get(text, _MISSING)
    if found is _MISSING:
        found = bare[text] = without_metadata(text)
    text = found
    if text is None:
        return None
    if collective and "channel_id=" in text:
        m = _CHANNEL_ID.search(text)
        if m is None or text.count("channel_id=") != 1:
            return None
        text = text[:m.start(1)] + text[m.end(1):]
    calls = inst.called_computations
    try:
        shapes = tuple(map(id, map(shape_of, inst.operands)))
        if calls:
            names = [callee for role in calls.values() for callee in role]
            for callee in dict.fromkeys(names):
                if text.count(callee) != names.count(callee):
                    return None
                text = text.replace(callee, _MASK)
            return (inst.opcode, id(inst.shape), shapes, text,
                    tuple((role, tuple(map(work, called))) for role, called in calls.items()))
    except KeyError:
        return None
    return inst.opcode, id(inst.shape), shapes, text


#: A collective's ``channel_id=N`` attribute: its value (group 1), cut from ``attribute_key``'s text.
_CHANNEL_ID = LazyPattern(r"(?:^|, )channel_id=([0-9]+)(?=,|\Z)")


#: ``py_structure_fields`` and ``py_structure_key`` in C (``_cost_walk.c``), or None when the extension was not built.
c_structure_fields = compiled("hloscope.cost._cost_walk", "structure_fields")
c_structure_key = compiled("hloscope.cost._cost_walk", "structure_key")


def py_without_metadata(text: str) -> str | None:
    """``text`` with its ``, metadata={...}`` cut out (itself when it has none); None for a placeholder text or
    one whose metadata value ``attribute_value`` cannot delimit for sure. (``without_metadata`` is
    ``_attribute_scan.c``'s form of it when the extension was built; tests hold the two equal.)"""
    if text == _PLACEHOLDER:
        return None
    if not text or "metadata=" not in text:
        return text
    status, value = _attribute_value(text, "metadata")
    if status != KNOWN:
        return None
    if not value:
        return text
    return text.replace(", metadata=" + value, "", 1)


#: ``py_without_metadata`` in C (``parsers/_attribute_scan.c``), or None when the extension was not built.
c_without_metadata = compiled("hloscope.parsers._attribute_scan", "without_metadata")
without_metadata = py_without_metadata if PURE_PYTHON or c_without_metadata is None else c_without_metadata


__all__ = ["StructureKeys", "attribute_key", "without_metadata", "py_without_metadata", "c_without_metadata",
           "py_structure_fields", "c_structure_fields", "py_structure_key", "c_structure_key"]
