"""hloscope's reading of real HLO texts against XLA's own parser (jaxlib's ``xla_client``), in the same process.

For each text: the same computations in the same order, the same instructions (names, in order) per
computation, the same opcode, the same operand list (by name), the same result shape (element type and dims,
tuples element by element; layouts are not compared here) and the same called computations.

What XLA does differently, and how the comparison allows for it (nothing else is mapped):

* XLA's parser turns the async forms ``<op>-start``/``-update``/``-done`` (``slice-start``, ``call-start``, ...)
  into ``async-start``/``async-update``/``async-done`` wrapping ``<op>`` in a new computation
  ``async_wrapped[.N]``. hloscope keeps the opcode as printed and makes no computation: such an opcode is
  compared by its suffix, and XLA's ``async_wrapped*`` computations that the text does not hold are dropped.
* XLA prints opcodes from its ``HloOpcode`` enum; the printed spelling differs from the C++ name for nine of
  them (``kCos`` -> ``cosine``, ...): ``_XLA_SPELLING``.
* XLA keeps names unique module-wide: on a text whose instruction names repeat across computations (the XLA
  CPU benchmark ``xnn.*.optimized.hlo`` files; compiler dumps never repeat) it renames the repeats
  (``a`` -> ``a.1``). hloscope keeps names as printed (they are unique per computation, which is what operands
  refer to): an XLA name is matched to hloscope's name at the same position only when it is that name plus a
  ``.N`` suffix, and operands are compared through that mapping. Every other name compares exactly.

Inputs: ``fixtures/hlo/*.hlo.txt``, the dump dir's post-optimization module, and from the public corpus
(skipped when absent) the ``hlo_gpu`` texts derived from real XSpace captures, the XLA CPU benchmark modules that
XLA accepts, and the pytorch/xla TPU dumps' post-optimization modules.
"""

from __future__ import annotations

import csv
import re
from pathlib import Path

import pytest

from hloscope.hlo import HloModule, Shape
from hloscope.parsers import parse_hlo_text
from hloscope.parsers._hlo_attrs import ASYNC_FORMS, KNOWN_OPCODES
from hloscope.parsers._hlo_re import parse_shape

xla_client = pytest.importorskip("jax._src.lib").xla_client

REPO = Path(__file__).resolve().parents[2]
CORPUS = REPO.parent / "shared" / "corpus"

#: ``HloOpcode`` enum members whose printed name is not the kebab-case of the C++ name.
_XLA_SPELLING = {
    "kCos": "cosine",
    "kSin": "sine",
    "kClz": "count-leading-zeros",
    "kExp": "exponential",
    "kExpm1": "exponential-minus-one",
    "kLog1p": "log-plus-one",
    "kOptimizationBarrier": "opt-barrier",
    "kPopulationCount": "popcnt",
    "kTopK": "topk",
}
_ASYNC = ("async-start", "async-update", "async-done")
#: ``key=%name`` / ``key={%a, %b}`` attributes naming called computations, as XLA prints them.
_CALLED = re.compile(
    r"\b(?:calls|to_apply|condition|body|branch_computations|true_computation|false_computation|select|scatter)"
    r"=(%[^\s,{}]+|\{[^}]*\})"
)


def _printed(member: str) -> str:
    return _XLA_SPELLING.get(member) or re.sub(r"(?<!^)(?=[A-Z])", "-", member[1:]).lower()


def _hlo_opcode_enum():
    m = xla_client.hlo.hlo_module_from_text("HloModule m\nENTRY e {\n  ROOT p = f32[] parameter(0)\n}\n")
    return type(next(iter(m.computations())).instructions()[0].opcode)


def _corpus_ok(kind: str, pattern: str) -> list[Path]:
    """Corpus files of ``kind`` matching ``pattern`` that XLA's parser accepts (per ``PARSE_CHECK.tsv``)."""
    if not (CORPUS / "PARSE_CHECK.tsv").is_file():
        return []
    with open(CORPUS / "PARSE_CHECK.tsv", newline="", encoding="utf-8") as f:
        ok = {row["file"] for row in csv.DictReader(f, delimiter="\t") if row["xla_parser_jaxlib_0.10.2"] == "OK"}
    return sorted(p for p in (CORPUS / kind).glob(pattern) if p.name in ok)


