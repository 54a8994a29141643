"""Memory footprints against XLA's own: ``compiled.memory_analysis()`` of the same executable is the expected
value (argument, output and alias bytes exact; temp bytes within 10%, issue #18), and sizes by hand where a
module is written here."""

from __future__ import annotations

import json
import math

import pytest

import hloscope
from hloscope.cli import main as cli_main
from hloscope.memory import footprint
from hloscope.roofline.chips import get_chip

jax = pytest.importorskip("jax")
jnp = jax.numpy


def _mlp(params, x):
    for w in params:
        x = jnp.tanh(x @ w)
    return jnp.sum(x ** 2)


def _scanned(ws, x, remat):
    def layer(h, w):
        return jnp.tanh(jnp.tanh(h @ w) @ w.T), None

    h, _ = jax.lax.scan(jax.checkpoint(layer) if remat else layer, x, ws)
    return jnp.sum(h ** 2)


def _sgd(params, grads):
    return jax.tree.map(lambda p, g: p - 0.1 * g, params, grads)


f32 = jnp.float32
MLP_ARGS = ([jax.ShapeDtypeStruct((512, 512), f32)] * 3, jax.ShapeDtypeStruct((128, 512), f32))
SCAN_ARGS = (jax.ShapeDtypeStruct((8, 256, 512), f32), jax.ShapeDtypeStruct((256, 256), f32))
PROGRAMS = {
    "mlp_grad": lambda: jax.jit(jax.value_and_grad(_mlp)).lower(*MLP_ARGS),
    "scan_grad": lambda: jax.jit(jax.grad(lambda w, x: _scanned(w, x, False))).lower(*SCAN_ARGS),
    "scan_grad_checkpoint": lambda: jax.jit(jax.grad(lambda w, x: _scanned(w, x, True))).lower(*SCAN_ARGS),
    "sgd_donated": lambda: jax.jit(_sgd, donate_argnums=0).lower(MLP_ARGS[0], MLP_ARGS[0]),
}


@pytest.fixture(scope="module")
def compiled_cpu():
    return {name: build().compile() for name, build in PROGRAMS.items()}


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_cpu_footprint_matches_memory_analysis(compiled_cpu, name):
    compiled = compiled_cpu[name]
    xla = compiled.memory_analysis()
    fp = footprint(hloscope.parse_hlo(compiled.as_text()))
    assert (fp.argument_bytes, fp.output_bytes, fp.alias_bytes) == (
        xla.argument_size_in_bytes, xla.output_size_in_bytes, xla.alias_size_in_bytes)
    assert fp.temp_bytes == pytest.approx(xla.temp_size_in_bytes, rel=0.10)
    assert fp.scheduled and fp.total_bytes == (xla.argument_size_in_bytes + xla.output_size_in_bytes
                                               - xla.alias_size_in_bytes + fp.temp_bytes)


def test_footprint_and_its_model(compiled_cpu):
    """``footprint_and_model`` (what the report's forked child calls, holding the model to its exit) gives the
    footprint ``footprint`` gives, and the model it was made of: the buffer assignment whose temp bytes it reports,
    over the walk's buffers."""
    from hloscope.memory.footprint import footprint_and_model

    module = hloscope.parse_hlo(compiled_cpu["scan_grad"].as_text())
    made, (liveness, assignment) = footprint_and_model(module, get_chip("h100"))
    assert made.to_dict() == footprint(module, get_chip("h100")).to_dict()
    assert assignment.temp_bytes == made.temp_bytes > 0
    assert made.argument_bytes == sum(b.size_bytes for b in liveness.buffers if b.kind == "parameter")


def test_donation_is_aliasing(compiled_cpu):
    # Three donated f32[512,512] parameters are the three outputs: 3 * 512 * 512 * 4 bytes aliased.
    fp = footprint(hloscope.parse_hlo(compiled_cpu["sgd_donated"].as_text()))
    assert fp.alias_bytes == 3 * 512 * 512 * 4


