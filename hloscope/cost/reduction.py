"""Reductions and other instructions that apply a called computation: reduce, reduce-window,
select-and-scatter, scatter, map, sort.

XLA semantics (xla/service/hlo_cost_analysis.cc): the called computation's per-application cost times the
number of applications.

- reduce: ``(elements of operand 0 - elements of one result) * cost(to_apply)`` (``HandleReduce``).
- reduce-window: ``(window elements - 1) * result elements * cost(to_apply)`` (``HandleReduceWindow``);
  cumulative sums written as reduce-window follow the same rule.
- select-and-scatter: ``source elements * ((window elements - 1) * cost(select) + cost(scatter))``.
- scatter: ``update elements * cost(to_apply)`` (``HandleScatter``).
- map: ``result elements * cost(to_apply)``.
- sort: ``n * ceil(log2 n)`` with n all elements of operand 0 (``HandleSort``), counted as FLOPs.
- fft, cholesky, triangular-solve, rng: XLA's closed forms (see each function).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from hloscope.cost._bytes import boundary
from hloscope.cost._types import OpCost

if TYPE_CHECKING:
    from hloscope.cost._types import CostContext
    from hloscope.hlo import HloInstruction, Shape


def _first_array(shape: Shape) -> Shape:
    return shape.tuple_shapes[0] if shape.is_tuple and shape.tuple_shapes else shape


def _applied(inst: HloInstruction, ctx: CostContext, role: str, applications: int) -> OpCost:
    names = inst.called_computations.get(role, ())
    sub = ctx.computation_cost(names[0]) if names else OpCost()
    return boundary(inst, ctx, flops=applications * sub.flops,
                    transcendentals=applications * sub.transcendentals)


def reduce(inst: HloInstruction, ctx: CostContext) -> OpCost:
    operand = ctx.operand_shape(inst, 0)
    count = max(operand.element_count - _first_array(inst.shape).element_count, 0)  # XLA: -1 when empty
    return _applied(inst, ctx, "to_apply", count)


def reduce_window(inst: HloInstruction, ctx: CostContext) -> OpCost:
    """``(window elements - 1) * result elements`` applications, except a window that spans its whole
    dimension for every output (size ``2d - 1``, padding ``d - 1`` on both sides, the only windowed dim): every
    output of a row is the same reduction, so it is one reduce per row, ``rows * (d - 1)``, then a broadcast.
    XLA recognises the same case but charges ``rows + (d - 1)``; hloscope charges the reduction's work."""
    window = inst.attribute("window", ())
    out = _first_array(inst.shape)
    window_elements = math.prod(w.size for w in window)
    count = (window_elements - 1) * out.element_count
    reduced = [k for k, w in enumerate(window) if w.size != 1]
    if len(reduced) == 1 and len(window) == len(out.dims):
        k = reduced[0]
        w, d = window[k], out.dims[k]
        if w.padding_low == w.padding_high == d - 1 and w.size == 2 * d - 1 and w.stride == 1 and d > 1:
            count = (out.element_count // d) * (d - 1)
    return _applied(inst, ctx, "to_apply", count)


def select_and_scatter(inst: HloInstruction, ctx: CostContext) -> OpCost:
    window = inst.attribute("window", ())
    window_elements = math.prod(w.size for w in window)
    source = ctx.operand_shape(inst, 1).element_count
    calls = inst.called_computations
    select = calls.get("select", ()) or calls.get("to_apply", ())
    scatter = calls.get("scatter", ())
    select_cost = ctx.computation_cost(select[0]).flops if select else 0.0
    scatter_cost = ctx.computation_cost(scatter[0]).flops if scatter else 0.0
    return boundary(inst, ctx, flops=source * ((window_elements - 1) * select_cost + scatter_cost))


def scatter(inst: HloInstruction, ctx: CostContext) -> OpCost:
    n_inputs = len(inst.operands) // 2  # operands: inputs..., indices, updates...
    updates = ctx.operand_shape(inst, len(inst.operands) - 1).element_count if n_inputs else 0
    return _applied(inst, ctx, "to_apply", updates)


def map_(inst: HloInstruction, ctx: CostContext) -> OpCost:
    return _applied(inst, ctx, "to_apply", inst.shape.element_count)


def sort(inst: HloInstruction, ctx: CostContext) -> OpCost:
    """XLA's ``HandleSort``: ``n * ceil(log2 n)`` with n = all elements of operand 0 (whatever the sort
    dimension; an over-estimate for batched sorts, kept to match XLA)."""
    n = ctx.operand_shape(inst, 0).element_count
    return boundary(inst, ctx, flops=n * math.ceil(math.log2(n)) if n > 1 else 0)


def scatter_in_place(inst: HloInstruction, ctx: CostContext) -> OpCost:
    """Scatter updates its operand in place: read the updates and the touched operand elements, write them
    (XLA ``HandleScatter``: 3 x updates + indices)."""
    flops = scatter(inst, ctx).flops
    updates = ctx.operand_shape(inst, len(inst.operands) - 1).padded_size_bytes
    indices = ctx.operand_shape(inst, len(inst.operands) // 2).padded_size_bytes if len(inst.operands) > 2 else 0
    return OpCost(flops, 0.0, 2 * updates + indices, updates)


def fft(inst: HloInstruction, ctx: CostContext) -> OpCost:
    """XLA ``HandleFft``: ``8 * prod(floor(log2 L) for L in fft_length) * elements`` FLOPs."""
    lengths = inst.attribute("fft_length", ())
    factor = math.prod(max(int(math.log2(n)), 0) for n in lengths if n > 0)
    return boundary(inst, ctx, flops=8 * factor * inst.shape.element_count)


def cholesky(inst: HloInstruction, ctx: CostContext) -> OpCost:
    """XLA ``HandleCholesky``: ``n * elements / 3`` FLOPs for [..., n, n]."""
    a = ctx.operand_shape(inst, 0)
    n = a.dims[-1] if a.dims else 0
    return boundary(inst, ctx, flops=n * a.element_count // 3)


def triangular_solve(inst: HloInstruction, ctx: CostContext) -> OpCost:
    """XLA ``HandleTriangularSolve``: ``2 * n * elements(b)`` with n the size of the triangular matrix."""
    a = ctx.operand_shape(inst, 0)
    b = ctx.operand_shape(inst, 1)
    n = a.dims[-1] if a.dims else 0
    return boundary(inst, ctx, flops=2 * n * b.element_count)


def rng(inst: HloInstruction, ctx: CostContext) -> OpCost:
    """XLA counts one transcendental per generated element."""
    return boundary(inst, ctx, transcendentals=inst.shape.element_count)
