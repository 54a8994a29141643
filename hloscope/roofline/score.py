"""Scoring costs against a chip: roofline times, bound class, intensity, efficiency.

Method ("How to Scale Your Model", Austin et al. 2025, Part 1 "Rooflines"):

Notes:
    1. ``compute_s = FLOPs / peak_flops_per_s[dtype]`` with the dtype of the instruction's matrix operands
       (dots and convolutions, also inside fusions: the widest operand type, so an int8 x bf16 matmul runs at
       the bf16 peak), else of its result. Transcendentals count as FLOPs here. A dtype the chip has no
       peak for falls back to a wider one and is flagged ``peak-fallback``.
    1a. Operand precision on TPU (:func:`precision_passes`): an f32 dot or convolution printed with
       ``operand_precision={high,high}`` runs 3 bf16 MXU passes, ``{highest,highest}`` 6 (jax 0.10.2
       ``jax.lax.Precision`` docstring; the cost flag ``operand-precision:*`` of ``hloscope.cost.dot``). On a
       TPU chip ``compute_s = (passes x FLOPs + transcendentals) / peak_flops_per_s["bf16"]`` -- FLOPs stay the
       math FLOPs -- and the score is flagged ``precision-passes:<passes>``. A fusion holding such a matmul
       has all its FLOPs charged ``passes`` times (its elementwise FLOPs are a small share beside the
       matmul's); matmuls of different precisions in one fusion take the lowest (a lower bound). GPU chips
       (true f32/TF32 peaks in the chip table) and CPUs are not changed.
    2. ``memory_s = HBM bytes / hbm_bytes_per_s``.
    3. ``comm_s = wire bytes / link bandwidth``: on TPU, a ring over one torus axis with wraparound drives
       both directions of that axis's links (``ici_link_bidi_bytes_per_s``); on GPU, NVLink when the group
       fits in one NVLink domain (8 GPUs), else the network (``dcn_bytes_per_s``); on a host, the peer link.
       The HLO does not say which torus axes a group spans, so one axis is assumed (flag
       ``assumed-single-axis`` when the group is larger than 4 devices on a TPU).
    4. ``roofline_s = max(compute_s, memory_s, comm_s)``; ``bound`` is the argmax.
    5. ``intensity = FLOPs / HBM bytes`` and ``critical_intensity = peak / hbm_bytes_per_s`` for the dtype
       (divided by the passes of step 1a, so that ``intensity > critical_intensity`` still means compute-bound).
    6. With a measured time: ``efficiency = roofline_s / measured_s`` (1.0 = at the roof) and achieved
       FLOP/s and bytes/s; per module, ``mfu = FLOPs / (measured_s * peak)`` at the module's dominant dtype.
"""

from __future__ import annotations

import enum
import math
from typing import TYPE_CHECKING

from hloscope._record import FrozenRecord

if TYPE_CHECKING:
    from hloscope.cost import OpCost
    from hloscope.hlo import HloInstruction, HloModule, Shape
    from hloscope.roofline.chips import ChipSpec


class Bound(enum.Enum):
    """Which roof limits an op."""

    COMPUTE = "compute"
    MEMORY = "memory"
    COMMUNICATION = "communication"
    #: a time is unknown (NaN): FLOPs, bytes or a link bandwidth hloscope does not know.
    UNKNOWN = "unknown"

    def __str__(self) -> str:
        return self.value


class OpScore(FrozenRecord):
    """Roofline times (seconds) of a cost on a chip; see module Notes for each formula. Immutable
    (``hloscope._record.FrozenRecord``: compared, hashed and printed by these fields)."""

    __slots__ = ("compute_s", "memory_s", "comm_s", "roofline_s", "bound", "intensity", "critical_intensity",
                 "dtype", "flags")
    compute_s: float
    memory_s: float
    comm_s: float
    roofline_s: float
    bound: Bound
    intensity: float
    critical_intensity: float
    dtype: str
    flags: frozenset[str]

    def __init__(self, compute_s: float, memory_s: float, comm_s: float, roofline_s: float, bound: Bound,
                 intensity: float, critical_intensity: float, dtype: str, flags: frozenset[str]) -> None:
        self._init_fields(compute_s, memory_s, comm_s, roofline_s, bound, intensity, critical_intensity, dtype, flags)


_MATMUL = frozenset({"dot", "convolution", "ragged-dot"})
_FLOAT_ORDER = ("f64", "f32", "bf16", "f16", "fp8", "fp4")


