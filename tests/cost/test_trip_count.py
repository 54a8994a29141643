"""Trip counts of ``while`` loops from hostile annotations (issue #20, "any input, no traceback").

``hloscope.cost.control_flow.trip_count`` takes XLA's ``known_trip_count`` only when it is an integer in
``[0, 2**63 - 1]``; any other value (negative, beyond int64, a fraction, not a number) is ignored as if absent,
so the count comes from the loop condition (flag ``inferred-trip-count``) or is 1 (flag ``unknown-trip-count``).
Whatever the annotation says, a module's FLOPs are never negative, NaN or astronomical.

``LOOP`` is the CPU compile of ``jax.lax.fori_loop(0, 7, lambda i, c: jnp.tanh(c @ c), x)`` for an f32[8,8]
``x`` (jax 0.10.2, ``jax.jit(f).lower(x).compile().as_text()``), with the stack-frame tables and ``metadata=``
attributes dropped. The body does one 8x8x8 dot (1024 FLOPs), a tanh (64 transcendentals) and the counter's
add (1 FLOP) per iteration; the condition is the canonical ``compare(get-tuple-element(p, 0), constant(7)),
direction=LT`` as a fused root.
"""

from __future__ import annotations

import math

import pytest

from hloscope.cost import module_cost
from hloscope.cost.control_flow import MAX_TRIP_COUNT, _trip_count_value
from hloscope.parsers import parse_hlo_text

LOOP = """HloModule jit_f, is_scheduled=true, entry_computation_layout={(f32[8,8]{1,0})->f32[8,8]{1,0}}

%fused_computation (param_0: f32[8,8]) -> f32[8,8] {
  %param_0 = f32[8,8]{1,0} parameter(0)
  ROOT %dot_general.2 = f32[8,8]{1,0} dot(%param_0, %param_0), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}

%wrapped_add_computation (param_0.1: s32[], param_1: s32[]) -> s32[] {
  %param_0.1 = s32[] parameter(0)
  %param_1 = s32[] parameter(1)
  ROOT %add.0 = s32[] add(%param_0.1, %param_1)
}

%wrapped_tanh_computation (param_0.2: f32[8,8]) -> f32[8,8] {
  %param_0.2 = f32[8,8]{1,0} parameter(0)
  ROOT %tanh.2 = f32[8,8]{1,0} tanh(%param_0.2)
}

%region_0.2 (arg_tuple.1: (s32[], f32[8,8])) -> (s32[], f32[8,8]) {
  %arg_tuple.1 = (s32[], f32[8,8]{1,0}) parameter(0)
  %constant.2 = s32[] constant(1)
  %get-tuple-element.5 = f32[8,8]{1,0} get-tuple-element(%arg_tuple.1), index=1
  %get-tuple-element.4 = s32[] get-tuple-element(%arg_tuple.1), index=0
  %ynn_fusion = f32[8,8]{1,0} fusion(%get-tuple-element.5), kind=kCustom, calls=%fused_computation, backend_config={"fusion_config":{"kind":"__ynn_fusion"},"outer_dimension_partitions":[]}
  %wrapped_add = s32[] fusion(%get-tuple-element.4, %constant.2), kind=kLoop, calls=%wrapped_add_computation
  %wrapped_tanh = f32[8,8]{1,0} fusion(%ynn_fusion), kind=kLoop, calls=%wrapped_tanh_computation
  ROOT %tuple.3 = (s32[], f32[8,8]{1,0}) tuple(%wrapped_add, %wrapped_tanh)
}

%wrapped_compare_computation (param_0.3: s32[], param_1.1: s32[]) -> pred[] {
  %param_0.3 = s32[] parameter(0)
  %param_1.1 = s32[] parameter(1)
  ROOT %lt.0 = pred[] compare(%param_0.3, %param_1.1), direction=LT
}

%region_1.3 (arg_tuple.3: (s32[], f32[8,8])) -> pred[] {
  %arg_tuple.3 = (s32[], f32[8,8]{1,0}) parameter(0)
  %constant.4 = s32[] constant(7)
  %get-tuple-element.6 = s32[] get-tuple-element(%arg_tuple.3), index=0
  ROOT %wrapped_compare = pred[] fusion(%get-tuple-element.6, %constant.4), kind=kLoop, calls=%wrapped_compare_computation
}

ENTRY %main.4 (x.1: f32[8,8]) -> f32[8,8] {
  %x.1 = f32[8,8]{1,0} parameter(0)
  %constant.5 = s32[] constant(0)
  %copy.6 = f32[8,8]{1,0} copy(%x.1)
  %copy.7 = s32[] copy(%constant.5)
  %tuple = (s32[], f32[8,8]{1,0}) tuple(%copy.7, %copy.6)
  %while.5 = (s32[], f32[8,8]{1,0}) while(%tuple), condition=%region_1.3, body=%region_0.2, backend_config={"dynamic_variables":[],"known_induction_variable":{"tuple_index":"0"},"known_init_step":{"init":"0","step":"1"},"known_trip_count":{"n":"7"}}
  ROOT %while.7 = f32[8,8]{1,0} get-tuple-element(%while.5), index=1
}
"""
KNOWN = '"known_trip_count":{"n":"7"}'
TRIPS = 7
#: Per iteration: the dot (2 * 8 * 8 * 8) and the counter's add; the tanh is a transcendental. The condition's
#: compare (1 FLOP) runs once more than the body.
BODY_FLOPS = 2 * 8 * 8 * 8 + 1
COND_FLOPS = 1
#: Hostile ``known_trip_count`` values, as they appear in the JSON (a string, or a bare JSON number).
HOSTILE = {
    "negative": '"-5"',
    "negative-number": "-5",
    "1e30-digits": '"1' + "0" * 30 + '"',
    "1e30-digits-number": "1" + "0" * 30,
    "2**63": f'"{1 << 63}"',
    "not-a-number": '"abc"',
    "fraction": '"2.5"',
    "fraction-number": "2.5",
    "exponent-number": "1e30",
    "empty": '""',
    "null": "null",
    "bool": "true",
    "list": "[7]",
    "object": '{"n":"7"}',
    "arabic-indic-digits": '"\\u0667"',
    "underscore": '"1_000"',
    "white-space": '" 7"',
    "5000-digits": '"' + "9" * 5000 + '"',
    "5000-digits-number": "9" * 5000,
}


