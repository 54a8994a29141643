"""What every advice rule shares: the ``Advice`` record, significance, and reading a matmul's shapes from the HLO.

Advice is computed from the scored tables of a ``Report`` (and, where a rule needs an op's shapes or its
neighbours, the parsed modules the report keeps); nothing is re-parsed or re-scored.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterator

if TYPE_CHECKING:
    import pandas as pd

    from hloscope.hlo import HloComputation, HloInstruction, HloModule

#: An op (or a group of ops) is worth advice when it takes at least this share of its module's time.
SIGNIFICANT_SHARE = 0.05


@dataclass(frozen=True)
class Advice:
    """One piece of advice.

    Attributes:
        rule: the rule's id (``memory-bound-matmul``, ...).
        module: the HLO module.
        ops: the instruction(s) it is about, comma-joined.
        evidence: the numbers from the tables that triggered it, in words.
        action: what to change, with the number the rule computed (a dimension, a dtype, a schedule).
        gain_s: roofline (or measured) seconds per module run the change could save at most: an upper bound.
        gain_basis: how ``gain_s`` was computed, in words.
        source: where the rule comes from (book part and section, XLA/JAX docs).
    """

    rule: str
    module: str
    ops: str
    evidence: str
    action: str
    gain_s: float
    gain_basis: str
    source: str


def time_column(ops: pd.DataFrame) -> str:
    """``measured_s`` for a traced report, else ``roofline_s``."""
    return "measured_s" if ops["measured_s"].notna().any() else "roofline_s"


def shares(ops: pd.DataFrame) -> pd.Series:
    """Each op's share of its module's total time (``time_column``)."""
    col = time_column(ops)
    totals = ops.groupby("module")[col].transform("sum")
    return (ops[col] / totals.where(totals > 0)).fillna(0.0)


def modules_by_name(report: Any) -> dict[str, HloModule]:
    return {m.name: m for m in getattr(report, "hlo_modules", None) or ()}


def row_instruction(modules: dict[str, HloModule], row: Any
                    ) -> tuple[HloModule, HloComputation, HloInstruction] | None:
    """The module, computation and instruction an ops-table row names; None when the report holds no such
    module (a trace op without HLO) or the names are not in it."""
    module = modules.get(row["module"])
    if module is None:
        return None
    try:
        comp = module.computation(row["computation"])
        return module, comp, comp.instruction(row["instruction"])
    except KeyError:
        return None


def is_scheduled(module: HloModule) -> bool:
    """``is_scheduled=true`` in the module header: XLA's optimized, scheduled module (fusion decisions made, the
    printed order the run order). Before optimization, unfused elementwise ops and the printed order say nothing
    about what will run."""
    return str(module.header_attributes.get("is_scheduled", "")).lower() == "true"


@dataclass(frozen=True)
class MatmulShape:
    """A dot as the roofline sees it: ``[batch..., m, k] x [batch..., k, n]`` folded to sizes and bytes.

    Attributes:
        batch, m, k, n: products of the batch, lhs-free, contracting and rhs-free dimensions.
        lhs_bytes, rhs_bytes, out_bytes: bytes of each operand and of the result.
        flops: ``2 * batch * m * k * n``.
    """

    batch: int
    m: int
    k: int
    n: int
    lhs_bytes: int
    rhs_bytes: int
    out_bytes: int

    @property
    def flops(self) -> int:
        return 2 * self.batch * self.m * self.k * self.n


def dot_in(module: HloModule, computation: str, inst: HloInstruction) -> MatmulShape | None:
    """The dot an op is (a ``dot``) or holds (a fusion: its largest dot by FLOPs), or None (a convolution, a
    custom call, a dot with unknown shapes)."""
    if inst.opcode in ("dot", "convolution"):
        return _shape_of_dot(module.computation(computation), inst)
    if inst.opcode != "fusion":
        return None
    best = None
    for name in inst.called_computations.get("calls", ()):
        comp = module.computation(name)
        for i, op in enumerate(comp.opcodes):
            if op in ("dot", "convolution"):
                s = _shape_of_dot(comp, comp.instruction_at(i))
                if s is not None and (best is None or s.flops > best.flops):
                    best = s
    return best


def _shape_of_dot(comp: HloComputation, inst: HloInstruction) -> MatmulShape | None:
    """A dot's sizes; a convolution's when it is a matmul -- every spatial dimension of its kernel of size 1, no
    feature groups (libtpu writes matmuls as ``convolution`` with ``dim_labels=bf_io->bf`` inside fusions):
    ``m`` the input's batch and spatial sizes, ``k`` its feature size, ``n`` the kernel's output features."""
    try:
        lhs, rhs = (comp.shape_of(o) for o in inst.operands[:2])
    except (KeyError, ValueError, IndexError):
        return None
    attrs = inst.attributes
    if inst.opcode == "convolution":
        dn = attrs.get("dim_labels")
        if dn is None or not lhs.is_array or not rhs.is_array or attrs.get("feature_group_count", 1) != 1 \
                or attrs.get("batch_group_count", 1) != 1 \
                or any(rhs.dims[i] != 1 for i in dn.kernel_spatial_dimensions):
            return None
        m = math.prod(d for i, d in enumerate(lhs.dims) if i != dn.input_feature_dimension)
        return MatmulShape(1, m, lhs.dims[dn.input_feature_dimension], rhs.dims[dn.kernel_output_feature_dimension],
                           lhs.size_bytes, rhs.size_bytes, inst.shape.size_bytes)
    lc, rc = tuple(attrs.get("lhs_contracting_dims", ())), tuple(attrs.get("rhs_contracting_dims", ()))
    lb, rb = tuple(attrs.get("lhs_batch_dims", ())), tuple(attrs.get("rhs_batch_dims", ()))
    if not lhs.is_array or not rhs.is_array:
        return None
    ld, rd = lhs.dims, rhs.dims
    batch = math.prod(ld[i] for i in lb)
    k = math.prod(ld[i] for i in lc)
    m = math.prod(d for i, d in enumerate(ld) if i not in lc and i not in lb)
    n = math.prod(d for i, d in enumerate(rd) if i not in rc and i not in rb)
    return MatmulShape(batch, m, k, n, lhs.size_bytes, rhs.size_bytes, inst.shape.size_bytes)


def users(comp: HloComputation, name: str, through: frozenset[str] = frozenset(
        {"get-tuple-element", "bitcast", "copy", "reshape", "all-reduce-done", "all-gather-done",
         "collective-permute-done", "async-done"})) -> Iterator[int]:
    """Indices of the instructions of ``comp`` that use ``name``, looking through layout-only ops and dones."""
    seen = {name}
    frontier = [name]
    opcodes = comp.opcodes
    operand_lists = comp.operand_lists(range(len(opcodes)))
    while frontier:
        cur = frontier.pop()
        for i, operands in enumerate(operand_lists):
            if cur in operands:
                n = comp.names[i]
                if opcodes[i] in through:
                    if n not in seen:
                        seen.add(n)
                        frontier.append(n)
                else:
                    yield i