def calls_matmul(inst: HloInstruction, module: HloModule) -> bool:
    """Whether a computation ``inst`` calls (``calls``: a fusion's fused computation) holds a dot, convolution or
    ragged dot, read from the computation's opcodes without building its instructions. Where it does not,
    ``matmul_dtype`` of a fusion is None and ``op_dtype`` the result's dtype."""
    return any(not _MATMUL.isdisjoint(module.computation(name).opcode_set)
               for name in inst.called_computations.get("calls", ()))


def matmul_dtype(inst: HloInstruction, module: HloModule) -> str | None:
    """Element type the matrix unit runs at for a dot/convolution (or a fusion or custom call holding one):
    the widest operand type, floats winning over integers. None when the instruction has no matmul."""
    if inst.opcode in _MATMUL or inst.opcode == "fusion":
        comp_names = inst.called_computations.get("calls", ())
        if inst.opcode in _MATMUL:
            return None  # resolved by the caller, who knows the operands
        types = []
        for name in comp_names:
            comp = module.computation(name)
            if _MATMUL.isdisjoint(comp.opcode_set):  # (columns: the fused instructions are not built)
                continue
            for k, opcode in enumerate(comp.opcodes):
                if opcode in _MATMUL:
                    types.extend(comp.shape_of(o).element_type for o in comp.operands_at(k)[:2])
        if not types:
            return None
        return _widest(_known_classes(types))
    return None


def _known_classes(types) -> list[str]:
    """``canonical_dtype`` of each element type of ``types`` the chip tables know, in order: tuples, tokens and
    element types no table knows (a newer XLA's, or a damaged text's) are passed over."""
    from hloscope.roofline.chips import canonical_dtype

    out = []
    for t in types:
        try:
            out.append(canonical_dtype(t))
        except ValueError:
            continue
    return out


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
    if inst.opcode in _MATMUL and operand_types:
        return _widest(_known_classes(operand_types[:2]))
    found = matmul_dtype(inst, module)
    if found is not None:
        return found
    return result_dtype(inst.shape)


def result_dtype(shape: Shape) -> str:
    """The peak-table dtype of an instruction without a matmul: its result's element type (Notes, step 1); of a
    tuple, the first leaf's that the chip tables know, an ``int32`` leaf only when it is the only one (an index
    beside the data); ``f32`` when none is known."""
    from hloscope.roofline.chips import canonical_dtype

    # One pass over the leaves that stops at the first known class other than int32 (a loop's state tuple has
    # hundreds of leaves, its counter first): what the rule above returns whatever the leaves after it are.
    arrays = 0
    only_int32 = False  # (the first array leaf's class is int32: its answer when it is the only leaf)
    for leaf in shape.leaves():
        if not leaf.is_array:
            continue
        arrays += 1
        try:
            cls = canonical_dtype(leaf.element_type)
        except ValueError:
            continue
        if cls != "int32":
            return cls
        if arrays == 1:
            only_int32 = True
    return "int32" if only_int32 and arrays == 1 else "f32"


#: Prefix of the cost flag ``hloscope.cost.dot`` sets on an f32 matmul above DEFAULT precision
#: (``hloscope.cost.dot.PRECISION_FLAG``; repeated here so that scoring need not import the cost model).
_PRECISION_FLAG = "operand-precision:"
#: bf16 MXU passes of an f32 x f32 matmul on TPU by operand precision (``hloscope.cost.dot.PRECISION_PASSES``).
_TPU_PASSES = {"default": 1, "high": 3, "highest": 6}


def precision_passes(flags: frozenset[str], chip: ChipSpec) -> int:
    """Matrix-unit passes an op's matmul work takes on ``chip`` (Notes, step 1a): on a TPU, 3 for a cost
    flagged ``operand-precision:high``, 6 for ``operand-precision:highest`` (the lowest when several are
    present); 1 otherwise, and always 1 on a chip whose ``kind`` is not ``"tpu"``. Unitless."""
    if chip.kind != "tpu" or not flags:
        return 1
    found = [_TPU_PASSES.get(f[len(_PRECISION_FLAG):], 1) for f in flags if f.startswith(_PRECISION_FLAG)]
    return min(found) if found else 1


