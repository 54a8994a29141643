"""The HLO text grammar, one test per feature, on real text.

Every HLO line here is copied from a real file: the repository's ``fixtures/`` (XLA output, see
fixtures/README.md; read from disk) or a record of the public corpus (copied into this file, cited as
``<corpus jsonl file>:<0-based line>`` of ``/work/shared/corpus/hlo_*/``, or ``<corpus file>``). Expected values
are worked out by hand from the text, never by running hloscope.
"""

from __future__ import annotations

import functools
import shutil
import textwrap
from pathlib import Path

import pytest

from hloscope.hlo import ConvolutionDimensionNumbers, HloInstruction, HloModule, SliceRange, WindowDimension
from hloscope.parsers import HloParseError, parse_hlo, parse_hlo_text
from hloscope.parsers._hlo_re import parse_shape, replica_groups
from hloscope.parsers._load import parse_hlo_dump

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
GENERIC = "ROCm__xla__EXTRACTED_cc_test_raw_strings.hlo_generic.jsonl"
GPU = "ROCm__xla__EXTRACTED_cc_test_raw_strings.hlo_gpu.jsonl"
CPU = "ROCm__xla__EXTRACTED_cc_test_raw_strings.hlo_cpu.jsonl"


@functools.cache
def fixture(name: str) -> HloModule:
    return parse_hlo(FIXTURES / "hlo" / name)


def inst(module: HloModule, name: str) -> HloInstruction:
    found = [i for _, i in module.instructions() if i.name == name]
    assert len(found) == 1, name
    return found[0]


def parse(text: str) -> HloModule:
    return parse_hlo_text(textwrap.dedent(text))


# --------------------------------------------------------------------------------------------------------------
# Shapes and layouts
# --------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "element_type", "dims", "size_bytes"),
    [
        # hlo_gpu.jsonl:195 `w.s4 = s4[32,2,64,256]{3,2,1,0:E(4)} parameter(0)`: 1048576 elements x 4 bits.
        ("s4[32,2,64,256]{3,2,1,0:E(4)}", "s4", (32, 2, 64, 256), 524288),
        # hlo_generic.jsonl:954 `x.u4 = u4[2]{0} constant({0, 15})`: 2 x 4 bits = 1 byte.
        ("u4[2]{0}", "u4", (2,), 1),
        # hlo_cpu.jsonl:257 `in = u2[20,20]{1,0:E(2)} iota(), iota_dimension=1`: 400 x 2 bits = 100 bytes.
        ("u2[20,20]{1,0:E(2)}", "u2", (20, 20), 100),
        # hlo_gpu.jsonl:27 `%fusion_dot (p0: f4e2m1fn[32,256], ..., p2: f8e8m0fnu[32,8], ...)`: 8192 x 4 bits.
        ("f4e2m1fn[32,256]", "f4e2m1fn", (32, 256), 4096),
        ("f8e8m0fnu[32,8]", "f8e8m0fnu", (32, 8), 256),
        # hlo_gpu.jsonl:355 header `entry_computation_layout={(f8e4m3fnuz[2,16,48]{2,1,0}, ...`: 1536 bytes.
        ("f8e4m3fnuz[2,16,48]{2,1,0}", "f8e4m3fnuz", (2, 16, 48), 1536),
        # hlo_gpu.jsonl:977 `p1 = f8e5m2fnuz[3,2]{1,0} parameter(1)`.
        ("f8e5m2fnuz[3,2]{1,0}", "f8e5m2fnuz", (3, 2), 6),
        # hlo_generic.jsonl:825 header `entry_computation_layout={()->f8e4m3b11fnuz[2]{0}}`.
        ("f8e4m3b11fnuz[2]{0}", "f8e4m3b11fnuz", (2,), 2),
        # fixtures/hlo/tpu-v5e_mlp_large.hlo.txt `s32[]{:S(2)}`: a scalar, 4 bytes.
        ("s32[]{:S(2)}", "s32", (), 4),
        # hlo_cpu.jsonl:240 `token0 = token[] after-all()`: no data.
        ("token[]", "token", (), 0),
    ],
)
def test_element_types_and_packed_sizes(text: str, element_type: str, dims: tuple, size_bytes: int) -> None:
    shape = parse_shape(text)
    assert (shape.element_type, shape.dims, shape.size_bytes) == (element_type, dims, size_bytes)


def test_f8_types_in_the_corpus_and_in_xla() -> None:
    # f8e4m3fn / f8e5m2 lines: hlo_gpu.jsonl (e.g. `f8e4m3fn[16,32]`, `f8e5m2[32,16]` operands of scaled dots).
    for t in ("f8e4m3fn", "f8e5m2", "f8e4m3fnuz", "f8e5m2fnuz", "f8e4m3b11fnuz", "f8e8m0fnu", "f8e3m4", "f8e4m3"):
        assert parse_shape(f"{t}[3,5]{{1,0}}").size_bytes == 15, t  # one byte per element
    # f8e3m4 and f8e4m3 appear in no corpus text: XLA's own parser is the witness that they are element types.
    xla_client = pytest.importorskip("jax._src.lib").xla_client
    for t in ("f8e3m4", "f8e4m3"):
        xla_client.hlo.hlo_module_from_text(f"HloModule m\nENTRY e {{\n  ROOT p = {t}[3,5]{{1,0}} parameter(0)\n}}\n")


def test_dynamic_dims() -> None:
    # hlo_generic.jsonl:680
    m = parse(
        """\
        HloModule Test

        ENTRY main {
          size = s32[] parameter(0)

          data = s32[4] parameter(1)

          data_dynamic = s32[<=4] set-dimension-size(data, size), dimensions={0}

          sum = s32[<=4] add(data_dynamic, data)

          ROOT dynamic_size = s32[] get-dimension-size(sum), dimensions={0}
        }
        """
    )
    shape = inst(m, "data_dynamic").shape
    assert (shape.dims, shape.dynamic_dims, shape.is_dynamic, str(shape)) == ((4,), (True,), True, "s32[<=4]")
    assert not inst(m, "data").shape.is_dynamic
    # hlo_generic.jsonl:439 `%concatenated_csr_pointers = s32[<=24] parameter(0)`: dims hold the bound.
    assert parse_shape("s32[<=24]").size_bytes == 96


