"""``hloscope.compare.compare``: op identity, pairing, deltas and errors, on reports written out by hand."""

from __future__ import annotations

import math

import pytest

from hloscope.compare import compare, dims_of, identity
from hloscope.errors import ComparisonError, HloscopeError

from reports_by_hand import op, report


@pytest.mark.parametrize("shape, dims", [
    ("f32[32,128]{1,0}", "[32,128]"),
    ("bf16[32,128]", "[32,128]"),
    ("(f32[8]{0}, s32[], bf16[2,3])", "([8],[],[2,3])"),
    ("f32[]", "[]"),
    ("(f32[4,4]{1,0:T(2,128)}, u8[16]{0})", "([4,4],[16])"),  # tiled layouts hold braces of their own
    ("", ""),
    (None, ""),
])
def test_dims_drop_element_types_and_layouts(shape, dims):
    assert dims_of(shape) == dims


def test_identity_is_opcode_op_name_dims():
    assert identity("fusion", "jit(f)/dot_general", "bf16[32,128]{1,0}") == ("fusion", "jit(f)/dot_general",
                                                                             "[32,128]")


def test_dtype_change_is_the_same_op_changing():
    a = report([op("fusion.1", "fusion", "jit(f)/dot_general", "bf16[32,128]", 1e-6)])
    b = report([op("fusion.7", "fusion", "jit(f)/dot_general", "f32[32,128]", 2e-6)])
    d = compare(a, b)
    (row,) = d.ops.to_dict("records")
    assert row["status"] == "slower" and not row["reshaped"]
    assert (row["dtype_a"], row["dtype_b"]) == ("bf16", "f32")
    assert (row["instruction_a"], row["instruction_b"]) == ("fusion.1", "fusion.7")  # names are no identity
    assert row["roofline_s_rel"] == pytest.approx(1.0)


def test_equal_identities_pair_in_order_of_roofline_time():
    # Two layers with one identity: the larger pairs with the larger, whatever the row order.
    a = report([op("f.1", "fusion", "jit(f)/mul", "f32[8]", 1e-6), op("f.2", "fusion", "jit(f)/mul", "f32[8]", 5e-6)])
    b = report([op("g.2", "fusion", "jit(f)/mul", "f32[8]", 5e-6), op("g.1", "fusion", "jit(f)/mul", "f32[8]", 1e-6)])
    d = compare(a, b)
    assert set(d.ops["status"]) == {"unchanged"}
    assert sorted(zip(d.ops["instruction_a"], d.ops["instruction_b"])) == [("f.1", "g.1"), ("f.2", "g.2")]


def test_other_dims_pair_as_reshaped_then_the_rest_appear_or_vanish():
    a = report([op("dot.1", "dot", "jit(f)/dot_general", "f32[8,256]", 4e-7),
                op("exp.1", "exponential", "jit(f)/exp", "f32[8]", 1e-8)])
    b = report([op("dot.9", "dot", "jit(f)/dot_general", "f32[4,512]", 4e-7),
                op("ag.1", "all-gather", "jit(f)/all_gather", "f32[16]", 2e-8, bound="communication",
                   comm_kind="all-gather", wire_bytes=64.0)])
    d = compare(a, b)
    by = {r["opcode"]: r for r in d.ops.to_dict("records")}
    assert by["dot"]["reshaped"] and by["dot"]["status"] == "changed"  # same time, other dims
    assert by["dot"]["result_shape_a"] == "f32[8,256]" and by["dot"]["result_shape_b"] == "f32[4,512]"
    assert by["exponential"]["status"] == "vanished" and by["all-gather"]["status"] == "appeared"
    assert by["all-gather"]["wire_bytes_delta"] == 64.0
    (c,) = d.collectives.to_dict("records")
    assert (c["comm_kind"], c["count_a"], c["count_b"], c["wire_bytes_b"]) == ("all-gather", 0, 1, 64.0)


def test_trace_ops_without_hlo_pair_by_instruction_name():
    unjoined = {"category": "unjoined", "bound": "", "caveats": "not-in-hlo"}
    a = report([op("custom-kernel.3", "", "", "", math.nan, measured_s=2e-6, **unjoined),
                op("other.1", "", "", "", math.nan, measured_s=1e-6, **unjoined)])
    b = report([op("custom-kernel.3", "", "", "", math.nan, measured_s=3e-6, **unjoined)])
    d = compare(a, b)
    by = {r["op_name"]: r for r in d.ops.to_dict("records")}
    assert by["custom-kernel.3"]["status"] == "slower" and by["custom-kernel.3"]["time_delta"] == pytest.approx(1e-6)
    assert by["other.1"]["status"] == "vanished"


