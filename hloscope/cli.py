"""``hloscope`` command line: thin argument parsing over ``hloscope.analyze``, ``hloscope.diff`` and the chip
registry.

Exit codes (as xprof's CLI): 0 ok, 1 internal error -- or, for ``diff``, a ``--fail-on`` rule broken --, 2 bad
input or usage, 3 path not found.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Callable

EXIT_OK, EXIT_INTERNAL, EXIT_INPUT, EXIT_PATH = 0, 1, 2, 3
#: The status of a command whose stdout reader went away: 128 + SIGPIPE, as a shell reports a process that
#: signal ended.
EXIT_BROKEN_PIPE = 141
#: The help of every command's ``-o`` (``_emit``).
_OUTPUT_HELP = "write to FILE instead of stdout (a regular file atomically; a device or pipe directly)"


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The command line's parser. ``only``: the name of one command (``report``...), whose subparser alone is
    then built -- all that parsing a command line that starts with it needs (building the five took ~20 M
    instructions, ~5 ms, of every ``hloscope report``: argparse makes a help formatter for each argument it adds);
    None or any other word builds them all (``hloscope --help`` lists them; an unknown command's error names them).
    """
    parser = argparse.ArgumentParser(prog="hloscope", description="Roofline analysis of XLA programs.")
    sub = parser.add_subparsers(dest="command", required=True)
    for name, (help_text, add_arguments) in _COMMANDS.items():
        if only not in _COMMANDS or name == only:
            add_arguments(sub.add_parser(name, help=help_text))
    return parser


def _report_arguments(report: argparse.ArgumentParser) -> None:
    report.add_argument("path", help="profile log dir / run dir / .xplane.pb, HLO text file, or XLA dump dir")
    report.add_argument("--chip", metavar="ID", help="chip id or alias (see `hloscope chips`); "
                        "default: from the trace (host CPU for CPU traces)")
    report.add_argument("--run", metavar="NAME", help="run under plugins/profile/ (default: newest)")
    report.add_argument("--hlo", metavar="FILE", nargs="+", default=[], help="HLO text to join trace events with")
    report.add_argument("--module", metavar="NAME", help="for an XLA dump dir: report only the module whose name "
                        "or dump file name holds NAME (default: every module, ranked by roofline time)")
    report.add_argument("--top", metavar="N", type=_positive_int, default=25, help="ops shown (default: %(default)r)")
    report.add_argument("--workers", metavar="N", type=int,
                        help="a run of several host files: processes of a local Dask cluster (default: one per "
                        "core, at most one per file, for runs of 64 MB or more; 0: in this process); "
                        "docs/pod_scale.md")
    report.add_argument("--scheduler", metavar="ADDRESS",
                        help="a run of several host files: the address of a running Dask scheduler to use")
    report.add_argument("--advice", action="store_true",
                        help="end the table with what to change, ranked by the time it could save (docs/advice.md; "
                        "JSON and HTML always hold it)")
    report.add_argument("--format", choices=("table", "json", "csv", "html"), default="table",
                        help="output format (default: %(default)r); html: one self-contained page with the "
                        "roofline chart")
    report.add_argument("-o", "--output", metavar="FILE", help=_OUTPUT_HELP)


def _memory_arguments(memory: argparse.ArgumentParser) -> None:
    memory.add_argument("path", help="HLO text file, XLA dump dir, or profile dir / .xplane.pb with HLO")
    memory.add_argument("--chip", metavar="ID", help="chip id or alias whose HBM capacity to check against "
                        "(default: from the trace; an HLO file needs one)")
    memory.add_argument("--run", metavar="NAME", help="run under plugins/profile/ (default: newest)")
    memory.add_argument("--module", metavar="NAME", help="only the module whose name or dump file name holds NAME")
    memory.add_argument("--format", choices=("table", "json"), default="table")
    memory.add_argument("-o", "--output", metavar="FILE", help=_OUTPUT_HELP)
    memory.add_argument("--fail-if-not-fits", action="store_true",
                        help="exit 1 when a module does not fit the chip's HBM")


