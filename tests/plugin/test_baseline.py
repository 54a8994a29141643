"""Baselines (``hloscope.compare.baseline``) of real HLO, their JSON, what the engine calls a regression against
one, old ``hloscope.baseline/1`` files -- and one verdict for ``hloscope diff --fail-on`` and the plugin."""

from __future__ import annotations

import dataclasses
import json
import os

import pytest

import hloscope
from hloscope.cli import main
from hloscope.compare import baseline as bl
from hloscope.compare import compare, default_rules, dims_of
from hloscope.errors import HloscopeError
from hloscope.units import change, quantity

from conftest import HLO, PLUGIN

CHIP = "tpu-v5e"


@pytest.fixture(scope="module")
def report():
    return hloscope.analyze(str(HLO / "tpu-v5e_mlp_sharded.hlo.txt"), chip=CHIP)


@pytest.fixture(scope="module")
def mlp(report) -> bl.Baseline:
    return bl.record(report, test="t::x")


def check(baseline: bl.Baseline, current, rules=0.05):
    """The plugin's comparison: the baseline is A, the run B (``HloscopeFixture.check_baseline``)."""
    return compare(baseline.to_report(current.chip), current, significant=baseline.significant).check(rules)


def scaled(r, factor: float, *, keys=("roofline_s",)):
    """``r`` with module totals ``keys`` times ``factor`` (ops untouched)."""
    modules = r.modules.copy()
    for k in keys:
        modules[k] = modules[k] * factor
    return dataclasses.replace(r, modules=modules)


def with_op(r, index: int, **values):
    ops = r.ops.copy()
    for k, v in values.items():
        ops.loc[index, k] = v
    return dataclasses.replace(r, ops=ops)


def test_baseline_of_real_hlo(report, mlp):
    assert mlp.chip == CHIP and mlp.roofline_s > 0 and mlp.schema == bl.SCHEMA
    kinds = {o["comm_kind"] for o in mlp.ops if o["comm_kind"]}
    assert kinds == {"all-reduce"}
    # Identity is opcode + op_name + dims: element types and layouts are not part of it; XLA instruction names
    # are not even stored.
    for o in mlp.ops:
        dims = dims_of(o["result_shape"])
        assert dims.startswith(("[", "(")) and not any(t in dims for t in ("f32", "bf16", "{"))
        assert "instruction" not in o
    total = float(report.modules["roofline_s"].sum())
    assert all(o["roofline_s"] >= mlp.significant * total or o["comm_kind"] for o in mlp.ops)
    # Every collective is kept: as many as the HLO text has all-reduce instructions.
    text = (HLO / "tpu-v5e_mlp_sharded.hlo.txt").read_text()
    n_all_reduce = sum(1 for line in text.splitlines() if " all-reduce(" in line or " all-reduce-start(" in line)
    assert sum(1 for o in mlp.ops if o["comm_kind"] == "all-reduce" and not o["opcode"].endswith("-done")) == \
        n_all_reduce
    doc = bl.to_json(mlp)
    assert "fusion." not in doc and "all-reduce." not in doc  # no renumbered instruction names in the file


def test_the_file_is_a_subset_of_the_report_json(report, mlp):
    doc = json.loads(bl.to_json(mlp))
    rep = json.loads(report.to_json())
    assert set(doc["modules"][0]) <= set(rep["modules"][0]) and set(doc["ops"][0]) <= set(rep["ops"][0])
    assert tuple(doc["modules"][0]) == bl.STORED_FIELDS["modules"] and tuple(doc["ops"][0]) == bl.STORED_FIELDS["ops"]
    for key in ("flops", "hbm_bytes", "wire_bytes"):
        assert doc["modules"][0][key] == pytest.approx(rep["modules"][0][key], rel=1e-9)


def test_significant_share_keeps_collectives_and_significant_ops(report, mlp):
    everything = bl.record(report, significant=0.0)
    assert len(everything.ops) > len(mlp.ops)
    only_collectives = bl.record(report, significant=0.5)  # no single op holds half the time
    assert [o for o in only_collectives.ops] == [o for o in mlp.ops if o["comm_kind"]]


