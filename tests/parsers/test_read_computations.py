"""The compiled reader of whole computations (``read_computations`` in ``_block_scan.c``) against the parser's
own path, its specification: every module parses to the same computations and instructions -- names, lines,
roots, parameter shapes, name/opcode/shape columns, operands, called computations, attributes, metadata -- and
every malformed text to the same error, with the reader on and off. Over every fixture, the public corpus, and
hand-made texts for each place where the reader hands a computation back to the parser.

When the extension is missing these tests skip, except where a C compiler is on the PATH (as in
test_block_rows.py).
"""

from __future__ import annotations

import json
from itertools import chain
from pathlib import Path

import pytest

from hloscope._compiled import compiled
from hloscope.errors import HloParseError
from hloscope.parsers import _hlo_text, parse_hlo_text

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "hlo"


@pytest.fixture(scope="module")
def reader(compiled_twin):
    return compiled_twin(compiled("hloscope.parsers._block_scan", "read_computations"), "hloscope.parsers._block_scan")


def _describe(text: str) -> tuple:
    """Everything a parse gives, as plain values (or the error's text)."""
    try:
        m = parse_hlo_text(text)
    except HloParseError as e:
        return ("error", str(e))
    comps = []
    for comp in m.computations:
        insts = []
        for i in comp.instructions:
            try:
                attrs = sorted((k, repr(v)) for k, v in i.attributes.items())
                md = repr(i.metadata)
            except HloParseError as e:
                attrs, md = str(e), None
            insts.append((i.name, i.opcode, str(i.shape), i.operands, dict(i.called_computations), i.is_root, i.line,
                          i.literal, i.parameter_number, attrs, md))
        columns = (comp.names, comp.opcodes, all(a is i.shape for a, i in zip(comp.shapes, comp.instructions)),
                   len(comp.shapes),  # (the reader sets them from the rows; else they come from the instructions)
                   comp.name_index())  # (the reader makes the entry's; else it is made from the names)
        comps.append((comp.name, comp.root_name, comp.is_entry, tuple(map(str, comp.parameter_shapes)), comp.line,
                       insts, columns))
    return m.name, m.entry.name, sorted(m.unknown_opcodes), comps


def _both(monkeypatch, reader, text: str) -> tuple[tuple, int]:
    """The parse of ``text`` with the reader and without it, and how many computations the reader made."""
    made = []

    def counting(*args):
        before = len(args[14])
        found = reader(*args)
        made.append(len(args[14]) - before)
        return found

    monkeypatch.setattr(_hlo_text, "read_computations", counting)
    with_reader = _describe(text)
    monkeypatch.setattr(_hlo_text, "read_computations", None)
    without = _describe(text)
    assert with_reader == without
    return with_reader, sum(made)


@pytest.mark.parametrize("path", sorted(FIXTURES.glob("*.hlo.txt")), ids=lambda p: p.name)
def test_every_fixture(monkeypatch, reader, path: Path) -> None:
    _, made = _both(monkeypatch, reader, path.read_text())
    assert made > 0  # (every fixture is printed by XLA: the reader reads some of it)


def test_corpus(monkeypatch, reader, corpus_dir: Path) -> None:
    dirs = [corpus_dir / d for d in ("hlo_cpu", "hlo_gpu", "hlo_tpu", "hlo_generic")]
    texts = made = 0
    for path in sorted(chain.from_iterable(d.glob(g) for g in ("*.txt", "*.hlo") for d in dirs)):
        if path.stat().st_size > 1_500_000:
            continue
        _, n = _both(monkeypatch, reader, path.read_text(encoding="utf-8", errors="replace"))
        texts += 1
        made += n
    for path in sorted(chain.from_iterable(d.glob("*.jsonl") for d in dirs))[:3]:
        for line in path.read_text().splitlines()[:150]:
            _, n = _both(monkeypatch, reader, json.loads(line)["text"])
            texts += 1
            made += n
    assert texts > 50 and made > 1000


_FUSED = """HloModule m, entry_computation_layout={(f32[8]{0}, f32[8]{0})->f32[8]{0}}

%fused (p.0: f32[8], p.1: f32[8]) -> f32[8] {
  %p.1 = f32[8]{0} parameter(1)
  %p.0 = f32[8]{0} parameter(0)
  ROOT %add = f32[8]{0} add(%p.0, %p.1)
}

ENTRY %main (a: f32[8], b: f32[8]) -> f32[8] {
  %a = f32[8]{0} parameter(0)
  %b = f32[8]{0} parameter(1)
  ROOT %f = f32[8]{0} fusion(%a, %b), kind=kLoop, calls=%fused
}
"""


