"""Join a trace's op events to instructions: measured seconds per module run and device.

The one place where what the program *did* (``hloscope.parsers.events.TraceEvents``) meets what it *is*
(costs per instruction). ``measured_times`` turns event totals into the unit every table uses -- one run of a
module on one device -- and ``trace_coverage`` says how much of the measured time found an instruction.

Normalisation (one rule for every trace kind):

1. ``runs[m]``: the number of executions of module ``m`` summed over devices -- the rows of
   ``module_runs`` for ``m`` where the trace records module executions (TPU ``XLA Modules`` lines); else
   ``max(steps, 1) x devices``, with ``steps`` the distinct step numbers of the step markers and ``devices``
   the distinct (host, device, device_id) that ran ops. A trace without step markers and module lines is
   one run per device (noted in the report).
2. An op's measured time is the sum of its events' ``self_ps`` over the trace, divided by ``runs[m]``; its
   occurrences likewise. A module's busy time is the sum over its ops.

Events whose module is unknown (``""``) form the module ``NO_MODULE``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

    from hloscope.parsers.events import TraceEvents

from hloscope.parsers.events import NO_MODULE as NO_MODULE  # noqa: E402 - re-exported
from hloscope.parsers.events import dense_codes  # noqa: E402


@dataclass
class Measured:
    """Measured time per module run and device (see the module docstring).

    Attributes:
        per_op: (module, instruction) -> (self seconds per run and device, occurrences per run and device).
        busy_s: module -> the sum of its ops' ``per_op`` seconds.
        runs: module -> executions over all devices (the divisor of rule 1).
        steps: distinct step numbers in the trace (0 when it has no step markers).
        devices: distinct devices that ran ops.
        notes: how the runs were counted, in words.
    """

    per_op: dict[tuple[str, str], tuple[float, float]]
    busy_s: dict[str, float]
    runs: dict[str, float]
    steps: int
    devices: int
    notes: list[str] = field(default_factory=list)


def named_modules(ops: pd.DataFrame) -> pd.DataFrame:
    """``ops`` with an unknown module (``""``) named ``NO_MODULE`` (the events table itself is not changed)."""
    col = ops["module"]
    if not (col == "").any():
        return ops
    out = ops.copy()
    out["module"] = col.astype(str).replace("", NO_MODULE).astype("category")
    return out


@dataclass
class OpTotals:
    """What the measured times are made of, summed over some hosts' events: the part of ``measured_times`` that
    adds up across host files (``hloscope.pod`` sums one per host file; a serial run makes one of all).

    Attributes:
        per_op: (module, instruction) -> (sum of ``self_ps``, events).
        devices: the (host, device, device_id) that ran ops.
        steps: the distinct step numbers of the step markers.
        module_runs: module -> rows of ``module_runs`` (TPU ``XLA Modules`` events).
        modules: the modules of the op events.
    """

    per_op: dict[tuple[str, str], tuple[int, int]]
    devices: set[tuple[str, str, int]]
    steps: set[int]
    module_runs: dict[str, int]
    modules: set[str]

    @classmethod
    def of(cls, events: TraceEvents) -> OpTotals:
        """The totals of ``events`` (``ops`` with modules named by ``named_modules``)."""
        ops = events.ops
        per_op = _op_sums(ops)
        devices = _devices(ops)
        steps = {int(x) for x in events.steps["step"].dropna().unique()} if len(events.steps) else set()
        runs = ({str(m): int(n) for m, n in events.module_runs.groupby("module", observed=True).size().items()}
                if len(events.module_runs) else {})
        return cls(per_op, devices, steps, runs, {str(m) for m in ops["module"].unique()})

    @classmethod
    def merged(cls, parts: list[OpTotals]) -> OpTotals:
        """The totals of several hosts' events together (integer sums: the same as one table of them all)."""
        per_op: dict[tuple[str, str], tuple[int, int]] = {}
        runs: dict[str, int] = {}
        out = cls(per_op, set(), set(), runs, set())
        for p in parts:
            for k, (t, c) in p.per_op.items():
                t0, c0 = per_op.get(k, (0, 0))
                per_op[k] = (t0 + t, c0 + c)
            for m, n in p.module_runs.items():
                runs[m] = runs.get(m, 0) + n
            out.devices |= p.devices
            out.steps |= p.steps
            out.modules |= p.modules
        return out


def _categorical_codes(col) -> Any:
    """The codes of a categorical column without missing values (numpy, small int), else None."""
    import pandas as pd

    if not isinstance(col.dtype, pd.CategoricalDtype):
        return None
    codes = col.cat.codes.to_numpy()
    return None if codes.size and codes.min() < 0 else codes


