"""Hand-worked cost formulas on tiny HLO modules (written here or compiled here with jax on CPU), each checked
against the formula and, where XLA has an opinion, against XLA's own cost analysis of the same text.

Where hloscope differs from XLA on purpose the test says so and pins both numbers, so that a change on
either side is visible. Tests marked "regression" pin bugs these tests found (fixed in 39c3953), with XLA's
number (or the formula) as the expectation.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

os.environ.setdefault("JAX_PLATFORMS", "cpu")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import pytest  # noqa: E402

from cost_oracle import (  # noqa: E402
    without_memory_spaces,
    DATA, FIXTURES, fixture_json, matmul_flops, xla_cost, xla_style_bytes, xla_style_flops,
)
from hloscope import parse_hlo  # noqa: E402
from hloscope.cost import module_cost  # noqa: E402
from hloscope.hlo import Layout, Shape  # noqa: E402
from hloscope.parsers import parse_hlo_text  # noqa: E402

MiB = 1 << 20


def cost(text: str):
    return module_cost(parse_hlo_text(text))


def row(mc, name: str):
    (found,) = [r for r in mc.rows if r.instruction.name == name]
    return found


ADD = """add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = f32[] add(a, b)
}
"""
MAX = """mx {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = f32[] maximum(a, b)
}
"""


# ---------------------------------------------------------------------------------------------------------
# Dots and matmul-heavy programs
# ---------------------------------------------------------------------------------------------------------


def test_bf16_dot_is_2BDF():
    B, D, F = 64, 256, 512
    text = f"""HloModule dot
ENTRY e {{
  x = bf16[{B},{D}]{{1,0}} parameter(0)
  w = bf16[{D},{F}]{{1,0}} parameter(1)
  ROOT y = bf16[{B},{F}]{{1,0}} dot(x, w), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}
}}"""
    mc = cost(text)
    assert mc.flops == 2 * B * D * F
    assert mc.bytes_read == 2 * (B * D + D * F) and mc.bytes_written == 2 * B * F
    xla = xla_cost(text)
    assert xla["flops"] == 2 * B * D * F and xla["bytes accessed"] == mc.bytes_accessed


def test_batched_dot_counts_batch_once():
    text = """HloModule dot
ENTRY e {
  x = f32[3,4,8]{2,1,0} parameter(0)
  w = f32[3,8,16]{2,1,0} parameter(1)
  ROOT y = f32[3,4,16]{2,1,0} dot(x, w), lhs_batch_dims={0}, rhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_contracting_dims={1}
}"""
    assert cost(text).flops == 2 * 3 * 4 * 16 * 8 == xla_cost(text)["flops"]


def test_jax_compiled_bf16_matmul_on_cpu():
    """jax on CPU converts bf16 operands to f32 (one FLOP per element each), runs the dot in a
    ``__ynn_fusion`` and converts the result back: 2BDF + BD + DF + BF."""
    import jax
    import jax.numpy as jnp

    B, D, F = 64, 256, 512
    compiled = jax.jit(lambda a, b: a @ b).lower(jax.ShapeDtypeStruct((B, D), jnp.bfloat16),
                                                 jax.ShapeDtypeStruct((D, F), jnp.bfloat16)).compile()
    mc = cost(compiled.as_text())
    assert matmul_flops(mc) == 2 * B * D * F
    assert mc.flops == 2 * B * D * F + B * D + D * F + B * F
    assert mc.flops == compiled.cost_analysis()["flops"]


def test_mlp_1dev_training_step_is_6PT_minus_first_layer_dx():
    """cpu_mlp_1dev: x[T,d_in] @ w1[d_in,d_h] -> relu -> @ w2[d_h,d_out], MSE, SGD; no biases.
    Forward 2PT, backward 4PT (dX and dW per matmul), except that the first layer's dX, 2*T*d_in*d_h, is
    never computed (x is not differentiated): exact = 6PT - 2*T*d_in*d_h. With d_in = d_out, the first
    layer is half the parameters, so exact = 6PT * (1 - 1/6): 16.7 % below 6PT."""
    d = fixture_json("cpu_mlp_1dev")["dims"]
    T, d_in, d_h, d_out = d["batch"], d["d_in"], d["d_hidden"], d["d_out"]
    P = d_in * d_h + d_h * d_out
    six_pt = 6 * P * T
    exact = six_pt - 2 * T * d_in * d_h
    assert (P, six_pt, exact) == (d["params"], d["matmul_flops_6PT"], d["matmul_flops_exact"])
    mc = module_cost(parse_hlo(FIXTURES / "cpu_mlp_1dev.hlo.txt"))
    assert matmul_flops(mc) == exact == 335_544_320
    assert 1 - matmul_flops(mc) / six_pt == pytest.approx(1 / 6)  # within ~17 % of 6PT, for the reason above
    # Everything else (relu, its mask, the loss, SGD) is elementwise and small next to the matmuls.
    assert exact < mc.flops < 1.01 * exact


@pytest.mark.parametrize("stem", ["cpu_mlp_sharded", "tpu-v5e_mlp_sharded", "tpu-v5p_mlp_sharded",
                                  "tpu-v5e_mlp_large"])
def test_sharded_mlp_matmuls_are_6PT_per_device(stem):
    """Per device (SPMD): T = batch / data, d_h = d_hidden / model (Megatron), P = 2 * d_model * d_h; the
    first layer's dX is again not computed. TPU matmuls are convolutions (dim_labels bf_io->bf)."""
    if not (FIXTURES / f"{stem}.hlo.txt").exists():
        pytest.skip(f"no fixture {stem}")
    meta = fixture_json(stem)
    d, mesh = meta["dims"], meta["mesh"]
    T, D, H = d["batch"] // mesh["data"], d["d_model"], d["d_hidden"] // mesh["model"]
    P = 2 * D * H
    mc = module_cost(parse_hlo(FIXTURES / f"{stem}.hlo.txt"))
    assert matmul_flops(mc) == 6 * P * T - 2 * T * D * H