def test_tpu_tiling_memory_space_and_nested_tuples() -> None:
    # fixtures/hlo/tpu-v5e_mlp_large.hlo.txt: %slice-start.8 = ((bf16[4096,4096]{1,0:T(8,128)(2,1)}),
    #     bf16[1024,4096]{1,0:T(8,128)(2,1)S(1)}, s32[]{:S(2)}) slice-start(%get-tuple-element.4), ...
    shape = inst(fixture("tpu-v5e_mlp_large.hlo.txt"), "slice-start.8").shape
    assert shape.is_tuple and len(shape.tuple_shapes) == 3
    inner = shape.tuple_shapes[0]
    assert inner.is_tuple and inner.tuple_shapes[0].dims == (4096, 4096)  # depth 2
    src, dst, sync = inner.tuple_shapes[0], shape.tuple_shapes[1], shape.tuple_shapes[2]
    assert (src.layout.minor_to_major, src.layout.tiles, src.layout.memory_space) == ((1, 0), ((8, 128), (2, 1)), 0)
    assert (dst.layout.tiles, dst.layout.memory_space) == (((8, 128), (2, 1)), 1)
    assert (sync.element_type, sync.layout.minor_to_major, sync.layout.memory_space) == ("s32", (), 2)
    # Bytes of the leaves, packed, tiling padding not counted: 2*4096*4096 + 2*1024*4096 + 4.
    assert shape.size_bytes == 33554432 + 8388608 + 4
    assert [leaf.dims for leaf in shape.leaves()] == [(4096, 4096), (1024, 4096), ()]


def test_token_shapes() -> None:
    # hlo_cpu.jsonl:240
    m = parse(
        """\
        HloModule TestTaskParallel_infeed_outfeed
        ENTRY InfeedOutfeed {
          token0 = token[] after-all()
          infeed0 = (u32[12345678,2]{1,0}, token[]) infeed(token0)
          infeed0.data = u32[12345678,2]{1,0} get-tuple-element((u32[12345678,2]{1,0}, token[]) infeed0), index=0
          ROOT outfeed0 = token[] outfeed(infeed0.data, token0)
        }
        """
    )
    token = inst(m, "token0").shape
    assert (token.element_type, token.is_array, token.size_bytes) == ("token", False, 0)
    assert inst(m, "infeed0").shape.tuple_shapes[1].element_type == "token"
    assert inst(m, "infeed0.data").operands == ("infeed0",)  # operand printed with its (tuple) shape
    assert inst(m, "infeed0").shape.size_bytes == 12345678 * 2 * 4


# --------------------------------------------------------------------------------------------------------------
# Typed attributes
# --------------------------------------------------------------------------------------------------------------


def test_dot_dimension_numbers() -> None:
    # fixtures/hlo/cpu_transformer_scan.hlo.txt: ROOT %dot.23 = f32[8,64,128]{2,1,0} dot(%param_0.6, %param_1.6),
    #     lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}
    a = inst(fixture("cpu_transformer_scan.hlo.txt"), "dot.23").attributes
    assert (a["lhs_batch_dims"], a["lhs_contracting_dims"], a["rhs_batch_dims"], a["rhs_contracting_dims"]) == (
        (0,), (2,), (0,), (1,)
    )


def test_convolution_window_and_dim_labels() -> None:
    # fixtures/hlo/tpu-v5e_transformer_scan.hlo.txt: ROOT %convolution-base-dilated.8 = ... convolution(%fusion.105,
    #     %fusion.104), window={size=8x2 stride=7x1 lhs_dilate=8x2}, dim_labels=0b1f_0o1i->01bf, ...
    a = inst(fixture("tpu-v5e_transformer_scan.hlo.txt"), "convolution-base-dilated.8").attributes
    assert a["window"] == (
        WindowDimension(size=8, stride=7, base_dilation=8),
        WindowDimension(size=2, stride=1, base_dilation=2),
    )
    # lhs 0b1f: b at 1, f at 3, spatial 0 at 0, 1 at 2; rhs 0o1i: i at 3, o at 1; out 01bf: b 2, f 3, spatial 0, 1.
    assert a["dim_labels"] == ConvolutionDimensionNumbers(1, 3, (0, 2), 3, 1, (0, 2), 2, 3, (0, 1), "0b1f_0o1i->01bf")
    # Same file: %convolution.16 = ... window={size=1x1x8 pad=0_0x0_0x7_7 rhs_reversal=0x0x1},
    #     dim_labels=f01b2_2oi01->01b2f
    w = inst(fixture("tpu-v5e_transformer_scan.hlo.txt"), "convolution.16").attributes["window"]
    assert [(d.size, d.padding_low, d.padding_high, d.window_reversal) for d in w] == [
        (1, 0, 0, False), (1, 0, 0, False), (8, 7, 7, True)
    ]
    # hlo_cpu.jsonl:128 `window={size=2x1 stride=2x1 pad=0_3x1_2 rhs_dilate=1x2}` (a reduce-window's window).
    from hloscope.parsers._hlo_re import window

    assert window("{size=2x1 stride=2x1 pad=0_3x1_2 rhs_dilate=1x2}") == (
        WindowDimension(size=2, stride=2, padding_low=0, padding_high=3, window_dilation=1),
        WindowDimension(size=1, stride=1, padding_low=1, padding_high=2, window_dilation=2),
    )


@pytest.mark.parametrize(
    ("record", "text", "key"),
    [
        (
            f"{GENERIC}:41",
            """\
            ENTRY main {
              p0 = f32[2,8,12,4] parameter(0)
              p1 = f32[2,3,5,16] parameter(1)
              ROOT conv = f32[2,6,8,16] convolution(p0, p1), window={size=3x5 pad=0_0x0_0}, dim_labels=b01f_i01o->b01f, feature_group_count=2
            }
            """,
            "feature_group_count",
        ),
        (
            f"{GENERIC}:42",
            """\
            ENTRY main {
              p0 = f32[2,8,12,4] parameter(0)
              p1 = f32[4,3,5,16] parameter(1)
              ROOT conv = f32[1,6,8,16] convolution(p0, p1), window={size=3x5 pad=0_0x0_0}, dim_labels=b01f_i01o->b01f, batch_group_count=2
            }
            """,
            "batch_group_count",
        ),
    ],
)
def test_group_counts(record: str, text: str, key: str) -> None:
    m = parse(text)  # no HloModule header: the one computation is the entry
    a = m.entry.root.attributes
    assert a[key] == 2 and m.entry_name == "main" and m.name == "main"
    assert a["window"] == (WindowDimension(size=3), WindowDimension(size=5))


