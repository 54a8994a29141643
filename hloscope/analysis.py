"""``hloscope.analyze``: the stages joined -- read (parsers), cost, score (roofline), tabulate (report).

See ``analyze`` for the inputs it accepts.
"""

from __future__ import annotations

import functools
import os
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable

if TYPE_CHECKING:
    from hloscope.hlo import HloModule
    from hloscope.result import Report
    from hloscope.roofline.chips import ChipSpec


from hloscope.errors import ChipRequiredError as ChipRequiredError  # noqa: E402 - re-exported
from hloscope.errors import HloscopeError, UnreadablePathError, escaped  # noqa: E402


class ModuleChoiceError(HloscopeError):
    """``module`` names no post-optimization module of an XLA dump directory, or several.

    The message names the option the caller used to pick a module: ``message("module=")`` for the Python API
    (what ``str()`` says), ``message("--module")`` for the command line.

    Attributes:
        path: the dump directory.
        wanted: the ``module`` given.
        names: the modules it could pick from (all, when none matched; the matches, when several did), as
            ``module_NNNN.<name>`` dump prefixes.
    """

    def __init__(self, path: str | os.PathLike[str], wanted: str, names: list[str], matched: bool) -> None:
        self.path, self.wanted, self.names, self.matched = os.fspath(path), wanted, list(names), matched
        super().__init__(self.message("module="))

    def message(self, option: str) -> str:
        """The one-line message, telling to pass ``option`` (``"module="`` or ``"--module"``); control
        characters of the path and of the file names shown escaped (``hloscope.errors.escaped``)."""
        shown = ", ".join(self.names[:40]) + (f", ... ({len(self.names) - 40} more)" if len(self.names) > 40 else "")
        if not self.matched:
            return escaped(f"{self.path}: no post-optimization module (*after_optimizations.txt) matches "
                           f"{self.wanted!r}; pass {option} with part of one of these names: {shown}")
        return escaped(f"{self.path}: {len(self.names)} post-optimization modules match {self.wanted!r}: {shown}; "
                       f"pass {option} with a part that names one, e.g. {self.names[0]!r}")

    def __reduce__(self):  # picklable despite the constructor's arguments (xdist, Dask)
        return (type(self), (self.path, self.wanted, self.names, self.matched))


