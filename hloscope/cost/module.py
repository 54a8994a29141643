"""One pass over a module: every instruction costed once per computation it lives in, scaled by how many
times that computation runs per execution of the entry computation.

Notes:
    1. The entry computation runs once. A ``while`` body runs ``trip_count`` times per run of the ``while``
       and its condition ``trip_count + 1`` times (``control_flow.trip_count``); a ``call`` runs its callee
       once. Rows of nested computations carry the product of these counts.
    2. A fusion, an async wrapper (``async-start``, ``<op>-start`` with ``calls=``, or the ``<op>-start``
       sugar without it, costed as ``<op>``) and a ``conditional`` are one row each: the fusion's and
       the wrapper's FLOPs are those of the called computation; a ``conditional`` takes the costliest branch
       (by FLOPs, then bytes) and is flagged ``conditional-max-branch``.
    3. Called computations of reducers (``to_apply``), fusions and wrappers are costed once and reused.
    4. Totals are the sum over rows of cost x count.
"""

from __future__ import annotations

import math
from functools import cache
from itertools import chain, compress
from operator import attrgetter, mul
from typing import TYPE_CHECKING, NamedTuple

from hloscope._compiled import PURE_PYTHON, compiled
from hloscope._gc import paused_gc
from hloscope._record import Record
from hloscope.cost import fusion as fusion_rule
from hloscope.cost._bytes import boundary
from hloscope.cost._types import ZERO, CostContext, OpCost
from hloscope.cost.collective import KINDS as COLLECTIVE_KINDS
from hloscope.cost.control_flow import trip_count
from hloscope.cost.data_movement import FREE_OPCODES, MOVE_OPCODES
from hloscope.cost.elementwise import FLOP_OPCODES as _FLOP_OPCODES
from hloscope.cost.elementwise import TRANSCENDENTAL_OPCODES as _TRANSCENDENTAL_OPCODES
from hloscope.cost.structure import StructureKeys, without_metadata, attribute_key

if TYPE_CHECKING:
    from collections.abc import Iterable

    from hloscope.hlo import HloComputation, HloInstruction, HloModule

#: Opcodes without FLOPs (``data_movement``), skipped by ``_Analyzer.computation_work``; of these, the ones
#: costed by ``boundary`` carry its ``dynamic-shape`` flag.
_NO_WORK = FREE_OPCODES | MOVE_OPCODES | {"copy", "slice", "dynamic-slice", "dynamic-update-slice", "gather"}
_BOUNDARY_MOVES = MOVE_OPCODES | {"copy"}
#: Opcodes ``_Analyzer.computation_work`` costs from the columns alone (FLOPs and transcendentals are one per
#: output element, as ``elementwise.cost`` counts them -- the two sets are disjoint; the others have none), and
#: those of them whose
#: dynamic shape flags the computation ``dynamic-shape`` (as ``elementwise.cost`` and ``boundary`` do).
_COLUMN_OPCODES = _FLOP_OPCODES | _TRANSCENDENTAL_OPCODES | _NO_WORK
_FLAGS_DYNAMIC = _FLOP_OPCODES | _TRANSCENDENTAL_OPCODES | _BOUNDARY_MOVES
#: Opcodes whose rule reads nothing but the result shape and the operands' shapes (elementwise and data movement
#: rules: ``elementwise.cost``, ``data_movement``), so that instructions with the same opcode and shapes cost
#: the same: those costed from the columns, less the free ones (whose cost, zero, needs no lookup).
_SHAPE_RULED = _COLUMN_OPCODES - FREE_OPCODES
#: The collectives' opcodes (``collective.KINDS``): ``structure.attribute_key`` cuts their ``channel_id`` value.
_COLLECTIVES = frozenset(COLLECTIVE_KINDS)
#: Most instructions a computation may hold for ``computation_work`` to share its cost by columns.
_SMALL_COMPUTATION = 16
_ELEMENTS = attrgetter("element_count")
_IS_DYNAMIC = attrgetter("is_dynamic")


