"""Fusions: FLOPs summed over the fused computation; HBM bytes only at the fusion's boundary.

XLA semantics: ``HloCostAnalysis::HandleFusion`` (xla/service/hlo_cost_analysis.cc) sums the fused
instructions' FLOPs and transcendentals, and charges bytes for the fusion's operands and result only -- values
passed between fused instructions stay on chip. Reading rules, per fusion operand (= fused parameter):

1. Bitcasts and get-tuple-elements of a parameter are looked through (they move no data), and so are nested
   fusions: a parameter a nested fusion only slices is read as that nested fusion reads it.
2. A parameter whose every user is a slice, dynamic-slice or gather (as the sliced operand) reads only what
   those users take: the sum of their results' bytes, each user once (``FusionParameterReadBytes``).
3. A parameter that is only the in-place buffer (operand 0) of a dynamic-update-slice is not read.
4. Any other parameter is read once in full, however many fused users it has; a parameter with no user is
   not read. Constants of more than one element are read.
5. The same value passed as two operands is read once.

Differences from XLA, on purpose (XLA over-counts these): XLA charges a full read per broadcast/reshape user
of a parameter and per repeated operand, and a gather in a fusion reads its whole operand; hloscope reads once,
and a gather reads what it gathers.

Writing: the result's bytes, except that a dynamic-update-slice result (alone or as a tuple element) writes
only its update.
"""

from __future__ import annotations

from operator import attrgetter
from typing import TYPE_CHECKING, Callable

from hloscope.cost._types import OpCost

if TYPE_CHECKING:
    from hloscope.cost._types import CostContext
    from hloscope.hlo import HloComputation, HloInstruction

_SLICING = frozenset({"slice", "dynamic-slice", "gather"})
_LOOK_THROUGH = frozenset({"bitcast", "get-tuple-element"})
_NAME = attrgetter("name")
#: Users after which a parameter may be read in part (or looked through).
_NOT_PLAIN = _SLICING | _LOOK_THROUGH | {"fusion", "dynamic-update-slice"}


class FusionBytes:
    """Per fused computation: bytes read per parameter and bytes written, computed once and reused by every
    fusion instruction that calls the computation."""

    __slots__ = ("read_per_parameter", "written")

    def __init__(self, comp: HloComputation, nested: Callable[[str], FusionBytes] | None = None) -> None:
        instructions = comp.instructions
        by_name = dict(zip(map(_NAME, instructions), instructions))
        params = []
        look_through = []
        constants = 0
        for inst in instructions:
            opcode = inst.opcode
            if opcode == "parameter":
                params.append(inst)
            elif opcode in _LOOK_THROUGH:
                look_through.append(inst)
            elif opcode == "constant" and inst.shape.element_count > 1:
                # A constant of more than one element lives in HBM and is read (XLA charges it too).
                constants += inst.shape.padded_size_bytes
        # Users only of what the parameter rules follow: parameters and their bitcasts/get-tuple-elements.
        tracked = set(map(_NAME, params))
        grown = True
        while grown and look_through:
            grown = False
            for inst in look_through:
                if inst.name not in tracked and inst.operands and inst.operands[0] in tracked:
                    tracked.add(inst.name)
                    grown = True
        users: dict[str, list[HloInstruction]] = {}
        disjoint = tracked.isdisjoint
        for inst in instructions:
            operands = inst.operands
            if operands and not disjoint(operands):
                for op in operands:
                    if op in tracked:
                        users.setdefault(op, []).append(inst)
        root = comp.root_name
        read: dict[int, int] = {p.parameter_number: _parameter_read(p, users, nested, root) for p in params}
        read[-1] = constants
        self.read_per_parameter = read
        self.written = _written(by_name[root], by_name)


def _terminal_users(name: str, users: dict[str, list[HloInstruction]],
                    root: str = "") -> list[tuple[HloInstruction, str]] | None:
    """Users of ``name``, looking through bitcasts/get-tuple-elements: (user, the operand name it uses).
    None when ``name`` (or a bitcast of it) is the computation's root: the value leaves whole."""
    out = []
    stack = [name]
    seen = set()
    while stack:
        n = stack.pop()
        if n == root:
            return None
        for u in users.get(n, ()):
            if u.opcode in _LOOK_THROUGH:
                if u.name not in seen:
                    seen.add(u.name)
                    stack.append(u.name)
            else:
                out.append((u, n))
    return out


def _parameter_read(param: HloInstruction, users: dict[str, list[HloInstruction]],
                    nested: Callable[[str], FusionBytes] | None, root: str) -> int:
    full = param.shape.padded_size_bytes
    direct = users.get(param.name, ())
    if any(u.opcode not in _NOT_PLAIN for u in direct):
        return full  # a plain use reads it whole, whatever else reads it (the common case, decided early)
    terminal = _terminal_users(param.name, users, root)
    if terminal is None:
        return full  # passed through to the result
    if not terminal:
        return 0  # an unused parameter is not read (XLA agrees)
    sliced = 0
    seen: set[str] = set()
    for user, used in terminal:
        if user.opcode == "fusion" and nested is not None and user.called_computations.get("calls"):
            # A nested fusion reads what its own parameter rules say (e.g. only a dynamic-slice of it).
            inner = nested(user.called_computations["calls"][0])
            part = sum(inner.read_per_parameter.get(i, full) for i, op in enumerate(user.operands) if op == used)
            if part >= full:
                return full
            sliced += part
            continue
        if user.opcode in _SLICING and user.operands and user.operands[0] == used:
            if user.name not in seen:
                seen.add(user.name)
                sliced += user.shape.padded_size_bytes
        elif user.opcode == "dynamic-update-slice" and user.operands[0] == used and used not in user.operands[1:]:
            continue
        else:
            return param.shape.padded_size_bytes
    return sliced


def _written(root: HloInstruction, by_name: dict[str, HloInstruction]) -> int:
    if root.opcode == "dynamic-update-slice":
        return by_name[root.operands[1]].shape.padded_size_bytes
    if root.opcode == "tuple":
        return sum(_written(by_name[o], by_name) for o in root.operands)
    if root.opcode == "bitcast" and by_name[root.operands[0]].opcode == "dynamic-update-slice":
        return _written(by_name[root.operands[0]], by_name)
    return root.shape.padded_size_bytes


def cost(inst: HloInstruction, ctx: CostContext, fusion_bytes: FusionBytes) -> OpCost:
    """The fusion's cost given its fused computation's ``FusionBytes``."""
    names = inst.called_computations.get("calls", ())
    inner = ctx.computation_cost(names[0]) if names else OpCost()
    read_table = fusion_bytes.read_per_parameter
    by_name = ctx.by_name
    read = read_table.get(-1, 0)
    seen: set[str] = set()
    for i, op in enumerate(inst.operands):
        if op in seen:  # the same value passed twice is read once
            continue
        seen.add(op)
        read += read_table.get(i, by_name[op].shape.padded_size_bytes)
    flags = inner.flags
    if inst.shape.is_dynamic:
        flags = flags | {"dynamic-shape"}
    return OpCost(inner.flops, inner.transcendentals, read, fusion_bytes.written, inner.comm_bytes,
                  inner.comm_kind, inner.group_size, flags)
