"""The one threshold grammar (``METRIC:[+|-]NUMBER[%]``) and the verdicts it gives, on hand-made reports."""

from __future__ import annotations

import pytest

from hloscope.compare import compare
from hloscope.compare.rules import (
    default_rules,
    describe,
    parse_fraction,
    parse_rules,
    parse_tolerance,
    resolve,
)
from hloscope.errors import ConfigError

from reports_by_hand import op, report


@pytest.mark.parametrize("text, expected", [
    ("roofline_s:+5%", ("module", "roofline_s", 1, 0.05, True)),
    ("roofline_s:5%", ("module", "roofline_s", 1, 0.05, True)),
    ("flops:-10%", ("module", "flops", -1, 0.10, True)),
    ("wire_bytes:+0", ("module", "wire_bytes", 1, 0.0, False)),
    ("wire_bytes:+1e6", ("module", "wire_bytes", 1, 1e6, False)),
    ("collective.count:+0", ("collective", "count", 1, 0.0, False)),
    ("collective.wire_bytes:+5%", ("collective", "wire_bytes", 1, 0.05, True)),
    ("op.roofline_s:+5%", ("op", "roofline_s", 1, 0.05, True)),
    ("op.bound:+0", ("op", "bound", 1, 0.0, False)),
    (" op . roofline_s : + 2.5 % ", ("op", "roofline_s", 1, 0.025, True)),
])
def test_rules_parse(text, expected):
    (rule,) = parse_rules(text)
    assert (rule.scope, rule.field, rule.direction, rule.threshold, rule.relative) == pytest.approx(expected)


@pytest.mark.parametrize("bad", ["roofline_s", "roofline_s:+x%", "speed:+5%", "roofline_s:+5%%", "",
                                 "op.mfu:+5%", "collective.flops:+0", "module.flops:+0", "roofline_s:*5%"])
def test_bad_rules_name_the_syntax(bad):
    with pytest.raises(ConfigError, match=r"METRIC:\[\+\|-\]NUMBER\[%\]"):
        parse_rules([bad])


def test_bound_rules_count_classes_not_percent():
    with pytest.raises(ConfigError, match="op.bound:\\+0, without %"):
        parse_rules("op.bound:+5%")


def test_lists_and_normal_form():
    rules = parse_rules(["roofline_s:5%, flops:+0", "op.bound:0"])
    assert [r.text for r in rules] == ["roofline_s:+5%", "flops:+0", "op.bound:+0"]


def test_a_tolerance_is_the_default_rule_set():
    assert [r.text for r in default_rules(0.05)] == [
        "roofline_s:+5%", "flops:+5%", "hbm_bytes:+5%", "wire_bytes:+5%", "collective.wire_bytes:+5%",
        "collective.count:+0", "op.roofline_s:+5%", "op.bound:+0"]
    assert resolve(0.1) == default_rules(0.1) == resolve("10%")
    assert resolve("roofline_s:+5%,flops:+0") == parse_rules(["roofline_s:+5%", "flops:+0"])
    assert describe(0.05) == "tolerance 5%" and describe("12.5%") == "tolerance 12.5%"
    assert describe("flops:+0") == "rules flops:+0"


def test_tolerance_settings_take_fractions_or_rules():
    assert parse_tolerance("5%", "ini") == 0.05 and parse_tolerance("0.1", "ini") == 0.1
    assert parse_tolerance(0.2, "marker") == 0.2
    assert [r.text for r in parse_tolerance("roofline_s:+5%,flops:+0", "ini")] == ["roofline_s:+5%", "flops:+0"]
    assert [r.text for r in parse_tolerance(["wire_bytes:+0"], "marker")] == ["wire_bytes:+0"]
    with pytest.raises(ConfigError, match=r"invalid value '5x' from --opt: expected a fraction such as 0.05 or a "
                                          r"percentage such as 5%, or rules such as roofline_s:\+5%"):
        parse_tolerance("5x", "--opt")
    with pytest.raises(ConfigError, match=r"invalid value 'speed:\+5%' from ini: bad rule"):
        parse_tolerance("speed:+5%", "ini")


def test_fractions():
    assert parse_fraction("5%", "x") == 0.05 and parse_fraction("0.1", "x") == 0.1
    with pytest.raises(ValueError, match=r"invalid value '5x' from --opt: expected a fraction"):
        parse_fraction("5x", "--opt")
    with pytest.raises(ValueError, match="must be >= 0"):
        parse_fraction("-1", "ini")


# -- verdicts --------------------------------------------------------------------------------------------------

A = [op("dot.1", "dot", "jit(f)/dot_general", "f32[64,64]", 100e-9, flops=2 * 64**3, hbm_bytes=3 * 4 * 64**2),
     op("ar.1", "all-reduce", "jit(f)/psum", "f32[64,64]", 20e-9, bound="communication", comm_kind="all-reduce",
        wire_bytes=16384.0),
     op("add.1", "add", "jit(f)/add", "f32[8]", 0.5e-9)]


def with_(rows, **changes):
    """``rows`` with fields of the row named by each keyword (instruction) replaced."""
    out = []
    for r in rows:
        r = dict(r)
        r.update(changes.get(r["instruction"].replace(".", "_"), {}))
        out.append(r)
    return out


