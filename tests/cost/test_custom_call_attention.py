"""Fused attention custom calls (``hloscope/cost/custom_call_attention.py``): cuDNN ``__cudnn$fmha*`` and
Transformer Engine ``te_fused_attn_*_ffi``, against hand formulas written out here.

The HLO texts copy real GPU HLO: ``CUDNN_FWD_BWD`` and ``CUDNN_FLASH_DROPOUT`` are XLA's own test modules
(``xla/backends/gpu/tests/gpu_fused_mha_test.cc``, ROCm/xla 183fa00c, lines 285 and 1493; the corpus's
``ROCm__xla__EXTRACTED_cc_test_raw_strings.hlo_gpu.jsonl`` records 447 and 469); ``TE_FWD``/``TE_BWD`` copy
the two Transformer Engine calls of a JAX training step dumped from a real GPU run (the corpus's
``hlo_gpu/AMD-AGI__TraceLens__...te_fused_attn_categorization...@jit_loss_fn_17_.hlo.txt``).

Hand formulas (per execution; ``P`` = kept (query, key) pairs per batch x head):
forward ``2 BH P (Dqk + Dv) + (5 + bias + dropout) BH P`` FLOPs and ``BH P`` transcendentals; backward
``2 BH P (3 Dqk + 2 Dv) + (4 + bias + dropout) BH P + 2 BH Sq Dv``; causal ``P = S (S + 1) / 2``.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from hloscope.cost import OpCost, module_cost
from hloscope.cost.custom_call_attention import attention_pairs
from hloscope.parsers import parse_hlo_text

CORPUS = Path(__file__).resolve().parents[2].parent / "shared" / "corpus"
TE_REAL = CORPUS / "hlo_gpu" / ("AMD-AGI__TraceLens__tests__test_data_jax_te_fused_attn_categorization__"
                                "934987a2fc2f@jit_loss_fn_17_.hlo.txt")
OPAQUE = "opaque-custom-call"


def calls(text: str) -> dict[str, OpCost]:
    """Cost of every custom call of the module, by instruction name."""
    mc = module_cost(parse_hlo_text(text))
    return {r.instruction.name: r.cost for r in mc.rows if r.instruction.opcode == "custom-call"}


def bf16(*dims: int) -> int:
    return 2 * math.prod(dims)


def f32(*dims: int) -> int:
    return 4 * math.prod(dims)


# ---------------------------------------------------------------------------------------------------------
# The pair count
# ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("sq,skv", [(1, 1), (5, 5), (4, 9), (9, 4), (16, 16)])
@pytest.mark.parametrize("lo,hi", [(None, None), (None, 0), (None, 3), (-2, 0), (-3, None), (1, 2), (0, 0)])
def test_attention_pairs_is_the_brute_force_count(sq, skv, lo, hi):
    brute = sum(1 for i in range(sq) for j in range(skv)
                if (lo is None or j - i >= lo) and (hi is None or j - i <= hi))
    assert attention_pairs(sq, skv, lo, hi) == brute


def test_causal_pairs_are_half_the_square_plus_the_diagonal():
    for s in (1, 7, 2048):
        assert attention_pairs(s, s, None, 0) == s * (s + 1) // 2
    # bottom-right causal with more keys than queries: every query sees the whole prefix before it
    assert attention_pairs(4, 10, None, 6) == sum(7 + i for i in range(4))


# ---------------------------------------------------------------------------------------------------------
# cuDNN (XLA's fused-MHA test modules)
# ---------------------------------------------------------------------------------------------------------

CUDNN_FWD_BWD = r"""HloModule jit__unnamed_wrapped_function_, entry_computation_layout={(bf16[2,6,1024,64]{3,2,1,0}, bf16[2,6,64,1024]{3,2,1,0}, bf16[2,6,1024,64]{3,2,1,0}, bf16[2,6,1024,64]{3,2,1,0})->(bf16[2,6,1024,64]{3,2,1,0}, bf16[2,6,1024,64]{3,2,1,0}, bf16[2,6,64,1024]{3,2,1,0}, bf16[2,6,1024,64]{3,2,1,0})}, allow_spmd_sharding_propagation_to_output={true,true,true,true}