def test_slice_with_strides() -> None:
    # hlo_generic.jsonl:110
    m = parse(
        """\
        HloModule m
        ENTRY e {
          p0 = f32[5,7,13] parameter(0)
          ROOT slice = f32[2,7,4] slice(p0), slice={[1:5:2], [0:7], [5:13:2]}
        }
        """
    )
    assert m.entry.root.attributes["slice"] == (SliceRange(1, 5, 2), SliceRange(0, 7, 1), SliceRange(5, 13, 2))


def test_dynamic_slice_sizes() -> None:
    # fixtures/hlo/cpu_transformer_scan.hlo.txt: %dynamic-slice.20 = f32[1,256,256]{2,1,0} dynamic-slice(
    #     %param_0.15, %param_1.14, %constant.47.clone.2, %constant.47.clone.2), dynamic_slice_sizes={1,256,256}, ...
    i = inst(fixture("cpu_transformer_scan.hlo.txt"), "dynamic-slice.20")
    assert i.attributes["dynamic_slice_sizes"] == (1, 256, 256)
    assert i.operands == ("param_0.15", "param_1.14", "constant.47.clone.2", "constant.47.clone.2")


def test_gather_and_scatter_dimension_numbers() -> None:
    # ROCm__xla__perf_tools__..._llama3_8b__inference__1gpu__module_0087.jit__prefill_jit.before_optimizations.txt
    # and ..._llama3_8b__training__module_0099.jit_train_step.before_optimizations.txt (hlo_generic):
    m = parse(
        """\
        ENTRY e {
          %convert_element_type.72 = bf16[128256,4096]{1,0} parameter(0)
          %broadcast_in_dim.73 = s32[1,64,1]{2,1,0} parameter(1)
          %gather.1 = bf16[1,64,4096]{2,1,0} gather(%convert_element_type.72, %broadcast_in_dim.73), offset_dims={2}, collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=2, slice_sizes={1,4096}, metadata={op_name="jit(_prefill_jit)/TransformerLinenPure.apply/TransformerLinenPure/decoder/decoder._apply_embedding/token_embedder/gather" stack_frame_id=273}
          ROOT %scatter-add.5 = bf16[128256,4096]{1,0} scatter(%broadcast_in_dim.127, %broadcast_in_dim.132, %while.26), update_window_dims={2}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=2, to_apply=%region_30.61, metadata={op_name="jit(train_step)/transpose(jvp(TransformerLinenPure.apply))/TransformerLinenPure/decoder/decoder._apply_embedding/token_embedder/scatter-add" stack_frame_id=416}
        }
        """.replace("%broadcast_in_dim.127, %broadcast_in_dim.132, %while.26", "%convert_element_type.72, "
                    "%broadcast_in_dim.73, %gather.1").replace("to_apply=%region_30.61, ", "")
    )  # (the scatter's operands and to_apply renamed to instructions of this snippet)
    g = inst(m, "gather.1").attributes
    assert (g["offset_dims"], g["collapsed_slice_dims"], g["start_index_map"], g["index_vector_dim"],
            g["slice_sizes"]) == ((2,), (0,), (0,), 2, (1, 4096))
    s = inst(m, "scatter-add.5").attributes
    assert (s["update_window_dims"], s["inserted_window_dims"], s["scatter_dims_to_operand_dims"],
            s["index_vector_dim"]) == ((2,), (0,), (0,), 2)


def test_replica_groups_explicit_iota_and_mesh() -> None:
    # fixtures/hlo/cpu_collectives.hlo.txt: %psum_invariant.7 = ... all-reduce(...), channel_id=1,
    #     replica_groups={{0,1,2,3},{4,5,6,7}}, use_global_device_ids=true, to_apply=%region_0.0, ...
    a = inst(fixture("cpu_collectives.hlo.txt"), "psum_invariant.7").attributes
    rg = a["replica_groups"]
    assert (rg.groups, rg.form, rg.group_size) == (((0, 1, 2, 3), (4, 5, 6, 7)), "explicit", 4)
    assert (a["channel_id"], a["use_global_device_ids"]) == (1, True)
    # fixtures/hlo/tpu-v5e_mlp_large.hlo.txt: %all-reduce.4 = ... all-reduce(%fusion.13), channel_id=5,
    #     replica_groups=[2,2]<=[2,2]T(1,0), use_global_device_ids=true, to_apply=%add.2.clone, ...
    # iota [[0,1],[2,3]], transposed [[0,2],[1,3]], as 2 groups of 2.
    a = inst(fixture("tpu-v5e_mlp_large.hlo.txt"), "all-reduce.4").attributes
    assert (a["replica_groups"].groups, a["replica_groups"].form, a["channel_id"]) == (((0, 2), (1, 3)), "iota", 5)
    # cpu fixtures: replica_groups=[2,4]<=[8] -> iota 0..7 as 2 groups of 4.
    assert replica_groups("[2,4]<=[8]").groups == ((0, 1, 2, 3), (4, 5, 6, 7))
    # hlo_generic.jsonl:4173 `sharding={devices=[4,2]<=[2,4]T(1,0)}` (same iota syntax): [[0,1,2,3],[4,5,6,7]]
    # transposed is [[0,4],[1,5],[2,6],[3,7]], as 4 groups of 2.
    assert replica_groups("[4,2]<=[2,4]T(1,0)").groups == ((0, 4), (1, 5), (2, 6), (3, 7))
    # hlo_generic.jsonl:941 `replica_groups=[3,10]<=[6,5]T(1,0)`: iota 6x5 (row r = 5r..5r+4) transposed to
    # 5x6 (row c = c, c+5, ..., c+25), flattened, cut into 3 groups of 10.
    assert replica_groups("[3,10]<=[6,5]T(1,0)").groups == (
        (0, 5, 10, 15, 20, 25, 1, 6, 11, 16),
        (21, 26, 2, 7, 12, 17, 22, 27, 3, 8),
        (13, 18, 23, 28, 4, 9, 14, 19, 24, 29),
    )
    # fixtures/hlo/cpu_mlp_sharded.hlo.txt: replica_groups=mesh['axis_0'=2,'axis_1'=4] {'axis_0'}: devices
    # row-major over the 2x4 mesh (device = 4*axis_0 + axis_1); groups vary along axis_0.
    groups = [i.attributes["replica_groups"] for _, i in fixture("cpu_mlp_sharded.hlo.txt").instructions()
              if "replica_groups" in i.attributes]
    mesh = [g for g in groups if g.form == "mesh"]
    assert [g.raw for g in mesh] == ["mesh['axis_0'=2,'axis_1'=4] {'axis_0'}"]
    assert mesh[0].groups == ((0, 4), (1, 5), (2, 6), (3, 7))
    # The same mesh, grouped along the other axis (the form JAX prints for a psum over the mesh's second axis):
    # one group per axis_0 value, varying axis_1.
    assert replica_groups("mesh['axis_0'=2,'axis_1'=4] {'axis_1'}").groups == ((0, 1, 2, 3), (4, 5, 6, 7))
    # hlo_generic.jsonl:936: replica_groups=mesh['axis_0'=2,'axis_1'=2] {'axis_1'} -> vary along axis_1.
    m = parse(
        """\
        HloModule CRS_Subgroups, entry_computation_layout={(f32[128,32]{0,1})->f32[128,32]{0,1}}, replica_count=4

        add {
          lhs = f32[] parameter(0)
          rhs = f32[] parameter(1)
          ROOT add = f32[] add(lhs, rhs)
        }

        ENTRY AllReduceWithMeshAxesReplicaGroupList {
          input = f32[128,32]{0,1} parameter(0)
          ROOT all-reduce = f32[128,32]{0,1} all-reduce(input), replica_groups=mesh['axis_0'=2,'axis_1'=2] {'axis_1'}, to_apply=add
        }
        """
    )
    assert m.entry.root.attributes["replica_groups"].groups == ((0, 1), (2, 3))
    assert m.replica_count == 4 and m.entry.root.called_computations == {"to_apply": ("add",)}


