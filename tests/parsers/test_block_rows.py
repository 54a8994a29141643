"""The compiled body scanner (``_block_scan.c``) against its specification, ``py_block_rows`` (``str.find``,
``re.findall`` and ``str.count``): the same result for every body of every fixture, for bodies of the public
corpus, for hand-made edge cases of ``BLOCK_LINE`` and for thousands of real lines mutated at random, in text
of each of ``str``'s three storage widths.

When the extension is missing these tests skip, except where a C compiler is on the PATH: there a missing
extension is a broken install (``pip install -e .`` builds it), and the tests fail.
"""

from __future__ import annotations

import random
from itertools import chain
from pathlib import Path

import pytest

from hloscope.parsers._block_rows import BLOCK_LINE, c_block_rows, py_block_rows

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "hlo"


@pytest.fixture(scope="module")
def compiled(compiled_twin):
    return compiled_twin(c_block_rows, "hloscope.parsers._block_scan")


def _line_starts(text: str) -> list[int]:
    return [i + 1 for i, ch in enumerate(text) if ch == "\n" and i + 1 < len(text)]


def _body_starts(text: str) -> list[int]:
    """Where ``_Parser._block`` calls the scanner: after each line that opens a computation."""
    return [i + 2 for i in range(len(text)) if text.startswith("{\n", i)]


def _assert_same(compiled, text: str, starts: list[int], source: str) -> int:
    found = 0
    for pos in starts:
        expected = py_block_rows(text, pos)
        assert compiled(text, pos) == expected, f"{source}: pos {pos}: {text[pos:pos + 120]!r}"
        found += expected is not None
    return found


@pytest.mark.parametrize("path", sorted(FIXTURES.glob("*.hlo.txt")), ids=lambda p: p.name)
def test_every_fixture_line(compiled, path: Path) -> None:
    text = path.read_text()
    assert _assert_same(compiled, text, _line_starts(text), path.name) > 0
    assert _assert_same(compiled, text, _body_starts(text), path.name) > 0


def test_corpus_bodies(compiled, corpus_dir: Path) -> None:
    dirs = [corpus_dir / d for d in ("hlo_cpu", "hlo_gpu", "hlo_tpu", "hlo_generic")]
    texts = bodies = 0
    for path in sorted(chain.from_iterable(d.glob(g) for g in ("*.txt", "*.hlo") for d in dirs)):
        text = path.read_text(encoding="utf-8", errors="replace")
        if len(text) > 3_000_000:
            continue
        bodies += _assert_same(compiled, text, _body_starts(text), path.name)
        texts += 1
    assert texts > 200 and bodies > 10_000, (texts, bodies)


HEADER = "%c (p: f32[]) -> f32[] {\n"

