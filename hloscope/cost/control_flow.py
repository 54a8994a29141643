"""Control flow: how many times a loop body runs.

XLA semantics: a ``while`` runs its condition ``n + 1`` times and its body ``n`` times. XLA's
``HloCostAnalysis`` counts both once (so ``cost_analysis()`` of a scanned program is off by the trip count);
hloscope multiplies by ``n``, taken from, in order:

1. ``backend_config={"known_trip_count":{"n":"N"}}`` (XLA's ``WhileLoopTripCountAnnotator``; CPU and GPU).
2. The condition, when it is the canonical ``compare(get-tuple-element(param, k), constant(N))`` (directly or as
   a fused root), with the loop-carried value ``k`` initialised from a constant in the ``while``'s operand
   tuple (0 when that cannot be seen) and stepping by 1: ``N - init`` for ``LT`` (``+1`` for ``LE``), and
   the mirror image for ``GT``/``GE``. TPU compiles carry no ``known_trip_count``. Flag
   ``inferred-trip-count``.
3. Otherwise 1, with flag ``unknown-trip-count``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hloscope.cost._types import CostContext
    from hloscope.hlo import HloComputation, HloInstruction, HloModule


def trip_count(inst: HloInstruction, ctx: CostContext) -> tuple[int, frozenset[str]]:
    """Body executions of a ``while`` per execution of the ``while`` and the flags saying how it was found."""
    cfg = inst.backend_config
    if isinstance(cfg, dict):
        known = cfg.get("known_trip_count")
        if isinstance(known, dict) and "n" in known:
            try:
                return int(known["n"]), frozenset()
            except (TypeError, ValueError):
                pass
    cond_names = inst.called_computations.get("condition", ())
    if cond_names:
        inferred = _from_condition(ctx.module, ctx.module.computation(cond_names[0]), inst, ctx)
        if inferred is not None:
            return inferred, frozenset({"inferred-trip-count"})
    return 1, frozenset({"unknown-trip-count"})


def _int_literal(inst: HloInstruction) -> int | None:
    if inst.opcode != "constant" or inst.shape.dims:
        return None
    try:
        return int(inst.literal.strip())
    except ValueError:
        return None


def _from_condition(module: HloModule, cond: HloComputation, loop: HloInstruction, ctx: CostContext) -> int | None:
    by_name = {i.name: i for i in cond.instructions}
    root = by_name[cond.root_name]
    if root.opcode == "fusion":
        fused = module.computation(root.called_computations["calls"][0])
        fused_by_name = {i.name: i for i in fused.instructions}
        froot = fused_by_name[fused.root_name]
        if froot.opcode != "compare":
            return None
        # Map the fused compare's operands back to the condition's values.
        sides = []
        for op in froot.operands:
            fi = fused_by_name[op]
            if fi.opcode == "parameter":
                sides.append(by_name[root.operands[fi.parameter_number]])
            else:
                sides.append(fi)
        compare, lhs, rhs = froot, sides[0], sides[1]
    elif root.opcode == "compare":
        compare, lhs, rhs = root, by_name[root.operands[0]], by_name[root.operands[1]]
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
    if init_tuple is not None and init_tuple.opcode == "tuple" and index < len(init_tuple.operands):
        value = _int_literal(ctx.by_name[init_tuple.operands[index]])
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
    return max(n, 0)
