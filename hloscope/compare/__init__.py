"""The one comparison engine: two ``Report``s -> per-op and per-module deltas and a verdict under rules.

Stage after ``Report``, before presentation: ``hloscope diff`` / ``hloscope.diff`` and the pytest plugin's
baselines both call ``compare``. Modules:

* ``engine`` -- op identity (``opcode, op_name, dims``), pairing, per-op / per-module / per-collective-kind
  deltas (``compare`` -> ``Diff``);
* ``verdict`` -- the rules applied to a ``Diff``: regressions, improvements, notes (``Verdict``, ``Finding``);
* ``rules`` -- the one threshold grammar ``METRIC:[+|-]NUMBER[%]`` (``roofline_s:+5%``, ``op.bound:+0``);
* ``baseline`` -- baseline files: a reviewable subset of the report JSON (``hloscope.baseline/3``).

Imports no analysis: loading paths, HLO or traces into reports is the front ends' job (``hloscope.diff``,
the CLI, the plugin).
"""

from __future__ import annotations

from hloscope.compare.engine import DEFAULT_SIGNIFICANT, Diff, compare, dims_of, identity
from hloscope.compare.rules import Rule, default_rules, parse_rules
from hloscope.compare.verdict import Finding, Verdict

__all__ = ["DEFAULT_SIGNIFICANT", "Diff", "Finding", "Rule", "Verdict", "compare", "default_rules", "dims_of",
           "identity", "parse_rules"]
