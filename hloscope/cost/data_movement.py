"""Instructions that move or reinterpret data: no FLOPs, only HBM bytes.

XLA semantics (xla/service/hlo_cost_analysis.cc): no FLOPs for copy, broadcast, reshape, transpose, slice,
concatenate, pad, reverse, gather, iota, ...; bytes per the handler:

- free (no HBM traffic): parameter, constant, get-tuple-element, tuple, bitcast, after-all, partition-id,
  replica-id, opt-barrier, add-dependency, domain: XLA charges them nothing.
- slice / dynamic-slice: read only the sliced elements (= result), write the result.
- dynamic-update-slice: in place; read and write only the update.
- gather: read the gathered elements (= result) and the indices, write the result.
- everything else: operands read, result written.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hloscope.cost._bytes import boundary
from hloscope.cost._types import ZERO, OpCost

if TYPE_CHECKING:
    from hloscope.cost._types import CostContext
    from hloscope.hlo import HloInstruction

FREE_OPCODES = frozenset(
    "parameter constant get-tuple-element tuple bitcast after-all partition-id replica-id optimization-barrier opt-barrier "
    "add-dependency domain get-dimension-size".split()
)

#: Plain copies of their operands: operands read, result written, no FLOPs.
MOVE_OPCODES = frozenset(
    "copy broadcast reshape dynamic-reshape transpose concatenate pad reverse iota "
    "rng-bit-generator rng-get-and-update-state set-dimension-size send recv infeed outfeed "
    "topk".split()
)


def free(inst: HloInstruction, ctx: CostContext) -> OpCost:
    return ZERO


def move(inst: HloInstruction, ctx: CostContext) -> OpCost:
    return boundary(inst, ctx)


def copy_start(inst: HloInstruction, ctx: CostContext) -> OpCost:
    """An async copy (TPU prefetch between memory spaces): the operand is read and written once; the result
    tuple (destination, aliased source, context) is not extra traffic, and copy-done is free."""
    size = ctx.operand_shape(inst, 0).padded_size_bytes if inst.operands else 0
    return OpCost(bytes_read=size, bytes_written=size)


def slice_(inst: HloInstruction, ctx: CostContext) -> OpCost:
    """slice and dynamic-slice: the result's bytes are read (plus the start indices), and written."""
    out = inst.shape.padded_size_bytes
    indices = sum(ctx.shape_of(o).padded_size_bytes for o in inst.operands[1:])
    return OpCost(bytes_read=out + indices, bytes_written=out)


def dynamic_update_slice(inst: HloInstruction, ctx: CostContext) -> OpCost:
    """In place: the update (operand 1) and indices are read, the update's bytes written."""
    update = ctx.operand_shape(inst, 1).padded_size_bytes
    indices = sum(ctx.shape_of(o).padded_size_bytes for o in inst.operands[2:])
    return OpCost(bytes_read=update + indices, bytes_written=update)


def gather(inst: HloInstruction, ctx: CostContext) -> OpCost:
    out = inst.shape.padded_size_bytes
    indices = ctx.operand_shape(inst, 1).padded_size_bytes if len(inst.operands) > 1 else 0
    return OpCost(bytes_read=out + indices, bytes_written=out)