def test_time_is_measured_only_when_both_sides_have_it():
    a = report([op("d.1", "dot", "x", "f32[8]", 1e-6, measured_s=4e-6)])
    b = report([op("d.2", "dot", "x", "f32[8]", 1e-6, measured_s=5e-6)])
    assert compare(a, b).ops["time_delta"].item() == pytest.approx(1e-6)
    static = report([op("d.2", "dot", "x", "f32[8]", 1e-6)])
    row = compare(a, static).ops.iloc[0]
    assert row["time_delta"] == 0.0 and row["status"] == "unchanged"  # roofline times, equal


def test_significance_is_a_share_of_as_total_roofline_time():
    # 100 + 2 + 0.5 = 102.5 ns in A: with 1%, 1.025 ns is the bar; the collective counts whatever its time.
    a = report([op("big", "fusion", "big", "f32[8]", 100e-9), op("mid", "fusion", "mid", "f32[8]", 2e-9),
                op("small", "fusion", "small", "f32[8]", 0.5e-9),
                op("ar", "all-reduce", "ar", "f32[8]", 0.0, bound="communication", comm_kind="all-reduce")])
    d = compare(a, a)
    assert dict(zip(d.ops["op_name"], d.ops["significant"])) == {"big": True, "mid": True, "small": False,
                                                                 "ar": True}
    d = compare(a, a, significant=0.05)
    assert dict(zip(d.ops["op_name"], d.ops["significant"]))["mid"] is False


def test_modules_pair_by_name_or_as_the_only_ones():
    a = report([op("x", "dot", "x", "f32[8]", 1e-6, module="jit_f")])
    b = report([op("x", "dot", "x", "f32[8]", 1e-6, module="jit_f_1")])
    d = compare(a, b)  # one module each: paired whatever the names
    assert list(d.modules["status"]) == ["paired"] and not d.changed
    two_a = report([op("x", "dot", "x", "f32[8]", 1e-6, module="f"), op("y", "dot", "y", "f32[8]", 3e-6, module="g")])
    two_b = report([op("x", "dot", "x", "f32[8]", 1e-6, module="f"), op("z", "dot", "z", "f32[8]", 2e-6, module="h")])
    d = compare(two_a, two_b)
    status = {(m["module_a"], m["module_b"]): m["status"] for m in d.modules.to_dict("records")}
    assert status == {("f", "f"): "paired", ("g", ""): "vanished", ("", "h"): "appeared"}
    h = d.modules[d.modules["module_b"] == "h"].iloc[0]
    assert (h["roofline_s_a"], h["roofline_s_b"]) == (0.0, 2e-6)  # a module A lacks costs nothing in A
    assert any("only in A" in n and "g" in n for n in d.notes)


def test_different_chips_or_no_common_module_cannot_be_compared():
    a = report([op("x", "dot", "x", "f32[8]", 1e-6)], chip="tpu-v5e")
    with pytest.raises(ComparisonError, match="'tpu-v5e'.*'tpu-v5p'"):
        compare(a, report([op("x", "dot", "x", "f32[8]", 1e-6)], chip="tpu-v5p"))
    two = report([op("x", "dot", "x", "f32[8]", 1e-6, module="f"), op("y", "dot", "y", "f32[8]", 1e-6, module="g")])
    other = report([op("x", "dot", "x", "f32[8]", 1e-6, module="p"), op("y", "dot", "y", "f32[8]", 1e-6, module="q")])
    with pytest.raises(ComparisonError, match="no module of A"):
        compare(two, other)
    assert issubclass(ComparisonError, HloscopeError)


