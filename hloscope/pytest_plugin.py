"""pytest plugin: roofline assertions and per-test roofline baselines for jitted JAX functions.

A test asks for the ``hloscope`` fixture, analyzes a function on example arguments, asserts on the result and
checks it against a stored baseline (docs/pytest_plugin.md)::

    def test_train_step(hloscope):
        report = hloscope.analyze(jax.jit(step), params, batch)   # arrays or jax.ShapeDtypeStruct
        report.assert_bound("dot", "compute")
        hloscope.check_baseline(report)

Run ``pytest --hloscope-chip tpu-v5e`` (or set ``hloscope_chip`` in the ini file); ``--hloscope-update``
records baselines under ``hloscope_baseline_dir`` (default ``.hloscope/``), one JSON file per test.

Settings are resolved per test in one place (``_Settings.resolve``): marker ``@pytest.mark.hloscope(...)``, then
the command line, then the ini file, then the default. Importing this module is cheap (no JAX, no pandas): it
is loaded by every pytest run once hloscope is installed.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import math
import os
import re
import time
from dataclasses import dataclass
from gettext import ngettext
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable

import pytest

from hloscope import baseline as _bl

if TYPE_CHECKING:
    import pandas as pd

    from hloscope.result import Report
    from hloscope.roofline.chips import ChipSpec

__all__ = ["Analysis", "HloscopeFixture", "HloscopeConfigError"]

BOUNDS = ("compute", "memory", "communication")
TARGETS = ("backend", "deviceless")
COLLECTIVE_KINDS = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "ragged-all-to-all",
                    "collective-permute", "collective-broadcast")
_PROPERTY = "hloscope"  # user_properties key of a baseline check (travels from xdist workers)
_TIMING = "hloscope-timing"  # user_properties key of one analysis's timings


class HloscopeConfigError(ValueError):
    """A bad hloscope setting (chip, tolerance, target, marker argument); the message says where it came from."""


# --------------------------------------------------------------------------------------------------
# Options: defined once for the command line and the ini file
# --------------------------------------------------------------------------------------------------


def _parse_chip(value: str, where: str) -> str:
    __tracebackhide__ = True
    from hloscope.roofline.chips import UnknownChipError, all_chips, get_chip

    try:
        return get_chip(str(value).strip(), extra=all_chips()).id
    except UnknownChipError as err:
        raise HloscopeConfigError(f"invalid chip {value!r} from {where}: {err}") from None


def _parse_fraction(value: str, where: str) -> float:
    __tracebackhide__ = True
    try:
        return _bl.parse_fraction(value, where)
    except ValueError as err:
        raise HloscopeConfigError(str(err)) from None


def _parse_target(value: str, where: str) -> str:
    __tracebackhide__ = True
    v = str(value).strip()
    if v not in TARGETS:
        raise HloscopeConfigError(f"invalid target {value!r} from {where}: expected one of {', '.join(TARGETS)}")
    return v


def _parse_text(value: str, where: str) -> str:
    __tracebackhide__ = True
    v = str(value).strip()
    if not v:
        raise HloscopeConfigError(f"empty value from {where}")
    return v


@dataclass(frozen=True)
class _Option:
    """One setting: ``--hloscope-<flag>`` on the command line, ``hloscope_<name>`` in the ini file and, when
    ``marker``, a keyword of ``@pytest.mark.hloscope``."""

    name: str
    metavar: str
    parse: Callable[[str, str], Any]
    default: Any
    help: str
    marker: bool = True

    @property
    def flag(self) -> str:
        return "--hloscope-" + self.name.replace("_", "-")

    @property
    def ini(self) -> str:
        return "hloscope_" + self.name

    @property
    def dest(self) -> str:
        return "hloscope_" + self.name


OPTIONS: tuple[_Option, ...] = (
    _Option("chip", "CHIP", _parse_chip, None,
            "chip to score against: an id or alias from `hloscope chips` (tpu-v5e, h100, ...)."),
    _Option("tolerance", "FRACTION", _parse_fraction, _bl.DEFAULT_TOLERANCE,
            "relative change tolerated before a baseline check fails (0.05 or 5%%)."),
    _Option("baseline_dir", "DIR", _parse_text, ".hloscope",
            "directory of the baseline JSON files, relative to the ini file's directory (else the rootdir).",
            marker=False),
    _Option("target", "{backend,deviceless}", _parse_target, "backend",
            "what `hloscope.analyze(fn, *args)` compiles for: the current JAX backend, or a deviceless TPU "
            "compile for the chip's TPU generation (needs libtpu; no TPU needed)."),
    _Option("topology", "TOPOLOGY", _parse_text, None,
            "TPU topology of a deviceless compile, e.g. v5e:2x4 (default: the smallest one with enough devices "
            "for the arguments' shardings)."),
    _Option("significant", "FRACTION", _parse_fraction, _bl.DEFAULT_SIGNIFICANT,
            "share of the total roofline time from which an op is stored in the baseline and compared on its "
            "own (collectives always are)."),
)
_BY_NAME = {o.name: o for o in OPTIONS}
MARKER_KWARGS = frozenset(o.name for o in OPTIONS if o.marker)


def _argparse_type(option: _Option) -> Callable[[str], Any]:
    def parse(value: str) -> Any:
        try:
            return option.parse(value, f"{option.flag}")
        except HloscopeConfigError as err:
            raise argparse.ArgumentTypeError(str(err)) from None

    parse.__name__ = option.name  # argparse names the type in its own messages
    return parse


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("hloscope", "roofline baselines of jitted functions (hloscope)")
    for o in OPTIONS:
        default = "" if o.default is None else o.default
        group.addoption(o.flag, dest=o.dest, metavar=o.metavar, type=_argparse_type(o), default=None,
                        help=o.help + f" Default: {default!r}. Ini: {o.ini}.")
        parser.addini(o.ini, o.help.replace("%%", "%") + f" Default: {default!r}.", type="string", default="")
    group.addoption("--hloscope-update", dest="hloscope_update", action="store_true", default=False,
                    help="write or refresh the baseline of every test that calls hloscope.check_baseline(); "
                         "such tests pass. Review the changed files like code.")


@dataclass
class _Settings:
    """The session's command-line and ini values, parsed and validated once, in ``pytest_configure``."""

    cli: dict[str, Any]
    ini: dict[str, Any]
    update: bool
    rootpath: Path
    inipath: Path | None

    def resolve(self, name: str, item: pytest.Item | None = None) -> tuple[Any, str]:
        """(value, where it came from): marker, command line, ini file, default -- in that order."""
        __tracebackhide__ = True
        option = _BY_NAME[name]
        if item is not None:
            marker = item.get_closest_marker("hloscope")
            if marker is not None and name in marker.kwargs and marker.kwargs[name] is not None:
                where = f"@pytest.mark.hloscope({name}=...) on {item.nodeid}"
                return option.parse(marker.kwargs[name], where), where
        if self.cli.get(name) is not None:
            return self.cli[name], option.flag
        if self.ini.get(name) is not None:
            return self.ini[name], f"ini option {option.ini}"
        return option.default, "default"

    def baseline_dir(self) -> Path:
        d = Path(self.resolve("baseline_dir")[0])
        base = self.inipath.parent if self.inipath else self.rootpath
        return d if d.is_absolute() else base / d


