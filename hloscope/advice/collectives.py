"""Rule ``communication-bound-collective``: a collective whose wire time exceeds the compute of the matmul it
feeds or is fed by, and the dimension at which that matmul would hide it.

Source: "How to Scale Your Model", Part 1 ("network communication rooflines") and Part 3 ("sharded matrices").
Two cases, read from the HLO around the collective:

* *fed by* a matmul (an ``all-reduce`` or ``reduce-scatter`` of partial sums: the contracting dimension ``D`` is
  sharded): compute scales with ``D``, the wire bytes do not, so the matmul hides the collective once
  ``D >= D x comm_s / compute_s``. The book's example -- ``X[B, D] @ Y[D, F]`` on two TPU v5e with ``D``
  sharded: ``T_math = BDF / C``, ``T_comms = 2BF / W_ici`` -- gives ``D > 2C / W_ici = 8,755``
  (:func:`contracting_dim_to_hide` reproduces it);
* *feeding* a matmul (an ``all-gather`` of weights): compute scales with the other operand's free size (the
  batch ``B``), the gathered bytes do not: compute-bound once ``B >= B x comm_s / compute_s`` (Part 3:
  ``B > C / W_ici`` for an AllGather of ``Y[D_X, F]``).

An ``all-reduce`` of a result that is only sliced afterwards moves twice what a ``reduce-scatter`` does (Part 3:
AllReduce = ReduceScatter + AllGather); that is said too. Gain: ``comm_s - compute_s`` of the pair (hidden at the
grown size), or half the all-reduce's ``comm_s`` for the reduce-scatter.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from hloscope.advice._common import (SIGNIFICANT_SHARE, Advice, OpsColumns, dot_in, modules_by_name, picked,
                                     row_instruction, shares, users)
from hloscope.units import duration

if TYPE_CHECKING:
    import numpy as np

    from hloscope.result import Report

RULE = "communication-bound-collective"
SOURCE = "How to Scale Your Model, Part 1 (network rooflines: D > 2C/W_ici) and Part 3 (sharded matmuls)"
_PARTIAL_SUMS = frozenset({"all-reduce", "reduce-scatter", "all-reduce-start"})


def contracting_dim_to_hide(peak_flops_per_s: float, link_bytes_per_s: float, devices: int = 2,
                            bytes_per_element: int = 2) -> float:
    """The contracting dimension ``D`` above which ``X[B, D] @ Y[D, F]`` with ``D`` sharded over ``devices`` hides
    the reduction of its ``[B, F]`` partial sums (book, Part 1): ``T_math = 2BDF / (devices C)``,
    ``T_comms = bytes_per_element BF / W`` per device, so ``D > devices bytes_per_element C / (2 W)``.
    TPU v5e, 2 chips, bf16: ``2 x 2 x 1.97e14 / (2 x 4.5e10) = 8,755``."""
    return devices * bytes_per_element * peak_flops_per_s / (2 * link_bytes_per_s)


def advise(report: Report, share: np.ndarray | None = None, ops: OpsColumns | None = None) -> list[Advice]:
    ops = OpsColumns(report) if ops is None else ops
    modules = modules_by_name(report)
    share = shares(ops) if share is None else share  # (advise() hands over the one it made for every rule)
    out = []
    rows = picked(ops.equal("category", "collective") & ops.equal("bound", "communication")
                  & (share >= SIGNIFICANT_SHARE))
    # (module, instruction) -> row, made only when a collective is picked
    by_name = {(m, i): k for k, (m, i) in enumerate(zip(ops.column("module"), ops.column("instruction")))} if rows else {}
    for i in rows:
        r = ops.row(i)
        named = row_instruction(modules, r)
        if named is None:
            continue
        module, comp, inst = named
        found = _matmul_beside(module, comp, inst, ops, by_name)
        comm_s = float(r["comm_s"])
        if found is not None:
            mm_row, mm, fed_by = found
            compute_s = float(mm_row["compute_s"]) * float(r["executions"]) / max(float(mm_row["executions"]), 1.0)
            if compute_s > 0 and comm_s > compute_s:
                ratio = comm_s / compute_s
                if fed_by:
                    dim = f"the contracting dimension k = {mm.k} per device to >= {math.ceil(mm.k * ratio)}"
                else:
                    side = min(mm.m, mm.n)
                    dim = f"the batch (the matmul's smaller free side, {side}) to >= {math.ceil(side * ratio)}"
                out.append(Advice(
                    RULE, r["module"], f"{r['instruction']},{mm_row['instruction']}",
                    f"{r['comm_kind']} over {int(r['group_size'])} devices takes {duration(comm_s)} on the wire; the "
                    f"matmul it is {'fed by' if fed_by else 'feeding'} ({mm_row['instruction']}) computes "
                    f"{duration(compute_s)}",
                    f"grow {dim} (x{ratio:.1f}) so the matmul hides the collective, or shard so that less crosses "
                    "the link", comm_s - compute_s, "comm_s - compute_s of the matmul", SOURCE))
                continue
        if inst.opcode in ("all-reduce", "all-reduce-start") and _only_sliced(comp, inst.name):
            out.append(Advice(
                RULE, r["module"], r["instruction"],
                f"all-reduce of {int(r['wire_bytes'])} wire bytes whose result is only sliced afterwards",
                "reduce-scatter instead (each device keeps its slice): half the bytes of an all-reduce",
                comm_s / 2, "comm_s / 2 (reduce-scatter moves half an all-reduce's bytes)", SOURCE))
    return out


def _matmul_beside(module, comp, inst, ops, by_name):
    """``(ops row, MatmulShape, fed_by)`` of the matmul producing the collective's operand (``fed_by``) or, for
    a collective that is not a reduction of partial sums, the first matmul using its result."""
    candidates = []
    if inst.opcode in _PARTIAL_SUMS:
        candidates.extend((comp.instruction(o), True) for o in inst.operands)
    else:
        candidates.extend((comp.instruction_at(j), False) for j in users(comp, inst.name))
    for cand, fed_by in candidates:
        k = by_name.get((module.name, cand.name))
        if k is None or ops.column("category")[k] != "matmul":
            continue
        mm = dot_in(module, comp.name, cand)
        if mm is not None:
            return ops.row(k), mm, fed_by
    return None


def _only_sliced(comp, name: str) -> bool:
    uses = [comp.opcodes[j] for j in users(comp, name)]
    return bool(uses) and all(op in ("dynamic-slice", "slice") for op in uses)
