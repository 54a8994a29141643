"""Dots and convolutions: 2 FLOPs per multiply-accumulate.

XLA semantics: ``HloCostAnalysis::GetDotFlops`` and ``GetConvolutionFlops`` (xla/service/hlo_cost_analysis.cc);
operation semantics https://openxla.org/xla/operation_semantics#dotgeneral and #conv_convolution.

- dot: ``2 * output elements * product of the lhs contracting dimensions``; batch dimensions are part of the
  output, so they count once.
- convolution: ``2 * batch/batch_group_count * output features * input features/feature_group_count *
  prod_d valid(d)`` where ``valid(d)`` counts the (output position, kernel tap) pairs of spatial dimension d
  that land on a real input element, not on padding or a hole of lhs (base) dilation. TPU's
  dot-as-convolution (``dim_labels=bf_io->bf``, no spatial dims) reduces to the dot formula.

Operand precision: FLOPs are the math FLOPs whatever the precision (XLA's too). A dot or convolution of two
f32 operands printed with ``operand_precision={high,high}`` or ``{highest,highest}`` is flagged
``operand-precision:high`` / ``operand-precision:highest`` (``precision_flags``), so that the roofline can charge
the extra matrix-unit passes where the chip runs them (TPU: 3 and 6 bf16 passes, ``PRECISION_PASSES``;
``hloscope.roofline.score``). jax 0.10.2's ``jax.lax.Precision`` docstring: "This only has an effect on float32
computations"; on TPU DEFAULT "performs float32 computations in bfloat16", HIGH "in 3 bfloat16 passes", HIGHEST
"in 6 bfloat16". libtpu (0.0.52) keeps the attribute in the compiled text, on the ``convolution`` it lowers
a dot to, and rewrites ``DotAlgorithmPreset.BF16_BF16_F32_X3`` / ``_X6`` into ``{high,high}`` /
``{highest,highest}``. Operand precisions that differ (``{highest,default}``) take the lower one (a lower bound:
how such a product is split is not documented); bf16 or integer operands are exact in one pass and are not
flagged.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import TYPE_CHECKING

from hloscope.cost._bytes import boundary

if TYPE_CHECKING:
    from hloscope.cost._types import CostContext, OpCost
    from hloscope.hlo import HloInstruction

FMA_FLOPS = 2  # XLA HloCostAnalysis::kFmaFlops

#: bf16 matrix-unit passes of an f32 x f32 product on TPU, by ``operand_precision`` value (jax 0.10.2
#: ``jax.lax.Precision`` docstring; module docstring). Unitless.
PRECISION_PASSES = {"default": 1, "high": 3, "highest": 6}
#: Prefix of the cost flag naming the (lower) operand precision of an f32 dot/convolution above DEFAULT.
PRECISION_FLAG = "operand-precision:"
_F32_TYPES = frozenset({"f32"})


def precision_flags(inst: HloInstruction, ctx: CostContext) -> frozenset[str]:
    """``{"operand-precision:high"}`` or ``{"operand-precision:highest"}`` for a dot/convolution of two f32
    operands whose ``operand_precision`` asks for more than DEFAULT (the lower of the two operands'); empty
    otherwise (module docstring). Values other than default/high/highest (``packed_nibble``) count as
    default."""
    text = inst.attribute("operand_precision")  # (read alone: no full decode of the attributes)
    if not text or len(inst.operands) < 2:
        return frozenset()
    values = [v.strip().lower() for v in str(text).strip("{} ").split(",") if v.strip()]
    if len(values) < 2:
        return frozenset()
    lowest = min(values[:2], key=lambda v: PRECISION_PASSES.get(v, 1))
    if PRECISION_PASSES.get(lowest, 1) <= 1:
        return frozenset()
    if any(ctx.operand_shape(inst, k).element_type not in _F32_TYPES for k in (0, 1)):
        return frozenset()
    return frozenset({PRECISION_FLAG + lowest})


def dot_flops(lhs_dims: tuple[int, ...], contracting: tuple[int, ...], output_elements: int) -> int:
    """``2 * output_elements * prod(lhs_dims[c] for c in contracting)``."""
    return FMA_FLOPS * output_elements * math.prod(lhs_dims[c] for c in contracting)


def dot(inst: HloInstruction, ctx: CostContext) -> OpCost:
    lhs = ctx.operand_shape(inst, 0)
    contracting = inst.attribute("lhs_contracting_dims", ())
    return boundary(inst, ctx, flops=dot_flops(lhs.dims, contracting, inst.shape.element_count),
                    flags=precision_flags(inst, ctx))


@lru_cache(maxsize=4096)  # bounded: keys are (sizes, window) tuples of distinct convolution geometries
def valid_taps(input_size: int, output_size: int, window_size: int, stride: int, padding_low: int,
               base_dilation: int, window_dilation: int) -> int:
    """(output index, kernel index) pairs of one spatial dimension that read a real input element.

    The padded, base-dilated input has ``(input_size - 1) * base_dilation + 1`` positions after
    ``padding_low``; a tap reads position ``o * stride + k * window_dilation - padding_low``, real when it
    is inside that range and a multiple of ``base_dilation``.
    """
    dilated = (input_size - 1) * base_dilation + 1 if input_size else 0
    count = 0
    for k in range(window_size):
        offset = k * window_dilation - padding_low
        for o in range(output_size):
            p = o * stride + offset
            if 0 <= p < dilated and p % base_dilation == 0:
                count += 1
    return count


def convolution(inst: HloInstruction, ctx: CostContext) -> OpCost:
    lhs = ctx.operand_shape(inst, 0)
    attrs = inst.attributes
    labels = attrs.get("dim_labels")
    if labels is None:
        return boundary(inst, ctx, flags=frozenset({"unknown-dim-labels"}))
    window = attrs.get("window", ())
    feature_groups = attrs.get("feature_group_count", 1)
    batch_groups = attrs.get("batch_group_count", 1)
    # cuDNN convolution custom calls return (output, workspace): the output is the first element.
    out = inst.shape.tuple_shapes[0] if inst.shape.is_tuple and inst.shape.tuple_shapes else inst.shape
    taps = 1
    for d, (in_dim, out_dim) in enumerate(zip(labels.input_spatial_dimensions, labels.output_spatial_dimensions)):
        w = window[d] if d < len(window) else None
        if w is None:
            taps *= lhs.dims[in_dim] if lhs.dims[in_dim] == out.dims[out_dim] else out.dims[out_dim]
            continue
        taps *= valid_taps(lhs.dims[in_dim], out.dims[out_dim], w.size, w.stride, w.padding_low,
                           w.base_dilation, w.window_dilation)
    batch = lhs.dims[labels.input_batch_dimension]
    input_features = lhs.dims[labels.input_feature_dimension]
    output_features = out.dims[labels.output_feature_dimension]
    macs = (input_features // feature_groups) * output_features * (batch // batch_groups) * taps
    return boundary(inst, ctx, flops=FMA_FLOPS * macs, flags=precision_flags(inst, ctx))