@dataclass
class _Result:
    """One baseline check, as recorded in the test report (so it reaches the xdist controller)."""

    nodeid: str
    status: str  # ok, improved, regressed, missing, created, updated, unchanged, incompatible, corrupted
    chip: str = ""
    roofline_s: float = math.nan
    change: float | None = None
    regressions: int = 0
    improvements: int = 0
    path: str = ""
    name: str = ""


@dataclass
class _SessionState:
    settings: _Settings
    results: list[_Result]
    compile_s: float = 0.0
    analysis_s: float = 0.0
    import_s: float = 0.0
    analyses: int = 0


_STATE = pytest.StashKey[_SessionState]()
# The deviceless TPU topology made for each (chip id, topology setting): one each, the largest asked for.
_TOPOLOGIES: dict[tuple[str, str | None], Any] = {}


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "hloscope(chip=None, tolerance=None, target=None, topology=None, significant=None): per-test hloscope "
        "settings (see docs/pytest_plugin.md); they override --hloscope-* options and hloscope_* ini values.")
    cli: dict[str, Any] = {}
    ini: dict[str, Any] = {}
    for o in OPTIONS:
        cli[o.name] = config.getoption(o.dest, None)
        raw = config.getini(o.ini)
        if raw not in ("", None):
            where = f"ini option {o.ini}" + (f" in {config.inipath}" if config.inipath else "")
            try:
                ini[o.name] = o.parse(raw, where)
            except HloscopeConfigError as err:
                raise pytest.UsageError(str(err)) from None
    settings = _Settings(cli, ini, bool(config.getoption("hloscope_update", False)), config.rootpath,
                         config.inipath)
    state = config.stash[_STATE] = _SessionState(settings, [])
    config.pluginmanager.register(_Collector(state), "hloscope-collector")


def pytest_report_header(config: pytest.Config) -> list[str] | None:
    state = config.stash.get(_STATE, None)
    if state is None:
        return None
    s = state.settings
    chip = s.resolve("chip")[0]
    if chip is None and not s.update:
        return None
    return [f"hloscope: chip {chip or '(per test)'}, target {s.resolve('target')[0]}, tolerance "
            f"{s.resolve('tolerance')[0]:.0%}, baselines {_rel(s.baseline_dir(), config.rootpath)}/"
            + (" (updating)" if s.update else "")]


def pytest_runtest_setup(item: pytest.Item) -> None:
    __tracebackhide__ = True
    marker = item.get_closest_marker("hloscope")
    if marker is None:
        return
    if marker.args:
        raise HloscopeConfigError(f"@pytest.mark.hloscope takes keyword arguments only "
                                  f"({', '.join(sorted(MARKER_KWARGS))}); got positional {marker.args!r} on "
                                  f"{item.nodeid}")
    for key in marker.kwargs:
        if key not in MARKER_KWARGS:
            raise HloscopeConfigError(f"unknown argument {key!r} of @pytest.mark.hloscope on {item.nodeid}: expected "
                                      f"one of {', '.join(sorted(MARKER_KWARGS))}")
    state = item.config.stash.get(_STATE, None)
    if state is not None:
        for key in marker.kwargs:
            state.settings.resolve(key, item)  # raises HloscopeConfigError naming the marker


class _Collector:
    """Gathers the hloscope records of test reports -- local ones and, under xdist, the workers' (each
    report carries its ``user_properties``) -- into the session state."""

    def __init__(self, state: _SessionState) -> None:
        self.state = state

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when != "call":
            return
        for key, value in report.user_properties:
            if key == _PROPERTY:
                self.state.results.append(_Result(**json.loads(value)))
            elif key == _TIMING:
                data = json.loads(value)
                self.state.compile_s += data["compile_s"]
                self.state.analysis_s += data["analysis_s"]
                self.state.import_s += data.get("import_s", 0.0)
                self.state.analyses += 1


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    state = config.stash.get(_STATE, None)
    if state is None or (not state.results and not state.analyses):
        return
    if os.environ.get("PYTEST_XDIST_WORKER"):
        return
    lines = _summary_lines(state, config)
    if not lines:
        return
    terminalreporter.write_sep("-", "hloscope")
    for line, markup in lines:
        terminalreporter.write_line(line, **markup)


_STATUS_TEXT = {
    "ok": "ok", "improved": "improved", "regressed": "REGRESSED", "missing": "no baseline",
    "created": "baseline created", "updated": "baseline updated", "unchanged": "baseline unchanged",
    "incompatible": "baseline not comparable", "corrupted": "baseline corrupted",
}


