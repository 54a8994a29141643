"""Bad input: every failure is an ``HloParseError`` naming source, line and column (and computation and
instruction when known) with the offending line and a caret -- the full text is pinned here -- and nothing
else escapes (no IndexError, KeyError, RecursionError) or hangs.

The base text is a real module: ``fixtures/dump/cpu_small/module_0000.jit_tiny_mlp.cpu_after_optimizations.txt``
(XLA CPU, jaxlib 0.10.2), copied below so that the pinned lines and columns do not move when fixtures are
regenerated. Each case cuts or edits it in one place.
"""

from __future__ import annotations

import random
import string
import time
from pathlib import Path

import pytest

from hloscope.parsers import HloParseError, parse_hlo, parse_hlo_text

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"

TINY_MLP = """\
HloModule jit_tiny_mlp, is_scheduled=true, entry_computation_layout={(f32[8,16]{1,0}, f32[16,32]{1,0}, f32[32,4]{1,0})->f32[8,4]{1,0}}, allow_spmd_sharding_propagation_to_parameters={true,true,true}, allow_spmd_sharding_propagation_to_output={true}

FileNames
1 "<string>"

FunctionNames
1 "<module>"
2 "tiny_mlp"

FileLocations
1 {file_name_id=1 function_name_id=1 line=12 end_line=12 column=6 end_column=34}
2 {file_name_id=1 function_name_id=2 line=6 end_line=6 column=20 end_column=26}
3 {file_name_id=1 function_name_id=2 line=6 end_line=6 column=11 end_column=27}

StackFrames
1 {file_location_id=1 parent_frame_id=1}
2 {file_location_id=2 parent_frame_id=2}
3 {file_location_id=3 parent_frame_id=2}


%fused_computation (param_0: f32[8,32], param_1: f32[32,4]) -> f32[8,4] {
  %param_0 = f32[8,32]{1,0} parameter(0)
  %param_1 = f32[32,4]{1,0} parameter(1)
  ROOT %dot_general.0 = f32[8,4]{1,0} dot(%param_0, %param_1), lhs_contracting_dims={1}, rhs_contracting_dims={0}, metadata={op_name="jit(tiny_mlp)/dot_general" stack_frame_id=3}
}

%fused_computation.1 (param_0.1: f32[8,16], param_1.1: f32[16,32]) -> f32[8,32] {
  %param_0.1 = f32[8,16]{1,0} parameter(0)
  %param_1.1 = f32[16,32]{1,0} parameter(1)
  ROOT %dot_general.1 = f32[8,32]{1,0} dot(%param_0.1, %param_1.1), lhs_contracting_dims={1}, rhs_contracting_dims={0}, metadata={op_name="jit(tiny_mlp)/dot_general" stack_frame_id=2}
}

%wrapped_tanh_computation (param_0.2: f32[8,32]) -> f32[8,32] {
  %param_0.2 = f32[8,32]{1,0} parameter(0)
  ROOT %tanh.0 = f32[8,32]{1,0} tanh(%param_0.2), metadata={op_name="jit(tiny_mlp)/tanh" stack_frame_id=3}
}

ENTRY %main.1 (x.1: f32[8,16], w1.1: f32[16,32], w2.1: f32[32,4]) -> f32[8,4] {
  %x.1 = f32[8,16]{1,0} parameter(0), metadata={op_name="x"}
  %w1.1 = f32[16,32]{1,0} parameter(1), metadata={op_name="w1"}
  %w2.1 = f32[32,4]{1,0} parameter(2), metadata={op_name="w2"}
  %ynn_fusion.1 = f32[8,32]{1,0} fusion(%x.1, %w1.1), kind=kCustom, calls=%fused_computation.1, metadata={op_name="jit(tiny_mlp)/dot_general" stack_frame_id=2}, backend_config={"outer_dimension_partitions":[],"fusion_config":{"kind":"__ynn_fusion"}}
  %wrapped_tanh = f32[8,32]{1,0} fusion(%ynn_fusion.1), kind=kLoop, calls=%wrapped_tanh_computation, metadata={op_name="jit(tiny_mlp)/tanh" stack_frame_id=3}
  ROOT %ynn_fusion = f32[8,4]{1,0} fusion(%wrapped_tanh, %w2.1), kind=kCustom, calls=%fused_computation, metadata={op_name="jit(tiny_mlp)/dot_general" stack_frame_id=3}, backend_config={"outer_dimension_partitions":[],"fusion_config":{"kind":"__ynn_fusion"}}
}

"""