@pytest.mark.parametrize("stem", ["cpu_transformer_scan", "cpu_transformer_scan_grad", "tpu-v5e_transformer_scan",
                                  "tpu-v5e_transformer_scan_grad", "tpu-v5p_transformer_scan",
                                  "tpu-v5p_transformer_scan_grad"])
def test_transformer_matmuls(stem):
    """Per layer and device, forward: qkv 2*B*S*D*3*H*K, logits and probs@v 2 * 2*B*H*S*S*K, out-projection
    2*B*S*H*K*D, MLP 2 * 2*B*S*D*F (B, H, F local). Training: 3x forward -- the scanned backward body cannot
    skip the first layer's dX, since every iteration runs the same body. Trip count n_layers (hloscope
    multiplies the while body; XLA's cost_analysis would count one layer)."""
    meta = fixture_json(stem)
    d, mesh = meta["dims"], meta["mesh"]
    B, S, D, K = d["batch"] // mesh["data"], d["seq"], d["d_model"], d["d_head"]
    H, F, L = d["n_heads"] // mesh["model"], d["d_ff"] // mesh["model"], d["n_layers"]
    forward = 2 * B * S * D * 3 * H * K + 2 * (2 * B * H * S * S * K) + 2 * B * S * H * K * D + 2 * (2 * B * S * D * F)
    expected = L * forward * (3 if stem.endswith("_grad") else 1)
    mc = module_cost(parse_hlo(FIXTURES / f"{stem}.hlo.txt"))
    assert matmul_flops(mc) == expected


# ---------------------------------------------------------------------------------------------------------
# Collectives: wire bytes by the ring formulas, group sizes
# ---------------------------------------------------------------------------------------------------------


def test_all_gather_wire_bytes():
    """bf16[1024,1024] gathered over 4 devices: each device sends 3/4 of the 2 MiB result."""
    text = """HloModule ag, num_partitions=4
ENTRY e {
  p = bf16[256,1024]{1,0} parameter(0)
  ROOT ag = bf16[1024,1024]{1,0} all-gather(p), channel_id=1, replica_groups={{0,1,2,3}}, dimensions={0}, use_global_device_ids=true
}"""
    mc = cost(text)
    c = row(mc, "ag").cost
    assert (c.comm_kind, c.group_size) == ("all-gather", 4)
    assert c.comm_bytes == mc.comm_bytes == 3 / 4 * 2 * MiB
    assert c.flops == 0
    assert c.bytes_read == MiB // 2 and c.bytes_written == 2 * MiB
    assert mc.bytes_accessed == xla_cost(text)["bytes accessed"]


def test_async_all_gather_pair_counted_once():
    """all-gather-start / all-gather-done: the pair costs what the synchronous all-gather costs, once; the
    -done is free. XLA charges the -done again and the start's (operand, result) tuple: see
    cost_oracle.xla_style_bytes, which must then land exactly on XLA's number."""
    sync = """HloModule ag, num_partitions=4
ENTRY e {
  p = bf16[256,1024]{1,0} parameter(0)
  ROOT ag = bf16[1024,1024]{1,0} all-gather(p), channel_id=1, replica_groups={{0,1,2,3}}, dimensions={0}, use_global_device_ids=true
}"""
    text = """HloModule ags, num_partitions=4
ENTRY e {
  p = bf16[256,1024]{1,0} parameter(0)
  s = (bf16[256,1024]{1,0}, bf16[1024,1024]{1,0}) all-gather-start(p), channel_id=1, replica_groups={{0,1,2,3}}, dimensions={0}, use_global_device_ids=true
  ROOT d = bf16[1024,1024]{1,0} all-gather-done(s)
}"""
    mc = cost(text)
    assert row(mc, "d").cost.bytes_accessed == 0 and row(mc, "d").cost.comm_bytes == 0
    assert mc.comm_bytes == 3 / 4 * 2 * MiB
    assert mc.bytes_accessed == xla_cost(sync)["bytes accessed"] == 2.5 * MiB
    ours, adjust = xla_style_bytes(mc, "cpu")
    xla = xla_cost(text)["bytes accessed"]
    assert ours == xla == 2.5 * MiB + (16 + 2 * MiB) + MiB / 2  # + done (tuple table + result) + alias


def test_reduce_scatter_wire_bytes_and_flops():
    """f32[1024,256] (1 MiB) reduce-scattered over 4: sends 3/4 of the input; each device reduces 3 chunks
    of input/4 elements: 3/4 x input elements adds. XLA charges no FLOPs for a reduce-scatter."""
    text = "HloModule rs, num_partitions=4\n" + ADD + """ENTRY e {
  p = f32[1024,256]{1,0} parameter(0)
  ROOT rs = f32[256,256]{1,0} reduce-scatter(p), channel_id=1, replica_groups={{0,1,2,3}}, dimensions={0}, use_global_device_ids=true, to_apply=add
}"""
    mc = cost(text)
    c = row(mc, "rs").cost
    assert (c.comm_kind, c.group_size, c.comm_bytes) == ("reduce-scatter", 4, 3 / 4 * MiB)
    assert c.flops == 3 / 4 * 1024 * 256
    xla = xla_cost(text)
    assert xla["flops"] == 0 and xla["bytes accessed"] == mc.bytes_accessed == MiB + MiB / 4