def _summary_lines(state: _SessionState, config: pytest.Config) -> list[tuple[str, dict[str, bool]]]:
    out: list[tuple[str, dict[str, bool]]] = []
    results = sorted(state.results, key=lambda r: (r.nodeid, r.name))
    if results:
        rows = []
        for r in results:
            test = r.nodeid + (f" [{r.name}]" if r.name else "")
            change = "" if r.change is None or r.change != r.change else (
                f"{0.0 if abs(r.change) < 5e-4 else r.change:+.1%}")
            status = _STATUS_TEXT.get(r.status, r.status)
            if r.status == "regressed":
                status += f" ({r.regressions})"
            elif r.status == "improved":
                status += f" ({r.improvements})"
            rows.append((test, r.chip, _bl.format_quantity(r.roofline_s, "s"), change, status, r.status))
        widths = [max(len(row[i]) for row in rows) for i in range(4)]
        for row in rows:
            markup = {"red": True} if row[5] in ("regressed", "missing", "incompatible", "corrupted") else (
                {"green": True} if row[5] in ("improved", "created", "updated") else {})
            cells = [row[0].ljust(widths[0]), row[1].ljust(widths[1]), row[2].rjust(widths[2])]
            if widths[3]:
                cells.append(row[3].rjust(widths[3]))
            out.append(("  ".join(cells + [row[4]]), markup))
        counts: dict[str, int] = {}
        for r in results:
            counts[r.status] = counts.get(r.status, 0) + 1
        bad = counts.get("regressed", 0)
        good = counts.get("improved", 0)
        missing = counts.get("missing", 0)
        written = counts.get("created", 0) + counts.get("updated", 0)
        parts = []
        if bad:
            parts.append(ngettext("%d test regressed", "%d tests regressed", bad) % bad)
        if good:
            parts.append(ngettext("%d test improved", "%d tests improved", good) % good)
        if missing:
            parts.append(ngettext("%d baseline missing", "%d baselines missing", missing) % missing)
        if written:
            parts.append(ngettext("%d baseline written", "%d baselines written", written) % written)
        if parts:
            msg = ", ".join(parts) + "."
            if bad or good or missing:
                msg += (" Re-run pytest with --hloscope-update to record the new numbers, then review the diff of "
                        f"{_rel(state.settings.baseline_dir(), config.rootpath)}/.")
            out.append((msg, {"bold": True}))
    if state.analyses:
        n = state.analyses
        text = f"{ngettext('%d analysis', '%d analyses', n) % n}: hloscope {state.analysis_s:.2f} s"
        if state.import_s > 0:
            text += f" (+{state.import_s:.2f} s importing pandas and the cost model, once per process)"
        if state.compile_s > 0:
            text += f", JAX lower+compile {state.compile_s:.2f} s"
        out.append((text, {}))
    return out


def _rel(path: Path, root: Path) -> str:
    try:
        return str(path.relative_to(root))
    except ValueError:
        return str(path)


# --------------------------------------------------------------------------------------------------
# The fixture
# --------------------------------------------------------------------------------------------------


@pytest.fixture
def hloscope(request: pytest.FixtureRequest) -> HloscopeFixture:
    """Analyze jitted functions and check them against stored roofline baselines; see ``HloscopeFixture``."""
    return HloscopeFixture(request)