EDGE_BODIES = [
    "  %p = f32[] parameter(0)\n  ROOT %r = f32[] add(%p, %p)\n",
    "  p = f32[] parameter(0)\n  ROOT r = f32[] negate(p)\n",  # names without '%'
    "  ROOT = f32[] parameter(0)\n",  # an instruction named ROOT
    "  ROOT ROOT = f32[] parameter(0)\n",
    "ROOT %r = f32[] constant(1)\n",  # no indent
    "    %r = f32[] constant(1)\n",
    "  %t = (f32[], (s32[2]{0}, (u8[], (pred[])))) tuple(%a, %b)\n",  # a tuple nested 4 deep
    "  %t = (f32[], (s32[2]{0}, (u8[], (pred[], (f16[]))))) tuple(%a)\n",  # 5 deep: not a block line
    "  %t = (f32[], s32[]) tuple(%a), sharding={{replicated}, {maximal device=0}}\n",
    "  %t = () tuple()\n",
    "  %t = (f32[] tuple()\n",  # tuple left open
    "  %x = f32[8,128]{1,0:T(8,128)} copy(%y), metadata={op_name=\"a\" source_file=\"b.py\" source_line=3}\n",
    "  %x = f32[] copy(%y), metadata={op_name=\"a\n",  # a string over lines
    "  %x = f32[] copy(%y), a=\"\"\"\n",  # an odd number of quotes
    "  %x = f32[] copy(%y), calls=%z, y = f32[] negate(%x)\n",  # two instructions on a line
    "  %x = f32[] copy(%y), a=b=c\n",  # '=' without blanks is fine
    "  %x = f32[] copy(%y), a= =b\n",
    "  %x = f32[] copy(%y),\n",  # value continued on the next line
    "  %x = f32[] copy(%y), calls={\n",
    "  %x = f32[] copy(%y), condition=\n",
    "  %x = f32[] copy(%y), a=b \n",
    "  %x = f32[] copy(%y), a=b\t\n",
    "  %x = f32[] copy(%y), a=b\r\n",
    "  %x = f32[] copy(%y)\r\n",
    "  %x = f32[] copy(%y),b\n",
    "  %x = f32[] copy(%y),\"\n",
    "  %x = f32[] copy(%y) \n",
    "  %x = f32[] copy((%y))\n",
    # Operand shapes printed with the operands (before-optimization dumps), tuples among them.
    "  %c = s32[11]{0} conditional(s32[] %i, s32[] %a, () %t), branch_computations={%b0, %b1}\n",
    "  %g = f32[] get-tuple-element((f32[], (s32[], u8[2]{0})) %w), index=0\n",
    "  %g = f32[] get-tuple-element((f32[], (s32[], (u8[], (pred[])))) %w), index=0\n",  # 4 deep
    "  %g = f32[] get-tuple-element((f32[], (s32[], (u8[], (pred[], (f16[]))))) %w), index=0\n",  # 5: refused
    "  %g = f32[] get-tuple-element((f32[] %w), index=0\n",  # a tuple left open
    "  %g = f32[] get-tuple-element((f32[]), s32[]) %w)\n",
    "  %a = f32[] add(f32[] constant(1), f32[] %x)\n",  # an operand written in place: refused
    "  %a = token[] custom-call(token[] after-all()), custom_call_target=\"t\"\n",
    "  %t = (f32[], ()) tuple(f32[] %x, () %y)\n",
    "  %x = f32[] copy(%y)(%z)\n",
    "  %x = f32[] Copy(%y)\n",
    "  %x = f32[] copy-start.1_2(%y)\n",
    "  %x = F32[] copy(%y)\n",
    "  %x = f32[]  copy(%y)\n",
    "  %x  = f32[] copy(%y)\n",
    "  %%x = f32[] copy(%y)\n",
    "  %x% = f32[] copy(%y)\n",
    "  \t%x = f32[] copy(%y)\n",
    "  %x\u2003y = f32[] copy(%y)\n",  # a Unicode blank ends a name, as \s does
    "  %x\u00e9 = f32[] copy(%y)\n",
    "  %x = f32[] copy(%y), metadata={op_name=\"\u00e9\U0001f600\"}\n",
    "  %x = f32[] copy(%y)\n\n",  # a blank line
    "  %x = f32[] copy(%y)\n// a comment\n",
    "  %x = f32[] copy(%y)\n  }\n",  # an indented brace is a line like any other
    "  }x = f32[] copy(%y)\n",
    "",  # an empty body
]


@pytest.mark.parametrize("body", EDGE_BODIES)
@pytest.mark.parametrize("wide", ["", "\u0101", "\U0001f600"], ids=["1-byte", "2-byte", "4-byte"])
def test_edge_cases(compiled, body: str, wide: str) -> None:
    text = f"HloModule m{wide}\n\n{HEADER}{body}}}\n\n"
    pos = text.index(HEADER) + len(HEADER)
    assert compiled(text, pos) == py_block_rows(text, pos)


def test_a_body_without_its_closing_brace(compiled) -> None:
    text = f"{HEADER}  %x = f32[] copy(%y)\n  ROOT %z = f32[] copy(%x)\n"
    pos = len(HEADER)
    assert compiled(text, pos) is None and py_block_rows(text, pos) is None
    assert compiled(text + "}", pos) == py_block_rows(text + "}", pos) == (len(text), [
        ("", "%", "x", "f32[]", "copy", "%y", ""), ("ROOT ", "%", "z", "f32[]", "copy", "%x", "")])