def _all_reduce(header: str, attrs: str) -> str:
    return (f"HloModule ar, {header}\n" + ADD + "ENTRY e {\n  p = f32[512,256]{1,0} parameter(0)\n"
            + f"  ROOT ar = f32[512,256]{{1,0}} all-reduce(p), {attrs}to_apply=add\n}}")


@pytest.mark.parametrize("header, attrs, n", [
    ("num_partitions=4", "channel_id=1, replica_groups={{0,1,2,3}}, use_global_device_ids=true, ", 4),
    # iota form: 2 groups of 4 -> N = 4
    ("num_partitions=8", "channel_id=1, replica_groups=[2,4]<=[8], use_global_device_ids=true, ", 4),
    # transposed iota: [4,2]<=[2,4]T(1,0) -> 4 groups of 2
    ("num_partitions=8", "channel_id=1, replica_groups=[4,2]<=[2,4]T(1,0), use_global_device_ids=true, ", 2),
    # empty groups with a channel and no global ids: cross-partition, every partition -> N = num_partitions
    ("num_partitions=8", "channel_id=1, replica_groups={}, ", 8),
    # empty groups without a channel: cross-replica -> N = replica_count
    ("replica_count=8", "replica_groups={}, ", 8),
    # empty groups with global device ids: every device, replicas x partitions
    ("replica_count=2, num_partitions=4", "channel_id=1, replica_groups={}, use_global_device_ids=true, ", 8),
])
def test_all_reduce_ring_bytes_and_reduction_flops(header, attrs, n):
    """All-reduce of f32[512,256] (512 KiB): ring sends 2(N-1)/N x size; reduction (N-1)/N x elements adds.
    XLA charges the result elements whatever N (as if N = 2) -- point 2, documented."""
    text = _all_reduce(header, attrs)
    mc = cost(text)
    c = row(mc, "ar").cost
    size, elements = 512 * 256 * 4, 512 * 256
    assert (c.comm_kind, c.group_size) == ("all-reduce", n)
    assert c.comm_bytes == pytest.approx(2 * (n - 1) / n * size)
    assert c.flops == pytest.approx((n - 1) / n * elements)
    xla = xla_cost(text)
    assert xla["flops"] == elements
    assert xla["bytes accessed"] == mc.bytes_accessed == 2 * size


def test_all_to_all_and_collective_permute_wire_bytes():
    a2a = """HloModule a2a, num_partitions=4
ENTRY e {
  p = f32[64,128]{1,0} parameter(0)
  ROOT a = f32[64,128]{1,0} all-to-all(p), channel_id=1, replica_groups={{0,1,2,3}}, dimensions={0}
}"""
    cp = """HloModule cp, num_partitions=4
ENTRY e {
  p = f32[64,128]{1,0} parameter(0)
  ROOT c = f32[64,128]{1,0} collective-permute(p), channel_id=1, source_target_pairs={{0,1},{1,2},{2,3},{3,0}}
}"""
    size = 64 * 128 * 4
    m1, m2 = cost(a2a), cost(cp)
    # all-to-all: keeps 1/N of its operand, sends the rest.
    assert row(m1, "a").cost.comm_bytes == 3 / 4 * size and row(m1, "a").cost.comm_kind == "all-to-all"
    # collective-permute: one send of the whole operand per source-target pair.
    assert row(m2, "c").cost.comm_bytes == size and row(m2, "c").cost.comm_kind == "collective-permute"
    for mc, text in ((m1, a2a), (m2, cp)):
        assert mc.flops == 0
        assert mc.bytes_accessed == xla_cost(text)["bytes accessed"] == 2 * size


def test_cpu_collectives_fixture_wire_bytes():
    """cpu_collectives: x f32[64,128] per device, model axis N = 4 (explicit groups {{0,1,2,3},{4,5,6,7}})."""
    mc = module_cost(parse_hlo(FIXTURES / "cpu_collectives.hlo.txt"))
    size = 64 * 128 * 4
    by_kind = {}
    for r in mc.rows:
        if r.cost.comm_kind:
            if r.cost.comm_kind != "collective-permute":  # a permute has pairs, not groups
                assert r.cost.group_size == 4
            by_kind[r.cost.comm_kind] = by_kind.get(r.cost.comm_kind, 0.0) + r.cost.comm_bytes
    assert by_kind == {
        "all-reduce": 2 * 3 / 4 * size,
        "all-gather": 3 / 4 * 4 * size,  # result is 4x the operand
        "reduce-scatter": 3 / 4 * size,
        "all-to-all": 3 / 4 * size,  # tuple form: 4 operands of size/4
        "collective-permute": size,
    }


# ---------------------------------------------------------------------------------------------------------
# Convolution, reductions, sort, scatter: against XLA
# ---------------------------------------------------------------------------------------------------------


def _conv(window, lhs="f32[2,16,16,3]", rhs="f32[3,3,3,8]", out="f32[2,16,16,8]", extra=""):
    return f"""HloModule conv
ENTRY e {{
  l = {lhs}{{3,2,1,0}} parameter(0)
  r = {rhs}{{3,2,1,0}} parameter(1)
  ROOT c = {out}{{3,2,1,0}} convolution(l, r), window={{{window}}}, dim_labels=b01f_01io->b01f{extra}
}}"""


