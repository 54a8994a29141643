"""``hloscope.analyze`` on real inputs: static HLO and the bundled CPU trace."""

import json
import math
from pathlib import Path

import pytest

import hloscope
from hloscope.roofline.tables import MODULE_COLUMNS, OP_COLUMNS

ROOT = Path(__file__).resolve().parents[2]
TRACE = ROOT / "fixtures" / "profile" / "cpu_train_step"
HLO = ROOT / "fixtures" / "hlo"


@pytest.fixture(scope="module")
def traced():
    return hloscope.analyze(TRACE, chip="h100")  # any chip: these tests check the join, not the scores


def test_static_report_columns_and_totals():
    r = hloscope.analyze(HLO / "cpu_mlp_1dev.hlo.txt", chip="h100")
    assert list(r.ops.columns) == OP_COLUMNS and list(r.modules.columns) == MODULE_COLUMNS
    xla = json.loads((HLO / "cpu_mlp_1dev.xla_cost.json").read_text())
    # No loops, no collectives: the module's FLOPs are XLA's own cost_analysis() number.
    assert r.modules.flops[0] == pytest.approx(xla["flops"], rel=1e-3)
    assert r.ops.flops.sum() == pytest.approx(r.modules.flops[0])
    assert r.ops.measured_s.isna().all() and r.coverage == {"static": True}


def test_static_report_from_a_dump_dir_and_a_compiled():
    import jax
    import jax.numpy as jnp

    r = hloscope.analyze(ROOT / "fixtures" / "dump" / "cpu_small", chip="a100")
    assert len(r.ops) > 0
    compiled = jax.jit(lambda a, b: a @ b).lower(jnp.ones((64, 32)), jnp.ones((32, 16))).compile()
    r = hloscope.analyze(compiled, chip="a100")
    dots = r.ops[r.ops.category == "matmul"]
    assert dots.flops.sum() == 2 * 64 * 32 * 16


def test_trace_joins_every_op_and_counts_steps(traced):
    cov = traced.coverage
    assert cov["steps"] == 3 and cov["devices"] == 8  # fixtures/profile/README.md
    assert cov["joined_time_fraction"] >= 0.99
    assert cov["unjoined_ops"] == 0


def test_trace_times_fit_inside_the_steps(traced):
    from hloscope.parsers._xspace import read_xspace, step_events

    x = read_xspace(next(TRACE.rglob("*.xplane.pb")))
    steps = step_events(x)
    mean_step_s = (steps.duration_ps.mean()) / 1e12
    # Per device and step, busy op time cannot exceed the step's wall time.
    assert 0 < traced.modules.measured_s[0] <= mean_step_s


def test_loop_body_ops_run_trip_count_times(traced):
    # The scanned body runs known_trip_count times per step: its ops occur that often per device per step.
    body = traced.ops[(traced.ops["count"] > 1) & traced.ops["occurrences"].notna()]
    assert len(body) > 0
    assert (body["occurrences"] == body["count"]).mean() > 0.9


def test_json_is_strict_and_complete(traced):
    doc = json.loads(traced.to_json(), parse_constant=lambda c: pytest.fail(f"non-JSON constant {c}"))
    assert doc["schema"] == "hloscope.report/1" and doc["chip"]["id"] == "h100"
    op = doc["ops"][0]
    for key in ("module", "instruction", "opcode", "category", "op_name", "source", "count", "flops",
                "transcendentals", "bytes_accessed", "comm_bytes", "comm_kind", "intensity", "compute_s",
                "memory_s", "comm_s", "roofline_s", "bound", "measured_s", "efficiency", "flags"):
        assert key in op
    assert isinstance(op["flags"], list)
    for key in ("name", "flops", "transcendentals", "bytes_accessed", "comm_bytes", "roofline_s", "measured_s",
                "mfu"):
        assert key in doc["modules"][0]
    assert 0 < doc["modules"][0]["mfu"] < 1 and "joined_time_fraction" in doc["coverage"]


def test_source_lines_come_from_the_stack_frame_table():
    r = hloscope.analyze(HLO / "cpu_mlp_1dev.hlo.txt", chip="h100")
    sources = [s for s in r.ops.source if s]
    assert sources and all(s.split(":")[0].endswith("make_hlo_fixtures.py") for s in sources)
    assert all(int(s.rsplit(":", 1)[1]) > 0 for s in sources)


def test_unknown_chip_lists_the_known_ones():
    with pytest.raises(ValueError, match="tpu-v5e"):
        hloscope.analyze(HLO / "cpu_mlp_1dev.hlo.txt", chip="tpu-v9")


def test_hlo_without_chip_is_an_error():
    with pytest.raises(ValueError, match="--chip"):
        hloscope.analyze(HLO / "cpu_mlp_1dev.hlo.txt")


def test_nan_free_efficiency_for_timed_ops(traced):
    timed = traced.ops[traced.ops.measured_s > 0]
    assert not timed.efficiency.isna().any()
    assert all(math.isfinite(v) for v in timed.efficiency)
