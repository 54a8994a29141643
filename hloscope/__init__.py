"""hloscope: where every microsecond of a compiled XLA program goes, and why.

Reads post-optimization HLO text and JAX profiler traces, costs every instruction (FLOPs, HBM bytes, bytes on
the wire) and scores it against a chip's roofline. See README.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hloscope.compare import Diff as Diff
    from hloscope.errors import BaselineError as BaselineError
    from hloscope.errors import ChipRequiredError as ChipRequiredError
    from hloscope.errors import ChipSpecError as ChipSpecError
    from hloscope.errors import ComparisonError as ComparisonError
    from hloscope.errors import ConfigError as ConfigError
    from hloscope.errors import HloParseError as HloParseError
    from hloscope.errors import HloscopeError as HloscopeError
    from hloscope.errors import ReportSchemaError as ReportSchemaError
    from hloscope.errors import TraceError as TraceError
    from hloscope.errors import UnknownChipError as UnknownChipError
    from hloscope.hlo import HloComputation as HloComputation
    from hloscope.hlo import HloInstruction as HloInstruction
    from hloscope.hlo import HloModule as HloModule
    from hloscope.hlo import Shape as Shape
    from hloscope.parsers import parse_hlo as parse_hlo
    from hloscope.result import Report as Report
    from hloscope.result import load_report as load_report
    from hloscope.roofline.chips import ChipSpec as ChipSpec
    from hloscope.roofline.chips import get_chip as get_chip

__version__ = "0.1.0"

#: The public API. Everything else is reached through these (or is private).
__all__ = [
    "analyze", "diff", "parse_hlo", "load_report", "get_chip",
    "Report", "Diff", "ChipSpec", "HloModule", "HloComputation", "HloInstruction", "Shape",
    "HloscopeError", "HloParseError", "TraceError", "ChipSpecError", "UnknownChipError", "ChipRequiredError",
    "ReportSchemaError", "BaselineError", "ComparisonError", "ConfigError",
]

# Names load on first use (PEP 562): ``import hloscope`` -- which the pytest plugin does in every pytest run of
# an environment where hloscope is installed -- stays cheap (measured: 90 ms -> 9 ms).
_ERRORS = ("HloscopeError", "HloParseError", "TraceError", "ChipSpecError", "UnknownChipError",
           "ChipRequiredError", "ReportSchemaError", "BaselineError", "ComparisonError", "ConfigError")
_LAZY = {"HloComputation": "hloscope.hlo", "HloInstruction": "hloscope.hlo", "HloModule": "hloscope.hlo",
         "Shape": "hloscope.hlo", "parse_hlo": "hloscope.parsers", "Report": "hloscope.result",
         "load_report": "hloscope.result", "Diff": "hloscope.compare", "ChipSpec": "hloscope.roofline.chips",
         "get_chip": "hloscope.roofline.chips", **{e: "hloscope.errors" for e in _ERRORS}}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'hloscope' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])


def analyze(source, *args, **kwargs):  # noqa: ANN001, ANN201 - documented in hloscope.analysis.analyze
    """Cost and score a compiled program (HLO text, file, dump dir, ``Compiled`` or trace); see
    ``hloscope.analysis.analyze``."""
    from hloscope.analysis import analyze as _analyze

    return _analyze(source, *args, **kwargs)


def diff(a, b, chip=None, rules=(), *, significant=None):  # noqa: ANN001, ANN201 - documented below
    """Compare program or run B against A, op by op and module by module (docs/diff.md).

    Args:
        a, b: each a ``Report``; a ``.json`` file -- a report (``hloscope report --format json``, scored with its
            own chip) or a baseline of the pytest plugin (``hloscope.baseline/3``, or older); or anything
            ``analyze`` takes (HLO text file, XLA dump dir, profile dir, ``Compiled``, ...), scored against ``chip``.
        chip: chip id or ``ChipSpec`` for the sides that need one.
        rules: the rules of ``Diff.verdict``: rule text (``"roofline_s:+5%,wire_bytes:+0"``), a list of rules, or
            a tolerance (``0.05``: the plugin's default rule set). ``Diff.check(other_rules)`` applies others.
        significant: share of A's roofline time from which an op is compared by ``op.*`` rules (default 1%).

    Returns:
        ``hloscope.compare.Diff``: ``.ops``, ``.modules``, ``.collectives`` DataFrames, ``.check(rules)`` and
        ``.verdict``.

    Raises:
        ComparisonError: the sides were scored against different chips, or have no module in common.
        ConfigError: a rule that does not parse. Any error ``analyze`` / ``load_report`` raise for an input.
    """
    import os

    from hloscope.compare import DEFAULT_SIGNIFICANT, compare
    from hloscope.compare.rules import resolve

    rules = resolve(rules)  # a bad rule fails before any analysis

    def load(side):  # noqa: ANN001, ANN202 - a Report and its label
        if all(hasattr(side, k) for k in ("ops", "modules", "chip")):
            return side, "<report>"
        if isinstance(side, (str, os.PathLike)) and os.fspath(side).endswith(".json") and os.path.isfile(side):
            from hloscope.result import load_report

            path = os.fspath(side)
            with open(path, encoding="utf-8") as f:
                head = f.read(4096)
            if '"hloscope.baseline/' in head:
                from hloscope.compare.baseline import read_baseline

                return read_baseline(path).to_report(), path
            return load_report(path), path
        label = os.fspath(side) if isinstance(side, (str, os.PathLike)) else type(side).__name__
        return analyze(side, chip=chip), label

    ra, label_a = load(a)
    rb, label_b = load(b)
    return compare(ra, rb, a_label=label_a, b_label=label_b, rules=rules,
                   significant=DEFAULT_SIGNIFICANT if significant is None else significant)
