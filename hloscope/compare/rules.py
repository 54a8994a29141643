"""The one threshold grammar: ``METRIC:[+|-]NUMBER[%]``, for ``hloscope diff --fail-on`` and the pytest plugin's
baselines (docs/diff.md, "Rules").

``METRIC`` is a field of the report, optionally scoped:

* ``FIELD`` -- a module total (``MODULE_METRICS``): ``roofline_s:+5%`` fails when a module's roofline time grows
  by more than 5%;
* ``collective.FIELD`` -- per collective kind of a module (``COLLECTIVE_METRICS``): ``collective.wire_bytes:+5%``
  its wire bytes, ``collective.count:+0`` its number of ops (a kind B has and A lacks counts from 0: a **new
  collective**);
* ``op.FIELD`` -- per op of A that is significant (``OP_METRICS``; roofline time at least ``significant`` of A's
  total, or a collective) and whose identity ``(opcode, op_name, dims)`` B has: ``op.roofline_s:+5%``;
  ``op.bound:+0`` fails when the bound class gets worse (compute -> memory -> communication, ranked 0, 1, 2).
  Ops paired as ``reshaped`` (other dims), gone or new are notes: their cost is in the totals. ``op.count`` (the
  name of ``op.executions`` before the ops table's ``count`` column became ``executions``) is read as
  ``op.executions``, with a ``DeprecationWarning`` (``DEPRECATED_METRICS``).

The sign gives the direction that fails (no sign: ``+``); ``%`` makes the number a fraction of A's value,
without it the number is in the field's unit (seconds, FLOPs, bytes, ops). A change past the threshold in the
*other* direction is an improvement (reported, never a failure). The syntax follows pytest-benchmark's
``--benchmark-compare-fail=EXPR`` (``min:5%`` relative, ``mean:0.001`` absolute), with a sign for the direction.

A tolerance (``5%``, ``0.05``: the plugin's ``--hloscope-tolerance``) means ``default_rules(tolerance)``.

>>> [r.text for r in parse_rules("roofline_s:+5%, wire_bytes:+0")]
['roofline_s:+5%', 'wire_bytes:+0']
>>> describe(default_rules(0.05))
'tolerance 5%'
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Union

from hloscope._regex import LazyPattern
from hloscope.units import parse_fraction as parse_fraction  # re-exported: the one fraction parser

__all__ = [
    "DEFAULT_TOLERANCE", "MODULE_METRICS", "COLLECTIVE_METRICS", "OP_METRICS", "DEPRECATED_METRICS", "SCOPES",
    "Rule", "RuleSpec",
    "parse_rule", "parse_rules", "default_rules", "parse_tolerance", "resolve", "describe", "parse_fraction",
]

#: The plugin's default tolerance: ``default_rules(0.05)``.
DEFAULT_TOLERANCE = 0.05

#: Module totals a rule may name (columns of the report's modules table).
MODULE_METRICS = ("roofline_s", "measured_s", "flops", "transcendentals", "hbm_bytes", "wire_bytes",
                  "compute_s", "memory_s", "comm_s", "mfu", "peak_bytes", "exposed_comm_s",
                  "exposed_comm_roofline_s")
#: Per collective kind: the wire bytes and the number of ops of that kind.
COLLECTIVE_METRICS = ("wire_bytes", "count")
#: Per significant op of A (columns of the report's ops table, and ``bound`` ranked 0 compute, 1 memory,
#: 2 communication).
OP_METRICS = ("roofline_s", "measured_s", "flops", "hbm_bytes", "wire_bytes", "executions", "bound")
#: Old metric names -> their names now. A rule naming one is parsed as the new metric (its ``text`` says the new
#: name) and warns (``DeprecationWarning``): CI settings written before the rename keep gating.
DEPRECATED_METRICS = {"op.count": "op.executions"}
#: scope -> the fields it allows; ``module`` is written without a prefix.
SCOPES = {"module": MODULE_METRICS, "collective": COLLECTIVE_METRICS, "op": OP_METRICS}

SYNTAX = ("METRIC:[+|-]NUMBER[%], e.g. roofline_s:+5%, wire_bytes:+0, collective.count:+0 or op.bound:+0, with "
          f"METRIC one of {', '.join(MODULE_METRICS)}; collective.{{{','.join(COLLECTIVE_METRICS)}}}; "
          f"op.{{{','.join(OP_METRICS)}}} (docs/diff.md)")

_RULE = LazyPattern(r"^\s*(?:(op|collective)\s*\.\s*)?([a-z_]+)\s*:\s*([+-]?)\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)"
                    r"\s*(%?)\s*$")


@dataclass(frozen=True)
class Rule:
    """One threshold: fail when ``field`` (of ``scope``) changes past ``threshold`` in ``direction``.

    Attributes:
        scope: ``module``, ``collective`` or ``op``.
        field: the field (``SCOPES[scope]``).
        direction: +1 fails on an increase, -1 on a decrease.
        threshold: a fraction of A's value when ``relative``, else in the field's unit.
        relative: whether the rule had ``%``.
        text: the rule as written (normalised: no spaces).
    """

    scope: str
    field: str
    direction: int
    threshold: float
    relative: bool
    text: str

    @property
    def metric(self) -> str:
        """``roofline_s``, ``collective.count``, ``op.bound``: the METRIC of the grammar."""
        return self.field if self.scope == "module" else f"{self.scope}.{self.field}"


#: What ``resolve`` accepts: a tolerance (fraction), rule text (comma-separated), or rules / rule texts.
RuleSpec = Union[float, str, Rule, Iterable[Union[str, Rule]]]


def _number(x: float) -> str:
    return f"{x:g}"


def parse_rule(text: str) -> Rule:
    """One rule.

    A deprecated metric (``DEPRECATED_METRICS``: ``op.count``) is read as its new name, with a
    ``DeprecationWarning`` saying which.

    Raises:
        hloscope.errors.ConfigError: it does not parse, names an unknown metric, or puts ``%`` on ``bound``
            (the message gives the syntax).
    """
    import warnings

    from hloscope.errors import ConfigError

    m = _RULE.match(text)
    scope = (m.group(1) or "module") if m else ""
    name = m.group(2) if m else ""
    old = f"{scope}.{name}"
    if old in DEPRECATED_METRICS:
        name = DEPRECATED_METRICS[old].split(".", 1)[1]
        warnings.warn(f"rule {text.strip()!r}: {old} is now {DEPRECATED_METRICS[old]} (the ops table's column "
                      f"was renamed); write {DEPRECATED_METRICS[old]}", DeprecationWarning, stacklevel=2)
    if m is None or name not in SCOPES[scope]:
        raise ConfigError(f"bad rule {text.strip()!r}: expected {SYNTAX}")
    _, _, sign, number, pct = m.groups()
    if name == "bound" and pct:
        raise ConfigError(f"bad rule {text.strip()!r}: op.bound counts bound classes (0 compute, 1 memory, "
                          "2 communication): write op.bound:+0, without %")
    value = float(number)
    direction = -1 if sign == "-" else 1
    metric = name if scope == "module" else f"{scope}.{name}"
    normal = f"{metric}:{sign or '+'}{number}{pct}"
    return Rule(scope, name, direction, value / 100 if pct else value, bool(pct), normal)


def parse_rules(texts: str | Rule | Iterable[str | Rule]) -> tuple[Rule, ...]:
    """Rules from text: each string may hold several, separated by commas (``"roofline_s:+5%,flops:+0"``);
    ``Rule`` objects pass through.

    Raises:
        hloscope.errors.ConfigError: a rule that does not parse (see ``parse_rule``); an empty list item.
    """
    if isinstance(texts, (str, Rule)):
        texts = [texts]
    out: list[Rule] = []
    for item in texts:
        if isinstance(item, Rule):
            out.append(item)
            continue
        for part in str(item).split(","):
            out.append(parse_rule(part))
    return tuple(out)


@lru_cache(maxsize=64)
def default_rules(tolerance: float = DEFAULT_TOLERANCE) -> tuple[Rule, ...]:
    """What a tolerance means (the plugin's baselines): each module's roofline time, FLOPs, HBM bytes and wire
    bytes, each collective kind's wire bytes and each significant op's roofline time may grow by ``tolerance``
    (relative); no new collective (kind or op count) and no op whose bound class gets worse. Made once per
    tolerance (a tuple of frozen rules: the plugin asks for the same one every test).

    >>> [r.text for r in default_rules(0.05)]  # doctest: +NORMALIZE_WHITESPACE
    ['roofline_s:+5%', 'flops:+5%', 'hbm_bytes:+5%', 'wire_bytes:+5%', 'collective.wire_bytes:+5%',
     'collective.count:+0', 'op.roofline_s:+5%', 'op.bound:+0']
    """
    pct = _number(round(tolerance * 100, 10)) + "%"
    return parse_rules([f"roofline_s:+{pct}", f"flops:+{pct}", f"hbm_bytes:+{pct}", f"wire_bytes:+{pct}",
                        f"collective.wire_bytes:+{pct}", "collective.count:+0", f"op.roofline_s:+{pct}",
                        "op.bound:+0"])


def parse_tolerance(value: Any, where: str) -> float | tuple[Rule, ...]:
    """A tolerance setting: a fraction (``0.05``, ``5%``: the default rule set at that tolerance) -- returned
    as a float --, or rules (``roofline_s:+5%,flops:+0``, or a list of rules) -- returned as a tuple.

    Raises:
        hloscope.errors.ConfigError: ``invalid value ... from <where>: ...`` naming what was expected.
    """
    from hloscope.errors import ConfigError

    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return parse_fraction(value, where)
    if isinstance(value, Rule) or (not isinstance(value, str) and isinstance(value, Iterable)):
        try:
            return parse_rules(value)
        except ConfigError as err:
            raise ConfigError(f"invalid value {value!r} from {where}: {err}") from None
    text = str(value)
    if ":" not in text:
        try:
            return parse_fraction(text, where)
        except ConfigError as err:
            raise ConfigError(f"{err}, or rules such as roofline_s:+5%,flops:+0 (docs/diff.md)") from None
    try:
        return parse_rules(text)
    except ConfigError as err:
        raise ConfigError(f"invalid value {text!r} from {where}: {err}") from None


def resolve(spec: RuleSpec) -> tuple[Rule, ...]:
    """The rules a setting stands for: a tolerance (float) means ``default_rules``; rule text or rules are
    parsed (``parse_rules``).

    Raises:
        hloscope.errors.ConfigError: text that is neither a fraction nor rules.
    """
    if isinstance(spec, (int, float)) and not isinstance(spec, bool):
        return default_rules(float(spec))
    if isinstance(spec, str) and ":" not in spec:
        return default_rules(parse_fraction(spec, "rules"))
    return parse_rules(spec)  # type: ignore[arg-type]


def describe(spec: RuleSpec) -> str:
    """``tolerance 5%`` for a default rule set, else ``rules roofline_s:+5%,flops:+0``."""
    rules = resolve(spec)
    if rules:
        head = next((r for r in rules if r.scope == "module" and r.field == "roofline_s"), None)
        if head is not None and head.relative and rules == default_rules(head.threshold):
            return f"tolerance {_number(round(head.threshold * 100, 10))}%"
    return "rules " + (",".join(r.text for r in rules) if rules else "(none)")
