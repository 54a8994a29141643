"""Scoring costs against a chip: roofline times, bound class, intensity, efficiency.

Method ("How to Scale Your Model", Austin et al. 2025, Part 1 "Rooflines"):

Notes:
    1. ``compute_s = FLOPs / peak_flops_per_s[dtype]`` with the dtype of the instruction's matrix operands
       (dots and convolutions, also inside fusions: the widest operand type, so an int8 x bf16 matmul runs at
       the bf16 peak), else of its result. Transcendentals count as FLOPs here. A dtype the chip has no
       peak for falls back to a wider one and is flagged ``peak-fallback``.
    2. ``memory_s = HBM bytes / hbm_bytes_per_s``.
    3. ``comm_s = wire bytes / link bandwidth``: on TPU, a ring over one torus axis with wraparound drives
       both directions of that axis's links (``ici_link_bidi_bytes_per_s``); on GPU, NVLink when the group
       fits in one NVLink domain (8 GPUs), else the network (``dcn_bytes_per_s``); on a host, the peer link.
       The HLO does not say which torus axes a group spans, so one axis is assumed (flag
       ``assumed-single-axis`` when the group is larger than 4 devices on a TPU).
    4. ``roofline_s = max(compute_s, memory_s, comm_s)``; ``bound`` is the argmax.
    5. ``intensity = FLOPs / HBM bytes`` and ``critical_intensity = peak / hbm_bytes_per_s`` for the dtype.
    6. With a measured time: ``efficiency = roofline_s / measured_s`` (1.0 = at the roof) and achieved
       FLOP/s and bytes/s; per module, ``mfu = FLOPs / (measured_s * peak)`` at the module's dominant dtype.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hloscope.cost import OpCost
    from hloscope.hlo import HloInstruction, HloModule
    from hloscope.roofline.chips import ChipSpec


class Bound(enum.Enum):
    """Which roof limits an op."""

    COMPUTE = "compute"
    MEMORY = "memory"
    COMMUNICATION = "communication"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True, slots=True)
class OpScore:
    """Roofline times (seconds) of a cost on a chip; see module Notes for each formula."""

    compute_s: float
    memory_s: float
    comm_s: float
    roofline_s: float
    bound: Bound
    intensity: float
    critical_intensity: float
    dtype: str
    flags: frozenset[str]


_MATMUL = frozenset({"dot", "convolution", "ragged-dot"})
_FLOAT_ORDER = ("f64", "f32", "bf16", "f16", "fp8", "fp4")


def matmul_dtype(inst: HloInstruction, module: HloModule) -> str | None:
    """Element type the matrix unit runs at for a dot/convolution (or a fusion or custom call holding one):
    the widest operand type, floats winning over integers. None when the instruction has no matmul."""
    from hloscope.roofline.chips import canonical_dtype

    if inst.opcode in _MATMUL or inst.opcode == "fusion":
        comp_names = inst.called_computations.get("calls", ())
        if inst.opcode in _MATMUL:
            return None  # resolved by the caller, who knows the operands
        types = []
        for name in comp_names:
            comp = module.computation(name)
            if _MATMUL.isdisjoint(comp.opcodes):  # (columns: the fused instructions are not built)
                continue
            for k, opcode in enumerate(comp.opcodes):
                if opcode in _MATMUL:
                    types.extend(comp.shape_of(o).element_type for o in comp.operands_at(k)[:2])
        if not types:
            return None
        return _widest(canonical_dtype(t) for t in types if t not in ("tuple", "token"))
    return None


def _widest(classes) -> str:
    classes = list(classes)
    floats = [c for c in classes if c in _FLOAT_ORDER]
    if floats:
        return min(floats, key=_FLOAT_ORDER.index)
    order = ("int32", "int8", "int4")
    ints = [c for c in classes if c in order]
    return min(ints, key=order.index) if ints else (classes[0] if classes else "f32")


def op_dtype(inst: HloInstruction, module: HloModule, operand_types: list[str] | None = None) -> str:
    """The peak-table dtype an instruction is scored at (Notes, step 1)."""
    from hloscope.roofline.chips import canonical_dtype

    if inst.opcode in _MATMUL and operand_types:
        return _widest(canonical_dtype(t) for t in operand_types[:2] if t not in ("tuple", "token"))
    found = matmul_dtype(inst, module)
    if found is not None:
        return found
    leaves = [s.element_type for s in inst.shape.leaves() if s.is_array]
    for t in leaves:
        try:
            cls = canonical_dtype(t)
        except ValueError:
            continue
        if cls != "int32" or len(leaves) == 1:
            return cls
    return "f32"


def comm_bandwidth_bytes_per_s(chip: ChipSpec, group_size: int) -> tuple[float | None, frozenset[str]]:
    """Link bandwidth (bytes/s) a collective over ``group_size`` devices sees (Notes, step 3)."""
    flags: set[str] = set()
    if chip.ici_link_bytes_per_s is not None:
        bw = chip.ici_link_bidi_bytes_per_s if chip.ici_wraparound else chip.ici_link_bytes_per_s
        if group_size > 4:
            flags.add("assumed-single-axis")
        return bw, frozenset(flags)
    if chip.nvlink_bytes_per_s is not None:
        domain = chip.nvlink_domain_size or 8
        if group_size <= domain:
            return chip.nvlink_bytes_per_s, frozenset()
        return chip.dcn_bytes_per_s, frozenset({"crosses-nvlink-domain"})
    return chip.peer_link_bytes_per_s, frozenset()


def score(cost: OpCost, chip: ChipSpec, dtype: str) -> OpScore:
    """Score one execution of an instruction (or any cost) on ``chip`` at ``dtype``.

    Args:
        cost: FLOPs, bytes and wire bytes (``hloscope.cost.OpCost``).
        chip: the chip (``hloscope.roofline.chips.ChipSpec``).
        dtype: peak-table dtype class (``"bf16"``, ``"f32"``, ``"int8"``, ...).

    Returns:
        ``OpScore``; times in seconds. An op with no work is memory-bound with all times 0.

    Raises:
        ValueError: ``dtype`` is not a numeric type.
    """
    flags: set[str] = set()
    peak, fallback = chip.peak_flops_for(dtype)
    if fallback:
        flags.add("peak-fallback")
    work = cost.flops + cost.transcendentals
    compute_s = work / peak
    hbm = cost.bytes_read + cost.bytes_written
    memory_s = hbm / chip.hbm_bytes_per_s
    comm_s = 0.0
    if cost.comm_bytes:
        bw, comm_flags = comm_bandwidth_bytes_per_s(chip, cost.group_size)
        flags.update(comm_flags)
        if bw:
            comm_s = cost.comm_bytes / bw
        else:
            flags.add("no-link-bandwidth")
    roofline_s = max(compute_s, memory_s, comm_s)
    if roofline_s == 0.0:
        bound = Bound.MEMORY
    elif roofline_s == comm_s:
        bound = Bound.COMMUNICATION
    elif roofline_s == compute_s:
        bound = Bound.COMPUTE
    else:
        bound = Bound.MEMORY
    intensity = work / hbm if hbm else (math.inf if work else 0.0)
    return OpScore(compute_s, memory_s, comm_s, roofline_s, bound, intensity, peak / chip.hbm_bytes_per_s,
                   dtype, frozenset(flags))