def test_the_rows_are_the_regex_groups(compiled) -> None:
    body = "  ROOT %t = (f32[], s32[]) tuple(%a, %b), sharding={replicated}\n"
    text = HEADER + body + "}\n"
    stop, rows = compiled(text, len(HEADER))
    assert stop == len(HEADER) + len(body)
    assert rows == [("ROOT ", "%", "t", "(f32[], s32[])", "tuple", "%a, %b", ", sharding={replicated}")]
    assert rows == BLOCK_LINE.findall(body)


_SPECIALS = [" ", "=", " = ", '"', "\\", '=\\"', "(", ")", "%", "}", "{", "\n", "ROOT ", ",", "\t", "\r", "[",
             ":", "x", "\u00e9", "\u2003", "\U0001f600", "/*", "\n}", "backend_config={"]


@pytest.mark.parametrize("body, accepted", [
    # Transformer Engine's custom calls print " = " inside backend_config: attribute text, one instruction.
    ('  %c = f32[] custom-call(%a), custom_call_target="te", backend_config="{k = 1, j = 2}"\n', True),
    ('  %c = f32[] custom-call(%a), backend_config="a \\" = \\" b"\n', True),  # escaped quotes inside
    # A second instruction on the line, after a closed string: refused.
    ('  %c = f32[] add(%a, %b), x="s = t", %d = f32[] add(%a, %b)\n', False),
    # A string left open at the line's end (closed on the next line) holding " = ": refused.
    ('  %c = f32[] custom-call(%a), backend_config="k = 1\n  %d = f32[] copy(%c), x="\n', False),
    # A typed-FFI custom call's backend_config printed as an MLIR dictionary (Transformer Engine's fused
    # attention in the corpus's llama and mixtral modules): attribute text, one instruction.
    ('  %c = f32[] custom-call(%a), api_version=API_VERSION_TYPED_FFI, backend_config={attn_heads = 32 : i64, '
     'is_training = true, scale = 1.000000e+00 : f64}\n', True),
    ('  %c = f32[] custom-call(%a), backend_config={a = {b = 1 : i64}, s = "x } = {", c = 2 : i64}, x=1\n', True),
    # ... but not a computation written in place, nor a dictionary left open, nor what follows a closed one.
    ('  %c = f32[] reduce(%a, %z), dimensions={0}, to_apply={%p = f32[] parameter(0)}\n', False),
    ('  %c = f32[] custom-call(%a), backend_config={k = 1 : i64, x=1\n', False),
    ('  %c = f32[] custom-call(%a), backend_config={k = 1 : i64}, %d = f32[] copy(%c)\n', False),
    ('  %c = f32[] custom-call(%a), other_config={k = 1 : i64}\n', False),
])
def test_equals_in_attribute_text(compiled, body: str, accepted: bool) -> None:
    text = HEADER + body + "}\n"
    expected = py_block_rows(text, len(HEADER))
    assert (expected is not None) == accepted
    assert compiled(text, len(HEADER)) == expected
    if accepted:
        assert expected[1] == BLOCK_LINE.findall(body)


_TE_LINE = ('  %attn = (bf16[2,8,4]{2,1,0}, u8[48]{0}) custom-call(%q, %k, %v), custom_call_target="te_fused_attn", '
            'api_version=API_VERSION_TYPED_FFI, backend_config={attn_heads = 4 : i64, is_training = true, '
            'scaling_factor = 1.000000e+00 : f64}, metadata={op_name="jit(f)/attn"}\n')