def _cut_after(text: str, marker: str) -> str:
    return text[: text.index(marker) + len(marker)]


def _replace_once(text: str, old: str, new: str) -> str:
    assert text.count(old) >= 1, old
    return text.replace(old, new, 1)


CASES = {
    "truncated mid-instruction": _cut_after(TINY_MLP, "%wrapped_tanh = f32[8,32]{1,0} fusion(%ynn_fusion.1"),
    "truncated after an attribute": _cut_after(TINY_MLP, "kind=kLoop, calls=%wrapped_tan"),
    "truncated mid-computation": _cut_after(TINY_MLP, "stack_frame_id=2}\n}\n\n%wrapped_tanh_computation"
                                            " (param_0.2: f32[8,32]) -> f32[8,32] {\n"),
    "truncated in the header": _cut_after(TINY_MLP, "ENTRY %main.1 (x.1: f32[8,16], w1.1: f32[16,3"),
    "missing called computation": _replace_once(TINY_MLP, "calls=%wrapped_tanh_computation,",
                                                "calls=%wrapped_tanh_computation.7,"),
    "duplicate instruction name": _replace_once(TINY_MLP, "%w2.1 = f32[32,4]{1,0} parameter(2)",
                                                "%w1.1 = f32[32,4]{1,0} parameter(2)"),
    "duplicate computation name": _replace_once(TINY_MLP, "%wrapped_tanh_computation (param_0.2",
                                                "%fused_computation.1 (param_0.2"),
    "unterminated string": _replace_once(TINY_MLP, 'metadata={op_name="jit(tiny_mlp)/tanh" stack_frame_id=3}',
                                         'metadata={op_name="jit(tiny_mlp)/tanh stack_frame_id=3}'),
    "unknown operand": _replace_once(TINY_MLP, "fusion(%wrapped_tanh, %w2.1)", "fusion(%wrapped_tanh, %w3.1)"),
    "second ROOT": _replace_once(TINY_MLP, "  %wrapped_tanh = ", "  ROOT %wrapped_tanh = "),
    "bad shape": _replace_once(TINY_MLP, "%param_1 = f32[32,4]{1,0} parameter(1)", "%param_1 = f32[32,4x]{1,0} parameter(1)"),
    "garbage": "Hello, world!\nThis is not HLO.\n",
    "empty": "\n  // nothing but a comment\n",
}