def test_entry_name_index_made_by_the_reader(monkeypatch, reader) -> None:
    """The reader hands the entry its name -> index map (the cost walk's operand lookups), the map the names make;
    other computations make theirs from their names when asked."""
    monkeypatch.setattr(_hlo_text, "read_computations", reader)
    m = parse_hlo_text(_FUSED)
    assert m.entry._index == {"a": 0, "b": 1, "f": 2}
    assert m.computation("fused")._index is None and m.computation("fused").name_index() == {"p.1": 0, "p.0": 1,
                                                                                                 "add": 2}


def test_reads_whole_module(monkeypatch, reader) -> None:
    (_, entry, _, comps), made = _both(monkeypatch, reader, _FUSED)
    assert made == 2 and entry == "main"
    fused = comps[0]
    assert fused[:5] == ("fused", "add", False, ("f32[8]", "f32[8]"), 3)  # parameters by number, not by line
    assert [i[6] for i in fused[5]] == [4, 5, 6]  # lines


@pytest.mark.parametrize("text, made", [
    # a header without a signature, as XLA prints a module before optimization; a close with a comment
    ("e {\n  p = f32[2] parameter(0)\n  ROOT n = f32[2] negate(p)\n} // e\n", 1),
    ("ENTRY e {\n  p = f32[2] parameter(0)\n  ROOT n = f32[2] negate(p)\n}\n", 1),
    ("ENTRY %e {\n  p = f32[2] parameter(0)\n  ROOT n = f32[2] negate(p)\n}\n", 1),
    # a computation named ENTRY is not the entry, but "ENTRY {" is no header: both Python's
    ("ENTRY {\n  p = f32[2] parameter(0)\n}\n", 0),
    # attributes after a close with a comment: Python's
    ("ENTRY e {\n  p = f32[2] parameter(0)\n} // e\n, execution_thread=\"main\"\n", 0),
    # a row build_rows leaves (operand comments) is handed to Python's loop, the rest read
    ("ENTRY %e (a: f32[2]) -> f32[2] {\n  %a = f32[2]{0} parameter(0)\n"
     "  ROOT %t = (f32[2]{0}, f32[2]{0}) tuple(%a, /*index=1*/%a)\n}\n", 1),
    # an unknown opcode: that row built by Python's loop, kept and flagged
    ("ENTRY %e (a: f32[2]) -> f32[2] {\n  %a = f32[2]{0} parameter(0)\n  ROOT %n = f32[2]{0} frobnicate(%a)\n}\n", 1),
    # a shape XLA cannot print, a duplicate name, an operand of another body: Python's, with its error
    ("ENTRY %e (a: f32[2]) -> f32[2] {\n  %a = f32[2]{0} parameter(0)\n  ROOT %n = f32[-2]{0} negate(%a)\n}\n", 0),
    ("ENTRY %e (a: f32[2]) -> f32[2] {\n  %a = f32[2]{0} parameter(0)\n  ROOT %a = f32[2]{0} negate(%a)\n}\n", 0),
    ("ENTRY %e (a: f32[2]) -> f32[2] {\n  %a = f32[2]{0} parameter(0)\n  ROOT %n = f32[2]{0} negate(%b)\n}\n", 0),
    # the same in a body that is not the entry (no index made there: the name table's own checks), after one read
    ("%f (a: f32[2]) -> f32[2] {\n  %a = f32[2]{0} parameter(0)\n  ROOT %n = f32[2]{0} negate(%a)\n}\n\n"
     "%g (a: f32[2]) -> f32[2] {\n  %a = f32[2]{0} parameter(0)\n  ROOT %a = f32[2]{0} negate(%a)\n}\n", 1),
    ("%f (a: f32[2]) -> f32[2] {\n  %a = f32[2]{0} parameter(0)\n  ROOT %n = f32[2]{0} negate(%a)\n}\n\n"
     "%g (a: f32[2]) -> f32[2] {\n  %b = f32[2]{0} parameter(0)\n  ROOT %m = f32[2]{0} add(%b, %n)\n}\n", 1),
    ("%g (a: f32[2]) -> f32[2] {\n  %b = f32[2]{0} parameter(0)\n  ROOT %m = f32[2]{0} add(f32[2]{0} %b, "
     "f32[2]{0} %c)\n}\n", 0),
    # a parameter number beyond a C long (Python's int reads it)
    ("ENTRY %e (a: f32[]) -> f32[] {\n  %a = f32[] parameter(99999999999999999999)\n  ROOT %n = f32[] negate(%a)\n}\n",
     0),
    # two ROOTs; an empty body; no close: Python's, with its error
    ("ENTRY %e (a: f32[2]) -> f32[2] {\n  ROOT %a = f32[2]{0} parameter(0)\n  ROOT %n = f32[2]{0} negate(%a)\n}\n", 0),
    ("ENTRY %e (a: f32[2]) -> f32[2] {\n}\n", 0),
    ("ENTRY %e (a: f32[2]) -> f32[2] {\n  %a = f32[2]{0} parameter(0)\n", 0),
    # a line the scanner refuses (a comment in the body)
    ("ENTRY %e (a: f32[2]) -> f32[2] {\n  // c\n  ROOT %a = f32[2]{0} parameter(0)\n}\n", 0),
])
def test_hands_back_what_it_does_not_read(monkeypatch, reader, text: str, made: int) -> None:
    _, n = _both(monkeypatch, reader, text)
    assert n == made


