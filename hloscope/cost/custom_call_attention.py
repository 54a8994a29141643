"""Fused attention custom calls: cuDNN flash attention (XLA) and Transformer Engine (JAX FFI).

Units: FLOPs and transcendentals per execution of the call; bytes are HBM bytes.

**What is counted.** Let ``BH`` be batch x query heads, ``Sq``/``Skv`` the query/key sequence lengths,
``Dqk``/``Dv`` the head dims of Q/K and V, and ``P`` the (query, key) score pairs the mask keeps per
(batch, head) -- ``Sq * Skv`` without a mask; ``attention_pairs`` counts them exactly for causal and
sliding-window masks (``Sq (Sq + 1) / 2`` for a causal mask with ``Sq = Skv``, so a causal mask halves the
matmul FLOPs as FlashAttention's benchmark convention does).

- Forward: two matmuls, ``S = Q K^T`` (``2 BH P Dqk``) and ``O = softmax(S) V`` (``2 BH P Dv``): with
  ``Dqk = Dv = D`` and no mask this is ``4 B H Sq Skv D``, the FLOP count of FlashAttention-2 (Dao 2023, §4.1;
  its ``benchmark_flash_attention.py``: ``4 * batch * seqlen**2 * nheads * headdim``, halved when causal).
  Plus the softmax as unfused HLO would count it (``HloCostAnalysis``: 1 FLOP per add/multiply/max, ``exp`` a
  transcendental), per kept score: scale 1, row max 1, subtract 1, row sum 1, normalise 1 (5), +1 for a bias
  add, +1 for the dropout multiply; and 1 transcendental (``exp``).
- Backward: five matmuls -- recompute ``S = Q K^T`` (Dqk), ``dV = P^T dO`` (Dv), ``dP = dO V^T`` (Dv),
  ``dQ = dS K`` (Dqk), ``dK = dS^T Q`` (Dqk): ``2 BH P (3 Dqk + 2 Dv)``, which is 2.5x the forward matmuls
  when ``Dqk = Dv`` (FlashAttention-2's ``2.5 * f`` for the backward pass). Plus, per kept score, scale 1,
  subtract the saved log-sum-exp 1, ``dS = P (dP - delta)`` 2, scale ``dS`` 1 (4; +1 bias, +1 dropout) and 1
  transcendental (recomputing ``exp``); and ``delta = rowsum(dO * O)``: ``2 BH Sq Dv``.
- Bytes: operands read plus results written, less the scratch workspace (a trailing rank-1 ``u8`` result,
  as for cuBLAS), i.e. the HBM lower bound of a kernel that keeps ``S`` and ``P`` on chip.

Flags: ``fmha-estimate`` always (the elementwise part is a convention; kernels skip whole masked tiles, not
single scores); ``fmha-padding-upper-bound`` when a padding mask or packed (THD) layout means the real
sequence lengths are only known at run time (counted at their maximum); ``fmha-layout-guessed`` when the
backend config is missing and the layout is guessed from Q's and K's shapes.

**cuDNN** (``xla/service/gpu/cublas_cudnn.cc``): forward ``__cudnn$fmhaSoftmax``, ``__cudnn$fmhaSoftmaxDropout``,
``__cudnn$fmhaScaleBiasSoftmax``, ``__cudnn$fmhaScaleBiasSoftmaxDropout``, ``__cudnn$fmhaSoftmaxF8``;
backward the same names with ``Backward`` (``__cudnn$fmhaSoftmaxBackwardF8`` for FP8). Operands 0-2 are Q, K, V
in both directions. The shapes come from ``cudnn_fmha_backend_config`` (``backend_configs.proto``
``CudnnfMHABackendConfig``): forward ``bmm1_dot_dimension_numbers`` (Q K^T: Q's batch, contracting = Dqk,
rest = Sq; K's rest = Skv) and ``bmm2_dot_dimension_numbers`` (P V: V's contracting = Skv, rest = Dv);
backward ``bmm1_grad_gemm1`` (rhs Q: contracting Sq, rest Dqk), ``bmm1_grad_gemm2`` (rhs K: contracting Skv)
and ``bmm2_grad_gemm2`` (rhs V: contracting Dv, rest Skv). Failing those, ``intermediate_tensor_shape``
(``[B, H, Sq, Skv]``). ``mask_type`` (``NO_MASK``, ``PADDING``, ``CAUSAL``, ``PADDING_CAUSAL``, ``ALIBI``; the
older ``is_causal_mask``) with the causal diagonal top-left (cuDNN's default), ``sliding_window_length``
(> 0: query ``i`` sees keys ``i - w < j <= i``), ``dropout_rate``.

**Transformer Engine** (``te_fused_attn_forward_ffi``, ``te_fused_attn_backward_ffi``: TE JAX's XLA FFI
targets, ``transformer_engine/jax/csrc/extensions/attention.cpp``): every size is an attribute of the MLIR
backend config -- ``input_batch``, ``attn_heads`` (query heads), ``q_max_seqlen``, ``kv_max_seqlen``,
``qk_head_dim``/``v_head_dim`` (older: ``head_dim``), ``mask_type`` (``NVTE_Mask_Type``: 0 none, 1 padding,
2 causal, 3 padding+causal -- top-left diagonal; 4 causal, 5 padding+causal -- bottom-right),
``window_size_left``/``window_size_right`` (-1 unbounded; query ``i`` sees keys
``[i + Skv - Sq - left, i + Skv - Sq + right]``, TE's and FlashAttention's convention), ``bias_type`` (0 none),
``dropout_probability`` with ``is_training``, ``qkv_layout`` (``NVTE_QKV_Layout``; 10-14, 17, 18, 23, 24 are
packed THD layouts). The pre-FFI targets (``te_fused_attn_forward``) carry an opaque binary descriptor and
stay unknown.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from hloscope.cost._bytes import boundary
from hloscope.cost._types import OpCost
from hloscope.cost.custom_call_common import without_workspace
from hloscope.cost.dot import FMA_FLOPS

if TYPE_CHECKING:
    from hloscope.cost._types import CostContext
    from hloscope.hlo import HloInstruction, Shape

#: cuDNN fused attention targets (``xla/service/gpu/cublas_cudnn.cc``).
CUDNN_FMHA_FORWARD = frozenset({
    "__cudnn$fmhaSoftmax", "__cudnn$fmhaSoftmaxDropout", "__cudnn$fmhaScaleBiasSoftmax",
    "__cudnn$fmhaScaleBiasSoftmaxDropout", "__cudnn$fmhaSoftmaxF8"})
CUDNN_FMHA_BACKWARD = frozenset({
    "__cudnn$fmhaSoftmaxBackward", "__cudnn$fmhaSoftmaxDropoutBackward", "__cudnn$fmhaScaleBiasSoftmaxBackward",
    "__cudnn$fmhaScaleBiasSoftmaxDropoutBackward", "__cudnn$fmhaSoftmaxBackwardF8"})
#: Transformer Engine JAX fused attention (XLA FFI) targets.
TE_ATTENTION_TARGETS = frozenset({"te_fused_attn_forward_ffi", "te_fused_attn_backward_ffi"})

#: Softmax FLOPs per kept score (module docstring), before the bias and dropout terms.
FORWARD_SOFTMAX_FLOPS = 5
BACKWARD_SOFTMAX_FLOPS = 4

_CUDNN_MASKS = {"NO_MASK": 0, "PADDING": 1, "CAUSAL": 2, "PADDING_CAUSAL": 3, "ALIBI": 4}
#: ``NVTE_QKV_Layout`` values of the packed (THD) formats, whose real sequence lengths are run-time data.
_TE_THD_LAYOUTS = frozenset({10, 11, 12, 13, 14, 17, 18, 23, 24})
ESTIMATE_FLAG = "fmha-estimate"
PADDING_FLAG = "fmha-padding-upper-bound"
GUESSED_FLAG = "fmha-layout-guessed"


@lru_cache(maxsize=1024)
def attention_pairs(sq: int, skv: int, lo: int | None = None, hi: int | None = None) -> int:
    """(query ``i``, key ``j``) pairs with ``0 <= i < sq``, ``0 <= j < skv`` and ``lo <= j - i <= hi``
    (None: unbounded). A causal mask with a top-left diagonal is ``hi = 0``; bottom-right ``hi = skv - sq``."""
    if sq <= 0 or skv <= 0:
        return 0
    if lo is None and hi is None:
        return sq * skv
    total = 0
    last = skv - 1
    for i in range(sq):
        first = 0 if lo is None else max(0, i + lo)
        end = last if hi is None else min(last, i + hi)
        if end >= first:
            total += end - first + 1
    return total


def _dims(values: Any) -> tuple[int, ...] | None:
    try:
        return tuple(int(v) for v in values or ())
    except (TypeError, ValueError):
        return None


def _split(shape: Shape, batch: Any, contracting: Any) -> tuple[int, int, int] | None:
    """(product of ``batch`` dims, of ``contracting`` dims, of the other dims) of ``shape``."""
    b, c = _dims(batch), _dims(contracting)
    rank = len(shape.dims)
    if b is None or c is None or not c or any(not 0 <= d < rank for d in b + c) or set(b) & set(c):
        return None
    rest = [d for d in range(rank) if d not in b and d not in c]
    return (math.prod(shape.dims[d] for d in b), math.prod(shape.dims[d] for d in c),
            math.prod(shape.dims[d] for d in rest))


def attention_cost(inst: HloInstruction, ctx: CostContext, *, backward: bool, bh: int, sq: int, skv: int,
                   dqk: int, dv: int, lo: int | None = None, hi: int | None = None, bias: bool = False,
                   dropout: bool = False, flags: frozenset[str] = frozenset()) -> OpCost:
    """The module docstring's formulas for one call; bytes at the boundary less the scratch workspace."""
    pairs = bh * attention_pairs(sq, skv, lo, hi)
    extra = int(bias) + int(dropout)
    if backward:
        flops = FMA_FLOPS * pairs * (3 * dqk + 2 * dv) + (BACKWARD_SOFTMAX_FLOPS + extra) * pairs \
            + FMA_FLOPS * bh * sq * dv
    else:
        flops = FMA_FLOPS * pairs * (dqk + dv) + (FORWARD_SOFTMAX_FLOPS + extra) * pairs
    cost = boundary(inst, ctx, flops=flops, transcendentals=pairs, flags=flags | {ESTIMATE_FLAG})
    return without_workspace(inst, cost)