class HloscopeFixture:
    """What the ``hloscope`` fixture gives a test.

    >>> def test_step(hloscope):                                    # doctest: +SKIP
    ...     report = hloscope.analyze(jax.jit(step), params, batch)
    ...     report.assert_no_collective("all-gather")
    ...     hloscope.check_baseline(report)
    """

    def __init__(self, request: pytest.FixtureRequest) -> None:
        self._request = request
        self._item = request.node
        state = request.config.stash.get(_STATE, None)
        if state is None:  # pragma: no cover - the plugin's own configure hook always runs first
            raise RuntimeError("hloscope plugin not configured")
        self._state = state
        self._checked: set[Path] = set()

    # ---- settings ------------------------------------------------------------------------------

    def setting(self, name: str) -> Any:
        """The value of a setting for this test (marker, command line, ini file or default)."""
        return self._state.settings.resolve(name, self._item)[0]

    @property
    def chip(self) -> ChipSpec:
        """The chip of this test (marker ``chip=``, ``--hloscope-chip``, ini ``hloscope_chip``).

        Raises:
            HloscopeConfigError: none is set.
        """
        return self._chip(None)

    def _chip(self, chip: str | ChipSpec | None) -> ChipSpec:
        from hloscope.roofline.chips import ChipSpec, all_chips, get_chip

        if isinstance(chip, ChipSpec):
            return chip
        if chip is None:
            chip = self.setting("chip")
        if chip is None:
            raise HloscopeConfigError(
                "no chip for hloscope: run pytest --hloscope-chip ID, set hloscope_chip = ID in the ini file, "
                "or mark the test @pytest.mark.hloscope(chip=ID) (ids: `hloscope chips`)")
        return get_chip(chip, extra=all_chips())

    @property
    def update(self) -> bool:
        """True when pytest runs with ``--hloscope-update``."""
        return self._state.settings.update

    @property
    def target(self) -> str:
        """``backend`` or ``deviceless`` (see ``--hloscope-target``)."""
        return self.setting("target")

    def devices(self, n: int | None = None) -> list[Any]:
        """The devices ``analyze(fn, ...)`` compiles for: ``jax.devices()``, or those of a deviceless TPU topology
        with at least ``n`` devices (default: as many as ``jax.devices()``). Build meshes that a function
        closes over (``shard_map``, ``with_sharding_constraint``) from these, or use ``make_mesh``."""
        import jax

        if self.target != "deviceless":
            return list(jax.devices())
        return list(self._topology(n or jax.device_count()).devices)

    def make_mesh(self, axis_shapes: Iterable[int], axis_names: Iterable[str], **kwargs: Any) -> Any:
        """A ``jax.sharding.Mesh`` of ``axis_shapes`` over ``devices()`` (of the deviceless topology if that is the
        target); ``kwargs`` go to ``Mesh`` (e.g. ``axis_types``)."""
        import numpy as np
        from jax.sharding import Mesh

        shape = tuple(int(s) for s in axis_shapes)
        n = math.prod(shape)
        devs = self.devices(n)
        if len(devs) < n:
            raise HloscopeConfigError(f"mesh {shape} needs {n} devices; the target has {len(devs)}")
        return Mesh(np.array(devs[:n], dtype=object).reshape(shape), tuple(axis_names), **kwargs)

    # ---- analysis --------------------------------------------------------------------------------

    def analyze(self, source: Any, *args: Any, chip: str | ChipSpec | None = None, **kwargs: Any) -> Analysis:
        """Compile (when needed) and analyze a program for this test's chip.

        Args:
            source: a function (jitted or not; called as ``fn(*args, **kwargs)`` to lower it), a ``jax.stages.
                Lowered`` or ``Compiled``, HLO text, a path to an HLO text file or XLA dump directory, or a
                profile directory (see ``hloscope.analyze``).
            *args, **kwargs: example arguments of a function: arrays or ``jax.ShapeDtypeStruct`` (with
                shardings for a sharded program); anything ``jit(fn).lower`` accepts. The keyword ``chip`` is
                this method's own (use ``functools.partial`` for a function with a ``chip`` parameter).
            chip: chip id or ``ChipSpec``, overriding the test's setting.

        Returns:
            An ``Analysis``: the ``Report`` (``.ops``, ``.modules``) with assertion methods.

        Raises:
            HloscopeConfigError: no chip, or a deviceless compile that cannot be done (names the fix).
        """
        __tracebackhide__ = True
        spec = self._chip(chip)
        import_s = _import_analysis()
        compiled = None
        compile_s = 0.0
        compiled_for: dict[str, Any] = {}
        if isinstance(source, (str, os.PathLike)):
            if args or kwargs:
                raise TypeError("hloscope.analyze(text_or_path) takes no example arguments")
            t0 = time.perf_counter()
            analysis = _analyze_static_or_trace(source, spec)
        else:
            if _is_lowered(source):
                if args or kwargs:
                    raise TypeError("hloscope.analyze(lowered) takes no example arguments")
                t0 = time.perf_counter()
                compiled = source.compile()
                compile_s = time.perf_counter() - t0
            elif _is_compiled(source):
                if args or kwargs:
                    raise TypeError("hloscope.analyze(compiled) takes no example arguments")
                compiled = source
            elif callable(source):
                compiled, compile_s = self._compile(source, args, kwargs, spec)
            else:
                raise TypeError(f"hloscope.analyze cannot analyze a {type(source).__name__}: pass a function with "
                                "example arguments, a Lowered, a Compiled, HLO text or a path")
            t0 = time.perf_counter()
            compiled_for = _compiled_for(compiled)
            analysis = _analyze_text(compiled.as_text(), spec)
        analysis.compiled_for = compiled_for
        analysis.compile_s = compile_s
        analysis.analysis_s = time.perf_counter() - t0
        self._item.user_properties.append(
            (_TIMING, json.dumps({"compile_s": compile_s, "analysis_s": analysis.analysis_s, "import_s": import_s})))
        return analysis

    def _compile(self, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any],
                 spec: ChipSpec) -> tuple[Any, float]:
        __tracebackhide__ = True
        import jax

        deviceless = self.target == "deviceless"
        if deviceless:
            if spec.kind != "tpu":
                raise HloscopeConfigError(f"target 'deviceless' compiles for a TPU, but the chip is {spec.id} "
                                          f"({spec.kind}): use a TPU chip or --hloscope-target backend")
            n = _devices_needed((args, kwargs))
            if n:  # some argument is not on TPU devices yet (those from make_mesh are)
                args, kwargs = _retarget((args, kwargs), list(self._topology(n, spec).devices))
        jitted = fn if hasattr(fn, "lower") else jax.jit(fn)
        t0 = time.perf_counter()
        try:
            compiled = jitted.lower(*args, **kwargs).compile()
        except Exception as err:
            if not deviceless:
                raise
            raise HloscopeConfigError(
                f"deviceless TPU compile for {spec.id} failed: {type(err).__name__}: {err}\n(hloscope moved the "
                "arguments' shardings onto the TPU topology; if the function names meshes or devices itself -- "
                "in_shardings=, with_sharding_constraint, shard_map -- build them with hloscope.make_mesh(...))"
            ) from err
        return compiled, time.perf_counter() - t0

    def _topology(self, n: int, spec: ChipSpec | None = None) -> Any:
        """A deviceless topology of the chip's generation with at least ``n`` devices: one already made in this
        process when one fits (so that meshes from ``make_mesh`` and moved arguments share devices)."""
        spec = spec or self.chip
        name = self.setting("topology")
        for (chip_id, topo_name), topo in _TOPOLOGIES.items():
            if chip_id == spec.id and topo_name == name and len(topo.devices) >= n:
                return topo
        _TOPOLOGIES[(spec.id, name)] = topo = _deviceless_topology(spec, name, n)
        return topo

    # ---- baselines -------------------------------------------------------------------------------

    def baseline_path(self, name: str | None = None) -> Path:
        """The baseline file of this test (``name`` for a second baseline in the same test)."""
        return _bl.baseline_path(self._state.settings.baseline_dir(), self._item.nodeid, name)

    def check_baseline(self, report: Analysis | Report, *, name: str | None = None,
                       tolerance: float | str | None = None) -> _bl.Comparison | None:
        """Compare ``report`` with this test's stored baseline; fail on a regression.

        Fails when a total (roofline time, FLOPs, HBM bytes, wire bytes) or a significant op's roofline time grew
        more than the tolerance, an op's bound class got worse (compute -> memory -> communication), or a
        collective appeared (see ``hloscope.baseline``). Improvements pass and are listed in the summary.
        With ``--hloscope-update`` the baseline is written (atomically) instead, and the check passes.

        Args:
            report: what ``analyze`` returned (a plain ``hloscope.Report`` works too; its ops are then matched
                without shapes).
            name: for a test with several baselines: a suffix of the file name.
            tolerance: relative tolerance (``0.1`` or ``"10%"``), overriding marker, option and ini.

        Returns:
            The ``Comparison`` (None when updating or the baseline was missing).

        Raises:
            AssertionError: a regression (with a table of what regressed), no baseline, or a baseline recorded
                for another chip or platform.
            hloscope.baseline.BaselineError: the baseline file is corrupted (it is never overwritten).
        """
        __tracebackhide__ = True
        analysis = report if isinstance(report, Analysis) else Analysis(report)
        settings = self._state.settings
        if tolerance is not None:
            tol = _parse_fraction(tolerance, "check_baseline(tolerance=...)")
        else:
            tol = settings.resolve("tolerance", self._item)[0]
        significant = settings.resolve("significant", self._item)[0]
        path = self.baseline_path(name)
        if path in self._checked:
            raise ValueError(f"check_baseline called twice for {path}: pass name=... to keep several baselines "
                             "in one test")
        self._checked.add(path)
        shown = _rel(path, settings.rootpath)
        full = analysis.summary(0.0, test=self._item.nodeid)  # every op: a stored op is found even if it shrank
        current = _bl.trim(full, significant)  # what the file holds
        result = _Result(self._item.nodeid, "ok", current.chip, current.roofline_s, path=shown, name=name or "")
        try:
            stored = _bl.read_baseline(path)
        except _bl.BaselineError:
            result.status = "corrupted"
            self._record(result)
            raise
        rerun = f"pytest --hloscope-update {_quote(self._item.nodeid)}"
        if settings.update:
            if stored is not None and stored.chip == current.chip:
                result.change = _bl.compare(stored, full, tol).roofline_change
            written = _bl.write_baseline(path, current)
            result.status = ("updated" if stored is not None else "created") if written else "unchanged"
            self._record(result)
            return None
        if stored is None:
            result.status = "missing"
            self._record(result)
            raise AssertionError(f"no hloscope baseline for this test at {shown}\nRecord it with:  {rerun}\nthen "
                                 f"review and commit {shown}.")
        problem = _incompatible(stored, full)
        if problem:
            result.status = "incompatible"
            self._record(result)
            raise AssertionError(f"hloscope baseline {shown} {problem}; re-record it with:  {rerun}")
        cmp = _bl.compare(stored, full, tol)
        result.change = cmp.roofline_change
        result.regressions = len(cmp.regressions)
        result.improvements = len(cmp.improvements)
        result.status = "regressed" if cmp.failed else ("improved" if cmp.improvements else "ok")
        self._record(result)
        if cmp.failed:
            raise AssertionError(cmp.format(shown) + f"\nIf this is intended, accept the new numbers:  {rerun}")
        return cmp

    def _record(self, result: _Result) -> None:
        data = {k: getattr(result, k) for k in _Result.__dataclass_fields__}
        if isinstance(data["roofline_s"], float) and data["roofline_s"] != data["roofline_s"]:
            data["roofline_s"] = None
        if isinstance(data["change"], float) and data["change"] != data["change"]:
            data["change"] = None
        self._item.user_properties.append((_PROPERTY, json.dumps(data)))