def test_a_backend_config_dictionary_reads_as_on_the_line_by_line_path() -> None:
    """A body holding a typed-FFI ``backend_config={k = v : type, ...}`` is read whole (``block_rows``); its
    instructions equal those the line-by-line loop reads when a comment line sends the body there."""
    from hloscope.parsers import parse_hlo_text

    body = ("  %q = bf16[2,8,4]{2,1,0} parameter(0)\n  %k = bf16[2,8,4]{2,1,0} parameter(1)\n"
            "  %v = bf16[2,8,4]{2,1,0} parameter(2)\n" + _TE_LINE +
            "  ROOT %o = bf16[2,8,4]{2,1,0} get-tuple-element(%attn), index=0\n")
    header = "HloModule m\n\nENTRY %main (q: bf16[2,8,4], k: bf16[2,8,4], v: bf16[2,8,4]) -> bf16[2,8,4] {\n"
    assert py_block_rows(header + body + "}\n", len(header)) is not None

    def described(text: str) -> list:
        return [(i.name, i.opcode, str(i.shape), i.operands, dict(i.attributes), i.backend_config_text,
                 i.metadata) for i in parse_hlo_text(text).entry.instructions]

    whole = described(header + body + "}\n")
    by_line = described(header + "  // a comment: the line-by-line loop\n" + body + "}\n")
    assert whole == by_line
    attn = whole[3]
    assert attn[5] == "{attn_heads = 4 : i64, is_training = true, scaling_factor = 1.000000e+00 : f64}"
    assert attn[4]["custom_call_target"] == "te_fused_attn"


_TUPLE_OPERAND_LINE = ('  %conditional.9 = s32[11]{0} conditional(s32[] %convert.8, s32[] %add.6, () %tuple.7), '
                       'branch_computations={%region_2.3, %region_4.5}, metadata={op_name="jit(f)/cond"}\n')


def test_operand_shapes_with_tuples_read_as_on_the_line_by_line_path() -> None:
    """A body whose operand lists print tuple shapes (``() %t``, as the corpus's before-optimization dumps and
    gemma3's entry do) is read whole; its instructions equal those the line-by-line loop reads."""
    from hloscope.parsers import parse_hlo_text

    body = ("  %p = (s32[], f32[4]{0}) parameter(0)\n"
            "  %i = s32[] get-tuple-element((s32[], f32[4]{0}) %p), index=0\n"
            "  %t = () tuple()\n"
            "  %c = f32[4]{0} conditional(s32[] %i, () %t, (s32[], f32[4]{0}) %p), "
            "branch_computations={%b0, %b1}, metadata={op_name=\"jit(f)/cond\"}\n"
            "  ROOT %r = f32[4]{0} negate(f32[4]{0} %c)\n")
    branches = "".join(f"%b{k} (a: ()) -> f32[4] {{\n  %a = () parameter(0)\n"
                       f"  ROOT %z = f32[4]{{0}} constant({{{k}, 0, 0, 0}})\n}}\n\n" for k in range(2))
    header = "HloModule m\n\n" + branches + "ENTRY %main (p: (s32[], f32[4])) -> f32[4] {\n"
    whole_text = header + body + "}\n"
    assert py_block_rows(whole_text, len(header)) is not None

    def described(text: str) -> list:
        return [(i.name, i.opcode, str(i.shape), i.operands, dict(i.called_computations), i.is_root, i.line,
                 dict(i.attributes), i.metadata) for i in parse_hlo_text(text).entry.instructions]

    whole = described(whole_text)
    by_line = described(header + "  // a comment: the line-by-line loop\n" + body + "}\n")
    assert [w[:6] + w[7:] for w in whole] == [b[:6] + b[7:] for b in by_line]  # (lines differ by the comment)
    assert whole[3][3] == ("i", "t", "p") and whole[3][4] == {"branch_computations": ("b0", "b1")}