class CostRow(NamedTuple):
    """One instruction's cost and how many times it runs per execution of the entry computation.

    Immutable, its fields read by name. A named tuple rather than a frozen dataclass: the cost walk makes one per
    instruction, and a frozen dataclass's ``__init__`` (one ``object.__setattr__`` per field) took twice as long.
    """

    computation: str
    instruction: HloInstruction
    cost: OpCost
    count: float


class ModuleCost(Record):
    """Per-instruction rows and their count-weighted totals for one run of the module's entry computation.

    Attributes:
        module: the costed module.
        rows: one per instruction that may do work (fused instructions are inside their fusion's row).
        flops, transcendentals, bytes_read, bytes_written, comm_bytes: totals per module run.
        flags: union of every row's flags.

    Compared and printed by these fields (``hloscope._record.Record``), which may be set.
    """

    __slots__ = ("module", "rows", "flops", "transcendentals", "bytes_read", "bytes_written", "comm_bytes", "flags")
    module: HloModule
    rows: list[CostRow]
    flops: float
    transcendentals: float
    bytes_read: float
    bytes_written: float
    comm_bytes: float
    flags: frozenset[str]

    def __init__(self, module: HloModule, rows: list[CostRow], flops: float = 0.0, transcendentals: float = 0.0,
                 bytes_read: float = 0.0, bytes_written: float = 0.0, comm_bytes: float = 0.0,
                 flags: frozenset[str] = frozenset()) -> None:
        self._init_fields(module, rows, flops, transcendentals, bytes_read, bytes_written, comm_bytes, flags)

    @property
    def bytes_accessed(self) -> float:
        return self.bytes_read + self.bytes_written


#: The module cost's flag when the module holds arrays of an element type hloscope has no bit width for
#: (``HloModule.unknown_element_types``): those arrays count 0 bytes, so its HBM bytes are a lower bound.
UNKNOWN_ELEMENT_TYPE_FLAG = "unknown-element-type"


def module_cost(module: HloModule) -> ModuleCost:
    """Cost every instruction of ``module`` (see module docstring). Never raises for unknown opcodes or custom
    calls: their FLOPs and bytes are NaN, flagged, and the totals are those of the known part. A module holding
    arrays of an element type with no known bit width is flagged ``unknown-element-type`` (those arrays count 0
    bytes)."""
    analyzer = _Analyzer(module)
    rows: list[CostRow] = []
    try:
        with paused_gc():  # a row per instruction, no garbage (see ``paused_gc``)
            analyzer.visit(module.entry, 1.0, rows)
    finally:
        analyzer.contexts.clear()  # (each holds the analyzer's bound method: a cycle only the collector frees)
    total = summed(rows)
    flags = total.flags | {UNKNOWN_ELEMENT_TYPE_FLAG} if module.unknown_element_types else total.flags
    return ModuleCost(module, rows, total.flops, total.transcendentals, total.bytes_read, total.bytes_written,
                      total.comm_bytes, flags)


def summed(rows: list[CostRow]) -> OpCost:
    """Count-weighted sum of rows; keeps the collective kind and group size when there is exactly one kind.

    A row's unknown value (NaN: an opaque custom call, an unknown opcode, a rule that failed) is left out of
    its total, which is then the total of the known part; the row's ``unknown-*`` flags say so. Each total is
    summed left to right from 0.0 (``_sequential_sum``; the products are Python's); a total that comes out NaN
    is summed again with each unknown value counting 0.0 (a field without unknown values sums the same either
    way, so only those are summed twice).

    ``cost_totals`` (``_cost_walk.c``) makes the same totals in one pass where it was built; this function is
    its specification (tests/cost/test_cost_columns.py holds the two equal).
    """
    if cost_totals is not None and type(rows) is list and len(rows) >= _C_TOTALS:
        found = cost_totals(rows)
        if found is not None:
            sums, known, kinds, group, flag_sets = found
            totals = [total if total == total else ok for total, ok in zip(sums, known)]
            return _total(totals, kinds, group, frozenset().union(*flag_sets))
    return py_summed(rows)