def _quote(nodeid: str) -> str:
    return f"'{nodeid}'" if re.search(r"[^A-Za-z0-9_./:\-]", nodeid) else nodeid


def _incompatible(stored: _bl.Summary, current: _bl.Summary) -> str:
    if stored.chip != current.chip:
        return f"was recorded for chip {stored.chip}, this run scores against {current.chip}"
    a, b = stored.compiled_for, current.compiled_for
    if a and b and (a.get("platform"), a.get("device_kind")) != (b.get("platform"), b.get("device_kind")):
        return (f"was compiled for {a.get('platform')} ({a.get('device_kind')}), this run for {b.get('platform')} "
                f"({b.get('device_kind')}) -- check --hloscope-target")
    return ""


# --------------------------------------------------------------------------------------------------
# Compiling and analyzing
# --------------------------------------------------------------------------------------------------


_IMPORTED: list[bool] = []


def _import_analysis() -> float:
    """Import what an analysis needs (pandas, parser, cost model, tables) the first time; the seconds it took
    (0.0 afterwards). Kept out of ``analysis_s``: a one-time cost per process (per xdist worker), not per test."""
    if _IMPORTED:
        return 0.0
    t0 = time.perf_counter()
    import pandas  # noqa: F401

    import hloscope.cost  # noqa: F401
    import hloscope.parsers  # noqa: F401
    import hloscope.roofline.tables  # noqa: F401

    _IMPORTED.append(True)
    return time.perf_counter() - t0


def _is_lowered(x: Any) -> bool:
    return hasattr(x, "compile") and hasattr(x, "as_text") and hasattr(x, "compiler_ir")


def _is_compiled(x: Any) -> bool:
    return hasattr(x, "as_text") and hasattr(x, "runtime_executable")


def _compiled_for(compiled: Any) -> dict[str, Any]:
    """``{"platform", "device_kind", "devices"}`` of a JAX ``Compiled``; {} when it cannot be told."""
    try:
        import jax

        shardings = [s for s in jax.tree.leaves((compiled.input_shardings, compiled.output_shardings))
                     if hasattr(s, "device_set")]
        if not shardings:
            return {}
        devices = max((s.device_set for s in shardings), key=len)
        dev = next(iter(devices))
        return {"platform": str(dev.platform), "device_kind": str(dev.device_kind), "devices": len(devices)}
    except Exception:  # noqa: BLE001 - informational only
        return {}


def _analyze_text(text: str, spec: ChipSpec) -> Analysis:
    from hloscope.parsers import parse_hlo_text

    return _analyze_module(parse_hlo_text(text), spec)


def _analyze_module(module: Any, spec: ChipSpec) -> Analysis:
    from hloscope.cost import module_cost
    from hloscope.result import Report
    from hloscope.roofline.tables import modules_frame, ops_frame

    costs = [module_cost(module)]
    ops = ops_frame(costs, spec)
    report = Report(ops, modules_frame(costs, ops, spec), spec, {"static": True})
    return Analysis(report, _Shapes({module.name: module}))


def _analyze_static_or_trace(source: str | os.PathLike[str], spec: ChipSpec) -> Analysis:
    from hloscope.analysis import _is_path, analyze
    from hloscope.parsers import parse_hlo

    if isinstance(source, str) and not _is_path(source):
        return _analyze_text(source, spec)
    path = Path(source)
    if (path.is_file() and not path.name.endswith((".xplane.pb", ".xplane.pb.gz"))) or (
            path.is_dir() and any(path.glob("*after_optimizations.txt"))):
        return _analyze_module(parse_hlo(path), spec)
    return Analysis(analyze(path, spec))


class _Shapes:
    """(module, computation, instruction) -> result Shape, through ``HloComputation.shape_of`` (nothing built)."""

    def __init__(self, modules: dict[str, Any]) -> None:
        self._modules = modules
        self._comps: dict[tuple[str, str], Any] = {}

    def get(self, key: tuple[str, str, str], default: Any = None) -> Any:
        module, comp, inst = key
        if (module, comp) not in self._comps:
            m = self._modules.get(module)
            try:
                self._comps[(module, comp)] = m.computation(comp) if m is not None else None
            except KeyError:
                self._comps[(module, comp)] = None
        found = self._comps[(module, comp)]
        if found is None:
            return default
        try:
            return found.shape_of(inst)
        except KeyError:
            return default


# ---- deviceless TPU ------------------------------------------------------------------------------

