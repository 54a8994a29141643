"""The H100 fixture (fixtures/make_gpu_fixtures.py): cuBLAS GEMMs costed by hand formula, where XLA's own
``cost_analysis()`` counts them as nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hloscope.cost import module_cost
from hloscope.parsers import parse_hlo

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "hlo"
STEM = "gpu-h100_mlp_train"


@pytest.fixture(scope="module")
def costed():
    meta = json.loads((FIXTURES / f"{STEM}.xla_cost.json").read_text())
    return module_cost(parse_hlo(FIXTURES / f"{STEM}.hlo.txt")), meta


def test_gemm_custom_calls_are_the_five_matmuls_of_the_step(costed):
    mc, meta = costed
    t, d, f = meta["dims"]["tokens"], meta["dims"]["d_model"], meta["dims"]["d_ff"]
    gemms = [r for r in mc.rows if r.instruction.opcode == "custom-call"]
    targets = {r.instruction.attributes["custom_call_target"] for r in gemms}
    assert targets == {"__cublas$lt$matmul"}
    # Forward x@w1, h@w2; backward dW2 = h^T g, dh = g w2^T, dW1 = x^T dh' (x is not differentiated): each
    # 2*t*d*f FLOPs (hand formula, dims from the fixture script).
    assert len(gemms) == 5
    assert [r.cost.flops for r in gemms] == [2 * t * d * f] * 5
    assert not any(r.cost.flags for r in mc.rows)


def test_xla_cost_analysis_misses_the_gemms_hloscope_counts(costed):
    mc, meta = costed
    gemm_flops = sum(r.cost.flops for r in mc.rows if r.instruction.opcode == "custom-call")
    # XLA's GPU cost analysis charges these custom calls nothing: its total is exactly the rest of the program.
    assert mc.flops - gemm_flops == meta["flops"]
    assert mc.transcendentals == meta["transcendentals"]
    assert meta["flops"] < 0.01 * mc.flops


def test_gemm_workspace_is_not_charged(costed):
    mc, _ = costed
    for r in mc.rows:
        inst = r.instruction
        if inst.opcode != "custom-call":
            continue
        out, workspace = inst.shape.tuple_shapes
        assert workspace.element_type == "s8"
        assert r.cost.bytes_written == out.size_bytes  # bf16 output only, untiled on GPU