# ---------------------------------------------------------------------------------------------------------
# cuDNN
# ---------------------------------------------------------------------------------------------------------


def _cudnn_sizes(inst: HloInstruction, ctx: CostContext, fmha: dict[str, Any],
                 backward: bool) -> tuple[int, int, int, int, int] | None:
    """(BH, Sq, Skv, Dqk, Dv) from Q, K, V and the config's dot dimension numbers (module docstring)."""
    if len(inst.operands) < 3:
        return None
    q, k, v = (ctx.operand_shape(inst, i) for i in range(3))
    if backward:
        g11, g12, g22 = (fmha.get(n) or {} for n in ("bmm1_grad_gemm1_dot_dimension_numbers",
                                                     "bmm1_grad_gemm2_dot_dimension_numbers",
                                                     "bmm2_grad_gemm2_dot_dimension_numbers"))
        qs = _split(q, g11.get("rhs_batch_dimensions"), g11.get("rhs_contracting_dimensions"))
        ks = _split(k, g12.get("rhs_batch_dimensions"), g12.get("rhs_contracting_dimensions"))
        vs = _split(v, g22.get("rhs_batch_dimensions"), g22.get("rhs_contracting_dimensions"))
        if qs and ks and vs and ks[2] == qs[2]:
            (bh, sq, dqk), (_, skv, _), (_, dv, skv_v) = qs, ks, vs
            if skv_v == skv:
                return bh, sq, skv, dqk, dv
    else:
        b1, b2 = fmha.get("bmm1_dot_dimension_numbers") or {}, fmha.get("bmm2_dot_dimension_numbers") or {}
        qs = _split(q, b1.get("lhs_batch_dimensions"), b1.get("lhs_contracting_dimensions"))
        ks = _split(k, b1.get("rhs_batch_dimensions"), b1.get("rhs_contracting_dimensions"))
        vs = _split(v, b2.get("rhs_batch_dimensions"), b2.get("rhs_contracting_dimensions"))
        if qs and ks and vs and ks[1] == qs[1] and vs[1] == ks[2]:
            (bh, dqk, sq), (_, _, skv), (_, _, dv) = qs, ks, vs
            return bh, sq, skv, dqk, dv
    # The intermediate (score) tensor [B, H, Sq, Skv]; Dqk and Dv from Q's and V's sizes.
    inter = _dims((fmha.get("intermediate_tensor_shape") or {}).get("dimensions"))
    if inter and len(inter) >= 3 and all(inter):
        sq, skv = inter[-2], inter[-1]
        bh = math.prod(inter[:-2])
        dqk, rq = divmod(q.element_count, bh * sq)
        dv, rv = divmod(v.element_count, bh * skv)
        if not rq and not rv and dqk and dv:
            return bh, sq, skv, dqk, dv
    return None