def test_mutated_real_lines(compiled) -> None:
    """Real lines with a few characters inserted or removed: both scanners must agree on each body."""
    lines = [line + "\n" for path in sorted(FIXTURES.glob("*.hlo.txt"))
             for line in path.read_text().splitlines() if " = " in line][:4000]
    lines += [_TE_LINE] * 200  # (no fixture holds a backend_config dictionary)
    lines += [_TUPLE_OPERAND_LINE] * 200  # (nor operand shapes printed with tuples)
    rng = random.Random(20261123)
    accepted = 0
    for case in range(3000):
        body = [rng.choice(lines) for _ in range(rng.randint(1, 6))]
        for _ in range(rng.randint(1, 3)):
            k = rng.randrange(len(body))
            line = body[k]
            at = rng.randrange(len(line))
            if rng.random() < 0.3:
                body[k] = line[:at] + line[at + 1:]
            else:
                body[k] = line[:at] + rng.choice(_SPECIALS) + line[at:]
        text = HEADER + "".join(body) + "}\n"
        expected = py_block_rows(text, len(HEADER))
        assert compiled(text, len(HEADER)) == expected, text
        accepted += expected is not None
    assert 100 < accepted < 2900, accepted  # both outcomes are exercised


@pytest.mark.parametrize("scan", ["compiled", "python"])
def test_bad_arguments(compiled, scan: str) -> None:
    fn = compiled if scan == "compiled" else py_block_rows
    text = HEADER + "  %x = f32[] copy(%y)\n}\n"
    for pos in (0, 3, len(text) + 1, -1):
        with pytest.raises(ValueError, match="does not follow a line break"):
            fn(text, pos)
    if scan == "compiled":
        with pytest.raises(TypeError, match="src must be str"):
            fn(text.encode(), len(HEADER))
        with pytest.raises(TypeError, match="takes 2 arguments"):
            fn(text)


def _built(text: str, monkeypatch, builder) -> list:
    """Every instruction of ``text`` parsed with ``builder`` as ``_hlo_bodies.build_rows`` (None: the Python loop
    builds every row), as comparable tuples; or the error's message."""
    from hloscope.parsers import _hlo_bodies, parse_hlo_text
    from hloscope.parsers._errors import HloParseError

    monkeypatch.setattr(_hlo_bodies, "build_rows", builder)
    try:
        module = parse_hlo_text(text)
    except HloParseError as e:
        return [str(e)]
    from hloscope.hlo import _NOTHING_DECODED, HloInstruction

    return [(c.name, c.root_name, [str(s) for s in c.parameter_shapes],
             [(i.name, i.opcode, str(i.shape), i.operands, dict(i.called_computations), i.is_root, i.line, i.literal,
               i.parameter_number, i.attribute_text, type(i) is HloInstruction, type(i._decoder).__name__,
               "nothing to decode" if i._decoded is _NOTHING_DECODED else i._decoded)
              for i in c.instructions])
            for c in module.computations]


def test_instructions_are_made_in_c_with_every_slot_set() -> None:
    """Where the extension is built, ``build_rows`` makes ``HloInstruction`` objects itself
    (``set_instruction_class``): each slot set as ``__init__`` sets it (the comparisons above), and a class whose
    slots are not those twelve is called instead."""
    from hloscope.parsers import _block_rows, parse_hlo_text

    if _block_rows.build_rows is None:
        pytest.skip("the C extension is not built (or HLOSCOPE_PURE_PYTHON is set)")
    assert _block_rows.instructions_made_in_c
    from hloscope.parsers._block_scan import set_instruction_class

    class Fewer:
        __slots__ = ("name", "opcode")

    class WithDict:  # (a __dict__: attributes set outside slots)
        pass

    assert not set_instruction_class(Fewer, None) and not set_instruction_class(WithDict, None)
    with pytest.raises(TypeError):
        set_instruction_class("HloInstruction", None)
    body = "  %p = f32[] parameter(0)\n  ROOT %r = f32[] negate(%p), metadata={op_name=\"n\"}\n}\n"
    module = parse_hlo_text("HloModule m\n\n" + HEADER + body + "\nENTRY " + HEADER.replace("%c", "%e") + body)
    for inst in (i for c in module.computations for i in c.instructions):
        assert [s for s in inst.__slots__ if not hasattr(inst, s)] == []
        assert (inst.metadata is None) == (inst.opcode == "parameter")
        assert inst.opcode == "parameter" or inst.metadata.op_name == "n"