def py_summed(rows: list[CostRow]) -> OpCost:
    """``summed`` in Python (its specification; what it gives without the C extension)."""
    counts = list(map(_COUNT, rows))
    costs = list(map(_COST, rows))
    totals = []
    if len(rows) < _LONG:
        for field in _SUMMED_FIELDS:
            total = _sequential_sum(list(map(mul, map(field, costs), counts)))
            if total != total:
                total = _sequential_sum([(v if v == v else 0.0) * n for v, n in zip(map(field, costs), counts)])
            totals.append(total)
    else:  # (the same products by numpy: an int or float times a float is the float product either way)
        import numpy as np

        n = len(rows)
        weights = np.fromiter(counts, float, n)
        with np.errstate(invalid="ignore", over="ignore"):  # (as Python's floats: NaN and inf, no warning)
            for field in _SUMMED_FIELDS:
                values = np.fromiter(map(field, costs), float, n)
                total = _sequential_sum(values * weights)
                if total != total:
                    total = _sequential_sum(np.where(values == values, values, 0.0) * weights)
                totals.append(total)
    comm_kinds = list(map(_COMM_KIND, costs))
    kinds = set(comm_kinds)
    kinds.discard("")
    # (the largest group size of the rows with a collective kind, 0 without; the flags of every row: C passes)
    group = max(chain((0,), compress(map(_GROUP_SIZE, costs), comm_kinds))) if kinds else 0
    return _total(totals, kinds, group, frozenset().union(*filter(None, map(_FLAGS, costs))))


def _total(totals: list[float], kinds: set[str], group: int, flags: frozenset[str]) -> OpCost:
    """The summed ``OpCost`` of ``summed``'s two ways: the five totals; the one collective kind of the rows
    (``"mixed"`` for several, ``""`` for none); the largest group size; every flag."""
    kind = kinds.pop() if len(kinds) == 1 else ("mixed" if kinds else "")
    return OpCost(*totals, kind, group, flags)


#: ``summed`` hands lists of at least this many rows to ``cost_totals`` (below it the call's fixed cost is about
#: what it saves).
_C_TOTALS = 8

#: Fewer values than this are summed by a Python loop (``_sequential_sum``), and their rows' products made by
#: Python (``summed``); more, by numpy.
_LONG = 64


def _sequential_sum(values) -> float:
    """``0.0 + values[0] + values[1] + ...`` in that order, to the last bit: a loop for short lists,
    ``np.add.accumulate`` (a sequential sum, unlike ``np.sum``'s pairwise one) for long ones (a list or a float
    array)."""
    if len(values) < _LONG:
        total = 0.0
        for v in values:
            total += v
        return total
    import numpy as np

    return float(np.add.accumulate(np.array(values, dtype=float))[-1]) + 0.0  # (+ 0.0: -0.0 reads 0.0)


_COUNT = attrgetter("count")
_COST = attrgetter("cost")
_COMM_KIND = attrgetter("comm_kind")
_GROUP_SIZE = attrgetter("group_size")
_FLAGS = attrgetter("flags")
_SUMMED_FIELDS = tuple(map(attrgetter, ("flops", "transcendentals", "bytes_read", "bytes_written", "comm_bytes")))


def _apply(rule, target: HloInstruction, inst: HloInstruction, ctx: CostContext) -> OpCost:
    """``rule(target, ctx)``; a shape or attribute the rule did not expect keeps the row, flagged
    ``cost-rule-failed``, its FLOPs and bytes unknown (NaN)."""
    try:
        return rule(target, ctx)
    except (IndexError, KeyError, ValueError, TypeError, ZeroDivisionError, AttributeError, OverflowError):
        return OpCost(math.nan, math.nan, math.nan, math.nan, flags=_RULE_FAILED)


