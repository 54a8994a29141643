"""Rule ``memory-bound-matmul``: a dot whose arithmetic intensity is below the chip's critical intensity.

Source: "How to Scale Your Model" (Austin et al., 2025), Part 1 ("Rooflines"): a matmul ``X[B, D] @ W[D, F]`` in
bf16 does ``2BDF`` FLOPs over ``2BD + 2DF + 2BF`` bytes, so for ``B << D, F`` its intensity is about ``B``; it is
compute-bound once that exceeds the chip's critical intensity (TPU v5e bf16: 1.97e14 / 8.1e11 ≈ 240), i.e. at a
per-device batch of ~240 tokens -- ~120 with int8 weights, whose bytes halve.

For a dot ``[batch, m, k] x [batch, k, n]`` the smaller free side (``m`` or ``n``: the tokens; the other operand
is the weight) is grown by a factor ``t``: FLOPs and the bytes of that side's operand and of the result scale by
``t``, the weight's bytes do not. With ``F`` FLOPs, ``a`` the scaled bytes, ``b`` the weight's bytes and ``I_c``
the op's critical intensity, ``F t / (a t + b) = I_c`` gives ``t = I_c b / (F - I_c a)`` (no such size when
``F <= I_c a``: the op stays memory-bound at any batch). The gain is ``roofline_s - compute_s``: the time above the
compute roof, which a larger batch spends on more work instead (an upper bound per unit of work).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from hloscope.advice._common import (SIGNIFICANT_SHARE, Advice, OpsColumns, dot_in, modules_by_name, picked,
                                     row_instruction, shares)
from hloscope.units import duration

if TYPE_CHECKING:
    import numpy as np

    from hloscope.result import Report

RULE = "memory-bound-matmul"
SOURCE = "How to Scale Your Model, Part 1 (Rooflines): arithmetic intensity of X[B,D]@W[D,F] ~ B vs the critical intensity"


def batch_for_critical_intensity(flops: float, scaled_bytes: float, fixed_bytes: float,
                                 critical_intensity: float) -> float:
    """The factor ``t`` by which the token side must grow to reach ``critical_intensity`` (see the module
    docstring); ``inf`` when no batch gets there."""
    denom = flops - critical_intensity * scaled_bytes
    return critical_intensity * fixed_bytes / denom if denom > 0 else math.inf


def advise(report: Report, share: np.ndarray | None = None, ops: OpsColumns | None = None) -> list[Advice]:
    ops = OpsColumns(report) if ops is None else ops
    modules = modules_by_name(report)
    share = shares(ops) if share is None else share  # (advise() hands over the one it made for every rule)
    out = []
    for i in picked(ops.equal("category", "matmul") & ops.equal("bound", "memory") & (share >= SIGNIFICANT_SHARE)):
        r = ops.row(i)
        found = row_instruction(modules, r)
        if found is None:
            continue
        module, _, inst = found
        mm = dot_in(module, r["computation"], inst)
        ic = float(r["critical_intensity"])
        if mm is None or not ic > 0:
            continue
        tokens_lhs = mm.m <= mm.n  # the smaller free side is the tokens'
        side, size = ("m (lhs rows)", mm.m) if tokens_lhs else ("n (rhs columns)", mm.n)
        scaled = (mm.lhs_bytes if tokens_lhs else mm.rhs_bytes) + mm.out_bytes
        weight = mm.rhs_bytes if tokens_lhs else mm.lhs_bytes
        t = batch_for_critical_intensity(mm.flops, scaled, weight, ic)
        w_elem = weight / max(mm.batch * mm.k * (mm.n if tokens_lhs else mm.m), 1)
        t8 = batch_for_critical_intensity(mm.flops, scaled, weight / w_elem, ic) if w_elem > 1 else math.inf
        need = size * t
        if math.isinf(t):
            action = (f"no batch reaches the critical intensity {ic:.0f} FLOPs/byte: the token side's own bytes "
                      "dominate (grow k or fuse the operand's producer)")
        else:
            action = f"grow {side} from {size} to >= {math.ceil(need)} per device (x{t:.1f}) to be compute-bound"
            if math.isfinite(t8) and w_elem > 1:
                action += f"; with 1-byte (int8/fp8) weights >= {math.ceil(size * t8)}"
        out.append(Advice(
            RULE, r["module"], r["instruction"],
            f"dot {f'{mm.batch} x ' if mm.batch > 1 else ''}{mm.m}x{mm.k} @ {mm.k}x{mm.n}: intensity {r['intensity']:.1f} < critical "
            f"{ic:.0f} FLOPs/byte ({r['dtype']}); memory {duration(r['memory_s'])} vs compute "
            f"{duration(r['compute_s'])}",
            action, float(r["roofline_s"] - r["compute_s"]), "roofline_s - compute_s (time above the compute roof)",
            SOURCE))
    return out
