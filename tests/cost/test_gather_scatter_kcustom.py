"""A ``kind=kCustom`` fusion holding a gather or scatter costs the FLOPs of that one instruction (issue #20).

XLA's ``HloCostAnalysis::HandleFusion`` (xla/service/hlo_cost_analysis.cc): ``if (fusion->IsCustomFusion())``,
the first ``kGather`` or ``kScatter`` among the fused computation's instructions is costed alone
(``HandleGather``: no FLOPs; ``HandleScatter``: ``FLOPs(to_apply) x update elements``, transcendentals alike)
and the rest of the body is ignored. On TPU libtpu fuses the index arithmetic (and/shift/or/compare/select
packing the indices for the ``GatherScatterIndicesBitpacked`` custom call) into such fusions
(``tests/generator``: ``gather_rows``, ``scatter_add``). docs/xla_cost_rules.md §6.1; hloscope/cost/fusion.py.

The bodies below are those of the deviceless TPU v5e compile of those programs (jax 0.10.2, libtpu 0.0.52),
reduced and without TPU layouts. Expected numbers are worked by hand and checked against XLA's own cost
analysis of the same text (``cost_oracle.xla_cost``: the CPU client's ``HloCostAnalysis``).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ.setdefault("JAX_PLATFORMS", "cpu")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import pytest  # noqa: E402

from hloscope.cost import module_cost  # noqa: E402
from hloscope.parsers import parse_hlo_text  # noqa: E402

#: take_along_axis(x[:64], idx % 128) on TPU: the column index split into (row, column) by and/shift,
#: bit-packed, then a gather of 64 scalars. Index arithmetic: 2 x and + 2 x shift-right-logical on s32[64,1]
#: = 256 one-FLOP ops; the trailing negate adds 64 more, also ignored by XLA in a kCustom fusion.
_GATHER = """HloModule gather_KIND

%fused_computation.1 (param_0.5: f32[64,128], param_1.8: s32[64]) -> f32[64] {
  %param_0.5 = f32[64,128]{1,0} parameter(0)
  %constant.41 = s32[] constant(63)
  %broadcast.34 = s32[64,1]{1,0} broadcast(%constant.41), dimensions={}
  %param_1.8 = s32[64]{0} parameter(1)
  %reshape.20 = s32[64,1]{1,0} reshape(%param_1.8)
  %and.12 = s32[64,1]{1,0} and(%broadcast.34, %reshape.20)
  %constant.40 = s32[] constant(0)
  %broadcast.33 = s32[64,1]{1,0} broadcast(%constant.40), dimensions={}
  %shift-right-logical.3 = s32[64,1]{1,0} shift-right-logical(%and.12, %broadcast.33)
  %constant.39 = s32[] constant(8128)
  %broadcast.32 = s32[64,1]{1,0} broadcast(%constant.39), dimensions={}
  %and.11 = s32[64,1]{1,0} and(%broadcast.32, %reshape.20)
  %constant.38 = s32[] constant(6)
  %broadcast.31 = s32[64,1]{1,0} broadcast(%constant.38), dimensions={}
  %shift-right-logical.2 = s32[64,1]{1,0} shift-right-logical(%and.11, %broadcast.31)
  %concatenate.2 = s32[64,2]{1,0} concatenate(%shift-right-logical.3, %shift-right-logical.2), dimensions={1}
  %packed = s32[64,2]{1,0} PACK
  %gather.7 = f32[64]{0} gather(%param_0.5, %packed), offset_dims={}, collapsed_slice_dims={0,1}, start_index_map={0,1}, index_vector_dim=1, slice_sizes={1,1}
  ROOT %negate.1 = f32[64]{0} negate(%gather.7)
}