def test_long_bodies_stay_lazy(monkeypatch, reader) -> None:
    """A body of ``_LAZY_MIN_LINES`` rows or more, other than the entry's, is left to ``_block`` (a LazyBody);
    the entry is read whole however long."""
    rows = _hlo_text._LAZY_MIN_LINES
    body = "".join(f"  %n{k} = f32[2]{{0}} negate(%n{k - 1})\n" for k in range(1, rows))
    text = (f"%long (n0: f32[2]) -> f32[2] {{\n  %n0 = f32[2]{{0}} parameter(0)\n{body}}}\n\n"
            f"ENTRY %e (n0: f32[2]) -> f32[2] {{\n  %n0 = f32[2]{{0}} parameter(0)\n{body}"
            f"  ROOT %c = f32[2]{{0}} call(%n{rows - 1}), to_apply=%long\n}}\n")
    _, made = _both(monkeypatch, reader, text)
    assert made == 1
    monkeypatch.setattr(_hlo_text, "read_computations", reader)
    m = parse_hlo_text(text)
    assert not m.computation("long").is_built and m.entry.is_built


@pytest.mark.parametrize("parameter, read", [
    ("p: (f32[2], s32[])", True),  # a while loop's body: one tuple parameter
    ("p: (f32[2]{0}, /*index=1*/(s32[], f32[2]))", True),  # nested, with XLA's index comment
    ("p: (f32[2], s32[]), q: f32[2]", False),  # two parameters: maybe a fusion's
    ("p: f32[2]", False),
])
def test_long_loop_bodies_are_read(monkeypatch, reader, parameter: str, read: bool) -> None:
    """A long body whose header reads one tuple-shaped parameter (a while loop's body or condition, which every
    cost walk builds) is read by the reader like a short one; other long bodies are handed back to ``_block``."""
    rows = _hlo_text._LAZY_MIN_LINES
    chain = "".join(f"  %n{k} = f32[2]{{0}} negate(%n{k - 1})\n" for k in range(1, rows))
    params = "  %p = (f32[2]{0}, s32[]) parameter(0)\n  %n0 = f32[2]{0} get-tuple-element(%p), index=0\n"
    if ", q: " in parameter:
        params += "  %q = f32[2]{0} parameter(1)\n"
    elif not parameter.startswith("p: ("):
        params = "  %n0 = f32[2]{0} parameter(0)\n"
    text = (f"%long ({parameter}) -> f32[2] {{\n{params}{chain}}}\n\n"
            "ENTRY %e (x: f32[2]) -> f32[2] {\n  ROOT %x = f32[2]{0} parameter(0)\n}\n")
    _, made = _both(monkeypatch, reader, text)
    assert made == (2 if read else 1)


def test_blank_lines_and_errors_after(monkeypatch, reader) -> None:
    """Lines are counted across the blank lines the reader skips, and an error after what it read points at the
    same place."""
    text = _FUSED.replace("\n\n", "\n\n\n  \n") + "\n\n}\n"
    (kind, message), _ = _both(monkeypatch, reader, text)
    assert kind == "error" and message.startswith("<string>:20:1: ")  # (13 lines, 4 blank ones added, 2 after)