def test_source_target_pairs() -> None:
    # fixtures/hlo/cpu_collectives.hlo.txt: %ppermute.3 = f32[64,128]{1,0} collective-permute(%wrapped_multiply),
    #     channel_id=1, source_target_pairs={{0,1},{1,2},{2,3},{3,0},{4,5},{5,6},{6,7},{7,4}}, ...
    a = inst(fixture("cpu_collectives.hlo.txt"), "ppermute.3").attributes
    assert a["source_target_pairs"] == ((0, 1), (1, 2), (2, 3), (3, 0), (4, 5), (5, 6), (6, 7), (7, 4))
    assert a["channel_id"] == 1


def test_custom_call_target_and_backend_config() -> None:
    # fixtures/hlo/tpu-v5e_transformer_scan_grad.hlo.txt: %custom-call = f32[4,8,128,256]{3,2,1,0:T(8,128)S(1)}
    #     custom-call(), custom_call_target="AllocateBuffer", metadata={op_name="broadcast.27"}, backend_config={...
    i = inst(fixture("tpu-v5e_transformer_scan_grad.hlo.txt"), "custom-call")
    assert (i.attributes["custom_call_target"], i.operands, i.metadata.op_name) == ("AllocateBuffer", (), "broadcast.27")
    assert i.backend_config["used_scoped_memory_configs"] == [{"memory_space": "1", "offset": "0", "size": "0"}]


def test_fusion_kind_and_calls() -> None:
    # fixtures/hlo/cpu_mlp_1dev.hlo.txt: %broadcast_maximum_fusion = f32[128,1024]{1,0} fusion(%ynn_fusion.3),
    #     kind=kLoop, calls=%fused_computation.8, metadata={...}, backend_config={"outer_dimension_partitions":["2"]}
    m = fixture("cpu_mlp_1dev.hlo.txt")
    i = inst(m, "broadcast_maximum_fusion")
    assert (i.attributes["kind"], i.called_computations, i.operands) == (
        "kLoop", {"calls": ("fused_computation.8",)}, ("ynn_fusion.3",)
    )
    assert "calls" not in i.attributes and i.backend_config == {"outer_dimension_partitions": ["2"]}
    # %fused_computation.8 (param_0.10: f32[128,1024]) -> f32[128,1024] { ... ROOT %max.4 = ... maximum(...) }
    body = m.computation("fused_computation.8")
    assert (body.root.name, body.root.opcode, body.parameter_shapes[0].dims) == ("max.4", "maximum", (128, 1024))
    # `%broadcast.4 = ... broadcast(%constant.7), dimensions={}`: an empty list.
    assert inst(m, "broadcast.4").attributes["dimensions"] == ()


def test_called_computations_by_role() -> None:
    scan = fixture("cpu_transformer_scan.hlo.txt")
    # %while.10 = (...) while(%tuple.10), condition=%wide.region_7.8_spmd, body=%wide.region_0.7_spmd, ...
    w = inst(scan, "while.10")
    assert w.called_computations == {"condition": ("wide.region_7.8_spmd",), "body": ("wide.region_0.7_spmd",)}
    assert w.calls() == ("wide.region_7.8_spmd", "wide.region_0.7_spmd")
    # fixtures/hlo/cpu_mlp_1dev.hlo.txt: ROOT %reduce_sum.0 = f32[] reduce(%integer_pow.0, %param_0.1),
    #     dimensions={0,1}, to_apply=%region_0.2, ...
    r = inst(fixture("cpu_mlp_1dev.hlo.txt"), "reduce_sum.0")
    assert (r.called_computations, r.attributes["dimensions"]) == ({"to_apply": ("region_0.2",)}, (0, 1))
    # hlo_cpu.jsonl:104
    m = parse(
        """\
        HloModule conditional

        %add (x: f32[]) -> f32[] {
          %p = f32[] parameter(0)
          ROOT %add = f32[] add(%p, %p)
        }

        %mul (x: f32[]) -> f32[] {
          %p = f32[] parameter(0)
          ROOT %mul = f32[] multiply(%p, %p)
        }

        ENTRY e {
          p0 = s32[] parameter(0)
          p1 = f32[] parameter(1)
          c0 = f32[] conditional(p0, p1, p1), branch_computations={%add, %mul}
          ROOT add = f32[] add(c0, c0)
        }
        """
    )
    assert inst(m, "c0").called_computations == {"branch_computations": ("add", "mul")}
    assert inst(m, "c0").operands == ("p0", "p1", "p1")
    # AI-Hypercomputer__maxtext__tests__utils__reference_hlo_llama3_8b.txt (hlo_tpu), lines 564-567 and 669:
    # an async pair wrapping a slice.
    m = parse(
        """\
        %async_computation.24 (param_0.1580: s8[33554432]) -> s8[4194304] {
          %param_0.1580 = s8[33554432]{0:T(1024)(128)(4,1)} parameter(0)
          ROOT %slice.133 = s8[4194304]{0:T(1024)(128)(4,1)S(1)} slice(%param_0.1580), slice={[0:4194304]}, backend_config={"flag_configs":[],"scoped_memory_configs":[],"used_scoped_memory_configs":[],"aliasing_operands":{"lists":[]}}
        }

        ENTRY %e (p: s8[33554432]) -> s8[4194304] {
          %bitcast.911 = s8[33554432]{0:T(1024)(128)(4,1)} parameter(0)
          %slice-start.24 = ((s8[33554432]{0:T(1024)(128)(4,1)}), s8[4194304]{0:T(1024)(128)(4,1)S(1)}, s32[]{:S(2)}) async-start(%bitcast.911), calls=%async_computation.24
          ROOT %slice-done.24 = s8[4194304]{0:T(1024)(128)(4,1)S(1)} async-done(%slice-start.24)
        }
        """
    )
    start = inst(m, "slice-start.24")
    assert (start.opcode, start.called_computations) == ("async-start", {"calls": ("async_computation.24",)})
    assert inst(m, "slice-done.24").operands == ("slice-start.24",)
    assert m.computation("async_computation.24").root.attributes["slice"] == (SliceRange(0, 4194304),)