# libtpu topology names by chip id: (prefix, torus dimensions).
_TPU_GENERATIONS = {"tpu-v4": ("v4", 3), "tpu-v5e": ("v5e", 2), "tpu-v5p": ("v5p", 3), "tpu-v6e": ("v6e", 2),
                    "tpu7x": ("tpu7x", 3)}
_SHAPES_2D = ("1x1", "2x1", "2x2", "2x4", "4x4", "4x8", "8x8", "8x16", "16x16")
_SHAPES_3D = ("1x1x1", "2x1x1", "2x2x1", "2x2x2", "2x2x4", "2x4x4", "4x4x4", "4x4x8", "4x8x8", "8x8x8")


def _deviceless_topology(spec: ChipSpec, name: str | None, n: int) -> Any:
    import importlib.util

    if importlib.util.find_spec("libtpu") is None:
        raise HloscopeConfigError("target 'deviceless' needs libtpu (pip install libtpu; no TPU needed), or use "
                                  "--hloscope-target backend")
    # libtpu takes /tmp/libtpu_lockfile when it loads, so a second process compiling deviceless at the same time
    # (an xdist worker, a parallel CI job) would fail; no TPU is driven here, so sharing is safe.
    os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")
    from jax.experimental import topologies

    if name:
        try:
            topo = topologies.get_topology_desc(name, "tpu")
        except Exception as err:
            raise HloscopeConfigError(f"invalid TPU topology {name!r}: {err}") from None
        if len(topo.devices) < n:
            raise HloscopeConfigError(f"TPU topology {name} has {len(topo.devices)} devices; the arguments are "
                                      f"sharded over {n}")
        return topo
    gen = _TPU_GENERATIONS.get(spec.id)
    if gen is None:
        raise HloscopeConfigError(f"no TPU topology known for chip {spec.id}: set --hloscope-topology "
                                  "(ini hloscope_topology), e.g. v5e:2x4")
    prefix, axes = gen
    for shape in _SHAPES_2D if axes == 2 else _SHAPES_3D:
        if math.prod(int(d) for d in shape.split("x")) * 2 < n:
            continue
        topo = topologies.get_topology_desc(f"{prefix}:{shape}", "tpu")
        if len(topo.devices) >= n:
            return topo
    raise HloscopeConfigError(f"no {prefix} topology with {n} devices known: set --hloscope-topology")


def _leaves(tree: Any) -> list[Any]:
    import jax

    return jax.tree.leaves(tree)


def _devices_needed(tree: Any) -> int:
    """How many TPU devices the arguments need: 1 + the highest device id of a sharding not yet on TPU devices
    (1 for unsharded arrays); 0 when every array is already on TPU devices."""
    n = 0
    for leaf in _leaves(tree):
        if not (hasattr(leaf, "shape") and hasattr(leaf, "dtype")):
            continue
        devices = getattr(getattr(leaf, "sharding", None), "device_set", None) or ()
        if not devices:
            n = max(n, 1)
        for d in devices:
            if getattr(d, "platform", "") != "tpu":
                n = max(n, int(d.id) + 1)
    return n


def _retarget(tree: Any, devices: list[Any]) -> Any:
    """Move every array argument's sharding onto the deviceless TPU ``devices`` (device ``id`` k -> the k-th),
    keeping meshes' shapes and axis names; unsharded arrays are replicated over the first mesh found (or put
    on the first device). Returns ``ShapeDtypeStruct`` leaves."""
    import jax
    import numpy as np
    from jax.sharding import Mesh, NamedSharding, PartitionSpec, SingleDeviceSharding

    meshes: dict[int, Mesh] = {}

    def move_mesh(mesh: Mesh) -> Mesh:
        got = meshes.get(id(mesh))
        if got is None:
            flat = [devices[d.id] for d in mesh.devices.flat]
            kwargs = {"axis_types": mesh.axis_types} if hasattr(mesh, "axis_types") else {}
            got = meshes[id(mesh)] = Mesh(np.array(flat, dtype=object).reshape(mesh.devices.shape),
                                          mesh.axis_names, **kwargs)
        return got

    def on_target(sharding: Any) -> bool:
        return all(getattr(d, "platform", "") == "tpu" for d in getattr(sharding, "device_set", ()) or ())

    default = None
    for leaf in _leaves(tree):
        s = getattr(leaf, "sharding", None)
        if isinstance(s, NamedSharding) and isinstance(s.mesh, Mesh):
            default = s.mesh if on_target(s) else move_mesh(s.mesh)
            break

    def move(leaf: Any) -> Any:
        if not (hasattr(leaf, "shape") and hasattr(leaf, "dtype")):
            return leaf
        s = getattr(leaf, "sharding", None)
        if s is not None and on_target(s):
            new = s
        elif isinstance(s, NamedSharding) and isinstance(s.mesh, Mesh):
            new = NamedSharding(move_mesh(s.mesh), s.spec, memory_kind=s.memory_kind)
        elif isinstance(s, SingleDeviceSharding) or s is None:
            new = NamedSharding(default, PartitionSpec()) if default is not None else SingleDeviceSharding(devices[0])
        else:
            raise HloscopeConfigError(f"cannot move a {type(s).__name__} onto the deviceless TPU: use NamedSharding "
                                      "(or build it on hloscope.make_mesh(...))")
        return jax.ShapeDtypeStruct(leaf.shape, leaf.dtype, sharding=new, weak_type=getattr(leaf, "weak_type", False))

    return jax.tree.map(move, tree)


# --------------------------------------------------------------------------------------------------
# The analysis result, with assertions
# --------------------------------------------------------------------------------------------------