ENTRY main.88 {
  Arg_0.1 = bf16[2,6,1024,64]{3,2,1,0} parameter(0), sharding={replicated}
  Arg_1.2 = bf16[2,6,64,1024]{3,2,1,0} parameter(1), sharding={replicated}
  transpose = bf16[2,6,1024,64]{3,2,1,0} transpose(Arg_1.2), dimensions={0,1,3,2}
  Arg_2.3 = bf16[2,6,1024,64]{3,2,1,0} parameter(2), sharding={replicated}
  fmha-bmm-softmax-bmm = (bf16[2,6,1024,64]{3,2,1,0}, f32[2,6,1024]{2,1,0}, u8[0]{0}) custom-call(Arg_0.1, transpose, Arg_2.3), custom_call_target="__cudnn$fmhaSoftmax", operand_layout_constraints={bf16[2,6,1024,64]{3,2,1,0}, bf16[2,6,1024,64]{3,2,1,0}, bf16[2,6,1024,64]{3,2,1,0}}, backend_config={"cudnn_fmha_backend_config":{"algorithm":{"algo_id":"0","math_type":"TENSOR_OP_MATH","tuning_knobs":{"24":"0","17":"1"},"workspace_size":"0"},"fmha_scale":1,"dropout_rate":0,"bmm1_dot_dimension_numbers":{"lhs_contracting_dimensions":["3"],"rhs_contracting_dimensions":["3"],"lhs_batch_dimensions":["0","1"],"rhs_batch_dimensions":["0","1"]},"bmm2_dot_dimension_numbers":{"lhs_contracting_dimensions":["3"],"rhs_contracting_dimensions":["2"],"lhs_batch_dimensions":["0","1"],"rhs_batch_dimensions":["0","1"]},"intermediate_tensor_shape":{"element_type":"BF16","dimensions":["2","6","1024","1024"],"tuple_shapes":[],"layout":{"dim_level_types":[],"dim_unique":[],"dim_ordered":[],"minor_to_major":["3","2","1","0"],"tiles":[],"tail_padding_alignment_in_elements":"1","element_size_in_bits":"0","memory_space":"0","index_primitive_type":"PRIMITIVE_TYPE_INVALID","pointer_primitive_type":"PRIMITIVE_TYPE_INVALID","dynamic_shape_metadata_prefix_bytes":"0","split_configs":[]},"is_dynamic_dimension":[false,false,false,false]},"seed":"42","is_flash_attention":false,"is_causal_mask":false,"mask_type":"CAUSAL","max_seg_per_batch":0}}
  get-tuple-element = bf16[2,6,1024,64]{3,2,1,0} get-tuple-element(fmha-bmm-softmax-bmm), index=0
  transpose.2 = bf16[2,6,1024,64]{3,2,1,0} transpose(Arg_1.2), dimensions={0,1,3,2}
  get-tuple-element.2 = f32[2,6,1024]{2,1,0} get-tuple-element(fmha-bmm-softmax-bmm), index=1
  Arg_3.4 = bf16[2,6,1024,64]{3,2,1,0} parameter(3), sharding={replicated}
  fmha-bmm-softmax-bmm-backward = (bf16[2,6,1024,64]{3,2,1,0}, bf16[2,6,1024,64]{3,2,1,0}, bf16[2,6,1024,64]{3,2,1,0}, u8[0]{0}) custom-call(Arg_0.1, transpose.2, Arg_2.3, get-tuple-element.2, Arg_3.4, /*index=5*/get-tuple-element), custom_call_target="__cudnn$fmhaSoftmaxBackward", operand_layout_constraints={bf16[2,6,1024,64]{3,2,1,0}, bf16[2,6,1024,64]{3,2,1,0}, bf16[2,6,1024,64]{3,2,1,0}, f32[2,6,1024]{2,1,0}, bf16[2,6,1024,64]{3,2,1,0}, bf16[2,6,1024,64]{3,2,1,0}}, backend_config={"cudnn_fmha_backend_config":{"algorithm":{"algo_id":"0","math_type":"TENSOR_OP_MATH","tuning_knobs":{"24":"0","17":"1"},"workspace_size":"0"},"fmha_scale":1,"dropout_rate":0,"intermediate_tensor_shape":{"element_type":"BF16","dimensions":["2","6","1024","1024"],"tuple_shapes":[],"layout":{"dim_level_types":[],"dim_unique":[],"dim_ordered":[],"minor_to_major":["3","2","1","0"],"tiles":[],"tail_padding_alignment_in_elements":"1","element_size_in_bits":"0","memory_space":"0","index_primitive_type":"PRIMITIVE_TYPE_INVALID","pointer_primitive_type":"PRIMITIVE_TYPE_INVALID","dynamic_shape_metadata_prefix_bytes":"0","split_configs":[]},"is_dynamic_dimension":[false,false,false,false]},"bmm1_grad_gemm1_dot_dimension_numbers":{"lhs_contracting_dimensions":["2"],"rhs_contracting_dimensions":["2"],"lhs_batch_dimensions":["0","1"],"rhs_batch_dimensions":["0","1"]},"bmm1_grad_gemm2_dot_dimension_numbers":{"lhs_contracting_dimensions":["3"],"rhs_contracting_dimensions":["2"],"lhs_batch_dimensions":["0","1"],"rhs_batch_dimensions":["0","1"]},"bmm2_grad_gemm1_dot_dimension_numbers":{"lhs_contracting_dimensions":["2"],"rhs_contracting_dimensions":["2"],"lhs_batch_dimensions":["0","1"],"rhs_batch_dimensions":["0","1"]},"bmm2_grad_gemm2_dot_dimension_numbers":{"lhs_contracting_dimensions":["3"],"rhs_contracting_dimensions":["3"],"lhs_batch_dimensions":["0","1"],"rhs_batch_dimensions":["0","1"]},"seed":"42","is_flash_attention":false,"is_causal_mask":false,"mask_type":"CAUSAL","max_seg_per_batch":0}}
  get-tuple-element.3 = bf16[2,6,1024,64]{3,2,1,0} get-tuple-element(fmha-bmm-softmax-bmm-backward), index=0
  get-tuple-element.4 = bf16[2,6,1024,64]{3,2,1,0} get-tuple-element(fmha-bmm-softmax-bmm-backward), index=1
  transpose.1 = bf16[2,6,64,1024]{3,2,1,0} transpose(get-tuple-element.4), dimensions={0,1,3,2}
  get-tuple-element.5 = bf16[2,6,1024,64]{3,2,1,0} get-tuple-element(fmha-bmm-softmax-bmm-backward), index=2
  ROOT tuple.87 = (bf16[2,6,1024,64]{3,2,1,0}, bf16[2,6,1024,64]{3,2,1,0}, bf16[2,6,64,1024]{3,2,1,0}, bf16[2,6,1024,64]{3,2,1,0}) tuple(get-tuple-element, get-tuple-element.3, transpose.1, get-tuple-element.5)
} // main.88"""