def _diff_arguments(diff: argparse.ArgumentParser) -> None:
    diff.add_argument("a", help="before: HLO file, dump dir, trace dir or report JSON")
    diff.add_argument("b", help="after: same kinds as A")
    diff.add_argument("--chip", metavar="ID", help="chip id or alias to score both against")
    diff.add_argument("--fail-on", metavar="RULE", action="append", default=[],
                      help="exit 1 when a module total changes past RULE, e.g. roofline_s:+5%% or "
                      "wire_bytes:+0 (repeatable; see docs/diff.md)")
    diff.add_argument("--top", metavar="N", type=_positive_int, default=25, help="ops shown per section")
    diff.add_argument("--format", choices=("table", "json", "html"), default="table")
    diff.add_argument("-o", "--output", metavar="FILE", help=_OUTPUT_HELP)


def _chips_arguments(chips: argparse.ArgumentParser) -> None:
    chips.add_argument("--format", choices=("table", "json"), default="table")


def _calibrate_arguments(calibrate: argparse.ArgumentParser) -> None:
    calibrate.add_argument("--no-save", action="store_true", help="only print the numbers")


#: Each command: its help in ``hloscope --help``, and what adds its arguments to its subparser.
_COMMANDS: dict[str, tuple[str, Callable[[argparse.ArgumentParser], None]]] = {
    "report": ("cost and score every HLO op of a trace or an HLO file", _report_arguments),
    "memory": ("will it fit? per-device memory of each HLO module: arguments, outputs, temporaries at the peak, "
               "against the chip's HBM", _memory_arguments),
    "diff": ("compare two programs or runs op by op (B against A)", _diff_arguments),
    "chips": ("list the known chips", _chips_arguments),
    "calibrate": ("measure this host's matmul FLOP/s and memory bandwidth", _calibrate_arguments),
}


def console_main() -> int:
    """The ``hloscope`` command and ``python -m hloscope``: ``main`` on ``sys.argv``, then the collector frozen
    for the interpreter's exit (``hloscope._gc.frozen_at_exit``: its last full collection walked every object of
    the analysis, 0.17 s of a 1.5 s report). Tests call ``main``, which leaves the collector alone.

    JAX, where a command needs it at all (``calibrate``, and the host measured on the fly for a CPU trace or
    ``--chip host``), runs on the CPU only unless ``JAX_PLATFORMS`` says otherwise: no command drives an
    accelerator, and starting one's runtime costs seconds -- and, with libtpu installed on a machine without a
    TPU, prints libtpu's warnings about TPU worker hostnames into a report.

    OpenBLAS, which numpy loads, runs one thread (``OPENBLAS_NUM_THREADS=1`` unless set): no command does linear
    algebra in numpy (``calibrate`` measures JAX's own matmul), and each thread of OpenBLAS's pool (one a core)
    spins 2**28 TSC cycles, ~0.1 s, after numpy's import before it sleeps (``THREAD_TIMEOUT`` of OpenBLAS's
    ``driver/others/blas_server.c``; OpenBLAS issue #5171), on the core ``report``'s forked child works on
    (``hloscope/memory/forked.py``): 20-40 ms of a report of the corpus's llama or gemma3 on two cores
    (benchmarks/README.md, stop 44).

    When the reader of stdout goes away (``hloscope report ... | head``), the command stops quietly with status
    141, as a process ended by SIGPIPE does, instead of a ``BrokenPipeError`` traceback."""
    from hloscope._gc import frozen_at_exit

    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # (before numpy's import: read when OpenBLAS loads)
    try:
        rc = main(one_shot=True)
        sys.stdout.flush()  # (a reader gone is found here at the latest, not in the interpreter's exit)
    except BrokenPipeError:
        # stdout pointed at the null device, so that the interpreter's own flush at exit finds nothing to fail
        # on (the recipe of Python's signal module documentation, "Note on SIGPIPE").
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_BROKEN_PIPE
    except SystemExit as e:  # rich's terminal output follows the same recipe, then exits with 1
        if isinstance(e.__context__, BrokenPipeError):
            return EXIT_BROKEN_PIPE
        raise
    frozen_at_exit()
    return rc