# --------------------------------------------------------------------------------------------------------------
# Metadata, configs, sharding, header
# --------------------------------------------------------------------------------------------------------------


def test_metadata_op_name_and_printed_source() -> None:
    # kahfizulkifli__GraphHelper__src__HLO__pbtxt__bert__bert_dp_graph_2.js.hlo.txt (hlo_generic, torch_xla):
    m = parse(
        """\
        ENTRY e {
          %p42.558 = f32[30522,16]{1,0} parameter(42), frontend_attributes={neff_input_names="input42"}, metadata={op_type="xla__device_data" op_name="xla__device_data" source_file="/home/ubuntu/kahfi/xla_modified/pytorch/xla/torch_xla/core/xla_op_registry.py" source_line=44}
        }
        """
    )
    i = m.entry.root
    md = i.metadata
    assert (md.op_type, md.op_name, md.source_line, md.stack_frame_id) == ("xla__device_data", "xla__device_data", 44, 0)
    assert md.source == "/home/ubuntu/kahfi/xla_modified/pytorch/xla/torch_xla/core/xla_op_registry.py:44"
    assert i.frontend_attributes == {"neff_input_names": "input42"}
    assert i.parameter_number == 42
    # hlo_generic.jsonl:815: escapes inside metadata strings and a quoted (old style) backend_config.
    m = parse(
        r"""
        ENTRY e {
          ROOT %constant = pred[] constant(true), metadata={op_type="const" op_name="\"it\'s not a problem\n" source_file="path/to/test.cc" source_line=68}, backend_config="foo\" bar"
        }
        """
    )
    md = m.entry.root.metadata
    assert (md.op_name, md.source) == ("\"it's not a problem\n", "path/to/test.cc:68")
    assert (m.entry.root.backend_config_text, m.entry.root.literal) == ('foo" bar', "true")


def test_stack_frame_id_resolved_through_the_tables() -> None:
    # fixtures/hlo/cpu_mlp_1dev.hlo.txt: ROOT %reduce_sum.5 = f32[] add(%reduce_sum.3, %reduce_sum.4),
    #     metadata={op_name="jit(mlp1_step)/jvp()/reduce_sum" stack_frame_id=5}
    # StackFrames row 5 {file_location_id=5 ...}; FileLocations row 5 {file_name_id=1 function_name_id=5 line=366
    # ...}; FileNames row 1 "/work/main/fixtures/make_hlo_fixtures.py"; FunctionNames row 5 "mlp1_loss".
    m = fixture("cpu_mlp_1dev.hlo.txt")
    md = inst(m, "reduce_sum.5").metadata
    assert (md.op_name, md.stack_frame_id) == ("jit(mlp1_step)/jvp()/reduce_sum", 5)
    assert (md.source_file, md.source_line) == ("/work/main/fixtures/make_hlo_fixtures.py", 366)
    frame = m.stack_frames[5]
    assert (frame.file_name, frame.function_name, frame.line) == (
        "/work/main/fixtures/make_hlo_fixtures.py", "mlp1_loss", 366
    )
    # Row 14 {file_location_id=14 ...}: FileLocations 14 {file_name_id=1 function_name_id=7 line=182 ...}.
    assert (m.stack_frames[14].function_name, m.stack_frames[14].line) == ("sgd.<locals>.<lambda>", 182)
    assert len(m.stack_frames) == 14


def test_while_backend_config_json() -> None:
    # fixtures/hlo/cpu_transformer_scan.hlo.txt, %while.10: backend_config={"dynamic_variables":[],
    #     "known_induction_variable":{"tuple_index":"0"},"known_init_step":{"init":"0","step":"1"},
    #     "known_trip_count":{"n":"4"}}
    w = inst(fixture("cpu_transformer_scan.hlo.txt"), "while.10")
    assert w.backend_config["known_trip_count"] == {"n": "4"}
    assert w.backend_config_text.startswith('{"dynamic_variables":[]')
    # The TPU compile of the same program prints no backend_config on its while.
    tpu_while = [i for _, i in fixture("tpu-v5e_transformer_scan.hlo.txt").instructions() if i.opcode == "while"]
    assert tpu_while and tpu_while[0].backend_config is None


def test_frontend_attributes_and_sharding() -> None:
    # fixtures/hlo/tpu-v5e_mlp_large.hlo.txt, %all-reduce.4: ..., frontend_attributes={is_spmd_generated="true"}, ...
    i = inst(fixture("tpu-v5e_mlp_large.hlo.txt"), "all-reduce.4")
    assert i.frontend_attributes == {"is_spmd_generated": "true"}
    assert "frontend_attributes" not in i.attributes
    # fixtures/hlo/cpu_mlp_sharded.hlo.txt: %param = f32[256]{0} parameter(0),
    #     sharding={devices=[4,2]<=[2,4]T(1,0) last_tile_dim_replicate}, metadata={op_name="p[\'b1\']"}
    p = inst(fixture("cpu_mlp_sharded.hlo.txt"), "param")
    assert p.sharding == "{devices=[4,2]<=[2,4]T(1,0) last_tile_dim_replicate}"
    assert p.metadata.op_name == "p['b1']" and p.parameter_number == 0