def test_one_string_per_distinct_shape_text_and_opcode(monkeypatch, reader) -> None:
    """The reader makes one string object per distinct shape text and opcode of a read (a table of them, grown
    as it fills: 3,000 distinct shapes here), equal to the parser's own strings."""
    lines = [f"  %p{k} = f32[{k + 1}]{{0}} parameter({k})" for k in range(3000)]
    lines += [f"  %n{k} = f32[{k + 1}]{{0}} negate(%p{k})" for k in range(3000)]
    lines.append("  ROOT %t = (f32[1]{0}, f32[2]{0}) tuple(%n0, %n1)")
    text = ("HloModule m\n\n%other (x: f32[7]) -> f32[7] {\n  %x = f32[7]{0} parameter(0)\n"
            "  ROOT %y = f32[7]{0} negate(%x)\n}\n\nENTRY %main () -> (f32[1], f32[2]) {\n"
            + "\n".join(lines) + "\n}\n")
    (_, _, _, comps), made = _both(monkeypatch, reader, text)
    assert made == 2
    monkeypatch.setattr(_hlo_text, "read_computations", reader)
    m = parse_hlo_text(text)
    other, entry = m.computation("other"), m.entry
    assert entry.opcodes[3000] == other.opcodes[1] == "negate" and entry.opcodes[3000] is other.opcodes[1]
    assert entry.instructions[3006].opcode is entry.instructions[5999].opcode
    assert entry.instructions[6].shape is entry.instructions[3006].shape  # (one shape per text, as before)


@pytest.fixture(scope="module")
def c_called_names(compiled_twin):
    return compiled_twin(compiled("hloscope.parsers._block_scan", "called_names"), "hloscope.parsers._block_scan")


def _bodies(text: str) -> list[tuple]:
    return [comp.instructions for comp in parse_hlo_text(text).computations]


def test_called_names_equal_python_on_fixtures_and_corpus(c_called_names, corpus_dir: Path) -> None:
    dirs = [corpus_dir / d for d in ("hlo_cpu", "hlo_gpu", "hlo_tpu", "hlo_generic")]
    paths = sorted(FIXTURES.glob("*.hlo.txt")) + sorted(
        p for p in chain.from_iterable(d.glob(g) for g in ("*.txt", "*.hlo") for d in dirs)
        if p.stat().st_size <= 1_500_000)
    nonempty = 0
    for path in paths:
        try:
            bodies = _bodies(path.read_text(encoding="utf-8", errors="replace"))
        except HloParseError:
            continue  # (a file of several modules, a test text of XLA's that is meant to fail)
        expected = _hlo_text.py_called_names(bodies)
        assert c_called_names(bodies) == expected, path.name
        nonempty += bool(expected)
    assert nonempty > 50


def test_called_names_by_hand(c_called_names) -> None:
    bodies = _bodies(_FUSED)
    # The entry's fusion calls %fused; the fused computation calls nothing.
    assert _hlo_text.py_called_names(bodies) == {"fused"}
    assert c_called_names(bodies) == {"fused"}
    assert c_called_names([]) == set()


def test_called_names_leaves_other_objects_to_python(c_called_names) -> None:
    class Inst:
        def __init__(self, calls):
            self.called_computations = calls

    # Objects of another class are read by attribute; a dict of tuples is read as the parser makes it.
    assert c_called_names([(Inst({"calls": ("a", "b")}), Inst({}))]) == {"a", "b"}
    # Anything else -- a value not a tuple, a mapping not a dict, a body not a tuple -- is Python's to read.
    assert c_called_names([(Inst({"calls": ["a"]}),)]) is None
    assert c_called_names([(Inst(type("M", (), {})()),)]) is None
    assert c_called_names([[Inst({})]]) is None
    assert _hlo_text.py_called_names([(Inst({"calls": ["a"]}),)]) == {"a"}


def test_parameters_printed_out_of_order(monkeypatch, reader) -> None:
    """``parameter_shapes`` are by parameter number whatever order the body prints them in (an entry may print
    thousands in another order): the reader's sort gives the parser's own."""
    n = 300
    order = [(7 * k) % n for k in range(n)]  # (every number once, scattered)
    header = ", ".join(f"p{k}: f32[{k + 1}]" for k in range(n))
    body = "\n".join(f"  %p{k} = f32[{k + 1}]{{0}} parameter({k})" for k in order)
    text = (f"HloModule m\n\nENTRY %main ({header}) -> f32[1] {{\n{body}\n"
            f"  ROOT %r = f32[1]{{0}} add(%p0, %p0)\n}}\n")
    described, made = _both(monkeypatch, reader, text)
    assert made == 1
    assert described[3][0][3] == tuple(f"f32[{k + 1}]" for k in range(n))