def analyze(source: Any, *args: Any, chip: str | ChipSpec | None = None, target: str = "auto",
            topology: str | None = None, run: str | None = None, hlo: Iterable[str | os.PathLike[str]] = (),
            module: str | None = None, client: Any = None, workers: int | None = None,
            scheduler: str | None = None, progress: bool = False, **kwargs: Any) -> Report:
    """Cost and score every instruction of a program -- compiling it first when given a function -- with
    measured times when given a trace.

    Args:
        source: one of
            - a function, jitted (``jax.jit(f)``) or not, with example arguments ``*args, **kwargs`` (arrays or
              ``jax.ShapeDtypeStruct``, with shardings for a sharded program): lowered with
              ``fn.lower(*args, **kwargs)`` and compiled for ``target`` (``hloscope.compile.compile_program``);
            - a ``jax.stages.Lowered`` (compiled) or ``jax.stages.Compiled`` (``jax.jit(f).lower(...).compile()``;
              used as is) -- no example arguments;
            - HLO text (a ``str`` holding a module);
            - a path (``str`` or ``os.PathLike``) to an HLO text file or an XLA dump directory
              (``--xla_dump_to``): every post-optimization module of the directory, the modules table ranked
              by roofline time (``module`` picks one);
            - a path to a profile: a log dir holding ``plugins/profile/<run>/``, a run dir, one ``*.xplane.pb``,
              or one Chrome trace ``*.trace.json.gz`` (TPU traces carry each op's HLO line and libtpu's own
              FLOPs/bytes).
        *args, **kwargs: example arguments of a function ``source`` (keywords named like this function's own
            -- ``chip``, ``target``, ``topology``, ``run``, ``hlo``, ``module``, ``client``, ``workers``,
            ``scheduler``, ``progress`` -- are taken as those: bind
            such arguments with ``functools.partial``).
        chip: chip id or alias (``"tpu-v5e"``, ``"h100"``, ``"host"``) or a ``ChipSpec``. Required for
            programs and HLO inputs (``"host"`` before ``hloscope calibrate`` wrote ``host.toml``: measured on
            the fly, once a process, said in ``notes``); for a trace, default: the chip its device kind names,
            or for a CPU trace the calibrated ``host`` chip (measured on the fly when absent).
        target: for a function: ``"auto"`` (default: ``"deviceless"`` for a TPU chip when libtpu is installed and
            no TPU is attached, else ``"backend"``; ``Report.notes`` says which and why), ``"backend"`` (JAX's
            current backend) or ``"deviceless"`` (a TPU of ``chip``'s generation through libtpu, no TPU needed;
            the program's own meshes are moved onto it).
        topology: for a deviceless compile: libtpu topology name (``"v5e:2x4"``); default: the smallest with
            enough devices for the arguments' shardings.
        run: for a log dir, the run to read (default: newest).
        hlo: HLO text files to join a trace's events with, instead of the HLO protos embedded in the trace.
        client, workers, scheduler, progress: for a profile run of several host files (a pod, a multi-node GPU
            job): where the per-host tasks run on Dask (``hloscope.pod.analyze_run``): a
            ``dask.distributed.Client``, a local cluster of ``workers`` processes (default: one per core, at most
            one per file, for runs of 64 MB or more, else this process; ``0``: in this process), or the
            ``scheduler`` address of a running cluster; ``progress`` shows a bar over hosts on a terminal. A run
            of one file is read in this process.
        module: for a dump dir, part of the wanted module's name or dump file name (``"jit_train_step"``,
            ``"module_0044"``); a part that several files hold picks the one whose module name (or
            ``module_NNNN.<name>`` dump prefix) it is. Default: every module of the directory.

    Returns:
        ``Report`` with ``.ops`` and ``.modules`` DataFrames (totals per module run / per step), totals and
        ``assert_*`` methods; for a compiled program also ``compiled_for`` (platform, device kind, devices)
        and ``compile_s`` (JAX's lower + compile seconds); ``analysis_s`` is hloscope's own time.

    Raises:
        TypeError: example arguments with HLO text, a path, a ``Lowered`` or a ``Compiled``; or a ``source``
            of none of the kinds above.
        ConfigError: an unknown ``target``, or a deviceless compile that cannot be done (no libtpu, a non-TPU
            chip, a bad topology; the message names the fix).
        HloParseError: bad HLO text. TraceError: bad trace input (names path and fix).
        ModuleChoiceError: ``module`` names no module of the dump dir, or several (lists them).
        UnreadablePathError: the system will not read the path, or a file it names (permission denied, a
            directory where a file is expected, a broken symbolic link: ``MissingPathError``); never a bare
            ``OSError``. Messages show control characters of paths escaped.
        UnknownChipError: unknown chip id (lists ids and the closest match). ChipRequiredError: no chip.
    """
    __tracebackhide__ = True
    import time

    from hloscope.parsers import parse_hlo

    chip_notes: list[str] = []  # (the host chip measured on the fly: a static report says so)
    if isinstance(source, (str, os.PathLike)):
        if args or kwargs:
            raise TypeError("hloscope.analyze(text_or_path) takes no example arguments")
        t0 = time.perf_counter()
        try:
            if isinstance(source, str) and not _is_path(source):
                report = _static([parse_hlo(source)], _resolve_chip(chip, None, notes=chip_notes))
            else:
                path = Path(source)
                read = _hlo_files(path, module)
                if read is not None:
                    report = _static(read[0], _resolve_chip(chip, None, notes=chip_notes))
                    if read[1]:
                        _dump_dir_report(report, read[1])
                elif not hlo and _many_hosts(path, run, client, workers, scheduler):
                    from hloscope.pod import analyze_run

                    report = analyze_run(path, run, chip, client=client, workers=workers, scheduler=scheduler,
                                         progress=progress)
                else:
                    report = _traced(path, run, chip, [Path(h) for h in hlo])
        except HloscopeError:
            raise
        except OSError as e:  # the system refused a path (permission denied, ...): name it, no traceback
            raise UnreadablePathError.from_os_error(source, e) from None
        report.notes[:0] = chip_notes
        report.analysis_s = time.perf_counter() - t0
        return report

    from hloscope.compile import compile_program

    spec = _resolve_chip(chip, None, notes=chip_notes)
    program = compile_program(source, args, kwargs, chip=spec, target=target, topology=topology)
    t0 = time.perf_counter()
    report = _static([parse_hlo(program.hlo_text)], spec)
    report.compiled_for = dict(program.compiled_for)
    report.notes.extend(chip_notes)
    if program.note:
        report.notes.append(program.note)
    report.compile_s = program.compile_s
    report.analysis_s = program.text_s + time.perf_counter() - t0
    return report