def test_json_round_trip_is_stable(report, mlp, tmp_path):
    again = bl.from_json(bl.to_json(mlp))
    assert again == mlp and bl.to_json(again) == bl.to_json(mlp)
    v = check(again, report)
    assert not v.regressions and not v.improvements
    doc = json.loads(bl.to_json(mlp))
    assert doc["schema"] == "hloscope.baseline/3" and list(doc)[:3] == ["schema", "test", "chip"]
    path = tmp_path / "a" / "b.json"
    assert bl.write_baseline(path, mlp) is True
    assert bl.write_baseline(path, mlp) is False  # identical content: file untouched
    assert os.listdir(path.parent) == ["b.json"]  # no temporary file left behind
    assert bl.read_baseline(path) == again
    assert bl.read_baseline(tmp_path / "missing.json") is None


def test_a_failed_write_leaves_the_old_file_whole(mlp, tmp_path, monkeypatch):
    path = tmp_path / "b.json"
    path.write_text("previous\n")

    def boom(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(bl.os, "replace", boom)
    with pytest.raises(OSError, match="disk full"):
        bl.write_baseline(path, mlp)
    assert path.read_text() == "previous\n" and os.listdir(tmp_path) == ["b.json"]


def test_totals_beyond_tolerance_regress_and_below_improve(report, mlp):
    v = check(mlp, scaled(report, 1.04))
    assert not v.regressed and not v.improvements
    v = check(mlp, scaled(report, 1.10))
    assert v.regressed and [(f.subject, f.metric) for f in v.regressions] == [("total", "roofline time")]
    assert "+10.0%" in v.format("base.json") and "base.json" in v.format("base.json")
    assert not check(mlp, scaled(report, 1.10), 0.2).regressed
    v = check(mlp, scaled(report, 0.8, keys=("roofline_s", "flops", "hbm_bytes")))
    assert not v.regressed and {f.metric for f in v.improvements} == {"roofline time", "FLOPs", "HBM bytes"}


def test_op_regression_names_the_op_and_its_numbers(report, mlp):
    worst = int(report.ops["roofline_s"].idxmax())
    row = report.ops.loc[worst]
    v = check(mlp, with_op(report, worst, roofline_s=row["roofline_s"] * 2, dtype="f32" if row["dtype"] != "f32"
                           else "bf16"))
    (f,) = v.regressions
    assert f.metric == "roofline time" and f.change == "+100.0%"
    new_dtype = "f32" if row["dtype"] != "f32" else "bf16"
    assert row["op_name"][-30:] in f.subject and f"{row['dtype']}->{new_dtype}" in f.subject
    msg = v.format()
    assert row["op_name"][-30:] in msg and quantity(row["roofline_s"] * 2, "s") in msg


def test_bound_getting_worse_fails_and_better_passes(report, mlp):
    stored = {(o["opcode"], o["op_name"], dims_of(o["result_shape"])) for o in mlp.ops}
    index = next(i for i, r in report.ops.iterrows() if r["bound"] == "memory"
                 and (r["opcode"], r["op_name"], dims_of(r["result_shape"])) in stored)
    for new_bound, fails in (("communication", True), ("compute", False)):
        v = check(mlp, with_op(report, index, bound=new_bound))
        assert v.regressed is fails
        assert any(f.metric == "bound" and f.change == f"memory -> {new_bound}"
                   for f in (v.regressions if fails else v.improvements))


def test_new_collective_kind_or_count_fails_without_tolerance(report, mlp):
    ag = {c: report.ops.iloc[0][c] for c in report.ops.columns} | {
        "instruction": "all-gather.99", "opcode": "all-gather", "op_name": "jit(f)/all_gather",
        "result_shape": "bf16[8,128]", "category": "collective", "bound": "communication", "roofline_s": 1e-12,
        "flops": 0.0, "hbm_bytes": 10.0, "wire_bytes": 1.0, "comm_kind": "all-gather"}
    import pandas as pd

    cur = dataclasses.replace(report, ops=pd.concat([report.ops, pd.DataFrame([ag])], ignore_index=True))
    v = check(mlp, cur, 10.0)
    assert v.regressed
    assert ("all-gather", "new") in [(f.subject, f.field) for f in v.regressions]
    assert any("jit(f)/all_gather" in f.subject for f in v.regressions)  # the op is named
    ar = report.ops[report.ops["comm_kind"] == "all-reduce"].iloc[0].to_dict() | {
        "instruction": "all-reduce.99", "op_name": "jit(f)/another_psum", "roofline_s": 1e-12, "wire_bytes": 1.0}
    more = dataclasses.replace(report, ops=pd.concat([report.ops, pd.DataFrame([ar])], ignore_index=True))
    v = check(mlp, more, 10.0)
    assert [f.field for f in v.regressions] == ["count", "new"]
    # and a collective gone is an improvement
    v = check(bl.record(cur), report)
    assert not v.regressed and any(f.subject == "all-gather" for f in v.improvements)


@pytest.mark.parametrize("text, reason", [
    ("{not json", "not JSON: Expecting property name enclosed in double quotes (at line 1, column 2)"),
    ("<<<<<<< HEAD\n{}\n=======\n{}\n>>>>>>> x\n", "merge conflict"),
    ("[]", "expected a JSON object, got list"),
    ('{"schema": "other/9"}', "schema is 'other/9'"),
    ('{"schema": "hloscope.baseline/2", "chip": "x", "modules": [{}], "ops": []}', "'modules[0].name'"),
    ('{"schema": "hloscope.baseline/1", "chip": "x", "totals": {"roofline_s": 1}}', "missing or mistyped field"),
])
def test_corrupted_baselines_name_the_file(tmp_path, text, reason):
    path = tmp_path / "t.json"
    path.write_text(text)
    with pytest.raises(bl.BaselineError) as info:
        bl.read_baseline(path)
    assert str(path) in str(info.value) and reason in str(info.value)
    assert not isinstance(info.value, bl.OutdatedBaselineError)
    assert isinstance(info.value, HloscopeError) and hloscope.BaselineError is bl.BaselineError
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


def test_quantities_and_changes():
    assert quantity(3.126e-6, "s") == "3.13 µs" and quantity(1.5e6, "B") == "1.5 MB"
    assert change(2.0, 3.0) == "+50.0%" and change(0, 1) == "new"


# -- old files ---------------------------------------------------------------------------------------------------

# A dot f32[128,256] x f32[256,64] and a negate f32[8]; B adds an all-reduce of the negate's result over 2 devices.
PROGRAM_A = """HloModule jit_step, entry_computation_layout={(f32[128,256]{1,0}, f32[256,64]{1,0}, f32[8]{0})->(f32[128,64]{1,0}, f32[8]{0})}

%add (x: f32[], y: f32[]) -> f32[] {
  %x = f32[] parameter(0)
  %y = f32[] parameter(1)
  ROOT %sum = f32[] add(f32[] %x, f32[] %y)
}

ENTRY %main (p0: f32[128,256], p1: f32[256,64], p2: f32[8]) -> (f32[128,64], f32[8]) {
  %p0 = f32[128,256]{1,0} parameter(0)
  %p1 = f32[256,64]{1,0} parameter(1)
  %p2 = f32[8]{0} parameter(2)
  %dot.1 = f32[128,64]{1,0} dot(f32[128,256]{1,0} %p0, f32[256,64]{1,0} %p1), lhs_contracting_dims={1}, rhs_contracting_dims={0}, metadata={op_name="jit(step)/dot_general"}
  %negate.1 = f32[8]{0} negate(f32[8]{0} %p2), metadata={op_name="jit(step)/neg"}
  ROOT %t = (f32[128,64]{1,0}, f32[8]{0}) tuple(%dot.1, %negate.1)
}
"""
PROGRAM_B = PROGRAM_A.replace(
    "  ROOT %t = (f32[128,64]{1,0}, f32[8]{0}) tuple(%dot.1, %negate.1)",
    '  %all-reduce.1 = f32[8]{0} all-reduce(f32[8]{0} %negate.1), replica_groups={{0,1}}, to_apply=%add, '
    'metadata={op_name="jit(step)/psum"}\n'
    "  ROOT %t = (f32[128,64]{1,0}, f32[8]{0}) tuple(%dot.1, %all-reduce.1)")

# By hand, on tpu-v5e (HBM 810 GB/s, 197 TFLOP/s; docs/chips.md): the dot does 2*128*256*64 FLOPs and moves
# 4*(128*256 + 256*64 + 128*64) bytes, memory-bound; the negate 8 FLOPs and 2*4*8 bytes (below 1%: not stored).
DOT_FLOPS, DOT_BYTES = 2 * 128 * 256 * 64, 4 * (128 * 256 + 256 * 64 + 128 * 64)
NEG_FLOPS, NEG_BYTES = 8, 2 * 4 * 8
HBM, PEAK = 8.1e11, 1.97e14


def v1_document(**op_changes) -> dict:
    """A ``hloscope.baseline/1`` file of PROGRAM_A as the old writer laid it out, numbers from the formulas."""
    op = {"opcode": "dot", "op_name": "jit(step)/dot_general", "dims": "[128,64]", "dtype": "f32",
          "category": "matmul", "bound": "memory", "roofline_s": DOT_BYTES / HBM, "flops": DOT_FLOPS,
          "hbm_bytes": DOT_BYTES, "wire_bytes": 0, "instances": 1} | op_changes
    return {"schema": "hloscope.baseline/1", "test": "test_step.py::test_step", "chip": CHIP, "compiled_for": {},
            "recorded_with": {"hloscope": "0.1.0"}, "significant": 0.01,
            "totals": {"roofline_s": (DOT_BYTES + NEG_BYTES) / HBM, "flops": DOT_FLOPS + NEG_FLOPS,
                       "hbm_bytes": DOT_BYTES + NEG_BYTES, "wire_bytes": 0,
                       "compute_s": (DOT_FLOPS + NEG_FLOPS) / PEAK, "memory_s": (DOT_BYTES + NEG_BYTES) / HBM,
                       "comm_s": 0},
            "collectives": {}, "ops": [op]}


def test_an_exact_v1_file_is_read(tmp_path):
    path = tmp_path / "old.json"
    path.write_text(json.dumps(v1_document(), indent=2))
    old = bl.read_baseline(path)
    assert old.schema == "hloscope.baseline/1" and old.chip == CHIP
    (module,) = old.modules
    assert (module["flops"], module["hbm_bytes"], module["wire_bytes"]) == (DOT_FLOPS + NEG_FLOPS,
                                                                               DOT_BYTES + NEG_BYTES, 0)
    (dot,) = old.ops
    assert (dot["opcode"], dims_of(dot["result_shape"]), dot["hbm_bytes"]) == ("dot", "[128,64]", DOT_BYTES)
    program = tmp_path / "a.hlo.txt"
    program.write_text(PROGRAM_A)
    now = hloscope.analyze(str(program), chip=CHIP)
    d = compare(old.to_report(now.chip), now)
    assert not d.check(0.05).regressed and not d.check(0.05).improvements
    row = d.ops[d.ops["opcode"] == "dot"].iloc[0]
    assert row["status"] == "unchanged" and row["roofline_s_b"] == pytest.approx(DOT_BYTES / HBM)
    assert path.read_text() == json.dumps(v1_document(), indent=2)  # reading never rewrites


@pytest.mark.parametrize("changes, why", [({"instances": 2}, "sums 2 ops"), ({"dims": ""}, "has no dimensions")])
def test_an_inexact_v1_file_is_refused_with_the_command_that_re_records_it(tmp_path, changes, why):
    path = tmp_path / "old.json"
    path.write_text(json.dumps(v1_document(**changes)))
    with pytest.raises(bl.OutdatedBaselineError) as info:
        bl.read_baseline(path)
    msg = str(info.value)
    assert why in msg and "hloscope.baseline/1" in msg
    assert msg.endswith("re-record it with:  pytest --hloscope-update test_step.py::test_step")
    assert isinstance(info.value, bl.BaselineError)


STEP_TEST = """
import pathlib

def test_step(hloscope):
    report = hloscope.analyze(pathlib.Path("program.txt").read_text().strip())
    hloscope.check_baseline(report)
"""


def test_plugin_refuses_an_inexact_v1_file_and_update_replaces_it(pytester):
    pytester.makeini(f"[pytest]\nhloscope_chip = {CHIP}\n")
    pytester.makepyfile(test_step=STEP_TEST)
    (pytester.path / "a.hlo.txt").write_text(PROGRAM_A)
    (pytester.path / "program.txt").write_text(str(pytester.path / "a.hlo.txt"))
    path = pytester.path / ".hloscope" / "test_step" / "test_step.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(v1_document(instances=2)))
    result = pytester.runpytest(*PLUGIN, "-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*AssertionError: hloscope baseline .hloscope/test_step/test_step.json was written by an older hloscope "
        "(hloscope.baseline/1) and cannot be read exactly: *sums 2 ops*; re-record it with:  pytest "
        "--hloscope-update test_step.py::test_step",
        "test_step.py::test_step  tpu-v5e  * baseline not comparable"])
    result = pytester.runpytest(*PLUGIN, "-p", "no:cacheprovider", "--hloscope-update")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["test_step.py::test_step  tpu-v5e  * baseline updated"])
    assert json.loads(path.read_text())["schema"] == "hloscope.baseline/3"
    pytester.runpytest(*PLUGIN, "-p", "no:cacheprovider").assert_outcomes(passed=1)
    # An exact old file is compared as it is.
    path.write_text(json.dumps(v1_document()))
    result = pytester.runpytest(*PLUGIN, "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["test_step.py::test_step  tpu-v5e  * +0.0%  ok"])


# -- one verdict: `hloscope diff --fail-on` and the plugin's baseline check ----------------------------------------

TP4 = HLO / "cpu_mlp_sharded.hlo.txt"  # mesh data=2 x model=4
TP2 = HLO / "cpu_mlp_tp2.hlo.txt"  # mesh data=4 x model=2

# Expected verdicts, from the programs (not from hloscope): TP4 -> TP2 more than doubles the wire bytes of the
# weight-gradient all-reduce (526,340 B x 2(2-1)/2 -> 1,051,652 B x 2(4-1)/4, tests/report/test_diff.py) and
# of the program (538,628 B -> 1,581,574 B with the activation all-reduce's 12,288 B -> 4,096 B); TP2 -> TP4 is
# the way back: fewer FLOPs and HBM bytes (XLA's cost analysis in the fixtures' *.xla_cost.json: 6,100,481 ->
# 5,719,041 FLOPs, 8,080,524 -> 4,204,684 B) and wire bytes, the same number of all-reduces, and every large op
# with other per-device dims, so reshaped (not compared on its own); a program against itself changes nothing;
# an all-reduce added to a program is a new collective, which no tolerance lets through.
PAIRS = {
    "tp4_to_tp2": (TP4, TP2, True),
    "tp2_to_tp4": (TP2, TP4, False),
    "identical": (TP4, TP4, False),
    "a_collective_appears": ("a.hlo.txt", "b.hlo.txt", True),
    "a_collective_vanishes": ("b.hlo.txt", "a.hlo.txt", False),
}


@pytest.mark.parametrize("pair", list(PAIRS))
@pytest.mark.parametrize("tolerance", ["5%", ",".join(r.text for r in default_rules(0.05))])
def test_diff_and_the_baseline_check_give_one_verdict(pytester, capsys, pair, tolerance):
    (pytester.path / "a.hlo.txt").write_text(PROGRAM_A)
    (pytester.path / "b.hlo.txt").write_text(PROGRAM_B)
    a, b, regressed = (pytester.path / p if isinstance(p, str) else p for p in PAIRS[pair][:2]), \
        None, PAIRS[pair][2]
    a, b = list(a)
    # 1. The CLI, with the default rules written out as --fail-on rules.
    fail_on = [arg for r in default_rules(0.05) for arg in ("--fail-on", r.text)]
    assert main(["diff", str(a), str(b), "--chip", CHIP, "--format", "json", *fail_on]) == (1 if regressed else 0)
    err = capsys.readouterr().err
    assert ("fail-on:" in err) is regressed
    # 2. The plugin: record a baseline of A, then check B against it.
    pytester.makeini(f"[pytest]\nhloscope_chip = {CHIP}\nhloscope_tolerance = {tolerance}\n")
    pytester.makepyfile(test_step=STEP_TEST)
    program = pytester.path / "program.txt"
    program.write_text(str(a))
    pytester.runpytest(*PLUGIN, "-p", "no:cacheprovider", "--hloscope-update").assert_outcomes(passed=1)
    program.write_text(str(b))
    result = pytester.runpytest(*PLUGIN, "-p", "no:cacheprovider")
    result.assert_outcomes(**({"failed": 1} if regressed else {"passed": 1}))
    if regressed:
        result.stdout.fnmatch_lines(["*roofline regression* against .hloscope/test_step/test_step.json*",
                                     "test_step.py::test_step  tpu-v5e  *REGRESSED (*)"])


def test_a_baseline_file_is_a_side_of_hloscope_diff(report, mlp, tmp_path, capsys):
    path = tmp_path / "test_x.json"
    bl.write_baseline(path, mlp)
    program = str(HLO / "tpu-v5e_mlp_sharded.hlo.txt")
    d = hloscope.diff(str(path), program, chip=CHIP, rules=0.05)
    assert not d.verdict.regressed and set(d.ops.loc[d.ops["significant"], "status"]) == {"unchanged"}
    large = str(HLO / "tpu-v5e_mlp_large.hlo.txt")
    fail_on = [arg for r in default_rules(0.05) for arg in ("--fail-on", r.text)]
    assert main(["diff", str(path), large, "--chip", CHIP, "--format", "json", *fail_on]) == 1
    assert "fail-on: roofline_s:+5%: jit_mlp_train_step: roofline_s" in capsys.readouterr().err
