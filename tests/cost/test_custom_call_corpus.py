"""The library custom calls of the real-input corpus (``/work/shared/corpus``): every Transformer Engine and
cuDNN attention call and every cuDNN convolution with ``dim_labels`` is costed, with the numbers of the hand
formulas (``test_custom_call_attention.py``) recomputed here from each call's own attributes."""

from __future__ import annotations

import math
import os
import sys
from pathlib import Path

os.environ.setdefault("JAX_PLATFORMS", "cpu")
sys.path.insert(0, str(Path(__file__).resolve().parent))

from hloscope.cost.custom_call_common import mlir_attribute_dict  # noqa: E402
from test_custom_calls import OPAQUE, corpus_scan, needs_corpus  # noqa: E402


def te_expected(attrs: dict, backward: bool) -> int:
    """The TE formula for the corpus's calls: no sliding window, causal masks with ``Sq = Skv``."""
    b, h = attrs["input_batch"], attrs["attn_heads"]
    sq, skv = attrs["q_max_seqlen"], attrs["kv_max_seqlen"]
    dqk, dv = attrs.get("qk_head_dim", attrs.get("head_dim")), attrs.get("v_head_dim", attrs.get("head_dim"))
    assert attrs.get("window_size_left", -1) == -1 and attrs.get("window_size_right", -1) in (-1, 0)
    if attrs["mask_type"] in (2, 3, 4, 5):
        assert sq == skv
        kept = b * h * sq * (sq + 1) // 2
    else:
        kept = b * h * sq * skv
    extra = int(attrs.get("bias_type", 0) != 0) + int(bool(attrs.get("is_training")) and
                                                       attrs.get("dropout_probability", 0) > 0)
    if backward:
        return 2 * kept * (3 * dqk + 2 * dv) + (4 + extra) * kept + 2 * b * h * sq * dv
    return 2 * kept * (dqk + dv) + (5 + extra) * kept


@needs_corpus
def test_every_te_attention_call_is_costed_from_its_attributes():
    te = [c for c in corpus_scan().calls if c.target in ("te_fused_attn_forward_ffi", "te_fused_attn_backward_ffi")]
    assert len(te) >= 100  # 115 forward and 75 backward in the corpus as collected
    for call in te:
        attrs = mlir_attribute_dict(call.backend_config.strip())
        assert OPAQUE not in call.cost.flags, call.source
        assert call.cost.flops == te_expected(attrs, "backward" in call.target), (call.source, call.name)
        assert call.cost.bytes_read > 0 and call.cost.bytes_written > 0


@needs_corpus
def test_every_cudnn_attention_call_reads_its_config():
    fmha = [c for c in corpus_scan().calls if c.target.startswith("__cudnn$fmha")]
    assert len(fmha) >= 30
    for call in fmha:
        assert OPAQUE not in call.cost.flags and "fmha-layout-guessed" not in call.cost.flags, call.source
        assert call.cost.flops > 0 and call.cost.transcendentals > 0


@needs_corpus
def test_cudnn_convolutions_with_dim_labels_are_costed():
    convs = [c for c in corpus_scan().calls if c.target.startswith("__cudnn$conv")]
    assert len(convs) >= 60
    for call in convs:
        flagged = OPAQUE in call.cost.flags
        assert flagged == math.isnan(call.cost.flops)
        if not flagged:
            assert call.cost.flops > 0, (call.source, call.name)
    assert sum(OPAQUE in c.cost.flags for c in convs) <= 2  # the two test modules that print no dim_labels
