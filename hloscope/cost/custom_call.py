"""Custom calls: cost the targets whose work is known from their shapes or backend config.

Units everywhere: FLOPs and transcendentals per execution of the call, bytes of HBM traffic. Costed targets:

- cuBLAS / cuBLASLt GEMMs (``__cublas$gemm``, ``__cublas$lt$matmul``, ``__cublas$lt$matmul$f8``, hipBLAS): the
  ``gemm_backend_config.dot_dimension_numbers`` of the backend config give a dot:
  ``2 * output elements * contracting size``; bytes: operands read, output written (the result may be a
  tuple (output, workspace): the workspace is scratch and not charged).
- cuDNN convolutions (``__cudnn$convForward``, ``__cudnn$convBiasActivationForward``, ``__cudnn$convForwardGraph``,
  ``__cudnn$convBackwardInput``, ``__cudnn$convBackwardFilter``; ``xla/service/gpu/cublas_cudnn.cc``): the
  convolution FLOPs of ``dot.py`` (XLA's ``GetConvolutionFlops``: ``2 * batch * output features * input
  features / groups * valid kernel taps``) over the *forward* convolution the call computes a part of, from
  ``window=`` and ``dim_labels=``, which describe that forward convolution. Its (input, filter, output) are the
  call's (operand 0, operand 1, result) for the forward kinds, (result, operand 1, operand 0) for backward
  input and (operand 0, result, operand 1) for backward filter, as XLA's GPU layout assignment and
  ``gpu_conv_runner.cc`` read them; a backward pass does the forward pass's multiply-adds. Bias, side input and
  activation of the fused kinds are not counted (XLA's ``GpuHloCostAnalysis`` does not either). Bytes:
  boundary less the workspace. Without ``dim_labels`` the call stays unknown.
- Fused attention: cuDNN (``__cudnn$fmha*``) and Transformer Engine (``te_fused_attn_*_ffi``), from the backend
  config's dot dimension numbers or attributes: ``custom_call_attention``.
- Dense linear algebra: LAPACK (``lapack_?<routine>_ffi``), cuSOLVER/hipSOLVER (``cusolver_<routine>_ffi``),
  ``__cusolver$cholesky``, ``__cublas$triangularSolve``: LAWN 41 / Golub & Van Loan operation counts times the
  batch, flagged ``estimated-flops``: ``custom_call_linalg``.
- A custom call that runs a computation (XLA's ``__triton`` and ``__cudnn$fusion`` with ``called_computations``):
  the computation's FLOPs, as for a fusion; bytes at the boundary.
- Kernels whose backend config carries a cost estimate (Pallas/Mosaic ``tpu_custom_call``,
  ``triton_kernel_call_ffi``'s ``cost_estimate_json``, any target with a ``cost_estimate``:
  ``custom_call_common.cost_estimate``): ``flops`` and ``transcendentals`` taken as given; ``bytes_accessed``
  split into the result's size written and the rest read; without ``bytes_accessed`` the bytes are unknown
  (NaN, ``unknown-bytes``), never the operand sizes.
- Buffer allocation (``AllocateBuffer``, ``CreateBuffer``): no work, no traffic.
- TPU / host helpers that move or annotate data (``ConcatBitcast``, ``Sharding``, ``annotate_device_placement``,
  ``MoveToHost``, ``MoveToDevice``, ``AssumeGatherIndicesInBound``, ...): 0 FLOPs, boundary bytes.
- Anything else -- a Pallas/Mosaic/Triton kernel without a cost estimate (``__gpu$xla.gpu.triton``,
  ``mosaic_gpu_v2``, ...), a library call hloscope does not know: FLOPs and bytes unknown (NaN), flags
  ``opaque-custom-call``, ``unknown-flops``, ``unknown-bytes``. Operand sizes are not traffic: a paged-attention
  kernel is handed the whole KV cache and reads the pages it needs (vLLM's ragged paged attention: 2.6 GB of
  operands, 0.33 ms measured on a TPU whose HBM moves 1.2 GB in that time). Never 0, never XLA's -1.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from hloscope.cost._bytes import boundary
from hloscope.cost._types import OpCost
from hloscope.cost.custom_call_attention import TE_ATTENTION_TARGETS, cudnn_fmha, te_fused_attention
from hloscope.cost.custom_call_common import backend_config, cost_estimate, without_workspace
from hloscope.cost.custom_call_linalg import linalg, routine
from hloscope.cost.dot import FMA_FLOPS, valid_taps

if TYPE_CHECKING:
    from hloscope.cost._types import CostContext
    from hloscope.hlo import HloInstruction

HELPER_TARGETS = frozenset({
    "ConcatBitcast", "AllocateBuffer", "Sharding", "SPMDFullToShardShape", "SPMDShardToFullShape",
    "annotate_device_placement", "MoveToHost", "MoveToDevice", "AssumeGatherIndicesInBound",
    "LayoutConstraint", "PadToStatic", "SliceToDynamic", "X64Combine", "X64SplitLow", "X64SplitHigh",
    "InspectSharding", "xla_python_cpu_callback", "xla_python_gpu_callback", "xla_ffi_python_cpu_callback",
    "xla_ffi_python_gpu_callback", "Pin", "Unpin", "CreateBuffer", "cu_threefry2x32", "AllocateBuffer",
})
GEMM_TARGETS = frozenset({"__cublas$gemm", "__cublas$lt$matmul", "__cublas$lt$matmul$f8",
                          "__hipblas$gemm", "__hipblaslt$matmul"})
#: cuDNN convolution targets -> which of (input, filter, output) the call's operand 0, operand 1 and result are.
CUDNN_CONV_KINDS = {
    "__cudnn$convForward": "forward", "__cudnn$convBiasActivationForward": "forward",
    "__cudnn$convForwardGraph": "forward", "__cudnn$convBackwardInput": "backward_input",
    "__cudnn$convBackwardFilter": "backward_filter",
}
#: Custom calls that run a called computation as one kernel.
BODY_TARGETS = frozenset({"__triton", "__cudnn$fusion"})
#: Targets that only reserve memory: nothing is read or written.
ALLOCATION_TARGETS = frozenset({"AllocateBuffer", "CreateBuffer"})
#: Flags of a custom call whose work hloscope cannot know (module docstring, last item).
OPAQUE_FLAGS = frozenset({"opaque-custom-call", "unknown-flops", "unknown-bytes"})


def _gemm(inst: HloInstruction, ctx: CostContext, cfg: dict[str, Any]) -> OpCost | None:
    gemm = cfg.get("gemm_backend_config", cfg)
    dims = gemm.get("dot_dimension_numbers")
    if not dims:
        return None
    lhs = ctx.operand_shape(inst, 0)
    contracting = tuple(int(d) for d in dims.get("lhs_contracting_dimensions", ()))
    out = inst.shape.tuple_shapes[0] if inst.shape.is_tuple else inst.shape
    flops = FMA_FLOPS * out.element_count * math.prod(lhs.dims[c] for c in contracting)
    return without_workspace(inst, boundary(inst, ctx, flops=flops))


def cudnn_convolution(inst: HloInstruction, ctx: CostContext, kind: str) -> OpCost | None:
    """A cuDNN convolution custom call as the forward convolution it is part of (module docstring); None
    without ``dim_labels`` or with shapes that do not fit them."""
    attrs = inst.attributes
    labels = attrs.get("dim_labels")
    if labels is None or len(inst.operands) < 2:
        return None
    result = inst.shape.tuple_shapes[0] if inst.shape.is_tuple and inst.shape.tuple_shapes else inst.shape
    a, b = ctx.operand_shape(inst, 0), ctx.operand_shape(inst, 1)
    if kind == "backward_input":
        inp, out = result, a
    elif kind == "backward_filter":
        inp, out = a, b
    else:
        inp, out = a, result
    in_labelled = {labels.input_batch_dimension, labels.input_feature_dimension, *labels.input_spatial_dimensions}
    out_labelled = {labels.output_batch_dimension, labels.output_feature_dimension,
                    *labels.output_spatial_dimensions}
    if max(in_labelled) >= len(inp.dims) or max(out_labelled) >= len(out.dims):
        return None
    window = attrs.get("window", ())
    taps = 1
    for d, (in_dim, out_dim) in enumerate(zip(labels.input_spatial_dimensions, labels.output_spatial_dimensions)):
        w = window[d] if d < len(window) else None
        if w is None:
            taps *= valid_taps(inp.dims[in_dim], out.dims[out_dim], 1, 1, 0, 1, 1)
        else:
            taps *= valid_taps(inp.dims[in_dim], out.dims[out_dim], w.size, w.stride, w.padding_low,
                               w.base_dilation, w.window_dilation)
    feature_groups = attrs.get("feature_group_count", 1)
    batch_groups = attrs.get("batch_group_count", 1)
    batch = inp.dims[labels.input_batch_dimension]
    # An unlabelled trailing dim is cuDNN's vectorized channel (int8x4 / int8x32, NCHW_VECT_C: printed
    # `b01f?` or left out of `bf01`): features = feature dim x vector width.
    input_features = inp.dims[labels.input_feature_dimension] * math.prod(
        n for d, n in enumerate(inp.dims) if d not in in_labelled)
    output_features = out.dims[labels.output_feature_dimension] * math.prod(
        n for d, n in enumerate(out.dims) if d not in out_labelled)
    macs = (input_features // feature_groups) * output_features * (batch // batch_groups) * taps
    return without_workspace(inst, boundary(inst, ctx, flops=FMA_FLOPS * macs))


def _body(inst: HloInstruction, ctx: CostContext) -> OpCost | None:
    callees = inst.called_computations.get("calls", ())
    if len(callees) != 1:
        return None
    work = ctx.computation_cost(callees[0])
    return boundary(inst, ctx, flops=work.flops, transcendentals=work.transcendentals, flags=work.flags)


def _from_estimate(inst: HloInstruction, ctx: CostContext, est: dict[str, Any]) -> OpCost:
    base = boundary(inst, ctx, flops=float(est.get("flops") or 0),
                    transcendentals=float(est.get("transcendentals") or 0))
    if est.get("bytes_accessed") is None:
        return OpCost(base.flops, base.transcendentals, math.nan, math.nan, flags=base.flags | {"unknown-bytes"})
    total = float(est["bytes_accessed"])
    out = float(inst.shape.size_bytes)
    return OpCost(base.flops, base.transcendentals, max(total - out, 0.0), min(out, total), flags=base.flags)


def cost(inst: HloInstruction, ctx: CostContext) -> OpCost:
    target = inst.attributes.get("custom_call_target", "")
    if target in ALLOCATION_TARGETS:
        return OpCost()
    if target in HELPER_TARGETS:
        return boundary(inst, ctx)
    result = None
    # (Backend configs are read only where a rule needs them: a kernel's may hold megabytes of IR.)
    if target in GEMM_TARGETS:
        result = _gemm(inst, ctx, backend_config(inst))
    elif target.startswith(("__cudnn$fmha", "__cudnn$flash")):
        result = cudnn_fmha(inst, ctx, target, backend_config(inst))
    elif target in TE_ATTENTION_TARGETS:
        result = te_fused_attention(inst, ctx, target, backend_config(inst))
    elif target in CUDNN_CONV_KINDS:
        result = cudnn_convolution(inst, ctx, CUDNN_CONV_KINDS[target])
    elif target in BODY_TARGETS:
        result = _body(inst, ctx)
    elif routine(target) is not None:
        result = linalg(inst, ctx, target, backend_config(inst))
    if result is None and "cost_estimate" in inst.backend_config_text:
        est = cost_estimate(backend_config(inst))
        if est is not None:
            result = _from_estimate(inst, ctx, est)
    if result is not None:
        return result
    return OpCost(math.nan, math.nan, math.nan, math.nan, flags=OPAQUE_FLAGS)
