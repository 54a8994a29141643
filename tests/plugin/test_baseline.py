"""``hloscope.baseline``: summaries of real HLO, their JSON, and what ``compare`` calls a regression."""

from __future__ import annotations

import dataclasses
import json
import os

import pytest

from hloscope import baseline as bl
from hloscope.pytest_plugin import _analyze_text
from hloscope.roofline.chips import get_chip

from conftest import HLO


@pytest.fixture(scope="module")
def analysis():
    return _analyze_text((HLO / "tpu-v5e_mlp_sharded.hlo.txt").read_text(), get_chip("tpu-v5e"))


@pytest.fixture(scope="module")
def mlp(analysis) -> bl.Summary:
    return analysis.summary(test="t::x")


def scaled(s: bl.Summary, factor: float, *, keys=("roofline_s",), ops=False) -> bl.Summary:
    totals = {k: v * factor if k in keys else v for k, v in s.totals.items()}
    entries = tuple(dataclasses.replace(e, roofline_s=e.roofline_s * factor) for e in s.ops) if ops else s.ops
    return dataclasses.replace(s, totals=totals, ops=entries)


def test_summary_of_real_hlo(mlp):
    assert mlp.chip == "tpu-v5e" and mlp.roofline_s > 0
    assert set(mlp.collectives) == {"all-reduce"} and mlp.collectives["all-reduce"]["ops"] >= 1
    # Identity is opcode + op_name + dims: element types are not part of it, XLA instruction names never are.
    for e in mlp.ops:
        assert e.dims.startswith(("[", "(")) and not any(t in e.dims for t in ("f32", "bf16", "{"))
    assert len({e.key for e in mlp.ops}) == len(mlp.ops)
    assert all(e.roofline_s >= mlp.significant * mlp.roofline_s or e.comm_kind for e in mlp.ops)
    text = bl.to_json(mlp)
    assert "fusion." not in text and "all-reduce." not in text  # no renumbered instruction names in the file


def test_trim_keeps_collectives_and_significant_ops(analysis, mlp):
    full = analysis.summary(0.0, test="t::x")
    assert len(full.ops) > len(mlp.ops) and bl.trim(full, bl.DEFAULT_SIGNIFICANT) == mlp
    assert {e.key for e in bl.trim(full, 0.5).ops} == {e.key for e in mlp.ops if e.comm_kind}


def test_json_round_trip_is_stable(mlp, tmp_path):
    again = bl.from_json(bl.to_json(mlp))
    assert bl.to_json(again) == bl.to_json(mlp)
    assert not bl.compare(again, mlp).regressions and not bl.compare(again, mlp).improvements
    doc = json.loads(bl.to_json(mlp))
    assert doc["schema"] == bl.SCHEMA and list(doc)[:3] == ["schema", "test", "chip"]
    path = tmp_path / "a" / "b.json"
    assert bl.write_baseline(path, mlp) is True
    assert bl.write_baseline(path, mlp) is False  # identical content: file untouched
    assert os.listdir(path.parent) == ["b.json"]  # no temporary file left behind
    assert bl.read_baseline(path) == again
    assert bl.read_baseline(tmp_path / "missing.json") is None


def test_totals_beyond_tolerance_regress_and_below_improve(mlp):
    c = bl.compare(mlp, scaled(mlp, 1.04))
    assert not c.failed and not c.improvements
    c = bl.compare(mlp, scaled(mlp, 1.10))
    assert c.failed and [(d.subject, d.metric) for d in c.regressions] == [("total", "roofline time")]
    assert "+10.0%" in c.format("base.json") and "base.json" in c.format("base.json")
    assert not bl.compare(mlp, scaled(mlp, 1.10), tolerance=0.2).failed
    c = bl.compare(mlp, scaled(mlp, 0.8, keys=("roofline_s", "flops", "hbm_bytes")))
    assert not c.failed and {d.metric for d in c.improvements} == {"roofline time", "FLOPs", "HBM bytes"}


def test_op_regression_names_the_op_and_its_numbers(mlp):
    worst = max(mlp.ops, key=lambda e: e.roofline_s)
    slower = dataclasses.replace(worst, roofline_s=worst.roofline_s * 2, dtype="f32")
    cur = dataclasses.replace(mlp, ops=tuple(slower if e is worst else e for e in mlp.ops))
    c = bl.compare(mlp, cur)
    (d,) = c.regressions
    assert d.metric == "roofline time" and d.change == "+100.0%"
    assert worst.op_name in d.subject and f"{worst.dtype}->f32" in d.subject
    msg = c.format()
    assert worst.op_name in msg and bl.format_quantity(worst.roofline_s * 2, "s") in msg


