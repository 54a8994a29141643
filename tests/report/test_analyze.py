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
    body = traced.ops[(traced.ops["executions"] > 1) & traced.ops["occurrences"].notna()]
    assert len(body) > 0
    assert (body["occurrences"] == body["executions"]).mean() > 0.9


def test_json_is_strict_and_complete(traced):
    doc = json.loads(traced.to_json(), parse_constant=lambda c: pytest.fail(f"non-JSON constant {c}"))
    assert doc["schema"] == "hloscope.report/3" and doc["chip"]["id"] == "h100"
    op = doc["ops"][0]
    for key in ("module", "instruction", "opcode", "category", "op_name", "source", "executions", "flops",
                "transcendentals", "hbm_bytes", "wire_bytes", "comm_kind", "intensity", "compute_s",
                "memory_s", "comm_s", "roofline_s", "bound", "measured_s", "efficiency", "caveats"):
        assert key in op
    assert isinstance(op["caveats"], list)
    for key in ("name", "flops", "transcendentals", "hbm_bytes", "wire_bytes", "roofline_s", "measured_s",
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


def test_measured_mfu_is_the_one_definition(traced):
    from hloscope.roofline.tables import total_mfu

    assert 0 < traced.mfu < 1
    assert traced.mfu == total_mfu(traced.modules, traced.chip, "measured_s")


# ---- compiling outside pytest (hloscope.compile) ----------------------------------------------------------


def test_functions_lowered_and_compiled_are_compiled_and_timed():
    import jax
    import jax.numpy as jnp

    def f(a, b, *, scale=1.0):
        return jnp.tanh(a @ b) * scale

    a, b = jnp.ones((128, 256), jnp.float32), jax.ShapeDtypeStruct((256, 64), jnp.float32)
    plain = hloscope.analyze(f, a, b, scale=2.0, chip="h100")  # not jitted: wrapped in jax.jit
    assert plain.flops >= 2 * 128 * 256 * 64 and plain.compile_s > 0 and plain.analysis_s > 0
    assert plain.compiled_for == {"platform": "cpu", "device_kind": "cpu", "devices": 1}
    lowered = jax.jit(f).lower(a, b)
    from_lowered = hloscope.analyze(lowered, chip="h100")
    from_compiled = hloscope.analyze(lowered.compile(), chip="h100")
    assert from_lowered.flops == from_compiled.flops > 0 and from_lowered.compile_s > 0
    assert from_compiled.compile_s == 0 and from_compiled.compiled_for["platform"] == "cpu"


def test_compile_program_directly():
    import jax
    import jax.numpy as jnp

    from hloscope.compile import CompiledProgram, compile_program
    from hloscope.roofline.chips import get_chip

    prog = compile_program(jax.jit(lambda x: x * 2), (jnp.ones(8),), {}, chip=get_chip("h100"))
    assert isinstance(prog, CompiledProgram) and prog.target == "backend"
    assert prog.hlo_text.startswith("HloModule ") and prog.compiled_for["devices"] == 1
    assert prog.compile_s > 0 and prog.text_s >= 0


def test_what_cannot_be_compiled_says_why():
    import jax
    import jax.numpy as jnp

    x = jnp.ones(4)
    lowered = jax.jit(jnp.sin).lower(x)
    with pytest.raises(TypeError, match=r"hloscope.analyze\(lowered\) takes no example arguments"):
        hloscope.analyze(lowered, x, chip="h100")
    with pytest.raises(TypeError, match=r"hloscope.analyze\(compiled\) takes no example arguments"):
        hloscope.analyze(lowered.compile(), x, chip="h100")
    with pytest.raises(TypeError, match=r"hloscope.analyze\(text_or_path\) takes no example arguments"):
        hloscope.analyze(HLO / "cpu_mlp_1dev.hlo.txt", x, chip="h100")
    with pytest.raises(TypeError, match="cannot analyze a int"):
        hloscope.analyze(3, chip="h100")
    with pytest.raises(hloscope.ConfigError, match="invalid target 'tpu': expected one of backend, deviceless"):
        hloscope.analyze(jnp.sin, x, chip="h100", target="tpu")
    with pytest.raises(hloscope.ConfigError, match="target 'deviceless' compiles for a TPU, but the chip is h100"):
        hloscope.analyze(jnp.sin, x, chip="h100", target="deviceless")
    with pytest.raises(hloscope.ChipRequiredError):
        hloscope.analyze(jnp.sin, x)


def test_compiled_for_round_trips_through_json():
    import jax
    import jax.numpy as jnp

    from hloscope.result import Report

    r = hloscope.analyze(jax.jit(jnp.sin), jnp.ones(4), chip="h100")
    doc = json.loads(r.to_json())
    assert doc["compiled_for"] == {"platform": "cpu", "device_kind": "cpu", "devices": 1}
    back = Report.from_dict(doc)
    assert back.compiled_for == r.compiled_for and back.compile_s == 0.0 and back.analysis_s == 0.0
    del doc["compiled_for"]  # a document of an older writer
    assert Report.from_dict(doc).compiled_for == {}


def test_bad_report_documents_raise_report_schema_errors(tmp_path):
    from hloscope.result import Report

    with pytest.raises(hloscope.ReportSchemaError, match=r"<dict>: expected a report JSON .* found 'x'"):
        Report.from_dict({"schema": "x"})
    with pytest.raises(hloscope.ReportSchemaError, match="no \"chip\" object"):
        Report.from_dict({"schema": "hloscope.report/1"})
    bad = tmp_path / "r.json"
    bad.write_text("{nope")
    with pytest.raises(ValueError, match=r"r\.json: not JSON") as info:  # still a ValueError
        hloscope.load_report(bad)
    assert isinstance(info.value, hloscope.ReportSchemaError) and info.value.path == str(bad)


# The same calls in a plain Python process: no pytest, no plugin. TPU v5e: 1.97e14 FLOP/s (bf16; f32 dots also
# run at it) over 8.1e11 B/s of HBM = a critical intensity of 1.97e14 / 8.1e11 = 243 FLOP/B.
#
# matmul, M = K = N = 4096: FLOPs 2MNK = 2 x 4096^3 = 1.37e11; HBM bytes in bf16 (2 B) 2(MK + KN + MN)
# = 2 x 3 x 4096^2 = 1.01e8, so the intensity is 4096/3 = 1365 FLOP/B -- 5.6x the critical intensity.
# (The CPU backend upcasts a bf16 dot to f32, 4 B: 4096/6 = 683 FLOP/B, still 2.8x.) Compute-bound.
#
# elementwise tanh(a) * b + 1 on 4096 x 4096 bf16: a few FLOPs per element (hloscope counts 10 for the fused
# converts, tanh, multiply and add) against 6 bytes (two reads, one write of 2 B): 10/6 = 1.7 FLOP/B, two orders
# of magnitude under 243. Memory-bound.
PLAIN_SCRIPT = r'''
import sys
import jax, jax.numpy as jnp, hloscope

M = K = N = 4096
critical = 1.97e14 / 8.1e11
assert 2 * M * N * K / (2 * (M * K + K * N + M * N)) > 5 * critical

def matmul(a, b):
    return a @ b

def elementwise(a, b):
    return jnp.tanh(a) * b + 1

a = jnp.ones((M, K), jnp.bfloat16)
b = jax.ShapeDtypeStruct((K, N), jnp.bfloat16)
r = hloscope.analyze(jax.jit(matmul), a, b, chip="tpu-v5e", target="backend")
r.assert_bound("dot", "compute")
dot = r.select("dot")
hand = {2 * M * N * K / (size * (M * K + K * N + M * N)) for size in (2, 4)}  # bf16, or f32 on CPU
assert any(abs(float(dot["intensity"].iloc[0]) - h) < 1e-6 * h for h in hand), dot["intensity"]
assert abs(float(dot["critical_intensity"].iloc[0]) - critical) < 1e-6 * critical
assert r.compiled_for["platform"] == "cpu" and r.compile_s > 0 and r.flops >= 2 * M * N * K
r.assert_max_flops(1.01 * r.flops)
r.assert_no_collective()

e = hloscope.analyze(jax.jit(elementwise), a, a, chip="tpu-v5e", target="backend")
e.assert_bound("fusion", "memory")
try:
    e.assert_bound("fusion", "compute")
except AssertionError as err:
    assert "not compute-bound on tpu-v5e" in str(err), err
else:
    raise SystemExit("elementwise was compute-bound")
assert e.mfu < 0.01

if "deviceless" in sys.argv:
    x = jax.ShapeDtypeStruct((M, K), jnp.bfloat16)
    t = hloscope.analyze(matmul, x, x, chip="tpu-v5e", target="deviceless")
    assert t.compiled_for["platform"] == "tpu" and t.compiled_for["device_kind"] == "TPU v5 lite", t.compiled_for
    t.assert_bound("dot", "compute")
    assert abs(float(t.select("dot")["intensity"].iloc[0]) - M / 3) < 1e-6 * M  # bf16 on the TPU

assert "pytest" not in sys.modules and "hloscope.pytest_plugin" not in sys.modules
print("plain script ok")
'''


@pytest.mark.slow
def test_analyze_and_assert_in_a_plain_python_process():
    import importlib.util
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "XLA_FLAGS"))}
    env.update(JAX_PLATFORMS="cpu", PYTHONPATH=os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]))
    args = ["deviceless"] if importlib.util.find_spec("libtpu") else []
    done = subprocess.run([sys.executable, "-c", PLAIN_SCRIPT, *args], env=env, capture_output=True, text=True,
                          timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-4000:]
    assert "plain script ok" in done.stdout
