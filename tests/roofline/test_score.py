"""Roofline scoring: times, bound class and intensity, against hand-worked formulas and spec-sheet numbers
("How to Scale Your Model", Part 1; TPU v5e: 1.97e14 bf16 FLOP/s, 8.1e11 B/s HBM, 4.5e10 B/s per ICI link)."""

import math
from pathlib import Path

import pytest

from hloscope.cost import OpCost
from hloscope.roofline.chips import get_chip
from hloscope.roofline.score import Bound, score

V5E_BF16 = 1.97e14
V5E_HBM = 8.1e11
V5E_ICI = 4.5e10
FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "hlo"


def matmul_cost(b, d, f, bytes_per_weight=2):
    """bf16[B,D] x [D,F]: 2BDF FLOPs; reads X and W, writes the bf16 output."""
    return OpCost(flops=2 * b * d * f, bytes_read=2 * b * d + bytes_per_weight * d * f, bytes_written=2 * b * f)


def test_matmul_times_are_the_formulas():
    s = score(matmul_cost(512, 8192, 8192), get_chip("tpu-v5e"), "bf16")
    assert s.compute_s == pytest.approx(2 * 512 * 8192 * 8192 / V5E_BF16, rel=1e-9)
    assert s.memory_s == pytest.approx((2 * 512 * 8192 + 2 * 8192 * 8192 + 2 * 512 * 8192) / V5E_HBM, rel=1e-9)
    assert s.roofline_s == max(s.compute_s, s.memory_s)


@pytest.mark.parametrize(("batch", "bound"), [(64, Bound.MEMORY), (200, Bound.MEMORY), (300, Bound.COMPUTE),
                                              (4096, Bound.COMPUTE)])
def test_matmul_flips_to_compute_bound_near_batch_240(batch, bound):
    # For D, F >> B the intensity is ~B FLOPs/byte; v5e's critical intensity is 1.97e14/8.1e11 = 243.
    assert score(matmul_cost(batch, 16384, 16384), get_chip("tpu-v5e"), "bf16").bound is bound


def test_int8_weights_flip_near_batch_120():
    # int8 weights halve the weight bytes; compute stays bf16: intensity ~2B, flip near B = 120.
    chip = get_chip("tpu-v5e")
    assert score(matmul_cost(100, 16384, 16384, bytes_per_weight=1), chip, "bf16").bound is Bound.MEMORY
    assert score(matmul_cost(140, 16384, 16384, bytes_per_weight=1), chip, "bf16").bound is Bound.COMPUTE


def test_collective_time_uses_both_directions_of_the_ring():
    # all-gather of bf16[1024,1024] over 4 devices: 3/4 x 2 MiB on the wire; a ring with wraparound uses
    # both directions of its axis' links: 2 x 4.5e10 B/s.
    wire = 0.75 * 2 * 2**20
    s = score(OpCost(bytes_read=2**19, bytes_written=2**21, comm_bytes=wire, comm_kind="all-gather",
                     group_size=4), get_chip("tpu-v5e"), "bf16")
    assert s.comm_s == pytest.approx(wire / (2 * V5E_ICI), rel=1e-9)
    assert s.bound is Bound.COMMUNICATION


def test_gpu_collective_leaves_nvlink_beyond_eight():
    chip = get_chip("h100")
    inside = score(OpCost(comm_bytes=1e9, group_size=8), chip, "bf16")
    outside = score(OpCost(comm_bytes=1e9, group_size=16), chip, "bf16")
    assert inside.comm_s == pytest.approx(1e9 / chip.nvlink_bytes_per_s)
    assert outside.comm_s == pytest.approx(1e9 / chip.dcn_bytes_per_s)
    assert "crosses-nvlink-domain" in outside.flags


def test_intensity_and_critical_intensity():
    s = score(OpCost(flops=480.0, bytes_read=2.0), get_chip("tpu-v5e"), "bf16")
    assert s.intensity == 240.0
    assert s.critical_intensity == pytest.approx(V5E_BF16 / V5E_HBM)


def test_missing_peak_falls_back_and_flags():
    # TPU7x has no int8 figure: falls back to a wider type and says so.
    s = score(OpCost(flops=1e12), get_chip("tpu7x"), "int8")
    assert "peak-fallback" in s.flags and s.compute_s > 0


def test_zero_work_is_not_a_division_by_zero():
    s = score(OpCost(), get_chip("h100"), "bf16")
    assert s.roofline_s == 0.0 and s.intensity == 0.0 and not math.isnan(s.memory_s)


def test_real_v5e_mlp_bounds():
    """The deviceless v5e compile of a large sharded MLP training step: big dots compute-bound, its
    all-reduces communication-bound, its elementwise (kLoop) fusions memory-bound."""
    import hloscope

    ops = hloscope.analyze(FIXTURES / "tpu-v5e_mlp_large.hlo.txt", chip="tpu-v5e").ops
    big_dots = ops[(ops.category == "matmul") & (ops.flops > 1e11)]
    assert len(big_dots) >= 4 and (big_dots.bound == "compute").all()
    gradient_reductions = ops[(ops.opcode == "all-reduce") & (ops.wire_bytes > 2**20)]  # not the scalar loss
    assert len(gradient_reductions) >= 2 and (gradient_reductions.bound == "communication").all()
    loops = ops[ops.category == "fusion:kLoop"]
    assert len(loops) > 0 and (loops.bound == "memory").all()