@pytest.mark.parametrize("text, formula", [
    # 3x3 VALID on 16x16 -> 14x14: every tap real. 2 * N * Cin * Cout * 14*14 * 9
    (_conv("size=3x3", out="f32[2,14,14,8]"), 2 * 2 * 3 * 8 * 14 * 14 * 9),
    # SAME: per dim, taps landing on padding are not counted: sum over k of valid outputs = 16*3 - 2 = 46
    (_conv("size=3x3 pad=1_1x1_1"), 2 * 2 * 3 * 8 * 46 * 46),
    # stride 2, SAME -> 8x8; per dim: k=0 misses o=0 -> 7, k=1: 8, k=2: 8 -> 23
    (_conv("size=3x3 stride=2x2 pad=1_1x1_1", out="f32[2,8,8,8]"), 2 * 2 * 3 * 8 * 23 * 23),
    # window (rhs) dilation 2, pad 2: k=0 and k=2 each miss 2 outputs -> 14 + 16 + 14 = 44
    (_conv("size=3x3 pad=2_2x2_2 rhs_dilate=2x2"), 2 * 2 * 3 * 8 * 44 * 44),
    # base (lhs) dilation 2 -> 31 positions, only even ones real: per tap 15 or 16 real -> 15 + 16 + 15 = 46
    (_conv("size=3x3 pad=1_1x1_1 lhs_dilate=2x2", out="f32[2,31,31,8]"), 2 * 2 * 3 * 8 * 46 * 46),
    # depthwise-ish: 3 groups of 2 input features
    (_conv("size=3x3 pad=1_1x1_1", lhs="f32[2,16,16,6]", rhs="f32[3,3,2,6]", out="f32[2,16,16,6]",
           extra=", feature_group_count=3"), 2 * 2 * 2 * 6 * 46 * 46),
    # mixed: stride 2x1, asymmetric padding, lhs dilation on dim 1, rhs dilation on dim 0 (XLA's number only)
    (_conv("size=3x3 stride=2x1 pad=0_2x1_0 lhs_dilate=1x2 rhs_dilate=2x1", out="f32[2,7,31,8]"), None),
])
def test_convolution_matches_xla(text, formula):
    mc = cost(text)
    xla = xla_cost(text)
    if formula is not None:
        assert mc.flops == formula
    assert mc.flops == xla["flops"]
    assert mc.bytes_accessed == xla["bytes accessed"]


@pytest.mark.parametrize("name, text, formula", [
    ("reduce", "HloModule r\n" + ADD + """ENTRY e {
  p = f32[32,128]{1,0} parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[32]{0} reduce(p, z), dimensions={1}, to_apply=add
}""", 32 * 127),
    ("max-pool 3x3/2", "HloModule r\n" + MAX + """ENTRY e {
  p = f32[4,32,32,8]{3,2,1,0} parameter(0)
  z = f32[] constant(-inf)
  ROOT r = f32[4,15,15,8]{3,2,1,0} reduce-window(p, z), window={size=1x3x3x1 stride=1x2x2x1}, to_apply=mx
}""", 8 * 4 * 15 * 15 * 8),
    # cumulative sum as reduce-window: window 128, padding 127 low: (128 - 1) per output
    ("cumsum", "HloModule r\n" + ADD + """ENTRY e {
  p = f32[16,128]{1,0} parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[16,128]{1,0} reduce-window(p, z), window={size=1x128 pad=0_0x127_0}, to_apply=add
}""", 127 * 16 * 128),
    # sort: n * ceil(log2 n) with n all 8000 elements (XLA's HandleSort, whatever the sort dimension)
    ("sort", """HloModule s
lt {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = pred[] compare(a, b), direction=LT
}
ENTRY e {
  p = f32[8,1000]{1,0} parameter(0)
  ROOT s = f32[8,1000]{1,0} sort(p), dimensions={1}, to_apply=lt
}""", 8000 * 13),
    # scatter-add of 50 rows of 64: one add per update element; bytes 3 x updates + indices (in place)
    ("scatter", "HloModule s\n" + ADD + """ENTRY e {
  p = f32[1000,64]{1,0} parameter(0)
  i = s32[50,1]{1,0} parameter(1)
  u = f32[50,64]{1,0} parameter(2)
  ROOT s = f32[1000,64]{1,0} scatter(p, i, u), update_window_dims={1}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add
}""", 50 * 64),
])
def test_reductions_match_xla(name, text, formula):
    mc = cost(text)
    xla = xla_cost(text)
    assert mc.flops == formula == xla["flops"], name
    assert mc.bytes_accessed == xla["bytes accessed"], name
    if name == "scatter":
        assert mc.bytes_accessed == 3 * 50 * 64 * 4 + 50 * 4


def test_whole_row_reduce_window_is_a_reduce_per_row():
    """reduction.reduce_window's documented case: window 2d-1 with d-1 padding on both sides over a row of
    d = 128 (softmax's row max on TPU): every output is the same row reduction -> rows * (d-1) adds.
    XLA recognises the case but charges rows + (d-1) (documented difference; both pinned)."""
    rows, d = 16, 128
    text = "HloModule r\n" + ADD + f"""ENTRY e {{
  p = f32[{rows},{d}]{{1,0}} parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[{rows},{d}]{{1,0}} reduce-window(p, z), window={{size=1x{2 * d - 1} pad=0_0x{d - 1}_{d - 1}}}, to_apply=add
}}"""
    mc = cost(text)
    xla = xla_cost(text)
    assert mc.flops == rows * (d - 1)
    assert xla["flops"] == rows + (d - 1)
    assert xla_style_flops(mc) == xla["flops"]  # the test helper's adjustment is exactly this difference
    assert mc.bytes_accessed == xla["bytes accessed"]