def test_checkpoint_lowers_the_peak_where_xla_says_it_does(compiled_cpu):
    plain, remat = compiled_cpu["scan_grad"], compiled_cpu["scan_grad_checkpoint"]
    xla_plain, xla_remat = plain.memory_analysis().temp_size_in_bytes, remat.memory_analysis().temp_size_in_bytes
    assert xla_remat < 0.5 * xla_plain  # XLA: the scan no longer saves each layer's activations
    ours_plain = footprint(hloscope.parse_hlo(plain.as_text())).temp_bytes
    ours_remat = footprint(hloscope.parse_hlo(remat.as_text())).temp_bytes
    assert ours_remat < 0.5 * ours_plain


def test_the_peak_names_its_instruction_and_buffers(compiled_cpu):
    fp = footprint(hloscope.parse_hlo(compiled_cpu["mlp_grad"].as_text()), get_chip("tpu-v5e"))
    assert fp.peak_instruction and fp.top_buffers
    sizes = [b.size_bytes for b in fp.top_buffers]
    assert sizes == sorted(sizes, reverse=True) and len(sizes) <= 10
    assert {b.kind for b in fp.top_buffers} >= {"parameter", "temp"}
    assert any(b.result_shape == "f32[512,512]" and b.op_name.startswith("params") for b in fp.top_buffers)
    assert fp.fits and fp.hbm_capacity_bytes == get_chip("tpu-v5e").hbm_capacity_bytes


#: A module that cannot fit a 16 GiB chip: one f32[65536,65536] parameter (2**34 bytes = 16 GiB) and its
#: negation (another 16 GiB).
TOO_BIG = """HloModule too_big, is_scheduled=true, entry_computation_layout={(f32[65536,65536]{1,0})->f32[65536,65536]{1,0}}

ENTRY %main (p: f32[65536,65536]) -> f32[65536,65536] {
  %p = f32[65536,65536]{1,0} parameter(0)
  ROOT %n = f32[65536,65536]{1,0} negate(%p), metadata={op_name="jit(f)/neg" source_file="model.py" source_line=7}
}
"""


def test_a_program_too_big_for_the_chip_does_not_fit(tmp_path, capsys):
    fp = footprint(hloscope.parse_hlo(TOO_BIG), get_chip("tpu-v5e"))
    assert (fp.argument_bytes, fp.output_bytes, fp.temp_bytes) == (2 ** 34, 2 ** 34, 0)
    assert fp.fits is False and fp.verdict.startswith("does not fit by 16 GiB")  # 32 GiB of 16 GiB
    path = tmp_path / "too_big.hlo.txt"
    path.write_text(TOO_BIG)
    with pytest.raises(AssertionError, match=r"too_big: needs 32 GiB, does not fit by 16 GiB"):
        hloscope.analyze(path, chip="tpu-v5e").assert_fits()
    assert cli_main(["memory", str(path), "--chip", "tpu-v5e", "--fail-if-not-fits"]) == 1
    assert "does not fit" in capsys.readouterr().err
    assert cli_main(["memory", str(path), "--chip", "tpu-v5p", "--fail-if-not-fits"]) == 0  # 95 GiB