def test_header_attributes() -> None:
    # fixtures/hlo/cpu_mlp_sharded.hlo.txt, line 1: HloModule jit_mlp_train_step, is_scheduled=true,
    #     entry_computation_layout={(f32[256]{0}, ...)->(...)}, ..., num_partitions=8
    m = fixture("cpu_mlp_sharded.hlo.txt")
    assert (m.name, m.num_partitions, m.replica_count) == ("jit_mlp_train_step", 8, 1)
    assert m.header_attributes["is_scheduled"] == "true"
    assert m.entry_computation_layout.startswith("{(f32[256]{0}, ")
    assert m.entry.is_entry and m.entry is m.computations[-1]
    # hlo_generic.jsonl:936 header: ..., replica_count=4 (see test_replica_groups_explicit_iota_and_mesh).


# --------------------------------------------------------------------------------------------------------------
# Loading, unknown opcodes and attributes, layout of the text
# --------------------------------------------------------------------------------------------------------------


def test_dump_dir_picks_the_post_optimization_module(tmp_path: Path) -> None:
    dump = FIXTURES / "dump" / "cpu_small"
    m = parse_hlo(dump)
    assert m.name == "jit_tiny_mlp" and m.source.endswith("module_0000.jit_tiny_mlp.cpu_after_optimizations.txt")
    assert [x.source for x in parse_hlo_dump(dump)] == [m.source]
    # Side files (buffer assignment, memory report) and before_optimizations are never picked; with a second
    # module in the directory, `module=` picks one.
    copy = tmp_path / "dump"
    shutil.copytree(dump, copy)
    src = copy / "module_0000.jit_tiny_mlp.cpu_after_optimizations.txt"
    (copy / "module_0001.jit_other.cpu_after_optimizations.txt").write_text(src.read_text())
    with pytest.raises(ValueError, match="2 post-optimization modules"):
        parse_hlo(copy)
    assert parse_hlo(copy, module="jit_other").source.endswith("module_0001.jit_other.cpu_after_optimizations.txt")
    assert len(parse_hlo_dump(copy)) == 2


def test_parse_hlo_takes_a_string_a_path_or_a_directory() -> None:
    path = FIXTURES / "hlo" / "cpu_mlp_1dev.hlo.txt"
    text = path.read_text()
    from_text, from_path, from_str_path = parse_hlo(text), parse_hlo(path), parse_hlo(str(path))
    assert from_text.source == "<string>" and from_path.source == from_str_path.source == str(path)
    names = [c.name for c in from_text.computations]
    assert names == [c.name for c in from_path.computations] == [c.name for c in from_str_path.computations]
    assert parse_hlo(FIXTURES / "dump" / "cpu_small").name == "jit_tiny_mlp"
    with pytest.raises(FileNotFoundError):
        parse_hlo(FIXTURES / "hlo" / "no_such_file.hlo.txt")


#: hlo_generic.jsonl:948, its lines joined with blanks: a module on one line, its header holding attributes.
IOTA_ONE_LINE = ("HloModule iota, entry_computation_layout={()->f32[100]{0}} ENTRY Iota { "
                 "ROOT iota = f32[100]{0} iota(), iota_dimension=0 }")


def test_parse_hlo_reads_a_one_line_text_as_text() -> None:
    """A str is text when it holds a line break or starts with ``HloModule`` or a computation header; the file
    system is never asked (issue #20: such strings were tried as paths: "File name too long")."""
    m = parse_hlo(IOTA_ONE_LINE)
    assert (m.name, m.source, m.entry.name) == ("iota", "<string>", "Iota")
    # The header's last value ends at its closing brace, not at the end of the line.
    assert m.header_attributes == {"entry_computation_layout": "{()->f32[100]{0}}"}
    root = m.entry.root
    assert (root.name, root.shape.element_type, root.shape.dims, root.attributes) == (
        "iota", "f32", (100,), {"iota_dimension": 0})
    # Over 5,000 characters on one line (too long for a file name): 111 instructions.
    copies = " ".join(f"iota.{i} = f32[100]{{0}} iota(), iota_dimension=0" for i in range(1, 111))
    long = IOTA_ONE_LINE.replace("{ ROOT", "{ " + copies + " ROOT")
    assert len(long) > 5000 and "\n" not in long
    m = parse_hlo(long)
    assert len(m.entry) == 111 and m.entry.names[:2] == ("iota.1", "iota.2") and m.entry.root.name == "iota"
    # A computation header starts a text too, with or without ENTRY (hlo_generic.jsonl:3372 without its header).
    for text in ("ENTRY test { ROOT constant = f16[] constant(1) }",
                 "  %test () -> f16[] { ROOT constant = f16[] constant(1) }",
                 "test { ROOT constant = f16[] constant(1) }"):
        assert parse_hlo(text).entry.root.literal == "1", text


def test_parse_hlo_reads_any_other_str_as_a_path(tmp_path: Path) -> None:
    # A one-line str that does not start like HLO is a path, even with braces in it.
    path = tmp_path / "iota{0}.hlo"
    path.write_text(IOTA_ONE_LINE)
    assert parse_hlo(str(path)).source == str(path)
    assert parse_hlo(path).name == "iota"
    # Names that only begin like a keyword are paths.
    for name in ("HloModule.hlo", "ENTRY.txt", "ENTRY-2.txt"):
        with pytest.raises(FileNotFoundError, match="^" + name + ": no such file or directory"):
            parse_hlo(name)
    # A missing path is a FileNotFoundError naming it; a str's message says how a str is read.
    missing = tmp_path / "no_such_file.hlo.txt"
    with pytest.raises(FileNotFoundError) as info:
        parse_hlo(missing)
    assert str(info.value) == f"{missing}: no such file or directory"
    with pytest.raises(FileNotFoundError) as info:
        parse_hlo(str(missing))
    assert str(info.value).startswith(f"{missing}: no such file or directory; a str is HLO text only when")
    # A name too long for the system is missing too, not an OSError ("File name too long").
    with pytest.raises(FileNotFoundError) as info:
        parse_hlo("x" * 5000)
    assert str(info.value).startswith("x" * 100 + "... (5000 characters): no such file or directory (")