SELECT_AND_SCATTER = """HloModule s
%ge (a: f32[], b: f32[]) -> pred[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %c = pred[] compare(f32[] %a, f32[] %b), direction=GE
}
%add (a.1: f32[], b.1: f32[]) -> f32[] {
  %a.1 = f32[] parameter(0)
  %b.1 = f32[] parameter(1)
  ROOT %c.1 = f32[] add(f32[] %a.1, f32[] %b.1)
}
ENTRY %e (p: f32[4,32,32,8], s: f32[4,16,16,8]) -> f32[4,32,32,8] {
  %p = f32[4,32,32,8]{3,2,1,0} parameter(0)
  %s = f32[4,16,16,8]{3,2,1,0} parameter(1)
  %z = f32[] constant(0)
  ROOT %r = f32[4,32,32,8]{3,2,1,0} select-and-scatter(%p, %s, %z), window={size=1x2x2x1 stride=1x2x2x1}, select=%ge, scatter=%add
}"""


def test_select_and_scatter_bytes_match_xla():
    mc = cost(SELECT_AND_SCATTER)
    assert mc.bytes_accessed == xla_cost(SELECT_AND_SCATTER)["bytes accessed"]


def test_select_and_scatter_flops():
    """Max-pool gradient, 2x2/2: per source element (N*16*16*C = 8192), 3 selects + 1 scatter add.
    Regression: the parser dropped the select=/scatter= computations, so the rule charged 0 FLOPs."""
    mc = cost(SELECT_AND_SCATTER)
    source = 4 * 16 * 16 * 8
    assert mc.flops == source * ((4 - 1) * 1 + 1) == xla_cost(SELECT_AND_SCATTER)["flops"] == 32768


def test_reduce_of_empty_operand_is_free():
    """Regression: (0 - 1) applications gave -1 FLOPs, XLA's own number; a cost model never reports
    negative work."""
    text = "HloModule r\n" + ADD + """ENTRY e {
  p = f32[3000,0]{1,0} parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[] reduce(p, z), dimensions={0,1}, to_apply=add
}"""
    assert xla_cost(text)["flops"] == -1  # XLA's own number
    assert cost(text).flops == 0


# ---------------------------------------------------------------------------------------------------------
# Fusion bytes
# ---------------------------------------------------------------------------------------------------------


def test_fusion_parameter_feeding_only_a_dynamic_slice_reads_the_slice():
    """f32[64,256] (64 KiB) dynamic-sliced to f32[8,256] (8 KiB) inside the fusion: read 8 KiB + the s32
    index, write 8 KiB."""
    text = """HloModule f
fc {
  p0 = f32[64,256]{1,0} parameter(0)
  i = s32[] parameter(1)
  z = s32[] constant(0)
  ds = f32[8,256]{1,0} dynamic-slice(p0, i, z), dynamic_slice_sizes={8,256}
  ROOT n = f32[8,256]{1,0} negate(ds)
}
ENTRY e {
  p = f32[64,256]{1,0} parameter(0)
  i = s32[] parameter(1)
  ROOT f = f32[8,256]{1,0} fusion(p, i), kind=kLoop, calls=fc
}"""
    mc = cost(text)
    assert (mc.bytes_read, mc.bytes_written) == (8 * 1024 + 4, 8 * 1024)
    assert mc.flops == 8 * 256
    assert mc.bytes_accessed == xla_cost(text)["bytes accessed"]


def test_fusion_parameter_with_three_elementwise_users_is_read_once():
    text = """HloModule f
fc {
  p0 = f32[64,256]{1,0} parameter(0)
  e = f32[64,256]{1,0} exponential(p0)
  m = f32[64,256]{1,0} multiply(p0, e)
  ROOT a = f32[64,256]{1,0} add(p0, m)
}
ENTRY e {
  p = f32[64,256]{1,0} parameter(0)
  ROOT f = f32[64,256]{1,0} fusion(p), kind=kLoop, calls=fc
}"""
    mc = cost(text)
    size = 64 * 256 * 4
    assert (mc.bytes_read, mc.bytes_written) == (size, size)
    assert (mc.flops, mc.transcendentals) == (2 * 64 * 256, 64 * 256)
    xla = xla_cost(text)
    assert (mc.flops, mc.transcendentals, mc.bytes_accessed) == (xla["flops"], xla["transcendentals"],
                                                                 xla["bytes accessed"])


def test_dynamic_update_slice_root_writes_only_the_update():
    """In-place DUS of f32[8,256] into f32[64,256]: the buffer is neither read nor rewritten."""
    text = """HloModule f
fc {
  buf = f32[64,256]{1,0} parameter(0)
  u = f32[8,256]{1,0} parameter(1)
  i = s32[] parameter(2)
  z = s32[] constant(0)
  n = f32[8,256]{1,0} negate(u)
  ROOT d = f32[64,256]{1,0} dynamic-update-slice(buf, n, i, z)
}
ENTRY e {
  b = f32[64,256]{1,0} parameter(0)
  u = f32[8,256]{1,0} parameter(1)
  i = s32[] parameter(2)
  ROOT f = f32[64,256]{1,0} fusion(b, u, i), kind=kLoop, calls=fc
}"""
    mc = cost(text)
    assert (mc.bytes_read, mc.bytes_written) == (8 * 1024 + 4, 8 * 1024)
    assert mc.bytes_accessed == xla_cost(text)["bytes accessed"]