def test_relative_rules_and_their_mirror():
    a = report(A)
    # The dot: 100 -> 104 ns; the module: 120.5 -> 124.5 ns (+3.3%).
    b = report(with_(A, dot_1={"roofline_s": 104e-9, "memory_s": 104e-9}))
    d = compare(a, b)
    assert not d.check("roofline_s:+5%").regressed and not d.check("op.roofline_s:+5%").regressed
    (f,) = d.check("op.roofline_s:+3%").regressions
    assert (f.subject, f.field, f.change) == ("dot jit(f)/dot_general [64,64]", "roofline_s", "+4.0%")
    (f,) = d.check("roofline_s:+3%").regressions
    assert f.subject == "total" and f.old == pytest.approx(120.5e-9) and f.new == pytest.approx(124.5e-9)
    # The mirror: a rule on decreases calls the growth an improvement, never a failure.
    v = d.check("op.roofline_s:-3%")
    assert not v.regressed and [x.subject for x in v.improvements] == ["dot jit(f)/dot_general [64,64]"]


def test_absolute_rules_and_float_noise():
    a = report(A)
    same = report(with_(A, dot_1={"flops": 2 * 64**3 * (1 + 1e-12)}))  # summation noise
    assert not compare(a, same).check("flops:+0").regressed
    more = report(with_(A, dot_1={"flops": 2 * 64**3 + 1}))
    (f,) = compare(a, more).check("flops:+0").regressions
    assert f.new - f.old == 1
    assert not compare(a, more).check("flops:+2").regressed


def test_significant_ops_only_and_bound_ranks():
    a = report(A)
    # add.1 holds 0.5 / 120.5 < 1% of A's time: its doubling is for the totals, not for op rules.
    b = report(with_(A, add_1={"roofline_s": 1e-9}, dot_1={"bound": "communication"}))
    v = compare(a, b).check(["op.roofline_s:+5%", "op.bound:+0"])
    assert [(f.subject, f.field, f.change) for f in v.regressions] == [
        ("dot jit(f)/dot_general [64,64]", "bound", "memory -> communication")]
    better = report(with_(A, dot_1={"bound": "compute"}))
    v = compare(a, better).check("op.bound:+0")
    assert not v.regressed and v.improvements[0].change == "memory -> compute"
    assert compare(a, better).check("op.bound:+1").improvements == ()  # a jump of 1 class is within +1


def test_new_collectives_fail_and_are_named():
    a = report(A)
    ag = op("ag.1", "all-gather", "jit(f)/all_gather", "f32[128]", 1e-12, bound="communication",
            comm_kind="all-gather", wire_bytes=256.0)
    d = compare(a, report(A + [ag]))
    v = d.check("collective.count:+0")
    assert [(f.subject, f.field, f.note) for f in v.regressions] == [
        ("all-gather", "new", "new collective kind, 1 op"),
        ("all-gather jit(f)/all_gather [128]", "new", "new all-gather")]
    assert v.lines()[0] == "collective.count:+0: m: all-gather: new collective kind, 1 op (256 B on the wire)"
    # One more op of a kind A has: a new collective too; and the op gone again is an improvement.
    ar2 = op("ar.2", "all-reduce", "jit(f)/psum2", "f32[8]", 1e-12, bound="communication", comm_kind="all-reduce",
             wire_bytes=32.0)
    v = compare(a, report(A + [ar2])).check("collective.count:+0")
    assert [(f.field, f.old, f.new) for f in v.regressions[:1]] == [("count", 1, 2)]
    assert v.regressions[1].subject == "all-reduce jit(f)/psum2 [8]"
    v = compare(report(A + [ag]), a).check(["collective.count:+0", "collective.wire_bytes:+5%"])
    assert not v.regressed and [(f.subject, f.change) for f in v.improvements] == [("all-gather", "1 -> 0 ops")]


def test_a_rule_on_a_field_one_side_lacks_is_broken():
    a = report(A)
    lines = compare(a, a).check(["measured_s:+5%", "op.measured_s:+5%", "mfu:-1%"]).lines()
    assert len(lines) == 3 and all("not known on both sides" in line for line in lines)


def test_notes_name_ops_gone_and_new():
    a = report(A)
    b = report([r for r in A if r["instruction"] != "dot.1"] + [
        op("conv.1", "convolution", "jit(f)/conv", "f32[8,8]", 50e-9)])
    v = compare(a, b).check(0.05)
    assert any(n.startswith("op gone: dot jit(f)/dot_general [64,64] (was 100 ns, memory-bound)") for n in v.notes)
    assert any(n.startswith("new op: convolution jit(f)/conv [8,8] f32 (50 ns") for n in v.notes)


def test_failure_message_table():
    a = report(A)
    b = report(with_(A, dot_1={"roofline_s": 200e-9, "memory_s": 200e-9}))
    v = compare(a, b).check(0.05)
    text = v.format("base.json")
    head, cols, *rows = text.splitlines()
    assert head == "2 roofline regressions against base.json (chip tpu-v5e, tolerance 5%):"
    assert cols.split() == ["what", "metric", "baseline", "now", "change"]
    # total 120.5 -> 220.5 ns: +83.0%; the dot 100 -> 200 ns: +100.0%.
    assert rows[0].split() == ["total", "roofline", "time", "120", "ns", "220", "ns", "+83.0%"]
    assert rows[1].split()[-5:] == ["100", "ns", "200", "ns", "+100.0%"]


def test_reshaped_ops_are_notes_not_op_rules():
    # The same op with other dims (a resharded program): another identity, so op rules do not compare it --
    # the large -> small program's matmul turning memory-bound is no regression -- but the notes say it.
    a = report([op("dot.1", "dot", "jit(f)/dot_general", "f32[4096,4096]", 1e-3, bound="compute")])
    b = report([op("dot.1", "dot", "jit(f)/dot_general", "f32[64,64]", 1e-7, bound="memory")])
    v = compare(a, b).check(0.05)
    assert not v.regressed and [f.subject for f in v.improvements] == ["total"]
    assert v.notes == ("reshaped: dot jit(f)/dot_general [4096,4096]->[64,64] (1 ms -> 100 ns, compute-bound -> "
                       "memory-bound)",)
