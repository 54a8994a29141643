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