class Analysis:
    """A ``hloscope.Report`` (``.ops``, ``.modules``, ``.chip``, ``.to_json()``... are forwarded) plus assertion
    methods with readable failure messages, and what the baseline check needs (op shapes, compile target).

    Attributes:
        report: the ``Report``.
        compiled_for: platform, device kind and device count of the compile (empty for HLO text and traces).
        compile_s: seconds JAX spent lowering and compiling (0 when given a ``Compiled`` or text).
        analysis_s: seconds hloscope spent (HLO text out, parse, cost, score, tables).

    >>> report = hloscope.analyze(jax.jit(f), x)                    # doctest: +SKIP
    >>> report.assert_bound("dot", "compute")                       # doctest: +SKIP
    """

    def __init__(self, report: Report, shapes: Any = None) -> None:
        self.report = report
        self.shapes = shapes
        self.compiled_for: dict[str, Any] = {}
        self.compile_s = 0.0
        self.analysis_s = 0.0

    def __getattr__(self, name: str) -> Any:
        if name == "report":  # not yet set (unpickling)
            raise AttributeError(name)
        return getattr(self.report, name)

    def __repr__(self) -> str:
        return (f"<hloscope Analysis: {len(self.ops)} ops, roofline {_bl.format_quantity(self.roofline_s, 's')} on "
                f"{self.chip.id}>")

    @property
    def ops(self) -> pd.DataFrame:
        return self.report.ops

    @property
    def modules(self) -> pd.DataFrame:
        return self.report.modules

    @property
    def chip(self) -> ChipSpec:
        return self.report.chip

    # ---- totals ------------------------------------------------------------------------------------

    @property
    def roofline_s(self) -> float:
        """Total roofline time of the program (seconds per run): the sum of every op's roofline time."""
        return float(self.modules["roofline_s"].sum())

    @property
    def flops(self) -> float:
        return float(self.modules["flops"].sum())

    @property
    def hbm_bytes(self) -> float:
        return float(self.modules["bytes_accessed"].sum())

    @property
    def wire_bytes(self) -> float:
        return float(self.modules["comm_bytes"].sum())

    def wire_bytes_by_kind(self) -> dict[str, float]:
        """Wire bytes per collective kind (``all-reduce`` ...)."""
        ops = self._collectives(None)
        return {str(k): float(v) for k, v in ops.groupby("comm_kind")["comm_bytes"].sum().items()}

    @property
    def mfu(self) -> float:
        """Model FLOPs utilization: measured (from a trace) when there are measured times, else the roofline MFU
        -- FLOPs / (roofline time x peak), the best this program can reach on the chip."""
        m = self.modules
        if m["mfu"].notna().any():
            t = m["measured_s"].fillna(0)
            num, den = m["flops"].sum(), 0.0
            for dtype, secs in zip(m["dtype"], t):
                den += secs * self.chip.peak_flops_for(str(dtype))[0]
            return float(num / den) if den else math.nan
        den = sum(float(s) * self.chip.peak_flops_for(str(d))[0] for d, s in zip(m["dtype"], m["roofline_s"]))
        return float(m["flops"].sum() / den) if den else math.nan

    def summary(self, significant: float = _bl.DEFAULT_SIGNIFICANT, test: str = "") -> _bl.Summary:
        """What a baseline stores for this program (``hloscope.baseline.summarize``)."""
        import sys

        from hloscope import __version__

        versions = {"hloscope": __version__}
        jax = sys.modules.get("jax")  # only when imported: HLO text and traces need no JAX
        if jax is not None:
            versions["jax"] = jax.__version__
        return _bl.summarize(self.report, self.shapes, significant=significant, compiled_for=self.compiled_for,
                             test=test, recorded_with=versions)

    # ---- selecting ops -------------------------------------------------------------------------------

    def select(self, pattern: str | re.Pattern[str]) -> pd.DataFrame:
        """Ops matching ``pattern``: a glob (``fnmatch``, case-sensitive) or compiled regex, tried on the opcode,
        the category (``matmul``, ``collective``, ``fusion:kLoop``...), the instruction name and the op_name
        -- whole, or any ``/``-separated part of it. A fusion holding a dot also matches ``dot`` (and one
        holding a convolution ``convolution``)."""
        ops = self.ops
        if isinstance(pattern, re.Pattern):
            def hit(fields: list[str]) -> bool:
                return any(pattern.search(f) for f in fields)
        elif isinstance(pattern, str):
            rx = re.compile(fnmatch.translate(pattern))

            def hit(fields: list[str]) -> bool:
                return any(rx.match(f) for f in fields)
        else:
            raise TypeError(f"pattern must be a str (glob) or re.Pattern, not {type(pattern).__name__}")
        mask = []
        for opcode, category, inst, op_name in zip(ops["opcode"], ops["category"], ops["instruction"], ops["op_name"]):
            opcode = opcode if isinstance(opcode, str) else ""
            op_name = op_name if isinstance(op_name, str) else ""
            fields = [opcode, str(category), str(inst), op_name, *op_name.split("/")]
            if category == "matmul" and opcode not in ("dot", "convolution"):
                fields.append("convolution" if "conv" in op_name else "dot")
            mask.append(hit(fields))
        return ops[mask]

    def _no_match(self, pattern: Any) -> str:
        ops = self.ops
        opcodes = ", ".join(sorted({str(o) for o in ops["opcode"] if isinstance(o, str) and o}))
        cats = ", ".join(sorted({str(c) for c in ops["category"] if isinstance(c, str) and c}))
        return (f"no op matches {_pattern_text(pattern)} (opcodes: {opcodes}; categories: {cats}; patterns are globs "
                "on opcode, category, instruction or op_name)")

    # ---- assertions ------------------------------------------------------------------------------------

    def assert_bound(self, pattern: str | re.Pattern[str], bound: Any) -> None:
        """Every op matching ``pattern`` (see ``select``) that does work is ``bound``-bound.

        Args:
            pattern: glob or regex on opcode, category, instruction or op_name (``"dot"``, ``"matmul"``,
                ``"*attention*"``).
            bound: ``"compute"``, ``"memory"`` or ``"communication"`` (``"comm"``), or a ``Bound``.

        Raises:
            AssertionError: no op matches, or some are bound otherwise (table of them with their times and
                arithmetic intensity against the chip's critical intensity).
        """
        __tracebackhide__ = True
        want = _bound_name(bound)
        rows = self.select(pattern)
        rows = rows[rows["roofline_s"] > 0]
        if rows.empty:
            raise AssertionError(self._no_match(pattern))
        bad = rows[rows["bound"] != want]
        if bad.empty:
            return
        raise AssertionError(
            f"{len(bad)} of {len(rows)} ops matching {_pattern_text(pattern)} are not {want}-bound on {self.chip.id}:\n"
            + _ops_table(bad, ("bound", "compute_s", "memory_s", "comm_s", "intensity", "critical_intensity"))
            + "\n(an op is compute-bound when its FLOPs per HBM byte exceed the chip's critical intensity)")

    def assert_max_roofline_time(self, seconds: float) -> None:
        """The program's total roofline time is at most ``seconds``.

        Raises:
            AssertionError: with the time by bound class and the five slowest ops.
        """
        __tracebackhide__ = True
        total = self.roofline_s
        if total <= seconds:
            return
        m = self.modules
        fq = _bl.format_quantity
        raise AssertionError(
            f"roofline time {fq(total, 's')} exceeds {fq(seconds, 's')} on {self.chip.id} (compute-bound ops "
            f"{fq(float(m['compute_bound_s'].sum()), 's')}, memory-bound {fq(float(m['memory_bound_s'].sum()), 's')}, "
            f"communication-bound {fq(float(m['communication_bound_s'].sum()), 's')}); slowest ops:\n"
            + _ops_table(self.ops.nlargest(5, "roofline_s"), ("bound", "roofline_s")))

    def assert_no_collective(self, kind: str | None = None) -> None:
        """The program has no collective of ``kind`` (``all-gather``, ``all-reduce``, ``reduce-scatter``,
        ``all-to-all``, ``collective-permute``, ...), or none at all when ``kind`` is None.

        Raises:
            ValueError: an unknown kind (with the closest known one).
            AssertionError: listing each such collective with its op_name and wire bytes.
        """
        __tracebackhide__ = True
        rows = self._collectives(kind)
        if rows.empty:
            return
        what = kind or "collective"
        raise AssertionError(f"{len(rows)} {what} op{'s' if len(rows) != 1 else ''} found on {self.chip.id} "
                             f"({_bl.format_quantity(float(rows['comm_bytes'].sum()), 'B')} on the wire):\n"
                             + _ops_table(rows, ("comm_kind", "group_size", "comm_bytes", "roofline_s")))

    def _collectives(self, kind: str | None) -> pd.DataFrame:
        if kind is not None and kind not in COLLECTIVE_KINDS:
            import difflib

            close = difflib.get_close_matches(kind, COLLECTIVE_KINDS, n=1)
            raise ValueError(f"unknown collective kind {kind!r}" + (f"; did you mean {close[0]!r}?" if close else "")
                             + f" (known: {', '.join(COLLECTIVE_KINDS)})")
        ops = self.ops
        kinds = ops["comm_kind"].fillna("")
        mask = (kinds != "") & ~ops["opcode"].fillna("").str.endswith("-done")
        if kind is not None:
            mask &= kinds == kind
        return ops[mask]

    def assert_mfu_at_least(self, fraction: float | str) -> None:
        """MFU (``mfu``: measured with a trace, else the roofline MFU) is at least ``fraction`` (0.4 or "40%").

        Raises:
            AssertionError: with the non-compute-bound ops that cost the most time.
        """
        __tracebackhide__ = True
        want = _bl.parse_fraction(fraction, "assert_mfu_at_least")
        got = self.mfu
        if got >= want:
            return
        kind = "measured MFU" if self.modules["mfu"].notna().any() else "roofline MFU (static: the best reachable)"
        slow = self.ops[self.ops["bound"] != "compute"].nlargest(5, "roofline_s")
        raise AssertionError(f"{kind} {got:.1%} < {want:.1%} on {self.chip.id}; the costliest ops not bound by "
                             f"compute:\n" + _ops_table(slow, ("bound", "roofline_s", "intensity")))

    def assert_max_flops(self, flops: float) -> None:
        """Total FLOPs per run at most ``flops``."""
        __tracebackhide__ = True
        self._assert_max("FLOPs", self.flops, flops, "FLOP", "flops")

    def assert_max_hbm_bytes(self, nbytes: float) -> None:
        """Total HBM bytes per run at most ``nbytes``."""
        __tracebackhide__ = True
        self._assert_max("HBM bytes", self.hbm_bytes, nbytes, "B", "bytes_accessed")

    def assert_max_wire_bytes(self, nbytes: float, kind: str | None = None) -> None:
        """Bytes each device sends on the wire per run (of collective ``kind``, or all) at most ``nbytes``."""
        __tracebackhide__ = True
        rows = self._collectives(kind)
        self._assert_max(f"{kind or 'collective'} wire bytes", float(rows["comm_bytes"].sum()), nbytes, "B",
                         "comm_bytes", rows)

    def _assert_max(self, what: str, got: float, limit: float, unit: str, col: str,
                    rows: pd.DataFrame | None = None) -> None:
        __tracebackhide__ = True
        if got <= limit:
            return
        rows = self.ops if rows is None else rows
        fq = _bl.format_quantity
        raise AssertionError(f"{what} {fq(got, unit)} exceed {fq(limit, unit)} ({got:.6g} > {limit:.6g}); "
                             "largest ops:\n" + _ops_table(rows.nlargest(5, col), (col,)))


