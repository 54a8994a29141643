"""cuDNN convolutions, kernels with a cost estimate or a called computation, and the MLIR backend-config reader
(``hloscope/cost/custom_call.py``, ``custom_call_common.py``).

Independent sources: XLA's own ``HloCostAnalysis`` of the plain ``convolution`` a cuDNN call computes (for the
backward kinds, the forward convolution whose gradient it is: XLA's ``gpu_conv_runner.cc`` reads backward
input as (input = result, filter = operand 1, output = operand 0) and backward filter as (input = operand 0,
filter = result, output = operand 1)); the kernel author's cost estimate as printed by XLA's and XProf's tests.
"""

from __future__ import annotations

import math
import os
import sys
from pathlib import Path

os.environ.setdefault("JAX_PLATFORMS", "cpu")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import pytest  # noqa: E402

from cost_oracle import xla_cost  # noqa: E402
from hloscope.cost import OpCost, module_cost  # noqa: E402
from hloscope.cost.custom_call_common import cost_estimate, mlir_attribute_dict  # noqa: E402
from hloscope.parsers import parse_hlo_text  # noqa: E402

OPAQUE = "opaque-custom-call"


def one_call(text: str) -> OpCost:
    mc = module_cost(parse_hlo_text(text))
    (c,) = [r.cost for r in mc.rows if r.instruction.opcode == "custom-call"]
    return c


def module(params: list[tuple[str, str]], root: str) -> str:
    lines = "\n".join(f"  {name} = {shape} parameter({i})" for i, (name, shape) in enumerate(params))
    return f"HloModule m\nENTRY e {{\n{lines}\n  ROOT r = {root}\n}}"


# ---------------------------------------------------------------------------------------------------------
# cuDNN convolutions
# ---------------------------------------------------------------------------------------------------------


def test_backward_filter_is_its_forward_convolution():
    """XLA's test module ``BackwardFilterAlgo0Incorrect`` (gpu_convolution_regression_test.cc): x
    ``[7680,96,6,6]``, dy ``[7680,64,4,4]`` -> dw ``[64,96,3,3]``."""
    x, dy, dw = "f16[7680,96,6,6]{1,3,2,0}", "f16[7680,64,4,4]{1,3,2,0}", "f16[64,96,3,3]{1,3,2,0}"
    call = module([("x", x), ("dy", dy)], f'({dw}, u8[0]{{0}}) custom-call(x, dy), window={{size=3x3}}, '
                  'dim_labels=bf01_oi01->bf01, custom_call_target="__cudnn$convBackwardFilter", '
                  'backend_config="{conv_result_scale:1}"')
    forward = module([("x", x), ("w", dw)], f"{dy} convolution(x, w), window={{size=3x3}}, dim_labels=bf01_oi01->bf01")
    expected = xla_cost(forward)["flops"]
    assert expected == 2 * 7680 * 64 * 96 * 4 * 4 * 3 * 3
    c = one_call(call)
    assert c.flops == expected and OPAQUE not in c.flags
    assert c.bytes_read == 2 * (7680 * 96 * 36 + 7680 * 64 * 16) and c.bytes_written == 2 * 64 * 96 * 9


@pytest.mark.parametrize("window,out_hw", [("size=3x3 pad=1_1x1_1", 16), ("size=3x3 stride=2x2 pad=0_1x0_1", 8),
                                           ("size=5x5 pad=4_4x4_4 rhs_dilate=2x2", 16)])
def test_backward_input_is_its_forward_convolution(window, out_hw):
    dx, w = "f32[2,16,16,8]{3,2,1,0}", "f32[3,3,8,4]{3,2,1,0}"
    if "size=5x5" in window:
        w = "f32[5,5,8,4]{3,2,1,0}"
    dy = f"f32[2,{out_hw},{out_hw},4]{{3,2,1,0}}"
    forward = module([("x", dx), ("w", w)], f"{dy} convolution(x, w), window={{{window}}}, dim_labels=b01f_01io->b01f")
    call = module([("dy", dy), ("w", w)], f"({dx}, u8[1024]{{0}}) custom-call(dy, w), window={{{window}}}, "
                  'dim_labels=b01f_01io->b01f, custom_call_target="__cudnn$convBackwardInput"')
    c = one_call(call)
    assert c.flops == xla_cost(forward)["flops"] > 0
    # dy and w read, dx written; the 1 KiB workspace is scratch
    assert c.bytes_written == 4 * 2 * 16 * 16 * 8


def test_bias_activation_and_graph_forward_count_the_convolution():
    x, w, y = "f32[2,16,16,8]{3,2,1,0}", "f32[3,3,8,4]{3,2,1,0}", "f32[2,8,8,4]{3,2,1,0}"
    window = "size=3x3 stride=2x2 pad=0_1x0_1"
    expected = xla_cost(module([("x", x), ("w", w)],
                               f"{y} convolution(x, w), window={{{window}}}, dim_labels=b01f_01io->b01f"))["flops"]
    for target in ("__cudnn$convBiasActivationForward", "__cudnn$convForwardGraph"):
        call = module([("x", x), ("w", w), ("b", "f32[4]{0}"), ("s", y)],
                      f"({y}, u8[0]{{0}}) custom-call(x, w, b, s), window={{{window}}}, dim_labels=b01f_01io->b01f, "
                      f'custom_call_target="{target}"')
        c = one_call(call)
        assert c.flops == expected
        assert c.bytes_read == 4 * (2 * 16 * 16 * 8 + 3 * 3 * 8 * 4 + 4 + 2 * 8 * 8 * 4)