def _cudnn_mask(fmha: dict[str, Any]) -> int:
    mask = fmha.get("mask_type")
    if isinstance(mask, str):
        return _CUDNN_MASKS.get(mask, 0)
    if isinstance(mask, int) and not isinstance(mask, bool):
        return mask
    return 2 if fmha.get("is_causal_mask") else 0


def cudnn_fmha(inst: HloInstruction, ctx: CostContext, target: str, cfg: dict[str, Any]) -> OpCost | None:
    """A ``__cudnn$fmha*`` call from its backend config; the shape-only guess when there is none."""
    backward = "Backward" in target
    fmha = cfg.get("cudnn_fmha_backend_config")
    if not isinstance(fmha, dict):
        return guessed_fmha(inst, ctx, backward)
    sizes = _cudnn_sizes(inst, ctx, fmha, backward)
    if sizes is None:
        return guessed_fmha(inst, ctx, backward)
    bh, sq, skv, dqk, dv = sizes
    mask = _cudnn_mask(fmha)
    hi = 0 if mask in (2, 3) else None
    try:
        window = int(fmha.get("sliding_window_length") or 0)
    except (TypeError, ValueError):
        window = 0
    lo = -(window - 1) if window > 0 else None
    try:
        rate = float(fmha.get("dropout_rate") or 0)
    except (TypeError, ValueError):
        rate = 0.0
    flags = frozenset({PADDING_FLAG}) if mask in (1, 3) else frozenset()
    return attention_cost(inst, ctx, backward=backward, bh=bh, sq=sq, skv=skv, dqk=dqk, dv=dv, lo=lo, hi=hi,
                          bias="Bias" in target or mask == 4, dropout="Dropout" in target and rate > 0,
                          flags=flags)