CUDNN_FLASH_DROPOUT = r"""HloModule jit__unnamed_wrapped_function_, entry_computation_layout={(bf16[4,1024,4,64]{3,2,1,0}, bf16[4,1024,4,64]{3,2,1,0}, bf16[4,1024,4,64]{3,2,1,0}, bf16[4,1024,4,64]{3,2,1,0})->(bf16[4,1024,4,64]{3,2,1,0}, bf16[4,1024,4,64]{3,2,1,0}, bf16[4,1024,4,64]{3,2,1,0}, bf16[4,1024,4,64]{3,2,1,0})}, allow_spmd_sharding_propagation_to_parameters={true,true,true,true}, allow_spmd_sharding_propagation_to_output={true,true,true,true}

ENTRY main.21 {
  Arg_0.1 = bf16[4,1024,4,64]{3,2,1,0} parameter(0)
  Arg_1.2 = bf16[4,1024,4,64]{3,2,1,0} parameter(1)
  Arg_2.3 = bf16[4,1024,4,64]{3,2,1,0} parameter(2)
  constant.5 = s32[] constant(512)
  broadcast.6 = s32[4]{0} broadcast(constant.5), dimensions={}
  custom-call.7 = (bf16[4,4,1024,64]{3,1,2,0}, f32[4,4,1024]{2,1,0}, u8[0]{0}) custom-call(Arg_0.1, Arg_1.2, Arg_2.3, broadcast.6, broadcast.6), custom_call_target="__cudnn$fmhaSoftmaxDropout", operand_layout_constraints={bf16[4,1024,4,64]{3,2,1,0}, bf16[4,1024,4,64]{3,2,1,0}, bf16[4,1024,4,64]{3,2,1,0}, s32[4]{0}, s32[4]{0}}, api_version=API_VERSION_STATUS_RETURNING, backend_config={"cudnn_fmha_backend_config": {"algorithm": {"algo_id": "0", "math_type": "TENSOR_OP_MATH", "tuning_knobs": {"17": "1", "24": "0"}, "workspace_size": "0"}, "fmha_scale": 1.0, "dropout_rate": 0.5, "intermediate_tensor_shape": {"element_type": "BF16", "dimensions": ["4", "4", "1024", "1024"], "tuple_shapes": [], "layout": {"dim_level_types": [], "dim_unique": [], "dim_ordered": [], "minor_to_major": ["3", "2", "1", "0"], "tiles": [], "element_size_in_bits": "0", "memory_space": "0", "index_primitive_type": "PRIMITIVE_TYPE_INVALID", "pointer_primitive_type": "PRIMITIVE_TYPE_INVALID", "dynamic_shape_metadata_prefix_bytes": "0"}, "is_dynamic_dimension": [false, false, false, false]}, "seed": 42, "is_flash_attention": true, "mask_type": "PADDING", "bmm1_dot_dimension_numbers": {"lhs_contracting_dimensions": ["3"], "rhs_contracting_dimensions": ["3"], "lhs_batch_dimensions": ["0", "2"], "rhs_batch_dimensions": ["0", "2"]}, "bmm2_dot_dimension_numbers": {"lhs_contracting_dimensions": ["3"], "rhs_contracting_dimensions": ["1"], "lhs_batch_dimensions": ["0", "1"], "rhs_batch_dimensions": ["0", "2"]}}}
  get-tuple-element.9 = u8[0]{0} get-tuple-element(custom-call.7), index=2
  get-tuple-element.10 = f32[4,4,1024]{2,1,0} get-tuple-element(custom-call.7), index=1
  Arg_3.4 = bf16[4,1024,4,64]{3,2,1,0} parameter(3)
  get-tuple-element.8 = bf16[4,4,1024,64]{3,1,2,0} get-tuple-element(custom-call.7), index=0
  transpose.11 = bf16[4,1024,4,64]{3,2,1,0} transpose(get-tuple-element.8), dimensions={0,2,1,3}
  custom-call.12 = (bf16[4,4,1024,64]{3,1,2,0}, bf16[4,4,1024,64]{3,1,2,0}, bf16[4,4,1024,64]{3,1,2,0}, u8[0]{0}) custom-call(Arg_0.1, Arg_1.2, Arg_2.3, get-tuple-element.10, Arg_3.4, /*index=5*/transpose.11, broadcast.6, broadcast.6), custom_call_target="__cudnn$fmhaSoftmaxDropoutBackward", operand_layout_constraints={bf16[4,1024,4,64]{3,2,1,0}, bf16[4,1024,4,64]{3,2,1,0}, bf16[4,1024,4,64]{3,2,1,0}, f32[4,4,1024]{2,1,0}, bf16[4,1024,4,64]{3,2,1,0}, bf16[4,1024,4,64]{3,2,1,0}, s32[4]{0}, s32[4]{0}}, api_version=API_VERSION_STATUS_RETURNING, backend_config={"cudnn_fmha_backend_config": {"algorithm": {"algo_id": "0", "math_type": "TENSOR_OP_MATH", "tuning_knobs": {"17": "1", "24": "0"}, "workspace_size": "0"}, "fmha_scale": 1.0, "dropout_rate": 0.5, "intermediate_tensor_shape": {"element_type": "BF16", "dimensions": ["4", "4", "1024", "1024"], "tuple_shapes": [], "layout": {"dim_level_types": [], "dim_unique": [], "dim_ordered": [], "minor_to_major": ["3", "2", "1", "0"], "tiles": [], "element_size_in_bits": "0", "memory_space": "0", "index_primitive_type": "PRIMITIVE_TYPE_INVALID", "pointer_primitive_type": "PRIMITIVE_TYPE_INVALID", "dynamic_shape_metadata_prefix_bytes": "0"}, "is_dynamic_dimension": [false, false, false, false]}, "seed": 42, "is_flash_attention": true, "mask_type": "PADDING", "bmm1_grad_gemm1_dot_dimension_numbers": {"lhs_contracting_dimensions": ["2"], "rhs_contracting_dimensions": ["1"], "lhs_batch_dimensions": ["0", "1"], "rhs_batch_dimensions": ["0", "2"]}, "bmm1_grad_gemm2_dot_dimension_numbers": {"lhs_contracting_dimensions": ["3"], "rhs_contracting_dimensions": ["1"], "lhs_batch_dimensions": ["0", "1"], "rhs_batch_dimensions": ["0", "2"]}, "bmm2_grad_gemm1_dot_dimension_numbers": {"lhs_contracting_dimensions": ["2"], "rhs_contracting_dimensions": ["1"], "lhs_batch_dimensions": ["0", "1"], "rhs_batch_dimensions": ["0", "2"]}, "bmm2_grad_gemm2_dot_dimension_numbers": {"lhs_contracting_dimensions": ["3"], "rhs_contracting_dimensions": ["3"], "lhs_batch_dimensions": ["0", "2"], "rhs_batch_dimensions": ["0", "2"]}}}
  get-tuple-element.16 = u8[0]{0} get-tuple-element(custom-call.12), index=3
  get-tuple-element.13 = bf16[4,4,1024,64]{3,1,2,0} get-tuple-element(custom-call.12), index=0
  transpose.17 = bf16[4,1024,4,64]{3,2,1,0} transpose(get-tuple-element.13), dimensions={0,2,1,3}
  get-tuple-element.14 = bf16[4,4,1024,64]{3,1,2,0} get-tuple-element(custom-call.12), index=1
  transpose.18 = bf16[4,1024,4,64]{3,2,1,0} transpose(get-tuple-element.14), dimensions={0,2,1,3}
  get-tuple-element.15 = bf16[4,4,1024,64]{3,1,2,0} get-tuple-element(custom-call.12), index=2
  transpose.19 = bf16[4,1024,4,64]{3,2,1,0} transpose(get-tuple-element.15), dimensions={0,2,1,3}
  ROOT tuple.20 = (bf16[4,1024,4,64]{3,2,1,0}, bf16[4,1024,4,64]{3,2,1,0}, bf16[4,1024,4,64]{3,2,1,0}, bf16[4,1024,4,64]{3,2,1,0}) tuple(transpose.11, transpose.17, transpose.18, transpose.19)
} // main.21"""