def _with_known(value: str, text: str = LOOP) -> str:
    assert KNOWN in text
    return text.replace(KNOWN, f'"known_trip_count":{{"n":{value}}}')


def _while(mc):
    (row,) = [r for r in mc.rows if r.instruction.opcode == "while"]
    return row


def _body_adds(mc) -> float:
    """How many times the loop body's counter add ran (the body's row count)."""
    (row,) = [r for r in mc.rows if r.instruction.name == "wrapped_add"]
    return row.count


def _sane(mc, trips: int) -> None:
    """FLOPs finite, non-negative, and those of ``trips`` iterations (and ``trips + 1`` condition runs)."""
    assert math.isfinite(mc.flops) and mc.flops >= 0
    assert mc.flops == pytest.approx(trips * BODY_FLOPS + (trips + 1) * COND_FLOPS)
    assert 0 <= mc.transcendentals == pytest.approx(trips * 64)


def test_the_real_annotation_is_taken():
    mc = module_cost(parse_hlo_text(LOOP))
    assert "unknown-trip-count" not in mc.flags and "inferred-trip-count" not in mc.flags
    assert _body_adds(mc) == TRIPS
    _sane(mc, TRIPS)


@pytest.mark.parametrize("value", list(HOSTILE.values()), ids=list(HOSTILE))
def test_a_hostile_annotation_falls_back_to_the_condition(value):
    """The annotation is ignored; the canonical condition (``i < 7`` from 0) gives 7, flagged inferred."""
    mc = module_cost(parse_hlo_text(_with_known(value)))
    assert _while(mc).cost.flags == frozenset({"inferred-trip-count"})
    assert "unknown-trip-count" not in mc.flags
    assert _body_adds(mc) == TRIPS
    _sane(mc, TRIPS)


@pytest.mark.parametrize("value", ['"-5"', '"1' + "0" * 30 + '"', '"abc"', '"2.5"', "2.5"],
                         ids=["negative", "1e30-digits", "not-a-number", "fraction", "fraction-number"])
def test_a_hostile_annotation_and_an_opaque_condition_give_one_trip(value):
    """With a condition that is not the canonical compare (here ``direction=EQ``), nothing tells the count:
    one trip, flagged ``unknown-trip-count``."""
    text = _with_known(value).replace("direction=LT", "direction=EQ")
    mc = module_cost(parse_hlo_text(text))
    assert _while(mc).cost.flags == frozenset({"unknown-trip-count"})
    assert "unknown-trip-count" in mc.flags
    assert _body_adds(mc) == 1
    _sane(mc, 1)


@pytest.mark.parametrize("bound, trips, flag", [
    ("-5", 0, "inferred-trip-count"),  # i < -5 from 0: never runs
    ("99999999999999999999", 1, "unknown-trip-count"),  # beyond int64: not used
    ("1" + "0" * 30, 1, "unknown-trip-count"),  # more digits than any int64
], ids=["negative", "beyond-int64", "1e30-digits"])
def test_a_hostile_condition_bound(bound, trips, flag):
    """No annotation, and the condition's constant edited: a count in ``[0, 2**63 - 1]`` or none."""
    text = LOOP.replace(f",{KNOWN}", "").replace("s32[] constant(7)", f"s64[] constant({bound})")
    mc = module_cost(parse_hlo_text(text))
    assert _while(mc).cost.flags == frozenset({flag})
    assert _body_adds(mc) == trips
    _sane(mc, trips)


def test_the_largest_int64_is_taken():
    mc = module_cost(parse_hlo_text(_with_known(f'"{MAX_TRIP_COUNT}"')))
    assert _while(mc).cost.flags == frozenset()
    assert _body_adds(mc) == float(MAX_TRIP_COUNT)  # row counts are floats
    assert math.isfinite(mc.flops) and mc.flops > 0


def test_a_config_nested_too_deep_for_json_is_ignored():
    """A ``backend_config`` nested past Python's recursion limit: no RecursionError, the condition tells."""
    text = LOOP.replace(KNOWN, '"x":' + "[" * 100_000 + "]" * 100_000)
    mc = module_cost(parse_hlo_text(text))
    assert _while(mc).cost.flags == frozenset({"inferred-trip-count"})
    _sane(mc, TRIPS)


@pytest.mark.parametrize("value, expected", [
    (7, 7), ("7", 7), ("+7", 7), ("0", 0), ("-0", 0), (MAX_TRIP_COUNT, MAX_TRIP_COUNT),
    (str(MAX_TRIP_COUNT), MAX_TRIP_COUNT),
    (-5, None), ("-5", None), (1 << 63, None), (str(1 << 63), None), (10 ** 30, None), ("1" + "0" * 30, None),
    ("abc", None), ("2.5", None), (2.5, None), (7.0, None), (math.nan, None), (math.inf, None), (True, None),
    (False, None), (None, None), ([7], None), ({"n": 7}, None), ("", None), (" 7", None), ("7 ", None),
    ("1_000", None), ("\u0667", None), ("\u00b2", None), ("9" * 5000, None),
])
def test_trip_count_value(value, expected):
    assert _trip_count_value(value) == expected