def _mixed_body(entry: bool, operand: str = "%c", name: str = "%d", comment: str = "/*5*/") -> str:
    """A module whose computation (the entry, or one the entry calls) holds a row the compiled builder leaves to
    Python's loop (a tuple whose operands carry a comment, ``comment``, other than XLA's ``/*index=5*/``, which the
    builder reads itself) between rows it builds itself; ``operand`` is that row's second operand, ``name`` the
    name of the row after it."""
    body = f"""  %a = f32[8]{{0}} parameter(0)
  %b = f32[8]{{0}} add(%a, %a)
  %c = f32[8]{{0}} multiply(%b, %a)
  %t = (f32[8]{{0}}, f32[8]{{0}}, f32[8]{{0}}, f32[8]{{0}}, f32[8]{{0}}, /*index=5*/f32[8]{{0}}) tuple(%a, {operand}, %c, %b, %a, {comment}%c)
  {name} = f32[8]{{0}} get-tuple-element(%t), index=1
  ROOT %e = f32[8]{{0}} add(%d, %c)
"""
    head = "HloModule m, entry_computation_layout={(f32[8]{0})->f32[8]{0}}\n\n"
    if entry:
        return head + f"ENTRY %main (a: f32[8]) -> f32[8] {{\n{body}}}\n"
    return head + (f"%inner (a: f32[8]) -> f32[8] {{\n{body}}}\n\n"
                   "ENTRY %main (x: f32[8]) -> f32[8] {\n  %x = f32[8]{0} parameter(0)\n"
                   "  ROOT %r = f32[8]{0} call(%x), to_apply=%inner\n}\n")


def _watch_rows_into(monkeypatch) -> list[int]:
    """The row each call of Python's row loop (``BodyReader._rows_into``) starts at, as the parses go."""
    from hloscope.parsers import _hlo_bodies

    starts: list[int] = []
    rows_into = _hlo_bodies.BodyReader._rows_into

    def watching(self, matches, lineno, start, *args, **kwargs):
        starts.append(start)
        return rows_into(self, matches, lineno, start, *args, **kwargs)

    monkeypatch.setattr(_hlo_bodies.BodyReader, "_rows_into", watching)
    return starts


@pytest.mark.parametrize("entry", [True, False], ids=["entry", "called"])
@pytest.mark.parametrize("operand, name, parses", [
    ("%c", "%d", True),
    ("%nowhere", "%d", False),  # (the row Python built names no instruction: only its own lookup can tell)
    ("%e", "%d", True),  # (a row defined later in the body: still one of its names)
    ("%c", "%b", False),  # (a name given twice)
], ids=["valid", "undefined-in-python-row", "later-row", "duplicate"])
def test_rows_built_by_python_inside_a_read_body(monkeypatch, reader, entry, operand, name, parses) -> None:
    """The body's checks where the compiled builder built some rows and Python's loop the others: the operands of
    the rows Python built are looked up by name (the builder's own rows are proven by its name table), and the
    parse -- or its error -- is the parser's own."""
    built_by_python = _watch_rows_into(monkeypatch)
    described, made = _both(monkeypatch, reader, _mixed_body(entry, operand, name))
    assert (described[0] != "error") == parses
    if parses:
        assert made == (1 if entry else 2)
    assert 3 in built_by_python  # (the tuple row: Python's loop took the body over there)


@pytest.mark.parametrize("entry", [True, False], ids=["entry", "called"])
def test_operands_with_xla_index_comments_are_read_by_the_builder(monkeypatch, reader, entry) -> None:
    """An operand list as XLA prints it past five operands (``%a, %b, %c, %d, %e, /*index=5*/%f``: a deviceless TPU
    step's fusions and its root tuple) is read by the compiled builder, not left to Python's loop, and the parse is
    the parser's own; a comment of another form is still left to the loop (above)."""
    built_by_python = _watch_rows_into(monkeypatch)
    described, made = _both(monkeypatch, reader, _mixed_body(entry, comment="/*index=5*/"))
    assert described[0] != "error"
    assert made == (1 if entry else 2)
    assert 3 not in built_by_python  # (the reader built the tuple row: it handed nothing over to the loop there)