ENTRY %main (x: f32[64,128], idx: s32[64]) -> f32[64] {
  %x = f32[64,128]{1,0} parameter(0)
  %idx = s32[64]{0} parameter(1)
  ROOT %gather_fusion.1 = f32[64]{0} fusion(%x, %idx), kind=KIND, calls=%fused_computation.1
}
"""

#: x.at[idx].add(upd) and friends on TPU: f32[256,64] operand, 32 row indices, f32[32,64] updates (2048
#: elements); the index arithmetic (or, compare, and, shift, select on s32[32,1]: 5 x 32 = 160 FLOPs) precedes
#: the scatter. COMBINER is the to_apply body.
_SCATTER = """HloModule scatter_KIND

%region_0.1 (Arg_0.1: f32[], Arg_1.1: f32[]) -> f32[] {
  %Arg_0.1 = f32[] parameter(0)
  %Arg_1.1 = f32[] parameter(1)
  COMBINER
}

%fused_computation (param_0: f32[256,64], param_1.2: s32[32], param_2.4: f32[32,64]) -> f32[256,64] {
  %param_0 = f32[256,64]{1,0} parameter(0)
  %constant.15 = s32[] constant(-2147483648)
  %broadcast.13 = s32[32,1]{1,0} broadcast(%constant.15), dimensions={}
  %param_1.2 = s32[32]{0} parameter(1)
  %reshape.12 = s32[32,1]{1,0} reshape(%param_1.2)
  %or.3 = s32[32,1]{1,0} or(%broadcast.13, %reshape.12)
  %compare.3 = pred[32,1]{1,0} compare(%or.3, %reshape.12), direction=EQ
  %constant.19 = s32[] constant(255)
  %broadcast.17 = s32[32,1]{1,0} broadcast(%constant.19), dimensions={}
  %and.3 = s32[32,1]{1,0} and(%broadcast.17, %reshape.12)
  %constant.18 = s32[] constant(0)
  %broadcast.16 = s32[32,1]{1,0} broadcast(%constant.18), dimensions={}
  %shift-right-logical.3 = s32[32,1]{1,0} shift-right-logical(%and.3, %broadcast.16)
  %select.2 = s32[32,1]{1,0} select(%compare.3, %broadcast.13, %shift-right-logical.3)
  %param_2.4 = f32[32,64]{1,0} parameter(2)
  ROOT %scatter-add.0 = f32[256,64]{1,0} scatter(%param_0, %select.2, %param_2.4), update_window_dims={1}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=%region_0.1
}