NESTED_DS = """HloModule f
inner {
  q0 = f32[4,64,256]{2,1,0} parameter(0)
  j = s32[] parameter(1)
  z = s32[] constant(0)
  ds = f32[1,64,256]{2,1,0} dynamic-slice(q0, j, z, z), dynamic_slice_sizes={1,64,256}
  ROOT b = f32[64,256]{1,0} bitcast(ds)
}
outer {
  p0 = f32[4,64,256]{2,1,0} parameter(0)
  i = s32[] parameter(1)
  x = f32[64,256]{1,0} parameter(2)
  w = f32[64,256]{1,0} fusion(p0, i), kind=kLoop, calls=inner
  ROOT m = f32[64,256]{1,0} multiply(w, x)
}
ENTRY e {
  p = f32[4,64,256]{2,1,0} parameter(0)
  i = s32[] parameter(1)
  x = f32[64,256]{1,0} parameter(2)
  ROOT f = f32[64,256]{1,0} fusion(p, i, x), kind=kLoop, calls=outer
}"""


def test_nested_fusion_dynamic_slice_reads_only_the_slice():
    """The scanned-weights pattern of every TPU scan fixture: the stacked f32[4,64,256] (256 KiB) reaches a
    nested fusion that dynamic-slices one layer (64 KiB); only the layer is read (XLA's
    FusionParameterReadBytes recurses into the nested fusion). Regression: the whole stack was charged,
    n_layers x too much per iteration."""
    mc = cost(NESTED_DS)
    layer = 64 * 256 * 4
    # read: one layer of p + the index + x; write the result
    assert (mc.bytes_read, mc.bytes_written) == (layer + 4 + layer, layer)
    assert mc.bytes_accessed == xla_cost(NESTED_DS)["bytes accessed"] == 196612


# ---------------------------------------------------------------------------------------------------------
# Async copies and slices
# ---------------------------------------------------------------------------------------------------------


def test_copy_start_moves_its_bytes_once():
    """An async copy of f32[1024,256] (1 MiB) reads 1 MiB and writes 1 MiB, like the synchronous copy
    (XLA: 2 MiB for the copy); the -done is free. Regression: the whole result tuple (destination, aliased
    source, context) was charged as written."""
    text = """HloModule c
ENTRY e {
  p = f32[1024,256]{1,0} parameter(0)
  s = (f32[1024,256]{1,0}, f32[1024,256]{1,0}, u32[]) copy-start(p)
  ROOT d = f32[1024,256]{1,0} copy-done(s)
}"""
    sync = """HloModule c
ENTRY e {
  p = f32[1024,256]{1,0} parameter(0)
  ROOT d = f32[1024,256]{1,0} copy(p)
}"""
    mc = cost(text)
    assert xla_cost(sync)["bytes accessed"] == 2 * MiB
    assert (mc.bytes_read, mc.bytes_written) == (MiB, MiB)


SLICE_START = """HloModule s
ENTRY e {
  p = f32[4,512,256]{2,1,0} parameter(0)
  s = ((f32[4,512,256]{2,1,0}), f32[1,512,256]{2,1,0}, s32[]) slice-start(p), slice={[1:2], [0:512], [0:256]}
  d = f32[1,512,256]{2,1,0} slice-done(s)
  ROOT n = f32[1,512,256]{2,1,0} negate(d)
}"""


def test_async_slice_sugar_is_costed_as_a_slice():
    """`slice-start`/`slice-done` without calls= is XLA's sugar for an async-start wrapping a slice (TPU emits
    it for the scan weights). Regression: an unknown opcode charged operand + the whole result tuple."""
    mc = cost(SLICE_START)
    out = 512 * 256 * 4
    assert "unknown-opcode" not in mc.flags
    assert row(mc, "s").cost.bytes_accessed == 2 * out  # XLA's HandleSlice on the wrapped slice
    # XLA = slice + slice-done (tuple table 24 B + result) + negate
    ours, _ = xla_style_bytes(mc, "cpu")
    assert ours == xla_cost(SLICE_START)["bytes accessed"] == 2 * out + (24 + out) + 2 * out


def test_async_slice_sugar_costs_each_slice_its_own():
    """The walk costs a slice-start once per attribute key (shapes and attribute text without metadata): a
    layer's head splits repeat. Slices of one operand that differ in their result keep their own bytes (2 x the
    result: read and written); one that differs from another only in its metadata costs the same."""
    text = """HloModule s
ENTRY e {
  p = f32[4,512,256]{2,1,0} parameter(0)
  s1 = ((f32[4,512,256]{2,1,0}), f32[1,512,256]{2,1,0}, s32[]) slice-start(p), slice={[1:2], [0:512], [0:256]}, metadata={op_name="a"}
  d1 = f32[1,512,256]{2,1,0} slice-done(s1)
  s2 = ((f32[4,512,256]{2,1,0}), f32[2,512,256]{2,1,0}, s32[]) slice-start(p), slice={[2:4], [0:512], [0:256]}, metadata={op_name="b"}
  d2 = f32[2,512,256]{2,1,0} slice-done(s2)
  s3 = ((f32[4,512,256]{2,1,0}), f32[1,512,256]{2,1,0}, s32[]) slice-start(p), slice={[1:2], [0:512], [0:256]}, metadata={op_name="c"}
  d3 = f32[1,512,256]{2,1,0} slice-done(s3)
  ROOT t = (f32[1,512,256]{2,1,0}, f32[2,512,256]{2,1,0}, f32[1,512,256]{2,1,0}) tuple(d1, d2, d3)
}"""
    mc = cost(text)
    one = 512 * 256 * 4
    assert [row(mc, n).cost.bytes_accessed for n in ("s1", "s2", "s3")] == [2 * one, 4 * one, 2 * one]


