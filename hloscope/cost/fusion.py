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

Collectives in a fusion keep their own wire bytes (``collective``), with one exception: an all-reduce whose
result only feeds a dynamic-slice keeping 1/N of it (N the group size), the slice being the fusion's result
(``_all_reduce_scatter``), is a reduce-scatter. TPU XLA fuses the pair so (``kind=kCustom,
calls=%all-reduce-scatter``, emitter ``SingleInputAllReduceScatterFusion``) and runs it as one reduce-scatter:
each device receives only its 1/N, so the wire bytes are the reduce-scatter's (N-1)/N x operand bytes, half the
all-reduce's 2(N-1)/N ("How to Scale Your Model", Part 3; NCCL's bus bandwidth), and the fusion's collective kind
is ``reduce-scatter``.

FLOPs of a ``kind=kCustom`` fusion holding a gather or scatter (``_custom_gather_scatter``): XLA's
``HloCostAnalysis::HandleFusion`` (xla/service/hlo_cost_analysis.cc) returns, for a custom fusion
(``IsCustomFusion()``: ``fusion_kind() == kCustom``), ``HandleGather`` or ``HandleScatter`` of the first
gather or scatter among the fused computation's own instructions (nested fusions are not searched) and
ignores everything else in the body. hloscope does the same for FLOPs and transcendentals: a gather does
none, a scatter ``update elements x FLOPs(to_apply)`` (``reduction.scatter``), and the rest of the body --
on TPU the index arithmetic libtpu fuses into the gather/scatter kernel (and/or/shift/compare/select packing
the indices for the ``GatherScatterIndicesBitpacked`` custom call) -- is not counted, nor are its flags
(that custom call is part of the kernel, not an opaque one). HBM bytes stay hloscope's boundary rules above
(a gather reads what it gathers; XLA's ``HandleGather`` charges ``2 x result + indices``), and wire bytes
stay the body's. TPU (deviceless libtpu, jax 0.10.2): ``gather_rows`` on v5e 11904 FLOPs and ``scatter_add``
4448, as ``compiled.cost_analysis()``; docs/xla_cost_rules.md §6.1.
"""

from __future__ import annotations

import math
from collections import Counter
from itertools import compress
from typing import TYPE_CHECKING, Callable

from hloscope.cost._types import CostContext, OpCost
from hloscope.cost.collective import DONE_OPCODES, KINDS

if TYPE_CHECKING:
    from hloscope.hlo import HloComputation, HloInstruction

_SLICING = frozenset({"slice", "dynamic-slice", "gather"})
_LOOK_THROUGH = frozenset({"bitcast", "get-tuple-element"})
#: Users after which a parameter may be read in part (or looked through).
_NOT_PLAIN = _SLICING | _LOOK_THROUGH | {"fusion", "dynamic-update-slice"}
#: Root opcodes after which the fusion may write less than its result (``_written``).
_WRITES_PART = frozenset({"dynamic-update-slice", "tuple", "bitcast"})
#: Every collective opcode: a fusion holding any besides its one all-reduce is not an all-reduce-scatter.
_COLLECTIVES = frozenset(KINDS) | DONE_OPCODES | frozenset(
    op + suffix for op in KINDS for suffix in ("-start", "-done")) | {"send", "recv", "send-done", "recv-done"}
#: Opcodes that make a ``kind=kCustom`` fusion cost as that one instruction (XLA ``HandleFusion``).
_GATHER_SCATTER = ("gather", "scatter")
#: A rule that met an unexpected shape or attribute (as ``module._apply`` flags it).
_RULE_FAILED = frozenset({"cost-rule-failed", "unknown-flops"})


class FusionBytes:
    """Per fused computation: bytes read per parameter and bytes written, computed once and reused by every
    fusion instruction that calls the computation."""

    __slots__ = ("read_per_parameter", "written", "all_reduce_scatter", "gather_scatter")

    def __init__(self, comp: HloComputation, nested: Callable[[str], FusionBytes] | None = None) -> None:
        # Read from the computation's columns (``HloComputation``): only the instructions a rule follows are
        # looked at one by one. A value with a "plain" user -- any instruction not in ``_NOT_PLAIN`` -- or
        # passed through as the root is read whole (rule 4), whatever else reads it.
        opcodes = comp.opcodes
        shapes = comp.shapes
        names = comp.names
        present = set(opcodes)
        constants = 0
        if "constant" in present:
            # A constant of more than one element lives in HBM and is read (XLA charges it too).
            constants = sum([s.padded_size_bytes for s in compress(shapes, map("constant".__eq__, opcodes))
                             if s.element_count > 1])
        root = comp.root_name
        read: dict[int, int] = {-1: constants}
        used = comp.operand_names()
        whole = set(used)
        not_plain: list[int] = []
        if not _NOT_PLAIN.isdisjoint(present):
            not_plain = list(compress(range(len(opcodes)), map(_NOT_PLAIN.__contains__, opcodes)))
            # A name is used by a plain instruction when the operand lists of the others hold fewer of its uses
            # than all operand lists do.
            by_not_plain = Counter(comp.operand_names(not_plain))
            by_all = Counter(used)
            whole.difference_update([name for name, n in by_not_plain.items() if by_all[name] == n])
        whole.add(root)
        users = None
        for number, i in comp.parameter_index.items():
            name = names[i]
            if name in whole:  # the common case
                read[number] = shapes[i].padded_size_bytes
            elif not not_plain:
                read[number] = 0  # an unused parameter is not read (XLA agrees)
            else:
                if users is None:
                    users = _users(not_plain, comp.operand_lists(not_plain))
                read[number] = _parameter_read(comp, i, users, whole, nested)
        self.read_per_parameter = read
        root_index = comp.root_index
        self.written = (_written(root_index, comp) if opcodes[root_index] in _WRITES_PART
                        else shapes[root_index].padded_size_bytes)
        #: (elements all-reduced, elements kept) of an all-reduce + dynamic-slice pair, else None.
        self.all_reduce_scatter = _all_reduce_scatter(comp) if "all-reduce" in present else None
        #: Instruction index of the first gather or scatter of the computation (its own instructions, in order),
        #: else None: a ``kind=kCustom`` fusion calling it costs as that instruction (``_custom_gather_scatter``).
        self.gather_scatter: int | None = None
        if "gather" in present or "scatter" in present:
            self.gather_scatter = next(i for i, op in enumerate(opcodes) if op in _GATHER_SCATTER)


def _users(not_plain: list[int], operand_lists: list[tuple[str, ...]]) -> dict[str, list[int]]:
    """Value name -> indices of the ``_NOT_PLAIN`` instructions that take it as an operand (each once)."""
    users: dict[str, list[int]] = {}
    for i, operands in zip(not_plain, operand_lists):
        for op in operands:
            found = users.get(op)
            if found is None:
                users[op] = [i]
            elif found[-1] != i:  # the same value twice in one operand list: one user
                found.append(i)
    return users


def _parameter_read(comp: HloComputation, param: int, users: dict[str, list[int]], whole: set[str],
                    nested: Callable[[str], FusionBytes] | None) -> int:
    """Bytes read of parameter (instruction index) ``param``, which has no plain user: what its slicing users
    take (rules 1-3), looking through bitcasts and get-tuple-elements; the whole parameter as soon as one of
    those has a plain user or is the root; 0 when nothing uses it."""
    opcodes = comp.opcodes
    names = comp.names
    full = comp.shapes[param].padded_size_bytes
    sliced = 0
    seen: set[int] = set()
    stack = [names[param]]
    while stack:
        used = stack.pop()
        for user in users.get(used, ()):
            opcode = opcodes[user]
            if opcode in _LOOK_THROUGH:
                if user not in seen:
                    seen.add(user)
                    name = names[user]
                    if name in whole:
                        return full
                    stack.append(name)
            elif opcode == "fusion" and nested is not None:
                calls = comp.instruction_at(user).called_computations.get("calls")
                if not calls:
                    return full
                # A nested fusion reads what its own parameter rules say (e.g. only a dynamic-slice of it).
                inner = nested(calls[0])
                part = sum(inner.read_per_parameter.get(i, full) for i, op in enumerate(comp.operands_at(user))
                           if op == used)
                if part >= full:
                    return full
                sliced += part
            elif opcode in _SLICING:
                if comp.operands_at(user)[0] != used:
                    return full
                if user not in seen:
                    seen.add(user)
                    sliced += comp.shapes[user].padded_size_bytes
            elif opcode == "dynamic-update-slice":
                operands = comp.operands_at(user)
                if operands[0] != used or used in operands[1:]:
                    return full
            else:
                return full
    return sliced


def _written(index: int, comp: HloComputation) -> int:
    """Bytes the fusion writes: its result, but only the update of a dynamic-update-slice result (alone, in a
    tuple, or under a bitcast). ``index``: the root's (then a tuple element's) instruction index. Read from the
    columns."""
    opcode = comp.opcodes[index]
    if opcode == "dynamic-update-slice":
        return comp.shape_of(comp.operands_at(index)[1]).padded_size_bytes
    if opcode == "tuple":
        return sum(_written(comp.index_of(o), comp) for o in comp.operands_at(index))
    if opcode == "bitcast":
        operand = comp.index_of(comp.operands_at(index)[0])
        if comp.opcodes[operand] == "dynamic-update-slice":
            return _written(operand, comp)
    return comp.shapes[index].padded_size_bytes


def _all_reduce_scatter(comp: HloComputation) -> tuple[int, int] | None:
    """``(elements all-reduced, elements kept)`` when ``comp`` holds one collective, an all-reduce of an array,
    whose one user is a dynamic-slice (as the sliced operand) that is the root, directly or under bitcasts (see
    the module docstring); else None. Read from the columns."""
    opcodes = comp.opcodes
    if opcodes.count("all-reduce") != 1 or sum(map(_COLLECTIVES.__contains__, opcodes)) != 1:
        return None
    reduced = opcodes.index("all-reduce")
    index = comp.root_index
    while opcodes[index] == "bitcast":
        index = comp.index_of(comp.operands_at(index)[0])
    operands = comp.operands_at(index)
    name = comp.names[reduced]
    if (opcodes[index] != "dynamic-slice" or not operands or operands[0] != name or name in operands[1:]
            or comp.operand_names().count(name) != 1 or not comp.shapes[reduced].is_array):
        return None
    return comp.shapes[reduced].element_count, comp.shapes[index].element_count


def _custom_gather_scatter(comp: HloComputation, index: int, ctx: CostContext) -> OpCost:
    """FLOPs and transcendentals of the gather or scatter at instruction ``index`` of fused computation
    ``comp``, costed alone as XLA's ``HandleGather`` / ``HandleScatter`` (module docstring): 0 for a gather,
    ``update elements x (FLOPs, transcendentals) of to_apply`` for a scatter; its flags (``dynamic-shape``). A
    shape or attribute the rule did not expect: NaN FLOPs, flagged ``cost-rule-failed``."""
    from hloscope.cost import reduction

    inst = comp.instruction_at(index)
    flags = frozenset({"dynamic-shape"}) if inst.shape.is_dynamic else frozenset()
    if inst.opcode == "gather":
        return OpCost(flags=flags)
    inner_ctx = CostContext(ctx.module, comp, ctx.computation_cost)
    try:
        applied = reduction.scatter(inst, inner_ctx)
    except (IndexError, KeyError, ValueError, TypeError, ZeroDivisionError, AttributeError, OverflowError):
        return OpCost(math.nan, math.nan, flags=_RULE_FAILED)
    return OpCost(applied.flops, applied.transcendentals, flags=flags | applied.flags)


def cost(inst: HloInstruction, ctx: CostContext, fusion_bytes: FusionBytes) -> OpCost:
    """The fusion's cost given its fused computation's ``FusionBytes``: the body's FLOPs, transcendentals, wire
    bytes and flags (``CostContext.computation_cost``), except that a ``kind=kCustom`` fusion holding a gather
    or scatter takes that instruction's FLOPs, transcendentals and flags alone (module docstring); HBM bytes
    at the boundary."""
    names = inst.called_computations.get("calls", ())
    inner = ctx.computation_cost(names[0]) if names else OpCost()
    if names and fusion_bytes.gather_scatter is not None and inst.attribute("kind") == "kCustom":
        alone = _custom_gather_scatter(ctx.module.computation(names[0]), fusion_bytes.gather_scatter, ctx)
        inner = OpCost(alone.flops, alone.transcendentals, 0.0, 0.0, inner.comm_bytes, inner.comm_kind,
                       inner.group_size, alone.flags)
    read_table = fusion_bytes.read_per_parameter
    shape_of = ctx.shape_of
    read = read_table.get(-1, 0)
    seen: set[str] = set()
    for i, op in enumerate(inst.operands):
        if op in seen:  # the same value passed twice is read once
            continue
        seen.add(op)
        part = read_table.get(i)
        read += shape_of(op).padded_size_bytes if part is None else part
    flags = inner.flags
    if inst.shape.is_dynamic:
        flags = flags | {"dynamic-shape"}
    comm, kind = inner.comm_bytes, inner.comm_kind
    scatter = fusion_bytes.all_reduce_scatter
    if scatter is not None and kind == "all-reduce" and inner.group_size > 1 and \
            scatter[1] * inner.group_size == scatter[0]:
        # An all-reduce-scatter fusion: a reduce-scatter on the wire, (N-1)/N x operand bytes, half the all-reduce's.
        comm, kind = comm / 2, "reduce-scatter"
    return OpCost(inner.flops, inner.transcendentals, read, fusion_bytes.written, comm, kind, inner.group_size,
                  flags)