#: The C maker of the rows whose shared cost is already known (``_cost_walk.c``: what ``_Analyzer.visit`` makes
#: for them), or None without the extension or with ``HLOSCOPE_PURE_PYTHON=1``: then ``visit`` makes every row.
shared_rows = None if PURE_PYTHON else compiled("hloscope.cost._cost_walk", "shared_rows")
#: The C summer of ``summed`` (``_cost_walk.c``), None when the extension was not built; ``cost_totals`` is None
#: with ``HLOSCOPE_PURE_PYTHON=1`` too (then ``py_summed`` sums).
c_cost_totals = compiled("hloscope.cost._cost_walk", "cost_totals")
cost_totals = None if PURE_PYTHON else c_cost_totals

#: Flags of an instruction whose cost is unknown: its rule met a shape or attribute it did not expect, or
#: hloscope has no rule for its opcode. Its FLOPs and bytes are NaN, never 0.
_RULE_FAILED = frozenset({"cost-rule-failed", "unknown-flops", "unknown-bytes"})
_UNKNOWN_OPCODE = frozenset({"unknown-opcode", "unknown-flops", "unknown-bytes"})


#: Whether ``_Analyzer`` shares the work and boundary bytes of computations of one structure
#: (``cost/structure.py``); tests turn it off to compare every row with and without.
SHARE_STRUCTURES = True
#: Whether ``_Analyzer.visit`` shares the cost of instructions of one ``structure.attribute_key`` (dots, reduces,
#: collectives, custom calls...); tests turn it off to compare every row with and without.
SHARE_ATTRIBUTE_KEYS = True
#: Whether ``_Analyzer.visit`` makes the rows of a ``call`` once per (callee, execution count) and repeats them at
#: each later call site of that count (a helper jitted inside a layer is called at every layer: on the corpus's
#: gemma4 module, 273 callee visits of 24 computations, ~1.7 ms of a ~15 ms cost walk); tests turn it off to
#: compare every row with and without.
SHARE_CALL_ROWS = True


@cache
def keyed_opcodes() -> frozenset[str]:
    """The opcodes whose cost is shared by ``structure.attribute_key``: those with a rule (``cost.RULES``), less
    the shape-ruled (``_SHAPE_RULED``) and the free ones. (A function, made once: ``RULES`` imports this
    module.)"""
    from hloscope.cost import RULES

    return frozenset(RULES) - _SHAPE_RULED - FREE_OPCODES


#: Fewest computations a module must hold for ``_Analyzer`` to key them by structure: a small program repeats
#: little, and its keys cost more than they save (the plugin benchmark's mlp, 10 and 18 computations: +0.2-0.4
#: ms of its 3.3-4.2 ms analysis; its 2-layer transformer, ~200: -1 ms of 20).
SHARE_MIN_COMPUTATIONS = 64