def _bound_name(bound: Any) -> str:
    name = getattr(bound, "value", bound)
    name = {"comm": "communication", "collective": "communication"}.get(name, name)
    if name not in BOUNDS:
        raise ValueError(f"unknown bound {bound!r}: expected one of {', '.join(BOUNDS)}")
    return name


def _pattern_text(pattern: Any) -> str:
    return f"/{pattern.pattern}/" if isinstance(pattern, re.Pattern) else repr(pattern)


_UNITS = {"compute_s": "s", "memory_s": "s", "comm_s": "s", "roofline_s": "s", "comm_bytes": "B",
          "bytes_accessed": "B", "flops": "FLOP"}


def _ops_table(rows: pd.DataFrame, cols: Iterable[str], limit: int = 10) -> str:
    cols = list(cols)
    head = ["instruction", "opcode", "op_name", *cols]
    table = [head]
    for _, r in rows.head(limit).iterrows():
        op_name = r["op_name"] if isinstance(r["op_name"], str) else ""
        if len(op_name) > 50:
            op_name = "..." + op_name[-47:]
        cells = [str(r["instruction"]), str(r["opcode"]), op_name]
        for c in cols:
            v = r[c]
            if c in _UNITS:
                cells.append(_bl.format_quantity(float(v), _UNITS[c]))
            elif isinstance(v, float):
                cells.append(f"{v:.3g}")
            else:
                cells.append(str(v))
        table.append(cells)
    widths = [max(len(row[i]) for row in table) for i in range(len(head))]
    lines = ["  " + "  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in table]
    if len(rows) > limit:
        lines.append(f"  ... and {len(rows) - limit} more")
    return "\n".join(lines)