def test_unknown_opcode_is_parsed_and_listed() -> None:
    # hlo_generic.jsonl:979 (XLA's parser rejects `le`; hloscope keeps it as an opaque instruction)
    m = parse(
        """\
        HloModule wrong_opcode:

        ENTRY %blabla (x: f32[], y: f32[]) -> f32[] {
          %x = f32[]{} parameter(0)
          %y = f32[]{} parameter(1)
          %le = pred[]{} le(f32[]{} %x, f32[]{} %y)
        }
        """
    )
    le = m.entry.root  # no ROOT printed: the last instruction is the root, as in XLA
    assert (le.name, le.opcode, le.operands, le.shape.element_type) == ("le", "le", ("x", "y"), "pred")
    assert m.unknown_opcodes == frozenset({"le"})
    # Async forms of known opcodes (`slice-start` in the TPU fixtures) are not unknown.
    assert fixture("tpu-v5e_mlp_large.hlo.txt").unknown_opcodes == frozenset()


def test_unknown_attribute_kept_raw() -> None:
    # ROCm__xla__xla__hlo__translate__hlo_to_mhlo__tests__import.hlo (hlo_generic):
    m = parse(
        """\
        ENTRY %e (input: f32[2,2,2,2], scale: f32[2], mean: f32[2], variance: f32[2], grad_output: f32[2,2,2,2]) -> (f32[2,2,2,2], f32[2], f32[2]) {
          %input = f32[2,2,2,2] parameter(0)
          %scale = f32[2] parameter(1)
          %mean = f32[2] parameter(2)
          %variance = f32[2] parameter(3)
          %grad_output = f32[2,2,2,2] parameter(4)
          ROOT %batch-norm-grad = (f32[2,2,2,2], f32[2], f32[2]) batch-norm-grad(f32[2,2,2,2] %input, f32[2] %scale, f32[2] %mean, f32[2] %variance, f32[2,2,2,2] %grad_output), epsilon=0.001, feature_index=1
        }
        """
    )
    root = m.entry.root
    assert root.attributes == {"epsilon": "0.001", "feature_index": "1"}
    assert root.operands == ("input", "scale", "mean", "variance", "grad_output")


def test_free_layout_of_the_text() -> None:
    """Line breaks and comments may fall between any two tokens, as XLA's lexer allows (real test inputs)."""
    # hlo_generic.jsonl:3372: a whole module on one line.
    m = parse_hlo_text("    HloModule test_module ENTRY test { ROOT constant = f16[] constant(1) }")
    assert (m.name, m.entry.root.literal) == ("test_module", "1")
    # hlo_cpu.jsonl:212 (ENTRY header over two lines) and hlo_generic.jsonl:414 (value on the next line).
    m = parse(
        """\
        HloModule m
        %body (p: (s32[], s32[3]{0})) -> (s32[], s32[3]{0}) {
          ROOT p = (s32[], s32[3]{0}) parameter(0)
        }
        %cond (p: (s32[], s32[3]{0})) -> pred[] {
          p = (s32[], s32[3]{0}) parameter(0)
          ROOT c = pred[] constant(false)
        }
        ENTRY %main (arg0: f32[13,5,10,62], arg1: s32[3,1], arg2: f32[3,1,5,10,62])
            -> (s32[], s32[3]{0}) {
          constant.3 = s32[] constant(0)
          constant.4 = s32[3]{0} constant({0, 1, 2})
          tuple.1 = (s32[], s32[3]{0}) tuple(constant.3, constant.4)
          while.0 = (s32[], s32[3]{0}) while(tuple.1), condition=
            cond, body=body
          /* hlo_generic.jsonl:1532: a comment line */
          ROOT get-tuple-element.4 = s32[] get-tuple-element(while.0), index=0  // 26
        }
        """
    )
    w = inst(m, "while.0")
    assert w.called_computations == {"condition": ("cond",), "body": ("body",)}
    assert (m.entry.root.attributes, m.entry.root.line) == ({"index": 0}, 17)
    # hlo_gpu.jsonl:929: a result shape, the opcode and the attributes each on their own line.
    m = parse(
        """\
        ENTRY e {
          input = f16[1,128,48,768] parameter(0)
          filter = f16[768,48,1,128] parameter(1)
          ROOT result = (f16[1,128,48,768]{3,2,1,0}, u8[0]{0})
            custom-call(input, filter)
            , window={size=1x50 pad=0_0x64_64}
            , dim_labels=fb01_io01->01bf
            , custom_call_target="__cudnn$convForward"
        }
        """
    )
    a = m.entry.root.attributes
    assert (a["custom_call_target"], a["dim_labels"].raw, len(a["window"])) == (
        "__cudnn$convForward", "fb01_io01->01bf", 2
    )


def test_shapes_omitted_are_inferred() -> None:
    # hlo_generic.jsonl:957 and :963: instructions written in place as operands, shapes left to the parser.
    m = parse(
        """\
        HloModule test

        ENTRY test {
            ROOT root = add(f32[10] parameter(0), multiply(f32[10] parameter(1), f32[10] parameter(2)))
        }
        """
    )
    assert [(i.name, i.opcode, i.operands) for i in m.entry.instructions] == [
        ("parameter.anon", "parameter", ()),
        ("parameter.anon.1", "parameter", ()),
        ("parameter.anon.2", "parameter", ()),
        ("multiply.anon", "multiply", ("parameter.anon.1", "parameter.anon.2")),
        ("root", "add", ("parameter.anon", "multiply.anon")),
    ]  # the names XLA gives them
    assert str(m.entry.root.shape) == "f32[10]"
    # hlo_cpu.jsonl:265: a sort and a tuple without shapes.
    m = parse(
        """\
        HloModule m
        %sort_comparison (a: f32[], b: f32[]) -> pred[] {
          %a = f32[] parameter(0)
          %b = f32[] parameter(1)
          ROOT %lt = pred[] compare(%a, %b), direction=LT
        }
        %sort_body (input: (f32[4])) -> (f32[4]) {
              %input = f32[4] parameter(0)
              %sorted = sort(%input), dimensions={0}, is_stable=true, to_apply=%sort_comparison
              ROOT %result = tuple(%sorted)
        }
        """
    )
    assert str(m.entry.root.shape) == "(f32[4])" and m.entry.name == "sort_body"