def test_bound_getting_worse_fails_and_better_passes(mlp):
    e = next(e for e in mlp.ops if e.bound == "memory")
    for new_bound, fails in (("communication", True), ("compute", False)):
        cur = dataclasses.replace(mlp, ops=tuple(dataclasses.replace(x, bound=new_bound) if x is e else x
                                                 for x in mlp.ops))
        c = bl.compare(mlp, cur)
        assert c.failed is fails
        assert any(d.metric == "bound" and d.change == f"memory -> {new_bound}"
                   for d in (c.regressions if fails else c.improvements))


def test_new_collective_kind_or_count_fails_without_tolerance(mlp):
    ag = bl.OpEntry("all-gather", "jit(f)/all_gather", "[8,128]", "bf16", "collective", "communication",
                    1e-12, 0, 10, 1, "all-gather")
    cur = dataclasses.replace(mlp, ops=mlp.ops + (ag,),
                              collectives={**mlp.collectives, "all-gather": {"ops": 1, "wire_bytes": 1}})
    c = bl.compare(mlp, cur, tolerance=10.0)
    assert c.failed
    assert ("all-gather", "new") in [(d.subject, d.metric) for d in c.regressions]
    assert any("jit(f)/all_gather" in d.subject for d in c.regressions)  # the op is named
    more = {k: {"ops": v["ops"] + 1, "wire_bytes": v["wire_bytes"]} for k, v in mlp.collectives.items()}
    c = bl.compare(mlp, dataclasses.replace(mlp, collectives=more), tolerance=10.0)
    assert [d.metric for d in c.regressions] == ["ops"]
    # and a collective gone is an improvement
    c = bl.compare(cur, mlp)
    assert not c.failed and any(d.subject == "all-gather" for d in c.improvements)


@pytest.mark.parametrize("text, reason", [
    ("{not json", "not JSON: Expecting property name enclosed in double quotes (at line 1, column 2)"),
    ("<<<<<<< HEAD\n{}\n=======\n{}\n>>>>>>> x\n", "merge conflict"),
    ("[]", "expected a JSON object, got list"),
    ('{"schema": "other/9"}', "schema is 'other/9'"),
    ('{"schema": "hloscope.baseline/1", "chip": "x", "totals": {"roofline_s": 1}}', "missing or mistyped field"),
])
def test_corrupted_baselines_name_the_file(tmp_path, text, reason):
    path = tmp_path / "t.json"
    path.write_text(text)
    with pytest.raises(bl.BaselineError) as info:
        bl.read_baseline(path)
    assert str(path) in str(info.value) and reason in str(info.value)
    assert path.read_text() == text


def test_missing_op_field_is_named(mlp):
    doc = json.loads(bl.to_json(mlp))
    del doc["ops"][1]["bound"]
    with pytest.raises(bl.BaselineError, match=r"'ops\[1\]\.bound'"):
        bl.from_json(json.dumps(doc), "x.json")


def test_baseline_paths():
    assert bl.baseline_path(".hloscope", "tests/test_a.py::test_b").as_posix() == ".hloscope/tests/test_a/test_b.json"
    assert bl.baseline_path("d", "t.py::C::test_b[x/y: 1]", name="fwd").as_posix() == "d/t/C/test_b[x_y__1].fwd.json"
    long = bl.baseline_path("d", "t.py::test_" + "x" * 300).name
    assert len(long) < 140 and long.endswith(".json")


def test_dims_and_fractions_and_quantities():
    assert bl.dims_of("f32[32,128]{1,0}") == "[32,128]"
    assert bl.dims_of("(f32[8]{0}, s32[], bf16[2,3])") == "([8],[],[2,3])"
    assert bl.parse_fraction("5%", "x") == 0.05 and bl.parse_fraction("0.1", "x") == 0.1
    with pytest.raises(ValueError, match=r"invalid value '5x' from --opt: expected a fraction"):
        bl.parse_fraction("5x", "--opt")
    with pytest.raises(ValueError, match="must be >= 0"):
        bl.parse_fraction("-1", "ini")
    assert bl.format_quantity(3.126e-6, "s") == "3.13 µs" and bl.format_quantity(1.5e6, "B") == "1.5 MB"
    assert bl.format_change(2.0, 3.0) == "+50.0%" and bl.format_change(0, 1) == "new"