def _op_sums(ops: pd.DataFrame) -> dict[tuple[str, str], tuple[int, int]]:
    """(module, instruction) -> (sum of ``self_ps``, events), in order of first appearance: ``ops.groupby(["module",
    "instruction"], observed=True, sort=False)["self_ps"].agg(["sum", "count"])``, computed on the categoricals'
    codes (one int32 key per event instead of pandas' several int64 group codes)."""
    import numpy as np

    mc, ic = _categorical_codes(ops["module"]), _categorical_codes(ops["instruction"])
    n_i = len(ops["instruction"].cat.categories) if ic is not None else 0
    n_m = len(ops["module"].cat.categories) if mc is not None else 0
    if mc is None or ic is None or n_m * n_i >= 1 << 28:
        grouped = ops.groupby(["module", "instruction"], observed=True, sort=False)["self_ps"].agg(["sum", "count"])
        return {(str(m), str(i)): (int(t), int(c)) for (m, i), t, c in
                zip(grouped.index, grouped["sum"].tolist(), grouped["count"].tolist())}
    key = mc.astype(np.int32) * np.int32(n_i)
    key += ic
    uniq, group = dense_codes(key, n_m * n_i)
    del key
    first = np.full(uniq.size, len(group), np.int64)  # first row of each group: groupby's sort=False order
    np.minimum.at(first, group, np.arange(len(group)))
    total = np.zeros(uniq.size, np.int64)  # exact integer sums (ps), not float
    np.add.at(total, group, ops["self_ps"].to_numpy(np.int64))
    count = np.bincount(group, minlength=uniq.size)
    m_cat, i_cat = ops["module"].cat.categories, ops["instruction"].cat.categories
    return {(str(m_cat[k // n_i]), str(i_cat[k % n_i])): (int(total[g]), int(count[g]))
            for g, k in ((g, int(uniq[g])) for g in np.argsort(first, kind="stable").tolist())}


def _devices(ops: pd.DataFrame) -> set[tuple[str, str, int]]:
    """The distinct (host, device, device_id) of the events."""
    import numpy as np
    import pandas as pd

    hc, dc = _categorical_codes(ops["host"]), _categorical_codes(ops["device"])
    if hc is None or dc is None or ops["device_id"].dtype != np.int32:  # (ids packed in 32 bits below)
        return {(str(h), str(d), int(i)) for h, d, i in
                ops[["host", "device", "device_id"]].drop_duplicates().itertuples(index=False, name=None)}
    n_d = len(ops["device"].cat.categories)
    key = (hc.astype(np.int64) * n_d + dc) << 32
    key |= ops["device_id"].to_numpy().astype(np.int64) & 0xFFFFFFFF  # (two's complement of the int32 id)
    h_cat, d_cat = ops["host"].cat.categories, ops["device"].cat.categories
    out = set()
    for k in pd.unique(key).tolist():
        hd, i = k >> 32, k & 0xFFFFFFFF
        out.add((str(h_cat[hd // n_d]), str(d_cat[hd % n_d]), i - (1 << 32) if i >= 1 << 31 else i))
    return out


def measured_times(events: TraceEvents | OpTotals) -> Measured:
    """Measured seconds per module run and device, per instruction and per module.

    Args:
        events: a reader's ``TraceEvents`` (``ops`` with ``module`` already named by ``named_modules``), or the
            ``OpTotals`` of one (``OpTotals.merged`` of several hosts' gives the same numbers as one table).

    Returns:
        ``Measured``.
    """
    totals = events if isinstance(events, OpTotals) else OpTotals.of(events)
    n_steps = len(totals.steps)
    devices = max(len(totals.devices), 1)
    runs_by_module: dict[str, float] = {}
    notes: list[str] = []
    assumed = []
    recorded = totals.module_runs
    for m in totals.modules:
        n = recorded.get(m, 0)
        if n == 0:
            n = max(n_steps, 1) * devices
            if recorded:
                assumed.append(m)
        runs_by_module[m] = float(n)
    if assumed:
        notes.append(f"no XLA Modules events for {', '.join(repr(m) for m in sorted(assumed))}: one run per step "
                     "and device assumed")
    if not recorded and n_steps == 0:
        notes.append("no step markers in the trace: times are per run of the whole trace")
    per_op: dict[tuple[str, str], tuple[float, float]] = {}
    busy: dict[str, float] = {}
    for (m, inst), (total_ps, count) in totals.per_op.items():
        r = runs_by_module[m]
        sec = total_ps / 1e12 / r
        per_op[(m, inst)] = (sec, count / r)
        busy[m] = busy.get(m, 0.0) + sec
    return Measured(per_op, busy, runs_by_module, n_steps, devices, notes)


def trace_coverage(ops_table: pd.DataFrame, measured: Measured, files: list[str],
                   modules_with_hlo: set[str]) -> dict[str, Any]:
    """The report's ``coverage`` for a trace (``docs/report.md``); ``files``: the trace files read.

    ``joined_time_fraction`` is the share of measured op time whose op joined an instruction with a cost;
    ``unjoined_ops`` the number of (module, instruction) that did not; ``modules_without_hlo`` the modules that
    ran but whose HLO was not found; ``module_runs`` the executions per module (rule 1).
    """
    unjoined = ops_table["category"] == "unjoined"
    total = float(ops_table["measured_s"].sum())
    joined = float(ops_table.loc[~unjoined, "measured_s"].sum())
    return {
        "joined_time_fraction": joined / total if total else 0.0,
        "steps": measured.steps,
        "devices": measured.devices,
        "files": list(files),
        "unjoined_ops": int(unjoined.sum()),
        "modules_without_hlo": sorted(set(measured.runs) - modules_with_hlo),
        "module_runs": {m: int(r) for m, r in sorted(measured.runs.items())},
    }