def guessed_fmha(inst: HloInstruction, ctx: CostContext, backward: bool) -> OpCost | None:
    """No usable backend config: Q and K rank 4, ``[B, S, H, D]`` or ``[B, H, S, D]`` (D last; the sequence is
    the larger middle dim, as heads rarely outnumber positions). Matmul FLOPs only -- forward
    ``4 B H Sq Skv D``, backward 2.5x -- flagged ``fmha-layout-guessed``."""
    if len(inst.operands) < 2:
        return None
    q = ctx.operand_shape(inst, 0)
    k = ctx.operand_shape(inst, 1)
    if len(q.dims) != 4 or len(k.dims) != 4:
        return None
    b, d = q.dims[0], q.dims[3]
    heads = min(q.dims[1], q.dims[2])
    sq = max(q.dims[1], q.dims[2])
    skv = max(k.dims[1], k.dims[2])
    flops = 2 * FMA_FLOPS * b * heads * sq * skv * d
    if backward:
        flops = flops * 5 // 2
    return boundary(inst, ctx, flops=flops, flags=frozenset({ESTIMATE_FLAG, GUESSED_FLAG}))


# ---------------------------------------------------------------------------------------------------------
# Transformer Engine
# ---------------------------------------------------------------------------------------------------------


def _int(cfg: dict[str, Any], *keys: str) -> int | None:
    for key in keys:
        value = cfg.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value == int(value):
            return int(value)
    return None


def te_fused_attention(inst: HloInstruction, ctx: CostContext, target: str, cfg: dict[str, Any]) -> OpCost | None:
    """``te_fused_attn_{forward,backward}_ffi`` from its attributes (module docstring); None when one is
    missing."""
    batch, heads = _int(cfg, "input_batch"), _int(cfg, "attn_heads")
    sq, skv = _int(cfg, "q_max_seqlen"), _int(cfg, "kv_max_seqlen")
    dqk = _int(cfg, "qk_head_dim", "head_dim")
    dv = _int(cfg, "v_head_dim", "head_dim")
    sizes = (batch, heads, sq, skv, dqk, dv)
    if any(s is None or s < 0 for s in sizes):
        return None
    assert batch is not None and heads is not None and sq is not None and skv is not None
    assert dqk is not None and dv is not None
    mask = _int(cfg, "mask_type") or 0
    left = _int(cfg, "window_size_left")
    right = _int(cfg, "window_size_right")
    offset = skv - sq
    his = []
    if mask in (2, 3):
        his.append(0)
    elif mask in (4, 5):
        his.append(offset)
    if right is not None and right >= 0:
        his.append(offset + right)
    hi = min(his) if his else None
    lo = offset - left if left is not None and left >= 0 else None
    try:
        rate = float(cfg.get("dropout_probability") or 0)
    except (TypeError, ValueError):
        rate = 0.0
    dropout = bool(cfg.get("is_training", True)) and rate > 0
    padded = mask in (1, 3, 5) or _int(cfg, "qkv_layout") in _TE_THD_LAYOUTS
    return attention_cost(inst, ctx, backward="backward" in target, bh=batch * heads, sq=sq, skv=skv, dqk=dqk,
                          dv=dv, lo=lo, hi=hi, bias=bool(_int(cfg, "bias_type")), dropout=dropout,
                          flags=frozenset({PADDING_FLAG}) if padded else frozenset())