def test_cudnn_forward_and_backward_bhsd_causal():
    """Q, K^T (transposed back), V ``[B=2, H=6, S=1024, D=64]``; ``mask_type: CAUSAL``."""
    b, h, s, d = 2, 6, 1024, 64
    bh, pairs = b * h, s * (s + 1) // 2
    kept = bh * pairs
    got = calls(CUDNN_FWD_BWD)
    fwd, bwd = got["fmha-bmm-softmax-bmm"], got["fmha-bmm-softmax-bmm-backward"]

    assert fwd.flops == 2 * kept * (d + d) + 5 * kept
    assert fwd.transcendentals == kept
    assert fwd.bytes_read == 3 * bf16(b, h, s, d)
    assert fwd.bytes_written == bf16(b, h, s, d) + f32(b, h, s)  # O and the softmax stats; u8[0] workspace
    assert "fmha-estimate" in fwd.flags and OPAQUE not in fwd.flags

    assert bwd.flops == 2 * kept * (3 * d + 2 * d) + 4 * kept + 2 * bh * s * d
    assert bwd.transcendentals == kept
    # Q, K, V, stats, dO, O read; dQ, dK, dV written
    assert bwd.bytes_read == 5 * bf16(b, h, s, d) + f32(b, h, s)
    assert bwd.bytes_written == 3 * bf16(b, h, s, d)