#: Files ``analyze`` reads as a trace; any other file is HLO text.
TRACE_FILE_ENDINGS = (".xplane.pb", ".xplane.pb.gz", ".trace.json.gz", ".trace.json")


def is_hlo_text_file(path: str | os.PathLike[str]) -> bool:
    """Whether ``analyze`` reads ``path`` as one HLO text file: a file (not a directory) not named as a trace."""
    path = Path(path)
    return path.is_file() and not path.name.endswith(TRACE_FILE_ENDINGS)


def _many_hosts(path: Path, run: str | None, client: Any, workers: int | None, scheduler: str | None) -> bool:
    """Whether a profile path is read host file by host file (``hloscope.pod``): an XSpace run of several files,
    or one for which a Dask cluster was named."""
    if path.name.endswith((".trace.json.gz", ".trace.json")):
        return False
    from hloscope.parsers._trace_dir import find_xplane_files

    _, files = find_xplane_files(path, run)
    return len(files) > 1 or client is not None or scheduler is not None or workers is not None


def _is_path(s: str) -> bool:
    """Whether the string ``source`` of ``analyze`` is a path rather than HLO text: anything that names an entry
    of the file system (even a name holding a newline), else one line ending like a file we read."""
    if len(s) >= 4096:
        return False
    if os.path.lexists(s):  # (False for a NUL character)
        return True
    return "\n" not in s and s.endswith((".pb", ".txt", ".hlo", ".json", ".json.gz", "/"))


def _resolve_chip(chip: str | ChipSpec | None, platform: str | None, device_kind: str | None = None,
                  notes: list[str] | None = None) -> ChipSpec:
    """The chip to score against: ``chip`` when given; else the chip the trace's device kind names; else, for
    a CPU trace, the calibrated host. Says which it chose in ``notes``."""
    from hloscope.roofline.chips import ChipSpec, UnknownChipError, all_chips, get_chip, get_device_spec

    if isinstance(chip, ChipSpec):
        return chip
    chips = all_chips()
    if chip is not None:  # one device's share: every op of a program runs on one device
        try:
            return get_chip(chip, extra=chips).per_device()
        except UnknownChipError:
            if str(chip).strip().lower() not in _HOST_NAMES:
                raise
        return _host_measured_now(notes).per_device()  # ("host" named before `hloscope calibrate` ran)
    if device_kind and platform in ("gpu", "tpu"):
        try:
            spec = get_device_spec(device_kind, extra=chips)
        except (UnknownChipError, ValueError):
            spec = None
        if spec is not None:
            if notes is not None:
                notes.append(f"chip {spec.id} chosen from the trace's device kind {device_kind!r}; pass --chip to "
                             "score against another")
            return spec
    if platform == "cpu":
        return chips["host"] if "host" in chips else _host_measured_now(notes)
    raise ChipRequiredError(
        "no chip given: pass --chip ID (e.g. tpu-v5e, h100; see `hloscope chips`)"
        + (f" -- the trace names its device {device_kind!r}, which is not in the chip table" if device_kind
           else "" if platform else " -- an HLO text carries no device kind")
    )


#: The names of the host chip (``calibrate_host``'s id and alias): a chip that exists once ``hloscope calibrate``
#: wrote ``host.toml``, and is measured on the fly until then.
_HOST_NAMES = ("host", "cpu")


def _host_measured_now(notes: list[str] | None) -> ChipSpec:
    """The host chip measured briefly (``calibrate_host`` with few repeats, ~1 s; once a process: the pytest
    plugin's tests, the command line's forked child and its analysis all score against the same one), saying so
    in ``notes``."""
    if notes is not None:
        notes.append("host chip measured on the fly; run `hloscope calibrate` once to measure it carefully")
    return _host_measurement()