ENTRY %main (x: f32[256,64], idx: s32[32], upd: f32[32,64]) -> f32[256,64] {
  %x = f32[256,64]{1,0} parameter(0)
  %idx = s32[32]{0} parameter(1)
  %upd = f32[32,64]{1,0} parameter(2)
  ROOT %scatter_fusion = f32[256,64]{1,0} fusion(%x, %idx, %upd), kind=KIND, calls=%fused_computation
}
"""

_BITPACKED = 'custom-call(%concatenate.2), custom_call_target="GatherScatterIndicesBitpacked"'
_COPY = "copy(%concatenate.2)"
_ADD = "ROOT %add.1 = f32[] add(%Arg_0.1, %Arg_1.1)"
_SET = "ROOT %Arg_1.2 = f32[] copy(%Arg_1.1)"
#: one FLOP (add) and one transcendental (exponential) per application
_ADD_EXP = "%exp.1 = f32[] exponential(%Arg_1.1)\n  ROOT %add.1 = f32[] add(%Arg_0.1, %exp.1)"


def gather_text(kind: str, pack: str = _BITPACKED) -> str:
    return _GATHER.replace("KIND", kind).replace("PACK", pack)


def scatter_text(kind: str, combiner: str = _ADD) -> str:
    return _SCATTER.replace("KIND", kind).replace("COMBINER", combiner)


def fusion_cost(text: str):
    mc = module_cost(parse_hlo_text(text))
    (row,) = [r for r in mc.rows if r.instruction.opcode == "fusion"]
    return row.cost, mc


def xla(text: str) -> dict[str, float]:
    pytest.importorskip("jax")
    from cost_oracle import xla_cost

    return xla_cost(text)


def test_kcustom_gather_fusion_has_no_flops():
    cost, mc = fusion_cost(gather_text("kCustom"))
    assert (cost.flops, cost.transcendentals) == (0.0, 0.0)
    # The bit-packing custom call is part of the gather kernel: not an opaque call of the fusion.
    assert not cost.flags & {"opaque-custom-call", "unknown-flops", "unknown-bytes"}, cost.flags
    assert mc.flops == 0.0
    assert xla(gather_text("kCustom"))["flops"] == 0.0


def test_kloop_gather_fusion_sums_its_body():
    # The same body outside a kCustom fusion: every fused instruction counts (XLA §6.2): 4 x 64 index ops +
    # 64 negates. (A copy stands in for the custom call, which XLA would charge -1.)
    text = gather_text("kLoop", pack=_COPY)
    cost, _ = fusion_cost(text)
    assert cost.flops == 4 * 64 + 64
    assert xla(text)["flops"] == 4 * 64 + 64


@pytest.mark.parametrize(("combiner", "flops", "transcendentals"), [(_ADD, 32 * 64, 0), (_SET, 0, 0),
                                                                     (_ADD_EXP, 32 * 64, 32 * 64)])
def test_kcustom_scatter_fusion_counts_only_the_combiner(combiner, flops, transcendentals):
    text = scatter_text("kCustom", combiner)
    cost, _ = fusion_cost(text)
    assert (cost.flops, cost.transcendentals) == (flops, transcendentals)
    ref = xla(text)
    assert (ref["flops"], ref["transcendentals"]) == (flops, transcendentals)


def test_kloop_scatter_fusion_sums_its_body():
    text = scatter_text("kLoop")
    cost, _ = fusion_cost(text)
    assert cost.flops == 32 * 64 + 5 * 32  # combiner x updates + the index arithmetic
    assert xla(text)["flops"] == 32 * 64 + 5 * 32


def test_kcustom_fusion_bytes_stay_at_the_boundary():
    # Only the FLOPs follow XLA's shortcut; HBM bytes are hloscope's fusion-boundary rules, the same for
    # either kind (a gather reads what it gathers: 64 x 4 B of x, 64 x 4 B of indices; writes 64 x 4 B).
    custom, _ = fusion_cost(gather_text("kCustom"))
    loop, _ = fusion_cost(gather_text("kLoop"))
    assert (custom.bytes_read, custom.bytes_written) == (loop.bytes_read, loop.bytes_written) == (512, 256)


def test_first_gather_or_scatter_in_order_decides():
    # A kCustom body holding a scatter then (after it) a gather of its result is costed as the scatter.
    text = scatter_text("kCustom").replace(
        "ROOT %scatter-add.0 = f32[256,64]{1,0} scatter(", "%scatter-add.0 = f32[256,64]{1,0} scatter(").replace(
        "to_apply=%region_0.1\n}",
        "to_apply=%region_0.1\n  %gidx = s32[4,1]{1,0} slice(%select.2), slice={[0:4], [0:1]}\n"
        "  ROOT %g = f32[4,64]{1,0} gather(%scatter-add.0, %gidx), offset_dims={1}, collapsed_slice_dims={0}, "
        "start_index_map={0}, index_vector_dim=1, slice_sizes={1,64}\n}").replace(
        "-> f32[256,64] {\n  %param_0 =", "-> f32[4,64] {\n  %param_0 =").replace(
        "ROOT %scatter_fusion = f32[256,64]{1,0}", "ROOT %scatter_fusion = f32[4,64]{1,0}").replace(
        "upd: f32[32,64]) -> f32[256,64]", "upd: f32[32,64]) -> f32[4,64]")
    cost, _ = fusion_cost(text)
    assert cost.flops == 32 * 64
    assert xla(text)["flops"] == 32 * 64
