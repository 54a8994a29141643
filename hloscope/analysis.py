"""``hloscope.analyze``: the stages joined -- read (parsers), cost, score (roofline), tabulate (report).

See ``analyze`` for the inputs it accepts.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable

if TYPE_CHECKING:
    from hloscope.hlo import HloModule
    from hloscope.result import Report
    from hloscope.roofline.chips import ChipSpec


from hloscope.errors import ChipRequiredError as ChipRequiredError  # noqa: E402 - re-exported


def analyze(source: Any, chip: str | ChipSpec | None = None, *, run: str | None = None,
            hlo: Iterable[str | os.PathLike[str]] = (), module: str | None = None) -> Report:
    """Cost and score every instruction of a compiled program, with measured times when given a trace.

    Args:
        source: one of: a JAX ``Compiled`` (``jax.jit(f).lower(...).compile()``; its ``as_text()`` is
            analysed); HLO text; a path to an HLO text file or an XLA dump directory; a profile log dir holding
            ``plugins/profile/<run>/``, a run dir, one ``*.xplane.pb``, or one Chrome trace
            ``*.trace.json.gz`` (TPU traces carry each op's HLO line and libtpu's own FLOPs/bytes).
        chip: chip id or alias (``"tpu-v5e"``, ``"h100"``, ``"host"``) or a ``ChipSpec``. Required for HLO
            inputs; for a CPU trace the calibrated ``host`` chip is used (measured on the fly when absent).
        run: for a log dir, the run to read (default: newest).
        hlo: HLO text files to join a trace's events with, instead of the HLO protos embedded in the trace.
        module: for a dump dir with several modules, part of the wanted module's name.

    Returns:
        ``Report`` with ``.ops`` and ``.modules`` DataFrames (totals per module run / per step).

    Raises:
        HloParseError: bad HLO text. TraceError: bad trace input (names path and fix).
        UnknownChipError: unknown chip id (lists ids and the closest match). ChipRequiredError: no chip.
    """
    from hloscope.parsers import parse_hlo
    from hloscope.parsers._trace_dir import find_xplane_files

    if hasattr(source, "as_text") and callable(source.as_text):
        modules = [parse_hlo(source.as_text())]
        return _static(modules, _resolve_chip(chip, None))
    if isinstance(source, str) and not _is_path(source):
        return _static([parse_hlo(source)], _resolve_chip(chip, None))
    path = Path(source)
    if path.is_file() and path.name.endswith((".trace.json.gz", ".trace.json")):
        return _chrome_traced(path, chip)
    if path.is_file() and not path.name.endswith((".xplane.pb", ".xplane.pb.gz")):
        return _static([parse_hlo(path)], _resolve_chip(chip, None))
    if path.is_dir() and any(path.glob("*after_optimizations.txt")):
        return _static([parse_hlo(path, module=module)], _resolve_chip(chip, None))
    run_dir, files = find_xplane_files(path, run)
    return _traced(run_dir, files, chip, [Path(h) for h in hlo])


def _concat(frames):
    import pandas as pd

    return frames[0] if len(frames) == 1 else pd.concat(frames, ignore_index=True)


def _is_path(s: str) -> bool:
    return "\n" not in s and len(s) < 4096 and (
        os.path.exists(s) or s.endswith((".pb", ".txt", ".hlo", ".json", ".json.gz", "/")))


def _chrome_traced(path: Path, chip: str | ChipSpec | None) -> Report:
    """A Chrome-trace profile (``*.trace.json.gz``): per-op time from durations; FLOPs and bytes from each
    op's printed HLO line where it determines them, else libtpu's numbers (flag ``costed-by-libtpu``)."""
    from hloscope.parsers._chrome_trace import read_chrome_trace, trace_costs
    from hloscope.result import Report
    from hloscope.roofline.tables import modules_frame, ops_frame

    tc = trace_costs(read_chrome_trace(path))
    spec = _resolve_chip(chip, tc.platform)
    ops = ops_frame(tc.costs, spec, tc.measured, tc.step_s)
    return Report(ops, modules_frame(tc.costs, ops, spec, tc.step_s), spec, tc.coverage, tc.notes)


def _resolve_chip(chip: str | ChipSpec | None, platform: str | None) -> ChipSpec:
    from hloscope.roofline.chips import ChipSpec, all_chips, get_chip

    if isinstance(chip, ChipSpec):
        return chip
    chips = all_chips()
    if chip is not None:
        return get_chip(chip, extra=chips)
    if platform == "cpu":
        if "host" in chips:
            return chips["host"]
        from hloscope.roofline.calibrate import calibrate_host

        return calibrate_host(repeats=3, size=1024, memory_bytes=64 * 2**20)
    raise ChipRequiredError(
        "no chip given: pass --chip ID (e.g. tpu-v5e, h100; see `hloscope chips`)"
        + ("" if platform else " -- an HLO text carries no device kind")
    )


def _static(modules: list[HloModule], chip: ChipSpec) -> Report:
    from hloscope.cost import module_cost
    from hloscope.result import Report
    from hloscope.roofline.tables import modules_frame, ops_frame

    costs = [module_cost(m) for m in modules]
    ops = ops_frame(costs, chip)
    return Report(ops, modules_frame(costs, ops, chip), chip, {"static": True})


def _traced(run_dir: Path, files: list[Path], chip: str | ChipSpec | None, hlo_files: list[Path]) -> Report:

    from hloscope.cost import module_cost
    from hloscope.parsers import parse_hlo, parse_hlo_text
    from hloscope.parsers._command_buffer import join_command_buffer_kernels
    from hloscope.parsers._xspace import TraceError, hlo_protos, op_events, open_xspace, step_events
    from hloscope.result import Report
    from hloscope.roofline.tables import modules_frame, ops_frame

    spaces = [open_xspace(f) for f in files]  # indexed: events are decoded line by line, not all at once
    events = _concat([op_events(x) for x in spaces])
    steps = _concat([step_events(x) for x in spaces])
    if events.empty:
        raise TraceError(str(run_dir), "no per-HLO-op events in this trace (expected XLA Ops lines on "
                         "/device:TPU, kernels with hlo_op stats on /device:GPU, or CPU thunks with hlo_op "
                         "stats); re-capture with jax.profiler.trace around jitted steps")
    modules: dict[str, HloModule] = {}
    if hlo_files:
        for f in hlo_files:
            m = parse_hlo(f)
            modules[m.name] = m
    else:
        for x in spaces:
            for entry in hlo_protos(x):
                if entry.module_name not in modules:
                    modules[entry.module_name] = parse_hlo_text(entry.to_text(), source=f"{run_dir}:{entry.metadata_name}")
    events, rejoined = join_command_buffer_kernels(events, modules)
    ran = set(events["hlo_module"])
    if not modules:
        raise TraceError(str(run_dir), "the trace holds no HLO protos (the /host:metadata plane is empty); "
                         "pass the module text with --hlo FILE (e.g. from XLA_FLAGS=--xla_dump_to)")
    platform = "cpu" if events["plane"].str.startswith("/host:CPU").all() else (
        "gpu" if events["plane"].str.contains("GPU").any() else "tpu")
    spec = _resolve_chip(chip, platform)
    notes = []
    if chip is None and platform == "cpu" and spec.id == "host":
        from hloscope.roofline.chips import all_chips

        if "host" not in all_chips():
            notes.append("host chip measured on the fly; run `hloscope calibrate` once to measure it carefully")
    if rejoined["by_name"] or rejoined["by_gemm_order"]:
        notes.append(f"GPU command buffers (CUDA graphs): {rejoined['by_name']} kernel events joined to "
                     f"instructions by kernel name, {rejoined['by_gemm_order']} library GEMM kernels to the GEMM "
                     "custom calls in program order")
    devices = max(int(events["device_id"].nunique()), 1)
    train_steps = steps[steps["step_num"].notna()] if "step_num" in steps else steps
    n_steps = int(train_steps["step_num"].nunique()) if len(train_steps) else 0
    if n_steps == 0:
        notes.append("no step markers in the trace: times are per run of the whole trace")
    per = max(n_steps, 1) * devices
    grouped = events.groupby(["hlo_module", "hlo_op"])["self_ps"].agg(["sum", "count"])
    measured = {(m, op): (total / 1e12 / per, cnt / per) for (m, op), (total, cnt) in grouped.iterrows()}
    costs = [module_cost(modules[name]) for name in sorted(ran) if name in modules]
    step_s = {m: sum(v[0] for (mm, _), v in measured.items() if mm == m) for m in ran}
    ops = ops_frame(costs, spec, measured, step_s)
    joined = ops[ops["category"] != "unjoined"]["measured_s"].sum()
    total = ops["measured_s"].sum()
    coverage = {
        "joined_time_fraction": float(joined / total) if total else 0.0,
        "steps": n_steps, "devices": devices, "files": [str(f) for f in files],
        "unjoined_ops": int((ops["category"] == "unjoined").sum()),
        "modules_without_hlo": sorted(ran - set(modules)),
    }
    return Report(ops, modules_frame(costs, ops, spec, step_s), spec, coverage, notes)