def test_vectorized_int8_convolution_counts_every_channel():
    """cuDNN's int8x4 layout (NCHW_VECT_C, as in XLA's cudnn_vectorize_convolutions tests): the unlabelled
    trailing dim multiplies the feature dim; the same FLOPs as the unvectorized convolution."""
    plain = module([("x", "f32[4,24,24,64]{3,2,1,0}"), ("w", "f32[3,3,64,32]{3,2,1,0}")],
                   "f32[4,24,24,32]{3,2,1,0} convolution(x, w), window={size=3x3 pad=1_1x1_1}, "
                   "dim_labels=b01f_01io->b01f")
    vect = module([("x", "s8[4,24,24,16,4]{4,3,2,1,0}"), ("w", "s8[3,3,16,4,32]{4,3,2,1,0}")],
                  "(s8[4,24,24,8,4]{4,3,2,1,0}, u8[0]{0}) custom-call(x, w), window={size=3x3 pad=1_1x1_1}, "
                  'dim_labels=b01f?_01i?o->b01f?, custom_call_target="__cudnn$convForward"')
    assert one_call(vect).flops == xla_cost(plain)["flops"]


def test_convolution_without_dim_labels_stays_unknown():
    """XLA's ``CudnnConvCustomCallForbidsSpills`` test module prints no window or dim_labels."""
    text = module([("p0", "f32[1,1,3,3]{3,2,1,0}"), ("p1", "f32[1,1,3,3]{3,2,1,0}")],
                  '(f32[1,1,3,3]{3,2,1,0}, u8[0]{0}) custom-call(p0, p1), custom_call_target="__cudnn$convForward"')
    c = one_call(text)
    assert OPAQUE in c.flags and math.isnan(c.flops)


# ---------------------------------------------------------------------------------------------------------
# Kernels: cost estimates and called computations
# ---------------------------------------------------------------------------------------------------------

#: XProf's ``xplane_to_op_metrics_db_test.cc`` (DeviceOpMetricsDbWithPerformanceInfo), verbatim.
XPROF_TRITON = r'''HloModule TestModule

ENTRY test {
  p0 = f32[100,100]{1,0} parameter(0)
  ROOT custom-call.1 = (f32[100,100]{1,0}) custom-call(p0),
  custom_call_target="triton_kernel_call_ffi",
  backend_config="{cost_estimate_json = \"{\\\"flops\\\": 1000, \\\"bytes_accessed\\\": 2000}\"}"
}'''

#: XLA's ``gpu_hlo_cost_analysis_test.cc`` (TritonCustomCallEscapedJsonBackendConfigMissingProperty), verbatim.
XLA_TRITON_FLOPS_ONLY = r'''HloModule module

ENTRY %main (arg0: f32[100,100]) -> (f32[100,100]) {
  %arg0 = f32[100,100]{1,0} parameter(0)
  ROOT %custom-call = (f32[100,100]{1,0}) custom-call(%arg0),
  custom_call_target="triton_kernel_call_ffi",
  backend_config="{cost_estimate_json = \"{\\\"flops\\\": 123456}\"}"
}'''


def test_triton_kernel_call_cost_estimate_json():
    c = one_call(XPROF_TRITON)
    assert OPAQUE not in c.flags
    assert (c.flops, c.transcendentals, c.bytes_accessed) == (1000, 0, 2000)


def test_cost_estimate_without_bytes_leaves_bytes_unknown():
    c = one_call(XLA_TRITON_FLOPS_ONLY)
    assert c.flops == 123456 and OPAQUE not in c.flags
    assert math.isnan(c.bytes_read) and math.isnan(c.bytes_written) and "unknown-bytes" in c.flags


def test_pallas_triton_without_estimate_is_opaque():
    """Pallas's Triton lowering (``jax/_src/pallas/triton/pallas_call_registration.py``) prints name, IR
    bytecode, stages, warps and grid: no cost estimate."""
    text = module([("x", "f32[1024]{0}"), ("y", "f32[1024]{0}")],
                  'f32[1024]{0} custom-call(x, y), custom_call_target="__gpu$xla.gpu.triton", '
                  'api_version=API_VERSION_TYPED_FFI, backend_config={debug = false, grid_x = 8 : i32, '
                  'grid_y = 1 : i32, grid_z = 1 : i32, ir = "ML\\EFR\\00\\0D", name = "add_vectors_kernel", '
                  'num_stages = 3 : i32, num_warps = 4 : i32}')
    c = one_call(text)
    assert OPAQUE in c.flags and math.isnan(c.flops) and math.isnan(c.bytes_read)