def test_cudnn_backward_matmuls_are_two_and_a_half_forward():
    """FlashAttention-2's convention: five matmuls against two."""
    b, h, s, d = 2, 6, 1024, 64
    kept = b * h * s * (s + 1) // 2
    got = calls(CUDNN_FWD_BWD)
    fwd_mm = got["fmha-bmm-softmax-bmm"].flops - 5 * kept
    bwd_mm = got["fmha-bmm-softmax-bmm-backward"].flops - 4 * kept - 2 * b * h * s * d
    assert bwd_mm == 2.5 * fwd_mm


def test_cudnn_causal_mask_halves_the_matmuls():
    no_mask = CUDNN_FWD_BWD.replace('"mask_type":"CAUSAL"', '"mask_type":"NO_MASK"')
    assert no_mask != CUDNN_FWD_BWD
    b, h, s, d = 2, 6, 1024, 64
    full, causal = b * h * s * s, b * h * s * (s + 1) // 2
    got = calls(no_mask)["fmha-bmm-softmax-bmm"]
    assert got.flops == 2 * full * 2 * d + 5 * full
    mm_ratio = (calls(CUDNN_FWD_BWD)["fmha-bmm-softmax-bmm"].flops - 5 * causal) / (got.flops - 5 * full)
    assert mm_ratio == pytest.approx(0.5, abs=1e-3)