@functools.cache
def _host_measurement() -> ChipSpec:
    from hloscope.roofline.calibrate import calibrate_host

    return calibrate_host(repeats=3, size=1024, memory_bytes=64 * 2**20)


def _static(modules: list[HloModule], chip: ChipSpec) -> Report:
    """Parse -> cost -> score, no trace: roofline times only."""
    from hloscope.cost import module_cost
    from hloscope.result import Report
    from hloscope.roofline.tables import modules_frame, ops_frame

    from hloscope.steps.columns import add_overlap_columns

    from hloscope._gc import paused_gc

    with paused_gc():  # (the tables too: a full collection would walk the parsed modules, ~0.04 s on llama)
        costs = [module_cost(m) for m in modules]
        # (the tables as their columns: the Report makes each DataFrame on first use of ``ops``/``modules``)
        ops = ops_frame(costs, chip, as_table=True)
        table = modules_frame(costs, ops, chip, schedule_known=bool(modules), as_table=True)
        add_overlap_columns(ops, table, modules)
    return Report(ops, table, chip, {"static": True}, hlo_modules=list(modules))


def hlo_modules_of(path: str | os.PathLike[str], module: str | None = None) -> list[HloModule] | None:
    """The parsed modules ``analyze(path, module=module)`` would cost for an HLO text file or an XLA dump
    directory, named and ordered as its ``Report.hlo_modules`` (a dump dir's files in order, ``module`` picking
    one; see ``_hlo_files``); None for any other path (a profile, whose modules come with its trace). For
    ``hloscope memory``, which needs the modules and not their cost.

    Raises:
        ModuleChoiceError: ``module`` names no module of the dump dir, or several.
        HloParseError: bad HLO text. UnreadablePathError: the system will not read the path or a file in it.
    """
    try:
        read = _hlo_files(Path(path), module)
    except HloscopeError:
        raise
    except OSError as e:
        raise UnreadablePathError.from_os_error(path, e) from None
    return None if read is None else read[0]


def _hlo_files(path: Path, module: str | None) -> tuple[list[HloModule], list[str]] | None:
    """The parsed modules of an HLO text file (and no names), or of an XLA dump directory (and the names its
    files printed: ``_dump_dir_modules``); None for any other path."""
    from hloscope.parsers import parse_hlo

    if is_hlo_text_file(path):
        return [parse_hlo(path)], []
    if path.is_dir() and any(path.glob("*after_optimizations.txt")):
        return _dump_dir_modules(path, module)
    return None


def _dump_dir_modules(path: Path, module: str | None) -> tuple[list[HloModule], list[str]]:
    """Every post-optimization module of an XLA dump directory (``module``: the one it names), in file order,
    and the name each module was printed under (its ``HloModule`` header).

    JAX compiles a small module for every operation run outside ``jit`` (``jit_broadcast_in_dim``,
    ``jit__truncated_normal``, ...), often one name several times for other shapes; such modules are told
    apart by their dump prefix (``module_0002.jit_broadcast_in_dim``), since the tables key ops by module name:
    they are renamed to it.
    """

    from hloscope.parsers import parse_hlo
    from hloscope.parsers._load import dump_modules

    files = [(f, *_dump_names(f)) for f in dump_modules(path)]  # (file, module name, dump prefix)
    if module is not None:
        picked = [t for t in files if module in t[0].name or module == t[1]]
        if len(picked) > 1:
            exact = [t for t in picked if module in (t[1], t[2])]
            picked = exact if len(exact) == 1 else picked
        if len(picked) != 1:
            raise ModuleChoiceError(path, module, [t[2] for t in (picked or files)], matched=bool(picked))
        files = picked
    modules = [parse_hlo(f) for f, _, _ in files]  # (an unreadable file: an UnreadablePathError naming it)
    printed = [m.name for m in modules]
    count = Counter(printed)
    modules = [m.replace(name=prefix) if count[m.name] > 1 and prefix != m.name else m
               for m, (_, _, prefix) in zip(modules, files)]
    return modules, printed


