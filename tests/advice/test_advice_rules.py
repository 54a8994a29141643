"""Advice rules against the book's worked numbers, and on programs built to trigger each rule once and not after
the fix the advice names (compiled for TPU v5e without a TPU, through libtpu)."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import pytest

import hloscope
from hloscope.advice.collectives import contracting_dim_to_hide
from hloscope.advice.matmul_batch import batch_for_critical_intensity
from hloscope.roofline.chips import get_chip

needs_libtpu = pytest.mark.skipif(importlib.util.find_spec("libtpu") is None, reason="needs libtpu")
FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


def _rules(report):
    return list(report.advice["rule"])


# ---- the book's numbers (Part 1, "Rooflines" and "network communication rooflines") ----------------------------

def test_v5e_critical_intensity_and_the_batch_it_takes():
    """v5e bf16: 1.97e14 / 8.1e11 ~ 240 FLOPs/byte, so X[B, D] @ W[D, F] (D, F large) is compute-bound at B ~ 240;
    with int8 weights (half the weight bytes) at B ~ 120."""
    v5e = get_chip("tpu-v5e")
    critical = v5e.peak_flops_per_s["bf16"] / v5e.hbm_bytes_per_s
    assert critical == pytest.approx(243.2, abs=0.1)
    d = f = 1_000_000  # the book's limit B << D, F
    # per token (t = B): FLOPs 2DF, bytes of X and of the result 2D + 2F; the weight's 2DF (bf16) or DF (int8)
    bf16 = batch_for_critical_intensity(2 * d * f, 2 * d + 2 * f, 2 * d * f, critical)
    int8 = batch_for_critical_intensity(2 * d * f, 2 * d + 2 * f, d * f, critical)
    assert bf16 == pytest.approx(240, rel=0.02) and int8 == pytest.approx(120, rel=0.02)
    assert math.isinf(batch_for_critical_intensity(2.0, 1.0, 1.0, critical))  # intensity capped below: no batch


def test_two_chip_sharded_matmul_contracting_dimension():
    """X[B, D] @ Y[D, F] with D sharded over 2 TPU v5e: compute-bound when D > 2 C / W_ici = 8,755 (W_ici 4.5e10
    bytes/s one way, as the book counts it)."""
    assert contracting_dim_to_hide(1.97e14, 4.5e10) == pytest.approx(8755, abs=1)


# ---- programs ----------------------------------------------------------------------------------------------------

def _matmul(b, d, f, **kw):
    import jax
    import jax.numpy as jnp

    def fn(x, w):
        return jnp.dot(x, w, **kw)

    dtype = kw.pop("dtype", jnp.bfloat16)
    return hloscope.analyze(jax.jit(fn), jax.ShapeDtypeStruct((b, d), dtype), jax.ShapeDtypeStruct((d, f), dtype),
                            chip="tpu-v5e", target="deviceless")


@needs_libtpu
def test_memory_bound_matmul_names_the_batch_and_goes_away_at_it():
    small = _matmul(16, 4096, 4096)
    a = small.advice[small.advice["rule"] == "memory-bound-matmul"]
    assert len(a) == 1
    # By hand: per unit of growth t of the 16 rows: FLOPs 2*16*4096*4096, scaled bytes (x and out) 2*16*4096*2,
    # weight 2*4096*4096; t = Ic * b / (F - Ic * a) at Ic = 1.97e14 / 8.1e11.
    ic = 1.97e14 / 8.1e11
    t = ic * (2 * 4096 * 4096) / (2 * 16 * 4096 * 4096 - ic * (2 * 16 * 4096 * 2))
    assert f">= {math.ceil(16 * t)} per device" in a["action"].iloc[0]
    big = _matmul(math.ceil(16 * t) + 16, 4096, 4096)
    assert "memory-bound-matmul" not in _rules(big)
    assert not len(big.advice)  # a well-tuned matmul: no advice at all


@needs_libtpu
def test_highest_precision_is_advised_and_default_is_not():
    import jax
    import jax.numpy as jnp

    slow = _matmul(1024, 2048, 2048, precision=jax.lax.Precision.HIGHEST, dtype=jnp.float32)
    a = slow.advice[slow.advice["rule"] == "slow-matmul-precision"]
    assert len(a) == 1 and "6 bf16 passes" in a["evidence"].iloc[0]
    r = slow.ops[slow.ops["category"] == "matmul"].iloc[0]
    assert a["gain_s"].iloc[0] == pytest.approx(r["roofline_s"] - max(r["compute_s"] / 6, r["memory_s"]))
    fast = _matmul(1024, 2048, 2048, dtype=jnp.float32)
    assert "slow-matmul-precision" not in _rules(fast)


_F32_DOT = """HloModule f32_dot
ENTRY main {
  x = f32[2048,4096] parameter(0)
  w = f32[4096,4096] parameter(1)
  ROOT d = f32[2048,4096] dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}
