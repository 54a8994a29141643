"""The ops table's ``category`` for XLA's ``fft`` instruction: ``fft`` (an O(n log n) transform with a cost rule
of its own), not ``elementwise``."""

from __future__ import annotations

import pytest


def test_cpu_fft_is_its_own_category():
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp

    import hloscope

    x = jax.ShapeDtypeStruct((8, 64), jnp.complex64)
    compiled = jax.jit(jnp.fft.fft).lower(x).compile()
    text = compiled.as_text()
    assert " fft(" in text  # XLA:CPU keeps one fft instruction
    ops = hloscope.analyze(compiled, chip="tpu-v5e").ops
    fft = ops[ops["opcode"] == "fft"]
    assert fft["category"].tolist() == ["fft"]
    # XLA's own count (HloCostAnalysis::HandleFft), the module's only FLOPs.
    cost = compiled.cost_analysis()
    cost = cost[0] if isinstance(cost, list) else cost
    assert fft["flops"].iloc[0] == pytest.approx(cost["flops"]) and cost["flops"] > 0


@pytest.mark.parametrize("name", ["tpu-v5e_transformer_scan_grad.hlo.txt", "gpu-h100_mlp_train.hlo.txt",
                                  "cpu_transformer_scan_grad.hlo.txt", "tpu-v5e_collectives.hlo.txt"])
def test_a_fusion_calls_a_matmul_exactly_when_it_has_a_matmul_dtype(fixtures_dir, name):
    """``calls_matmul`` (which lets the ops table skip a fusion's dtype lookup) is true exactly for the fusions
    ``matmul_dtype`` finds a matmul in: elsewhere ``op_dtype`` is the result's dtype."""
    from hloscope.parsers import parse_hlo
    from hloscope.roofline.score import calls_matmul, matmul_dtype, op_dtype, result_dtype

    module = parse_hlo(fixtures_dir / "hlo" / name)
    fusions = [i for c in module.computations for i in c.instructions if i.opcode == "fusion"]
    assert fusions
    seen = set()
    for inst in fusions:
        holds = calls_matmul(inst, module)
        assert holds == (matmul_dtype(inst, module) is not None), inst.name
        if not holds:
            assert op_dtype(inst, module) == result_dtype(inst.shape)
        seen.add(holds)
    if "transformer" in name:  # (fusions with and without dots; GPU matmuls are cuBLAS calls, not fused)
        assert seen == {True, False}