def test_the_engine_imports_no_analysis():
    import subprocess
    import sys

    code = ("import sys, hloscope.compare, hloscope.compare.baseline, hloscope.report.diff; "
            "bad = [m for m in sys.modules if m in ('hloscope.analysis', 'hloscope.pytest_plugin', 'hloscope.cost', "
            "'hloscope.parsers')]; print(bad)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_rows_are_sorted_by_time_change_unknown_last_in_pairing_order():
    # Times in units of 2**-30 s (exact in binary, so the tie is one). Deltas by hand: x +3, y -3 (a tie: pairing
    # order, A's larger op first), z +1, u and v unknown (NaN time in B: no delta, so no move), w appeared (+2
    # from nothing).
    n = 2.0**-30
    a = report([op("x.1", "fusion", "x", "f32[8]", 5 * n), op("y.1", "fusion", "y", "f32[8]", 9 * n),
                op("z.1", "fusion", "z", "f32[8]", 1 * n), op("u.1", "fusion", "u", "f32[8]", 4 * n),
                op("v.1", "fusion", "v", "f32[8]", 3 * n)])
    b = report([op("x.2", "fusion", "x", "f32[8]", 8 * n), op("y.2", "fusion", "y", "f32[8]", 6 * n),
                op("z.2", "fusion", "z", "f32[8]", 2 * n), op("u.2", "fusion", "u", "f32[8]", math.nan),
                op("v.2", "fusion", "v", "f32[8]", math.nan), op("w.2", "fusion", "w", "f32[8]", 2 * n)])
    d = compare(a, b)
    assert d.ops["op_name"].tolist() == ["y", "x", "w", "z", "u", "v"]
    assert d.ops["status"].tolist() == ["faster", "slower", "appeared", "slower", "unchanged", "unchanged"]
    assert d.ops["time_delta"].tolist()[:4] == [-3 * n, 3 * n, 2 * n, 1 * n]
    assert d.ops["roofline_s_rel"].tolist()[:4] == pytest.approx([-1 / 3, 3 / 5, math.nan, 1.0], nan_ok=True)


def test_op_rows_are_python_values_however_they_are_asked_for():
    # 40 ops appear beside one pair: asked for a few rows first, the diff makes only those; the rows are the
    # same dicts of Python values as the whole table's.
    import numpy as np

    a = report([op("d.1", "dot", "jit(f)/dot", "f32[8,8]", 1e-6, bound="compute", flops=1024.0)])
    extra = [op(f"e.{i}", "exponential", f"jit(f)/exp{i}", "f32[8]", 1e-9 * (i + 1)) for i in range(40)]
    b = report([op("d.7", "dot", "jit(f)/dot", "f32[8,8]", 1e-6, bound="compute", flops=2048.0), *extra])
    first = compare(a, b)
    assert first.op_column("flops_delta").dtype == np.float64 and first.op_column("reshaped").dtype == bool
    assert first.op_column("status").dtype == object
    (paired,) = first.op_rows_at(np.flatnonzero(first.op_column("status") != "appeared"))
    assert paired["flops_delta"] == 1024.0 and type(paired["flops_delta"]) is float
    assert paired["significant"] is True and paired["reshaped"] is False and paired["status"] == "changed"
    every = compare(a, b).rows("ops")
    # Sorted by time change: the new ops (39 ns first), then the dot (its time unchanged).
    assert len(every) == 41 and [r["op_name"] for r in every[:2]] == ["jit(f)/exp39", "jit(f)/exp38"]
    assert _same_row(every[40], paired)
    assert all(map(_same_row, first.op_rows_at(np.array([2, 40])), [every[2], every[40]]))


def _same_row(x: dict, y: dict) -> bool:
    """Equal dicts, NaN equal to NaN, each value of the same type."""
    return list(x) == list(y) and all(type(x[k]) is type(y[k]) and (x[k] == y[k] or x[k] != x[k] and y[k] != y[k])
                                      for k in x)


def test_a_large_diff_reads_only_what_its_verdict_needs():
    # A baseline-like A (one op) against B with 300 small new ops, one new collective, one new op above the
    # significance bar and one new op of unknown FLOPs (new: no cost was lost): the verdict names the new
    # collective kind and its op, the notes the new large op, and nothing else.
    a = report([op("d.1", "dot", "jit(f)/dot", "f32[8,8]", 1e-6, bound="compute")])
    small = [op(f"e.{i}", "exponential", f"jit(f)/exp{i}", "f32[8]", 1e-12) for i in range(300)]
    b = report([op("d.7", "dot", "jit(f)/dot", "f32[8,8]", 1e-6, bound="compute"), *small,
                op("ar.1", "all-reduce", "jit(f)/psum", "f32[8]", 1e-9, bound="communication",
                   comm_kind="all-reduce", wire_bytes=32.0),
                op("c.1", "convolution", "jit(f)/conv", "f32[4,4]", 5e-7),
                op("cc.1", "custom-call", "jit(f)/opaque", "f32[4]", 1e-12, flops=math.nan)])
    v = compare(a, b).check(["collective.count:+0", "op.roofline_s:+5%"])
    assert [(f.scope, f.subject) for f in v.regressions] == [("collective", "all-reduce"),
                                                             ("collective", "all-reduce jit(f)/psum [8]")]
    assert v.notes == ("new op: convolution jit(f)/conv [4,4] f32 (500 ns, memory-bound)",)
    assert not v.improvements


def test_a_static_reports_coded_columns_compare_as_its_dataframes(fixtures_dir):
    # A static analysis keeps its tables as columns (text coded: categories and codes), which the comparison
    # reads by their codes; the same tables as DataFrames are read value by value. Both give the same diff.
    import hloscope
    from hloscope.result import Report

    a = hloscope.analyze(str(fixtures_dir / "hlo" / "tpu-v5e_collectives.hlo.txt"), chip="tpu-v5e")
    b = hloscope.analyze(str(fixtures_dir / "hlo" / "cpu_collectives.hlo.txt"), chip="tpu-v5e")
    assert hasattr(a.table("ops"), "coded")  # (the coded path is the one under test)

    def frames(r):
        return Report(r.ops.copy(), r.modules.copy(), r.chip, {"static": True}, [])

    coded, plain = compare(a, b), compare(frames(a), frames(b))
    assert len(coded.rows("ops")) > 10 and set(coded.ops["status"]) >= {"appeared", "vanished"}
    assert all(map(_same_row, coded.rows("ops"), plain.rows("ops")))
    assert coded.check(0.05).lines() == plain.check(0.05).lines()
