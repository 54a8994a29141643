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

The plugin is a thin layer: ``hloscope.analyze`` compiles (``hloscope.compile``) and analyzes, and the
``Report`` it returns carries the totals and assertions (``hloscope.result.assertions``) -- the same in a test,
a script or a notebook. The plugin adds settings, the deviceless topology's devices for meshes, baselines and
the terminal summary.
"""

from __future__ import annotations

import argparse
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

from hloscope import units as _units
from hloscope.compare import Diff
from hloscope.compare import baseline as _bl
from hloscope.compare import rules as _rules
from hloscope.compile import DEFAULT_TARGET, TARGETS
from hloscope.errors import ConfigError
from hloscope.result import Report
from hloscope.result.assertions import BOUNDS as BOUNDS  # noqa: F401 - re-exported for old imports
from hloscope.result.assertions import COLLECTIVE_KINDS as COLLECTIVE_KINDS  # noqa: F401

if TYPE_CHECKING:
    from hloscope.roofline.chips import ChipSpec

__all__ = ["Analysis", "HloscopeFixture", "HloscopeConfigError"]

_PROPERTY = "hloscope"  # user_properties key of a baseline check (travels from xdist workers)
_TIMING = "hloscope-timing"  # user_properties key of one analysis's timings

#: A bad hloscope setting (chip, tolerance, target, marker argument) or a compile target that cannot be built;
#: the message says where it came from. The old name of ``hloscope.errors.ConfigError`` (the same class).
HloscopeConfigError = ConfigError


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
        return _rules.parse_fraction(value, where)
    except ValueError as err:
        raise HloscopeConfigError(str(err)) from None


def _parse_tolerance(value: Any, where: str) -> float | tuple[_rules.Rule, ...]:
    """A tolerance (``0.05``, ``5%``: the default rules at that tolerance; returned as a float) or rules in the
    grammar of ``hloscope diff --fail-on`` (``roofline_s:+5%,op.bound:+0``; returned as a tuple)."""
    __tracebackhide__ = True
    try:
        return _rules.parse_tolerance(value, where)
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
    _Option("tolerance", "FRACTION", _parse_tolerance, _rules.DEFAULT_TOLERANCE,
            "relative change tolerated before a baseline check fails (0.05 or 5%%: the default rules), or "
            "rules in the grammar of `hloscope diff --fail-on` (roofline_s:+5%%,op.bound:+0; docs/diff.md)."),
    _Option("baseline_dir", "DIR", _parse_text, ".hloscope",
            "directory of the baseline JSON files, relative to the ini file's directory (else the rootdir).",
            marker=False),
    _Option("target", "{auto,backend,deviceless}", _parse_target, DEFAULT_TARGET,
            "what `hloscope.analyze(fn, *args)` compiles for: the current JAX backend, or a deviceless TPU "
            "compile for the chip's TPU generation (needs libtpu; no TPU needed); auto: deviceless for a TPU chip "
            "when libtpu is installed and no TPU is attached, else the backend (the summary says which and why)."),
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
    compiled_for: dict[str, int] | None = None  # what analyses of functions were compiled for, and why -> count


_STATE = pytest.StashKey[_SessionState]()


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
    return [f"hloscope: chip {chip or '(per test)'}, target {s.resolve('target')[0]}, "
            f"{_rules.describe(s.resolve('tolerance')[0])}, baselines {_rel(s.baseline_dir(), config.rootpath)}/"
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
                if data.get("compiled_for"):
                    seen = self.state.compiled_for = self.state.compiled_for or {}
                    seen[data["compiled_for"]] = seen.get(data["compiled_for"], 0) + 1


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
            rows.append((test, r.chip, _units.quantity(r.roofline_s, "s"), change, status, r.status))
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
        for note, count in sorted((state.compiled_for or {}).items()):
            out.append((f"{ngettext('%d analysis', '%d analyses', count) % count} {note}", {}))
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
        """``auto``, ``backend`` or ``deviceless`` (see ``--hloscope-target``)."""
        return self.setting("target")

    def devices(self, n: int | None = None) -> list[Any]:
        """The devices ``analyze(fn, ...)`` compiles for: ``jax.devices()``, or those of a deviceless TPU topology
        with at least ``n`` devices (default: as many as ``jax.devices()``; ``hloscope.compile.tpu_topology``) when
        the target is -- or ``auto`` chooses -- ``deviceless``. Meshes over ``jax.devices()`` work too: a
        deviceless compile moves them onto the topology.

        Raises:
            HloscopeConfigError: deviceless, and the topology cannot be made (no libtpu, bad topology setting).
        """
        import jax

        from hloscope.compile import choose_target

        target = self.target
        if target == "auto":
            target = choose_target(self.chip, target)[0] if self.setting("chip") is not None else "backend"
        if target != "deviceless":
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

    def analyze(self, source: Any, *args: Any, chip: str | ChipSpec | None = None, **kwargs: Any) -> Report:
        """``hloscope.analyze`` for this test: its chip, target and topology settings; timings to the summary.

        Args:
            source: a function (jitted or not; called as ``fn(*args, **kwargs)`` to lower it), a ``jax.stages.
                Lowered`` or ``Compiled``, HLO text, a path to an HLO text file or XLA dump directory, or a
                profile directory (see ``hloscope.analyze``).
            *args, **kwargs: example arguments of a function: arrays or ``jax.ShapeDtypeStruct`` (with
                shardings for a sharded program); anything ``jit(fn).lower`` accepts. The keywords ``chip``,
                ``target``, ``topology``, ``run``, ``hlo`` and ``module`` are hloscope's own (bind a function's
                parameters of those names with ``functools.partial``).
            chip: chip id or ``ChipSpec``, overriding the test's setting.

        Returns:
            The ``Report`` (``.ops``, ``.modules``, totals, ``assert_*``, ``compiled_for``, ``compile_s``,
            ``analysis_s``).

        Raises:
            HloscopeConfigError: no chip, or a deviceless compile that cannot be done (names the fix).
            TypeError: example arguments with text, a path, a ``Lowered`` or ``Compiled``; an unknown source.
        """
        __tracebackhide__ = True
        from hloscope.analysis import analyze
        from hloscope.compile import target_note

        spec = self._chip(chip)
        import_s = _import_analysis()
        report = analyze(source, *args, chip=spec, target=self.target, topology=self.setting("topology"), **kwargs)
        self._item.user_properties.append((_TIMING, json.dumps(
            {"compile_s": report.compile_s, "analysis_s": report.analysis_s, "import_s": import_s,
             "compiled_for": target_note(report.notes)})))
        return report

    def _topology(self, n: int, spec: ChipSpec | None = None) -> Any:
        """The deviceless topology of the chip's generation with at least ``n`` devices that ``analyze`` moves
        arguments onto (``hloscope.compile.tpu_topology``: one per process, shared with meshes)."""
        from hloscope.compile import tpu_topology

        return tpu_topology(spec or self.chip, self.setting("topology"), n)

    # ---- baselines -------------------------------------------------------------------------------

    def baseline_path(self, name: str | None = None) -> Path:
        """The baseline file of this test (``name`` for a second baseline in the same test)."""
        return _bl.baseline_path(self._state.settings.baseline_dir(), self._item.nodeid, name)

    def check_baseline(self, report: Report, *, name: str | None = None,
                       tolerance: Any = None) -> Diff | None:
        """Compare ``report`` with this test's stored baseline; fail on a regression.

        The comparison is ``hloscope diff``'s (``hloscope.compare``): the baseline is report A, ``report`` is B, and
        the rules are the test's tolerance -- ``tolerance=`` here, else marker, option, ini (default 5%). A fraction
        means the default rules at that tolerance (``hloscope.compare.rules.default_rules``): each module's
        roofline time, FLOPs, HBM bytes and wire bytes, each collective kind's wire bytes and each significant
        op's roofline time may grow by it; no new collective (kind or op count); no op whose bound class got worse
        (compute -> memory -> communication). Rules in the ``--fail-on`` grammar (``"roofline_s:+5%,flops:+0"``,
        docs/diff.md) are applied as written. Improvements pass and are listed in the summary. With
        ``--hloscope-update`` the baseline is written (atomically) instead, and the check passes.

        Args:
            report: what ``analyze`` returned (any ``hloscope.Report``).
            name: for a test with several baselines: a suffix of the file name.
            tolerance: ``0.1``, ``"10%"``, or rules (``"roofline_s:+5%,op.bound:+0"`` or a list), overriding
                marker, option and ini.

        Returns:
            The ``hloscope.compare.Diff`` of baseline and report (its ``verdict``: regressions, improvements,
            notes); None when updating.

        Raises:
            AssertionError: a regression (with a table of what regressed), no baseline, a baseline recorded for
                another chip or platform, or an old baseline that cannot be read exactly.
            hloscope.errors.BaselineError: the baseline file is corrupted (it is never overwritten).
        """
        __tracebackhide__ = True
        import sys

        from hloscope import __version__
        from hloscope.compare import compare
        from hloscope.errors import ComparisonError

        settings = self._state.settings
        if tolerance is not None:
            spec = _parse_tolerance(tolerance, "check_baseline(tolerance=...)")
        else:
            spec = settings.resolve("tolerance", self._item)[0]
        rules = _rules.resolve(spec)
        significant = settings.resolve("significant", self._item)[0]
        path = self.baseline_path(name)
        if path in self._checked:
            raise ValueError(f"check_baseline called twice for {path}: pass name=... to keep several baselines "
                             "in one test")
        self._checked.add(path)
        shown = _rel(path, settings.rootpath)
        versions = {"hloscope": __version__}
        jax = sys.modules.get("jax")  # only when imported: HLO text and traces need no JAX
        if jax is not None:
            versions["jax"] = jax.__version__
        current = _bl.record(report, significant=significant, compiled_for=getattr(report, "compiled_for", None),
                             test=self._item.nodeid, recorded_with=versions)  # what the file holds
        result = _Result(self._item.nodeid, "ok", current.chip, current.roofline_s, path=shown, name=name or "")
        rerun = f"pytest --hloscope-update {_quote(self._item.nodeid)}"
        outdated = None
        try:
            stored = _bl.read_baseline(path)
        except _bl.OutdatedBaselineError as err:  # an old schema: --hloscope-update replaces it
            stored, outdated = None, err
        except _bl.BaselineError:
            result.status = "corrupted"
            self._record(result)
            raise

        def against(baseline: _bl.Baseline) -> Diff:
            return compare(_bl.BaselineReport(baseline, report.chip), report, a_label=shown, b_label="this run",
                           significant=baseline.significant, rules=rules)

        if settings.update:
            if stored is not None and stored.chip == current.chip:
                try:
                    result.change = against(stored).roofline_change
                except ComparisonError:
                    pass
            written = _bl.write_baseline(path, current)
            result.status = ("updated" if stored is not None or outdated else "created") if written else "unchanged"
            self._record(result)
            return None
        if outdated is not None:
            result.status = "incompatible"
            self._record(result)
            raise AssertionError(f"hloscope baseline {shown} was {outdated.why}; re-record it with:  {rerun}")
        if stored is None:
            result.status = "missing"
            self._record(result)
            raise AssertionError(f"no hloscope baseline for this test at {shown}\nRecord it with:  {rerun}\nthen "
                                 f"review and commit {shown}.")
        problem = _incompatible(stored, current)
        if not problem:
            try:
                d = against(stored)
            except ComparisonError as err:  # no module in common
                problem = f"cannot be compared with this run ({err})"
        if problem:
            result.status = "incompatible"
            self._record(result)
            raise AssertionError(f"hloscope baseline {shown} {problem}; re-record it with:  {rerun}")
        verdict = d.verdict
        result.change = d.roofline_change
        result.regressions = len(verdict.regressions)
        result.improvements = len(verdict.improvements)
        result.status = "regressed" if verdict.regressed else ("improved" if verdict.improvements else "ok")
        self._record(result)
        if verdict.regressed:
            raise AssertionError(verdict.format(shown) + f"\nIf this is intended, accept the new numbers:  {rerun}")
        return d

    def _record(self, result: _Result) -> None:
        data = {k: getattr(result, k) for k in _Result.__dataclass_fields__}
        if isinstance(data["roofline_s"], float) and data["roofline_s"] != data["roofline_s"]:
            data["roofline_s"] = None
        if isinstance(data["change"], float) and data["change"] != data["change"]:
            data["change"] = None
        self._item.user_properties.append((_PROPERTY, json.dumps(data)))


def _quote(nodeid: str) -> str:
    return f"'{nodeid}'" if re.search(r"[^A-Za-z0-9_./:\-]", nodeid) else nodeid


def _incompatible(stored: _bl.Baseline, current: _bl.Baseline) -> str:
    """Why ``stored`` cannot be compared with ``current`` (another chip, platform or device kind); "" when it can."""
    if stored.chip != current.chip:
        return f"was recorded for chip {stored.chip}, this run scores against {current.chip}"
    a, b = stored.compiled_for, current.compiled_for
    if a and b and (a.get("platform"), a.get("device_kind")) != (b.get("platform"), b.get("device_kind")):
        return (f"was compiled for {a.get('platform')} ({a.get('device_kind')}), this run for {b.get('platform')} "
                f"({b.get('device_kind')}) -- check --hloscope-target")
    return ""


# --------------------------------------------------------------------------------------------------
# Analysis imports
# --------------------------------------------------------------------------------------------------


_IMPORTED: list[bool] = []


def _import_analysis() -> float:
    """Import what an analysis needs (pandas, parser, cost model, tables) the first time; the seconds it took
    (0.0 afterwards). Kept out of ``analysis_s``: a one-time cost per process (per xdist worker), not per test."""
    if _IMPORTED:
        return 0.0
    t0 = time.perf_counter()
    import pandas  # noqa: F401

    import hloscope.analysis  # noqa: F401
    import hloscope.cost  # noqa: F401
    import hloscope.parsers  # noqa: F401
    import hloscope.roofline.tables  # noqa: F401

    _IMPORTED.append(True)
    return time.perf_counter() - t0


#: The old name of what ``analyze`` returns (``from hloscope.pytest_plugin import Analysis`` keeps working): the
#: ``Report`` itself, whose totals and ``assert_*`` methods live in ``hloscope.result.assertions``.
Analysis = Report