def test_operand_forms() -> None:
    # hlo_tpu.jsonl:73 `tuple(custom-call.7832, %async-done)`: operands with and without the % sigil mixed.
    m = parse(
        """\
        ENTRY main {
          a = f32[2] parameter(0)
          %b = f32[2] parameter(1)
          ROOT t = (f32[2], f32[2]) tuple(a, %b)
        }
        """
    )
    assert m.entry.root.operands == ("a", "b")
    # fixtures: operand lists with /*index=N*/ comments (cpu_transformer_scan.hlo.txt, %tuple.10 has 11).
    t = inst(fixture("cpu_transformer_scan.hlo.txt"), "tuple.10")
    assert len(t.operands) == 11 and all("/" not in o for o in t.operands)


def test_not_hlo_is_an_error() -> None:
    with pytest.raises(HloParseError):
        parse_hlo_text("BufferAssignment:\nallocation 0: size 4, parameter 0\n")


@pytest.mark.parametrize("sigils", [True, False], ids=["names-with-%", "no-%"])
@pytest.mark.parametrize("layout", ["block", "line-by-line", "lazy"])
def test_called_computations_named_without_sigil_beside_names_with_it(layout: str, sigils: bool) -> None:
    """XLA's own test texts mix ``%``-named instructions with called computations named without it
    (``to_apply=add``, ``true_computation=T``): the computations are called all the same, on every path of the
    parser (one a line, a body read whole, a long fused body kept lazy)."""
    adder = "%add (a: f32[], b: f32[]) -> f32[] {\n  %a = f32[] parameter(0)\n  %b = f32[] parameter(1)\n" \
            "  ROOT %s = f32[] add(%a, %b)\n}\n\n"
    branches = "".join(f"%{b} (x: f32[]) -> f32[] {{\n  ROOT %x = f32[] parameter(0)\n}}\n\n" for b in ("T", "F"))
    body = ["  %p = f32[8]{0} parameter(0)", "  %z = f32[] constant(0)",
            "  %r = f32[] reduce(f32[8]{0} %p, f32[] %z), dimensions={0}, to_apply=add",
            "  %q = pred[] parameter(1)",
            "  %c = f32[] conditional(pred[] %q, f32[] %r, f32[] %r), true_computation=T, false_computation=F"]
    if layout == "lazy":  # (a computation other than the entry, long enough to be kept as rows)
        body += [f"  %n{k} = f32[] negate(%c)" for k in range(130)]
    body.append("  ROOT %o = f32[] negate(%c)")
    if layout == "line-by-line":
        body.insert(0, "  // a comment: the line-by-line loop")
    text = adder + branches
    if layout == "lazy":
        text += "%long (p: f32[8], q: pred[]) -> f32[] {\n" + "\n".join(body) + "\n}\n\n"
        text += ("ENTRY %main (p: f32[8], q: pred[]) -> f32[] {\n  %p = f32[8]{0} parameter(0)\n"
                 "  %q = pred[] parameter(1)\n  ROOT %l = f32[] call(%p, %q), to_apply=long\n}\n")
        comp = "long"
    else:
        text += "ENTRY %main (p: f32[8], q: pred[]) -> f32[] {\n" + "\n".join(body) + "\n}\n"
        comp = "main"
    if not sigils:
        text = text.replace("%", "")
    module = parse_hlo_text(text)
    insts = {i.name: i for i in module.computation(comp).instructions}
    assert dict(insts["r"].called_computations) == {"to_apply": ("add",)}
    assert dict(insts["c"].called_computations) == {"branch_computations": ("T", "F")}  # (hloscope's role)
    if layout == "lazy":
        assert dict(module.entry.root.called_computations) == {"to_apply": ("long",)}


def test_a_string_with_an_escape_python_does_not_know_is_kept_without_a_warning() -> None:
    """``metadata={op_name="a\\db"}``: ``\\d`` is no C escape; the op name keeps it as printed, ``\\n`` is a line
    break, and reading it warns nothing (Python's ``unicode_escape`` codec would raise a DeprecationWarning)."""
    import warnings

    text = ('HloModule m\n\nENTRY %e (p: f32[]) -> f32[] {\n  %p = f32[] parameter(0)\n'
            '  ROOT %n = f32[] negate(%p), metadata={op_name="a\\db\\nc" source_file="f.py" source_line=1}\n}\n')
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        md = parse_hlo_text(text).entry.root.metadata
    assert md.op_name == "a\\db\nc"


def test_stack_frame_rows_not_in_the_printed_form_read_the_same_fields() -> None:
    """``resolve_stack_frames`` reads a row as XLA prints it by one match and any other row field by field: fields
    in another order or missing (0), a number too long for the match, a location no row names."""
    from hloscope.hlo_values import StackFrame
    from hloscope.parsers._hlo_decode import resolve_stack_frames

    tables = {
        "FileNames": {1: '"a.py"', 2: "b.py"},
        "FunctionNames": {1: '"f"'},
        "FileLocations": {
            1: "{file_name_id=1 function_name_id=1 line=7 end_line=7 column=1 end_column=2}",  # as printed
            2: "{line=9 file_name_id=2}",  # fields reordered, one missing
            3: "{file_name_id=1 function_name_id=1 line=" + "9" * 30 + "}",  # 30 digits
            4: "{file_name_id=1 function_name_id=1 line=5 end_line=6}",  # a field of another printing
        },
        "StackFrames": {
            1: "{file_location_id=1 parent_frame_id=0}",
            2: "{parent_frame_id=1 file_location_id=2}",
            3: "{file_location_id=3 parent_frame_id=2}",
            4: "{file_location_id=8 parent_frame_id=3}",  # no such location
            5: "{file_location_id=4 parent_frame_id=x}",
        },
    }
    assert resolve_stack_frames(tables) == {
        1: StackFrame("a.py", "f", 7, 0),
        2: StackFrame("b.py", "", 9, 1),
        3: StackFrame("a.py", "f", int("9" * 30), 2),
        4: StackFrame("", "", 0, 3),
        5: StackFrame("a.py", "f", 5, 0),
    }
