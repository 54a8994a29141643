"""The ``Report`` assertions (``hloscope.result.assertions``), on real TPU v5e HLO: they pass when true, and say
what is wrong when not. The plugin's fixture returns the same ``Report``."""

from __future__ import annotations

import re

import pytest

import hloscope
from hloscope.result import Report
from hloscope.roofline.tables import total_mfu

from conftest import HLO


def load(name: str) -> Report:
    return hloscope.analyze(HLO / f"{name}.hlo.txt", chip="tpu-v5e")


@pytest.fixture(scope="module")
def large() -> Report:
    return load("tpu-v5e_mlp_large")  # big matmuls: compute-bound on v5e


@pytest.fixture(scope="module")
def small() -> Report:
    return load("tpu-v5e_mlp_sharded")  # small matmuls: memory-bound


@pytest.fixture(scope="module")
def collectives() -> Report:
    return load("tpu-v5e_collectives")


def test_totals_of_the_report(large):
    assert list(large.ops.columns)[:4] == ["module", "computation", "instruction", "opcode"]
    assert large.chip.id == "tpu-v5e" and large.to_dict()["schema"] == "hloscope.report/3"
    assert large.roofline_s == pytest.approx(large.ops.roofline_s.sum())
    assert large.hbm_bytes == large.modules.hbm_bytes.sum() and large.wire_bytes == large.modules.wire_bytes.sum()
    assert large.wire_bytes_by_kind().keys() == {"all-reduce"}
    assert sum(large.wire_bytes_by_kind().values()) == pytest.approx(large.wire_bytes)
    assert repr(large).startswith("<hloscope Report: 28 ops, roofline 9.89 ms on tpu-v5e")
    assert large.compiled_for == {} and large.compile_s == 0.0 and large.analysis_s > 0


def test_mfu_is_the_one_definition(large):
    """No measured time: the roofline MFU, ``total_mfu`` over ``roofline_s`` (FLOPs / sum(time x peak))."""
    assert large.mfu == total_mfu(large.modules, large.chip, "roofline_s")
    by_hand = large.flops / sum(t * large.chip.peak_flops_for(d)[0]
                                for d, t in zip(large.modules.dtype, large.modules.roofline_s))
    assert large.mfu == pytest.approx(by_hand) and 0.6 < large.mfu <= 1.0



def test_select_patterns(large):
    matmuls = large.select("matmul")
    assert len(matmuls) == 5
    assert len(large.select("dot")) == 5  # fusions holding a dot match "dot"
    assert len(large.select("dot_general")) >= 5  # an op_name part (collectives of dot outputs too)
    assert len(large.select("fusion.3*")) >= 2  # instruction names, globbed
    assert len(large.select(re.compile(r"transpose\(jvp\(\)\)/dot"))) >= 3
    assert large.select("nothing-like-this").empty


def test_assert_bound(large, small):
    large.assert_bound("dot", "compute")
    large.assert_bound("all-reduce.[46]", "comm")  # (all-reduce.5 is tiny: memory-bound)
    small.assert_bound("matmul", "memory")
    with pytest.raises(AssertionError) as info:
        small.assert_bound("dot", "compute")
    msg = str(info.value)
    assert msg.startswith("5 of 5 ops matching 'dot' are not compute-bound on tpu-v5e:")
    assert "fusion.33" in msg and "jvp()/dot_general" in msg and "critical_intensity" in msg
    with pytest.raises(AssertionError, match=r"no op matches 'conv2d' \(opcodes: all-reduce, copy-start"):
        small.assert_bound("conv2d", "compute")
    with pytest.raises(ValueError, match="unknown bound 'fast'"):
        small.assert_bound("dot", "fast")


def test_assert_no_collective(collectives, large):
    large.assert_no_collective("all-gather")
    with pytest.raises(AssertionError) as info:
        collectives.assert_no_collective("all-gather")
    assert "1 all-gather op found on tpu-v5e (16.4 kB on the wire)" in str(info.value)
    assert "jit(body)/shard_map/all_gather" in str(info.value)
    with pytest.raises(AssertionError, match="5 collective ops found"):
        collectives.assert_no_collective()
    with pytest.raises(ValueError, match="unknown collective kind 'allgather'; did you mean 'all-gather'"):
        collectives.assert_no_collective("allgather")


def test_assert_max_roofline_time(large):
    large.assert_max_roofline_time(11e-3)
    with pytest.raises(AssertionError) as info:
        large.assert_max_roofline_time(5e-3)
    assert str(info.value).startswith("roofline time 9.89 ms exceeds 5 ms on tpu-v5e (compute-bound ops 6.99 ms")
    assert "fusion.33" in str(info.value)


def test_assert_mfu(large, small):
    large.assert_mfu_at_least(0.6)
    large.assert_mfu_at_least("60%")
    with pytest.raises(AssertionError, match=r"roofline MFU \(static: the best reachable\) 0\.6% < 40\.0%"):
        small.assert_mfu_at_least(0.4)


def test_assert_max_totals(large):
    large.assert_max_flops(large.flops)
    large.assert_max_hbm_bytes(large.hbm_bytes * 1.01)
    large.assert_max_wire_bytes(large.wire_bytes, kind="all-reduce")
    with pytest.raises(AssertionError, match=r"HBM bytes .* exceed .*; largest ops:"):
        large.assert_max_hbm_bytes(1e6)
    with pytest.raises(AssertionError, match=r"all-reduce wire bytes 168 MB exceed 1 MB"):
        large.assert_max_wire_bytes(1e6, kind="all-reduce")
    with pytest.raises(AssertionError, match=r"FLOPs .* exceed"):
        large.assert_max_flops(1)