def _param(p: Path):
    marks = [pytest.mark.slow] if p.stat().st_size > 1_000_000 else []
    return pytest.param(p, id=p.name if p.is_relative_to(CORPUS) else str(p.relative_to(REPO)), marks=marks)


TEXTS = [
    *sorted((REPO / "fixtures" / "hlo").glob("*.hlo.txt")),
    *sorted((REPO / "fixtures" / "dump" / "cpu_small").glob("*after_optimizations.txt")),
    *_corpus_ok("hlo_gpu", "*@jit_*.hlo.txt"),
    *_corpus_ok("hlo_cpu", "*__benchmarks__hlo__*.hlo"),
    *_corpus_ok("hlo_tpu", "pytorch__xla__*.after_optimizations.txt"),
]


def _leaves(shape: Shape) -> object:
    if shape.is_tuple:
        return tuple(_leaves(s) for s in shape.tuple_shapes)
    return (shape.element_type, shape.dims)


def _xla_shape_text(printed: str) -> str:
    """The result shape in XLA's ``%name = <shape> opcode(...)`` print of one instruction."""
    rhs = printed.split(" = ", 1)[1]
    if not rhs.startswith("("):
        return rhs.split(" ", 1)[0]
    depth = 0
    for k, ch in enumerate(rhs):
        depth += (ch == "(") - (ch == ")")
        if depth == 0:
            return rhs[: k + 1]
    raise AssertionError(f"unbalanced shape in {printed[:200]!r}")


def _xla_view(text: str) -> list[tuple[str, list[tuple]]]:
    """XLA's module as [(computation, [(name, opcode, operands, shape leaves, called)])] in XLA's order."""
    module = xla_client.hlo.hlo_module_from_text(text)
    view = []
    for comp in module.computations():
        rows = []
        for inst in comp.instructions():
            printed = inst.to_string()
            called = frozenset(
                name.strip().lstrip("%")
                for value in _CALLED.findall(printed.split(", metadata=")[0])
                for name in value.strip("{}").split(",")
                if name.strip()
            )
            rows.append((inst.name, _printed(inst.opcode.name), tuple(o.name for o in inst.operands()),
                         _leaves(parse_shape(_xla_shape_text(printed))), called))
        view.append((comp.name, rows))
    return view


def _our_view(module: HloModule) -> list[tuple[str, list[tuple]]]:
    return [
        (comp.name, [(i.name, i.opcode, i.operands, _leaves(i.shape), frozenset(i.calls())) for i in comp.instructions])
        for comp in module.computations
    ]


def test_known_opcodes_are_xlas_opcodes() -> None:
    """``KNOWN_OPCODES`` is exactly the printed names of XLA's ``HloOpcode`` enum (jaxlib 0.10.2)."""
    assert {_printed(m) for m in _hlo_opcode_enum().__members__} == set(KNOWN_OPCODES)


@pytest.mark.parametrize("path", [_param(p) for p in TEXTS])
def test_same_structure_as_xla(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    ours = parse_hlo_text(text, str(path))
    xla = _xla_view(text)
    our_names = {c.name for c in ours.computations}
    xla = [(name, rows) for name, rows in xla if name in our_names or not name.startswith("async_wrapped")]
    assert [name for name, _ in xla] == [c.name for c in ours.computations]
    for (comp, xla_rows), (_, our_rows) in zip(xla, _our_view(ours)):
        assert len(xla_rows) == len(our_rows), f"instruction count of {comp}"
        renamed = {x[0]: o[0] for x, o in zip(xla_rows, our_rows) if x[0] != o[0]}
        for xla_name, our_name in renamed.items():
            assert re.fullmatch(re.escape(our_name) + r"\.\d+", xla_name), f"{comp}: {xla_name} vs {our_name}"
        for x, o in zip(xla_rows, our_rows):
            name, x_op, x_operands, x_shape, x_called = x
            x_operands = tuple(renamed.get(n, n) for n in x_operands)
            _, o_op, o_operands, o_shape, o_called = o
            where = f"{comp}/{name}"
            if x_op in _ASYNC and o_op in ASYNC_FORMS:
                assert o_op.endswith(x_op[len("async"):]), where
            else:
                assert o_op == x_op, where
                assert o_called == x_called, where
            assert o_operands == x_operands, where
            assert o_shape == x_shape, where
    assert ours.entry_name == xla[-1][0] or any(c.is_entry for c in ours.computations)