def test_cudnn_sliding_window():
    windowed = CUDNN_FWD_BWD.replace('"mask_type":"CAUSAL"', '"mask_type":"CAUSAL","sliding_window_length":128')
    b, h, s, d = 2, 6, 1024, 64
    # query i sees keys i-127 .. i
    per_head = sum(min(i + 1, 128) for i in range(s))
    kept = b * h * per_head
    assert calls(windowed)["fmha-bmm-softmax-bmm"].flops == 2 * kept * 2 * d + 5 * kept


def test_cudnn_flash_bshd_dropout_padding():
    """Q, K, V ``[B=4, S=1024, H=4, D=64]`` with bmm1 batch dims {0, 2}; dropout 0.5, ``PADDING`` mask (the
    real lengths are run-time operands: counted at the maximum, flagged)."""
    b, s, h, d = 4, 1024, 4, 64
    kept = b * h * s * s
    got = calls(CUDNN_FLASH_DROPOUT)
    fwd, bwd = got["custom-call.7"], got["custom-call.12"]
    assert fwd.flops == 2 * kept * 2 * d + (5 + 1) * kept
    assert bwd.flops == 2 * kept * 5 * d + (4 + 1) * kept + 2 * b * h * s * d
    assert fwd.bytes_read == 3 * bf16(b, s, h, d) + 2 * 4 * b  # + two s32[4] sequence lengths
    assert fwd.bytes_written == bf16(b, h, s, d) + f32(b, h, s)
    for c in (fwd, bwd):
        assert {"fmha-estimate", "fmha-padding-upper-bound"} <= c.flags


def test_cudnn_bias_counts_one_flop_per_score():
    text = CUDNN_FWD_BWD.replace('"__cudnn$fmhaSoftmax"', '"__cudnn$fmhaScaleBiasSoftmax"', 1)
    b, h, s, d = 2, 6, 1024, 64
    kept = b * h * s * (s + 1) // 2
    assert calls(text)["fmha-bmm-softmax-bmm"].flops == 2 * kept * 2 * d + 6 * kept


def test_cudnn_without_config_guesses_the_layout():
    """No backend config (hand-written HLO): matmuls only, from Q's and K's shapes, flagged."""
    text = """HloModule f
ENTRY e {
  q = bf16[2,6,1024,64]{3,2,1,0} parameter(0)
  k = bf16[2,6,1024,64]{3,2,1,0} parameter(1)
  v = bf16[2,6,1024,64]{3,2,1,0} parameter(2)
  ROOT o = (bf16[2,6,1024,64]{3,2,1,0}, u8[0]{0}) custom-call(q, k, v), custom_call_target="__cudnn$fmhaSoftmax"
}"""
    (c,) = calls(text).values()
    assert c.flops == 4 * 2 * 6 * 1024 * 1024 * 64
    assert {"fmha-estimate", "fmha-layout-guessed"} <= c.flags