def main(argv: list[str] | None = None, *, one_shot: bool = False) -> int:
    """Run the command ``argv`` (default ``sys.argv[1:]``); returns its exit status. ``one_shot``: the process ends
    after it (``console_main``), so ``report`` freezes the collector once its analysis is made
    (``_gc.frozen_at_exit``): the memory model and the output then allocate beside an analysis the collector no
    longer walks (its full collections over it took ~0.08 s of a report of the corpus's gemma2 or llama)."""
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser(argv[0] if argv else None).parse_args(argv)
    try:
        if args.command == "report":
            return _report(args, one_shot)
        if args.command == "chips":
            return _chips(args)
        if args.command == "diff":
            return _diff(args)
        if args.command == "memory":
            return _memory(args)
        return _calibrate(args)
    except (FileNotFoundError, OutputError) as e:  # (a path to read that is missing, or -o that cannot be written)
        print(f"hloscope: {e}", file=sys.stderr)
        return EXIT_PATH
    except ValueError as e:  # every HloscopeError (a ValueError: bad input), and stray ValueErrors of libraries
        from hloscope.analysis import ModuleChoiceError

        # The Python API's message names module=; on the command line, name the flag.
        text = e.message("--module") if isinstance(e, ModuleChoiceError) else _one_line(e)
        print(f"hloscope: {text}", file=sys.stderr)
        return EXIT_INPUT
    except KeyboardInterrupt:  # pragma: no cover
        return EXIT_INTERNAL


def _one_line(err: BaseException) -> str:
    """The error's message as one line: the first line, plus the location excerpt of an ``HloParseError``
    folded in (``path:line:col: msg``) -- stderr gets one line per error."""
    text = str(err)
    return text.splitlines()[0] if text else type(err).__name__


def _report(args: argparse.Namespace, one_shot: bool = False) -> int:
    from hloscope.analysis import analyze, is_hlo_text_file

    _require_path(args.path)
    _require_output(args.output)
    child = None
    if one_shot and args.format == "json" and is_hlo_text_file(args.path):
        from hloscope._gc import frozen_at_exit

        # (the process ends after the report: what it holds now, the imports, is frozen before the fork, so the
        # collections of both processes never walk it again; paused_gc blocks then freeze what they make. The
        # child of gemma4's report: 755 -> 743 M instructions)
        frozen_at_exit()
        child = _footprints_in_child(args.path, args.chip)  # (the JSON holds the memory footprint: other core)
    try:
        report = _with_status(args.path, lambda: analyze(args.path, chip=args.chip, run=args.run, hlo=args.hlo,
                                                         module=args.module, workers=args.workers,
                                                         scheduler=args.scheduler, progress=True))
    except BaseException:
        if child is not None:
            child.cancel()
        raise

    def take_child_footprints() -> None:
        footprints = child.result()
        if footprints is not None:
            report._use_memory(footprints)

    if one_shot:
        from hloscope._gc import frozen_at_exit

        frozen_at_exit()  # (the analysis lives to the end of the process: see main)
    if args.format == "json":  # (the ops printed while the child ends its footprints: Report._json_pieces)
        try:
            pieces = report._json_pieces(take_child_footprints if child is not None else None)
        finally:
            if child is not None:
                child.cancel()  # (collected by then, unless printing failed first)
        _emit(pieces + ["\n"], args.output)  # (not joined: a copy of tens of MB)
    elif args.format == "csv":
        _emit(report.to_csv(), args.output)
    elif args.format == "html":
        from hloscope.report.html import render_html

        _emit(render_html(report, title=f"hloscope - {args.path}", top=None), args.output)
    else:
        from hloscope.report.terminal import render

        if args.output:
            from io import StringIO

            buf = StringIO()
            render(report, args.top, file=buf, width=200, advice=args.advice)
            _emit(buf.getvalue(), args.output)
        else:
            render(report, args.top, advice=args.advice)
    return EXIT_OK