def test_rows_built_in_c_equal_the_python_loop(monkeypatch, hlo_paths) -> None:
    """``build_rows`` (C) builds the common rows of ``BodyReader._rows``: every corpus and fixture module parses to
    the same instructions (names, shapes, operands, called computations, roots, lines, literals, parameter
    numbers, attribute texts) with it as without it."""
    from hloscope.parsers._block_rows import build_rows

    if build_rows is None:
        pytest.skip("the C extension is not built (or HLOSCOPE_PURE_PYTHON is set)")
    paths = hlo_paths(3_000_000)
    assert len(paths) > 300
    for path in paths:
        text = path.read_text(encoding="utf-8", errors="replace")
        assert _built(text, monkeypatch, build_rows) == _built(text, monkeypatch, None), path.name


@pytest.mark.parametrize("body", [
    "  %p = f32[] parameter(0)\n  %q = f32[] parameter(1)\n  ROOT %r = f32[] add(%p, %q)\n",
    "  %p = f32[] parameter(+1)\n  ROOT %r = f32[] negate(%p)\n",  # a number int() reads: left to Python
    "  %p = f32[] parameter(0)\n  ROOT %r = f32[] negate(%p)\n  ROOT %s = f32[] negate(%p)\n",  # a second ROOT
    "  %p = f32[] parameter(0)\n  %c = f32[] constant(1.5)\n  ROOT %r = f32[] add(%p, %c)\n",
    "  %p = f32[] parameter(0)\n  %c = f32[] constant(%p)\n  ROOT %r = f32[] add(%p, %c)\n",  # (operands first)
    "  %p = f32[] parameter(0)\n  ROOT %r = f32[] add(%p, /*index=1*/%p)\n",  # a comment in the operand list
    "  %p = f32[] parameter(0)\n  ROOT %r = f32[] add(%p,%p)\n",  # no blank after ','
    "  %p = f32[] parameter(0)\n  ROOT %r = f32[] add(%p, %p, %)\n",
    "  %p = f32[] parameter(0)\n  ROOT %r = f32[] frobnicate(%p)\n",  # an opcode hloscope does not know
    "  %p = f32[] parameter(0)\n  ROOT %r = f32[] add(%p, %missing)\n",  # an operand that names nothing
    "  %p = f32[] parameter(0)\n  ROOT %r = f32[] negate(%p), metadata={op_name=\"50%\"}\n",
    "  %p = f32[] parameter(0)\n  ROOT %r = f32[] negate(%p), frontend_attributes={a=\"=%\"}\n",
    "  %p = f32[] parameter(99999999999999999999)\n  ROOT %r = f32[] negate(%p)\n",
    # names printed without '%'
    "  p = f32[] parameter(0)\n  q = f32[] parameter(1)\n  ROOT r = f32[] add(p, q)\n",
    "  p = f32[] parameter(0)\n  ROOT r = f32[] add(p,p)\n",
    "  p = f32[] parameter(0)\n  ROOT r = f32[] add(p , p)\n",
    "  p = f32[] parameter(0)\n  ROOT r = f32[] add(p, p, )\n",
    "  p = f32[] parameter(0)\n  ROOT r = f32[] add(, p)\n",
    "  p = f32[] parameter(0)\n  ROOT r = f32[] add(p,  p)\n",
    "  p = f32[] parameter(0)\n  ROOT r = f32[] add(f32[] p, f32[] p)\n",  # operand shapes: operand_list
    # operand shapes with '%' names (before-optimization dumps): plain array shapes in C, others in Python
    "  %p = f32[8]{0} parameter(0)\n  ROOT %r = f32[8]{0} add(f32[8]{0} %p, f32[8]{0} %p)\n",
    "  %p.1-x = f32[8]{0} parameter(0)\n  %q = s32[] parameter(1)\n"
    "  ROOT %r = (f32[8]{0}, s32[]) tuple(f32[8]{0} %p.1-x, s32[] %q)\n",
    "  %p = f32[8]{0} parameter(0)\n  ROOT %r = f32[8]{0} negate(f32[8]{} %p)\n",
    "  %p = f32[8,2]{1,0} parameter(0)\n  ROOT %r = f32[8,2]{1,0} negate(f32[8,]{1,0} %p)\n",
    "  %p = f32[8]{0} parameter(0)\n  ROOT %r = f32[8]{0} add(f32[8]{0:T(8)} %p, f32[8]{0} %p)\n",  # tiled
    "  %p = f32[8]{0} parameter(0)\n  ROOT %r = f32[8]{0} add(f32[8] %p,f32[8] %p)\n",
    "  %p = f32[8]{0} parameter(0)\n  ROOT %r = f32[8]{0} add(f32[8]  %p, f32[8] %p)\n",
    "  %p = f32[8]{0} parameter(0)\n  ROOT %r = f32[8]{0} add(f32[8] %p, f32[8] %)\n",
    "  %p = f32[8]{0} parameter(0)\n  ROOT %r = f32[8]{0} add(f32[8] %p, %p)\n",  # mixed
    "  %p = f32[8]{0} parameter(0)\n  ROOT %r = f32[8]{0} add(F32[8] %p, f32[8] %p)\n",
    "  %p = f32[8]{0} parameter(0)\n  ROOT %r = f32[8]{0} add(f32[8] %p, f32[8] %p )\n",
    "  %p = f32[8]{0} parameter(0)\n  ROOT %r = f32[8]{0} add(f32[8] %p, f32[8] %p/*x*/)\n",
    "  %p\u00e9 = f32[8]{0} parameter(0)\n  ROOT %r = f32[8]{0} add(f32[8] %p\u00e9, f32[8] %p\u00e9)\n",
    "  %p = f32[8]{0} parameter(0)\n  ROOT %r = f32[8]{0} add(f32[8] %p, f32[8]\u2003%p)\n",
    "  %p = f32[8]{0} parameter(0)\n  ROOT %r = f32[8]{0} add(f32[8] %p, f32[8] %missing)\n",
    "  p\u00e9 = f32[] parameter(0)\n  ROOT r = f32[] add(p\u00e9, p\u00e9)\n",
    "  p = f32[] parameter(0)\n  ROOT r = f32[] add(p,\u2003p)\n",
    # called computations, in the forms _called reads
    "  %p = f32[8] parameter(0)\n  %z = f32[] constant(0)\n  ROOT %r = f32[] reduce(%p, %z), dimensions={0}, "
    "to_apply=%add\n",
    "  %p = f32[8] parameter(0)\n  %z = f32[] constant(0)\n  ROOT %r = f32[] reduce(%p, %z), dimensions={0}, "
    "to_apply=add\n",
    "  %p = f32[8] parameter(0)\n  %z = f32[] constant(0)\n  ROOT %r = f32[] reduce(%p, %z), dimensions={0},  "
    "to_apply=%add\n",
    "  %p = f32[8] parameter(0)\n  ROOT %c = f32[8] call(%p), to_apply=%neg, metadata={op_name=\"a,calls=add\"}\n",
    "  %p = f32[8] parameter(0)\n  ROOT %c = f32[8] call(%p), to_apply=%neg, backend_config=\"x=%y\"\n",
    "  %p = f32[8] parameter(0)\n  ROOT %c = f32[8] custom-call(%p), custom_call_target=\"t\", "
    "called_computations={%neg, %add}\n",
    "  %p = f32[8] parameter(0)\n  ROOT %c = f32[8] custom-call(%p), custom_call_target=\"t\", "
    "called_computations={}\n",
    "  %p = f32[8] parameter(0)\n  ROOT %c = f32[8] custom-call(%p), custom_call_target=\"t\"\n",
    "  %p = f32[8] parameter(0)\n  ROOT %c = f32[8] custom-call(%p), called_computations={%neg\n",
    "  %q = pred[] parameter(1)\n  %p = f32[8] parameter(0)\n  ROOT %c = f32[8] conditional(%q, %p, %p), "
    "true_computation=neg, false_computation=%neg\n",
    "  %q = s32[] parameter(1)\n  %p = f32[8] parameter(0)\n  ROOT %c = f32[8] conditional(%q, %p, %p), "
    "branch_computations={%neg, neg}\n",
    "  %p = f32[8] parameter(0)\n  ROOT %c = f32[8] fusion(%p), kind=kLoop, calls=%neg, calls=%add\n",
    "  %p = f32[8] parameter(0)\n  ROOT %c = f32[8] fusion(%p), kind=kLoop, calls=%missing\n",
    "  %p = f32[8] parameter(0)\n  ROOT %c = f32[8] negate(%p), to_apply=%add\n",  # a key on an op that never calls
])
def test_rows_built_in_c_edge_cases(monkeypatch, body: str) -> None:
    from hloscope.parsers._block_rows import build_rows

    if build_rows is None:
        pytest.skip("the C extension is not built (or HLOSCOPE_PURE_PYTHON is set)")
    callees = ("%add (a: f32[], b: f32[]) -> f32[] {\n  %a = f32[] parameter(0)\n  %b = f32[] parameter(1)\n"
               "  ROOT %s = f32[] add(%a, %b)\n}\n\n%neg (x: f32[8]) -> f32[8] {\n  %x = f32[8] parameter(0)\n"
               "  ROOT %n = f32[8] negate(%x)\n}\n\n")
    text = "HloModule m\n\n" + callees + "ENTRY %e (p: f32[], q: f32[]) -> f32[] {\n" + body + "}\n"
    assert _built(text, monkeypatch, build_rows) == _built(text, monkeypatch, None)