# ---------------------------------------------------------------------------------------------------------
# Transformer Engine
# ---------------------------------------------------------------------------------------------------------

_TE_ATTRS = ("attn_heads = 16 : i64, bias_batch = 0 : i64, bias_heads = 0 : i64, bias_type = 0 : i64, "
             "deterministic = false, dropout_probability = 1.000000e-01 : f64, input_batch = 2 : i64, "
             "is_training = true, kv_max_seqlen = 2048 : i64, mask_type = 2 : i64, max_segments_per_seq = 1 : i64, "
             "num_gqa_groups = 16 : i64, q_max_seqlen = 2048 : i64, qk_head_dim = 128 : i64, qkv_layout = 5 : i64, "
             "scaling_factor = 0.088388347648318433 : f64, v_head_dim = 128 : i64, window_size_left = -1 : i64, "
             "window_size_right = -1 : i64")

TE_MODULE = """HloModule te
ENTRY e {
  qkv = bf16[2,2048,3,16,128]{4,3,2,1,0} parameter(0)
  c12 = bf16[0]{0} constant({})
  rng = u32[2]{0} parameter(1)
  seqlens = s32[3]{0} parameter(2)
  c11 = f32[0]{0} constant({})
  do = bf16[2,2048,16,128]{3,2,1,0} parameter(3)
  te_fused_attn_forward_ffi.10 = (bf16[2,2048,16,128]{3,2,1,0}, f32[2,16,2048,1]{3,2,1,0}, u32[2,4]{1,0}, u8[1]{0}) custom-call(qkv, c12, c12, c12, rng, seqlens, seqlens, c11, c11, c11, c11, c11, c11), custom_call_target="te_fused_attn_forward_ffi", operand_layout_constraints={bf16[2,2048,3,16,128]{4,3,2,1,0}, bf16[0]{0}, bf16[0]{0}, bf16[0]{0}, u32[2]{0}, s32[3]{0}, s32[3]{0}, f32[0]{0}, f32[0]{0}, f32[0]{0}, f32[0]{0}, f32[0]{0}, f32[0]{0}}, api_version=API_VERSION_TYPED_FFI, backend_config={__ATTRS__}
  o = bf16[2,2048,16,128]{3,2,1,0} get-tuple-element(te_fused_attn_forward_ffi.10), index=0
  stats = f32[2,16,2048,1]{3,2,1,0} get-tuple-element(te_fused_attn_forward_ffi.10), index=1
  state = u32[2,4]{1,0} get-tuple-element(te_fused_attn_forward_ffi.10), index=2
  ROOT te_fused_attn_backward_ffi.12 = (bf16[2,2048,3,16,128]{4,3,2,1,0}, bf16[0]{0}, bf16[0]{0}, bf16[0]{0}, u8[33816576]{0}) custom-call(qkv, c12, c12, c12, stats, state, o, do, seqlens, seqlens, c11, c11, c11, c11, c11, c11), custom_call_target="te_fused_attn_backward_ffi", operand_layout_constraints={bf16[2,2048,3,16,128]{4,3,2,1,0}, bf16[0]{0}, bf16[0]{0}, bf16[0]{0}, f32[2,16,2048,1]{3,2,1,0}, u32[2,4]{1,0}, bf16[2,2048,16,128]{3,2,1,0}, bf16[2,2048,16,128]{3,2,1,0}, s32[3]{0}, s32[3]{0}, f32[0]{0}, f32[0]{0}, f32[0]{0}, f32[0]{0}, f32[0]{0}, f32[0]{0}}, api_version=API_VERSION_TYPED_FFI, backend_config={__ATTRS__}
}""".replace("__ATTRS__", _TE_ATTRS)

