"""f32 dots and convolutions at ``precision=HIGH`` / ``HIGHEST`` on TPU: 3 and 6 bf16 MXU passes (issue #20).

jax 0.10.2's ``jax.lax.Precision`` docstring: on TPU, DEFAULT "performs float32 computations in bfloat16" (one
pass), HIGH "in 3 bfloat16 passes", HIGHEST "in 6 bfloat16". hloscope keeps the math FLOPs (XLA's
``cost_analysis()`` too: 2*M*N*K whatever the precision) and, on TPU chips only, charges
``compute_s = passes * FLOPs / bf16 peak`` (``hloscope/roofline/score.py``, Notes 1a), flagged
``precision-passes:<n>``; the cost carries ``operand-precision:<high|highest>`` (``hloscope/cost/dot.py``).

Expected numbers by hand: TPU v5e's bf16 peak is 1.97e14 FLOP/s (hloscope's chip table, Google Cloud TPU v5e
docs: 197 TFLOPs bf16), so a [128,256] x [256,512] f32 dot (2*128*512*256 = 33554432 FLOPs) takes
6 * 33554432 / 1.97e14 s at HIGHEST and 3 * 33554432 / 1.97e14 s at HIGH.
"""

from __future__ import annotations

import importlib.util
import os

import pytest

import hloscope
from hloscope.cost import OpCost
from hloscope.roofline.chips import get_chip
from hloscope.roofline.score import precision_passes, score

V5E_BF16 = 1.97e14  # FLOP/s, hloscope's chip table (tpu-v5e, peak_flops_per_s.bf16)
M, K, N = 128, 256, 512
FLOPS = 2 * M * N * K  # 33554432

#: The fusion libtpu 0.0.52 compiles ``jnp.dot(f32[128,256], f32[256,512], precision=HIGHEST)`` to for a
#: deviceless v5e (``test_compiled_highest_dot_on_v5e`` below compiles it), reduced to the instructions that
#: matter: the dot is a convolution ``dim_labels=bf_io->bf`` carrying ``operand_precision``.
_HLO = """HloModule jit__lambda, entry_computation_layout={(f32[128,256]{1,0:T(8,128)}, f32[256,512]{1,0:T(8,128)})->f32[128,512]{1,0:T(8,128)}}

%fused_computation (param_0: f32[128,256], param_1: f32[256,512]) -> f32[128,512] {
  %param_0 = f32[128,256]{1,0:T(8,128)} parameter(0)
  %param_1 = f32[256,512]{1,0:T(8,128)} parameter(1)
  ROOT %convolution.1 = f32[128,512]{1,0:T(8,128)} convolution(%param_0, %param_1), dim_labels=bf_io->bf, PRECISION
}

ENTRY %main.1 (a.1: f32[128,256], b.1: f32[256,512]) -> f32[128,512] {
  %a.1 = f32[128,256]{1,0:T(8,128)} parameter(0)
  %b.1 = f32[256,512]{1,0:T(8,128)} parameter(1)
  ROOT %fusion = f32[128,512]{1,0:T(8,128)} fusion(%a.1, %b.1), kind=kOutput, calls=%fused_computation
}
"""


def _text(precision: str | None, dtype: str = "f32") -> str:
    text = _HLO.replace(", PRECISION", f", operand_precision={precision}" if precision else "")
    return text.replace("f32[", f"{dtype}[") if dtype != "f32" else text


def _caveats(row) -> set[str]:
    return {f for f in str(row["caveats"]).split(",") if f}


def _fusion_row(report):
    ops = report.ops
    return ops[ops["instruction"] == "fusion"].iloc[0]


@pytest.mark.parametrize(("precision", "passes"), [("{highest,highest}", 6), ("{high,high}", 3), (None, 1),
                                                   ("{default,default}", 1)])
def test_tpu_compute_time_counts_the_passes(precision, passes):
    row = _fusion_row(hloscope.analyze(_text(precision), chip="tpu-v5e"))
    assert row["flops"] == FLOPS  # the math FLOPs, whatever the precision
    assert row["compute_s"] == pytest.approx(passes * FLOPS / V5E_BF16, rel=1e-12)
    caveats = _caveats(row)
    if passes > 1:
        assert f"precision-passes:{passes}" in caveats
        assert f"operand-precision:{precision.strip('{}').split(',')[0]}" in caveats
    else:
        assert not any(c.startswith(("precision-passes", "operand-precision")) for c in caveats)