def _write_pieces(stream, pieces: list[str | bytes]) -> None:  # noqa: ANN001 - a text stream
    """Write each piece to the text ``stream``; bytes (ASCII) to its binary buffer where it has one and newlines
    are not translated (not encoded again: the bytes of a large report's table are tens of MB)."""
    buffer = getattr(stream, "buffer", None) if os.linesep == "\n" else None
    for piece in pieces:
        if type(piece) is str:
            stream.write(piece)
        elif buffer is not None:
            stream.flush()
            buffer.write(piece)
        else:
            stream.write(piece.decode("ascii"))


def _footprints_in_child(path: str, chip: str | None):  # noqa: ANN202 - a FootprintsInChild or None
    """``hloscope.memory.forked.start_footprints`` on the chip ``analyze`` will score against; None when the chip
    does not resolve (``analyze`` then reports it, after anything wrong with the file, as without a child)."""
    from hloscope.analysis import _resolve_chip
    from hloscope.errors import HloscopeError
    from hloscope.memory.forked import start_footprints

    try:
        spec = _resolve_chip(chip, None)
    except HloscopeError:
        return None
    return start_footprints(path, spec)


def _memory(args: argparse.Namespace) -> int:
    import json

    _require_path(args.path)
    _require_output(args.output)
    footprints, chip_id = _with_status(args.path, lambda: _footprints(args))
    if not footprints:
        raise ValueError(f"{args.path}: no HLO module to walk (a Chrome trace holds HLO lines, not a schedule)")
    if args.format == "json":
        doc = {"schema": "hloscope.memory/1", "chip": chip_id, "modules": [fp.to_dict() for fp in footprints]}
        _emit(json.dumps(doc, indent=1, allow_nan=False) + "\n", args.output)
    else:
        from hloscope.report.memory import render_memory

        if args.output:
            from io import StringIO

            buf = StringIO()
            render_memory(footprints, chip_id, file=buf, width=200)
            _emit(buf.getvalue(), args.output)
        else:
            render_memory(footprints, chip_id)
    if args.fail_if_not_fits and any(fp.fits is False for fp in footprints):
        for fp in footprints:
            if fp.fits is False:
                print(f"hloscope: does not fit: {fp.module}: {fp.verdict}", file=sys.stderr)
        return EXIT_INTERNAL
    return EXIT_OK


def _footprints(args: argparse.Namespace) -> tuple[list, str]:
    """The memory footprints ``hloscope memory`` prints, and the id of the chip they were judged against. An
    HLO text file or a dump dir is parsed and walked, not costed (``Report.memory`` of ``analyze`` is the same
    list: ``footprint`` per parsed module); a profile is analyzed, for the modules and chip its trace names."""
    from hloscope.analysis import _resolve_chip, analyze, hlo_modules_of

    modules = hlo_modules_of(args.path, args.module)
    if modules is None:
        report = analyze(args.path, chip=args.chip, run=args.run, module=args.module)
        return report.memory, report.chip.id
    from hloscope.memory import footprint

    spec = _resolve_chip(args.chip, None)
    return [footprint(m, spec) for m in modules], spec.id