"""


def test_f32_dot_on_a_gpu_with_faster_bf16():
    """H100: dense bf16 9.9e14 vs f32 (TF32) 4.9e14 FLOP/s: the compute-bound f32 dot is advised, at half the
    compute time; in bf16 it is not."""
    r = hloscope.analyze(_F32_DOT, chip="h100")
    a = r.advice[r.advice["rule"] == "slow-matmul-precision"]
    assert len(a) == 1
    op = r.ops.iloc[0]
    assert a["gain_s"].iloc[0] == pytest.approx(op["roofline_s"] - max(op["compute_s"] * 4.945 / 9.895,
                                                                       op["memory_s"] / 2))
    assert not len(hloscope.analyze(_F32_DOT.replace("f32", "bf16"), chip="h100").advice)


@needs_libtpu
def test_communication_bound_psum_names_the_contracting_dimension():
    """X[B, D] @ Y[D, F] with D sharded over 2 devices, then psum: with D = 1024 the all-reduce outlasts the
    matmul; the advice names the per-device contracting size at which it would not (k x comm_s / compute_s), and at
    that size the rule is quiet."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.experimental import topologies
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

    def report(d):
        topo = topologies.get_topology_desc("v5e:2x1", "tpu")
        mesh = Mesh(np.array(topo.devices).reshape(2), ("x",))

        @jax.jit
        def fn(x, y):
            return jax.shard_map(lambda a, b: jax.lax.psum(a @ b, "x"), mesh=mesh,
                                 in_specs=(P(None, "x"), P("x", None)), out_specs=P())(x, y)

        x = jax.ShapeDtypeStruct((512, d), jnp.bfloat16, sharding=NamedSharding(mesh, P(None, "x")))
        y = jax.ShapeDtypeStruct((d, 8192), jnp.bfloat16, sharding=NamedSharding(mesh, P("x", None)))
        return hloscope.analyze(fn.lower(x, y).compile(), chip="tpu-v5e")

    small = report(1024)
    a = small.advice[small.advice["rule"] == "communication-bound-collective"]
    assert len(a) == 1
    ar = small.ops[small.ops["category"] == "collective"].iloc[0]
    mm = small.ops[small.ops["instruction"] == a["ops"].iloc[0].split(",")[1]].iloc[0]
    ratio = ar["comm_s"] / mm["compute_s"]
    assert f"k = 512 per device to >= {math.ceil(512 * ratio)}" in a["action"].iloc[0]
    big = report(2 * math.ceil(512 * ratio) + 256)
    assert "communication-bound-collective" not in _rules(big)


_UNFUSED_CHAIN = """HloModule chain, is_scheduled=true
f1 {
  p = f32[4096,4096] parameter(0)
  ROOT e = f32[4096,4096] exponential(p)
}
f2 {
  p = f32[4096,4096] parameter(0)
  ROOT n = f32[4096,4096] negate(p)
}
ENTRY main {
  x = f32[4096,4096] parameter(0)
  a = f32[4096,4096] fusion(x), kind=kLoop, calls=f1
  ROOT b = f32[4096,4096] fusion(a), kind=kLoop, calls=f2
}
"""


def test_unfused_chain_and_its_fused_form():
    """Two kLoop fusions, one feeding the other: each reads and writes 64 MiB; fused, the pair would read x and
    write b once: gain at most the smaller fusion's time (sum - max)."""
    r = hloscope.analyze(_UNFUSED_CHAIN, chip="tpu-v5e")
    a = r.advice[r.advice["rule"] == "unfused-memory-chain"]
    assert len(a) == 1 and set(a["ops"].iloc[0].split(",")) == {"a", "b"}
    t = sorted(r.ops["roofline_s"])
    assert a["gain_s"].iloc[0] == pytest.approx(t[0])
    fused = _UNFUSED_CHAIN.replace("ROOT e = f32[4096,4096] exponential(p)",
                                   "e = f32[4096,4096] exponential(p)\n  ROOT n = f32[4096,4096] negate(e)")
    fused = fused.replace("  ROOT b = f32[4096,4096] fusion(a), kind=kLoop, calls=f2\n", "").replace(
        "  a = f32[4096,4096] fusion(x)", "  ROOT a = f32[4096,4096] fusion(x)")
    assert "unfused-memory-chain" not in _rules(hloscope.analyze(fused, chip="tpu-v5e"))
    # Before optimization (no is_scheduled=true) XLA has not fused yet: nothing to say.
    unscheduled = _UNFUSED_CHAIN.replace(", is_scheduled=true", "")
    assert "unfused-memory-chain" not in _rules(hloscope.analyze(unscheduled, chip="tpu-v5e"))