def test_report_json_keeps_the_footprint(compiled_cpu, tmp_path, capsys):
    from hloscope.result import Report

    report = hloscope.analyze(compiled_cpu["mlp_grad"], chip="tpu-v5e")
    doc = json.loads(report.to_json())
    (mem,) = doc["memory"]
    assert mem["temp_bytes"] == compiled_cpu["mlp_grad"].memory_analysis().temp_size_in_bytes and mem["fits"]
    assert doc["modules"][0]["peak_bytes"] == mem["total_bytes"]  # the modules table agrees with "memory"
    again = Report.from_dict(doc)
    assert again.memory[0].total_bytes == report.memory[0].total_bytes == again.peak_bytes
    assert again.modules["peak_bytes"].isna().all() or again.modules["peak_bytes"][0] == again.peak_bytes
    path = tmp_path / "m.hlo.txt"
    path.write_text(compiled_cpu["mlp_grad"].as_text())
    assert cli_main(["memory", str(path), "--chip", "h100", "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["schema"] == "hloscope.memory/1" and out["modules"][0]["argument_bytes"] == 3 * 2 ** 20 + 2 ** 18


def test_a_baseline_stores_peak_bytes_and_a_rule_compares_it(compiled_cpu):
    from hloscope.compare import compare
    from hloscope.compare.baseline import from_json, record, to_json

    small = hloscope.analyze(compiled_cpu["scan_grad_checkpoint"], chip="tpu-v5e")
    large = hloscope.analyze(compiled_cpu["scan_grad"], chip="tpu-v5e")
    base = from_json(to_json(record(small)))
    assert base.modules[0]["peak_bytes"] == small.memory[0].total_bytes
    record(large)  # fills large's peak_bytes, as the plugin does before comparing
    verdict = compare(base.to_report(), large).check("peak_bytes:+5%")
    assert [f.field for f in verdict.regressions] == ["peak_bytes"]


def test_unscheduled_modules_say_so():
    text = TOO_BIG.replace(", is_scheduled=true", "")
    fp = footprint(hloscope.parse_hlo(text))
    assert not fp.scheduled and any("not scheduled" in n for n in fp.notes) and math.isnan(fp.headroom_bytes)


@pytest.mark.slow
def test_tpu_argument_and_output_bytes_match_memory_analysis():
    pytest.importorskip("libtpu")
    from jax.experimental import topologies
    from jax.sharding import SingleDeviceSharding

    topo = topologies.get_topology_desc("v5e:2x2", "tpu")
    dev = SingleDeviceSharding(topo.devices[0])

    def three(x):  # a 3-element output tuple: a 512-byte index table on TPU
        return x + 1, jnp.sum(x, axis=0), x.T @ x

    arg = jax.ShapeDtypeStruct((256, 128), f32, sharding=dev)
    compiled = jax.jit(three).lower(arg).compile()
    xla = compiled.memory_analysis()
    fp = footprint(hloscope.parse_hlo(compiled.as_text()))
    assert (fp.argument_bytes, fp.output_bytes, fp.alias_bytes) == (
        xla.argument_size_in_bytes, xla.output_size_in_bytes, xla.alias_size_in_bytes)


@pytest.mark.slow
def test_tpu_checkpointed_scan_temp_matches_memory_analysis():
    # A 16-layer scanned bf16 MLP step, large enough that activations dominate XLA:TPU's fixed scratch: temp
    # within 10% of XLA's, and jax.checkpoint lowering it (XLA: 1.61 GB -> 134 MB on v5e) shows in both.
    pytest.importorskip("libtpu")
    from jax.experimental import topologies
    from jax.sharding import SingleDeviceSharding

    dev = SingleDeviceSharding(topologies.get_topology_desc("v5e:2x2", "tpu").devices[0])
    ws = jax.ShapeDtypeStruct((16, 1024, 4096), jnp.bfloat16, sharding=dev)
    x = jax.ShapeDtypeStruct((4096, 1024), jnp.bfloat16, sharding=dev)
    temps = {}
    for remat in (False, True):
        compiled = jax.jit(jax.grad(lambda w, h, r=remat: _scanned(w, h, r))).lower(ws, x).compile()
        xla = compiled.memory_analysis()
        fp = footprint(hloscope.parse_hlo(compiled.as_text()))
        assert (fp.argument_bytes, fp.output_bytes) == (xla.argument_size_in_bytes, xla.output_size_in_bytes)
        assert fp.temp_bytes == pytest.approx(xla.temp_size_in_bytes, rel=0.10)
        temps[remat] = (xla.temp_size_in_bytes, fp.temp_bytes)
    assert temps[True][0] < 0.5 * temps[False][0] and temps[True][1] < 0.5 * temps[False][1]
