"""Control flow: how many times a loop body runs.

XLA semantics: a ``while`` runs its condition ``n + 1`` times and its body ``n`` times. XLA's
``HloCostAnalysis`` counts both once (so ``cost_analysis()`` of a scanned program is off by the trip count);
hloscope multiplies by ``n``, taken from, in order:

1. ``backend_config={"known_trip_count":{"n":"N"}}`` (XLA's ``WhileLoopTripCountAnnotator``; CPU and GPU).
   ``N`` must be an integer in ``[0, 2**63 - 1]`` (XLA writes an int64; JSON gives it as a string of ASCII
   digits or a number): any other value -- negative, beyond int64, a fraction, non-ASCII digits, not a number
   -- is ignored, as if absent (a hostile or corrupted annotation neither crashes nor gives negative or
   astronomical FLOPs).
2. The condition, when it is the canonical ``compare(get-tuple-element(param, k), constant(N))`` (directly or as
   a fused root), with the loop-carried value ``k`` initialised from a constant in the ``while``'s operand
   tuple (0 when that cannot be seen) and stepping by 1: ``N - init`` for ``LT`` (``+1`` for ``LE``), and
   the mirror image for ``GT``/``GE``. TPU compiles carry no ``known_trip_count``. Flag
   ``inferred-trip-count``.
   An inferred count outside ``[0, 2**63 - 1]`` is not used.
3. Otherwise 1, with flag ``unknown-trip-count``.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from hloscope._regex import LazyPattern

if TYPE_CHECKING:
    from hloscope.cost._types import CostContext
    from hloscope.hlo import HloComputation, HloInstruction, HloModule

#: The largest trip count taken (XLA's trip counts are int64).
MAX_TRIP_COUNT = (1 << 63) - 1
#: An integer as HLO text and JSON write it: ASCII digits only (``int()`` would also take ``"\u0663"``,
#: ``"1_000"`` or surrounding white space), at most 20 of them (no int64 has more; ``int()`` refuses > 4300).
_INT_TEXT = LazyPattern(r"[+-]?[0-9]{1,20}")


def trip_count(inst: HloInstruction, ctx: CostContext) -> tuple[int, frozenset[str]]:
    """Body executions of a ``while`` per execution of the ``while`` and the flags saying how it was found.

    Always an ``int`` in ``[0, MAX_TRIP_COUNT]`` (rules 1-3 of the module docstring): never negative, never
    beyond int64, whatever the ``backend_config`` or the condition says. Never raises.
    """
    try:
        cfg = inst.backend_config
    except RecursionError:  # JSON nested deeper than Python's parser goes: not XLA's config
        cfg = None
    if isinstance(cfg, dict):
        known = cfg.get("known_trip_count")
        if isinstance(known, dict) and "n" in known:
            n = _trip_count_value(known["n"])
            if n is not None:
                return n, frozenset()
            # out of range or not an integer: ignored, as if absent (the condition may still tell)
    cond_names = inst.called_computations.get("condition", ())
    if cond_names:
        inferred = _from_condition(ctx.module, ctx.module.computation(cond_names[0]), inst, ctx)
        if inferred is not None:
            return inferred, frozenset({"inferred-trip-count"})
    return 1, frozenset({"unknown-trip-count"})


def _trip_count_value(v: Any) -> int | None:
    """A ``known_trip_count`` value as a trip count: an int (not a bool), or a string of ASCII digits, in
    ``[0, MAX_TRIP_COUNT]``; else None."""
    if isinstance(v, str):
        v = _parse_int(v)
    elif type(v) is not int:  # bools, floats (1e400, NaN, 2.5), lists, objects: not a count
        return None
    return v if v is not None and 0 <= v <= MAX_TRIP_COUNT else None


def _parse_int(text: str) -> int | None:
    """``text`` (a JSON string or an HLO literal) as an int when it is one written in ASCII digits, else None."""
    return int(text) if _INT_TEXT.fullmatch(text) else None


def _int_literal(inst: HloInstruction) -> int | None:
    """The value of a scalar integer ``constant`` (ASCII digits, at most 20 of them), else None."""
    if inst.opcode != "constant" or inst.shape.dims:
        return None
    return _parse_int(inst.literal.strip())


def _from_condition(module: HloModule, cond: HloComputation, loop: HloInstruction, ctx: CostContext) -> int | None:
    """Rule 2 of the module docstring; None when the condition is not the canonical one (or names something
    that is not there: a hand-written module may)."""
    by_name = {i.name: i for i in cond.instructions}
    root = by_name.get(cond.root_name)
    if root is None:
        return None
    if root.opcode == "fusion":
        calls = root.called_computations.get("calls", ())
        if not calls:
            return None
        try:
            fused = module.computation(calls[0])
        except KeyError:
            return None
        fused_by_name = {i.name: i for i in fused.instructions}
        froot = fused_by_name.get(fused.root_name)
        if froot is None or froot.opcode != "compare" or len(froot.operands) != 2:
            return None
        # Map the fused compare's operands back to the condition's values.
        sides = []
        for op in froot.operands:
            fi = fused_by_name.get(op)
            if fi is not None and fi.opcode == "parameter":
                k = fi.parameter_number
                fi = by_name.get(root.operands[k]) if 0 <= k < len(root.operands) else None
            if fi is None:
                return None
            sides.append(fi)
        compare, lhs, rhs = froot, sides[0], sides[1]
    elif root.opcode == "compare" and len(root.operands) == 2:
        compare, lhs, rhs = root, by_name.get(root.operands[0]), by_name.get(root.operands[1])
        if lhs is None or rhs is None:
            return None
    else:
        return None
    direction = compare.attributes.get("direction", "")
    bound = _int_literal(rhs)
    counter = lhs
    if bound is None:
        bound, counter = _int_literal(lhs), rhs
        direction = {"LT": "GT", "LE": "GE", "GT": "LT", "GE": "LE"}.get(direction, direction)
    if bound is None or counter.opcode != "get-tuple-element":
        return None
    index = counter.attributes.get("index", 0)
    init = 0
    init_tuple = ctx.by_name.get(loop.operands[0]) if loop.operands else None
    if (init_tuple is not None and init_tuple.opcode == "tuple" and isinstance(index, int)
            and 0 <= index < len(init_tuple.operands)):
        start = ctx.by_name.get(init_tuple.operands[index])
        value = _int_literal(start) if start is not None else None
        if value is not None:
            init = value
    if direction == "LT":
        n = bound - init
    elif direction == "LE":
        n = bound - init + 1
    elif direction == "GT":
        n = init - bound
    elif direction == "GE":
        n = init - bound + 1
    elif direction == "NE":
        n = abs(bound - init)
    else:
        return None
    n = max(n, 0)
    return n if n <= MAX_TRIP_COUNT else None