# ---------------------------------------------------------------------------------------------------------
# Control flow
# ---------------------------------------------------------------------------------------------------------


def test_conditional_takes_the_costliest_branch_and_is_flagged():
    """Branch 0: exp (16384 transcendentals); branch 1: multiply, add, subtract (3 x 16384 FLOPs). hloscope
    takes branch 1 whole (the costliest by FLOPs); XLA takes the max per key, mixing branches (flops from
    branch 1, transcendentals from branch 0)."""
    text = """HloModule c
b0 {
  a = f32[64,256]{1,0} parameter(0)
  ROOT e = f32[64,256]{1,0} exponential(a)
}
b1 {
  a = f32[64,256]{1,0} parameter(0)
  m = f32[64,256]{1,0} multiply(a, a)
  s = f32[64,256]{1,0} add(m, a)
  ROOT t = f32[64,256]{1,0} subtract(s, a)
}
ENTRY e {
  k = s32[] parameter(0)
  x = f32[64,256]{1,0} parameter(1)
  ROOT c = f32[64,256]{1,0} conditional(k, x, x), branch_computations={b0, b1}
}"""
    mc = cost(text)
    n = 64 * 256
    c = row(mc, "c").cost
    assert "conditional-max-branch" in c.flags and "conditional-max-branch" in mc.flags
    assert (mc.flops, mc.transcendentals) == (3 * n, 0)
    xla = xla_cost(text)
    assert (xla["flops"], xla["transcendentals"]) == (3 * n, n)
    assert mc.bytes_accessed == xla["bytes accessed"] == 3 * 3 * n * 4  # b1: 3 ops x (2 reads + 1 write)


WHILE_BODY = """body {
  t = (s32[], f32[64,256]{1,0}) parameter(0)
  i = s32[] get-tuple-element(t), index=0
  x = f32[64,256]{1,0} get-tuple-element(t), index=1
  one = s32[] constant(1)
  i2 = s32[] add(i, one)
  y = f32[64,256]{1,0} multiply(x, x)
  ROOT r = (s32[], f32[64,256]{1,0}) tuple(i2, y)
}
"""
CANONICAL_COND = """cond {
  t = (s32[], f32[64,256]{1,0}) parameter(0)
  i = s32[] get-tuple-element(t), index=0
  n = s32[] constant(10)
  ROOT lt = pred[] compare(i, n), direction=LT
}
"""
BODY_FLOPS = 64 * 256 + 1  # multiply + counter increment
COND_FLOPS = 1


def _while(cond: str, init: int, backend_config: str = "") -> str:
    return "HloModule w\n" + WHILE_BODY + cond + f"""ENTRY e {{
  x = f32[64,256]{{1,0}} parameter(0)
  z = s32[] constant({init})
  t = (s32[], f32[64,256]{{1,0}}) tuple(z, x)
  ROOT w = (s32[], f32[64,256]{{1,0}}) while(t), condition=cond, body=body{backend_config}
}}"""


def test_while_with_known_trip_count_multiplies_the_body():
    text = _while(CANONICAL_COND, 0, ', backend_config={"known_trip_count":{"n":"10"}}')
    mc = cost(text)
    assert mc.flops == 10 * BODY_FLOPS + 11 * COND_FLOPS
    assert not ({"inferred-trip-count", "unknown-trip-count"} & mc.flags)
    # Point 1: XLA counts body and condition once.
    assert xla_cost(text)["flops"] == BODY_FLOPS + COND_FLOPS == sum(r.cost.flops for r in mc.rows)


def test_while_trip_count_inferred_from_a_tpu_style_condition():
    """No backend_config (as on TPU); the condition is compare(gte(param, 0), constant(10)), LT, with the
    counter starting at 3: 7 trips, flagged inferred-trip-count."""
    text = _while(CANONICAL_COND, 3)
    mc = cost(text)
    assert mc.flops == 7 * BODY_FLOPS + 8 * COND_FLOPS
    assert "inferred-trip-count" in mc.flags and "unknown-trip-count" not in mc.flags
    assert xla_cost(text)["flops"] == BODY_FLOPS + COND_FLOPS


def test_while_with_unknown_trip_count_is_flagged_and_counted_once():
    cond = """cond {
  t = (s32[], f32[64,256]{1,0}) parameter(0)
  i = s32[] get-tuple-element(t), index=0
  m = s32[] multiply(i, i)
  n = s32[] constant(10)
  ROOT lt = pred[] compare(m, n), direction=LT
}
"""
    mc = cost(_while(cond, 0))
    assert "unknown-trip-count" in mc.flags
    row_w = row(mc, "w")
    assert "unknown-trip-count" in row_w.cost.flags
    assert mc.flops == BODY_FLOPS + 2 * (COND_FLOPS + 1)  # one trip, the condition twice (trip + 1)


# ---------------------------------------------------------------------------------------------------------
# TPU tile padding (point 4), against a deviceless TPU v5e compile (tests/cost/data/make_tpu_padding_fixture.py)
# ---------------------------------------------------------------------------------------------------------

TPU_PSUM = DATA / "tpu-v5e_psum_padding.hlo.txt"
TPU_PSUM_XLA = json.loads((DATA / "tpu-v5e_psum_padding.xla_cost.json").read_text())


def _tpu_psum():
    # XLA's accounting (what these tests reconcile with) charges every memory space; hloscope HBM only.
    return module_cost(parse_hlo_text(without_memory_spaces(TPU_PSUM.read_text())))