def _dump_dir_report(report: Report, printed_names: list[str]) -> None:
    """A dump dir's report (``_static`` of ``_dump_dir_modules``): the modules table ranked by roofline time,
    largest first, and a note on the modules and their names (``printed_names``: each file's module name)."""
    report.modules = report.modules.sort_values("roofline_s", ascending=False, kind="stable").reset_index(drop=True)
    if len(printed_names) > 1:
        renamed = sum(k for k in Counter(printed_names).values() if k > 1)
        report.notes.append(
            f"XLA dump dir: {len(printed_names)} modules, each its own program (totals per run of each); --module "
            "NAME (module= in Python) picks one"
            + (f"; {renamed} modules compiled under a name used more than once are named by their dump file, "
               "module_NNNN.<name>" if renamed else ""))


def _dump_names(f: Path) -> tuple[str, str]:
    """A dump file's module name (its ``HloModule`` header; else the file name's) and dump prefix
    (``module_0002.jit_broadcast_in_dim``: the file name up to the module name), read without parsing."""
    import re

    with open(f, encoding="utf-8", errors="replace") as fh:
        head = fh.read(4096)
    found = re.match(r"\s*HloModule\s+([^\s,]+)", head)
    parts = f.name.split(".")
    name = found.group(1) if found else (parts[1] if len(parts) > 2 and parts[0].startswith("module_") else f.name)
    dotted = f".{name}."
    prefix = f.name[: f.name.index(dotted) + len(dotted) - 1] if dotted in f.name else f.name
    return name, prefix


def _traced(path: Path, run: str | None, chip: str | ChipSpec | None, hlo_files: list[Path]) -> Report:
    """Read the trace's op events (any format), join them to the costs of the HLO that ran, score on the chip.

    XSpace files embed each executable's HLO (or ``hlo_files`` give it); a TPU Chrome trace carries each op's
    HLO line instead, costed line by line (``hloscope.cost.trace_lines``).
    """
    from hloscope.parsers.events import read_trace
    from hloscope.roofline.join import measured_times, named_modules
    from hloscope.steps.breakdown import host_parts
    from hloscope.steps.schedule import async_done_pairs

    events = read_trace(path, run)
    notes = list(events.notes)
    events.ops = named_modules(events.ops)
    if "hlo_text" in events.ops.columns:  # a Chrome trace: the HLO is in the events, line by line
        from hloscope.cost.trace_lines import line_costs

        measured = measured_times(events)
        lines = line_costs(events.ops, measured.runs, str(path))
        costs = lines.costs
        hlo_modules = []  # lines, not modules: no schedule to walk for memory
        with_hlo = set(measured.runs)
        notes.append("costs from each op's HLO line (hloscope's rules, tile-padded bytes); where the line alone "
                     "does not determine a value (fusion FLOPs, async wrappers, sliced fusion operands) libtpu's "
                     "own number is used, flagged costed-by-libtpu (dense bytes)")
    else:
        from hloscope.cost import module_cost
        from hloscope.parsers._command_buffer import join_command_buffer_kernels

        modules = _trace_modules(events, hlo_files, path)
        events.ops, rejoined = join_command_buffer_kernels(events.ops, modules)
        if rejoined["by_name"] or rejoined["by_gemm_order"]:
            notes.append(command_buffer_note(rejoined["by_name"], rejoined["by_gemm_order"]))
        measured = measured_times(events)
        hlo_modules = [modules[name] for name in sorted(measured.runs) if name in modules]
        costs = [module_cost(m) for m in hlo_modules]
        with_hlo = set(modules)
        lines = None
    spec = _resolve_chip(chip, events.platform, events.device_kind, notes)
    pairs = async_done_pairs(hlo_modules) if hlo_modules else None
    return scored_trace_report(costs, spec, measured, events.files, with_hlo, notes, hlo_modules,
                               lambda ops: host_parts(events, ops, pairs), lines)


def command_buffer_note(by_name: int, by_gemm_order: int) -> str:
    """The note on GPU command-buffer kernels joined to instructions (``parsers._command_buffer``)."""
    return (f"GPU command buffers (CUDA graphs): {by_name} kernel events joined to instructions by kernel name, "
            f"{by_gemm_order} library GEMM kernels to the GEMM custom calls in program order")