_UNKNOWN_ELEMENT_TYPE = """HloModule m, is_scheduled=true

%fused (p0: bf99[4,8], p1: bf99[8,4]) -> f32[4,4] {
  %p0 = bf99[4,8]{1,0} parameter(0)
  %p1 = bf99[8,4]{1,0} parameter(1)
  ROOT %d = f32[4,4]{1,0} dot(bf99[4,8]{1,0} %p0, bf99[8,4]{1,0} %p1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}

ENTRY %main (a: bf99[4,8], b: bf99[8,4], c: bf16[4,8], e: bf16[8,4]) -> (f32[4,4], f32[4,4], f32[4,4]) {
  %a = bf99[4,8]{1,0} parameter(0)
  %b = bf99[8,4]{1,0} parameter(1)
  %c = bf16[4,8]{1,0} parameter(2)
  %e = bf16[8,4]{1,0} parameter(3)
  %dot = f32[4,4]{1,0} dot(bf99[4,8]{1,0} %a, bf99[8,4]{1,0} %b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  %mixed = f32[4,4]{1,0} dot(bf99[4,8]{1,0} %a, bf16[8,4]{1,0} %e), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  %fusion = f32[4,4]{1,0} fusion(bf99[4,8]{1,0} %a, bf99[8,4]{1,0} %b), kind=kOutput, calls=%fused
  ROOT %t = (f32[4,4]{1,0}, f32[4,4]{1,0}, f32[4,4]{1,0}) tuple(%dot, %mixed, %fusion)
}
"""


def test_matmul_of_an_element_type_no_table_knows_is_scored():
    """A dot (and a fusion holding one) of an element type no chip table knows is scored at the types it does
    know -- f32 when none, as ``result_dtype`` falls back -- instead of raising (found by benchmarks/fuzz.py,
    seed 43: ``bf4294967296``, a damaged ``bf16``)."""
    import hloscope

    report = hloscope.analyze(_UNKNOWN_ELEMENT_TYPE, chip="tpu-v5e")
    dtypes = dict(zip(report.ops["instruction"], report.ops["dtype"]))
    assert dtypes == {"dot": "f32", "mixed": "bf16", "fusion": "f32"}
    assert (report.ops["flops"] == 2 * 4 * 8 * 4).all()
    # Its arrays count 0 bytes (no bit width): the module says so, its cost is flagged.
    assert report.hlo_modules[0].unknown_element_types == {"bf99"}
    assert report.modules["caveats"].tolist() == ["unknown-element-type"]
    assert report.ops.set_index("instruction").loc["dot", "hbm_bytes"] == 4 * 4 * 4  # (the f32 result only)


def test_unknown_element_types_are_found_in_tuple_leaves_and_only_there():
    from hloscope.parsers import parse_hlo_text

    text = """HloModule t

ENTRY %main (p: (bf77[2], f32[2])) -> f32[2] {
  %p = (bf77[2]{0}, f32[2]{0}) parameter(0)
  ROOT %g = f32[2]{0} get-tuple-element((bf77[2]{0}, f32[2]{0}) %p), index=1
}
"""
    assert parse_hlo_text(text).unknown_element_types == {"bf77"}
    known = text.replace("bf77", "f8e4m3fn")
    assert parse_hlo_text(known).unknown_element_types == frozenset()
    for path in sorted((Path(__file__).resolve().parents[2] / "fixtures" / "hlo").glob("*.hlo.txt")):
        assert parse_hlo_text(path.read_text()).unknown_element_types == frozenset(), path.name


@pytest.mark.parametrize("shape_text, expected", [
    ("s32[]", "int32"),  # the only leaf: its class, int32 included
    ("(s32[], bf16[8,8])", "bf16"),  # a loop's state: the counter passed over
    ("(s32[], s32[4])", "f32"),  # int32 only, two leaves: none is the dtype
    ("((s32[]), (bf77[2], f8e4m3fn[2]), f32[2])", "fp8"),  # depth first, unknown types passed over
    ("(s32[], token[])", "int32"),  # a token is no array: the int32 is the only leaf
    ("(bf77[2], s32[])", "f32"),  # two array leaves, one unknown: the int32 stays passed over
    ("(bf77[2])", "f32"),
    ("()", "f32"),
])
def test_result_dtype_of_tuples(shape_text, expected):
    """``result_dtype``: a tuple's first leaf a chip table knows, int32 only when it is the only array leaf, else
    f32 -- the rule as its docstring words it, worked by hand per shape (``canonical_dtype``: s32 is int32,
    f8e4m3fn is fp8)."""
    from hloscope.parsers._hlo_re import parse_shape
    from hloscope.roofline.score import result_dtype

    assert result_dtype(parse_shape(shape_text)) == expected