EXPECTED = {
    "truncated mid-instruction": """\
tiny_mlp.hlo.txt:43:40: '(' is never closed (truncated file?) \
(in computation 'main.1', instruction 'wrapped_tanh')
      %wrapped_tanh = f32[8,32]{1,0} fusion(%ynn_fusion.1
                                           ^""",
    "truncated after an attribute": """\
tiny_mlp.hlo.txt: computation 'main.1' is not closed with '}' (truncated file?) \
(at end of document, line 43)
    ...]{1,0} fusion(%ynn_fusion.1), kind=kLoop, calls=%wrapped_tan
                                                                   ^""",
    "truncated mid-computation": """\
tiny_mlp.hlo.txt: computation 'wrapped_tanh_computation' is not closed with '}' (truncated file?) \
(at end of document, line 34)""",
    "truncated in the header": """\
tiny_mlp.hlo.txt:38:15: '(' is never closed (truncated file?)
    ENTRY %main.1 (x.1: f32[8,16], w1.1: f32[16,3
                  ^""",
    "missing called computation": """\
tiny_mlp.hlo.txt:43:75: calls='wrapped_tanh_computation.7' names no computation of this module \
(in computation 'main.1', instruction 'wrapped_tanh')
    ...h = f32[8,32]{1,0} fusion(%ynn_fusion.1), kind=kLoop, calls=%wrapped_tanh_computation.7, metadata={op_name="jit(tiny_mlp
                                                                   ^""",
    "duplicate instruction name": """\
tiny_mlp.hlo.txt:41:3: duplicate instruction name 'w1.1' (the first is at line 40) \
(in computation 'main.1', instruction 'w1.1')
      %w1.1 = f32[32,4]{1,0} parameter(2), metadata={op_name="w2"}
      ^""",
    "duplicate computation name": """\
tiny_mlp.hlo.txt:33:1: duplicate computation name 'fused_computation.1' (the first is at line 27)
    %fused_computation.1 (param_0.2: f32[8,32]) -> f32[8,32] {
    ^""",
    "unterminated string": """\
tiny_mlp.hlo.txt:35:69: unterminated string \
(in computation 'wrapped_tanh_computation', instruction 'tanh.0')
    ...tanh.0 = f32[8,32]{1,0} tanh(%param_0.2), metadata={op_name="jit(tiny_mlp)/tanh stack_frame_id=3}
                                                                   ^""",
    "unknown operand": """\
tiny_mlp.hlo.txt:44:58: operand 'w3.1' is not an instruction of computation 'main.1' \
(in computation 'main.1', instruction 'ynn_fusion')
      ROOT %ynn_fusion = f32[8,4]{1,0} fusion(%wrapped_tanh, %w3.1), kind=kCustom, calls=%fused_computation, metadata={op
                                                             ^""",
    "second ROOT": """\
tiny_mlp.hlo.txt:44:3: second ROOT 'ynn_fusion'; 'wrapped_tanh' is already the root \
(in computation 'main.1', instruction 'ynn_fusion')
      ROOT %ynn_fusion = f32[8,4]{1,0} fusion(%wrapped_tanh, %w2.1
      ^""",
    "bad shape": """\
tiny_mlp.hlo.txt:23:14: bad shape 'f32[32,4x]{1,0}': invalid literal for int() with base 10: '4x' \
(in computation 'fused_computation', instruction 'param_1')
      %param_1 = f32[32,4x]{1,0} parameter(1)
                 ^""",
    "garbage": """\
tiny_mlp.hlo.txt:1:1: expected a computation header such as 'ENTRY %main (p: f32[2]) -> f32[2] {'
    Hello, world!
    ^""",
    "empty": """\
tiny_mlp.hlo.txt: expected at least one computation ('ENTRY %name (...) -> shape {') \
(at end of document, line 3)""",
}


def test_the_base_text_parses() -> None:
    m = parse_hlo_text(TINY_MLP)
    assert [c.name for c in m.computations] == ["fused_computation", "fused_computation.1",
                                                 "wrapped_tanh_computation", "main.1"]


@pytest.mark.parametrize("case", sorted(CASES))
def test_error_text(case: str) -> None:
    with pytest.raises(HloParseError) as info:
        parse_hlo_text(CASES[case], "tiny_mlp.hlo.txt")
    assert str(info.value) == EXPECTED[case]
    e = info.value
    assert (e.source, e.doc) == ("tiny_mlp.hlo.txt", CASES[case])
    head = str(e).split("\n")[0]
    if e.pos < len(e.doc):
        assert head.startswith(f"tiny_mlp.hlo.txt:{e.lineno}:{e.colno}: ")
        assert e.doc.split("\n")[e.lineno - 1][e.colno - 1 :] == e.doc[e.pos :].split("\n")[0]


def test_error_attributes() -> None:
    with pytest.raises(HloParseError) as info:
        parse_hlo_text(CASES["unknown operand"], "tiny_mlp.hlo.txt")
    e = info.value
    assert (e.lineno, e.colno, e.computation, e.instruction, e.msg) == (
        44, 58, "main.1", "ynn_fusion", "operand 'w3.1' is not an instruction of computation 'main.1'"
    )
    assert isinstance(e, ValueError)  # HloParseError is a ValueError, as json.JSONDecodeError is


def test_lazy_attribute_errors_name_the_instruction() -> None:
    # Attributes are decoded on first access: a malformed value fails there, with the same kind of message.
    text = _replace_once(TINY_MLP, "lhs_contracting_dims={1}, rhs_contracting_dims={0}, metadata={op_name=\"jit(tiny_mlp)/dot_general\" stack_frame_id=2}",
                         "lhs_contracting_dims={1}, rhs_contracting_dims={zero}, metadata={op_name=\"jit(tiny_mlp)/dot_general\" stack_frame_id=2}")
    m = parse_hlo_text(text, "tiny_mlp.hlo.txt")
    dot = m.computation("fused_computation.1").root
    assert dot.operands == ("param_0.1", "param_1.1")  # the structure is read at once
    with pytest.raises(HloParseError) as info:
        dot.attributes
    assert str(info.value).split("\n")[0] == (
        "tiny_mlp.hlo.txt:30:95: bad value for rhs_contracting_dims: invalid literal for int() with base 10: "
        "'zero' (in computation 'fused_computation.1', instruction 'dot_general.1')"
    )