def test_exposed_collective_on_real_captures():
    """The capture whose all-reduce result is used at once: advised with all its measured time; the capture with
    independent work beside it: advised for less (XLA:CPU on 2 cores still leaves part exposed: the devices reach
    the rendezvous at different times)."""
    exposed = hloscope.analyze(FIXTURES / "profile" / "cpu_allreduce_exposed", chip="h100")
    overlapped = hloscope.analyze(FIXTURES / "profile" / "cpu_allreduce_overlapped", chip="h100")
    a = exposed.advice[exposed.advice["rule"] == "exposed-collective"]
    b = overlapped.advice[overlapped.advice["rule"] == "exposed-collective"]
    op = exposed.ops[exposed.ops["category"] == "collective"].iloc[0]
    assert len(a) == 1 and a["gain_s"].iloc[0] == pytest.approx(op["measured_s"])
    assert b["gain_s"].sum() < 0.6 * a["gain_s"].iloc[0]


def test_far_below_roof_only_with_a_trace():
    traced = hloscope.analyze(FIXTURES / "profile" / "gpu_mlp_train")
    a = traced.advice[traced.advice["rule"] == "far-below-roof"]
    for r in a.to_dict(orient="records"):
        op = traced.ops[traced.ops["instruction"] == r["ops"]].iloc[0]
        assert op["efficiency"] < 0.3 and r["gain_s"] == pytest.approx(op["lost_s"])
    static = hloscope.analyze(FIXTURES / "hlo" / "gpu-h100_mlp_train.hlo.txt", chip="h100")
    assert "far-below-roof" not in _rules(static)


def test_advice_round_trips_through_json():
    import json

    r = hloscope.analyze(_UNFUSED_CHAIN, chip="tpu-v5e")
    back = hloscope.Report.from_dict(json.loads(r.to_json()))
    assert back.advice.equals(r.advice)


def test_well_tuned_fixture_gets_no_advice():
    """The bf16 MLP train step captured on an H100 (fixtures/make_gpu_fixtures.py): 2048-wide bf16 matmuls,
    compute-bound, fused by XLA, one device -- none of the rules applies."""
    r = hloscope.analyze(FIXTURES / "hlo" / "gpu-h100_mlp_train.hlo.txt", chip="h100")
    assert (r.ops.loc[r.ops["category"] == "matmul", "bound"] == "compute").all()
    assert not len(r.advice)


_TIED_CHAIN = """HloModule tied, is_scheduled=true
f {
  p = f32[1024,1024] parameter(0)
  ROOT n = f32[1024,1024] negate(p)
}
ENTRY main {
  x = f32[1024,1024] parameter(0)
  c.3 = f32[1024,1024] fusion(x), kind=kLoop, calls=f
  c.1 = f32[1024,1024] fusion(c.3), kind=kLoop, calls=f
  c.4 = f32[1024,1024] fusion(c.1), kind=kLoop, calls=f
  c.2 = f32[1024,1024] fusion(c.4), kind=kLoop, calls=f
  ROOT c.5 = f32[1024,1024] fusion(c.2), kind=kLoop, calls=f
}
"""


def test_unfused_chain_is_the_same_whatever_the_hash_seed():
    """Five equal fusions in a chain (ties in time): the advice lists them in the ops table's order, with the same
    sum, in every interpreter -- it had iterated a set of names, whose order follows the string hash seed."""
    import json
    import subprocess
    import sys

    script = ("import json, sys, hloscope; r = hloscope.analyze(sys.stdin.read(), chip='tpu-v5e'); "
              "a = r.advice[r.advice['rule'] == 'unfused-memory-chain']; "
              "print(json.dumps([a['ops'].tolist(), a['gain_s'].tolist(), r.ops['instruction'].tolist()]))")
    runs = []
    for seed in ("1", "2", "3", "4"):
        env = dict(__import__("os").environ, PYTHONHASHSEED=seed)
        done = subprocess.run([sys.executable, "-c", script], input=_TIED_CHAIN, capture_output=True, text=True,
                              env=env, check=True)
        runs.append(json.loads(done.stdout))
    assert all(run == runs[0] for run in runs), runs
    ops, gains, table = runs[0]
    assert ops == [",".join(table)]  # (equal times: the table's order, which is the module's)
    per_op = 1024 * 1024 * 4 * 2 / get_chip("tpu-v5e").hbm_bytes_per_s  # read + write, bytes / HBM bandwidth
    assert gains[0] == pytest.approx(4 * per_op)  # sum - max of five equal times