class _Analyzer:
    __slots__ = ("module", "totals", "work", "work_by_columns", "fusion_bytes", "contexts", "by_shapes",
                 "by_attributes", "bare_texts", "structures", "work_by_structure", "bytes_by_structure", "call_rows")

    def __init__(self, module: HloModule) -> None:
        self.module = module
        self.totals: dict[str, OpCost] = {}
        self.work: dict[str, OpCost] = {}
        #: (opcodes, ids of the shapes) -> ``computation_work`` of a small computation costed from its columns.
        self.work_by_columns: dict[tuple, OpCost] = {}
        self.fusion_bytes: dict[str, fusion_rule.FusionBytes] = {}
        #: Each attribute text's form without metadata (``without_metadata``'s memo, for ``attribute_key`` and
        #: the structure keys alike).
        self.bare_texts: dict[str, str | None] = {}
        #: The structure of each computation (None: each costed on its own), and what one of each costs.
        self.structures = (StructureKeys(module, self.bare_texts) if SHARE_STRUCTURES
                           and len(module.computations) >= SHARE_MIN_COMPUTATIONS else None)
        self.work_by_structure: dict[int, OpCost] = {}
        self.bytes_by_structure: dict[int, fusion_rule.FusionBytes] = {}
        self.contexts: dict[str, CostContext] = {}
        #: (opcode, id of the result shape, ids of the operand shapes) -> cost, for ``_SHAPE_RULED`` opcodes.
        self.by_shapes: dict[tuple, OpCost] = {}
        #: ``structure.attribute_key`` -> cost, for the other opcodes with a rule (dots, reduces, collectives...).
        self.by_attributes: dict[tuple, OpCost] = {}
        #: (callee name, count) -> the rows a ``call`` of it appends (its instructions' and those of what they run):
        #: a callee called again as often makes the same rows (a jitted helper called at each layer).
        self.call_rows: dict[tuple[str, float], list[CostRow]] = {}

    def context(self, comp: HloComputation) -> CostContext:
        ctx = self.contexts.get(comp.name)
        if ctx is None:
            ctx = self.contexts[comp.name] = CostContext(self.module, comp, self.computation_work)
        return ctx

    def called_cost(self, name: str) -> OpCost:
        """Everything a called computation does once, HBM bytes of its instructions included (an async
        wrapper's or a conditional branch's instructions run as their own kernels)."""
        total = self.totals.get(name)
        if total is None:
            rows: list[CostRow] = []
            self.visit(self.module.computation(name), 1.0, rows)
            total = self.totals[name] = summed(rows)
        return total

    def computation_work(self, name: str) -> OpCost:
        """FLOPs, transcendentals, wire bytes and flags of a computation run once, without HBM bytes: for
        fused computations and reducers, whose values stay on chip (their caller charges its boundary).

        Elementwise FLOPs and transcendentals are summed here over the opcode and shape columns (one per output
        element, as ``elementwise.cost`` counts them), and data movement, which has none, is skipped, all
        without building those instructions; every other instruction is built and takes its rule, as in
        ``visit``.
        """
        total = self.work.get(name)
        if total is None:
            comp = self.module.computation(name)
            # Columns, not instructions: a fused computation's instructions need not be built (``HloComputation``).
            # Each sum is one pass in C over the columns (``compress``/``map``), not a step per instruction.
            opcodes = comp.opcodes
            shapes = comp.shapes
            # A small computation costed from its columns alone (a reducer: XLA prints one per reduce and
            # all-reduce) costs what any other with the same opcodes and shapes costs.
            key = (opcodes, *map(id, shapes)) if len(opcodes) <= _SMALL_COMPUTATION else None
            if key is not None:
                total = self.work_by_columns.get(key)
                if total is not None:
                    self.work[name] = total
                    return total
            present = set(opcodes)
            ruled = present.difference(_COLUMN_OPCODES)
            structure = None
            if ruled and self.structures is not None:
                # Instructions with rules of their own: shared by structure (a layer's copy of a fused dot).
                structure = self.structures.key(name)
                if structure is not None:
                    total = self.work_by_structure.get(structure)
                    if total is not None:
                        self.work[name] = total
                        return total
            flops = transcendentals = 0
            if not _FLOP_OPCODES.isdisjoint(present):
                flops = sum(map(_ELEMENTS, compress(shapes, map(_FLOP_OPCODES.__contains__, opcodes))))
            if not _TRANSCENDENTAL_OPCODES.isdisjoint(present):
                transcendentals = sum(map(_ELEMENTS, compress(shapes, map(_TRANSCENDENTAL_OPCODES.__contains__,
                                                                          opcodes))))
            dynamic = (any(map(_IS_DYNAMIC, shapes))  # (rare: then the opcodes that flag it are looked at)
                       and any(map(_IS_DYNAMIC, compress(shapes, map(_FLAGS_DYNAMIC.__contains__, opcodes)))))
            others = list(compress(range(len(opcodes)), map(ruled.__contains__, opcodes))) if ruled else []
            rest = ZERO
            if others:
                rows: list[CostRow] = []
                self.visit(comp, 1.0, rows, [comp.instruction_at(i) for i in others])
                rest = summed(rows)
            flags = rest.flags | {"dynamic-shape"} if dynamic else rest.flags
            total = self.work[name] = OpCost(flops + rest.flops, transcendentals + rest.transcendentals, 0.0, 0.0,
                                             rest.comm_bytes, rest.comm_kind, rest.group_size, flags)
            if key is not None and not others:
                self.work_by_columns[key] = total
            if structure is not None:
                self.work_by_structure[structure] = total
        return total

    def keyed(self) -> tuple:
        """What ``_cost_walk.c``'s ``shared_rows`` (and ``attribute_key_of``) read to make the rows of free and
        attribute-keyed instructions and to answer ``computation_work`` from its columns memo, in the order that
        file's top comment gives."""
        return (FREE_OPCODES, ZERO, keyed_opcodes(), _COLLECTIVES, self.by_attributes, self.work, self.bare_texts,
                without_metadata, self.computation_work, self.work_by_columns, self.module._by_name,
                _SMALL_COMPUTATION, self.call_rows if SHARE_CALL_ROWS else None)

    def visit(self, comp: HloComputation, count: float, rows: list[CostRow],
              instructions: Iterable[HloInstruction] | None = None) -> None:
        """Append a row per instruction of ``comp`` (or of ``instructions``, some of them) run ``count``
        times, and the rows of the computations they run (loop bodies, callees)."""
        from hloscope.cost import RULES

        if instructions is None:
            instructions = comp.instructions  # (built: a lazy body builds them all here)
        ctx = self.context(comp)
        name = comp.name
        append = rows.append
        by_shapes = self.by_shapes
        by_attributes = self.by_attributes
        work = self.computation_work
        shape_of = comp.shape_of
        shared = shared_rows  # (C: the rows whose shared cost is known, up to the next it leaves here)
        if not isinstance(instructions, (list, tuple)):
            instructions = list(instructions)
        bare = self.bare_texts
        if shared is not None:
            index, shapes = comp.name_index(), comp.shapes
            keyed = self.keyed() if SHARE_ATTRIBUTE_KEYS else None
        k, n = 0, len(instructions)
        while k < n:
            if shared is not None:
                resume = shared(instructions, k, name, count, index, shapes, by_shapes, _SHAPE_RULED, CostRow, rows,
                                keyed)
                if resume > k:
                    k = resume  # (the rows before it made in C: jumped, not walked)
                    continue
            inst = instructions[k]
            k += 1
            opcode = inst.opcode
            rule = RULES.get(opcode)
            if rule is not None:
                key = None
                if opcode in _SHAPE_RULED:
                    # The cost depends on the opcode and the result and operand shapes alone: computed once per
                    # distinct (opcode, shapes), which a module repeats layer after layer.
                    memo = by_shapes
                    try:
                        key = (opcode, id(inst.shape), *map(id, map(shape_of, inst.operands)))
                    except KeyError:
                        pass
                elif SHARE_ATTRIBUTE_KEYS and opcode not in FREE_OPCODES:
                    # Rules that read attributes and called computations too: once per distinct
                    # ``attribute_key`` (a layer's dots, reduces and collectives repeat the layer before's).
                    memo = by_attributes
                    key = attribute_key(inst, shape_of, work, opcode in _COLLECTIVES, bare)
                if key is None:
                    cost = _apply(rule, inst, inst, ctx)
                else:
                    cost = memo.get(key)
                    if cost is None:
                        cost = memo[key] = _apply(rule, inst, inst, ctx)
                append(CostRow(name, inst, cost, count))
            elif opcode.endswith("-start") and not inst.called_computations and opcode[:-6] in RULES:
                # Async sugar printed without calls= (TPU slice-start, ...): result is ((operands), out, ctx).
                # Costed once per ``attribute_key``, as the keyed opcodes are: the wrapped rule reads the shapes
                # and attributes that key holds (a deviceless TPU step's slice-starts repeat layer after layer).
                key = attribute_key(inst, shape_of, work, False, bare) if SHARE_ATTRIBUTE_KEYS else None
                cost = None if key is None else by_attributes.get(key)
                if cost is None:
                    cost = self.async_sugar(inst, opcode[:-6], ctx)
                    if key is not None:
                        by_attributes[key] = cost
                append(CostRow(name, inst, cost, count))
            elif opcode == "fusion":
                append(CostRow(name, inst, self.fusion(inst, ctx), count))
            elif opcode == "while":
                trips, flags = trip_count(inst, ctx)
                append(CostRow(name, inst, OpCost(flags=flags) if flags else ZERO, count))
                calls = inst.called_computations
                for body in calls.get("body", ()):
                    self.visit(self.module.computation(body), count * trips, rows)
                for cond in calls.get("condition", ()):
                    self.visit(self.module.computation(cond), count * (trips + 1), rows)
            elif opcode == "call":
                append(CostRow(name, inst, ZERO, count))
                for callee in inst.called_computations.get("to_apply", ()) + inst.called_computations.get("calls", ()):
                    made = self.call_rows.get((callee, count)) if SHARE_CALL_ROWS else None
                    if made is None:
                        start = len(rows)
                        self.visit(self.module.computation(callee), count, rows)
                        made = self.call_rows[callee, count] = rows[start:]
                    else:
                        rows += made  # (rows are immutable tuples: shared, as equal rows would be)
            elif opcode == "async-start" or (opcode.endswith("-start") and "calls" in inst.called_computations):
                # Async wrappers print as async-start or as <wrapped opcode>-start (call-start, slice-start,
                # reduce-scatter-start, ...): the wrapped computation's cost, once.
                callees = inst.called_computations.get("calls", ())
                cost = self.called_cost(callees[0]) if callees else ZERO
                append(CostRow(name, inst, cost, count))
            elif opcode in ("async-update", "async-done") or opcode.endswith(("-done", "-update")):
                append(CostRow(name, inst, ZERO, count))
            elif opcode == "conditional":
                append(CostRow(name, inst, self.conditional(inst), count))
            else:
                append(CostRow(name, inst, OpCost(math.nan, math.nan, math.nan, math.nan, flags=_UNKNOWN_OPCODE),
                               count))

    def fusion(self, inst: HloInstruction, ctx: CostContext) -> OpCost:
        callee = inst.called_computations.get("calls", ())
        if not callee:
            return boundary(inst, ctx, flags=frozenset({"fusion-without-computation"}))
        return fusion_rule.cost(inst, ctx, self.fused_bytes(callee[0]))

    def fused_bytes(self, name: str) -> fusion_rule.FusionBytes:
        fb = self.fusion_bytes.get(name)
        if fb is None:
            structure = self.structures.key(name) if self.structures is not None else None
            if structure is not None:
                fb = self.bytes_by_structure.get(structure)
            if fb is None:
                fb = fusion_rule.FusionBytes(self.module.computation(name), self.fused_bytes)
                if structure is not None:
                    self.bytes_by_structure[structure] = fb
            self.fusion_bytes[name] = fb
        return fb

    def async_sugar(self, inst: HloInstruction, base: str, ctx: CostContext) -> OpCost:
        from hloscope.cost import RULES
        from hloscope.hlo import HloInstruction as Instruction

        shape = inst.shape
        out = shape.tuple_shapes[1] if shape.is_tuple and len(shape.tuple_shapes) >= 2 else shape
        proxy = Instruction(inst.name, base, out, inst.operands, inst.called_computations, inst.is_root,
                            inst.line, inst.literal, inst.parameter_number, "", None)
        proxy._decoded = inst._decode()
        return _apply(RULES[base], proxy, inst, ctx)

    def conditional(self, inst: HloInstruction) -> OpCost:
        branches = [self.called_cost(b) for b in inst.called_computations.get("branch_computations", ())]
        if not branches:
            return OpCost(flags=frozenset({"conditional-max-branch"}))
        best = max(branches, key=lambda c: (c.flops + c.transcendentals, c.bytes_accessed))
        return OpCost(best.flops, best.transcendentals, best.bytes_read, best.bytes_written, best.comm_bytes,
                      best.comm_kind, best.group_size, best.flags | {"conditional-max-branch"})