def test_binary_file_reports_the_byte_offset(tmp_path: Path) -> None:
    xplane = FIXTURES / "profile" / "cpu_train_step" / "plugins" / "profile" / "run0" / "localhost.xplane.pb"
    # Its bytes start 0a ec ad 14: 0xec opens a 3-byte UTF-8 sequence that 0x14 (not a continuation byte) breaks.
    assert xplane.read_bytes()[:4] == b"\x0a\xec\xad\x14"
    bad = 1
    with pytest.raises(HloParseError) as info:
        parse_hlo(xplane)
    assert str(info.value) == (
        f"{xplane}: byte {bad}: not UTF-8 text, so not HLO text (a binary file: an .xplane.pb profile, an HLO proto?)"
    )
    assert info.value.byte_offset == bad
    # A binary that happens to be valid UTF-8 (only ASCII bytes) still holds NUL bytes.
    nul = tmp_path / "ascii.pb"
    nul.write_bytes(b"\n\x04main\x12\x00\x1a\x02hi")
    with pytest.raises(HloParseError) as info:
        parse_hlo(nul)
    assert str(info.value) == (
        f"{nul}: byte 7: a NUL byte, so not HLO text (a binary file: an .xplane.pb profile, an HLO proto?)"
    )


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_random_printable_garbage_fails_fast(seed: int) -> None:
    rng = random.Random(seed)
    garbage = "".join(rng.choices(string.printable, k=1_000_000))
    head = TINY_MLP[: TINY_MLP.index("  %param_0 = f32[8,32]")]  # open a computation, then garbage
    for text in (garbage, head + garbage):
        t0 = time.perf_counter()
        with pytest.raises(HloParseError):
            parse_hlo_text(text)
        assert time.perf_counter() - t0 < 5.0  # in practice well under 0.1 s


@pytest.mark.parametrize("flood", ["(", "{", "[", '"', "/*", "%a = f32[] add("])
def test_floods_fail_fast_without_recursion_errors(flood: str) -> None:
    head = TINY_MLP[: TINY_MLP.index("  %param_0 = f32[8,32]")]
    for text in (head + "  %x = f32[2] add" + flood * 200_000, head + "  %x = f32[2] add(%a), k=" + flood * 200_000):
        t0 = time.perf_counter()
        with pytest.raises(HloParseError):
            parse_hlo_text(text)
        assert time.perf_counter() - t0 < 5.0


def test_deep_nesting_is_a_parse_error() -> None:
    head = TINY_MLP[: TINY_MLP.index("  %param_0 = f32[8,32]")]
    with pytest.raises(HloParseError, match="nested deeper than 100 levels"):
        parse_hlo_text(head + "  %x = " + "(" * 5000 + "f32[]" + ")" * 5000 + " tuple()\n}\n")
    with pytest.raises(HloParseError, match="nest deeper than 100 levels"):
        parse_hlo_text("ENTRY e {\n  ROOT r = " + "negate(" * 5000 + "f32[] parameter(0)" + ")" * 5000 + "\n}\n")


def test_a_table_row_number_of_thousands_of_digits_is_a_located_error() -> None:
    """A row number too long for ``int()`` (Python refuses 4,300 digits and more with a bare ValueError; found by
    benchmarks/fuzz.py, seed 43) is an error at its line, as any other bad row."""
    text = _replace_once(TINY_MLP, 'FunctionNames\n1 "<module>"', 'FunctionNames\n' + "1" * 5000 + ' "<module>"')
    with pytest.raises(HloParseError) as info:
        parse_hlo_text(text, "tiny_mlp.hlo.txt")
    assert str(info.value).split("\n")[0] == (
        "tiny_mlp.hlo.txt:7:1: a table row number of 5000 digits: expected an index")
    ok = _replace_once(TINY_MLP, 'FunctionNames\n1 "<module>"', 'FunctionNames\n' + "0" * 17 + '1 "<module>"')
    assert [c.name for c in parse_hlo_text(ok).computations][-1] == "main.1"  # (18 digits: still an index)
