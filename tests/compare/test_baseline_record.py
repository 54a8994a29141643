"""``hloscope.compare.baseline`` on hand-made reports: what is stored, and a baseline back as report A."""

from __future__ import annotations

import math
import pickle

import pytest

from hloscope.compare import baseline as bl
from hloscope.compare import compare
from hloscope.errors import BaselineError, HloscopeError

from reports_by_hand import op, report

# 100 + 2 + 0.5 ns: with the default 1%, the bar is 1.025 ns; the collective is kept whatever its time.
ROWS = [op("big.1", "fusion", "jit(f)/big", "bf16[64,64]{1,0}", 100e-9, flops=1e6, hbm_bytes=8192),
        op("mid.1", "fusion", "jit(f)/mid", "f32[8]", 2e-9),
        op("small.1", "fusion", "jit(f)/small", "f32[8]", 0.5e-9),
        op("ar.1", "all-reduce", "jit(f)/psum", "f32[8]", 0.0, bound="communication", comm_kind="all-reduce",
           wire_bytes=32.0)]


def test_record_keeps_collectives_and_significant_ops():
    b = bl.record(report(ROWS))
    assert [o["op_name"] for o in b.ops] == ["jit(f)/psum", "jit(f)/big", "jit(f)/mid"]  # sorted by identity
    assert b.roofline_s == pytest.approx(102.5e-9)
    big = next(o for o in b.ops if o["op_name"] == "jit(f)/big")
    assert big["result_shape"] == "bf16[64,64]{1,0}" and big["flops"] == 1_000_000 and isinstance(big["flops"], int)
    assert "measured_s" not in big and "instruction" not in big  # run-to-run noise and renumbered names
    assert set(big) == set(bl.STORED_FIELDS["ops"])


def test_record_keeps_ops_of_unknown_cost_and_skips_trace_ops_without_hlo():
    # Below the 1.025 ns bar: an op of unknown FLOPs (kept: a later run compares its cost), the -done half of an
    # async collective (not a collective op of its own), a trace op that joined no instruction (no identity).
    rows = ROWS + [op("cc.1", "custom-call", "jit(f)/opaque", "f32[4]", 0.1e-9, flops=math.nan),
                   op("ag.2", "all-gather-done", "jit(f)/gather", "f32[16]", 0.0, bound="communication",
                      comm_kind="all-gather"),
                   op("trace.1", "", "", "", 5e-9, category="unjoined")]
    b = bl.record(report(rows))
    assert [o["op_name"] for o in b.ops] == ["jit(f)/psum", "jit(f)/opaque", "jit(f)/big", "jit(f)/mid"]
    assert next(o for o in b.ops if o["opcode"] == "custom-call")["flops"] is None


def test_unknown_numbers_are_null_and_read_back_as_nan():
    rows = [dict(ROWS[0], compute_s=math.nan)]
    b = bl.record(report(rows))
    assert b.ops[0]["compute_s"] is None and '"compute_s": null' in bl.to_json(b)
    again = bl.from_json(bl.to_json(b)).to_report()
    assert math.isnan(again.ops["compute_s"].iloc[0]) and again.ops["instruction"].iloc[0] == ""


def test_numbers_keep_nine_digits():
    b = bl.record(report([dict(ROWS[0], roofline_s=1.0 / 3 * 1e-6)]))
    assert b.ops[0]["roofline_s"] == 3.33333333e-07


def test_a_baseline_compares_as_report_a():
    a = report(ROWS)
    stored = bl.from_json(bl.to_json(bl.record(a)))
    d = compare(stored.to_report(), a)
    status = dict(zip(d.ops["op_name"], d.ops["status"]))
    assert status == {"jit(f)/big": "unchanged", "jit(f)/mid": "unchanged", "jit(f)/psum": "unchanged",
                      "jit(f)/small": "appeared"}  # not stored: B's
    assert not d.check(0.0).regressed and not d.check(0.0).improvements


