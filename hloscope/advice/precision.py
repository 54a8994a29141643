"""Rule ``slow-matmul-precision``: matmuls at a slower rate than the chip's fast path -- TPU dots at
``precision=HIGH``/``HIGHEST`` (3 or 6 bf16 MXU passes) and f32 dots on a chip whose bf16 peak is higher.

Source: JAX's ``jax.lax.Precision`` docstring and "Matmul precision" guide (HIGHEST: 6 bf16 passes on TPU, HIGH: 3);
the chip's peak table (``hloscope/roofline/chips.toml``: e.g. H100 SXM dense f32 (TF32) 4.9e14 vs bf16 9.9e14).

Gain: ``roofline_s - max(compute_s / speedup, memory_s', comm_s)`` with ``speedup`` the passes, or
``peak[bf16] / peak[f32]`` for f32 dots (whose HBM bytes would also halve in bf16: ``memory_s' = memory_s / 2``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hloscope.advice._common import SIGNIFICANT_SHARE, Advice, OpsColumns, picked, shares
from hloscope.units import duration

if TYPE_CHECKING:
    import numpy as np

    from hloscope.result import Report

RULE = "slow-matmul-precision"
SOURCE = "JAX jax.lax.Precision (TPU HIGH = 3, HIGHEST = 6 bf16 passes); chip peak table (bf16 vs f32)"


def advise(report: Report, share: np.ndarray | None = None, ops: OpsColumns | None = None) -> list[Advice]:
    ops = OpsColumns(report) if ops is None else ops
    share = shares(ops) if share is None else share  # (advise() hands over the one it made for every rule)
    chip = report.chip
    peaks = chip.peak_flops_per_s
    out = []
    for i in picked(ops.equal("category", "matmul") & (share >= SIGNIFICANT_SHARE)):
        r = ops.row(i)
        caveats = str(r["caveats"] or "").split(",")
        passes = next((int(c.split(":", 1)[1]) for c in caveats if c.startswith("precision-passes:")), 0)
        if passes > 1:
            new = max(r["compute_s"] / passes, r["memory_s"], r["comm_s"])
            out.append(Advice(
                RULE, r["module"], r["instruction"],
                f"{r['dtype']} dot at {passes} bf16 passes (operand_precision high/highest): compute "
                f"{duration(r['compute_s'])}",
                "use precision=DEFAULT (one bf16 pass) or bf16 operands where the accuracy allows",
                float(r["roofline_s"] - new), f"roofline_s - max(compute_s / {passes}, memory_s, comm_s)", SOURCE))
            continue
        if r["dtype"] == "f32" and "bf16" in peaks and "f32" in peaks and peaks["bf16"] > 1.2 * peaks["f32"]:
            speedup = peaks["bf16"] / peaks["f32"]
            new = max(r["compute_s"] / speedup, r["memory_s"] / 2, r["comm_s"])
            out.append(Advice(
                RULE, r["module"], r["instruction"],
                f"f32 dot on {chip.id}: f32 peak {peaks['f32']:.3g} vs bf16 {peaks['bf16']:.3g} FLOP/s",
                "cast the operands to bf16 (keep f32 accumulation: preferred_element_type=jnp.float32)",
                float(r["roofline_s"] - new), f"roofline_s - max(compute_s / {speedup:.2f}, memory_s / 2, comm_s)",
                SOURCE))
    return out
