"""Files written before the ops table's columns were renamed (``count``, ``flags``, ``shape`` ->
``executions``, ``caveats``, ``result_shape``: none may be a ``pandas.DataFrame`` attribute) are read as they
are: report documents ``hloscope.report/2``, baseline files ``hloscope.baseline/2``, and the rule ``op.count``."""

from __future__ import annotations

import json
import math
import warnings

import pytest

from hloscope.compare.baseline import SCHEMA, from_json, to_json
from hloscope.compare.rules import parse_rule
from hloscope.result import Report
from hloscope.roofline.chips import chip_to_dict, get_chip

#: A /2 baseline, as docs/pytest_plugin.md showed it before the rename (one module, one all-reduce).
V2_BASELINE = {
    "schema": "hloscope.baseline/2", "test": "test_flow.py::test_step", "chip": "tpu-v5e",
    "compiled_for": {"platform": "cpu", "device_kind": "cpu", "devices": 8},
    "recorded_with": {"hloscope": "0.1.0", "jax": "0.10.2"}, "significant": 0.01,
    "modules": [{"name": "jit_step", "dtype": "f32", "roofline_s": 9.85584198e-06, "flops": 5652736.5,
                 "transcendentals": 2048, "hbm_bytes": 4204644, "wire_bytes": 538628, "compute_s": 2.87e-08,
                 "memory_s": 5.19e-06, "comm_s": 5.98e-06}],
    "ops": [{"module": "jit_step", "opcode": "all-reduce", "op_name": "jit(step)/dot_general",
             "shape": "f32[8,256]", "category": "collective", "dtype": "f32", "bound": "communication",
             "comm_kind": "all-reduce", "count": 1, "roofline_s": 1.36533333e-07, "flops": 1536,
             "hbm_bytes": 16384, "wire_bytes": 12288, "compute_s": 7.8e-12, "memory_s": 2.0e-08,
             "comm_s": 1.36533333e-07}],
}


def test_a_v2_baseline_reads_under_the_new_names_and_writes_as_v3():
    base = from_json(json.dumps(V2_BASELINE), "old.json")
    assert base.schema == "hloscope.baseline/2"
    (o,) = base.ops
    assert (o["result_shape"], o["executions"]) == ("f32[8,256]", 1) and "shape" not in o and "count" not in o
    assert base.modules[0]["cost_coverage"] is None  # /2 had none: not checked
    rewritten = json.loads(to_json(base))
    assert rewritten["schema"] == SCHEMA == "hloscope.baseline/3"
    assert rewritten["ops"][0]["result_shape"] == "f32[8,256]" and "shape" not in rewritten["ops"][0]
    report = base.to_report()
    assert report.ops["executions"].tolist() == [1.0] and math.isnan(report.modules["cost_coverage"][0])


def test_a_v2_baseline_missing_a_field_names_it_under_its_own_name():
    doc = json.loads(json.dumps(V2_BASELINE))
    del doc["ops"][0]["shape"]
    with pytest.raises(ValueError, match=r"old.json.*'ops\[0\]\.shape'"):
        from_json(json.dumps(doc), "old.json")


def test_a_v2_report_document_reads_under_the_new_names():
    doc = {"schema": "hloscope.report/2", "chip": chip_to_dict(get_chip("tpu-v5e")), "modules": [{"name": "m", "flags": "x"}],
           "ops": [{"module": "m", "instruction": "dot.1", "opcode": "dot", "count": 3, "flags": ["a", "b"],
                    "shape": "f32[2,2]", "roofline_s": 1e-6}]}
    report = Report.from_dict(doc)
    row = report.ops.iloc[0]
    assert (row["executions"], row["caveats"], row["result_shape"]) == (3, "a,b", "f32[2,2]")
    assert report.modules["caveats"][0] == "x"
    assert "flags" not in report.ops.columns and "count" not in report.ops.columns


def test_op_count_rule_is_op_executions_with_a_deprecation_warning():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rule = parse_rule("op.count:+0")
    assert (rule.scope, rule.field) == ("op", "executions")
    assert any(issubclass(w.category, DeprecationWarning) and "op.executions" in str(w.message) for w in caught)
    assert parse_rule("collective.count:+0").field == "count"  # a count of collective ops: not renamed