def _same(x, y) -> bool:
    return x == y or (isinstance(x, float) and isinstance(y, float) and math.isnan(x) and math.isnan(y))


def test_baseline_report_rows_are_the_report_tables_rows():
    """The plugin compares against ``BaselineReport`` (rows without DataFrames): the same rows, value for value
    and type for type, as the DataFrames of ``to_report``, and the same diff."""
    from hloscope._columns import column_list
    from hloscope.compare.engine import rows

    a = report(ROWS)
    stored = bl.from_json(bl.to_json(bl.record(a)))
    full = stored.to_report(a.chip)
    lean = bl.BaselineReport(stored, a.chip)
    for table in ("ops", "modules"):
        expected, got = rows(getattr(full, table)), lean.table_rows(table)
        assert len(expected) == len(got) > 0
        for e, g in zip(expected, got):
            assert list(e) == list(g)
            assert all(_same(e[k], g[k]) and type(e[k]) is type(g[k]) for k in e), (e, g)
        columns = lean.table_columns(table)  # (what the comparison reads of a baseline: the same, by column)
        assert list(columns) == list(getattr(full, table).columns)
        for name, values in columns.items():
            want = column_list(getattr(full, table), name)
            assert all(_same(w, g) and type(w) is type(g) for w, g in zip(want, values, strict=True)), name
        asked = ("roofline_s", "no-such-column", "opcode" if table == "ops" else "name")  # (what the engine asks)
        some = lean.table_columns(table, asked)
        assert list(some) == [asked[0], asked[2]]  # (those the table has, in the order asked)
        assert all(_same(w, g) for c in some for w, g in zip(columns[c], some[c], strict=True))
    for rules in (0.05, "roofline_s:+0,flops:+0,op.bound:+0"):
        assert compare(lean, a, rules=rules).to_json() == compare(full, a, rules=rules).to_json()
    assert lean.ops.equals(full.ops)  # the DataFrames, when asked for


def test_unknown_chip_and_errors_pickle():
    b = bl.record(report(ROWS))
    b = bl.Baseline("tpu-v99", b.modules, b.ops)
    with pytest.raises(BaselineError, match="tpu-v99"):
        b.to_report()
    for err in (bl.BaselineError("x.json", "bad"), bl.OutdatedBaselineError("x.json", "old", "t.py::t")):
        again = pickle.loads(pickle.dumps(err))
        assert type(again) is type(err) and str(again) == str(err)
    assert issubclass(bl.BaselineError, HloscopeError) and BaselineError is bl.BaselineError


def test_rows_are_the_tables_records_as_python_values(fixtures_dir):
    """``engine.rows`` (a list per column) gives what one object array of the whole table gives, value for value
    and type for type: Python floats, ints, bools and strings, no numpy scalars."""
    import hloscope
    from hloscope.compare.engine import rows

    static = hloscope.analyze(fixtures_dir / "hlo" / "cpu_collectives.hlo.txt", chip="tpu-v5e")
    traced = hloscope.analyze(fixtures_dir / "profile" / "cpu_train_step")
    checked = 0
    for df in (static.ops, static.modules, traced.ops, traced.modules, traced.steps):
        cols = list(df.columns)
        expected = [dict(zip(cols, values)) for values in df.to_numpy(dtype=object).tolist()]
        got = rows(df)
        assert len(got) == len(expected) == len(df) > 0
        for e, g in zip(expected, got):
            assert list(e) == list(g)
            assert all(_same(e[k], g[k]) and type(e[k]) is type(g[k]) for k in e), (e, g)
            assert not any(type(v).__module__ == "numpy" for v in g.values())
        checked += 1
        some = cols[::3]
        for part, whole in zip(rows(df, some), got, strict=True):
            assert list(part) == some and all(_same(part[c], whole[c]) for c in some)
    assert checked == 5
