"""Per-op and per-module tables (pandas) of costs, roofline scores and measured times. Presentation only:
the numbers come from ``hloscope.cost`` and ``hloscope.roofline.score``.

Every number is a total per module run (for traces: per step, i.e. one execution of the entry computation with
its loops), in FLOPs, bytes and seconds.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Mapping

if TYPE_CHECKING:
    import pandas as pd

    from hloscope.cost import ModuleCost
    from hloscope.roofline.chips import ChipSpec

#: The ops table's columns, in order: a contract (docs/report.md). No name is an attribute of
#: ``pandas.DataFrame`` (``report.ops.caveats`` is the column; ``flags``, ``count`` and ``shape`` would be pandas'
#: own ``DataFrame.flags``, ``DataFrame.count`` and ``DataFrame.shape``): tests/report/test_column_names.py.
OP_COLUMNS = [
    "module", "computation", "instruction", "opcode", "category", "op_name", "source", "executions",
    "flops", "transcendentals", "hbm_bytes", "hbm_read_bytes", "hbm_write_bytes", "wire_bytes", "comm_kind",
    "group_size", "dtype", "intensity", "critical_intensity", "compute_s", "memory_s", "comm_s", "roofline_s",
    "bound", "measured_s", "occurrences", "step_fraction", "efficiency", "achieved_flops_per_s",
    "achieved_bytes_per_s", "lost_s", "overlap_window_s", "exposed_comm_s", "overlapped_comm_s", "slowest_participant_s", "caveats",
    "result_shape",
]

#: The modules table's columns, in order.
MODULE_COLUMNS = [
    "name", "flops", "transcendentals", "hbm_bytes", "wire_bytes", "compute_s", "memory_s", "comm_s",
    "roofline_s", "measured_s", "mfu", "cost_coverage", "dtype", "compute_bound_s", "memory_bound_s",
    "communication_bound_s", "caveats", "peak_bytes", "exposed_comm_roofline_s", "exposed_comm_s",
    "comm_hidden_fraction",
]

_COLLECTIVE = frozenset(
    "all-reduce all-gather reduce-scatter all-to-all ragged-all-to-all collective-permute collective-broadcast "
    "all-reduce-start all-gather-start collective-permute-start all-reduce-done all-gather-done "
    "collective-permute-done".split()
)
_CONTROL = frozenset({"while", "conditional", "call", "async-start", "async-update", "async-done"})
_MOVE = frozenset(
    "copy copy-start copy-done broadcast reshape transpose slice dynamic-slice dynamic-update-slice gather "
    "concatenate pad reverse iota bitcast tuple get-tuple-element parameter constant".split()
)


_FUSED_MATMUL = frozenset({"dot", "convolution"})


def category(inst, module) -> str:
    """``matmul`` (dot, convolution, or a fusion holding one), ``fusion:<kind>``, ``collective``,
    ``data-movement``, ``control``, ``custom-call``, ``reduction``, ``fft`` or ``elementwise``.

    ``fft`` is XLA's ``fft`` instruction (FFT, IFFT, RFFT, IRFFT): an O(n log n) transform costed by its own
    rule (``hloscope.cost.reduction.fft``, XLA's ``HandleFft``), not an elementwise op. XLA:CPU keeps
    ``jnp.fft.fft`` as one ``fft`` instruction (tests/roofline/test_category.py); libtpu lowers it to fusions
    holding dots (checked: ``jnp.fft.fft`` on ``c64[8,64]`` compiled deviceless for TPU v5e), which are
    ``matmul``.
    """
    op = inst.opcode
    if op in ("dot", "convolution", "ragged-dot"):
        return "matmul"
    if op == "fft":
        return "fft"
    if op == "fusion":
        for name in inst.called_computations.get("calls", ()):
            if not _FUSED_MATMUL.isdisjoint(module.computation(name).opcodes):  # (builds no instruction)
                return "matmul"
        return f"fusion:{inst.attributes.get('kind', '?')}"
    if op in _COLLECTIVE or op.startswith(("all-", "reduce-scatter", "collective-")):
        return "collective"
    if op in _MOVE:
        return "data-movement"
    if op in _CONTROL or op.endswith(("-start", "-done", "-update")):
        return "control"
    if op == "custom-call":
        return "custom-call"
    if op in _MOVE:
        return "data-movement"
    if op in ("reduce", "reduce-window", "scatter", "select-and-scatter", "sort", "map"):
        return "reduction"
    return "elementwise"


def ops_frame(costs: list[ModuleCost], chip: ChipSpec, measured: Mapping[tuple[str, str], tuple[float, float]] | None = None,
              step_s: Mapping[str, float] | None = None, all_rows: bool = False) -> pd.DataFrame:
    """One row per instruction that does work or took time.

    Args:
        costs: one ``ModuleCost`` per module.
        chip: the chip to score against.
        measured: (module name, instruction name) -> (measured seconds per step, occurrences per step), from a
            trace; None for a static report.
        step_s: module name -> measured step time (seconds), for ``step_fraction``.
        all_rows: keep every instruction, also those without work or time (what a trace of any host may name:
            ``hloscope.pod`` classifies events with it before any time is measured).

    Returns:
        DataFrame with ``OP_COLUMNS``, sorted by measured time (traces) or roofline time (static), largest
        first.
    """
    import pandas as pd

    from hloscope.roofline.score import op_dtype, score

    from hloscope.roofline.score import devices_per_physical_chip

    rows = []
    measured = measured or {}
    per_chip = devices_per_physical_chip(chip)
    for mc in costs:
        module = mc.module
        mname = module.name
        within_chip = per_chip > 1 and module.replica_count * module.num_partitions <= per_chip
        for row in mc.rows:
            inst = row.instruction
            cost = row.cost
            key = (mname, inst.name)
            timing = measured.get(key)
            work = cost.flops + cost.transcendentals + cost.bytes_read + cost.bytes_written + cost.comm_bytes
            if work == 0 and timing is None and not cost.flags and not all_rows:
                continue
            operand_types = None
            if inst.opcode in ("dot", "convolution"):
                shape_of = module.computation(row.computation).shape_of
                operand_types = [shape_of(o).element_type for o in inst.operands[:2]]
            dtype = op_dtype(inst, module, operand_types)
            s = score(cost, chip, dtype, within_chip)
            n = row.count
            md = inst.metadata
            measured_s = timing[0] if timing else math.nan
            roofline_s = s.roofline_s * n
            flops = cost.flops * n
            hbm = cost.bytes_accessed * n
            rows.append({
                "module": mname, "computation": row.computation, "instruction": inst.name, "opcode": inst.opcode,
                "category": category(inst, module), "op_name": md.op_name if md else "",
                "source": md.source if md else "", "executions": n, "flops": flops,
                "transcendentals": cost.transcendentals * n, "hbm_bytes": hbm,
                "hbm_read_bytes": cost.bytes_read * n, "hbm_write_bytes": cost.bytes_written * n,
                "wire_bytes": cost.comm_bytes * n, "comm_kind": cost.comm_kind, "group_size": cost.group_size,
                "dtype": dtype, "intensity": s.intensity, "critical_intensity": s.critical_intensity,
                "compute_s": s.compute_s * n, "memory_s": s.memory_s * n, "comm_s": s.comm_s * n,
                "roofline_s": roofline_s, "bound": s.bound.value, "measured_s": measured_s,
                "occurrences": timing[1] if timing else math.nan,
                "step_fraction": measured_s / step_s[mname] if timing and step_s and step_s.get(mname) else math.nan,
                "efficiency": roofline_s / measured_s if timing and measured_s > 0 else math.nan,
                "achieved_flops_per_s": flops / measured_s if timing and measured_s > 0 else math.nan,
                "achieved_bytes_per_s": hbm / measured_s if timing and measured_s > 0 else math.nan,
                "lost_s": measured_s - roofline_s if timing else math.nan,
                "caveats": ",".join(sorted(cost.flags | s.flags)), "result_shape": str(inst.shape),
            })
    # Trace ops that name no instruction of any module: listed, never dropped.
    known = {(r["module"], r["instruction"]) for r in rows}
    for (mname, op), (sec, occ) in measured.items():
        if (mname, op) not in known:
            rows.append({c: math.nan for c in OP_COLUMNS} | {
                "module": mname, "computation": "", "instruction": op, "opcode": "", "category": "unjoined",
                "op_name": "", "source": "", "comm_kind": "", "dtype": "", "bound": "", "measured_s": sec,
                "occurrences": occ, "caveats": "not-in-hlo", "result_shape": ""})
    df = pd.DataFrame(rows, columns=OP_COLUMNS)
    sort_key = "measured_s" if measured else "roofline_s"
    return df.sort_values(sort_key, ascending=False, na_position="last", kind="stable").reset_index(drop=True)


def modules_frame(costs: list[ModuleCost], ops: pd.DataFrame, chip: ChipSpec,
                  step_s: Mapping[str, float] | None = None) -> pd.DataFrame:
    """One row per module: totals of ``ops``, the measured step time, MFU, and time by bound class.

    ``mfu = flops / (measured_s * peak)`` at the dtype holding most of the module's FLOPs -- NaN, flagged
    ``mfu-above-peak``, where it would exceed 1 (the chip does not fit the trace); ``cost_coverage``: the share
    of the module's ops whose roofline time is known (the totals are over the known part); time by bound class
    is measured time where the trace has it, else roofline time.
    """
    import pandas as pd

    rows = []
    for mc in costs:
        name = mc.module.name
        mine = ops[ops["module"] == name]
        measured = step_s.get(name, math.nan) if step_s else math.nan
        by_dtype = mine.groupby("dtype")["flops"].sum()
        dtype = str(by_dtype.idxmax()) if len(by_dtype) and by_dtype.max() > 0 else "bf16"
        time_col = mine["measured_s"] if mine["measured_s"].notna().any() else mine["roofline_s"]
        by_bound = time_col.groupby(mine["bound"]).sum()
        module_mfu = mfu(mc.flops, measured, chip, dtype)
        flags = set(mc.flags)
        if module_mfu > 1.0:  # faster than the chip's peak: the chip does not fit (or FLOPs are overcounted)
            module_mfu = math.nan
            flags.add("mfu-above-peak")
        known = mine["roofline_s"].notna()
        rows.append({
            "name": name, "flops": mc.flops, "transcendentals": mc.transcendentals,
            "hbm_bytes": mc.bytes_accessed, "wire_bytes": mc.comm_bytes,
            "compute_s": mine["compute_s"].sum(), "memory_s": mine["memory_s"].sum(),
            "comm_s": mine["comm_s"].sum(), "roofline_s": mine["roofline_s"].sum(), "measured_s": measured,
            "mfu": module_mfu, "cost_coverage": float(known.mean()) if len(known) else 1.0,
            "dtype": dtype, "compute_bound_s": float(by_bound.get("compute", 0.0)),
            "memory_bound_s": float(by_bound.get("memory", 0.0)),
            "communication_bound_s": float(by_bound.get("communication", 0.0)),
            "caveats": ",".join(sorted(flags)), "peak_bytes": math.nan,  # filled by Report.memory
            # filled by hloscope.steps.columns.add_overlap_columns:
            "exposed_comm_roofline_s": math.nan, "exposed_comm_s": math.nan, "comm_hidden_fraction": math.nan,
        })
    return pd.DataFrame(rows, columns=MODULE_COLUMNS)


def mfu(flops: float, seconds: float, chip: ChipSpec, dtype: str) -> float:
    """Model FLOPs utilization: the share of the chip's peak that ``flops`` done in ``seconds`` reached.

    ``mfu = flops / (seconds x peak_flops_per_s[dtype])`` -- the convention of PaLM (Chowdhery et al. 2022,
    appendix B) and of "How to Scale Your Model" Part 1: achieved FLOP/s over the chip's dense peak at the
    dtype of the work (the dtype holding most of a module's FLOPs). ``flops`` are the program's own HLO FLOPs
    (not 6·N·T model FLOPs), so rematerialised work counts. NaN when ``seconds`` is NaN, 0 or negative.

    This is the one MFU formula of hloscope: the modules table's ``mfu`` column and ``Report.mfu`` (over
    several modules: total FLOPs over the sum of each module's ``seconds x peak``) both use it.
    """
    if not seconds or seconds != seconds or seconds <= 0:
        return math.nan
    return flops / (seconds * chip.peak_flops_for(dtype)[0])


def total_mfu(modules: pd.DataFrame, chip: ChipSpec, time_column: str = "measured_s") -> float:
    """``mfu`` over several modules: total FLOPs / sum(module seconds x peak at the module's dtype).

    Args:
        modules: the modules table (``MODULE_COLUMNS``): ``flops``, ``dtype`` and ``time_column`` are read.
        chip: the chip scored against.
        time_column: ``measured_s`` (achieved MFU, from a trace) or ``roofline_s`` (the roofline MFU: the best
            this program can reach on the chip).

    Returns:
        The fraction (1.0 = at peak); NaN when no module has a positive time in ``time_column``.
    """
    capacity = 0.0
    flops = 0.0
    for f, d, t in zip(modules["flops"], modules["dtype"], modules[time_column]):
        if t == t and t > 0:
            capacity += float(t) * chip.peak_flops_for(str(d))[0]
            flops += float(f)
    return flops / capacity if capacity else math.nan
