"""A cost that became unknown fails the comparison under any rule set, never reads as an improvement
(hloscope.compare.verdict, ``UNKNOWN_COST``): hloscope leaves unknown costs out of the module totals, so an op
whose cost rule stopped working lowers B's totals."""

from __future__ import annotations

import math

import hloscope
from hloscope.compare import compare
from hloscope.compare.baseline import from_json, record, to_json
from hloscope.compare.verdict import UNKNOWN_COST

from reports_by_hand import op, report


def _pair(b_dot_roofline_s: float, coverage_a: float = 1.0, coverage_b: float = 1.0):
    a = report([op("dot.1", "dot", "jit(f)/dot", "f32[64,64]", 2e-6, flops=524288.0, bound="compute"),
                op("add.2", "add", "jit(f)/add", "f32[64,64]", 1e-6),
                op("mul.3", "multiply", "jit(f)/mul", "f32[64,64]", 1e-6)])
    unknown = math.isnan(b_dot_roofline_s)
    b = report([op("dot.7", "dot", "jit(f)/dot", "f32[64,64]", b_dot_roofline_s,
                   flops=math.nan if unknown else 524288.0, bound="" if unknown else "compute"),
                op("add.8", "add", "jit(f)/add", "f32[64,64]", 1e-6),
                op("mul.9", "multiply", "jit(f)/mul", "f32[64,64]", 1e-6)])
    # The totals leave the unknown op out (as hloscope.roofline.tables.modules_frame does).
    b.modules.loc[0, ["roofline_s", "compute_s", "flops"]] = [2e-6, 0.0, 0.0]
    a.modules["cost_coverage"], b.modules["cost_coverage"] = coverage_a, coverage_b
    return a, b


def test_an_op_whose_cost_became_unknown_is_a_regression():
    a, b = _pair(math.nan, 1.0, 2 / 3)
    v = compare(a, b).check("roofline_s:+5%")
    assert v.regressed
    rules = [f.rule for f in v.regressions]
    assert rules.count(UNKNOWN_COST) == 2  # the module's coverage fell (1 -> 2/3), and the dot's cost is gone
    assert {f.scope for f in v.regressions if f.rule == UNKNOWN_COST} == {"module", "op"}
    line = next(f.line() for f in v.regressions if f.scope == "module")
    assert "cost became unknown" in line and "1 instruction no longer costed" in line
    # B's lower roofline total is not an improvement that hides the loss: it says why it is lower.
    assert all("a cost became unknown" in f.note for f in v.improvements if f.scope == "module")


def test_without_rules_it_is_a_note_not_a_failure():
    a, b = _pair(math.nan, 1.0, 2 / 3)
    v = compare(a, b).check(())
    assert not v.regressed and any("cost became unknown" in n for n in v.notes)


def test_a_known_cost_on_both_sides_passes_and_a_rising_coverage_is_fine():
    a, b = _pair(2e-6, 0.5, 1.0)
    assert compare(a, b).check("roofline_s:+5%").regressed is False


def test_a_baseline_keeps_ops_of_unknown_cost_and_the_coverage():
    a, b = _pair(math.nan, 1.0, 2 / 3)
    base_b = from_json(to_json(record(b, significant=0.9)))
    # significant=0.9 keeps no known op (each < 90% of the total), but the op of unknown cost is kept.
    assert [(o["opcode"], o["roofline_s"]) for o in base_b.ops] == [("dot", None)]
    assert base_b.modules[0]["cost_coverage"] == round(2 / 3, 9)
    base_a = from_json(to_json(record(a, significant=0.0)))
    v = hloscope.diff(base_a.to_report(), base_b.to_report(), rules="roofline_s:+5%").verdict
    assert any(f.rule == UNKNOWN_COST for f in v.regressions)