def test_tpu_arrays_are_tile_padded():
    """f32[4,100]{1,0:T(4,128)}: 100 -> 128 columns: 2048 B, not 1600. The fusion (a * 2) reads and writes
    it; XLA's v5e cost analysis charges 2048 + 2048 for it (reconciliation of the module total below)."""
    shape = Shape("f32", (4, 100), (False, False), Layout((1, 0), ((4, 128),)))
    assert (shape.size_bytes, shape.padded_size_bytes) == (1600, 2048)
    fusion = row(_tpu_psum(), "broadcast_multiply_fusion").cost
    assert (fusion.bytes_read, fusion.bytes_written, fusion.flops) == (2048, 2048, 400)


def test_tpu_collective_hbm_bytes_are_tile_padded():
    """Regression: collectives sized their HBM bytes with size_bytes (1600 B for f32[4,100]{T(4,128)})."""
    mc = _tpu_psum()
    ar = row(mc, "all-reduce")
    names = {i.name: i for i in mc.module.entry.instructions}
    padded = sum(names[o].shape.padded_size_bytes for o in ar.instruction.operands)
    assert ar.cost.bytes_read == padded
    assert ar.cost.bytes_written == ar.instruction.shape.padded_size_bytes


def test_tpu_scalar_is_padded_to_its_tile():
    """f32[]{:T(128)} occupies one 128-element tile: 512 B in XLA's v5e analysis (the module total below
    reconciles exactly only with 512-B scalars). Regression: scalars were charged their 4 data bytes."""
    scalar = Shape("f32", (), (), Layout((), ((128,),)))
    assert scalar.padded_size_bytes == 128 * 4
    mul = row(_tpu_psum(), "mul.11").cost  # f32[]{:T(128)} x f32[]{:T(128)} -> f32[]{:T(128)}
    assert (mul.bytes_read, mul.bytes_written) == (1024, 512)


def test_tpu_psum_module_bytes_match_xla_exactly():
    """Every XLA convention of cost_oracle.xla_style_bytes applied, the small v5e module must land exactly on
    XLA's 24576 B: copy-start 2048 + (2048 + 2048 + 4096 flag), copy.4 and mul.11 on 512-B scalars,
    copy-done 512 + 2048, fusion 2048 + 2048, all-reduce (2048 + 512) x 2."""
    ours, _ = xla_style_bytes(_tpu_psum(), "v5e")
    assert ours == TPU_PSUM_XLA["bytes_accessed"] == 24576


def test_tpu_psum_flops_match_xla():
    mc = _tpu_psum()
    assert xla_style_flops(mc) == TPU_PSUM_XLA["flops"] == 802
    # hloscope's own: fusion 400 + multiply 1 + all-reduce (N-1)/N x 401 elements, N = 4
    assert mc.flops == 400 + 1 + 0.75 * 401



# ---- memory spaces: HBM bytes only (XLA's Layout::memory_space; TPU S(1) = VMEM, S(5) = host memory) ----

MEMORY_SPACES = """HloModule m, entry_computation_layout={(f32[1024,128]{1,0:T(8,128)})->f32[1024,128]{1,0:T(8,128)}}

ENTRY %e (p: f32[1024,128]) -> f32[1024,128] {
  %p = f32[1024,128]{1,0:T(8,128)} parameter(0)
  %to_vmem = f32[1024,128]{1,0:T(8,128)S(1)} copy(%p)
  %in_vmem = f32[1024,128]{0,1:T(8,128)S(1)} copy(%to_vmem)
  %cs = (f32[1024,128]{1,0:T(8,128)S(5)}, f32[1024,128]{1,0:T(8,128)}, u32[]{:S(2)}) copy-start(%p)
  %cd = f32[1024,128]{1,0:T(8,128)S(5)} copy-done(%cs)
  ROOT %back = f32[1024,128]{1,0:T(8,128)} copy(%in_vmem)
}
"""


def test_copies_charge_only_the_hbm_side():
    """f32[1024,128] is 512 KiB. HBM -> VMEM reads 512 KiB and writes nothing to HBM; VMEM -> VMEM moves no
    HBM byte; VMEM -> HBM writes 512 KiB (hand count from the layouts' memory spaces)."""
    mc = module_cost(parse_hlo_text(MEMORY_SPACES))
    size = 1024 * 128 * 4
    assert (row(mc, "to_vmem").cost.bytes_read, row(mc, "to_vmem").cost.bytes_written) == (size, 0)
    assert row(mc, "in_vmem").cost.bytes_accessed == 0
    assert (row(mc, "back").cost.bytes_read, row(mc, "back").cost.bytes_written) == (0, size)


def test_host_offload_copy_crosses_the_host_link():
    """copy-start to S(5) (host memory): 512 KiB read from HBM, none written there, and 512 KiB on the host
    link, scored at the chip's PCIe bandwidth (tpu-v5e: the book's 1.6e10 B/s) -- not at HBM bandwidth."""
    from hloscope.roofline.chips import get_chip
    from hloscope.roofline.score import score

    cost = row(module_cost(parse_hlo_text(MEMORY_SPACES)), "cs").cost
    size = 1024 * 128 * 4
    assert (cost.bytes_read, cost.bytes_written, cost.comm_bytes, cost.comm_kind) == (size, 0, size,
                                                                                       "host-transfer")
    chip = get_chip("tpu-v5e")
    s = score(cost, chip, "f32")
    assert s.comm_s == pytest.approx(size / chip.pcie_bytes_per_s)
    assert s.bound.value == "communication"