def _diff(args: argparse.Namespace) -> int:
    from hloscope import diff
    from hloscope.compare.rules import parse_rules
    from hloscope.report.diff import diff_command_output, render_diff_table

    for path in (args.a, args.b):
        _require_path(path)
    _require_output(args.output)
    rules = parse_rules(args.fail_on)  # bad rules fail before any analysis
    result = diff(args.a, args.b, chip=args.chip, rules=rules)
    if args.format == "table" and not args.output:
        render_diff_table(result, top=args.top)  # straight to the terminal, at its width
    else:
        _emit(diff_command_output(result, args.format, top=args.top), args.output)
    broken = result.verdict.lines()
    for line in broken:
        print(f"hloscope: fail-on: {line}", file=sys.stderr)
    return EXIT_INTERNAL if broken else EXIT_OK


def _require_path(path: str) -> None:
    """Exit 3 before any work when ``path`` names nothing (a ``MissingPathError``: the message shows the path's
    control characters escaped, so a name holding a newline or an escape sequence prints as one inert line)."""
    if not os.path.lexists(path):
        from hloscope.errors import MissingPathError

        raise MissingPathError(path, "no such file or directory")


class OutputError(Exception):
    """The ``-o`` file cannot be written (exit 3); the message names it and says why."""


def _require_output(output: str | None) -> None:
    """Exit 3 before any work when ``-o`` names a directory, or a file in a directory that does not exist (a long
    analysis would otherwise end in an error). Whether the directory may be written is learnt when writing."""
    if output is None:
        return
    from hloscope.errors import escaped

    target = Path(output)
    if target.is_dir():
        raise OutputError(escaped(f"cannot write {output}: it is a directory; -o takes a file name"))
    if not target.parent.is_dir():
        raise OutputError(escaped(f"cannot write {output}: no such directory {target.parent}"))


def _with_status(path: str, work):
    """Run ``work()``, showing a live status line on a terminal while a large input (> 16 MB) is read."""
    size = sum(f.stat().st_size for f in Path(path).rglob("*") if f.is_file()) if Path(path).is_dir() \
        else Path(path).stat().st_size
    if size < 16 * 2**20 or not sys.stderr.isatty():
        return work()
    from rich.console import Console

    with Console(stderr=True).status(f"reading {path} ({size / 2**20:.0f} MiB)..."):
        return work()


def _chips(args: argparse.Namespace) -> int:
    import json

    from hloscope.roofline.chips import all_chips, chip_to_dict

    chips = all_chips()
    if args.format == "json":
        print(json.dumps([chip_to_dict(c) for c in chips.values()], indent=1))
        return EXIT_OK
    from hloscope.report.terminal import render_chips

    render_chips(list(chips.values()))
    return EXIT_OK


def _calibrate(args: argparse.Namespace) -> int:
    from hloscope.roofline.calibrate import calibrate_host, save_host_chip

    chip = calibrate_host()
    for dtype, value in chip.peak_flops_per_s.items():
        print(f"matmul {dtype}: {value / 1e9:.1f} GFLOP/s")
    print(f"memory bandwidth: {chip.hbm_bytes_per_s / 1e9:.1f} GB/s")
    if not args.no_save:
        print(f"saved as chip 'host' in {save_host_chip(chip)}")
    return EXIT_OK


def _emit(text: str | list[str | bytes], output: str | None) -> None:
    """Write ``text`` (or its pieces, one after the other: str, or ASCII bytes) to stdout, or to ``output``
    (``hloscope._atomic.write_file``: an existing report is never left half-written; ``/dev/null``, a pipe or
    another device is written to, never replaced)."""
    from hloscope._atomic import write_file

    pieces = text if isinstance(text, list) else [text]
    if output is None:
        _write_pieces(sys.stdout, pieces)
        return
    try:
        write_file(output, lambda stream: _write_pieces(stream, pieces))
    except OSError as e:  # (a directory that may not be written, a full disk: named, no traceback)
        from hloscope.errors import escaped

        where = f" ({e.filename})" if e.filename and os.fspath(e.filename) != output else ""
        raise OutputError(escaped(f"cannot write {output}: {e.strerror or e}{where}")) from None