def scored_trace_report(costs, spec: ChipSpec, measured, files: list[str], with_hlo: set[str], notes: list[str],
                        hlo_modules: list[HloModule], parts_of, lines=None) -> Report:
    """The report of a trace from its measured totals: ops and modules tables, coverage, the chip's fit, the
    steps (``parts_of(ops)``: the per-host ``steps.breakdown.HostPart`` of each host, in host order, merged
    here) and the overlap columns. One tail for a serial read and for ``hloscope.pod``'s per-host tasks, so that
    both give the same report."""
    from hloscope.result import Report
    from hloscope.roofline.join import trace_coverage
    from hloscope.roofline.tables import modules_frame, ops_frame
    from hloscope.steps.breakdown import merge_parts
    from hloscope.steps.columns import add_overlap_columns
    from hloscope.steps.summary import stragglers

    notes.extend(measured.notes)
    ops = ops_frame(costs, spec, measured.per_op, measured.busy_s)
    coverage = trace_coverage(ops, measured, files, with_hlo)
    if lines is not None:
        total = float(ops["measured_s"].sum())
        by_rules = sum(t for k, (t, _) in measured.per_op.items() if k in lines.line_costed)  # (in a fixed order)
        coverage["line_costed_time_fraction"] = by_rules / total if total else 0.0
    notes.extend(_chip_fit(ops, spec, coverage, lambda c: ops_frame(costs, c, measured.per_op, measured.busy_s)))
    table = modules_frame(costs, ops, spec, measured.busy_s)
    breakdown = merge_parts(parts_of(ops), measured.runs)
    add_overlap_columns(ops, table, hlo_modules, breakdown)
    notes.extend(breakdown.notes)
    return Report(ops, table, spec, coverage, notes, hlo_modules=hlo_modules, steps=breakdown.steps,
                  gaps=breakdown.gaps, stragglers=stragglers(breakdown.steps, breakdown.device_ops))


def _chip_fit(ops, spec: ChipSpec, coverage: dict, score_on) -> list[str]:
    """Check the roof against the measured times (``hloscope.roofline.consistency``): record the share of
    measured op time faster than its roof and the share with a known roof in ``coverage``; when the first is
    above ``FIT_BOUND``, say so and name the chips of the same kind under which the times are consistent."""
    from hloscope.roofline.chips import all_chips
    from hloscope.roofline.consistency import FIT_BOUND, consistent_chips, faster_share, roofed_share

    share = faster_share(ops)
    coverage["faster_than_roof_time_fraction"] = share
    coverage["roofed_time_fraction"] = roofed_share(ops)
    if not share > FIT_BOUND:
        return []
    candidates = [d for d in (c.per_device() for c in all_chips().values()
                              if c.kind == spec.kind and c.id != spec.id) if d.id != spec.id]
    fits = consistent_chips(score_on, candidates)
    named = (", ".join(f"{cid.removesuffix('-device')} ({s:.1%})" for cid, s in fits) if fits
             else f"none of the {spec.kind.upper()} chips in the table")
    return [f"{share:.1%} of the measured op time ran faster than its roof on {spec.id}: the trace did not run "
            f"on this chip, or a cost is overcounted; chips under which at most {FIT_BOUND:.0%} runs faster: "
            f"{named}"]


def _trace_modules(events, hlo_files: list[Path], path: Path) -> dict[str, HloModule]:
    """The HLO modules a trace's events name: from ``hlo_files`` when given (an XLA dump dir among them gives
    the modules of it the trace ran), else the trace's own protos."""
    from hloscope.parsers import parse_hlo, parse_hlo_text
    from hloscope.parsers._load import dump_modules
    from hloscope.parsers._trace_error import TraceError

    modules: dict[str, HloModule] = {}
    ran = {str(m) for m in events.ops["module"].unique()}  # (not astype(str): one string per event)
    if hlo_files:
        for f in hlo_files:
            if f.is_dir():
                for g in dump_modules(f):
                    if _dump_names(g)[0] in ran:
                        m = parse_hlo(g)
                        modules[m.name] = m
                continue
            m = parse_hlo(f)
            modules[m.name] = m
    else:
        for name, text in events.hlo_modules.items():
            if name in ran:
                modules[name] = parse_hlo_text(text(), source=events.hlo_sources.get(name, str(path)))
    if not modules and not events.hlo_modules:
        raise TraceError(str(path), "the trace holds no HLO protos (the /host:metadata plane is empty); "
                         "pass the module text with --hlo FILE (e.g. from XLA_FLAGS=--xla_dump_to)")
    return modules