def test_rows_built_in_c_equal_the_python_loop_on_xla_test_texts(monkeypatch, corpus_dir: Path) -> None:
    """The same on XLA's own test texts (one record in four of the corpus's ``*.jsonl``): hand-written HLO mixes
    names with and without ``%``, called computations in every form, operands the line-by-line loop reads."""
    import json

    from hloscope.parsers._block_rows import build_rows

    if build_rows is None:
        pytest.skip("the C extension is not built (or HLOSCOPE_PURE_PYTHON is set)")
    checked = 0
    for path in sorted(corpus_dir.glob("hlo_*/*.jsonl")):
        with open(path, encoding="utf-8") as f:
            for k, line in enumerate(f):
                if k % 4:
                    continue
                text = json.loads(line)["text"]
                assert _built(text, monkeypatch, build_rows) == _built(text, monkeypatch, None), f"{path.name}:{k}"
                checked += 1
    assert checked > 1000, checked


_BUILD_SPECIALS = [" ", ",", ", ", "=", '"', "\\", "{", "}", "(", ")", "%", ", %", "to_apply=", "calls=", ", calls=%",
                   "={%", "=%", "\u00e9", "\U0001f600", "ROOT ", "parameter(", "constant(", "/*", "\n", "1", "-"]


def test_rows_built_in_c_equal_the_python_loop_on_mutated_modules(monkeypatch) -> None:
    """Fixture modules with a few characters inserted or removed on a few lines: parsed with ``build_rows`` and
    without, the same instructions (or the same error)."""
    from hloscope.parsers._block_rows import build_rows

    if build_rows is None:
        pytest.skip("the C extension is not built (or HLOSCOPE_PURE_PYTHON is set)")
    texts = [t for t in (p.read_text() for p in sorted(FIXTURES.glob("*.hlo.txt"))) if len(t) < 200_000]
    rng = random.Random(20261125)
    for case in range(1000):
        lines = rng.choice(texts).split("\n")
        for _ in range(rng.randint(1, 4)):
            k = rng.randrange(len(lines))
            line, at = lines[k], rng.randrange(len(lines[k]) + 1)
            lines[k] = (line[:at] + line[at + 1:] if rng.random() < 0.3 and line
                        else line[:at] + rng.choice(_BUILD_SPECIALS) + line[at:])
        text = "\n".join(lines)
        assert _built(text, monkeypatch, build_rows) == _built(text, monkeypatch, None), case