def test_mixed_operand_precisions_take_the_lower():
    row = _fusion_row(hloscope.analyze(_text("{highest,high}"), chip="tpu-v5e"))
    assert row["compute_s"] == pytest.approx(3 * FLOPS / V5E_BF16, rel=1e-12)
    assert "precision-passes:3" in _caveats(row)
    row = _fusion_row(hloscope.analyze(_text("{highest,default}"), chip="tpu-v5e"))
    assert row["compute_s"] == pytest.approx(FLOPS / V5E_BF16, rel=1e-12)


def test_bf16_operands_take_one_pass():
    # Precision only affects f32 computations (jax.lax.Precision docstring): bf16 is exact in one pass.
    row = _fusion_row(hloscope.analyze(_text("{highest,highest}", dtype="bf16"), chip="tpu-v5e"))
    assert row["compute_s"] == pytest.approx(FLOPS / V5E_BF16, rel=1e-12)
    assert not any(c.startswith(("precision-passes", "operand-precision")) for c in _caveats(row))


def test_gpu_chips_keep_their_f32_peak():
    # GPU chips have true f32/TF32 peaks in the chip table: the passes are a TPU rule only.
    h100 = get_chip("h100")
    row = _fusion_row(hloscope.analyze(_text("{highest,highest}"), chip="h100"))
    assert row["compute_s"] == pytest.approx(FLOPS / h100.peak_flops_per_s["f32"], rel=1e-12)
    assert "precision-passes:6" not in _caveats(row)


def test_score_reads_the_cost_flag():
    chip = get_chip("tpu-v5e")
    cost = OpCost(flops=1e12, transcendentals=1e9, bytes_read=1e6, flags=frozenset({"operand-precision:highest"}))
    s = score(cost, chip, "f32")
    assert precision_passes(cost.flags, chip) == 6
    assert s.compute_s == pytest.approx((6 * 1e12 + 1e9) / V5E_BF16, rel=1e-12)
    assert s.critical_intensity == pytest.approx(V5E_BF16 / 6 / chip.hbm_bytes_per_s, rel=1e-12)
    assert "precision-passes:6" in s.flags
    assert precision_passes(frozenset({"operand-precision:highest", "operand-precision:high"}), chip) == 3
    assert precision_passes(cost.flags, get_chip("h100")) == 1
    assert precision_passes(frozenset(), chip) == 1


# ---- the same from a deviceless libtpu compile -----------------------------------------------------------------


@pytest.fixture(scope="module")
def v5e_device():
    if importlib.util.find_spec("libtpu") is None:
        pytest.skip("deviceless TPU compiles need libtpu")
    os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")
    jax = pytest.importorskip("jax")
    from jax.experimental import topologies

    return jax, topologies.get_topology_desc("v5e:2x2", "tpu").devices[0]


@pytest.mark.parametrize(("name", "passes", "printed"), [("HIGHEST", 6, "operand_precision={highest,highest}"),
                                                         ("HIGH", 3, "operand_precision={high,high}"),
                                                         ("DEFAULT", 1, None)])
def test_compiled_dot_on_v5e(v5e_device, name, passes, printed):
    jax, device = v5e_device
    import jax.numpy as jnp
    from jax.sharding import SingleDeviceSharding

    sharding = SingleDeviceSharding(device)
    a = jax.ShapeDtypeStruct((M, K), jnp.float32, sharding=sharding)
    b = jax.ShapeDtypeStruct((K, N), jnp.float32, sharding=sharding)
    precision = getattr(jax.lax.Precision, name)
    compiled = jax.jit(lambda x, y: jnp.dot(x, y, precision=precision)).lower(a, b).compile()
    text = compiled.as_text()
    if printed is not None:
        assert printed in text, "libtpu no longer prints operand_precision on the compiled dot"
    else:
        assert "operand_precision" not in text
    cost = compiled.cost_analysis()
    cost = cost[0] if isinstance(cost, (list, tuple)) else cost
    assert float(cost["flops"]) == FLOPS  # XLA's FLOPs ignore the precision too

    report = hloscope.analyze(text, chip="tpu-v5e")
    ops = report.ops
    matmul = ops[ops["flops"] > 0]
    assert len(matmul) == 1 and matmul["flops"].iloc[0] == FLOPS
    assert matmul["compute_s"].iloc[0] == pytest.approx(passes * FLOPS / V5E_BF16, rel=1e-12)
    assert (f"precision-passes:{passes}" in _caveats(matmul.iloc[0])) == (passes > 1)
    assert report.modules["flops"].iloc[0] == FLOPS