@pytest.mark.parametrize("estimate", ['{"flops": -5}', '{"flops": "many"}', '{"bytes_accessed": NaN}', '{}'])
def test_unusable_cost_estimates_are_not_trusted(estimate):
    config = '{"custom_call_config": {"body": "", "cost_estimate": ' + estimate + "}}"
    text = module([("p", "f32[8]{0}")], f"f32[8]{{0}} custom-call(p), custom_call_target=\"tpu_custom_call\", "
                  f"backend_config={config}")
    assert OPAQUE in one_call(text).flags


def test_triton_custom_call_with_a_computation_costs_its_body():
    """XLA's ``NopBitcasts`` test module (triton_fusion_analysis_test.cc): ``__triton`` calling a dot
    computation. FLOPs as XLA counts the same computation called by a fusion."""
    body = """triton_dot {
  param_0.1 = s8[48,4]{1,0} parameter(0)
  bitcast.18 = s8[1,48,4]{2,1,0} bitcast(param_0.1)
  bitcast.19 = s8[48,4]{1,0} bitcast(bitcast.18)
  convert.4 = bf16[48,4]{1,0} convert(bitcast.19)
  param_1.1 = bf16[4,3]{1,0} parameter(1)
  ROOT dot = bf16[48,3]{1,0} dot(convert.4, param_1.1),
    lhs_contracting_dims={1}, rhs_contracting_dims={0}
}
"""
    entry = """ENTRY e {
  p0 = s8[48,4]{1,0} parameter(0)
  p1 = bf16[4,3]{1,0} parameter(1)
  custom-call = bf16[48,3]{1,0} custom-call(p0, p1),
    custom_call_target="__triton",
    called_computations={triton_dot}
  ROOT bitcast.2 = bf16[1,8,6,3]{3,2,1,0} bitcast(custom-call)
}"""
    text = "HloModule t\n\n" + body + "\n" + entry
    fused = text.replace('custom-call(p0, p1),\n    custom_call_target="__triton",\n    called_computations={triton_dot}',
                         "fusion(p0, p1), kind=kCustom, calls=triton_dot")
    assert fused != text
    c = one_call(text)
    assert c.flops == xla_cost(fused)["flops"] == 2 * 48 * 3 * 4 + 48 * 4  # dot + convert
    assert c.bytes_read == 48 * 4 + 2 * 4 * 3 and c.bytes_written == 2 * 48 * 3


# ---------------------------------------------------------------------------------------------------------
# The MLIR attribute dictionary reader
# ---------------------------------------------------------------------------------------------------------


def test_mlir_dictionaries_of_real_calls():
    # lapack_ssyevd_ffi (jax 0.10.2 CPU), te_fused_attn_forward_ffi (a real GPU dump), XLA's PTX kernel test
    assert mlir_attribute_dict("{mode = 86 : ui8, uplo = 76 : ui8}") == {"mode": 86, "uplo": 76}
    te = mlir_attribute_dict("{attn_heads = 32 : i64, deterministic = false, dropout_probability = 0.000000e+00 "
                             ": f64, scaling_factor = 1.000000e+00 : f64, window_size_left = -1 : i64}")
    assert te == {"attn_heads": 32, "deterministic": False, "dropout_probability": 0.0, "scaling_factor": 1.0,
                  "window_size_left": -1}
    ptx = mlir_attribute_dict('{\n name = "add_kernel",\n kernel_data = ".version 7.0\\n.target sm_60",\n'
                              ' grid_x = 1, output_indices = [2]\n}')
    assert ptx == {"name": "add_kernel", "kernel_data": ".version 7.0\n.target sm_60", "grid_x": 1,
                   "output_indices": [2]}
    assert mlir_attribute_dict("{xla_symmetric_memory_parameters = \"0\"}") == {"xla_symmetric_memory_parameters": "0"}
    assert mlir_attribute_dict("{}") == {}


def test_mlir_dictionary_forms_and_rejects():
    got = mlir_attribute_dict('{u, a = array<i64: 1, 2>, d = {k = "v"}, t = dense<[1, 2]> : tensor<2xi32>, '
                              'h = "\\41\\62", s = "a\\"b"}')
    assert got == {"u": True, "a": [1, 2], "d": {"k": "v"}, "t": "dense<[1, 2]>", "h": "Ab", "s": 'a"b'}
    for bad in ("{a = 1", "a = 1", "{a = 1} x", "{conv_result_scale:1}", '{a = "x}', ""):
        assert mlir_attribute_dict(bad) is None


def test_cost_estimate_locations():
    est = {"flops": 1, "transcendentals": 2, "bytes_accessed": 3}
    assert cost_estimate({"custom_call_config": {"cost_estimate": est}}) == est
    assert cost_estimate({"cost_estimate": est}) == est
    assert cost_estimate({"cost_estimate_json": '{"flops": 1, "transcendentals": 2, "bytes_accessed": 3}'}) == est
    assert cost_estimate({"cost_estimate_json": "not json"}) is None
    assert cost_estimate({"name": "kernel"}) is None
