"""Dots and convolutions: 2 FLOPs per multiply-accumulate.

XLA semantics: ``HloCostAnalysis::GetDotFlops`` and ``GetConvolutionFlops`` (xla/service/hlo_cost_analysis.cc);
operation semantics https://openxla.org/xla/operation_semantics#dotgeneral and #conv_convolution.

- dot: ``2 * output elements * product of the lhs contracting dimensions``; batch dimensions are part of the
  output, so they count once.
- convolution: ``2 * batch/batch_group_count * output features * input features/feature_group_count *
  prod_d valid(d)`` where ``valid(d)`` counts the (output position, kernel tap) pairs of spatial dimension d
  that land on a real input element, not on padding or a hole of lhs (base) dilation. TPU's
  dot-as-convolution (``dim_labels=bf_io->bf``, no spatial dims) reduces to the dot formula.
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


def dot_flops(lhs_dims: tuple[int, ...], contracting: tuple[int, ...], output_elements: int) -> int:
    """``2 * output_elements * prod(lhs_dims[c] for c in contracting)``."""
    return FMA_FLOPS * output_elements * math.prod(lhs_dims[c] for c in contracting)


def dot(inst: HloInstruction, ctx: CostContext) -> OpCost:
    lhs = ctx.operand_shape(inst, 0)
    contracting = inst.attributes.get("lhs_contracting_dims", ())
    return boundary(inst, ctx, flops=dot_flops(lhs.dims, contracting, inst.shape.element_count))


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
    return boundary(inst, ctx, flops=FMA_FLOPS * macs)