def comm_bandwidth_bytes_per_s(chip: ChipSpec, group_size: int, comm_kind: str = "",
                               within_chip: bool = False) -> tuple[float | None, frozenset[str]]:
    """Link bandwidth (bytes/s) a collective over ``group_size`` devices sees (Notes, step 3).

    Args:
        chip: the chip (per device).
        group_size: devices per replica group.
        comm_kind: the collective family; ``host-transfer`` (a copy to or from host memory) crosses the host
            link, ``pcie_bytes_per_s``.
        within_chip: every device of the program is on one physical chip (TPU7x: two TensorCores, each a
            JAX device, on one chip; see :func:`devices_per_physical_chip`): they communicate over the chip's
            die-to-die link, whose bandwidth no spec sheet hloscope cites gives: None, flagged
            ``intra-chip-link``.

    Returns:
        (bytes/s or None when unknown, flags).
    """
    flags: set[str] = set()
    if comm_kind == "host-transfer":
        return chip.pcie_bytes_per_s, frozenset()
    if within_chip:
        return None, frozenset({"intra-chip-link"})
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


def devices_per_physical_chip(chip: ChipSpec) -> int:
    """JAX devices on the physical chip ``chip`` describes: its ``devices_per_chip``, or for a per-device view
    (``ChipSpec.per_device``, id ``"<chip id>-device"``) that of the chip it was divided from (1 if unknown)."""
    if chip.devices_per_chip > 1 or not chip.id.endswith("-device"):
        return chip.devices_per_chip
    from hloscope.roofline.chips import all_chips, builtin_chips

    base_id = chip.id[: -len("-device")]
    base = builtin_chips().get(base_id) or all_chips().get(base_id)  # (user chip files read only if needed)
    return base.devices_per_chip if base is not None else 1


def score(cost: OpCost, chip: ChipSpec, dtype: str, within_chip: bool = False) -> OpScore:
    """Score one execution of an instruction (or any cost) on ``chip`` at ``dtype``.

    Args:
        cost: FLOPs, bytes and wire bytes (``hloscope.cost.OpCost``).
        chip: the chip (``hloscope.roofline.chips.ChipSpec``).
        dtype: peak-table dtype class (``"bf16"``, ``"f32"``, ``"int8"``, ...).
        within_chip: the program's devices are all on one physical chip (:func:`comm_bandwidth_bytes_per_s`).

    Returns:
        ``OpScore``; times in seconds. An op with no work is memory-bound with all times 0. A time that
        depends on an unknown value (NaN FLOPs or bytes, a link without a known bandwidth) is NaN, never 0;
        ``roofline_s`` is then the largest known time -- still a lower bound on the op's time -- flagged
        ``partial-roofline``, and NaN with the bound ``Bound.UNKNOWN`` when no known time is above 0.

    Raises:
        ValueError: ``dtype`` is not a numeric type.
    """
    flags: set[str] = set()
    peak, fallback = chip.peak_flops_for(dtype)
    passes = precision_passes(cost.flags, chip)
    if passes > 1:
        # Step 1a: an f32 matmul at HIGH/HIGHEST precision runs `passes` bf16 MXU passes.
        peak, fallback = chip.peak_flops_for("bf16")
        flags.add(f"precision-passes:{passes}")
    if fallback:
        flags.add("peak-fallback")
    work = cost.flops + cost.transcendentals
    compute_s = (passes * cost.flops + cost.transcendentals) / peak
    hbm = cost.bytes_read + cost.bytes_written
    memory_s = hbm / chip.hbm_bytes_per_s
    comm_s = 0.0
    if cost.comm_bytes:
        bw, comm_flags = comm_bandwidth_bytes_per_s(chip, cost.group_size, cost.comm_kind, within_chip)
        flags.update(comm_flags)
        if bw:
            comm_s = cost.comm_bytes / bw
        else:
            comm_s = math.nan
            flags.add("no-link-bandwidth")
    known = [t for t in (compute_s, memory_s, comm_s) if t == t]
    roofline_s = max(known) if known else math.nan
    if len(known) < 3:
        # A time is unknown: the known ones still bound the op from below; with none known (or none above 0)
        # there is no roof.
        flags.add("partial-roofline")
        if not roofline_s > 0:
            roofline_s = math.nan
    if roofline_s != roofline_s:
        bound = Bound.UNKNOWN
    elif roofline_s == 0.0:
        bound = Bound.MEMORY
    elif roofline_s == comm_s:
        bound = Bound.COMMUNICATION
    elif roofline_s == compute_s:
        bound = Bound.COMPUTE
    else:
        bound = Bound.MEMORY
    intensity = work / hbm if hbm else (math.inf if work else 0.0)  # (NaN when either is unknown)
    return OpScore(compute_s, memory_s, comm_s, roofline_s, bound, intensity,
                   peak / passes / chip.hbm_bytes_per_s, dtype, frozenset(flags))
