"""Collectives: bytes each device sends on the wire, by the ring algorithm, plus HBM traffic and the
all-reduce reduction FLOPs.

Group size N: the size of the first replica group (explicit, iota or mesh form, ``mesh[...], device_ids=(...)``
included; XLA requires equal groups; read from the printed form without listing the groups),
or, with ``replica_groups={}``, every device of the collective's mode (XLA ``CollectiveOpGroupMode``): no
``channel_id`` -> cross-replica (``replica_count``); ``use_global_device_ids`` -> all devices
(``replica_count * num_partitions``); otherwise cross-partition (``num_partitions``).

Wire bytes per device ("How to Scale Your Model", Part 3, ring collectives; NCCL's bus-bandwidth formulas):

============================  ==============================
all-gather                    (N-1)/N * result bytes
reduce-scatter                (N-1)/N * operand bytes
all-reduce                    2(N-1)/N * operand bytes
all-to-all, ragged-all-to-all (N-1)/N * operand bytes
collective-broadcast          (N-1)/N * operand bytes
collective-permute            operand bytes (one send per source-target pair)
============================  ==============================

Reduction FLOPs of an all-reduce (and reduce-scatter): ``(N-1)/N * elements * cost(to_apply)`` per device;
XLA's ``HandleAllReduce`` instead charges ``elements * cost(to_apply)``, as if N = 2 (documented difference).
``*-start`` carries the cost of an async pair; ``*-done`` is free. HBM bytes (operands read, result written)
are tile-padded like every other op's; wire bytes are the data.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hloscope.cost._types import ZERO, OpCost

if TYPE_CHECKING:
    from hloscope.cost._types import CostContext
    from hloscope.hlo import HloInstruction

#: Opcode (as printed, sync or ``-start``) -> collective kind.
KINDS = {
    "all-reduce": "all-reduce", "all-reduce-start": "all-reduce",
    "all-gather": "all-gather", "all-gather-start": "all-gather",
    "reduce-scatter": "reduce-scatter",
    "all-to-all": "all-to-all", "ragged-all-to-all": "ragged-all-to-all",
    "collective-permute": "collective-permute", "collective-permute-start": "collective-permute",
    "collective-broadcast": "collective-broadcast",
}
DONE_OPCODES = frozenset({"all-reduce-done", "all-gather-done", "collective-permute-done"})


def group_size(inst: HloInstruction, ctx: CostContext) -> int:
    """N, the devices taking part in each group of ``inst`` (see module docstring). (Each attribute is read
    alone, ``HloInstruction.attribute``: the rest of a collective's attributes -- metadata, backend config --
    need not be decoded for its cost.)"""
    groups = inst.attribute("replica_groups")
    if groups is not None and groups.group_size is not None:
        return groups.group_size  # (known without listing the groups: a mesh may number 2**20 devices)
    module = ctx.module
    if inst.attribute("channel_id") is None:  # (a printed channel_id is a number)
        return module.replica_count
    if inst.attribute("use_global_device_ids"):
        return module.replica_count * module.num_partitions
    return module.num_partitions


def cost(inst: HloInstruction, ctx: CostContext) -> OpCost:
    kind = KINDS[inst.opcode]
    n = group_size(inst, ctx)
    operand_bytes = sum(ctx.shape_of(o).size_bytes for o in inst.operands)
    hbm_read = sum(ctx.shape_of(o).hbm_size_bytes for o in inst.operands)
    result = inst.shape
    if inst.opcode.endswith("-start") and result.is_tuple:
        # e.g. all-gather-start -> (operand, result): the last leaf is the result buffer.
        last = list(result.leaves())[-1]
        if kind in ("collective-permute", "all-reduce"):
            result_bytes, hbm_written = operand_bytes, hbm_read
        else:
            result_bytes, hbm_written = last.size_bytes, last.hbm_size_bytes
    else:
        result_bytes, hbm_written = result.size_bytes, result.hbm_size_bytes
    fraction = (n - 1) / n if n > 0 else 0.0
    flops = 0.0
    if kind == "all-gather":
        wire = fraction * result_bytes
    elif kind == "reduce-scatter":
        wire = fraction * operand_bytes
    elif kind == "all-reduce":
        wire = 2 * fraction * operand_bytes
    elif kind == "collective-permute":
        pairs = inst.attribute("source_target_pairs", ())
        wire = operand_bytes if pairs or n else 0.0
    else:  # all-to-all, ragged-all-to-all, collective-broadcast
        wire = fraction * operand_bytes
    if kind in ("all-reduce", "reduce-scatter"):
        names = inst.called_computations.get("to_apply", ())
        per_element = ctx.computation_cost(names[0]).flops if names else 1.0
        elements = sum(ctx.shape_of(o).element_count for o in inst.operands)
        flops = fraction * elements * per_element
    flags = frozenset({"dynamic-shape"}) if result.is_dynamic else frozenset()
    return OpCost(flops, 0.0, hbm_read, hbm_written, wire, kind, n, flags)


def done(inst: HloInstruction, ctx: CostContext) -> OpCost:
    return ZERO