#: B=2, H=16, S=2048, D=128, causal (mask_type 2), dropout 0.1 while training, no bias.
TE_B, TE_H, TE_S, TE_D = 2, 16, 2048, 128
TE_KEPT = TE_B * TE_H * TE_S * (TE_S + 1) // 2
TE_FWD_FLOPS = 2 * TE_KEPT * 2 * TE_D + (5 + 1) * TE_KEPT
TE_BWD_FLOPS = 2 * TE_KEPT * 5 * TE_D + (4 + 1) * TE_KEPT + 2 * TE_B * TE_H * TE_S * TE_D


def test_te_forward_and_backward_from_attributes():
    got = calls(TE_MODULE)
    fwd, bwd = got["te_fused_attn_forward_ffi.10"], got["te_fused_attn_backward_ffi.12"]
    assert fwd.flops == TE_FWD_FLOPS and bwd.flops == TE_BWD_FLOPS
    assert fwd.transcendentals == bwd.transcendentals == TE_KEPT
    qkv = bf16(2, 2048, 3, 16, 128)
    assert fwd.bytes_read == qkv + 4 * 2 + 2 * 4 * 3  # packed QKV, rng seed u32[2], two s32[3]
    # O, softmax stats, rng state; the u8[1] workspace is not charged
    assert fwd.bytes_written == bf16(2, 2048, 16, 128) + f32(2, 16, 2048, 1) + 4 * 8
    assert bwd.bytes_read == qkv + f32(2, 16, 2048, 1) + 4 * 8 + 2 * bf16(2, 2048, 16, 128) + 2 * 4 * 3
    assert bwd.bytes_written == qkv  # dQKV; the 33.8 MB workspace is not charged
    for c in (fwd, bwd):
        assert "fmha-estimate" in c.flags and OPAQUE not in c.flags and "fmha-padding-upper-bound" not in c.flags


def test_te_masks_windows_and_packed_layouts():
    def fwd(**attrs):
        text = TE_MODULE
        for key, value in attrs.items():
            text = text.replace(f"{key} = ", f"{key}_was = ").replace("backend_config={",
                                                                     f"backend_config={{{key} = {value}, ")
        return calls(text)["te_fused_attn_forward_ffi.10"]

    s, d, bh = TE_S, TE_D, TE_B * TE_H
    no_mask = fwd(mask_type="0 : i64")
    assert no_mask.flops == 2 * bh * s * s * 2 * d + 6 * bh * s * s
    # sliding window (left 255, right 0) on a causal mask: 256 keys per query at most
    windowed = fwd(window_size_left="255 : i64", window_size_right="0 : i64")
    kept = bh * sum(min(i + 1, 256) for i in range(s))
    assert windowed.flops == 2 * kept * 2 * d + 6 * kept
    # padding + causal: counted at the maximum length, flagged
    padded = fwd(mask_type="3 : i64")
    assert padded.flops == TE_FWD_FLOPS and "fmha-padding-upper-bound" in padded.flags
    # packed THD layout (T3HD = 10)
    assert "fmha-padding-upper-bound" in fwd(qkv_layout="10 : i64").flags
    # no dropout at inference
    assert fwd(is_training="false").flops == 2 * TE_KEPT * 2 * d + 5 * TE_KEPT


def test_te_pre_ffi_target_stays_unknown():
    """``te_fused_attn_forward`` (no ``_ffi``) carries a binary descriptor, not attributes."""
    text = TE_MODULE.replace('"te_fused_attn_forward_ffi"', '"te_fused_attn_forward"')
    c = calls(text)["te_fused_attn_forward_ffi.10"]
    assert OPAQUE in c.flags and math.isnan(c.flops)


@pytest.mark.skipif(not TE_REAL.is_file(), reason=f"no corpus file {TE_REAL}")
def test_te_calls_of_a_real_training_step():
    """Every TE call of the dumped JAX step (2 forward, 2 backward) costed with the numbers of the copy above."""
    got = calls(TE_REAL.read_text())
    te = {n: c for n, c in got.items() if n.startswith("te_fused_attn")}
    forward = [c for n, c in te.items() if "forward" in n]
    backward = [c for n, c in te.items() if "backward" in n]
    assert len(forward) == len(backward) == 2
    assert {c.flops for c in forward} == {TE_FWD_FLOPS}
    assert {c.flops for c in backward} == {TE_BWD_FLOPS}
