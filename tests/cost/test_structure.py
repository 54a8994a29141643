"""Computations of one structure share their cost (``hloscope.cost.structure``, ``cost/module._Analyzer``).

The contract: two computations with the same key cost the same, so sharing changes no row. Checked three ways:
every fixture and corpus module costs to the same rows with and without sharing; the key's C reader equals its
Python specification on every computation; and on made modules, the key tells apart what a cost rule reads and
ignores only names and metadata, with the shared figures worked by hand."""

from __future__ import annotations

import pytest

from hloscope.cost import module as walk
from hloscope.cost import module_cost
from hloscope.cost import structure
from hloscope.cost.structure import StructureKeys, c_structure_fields, c_structure_key, py_structure_fields
from hloscope.parsers import parse_hlo_text


def _layer(n: int, op_name: str, dims: str = "{1}", lhs: str = "a", reducer: str = "add") -> str:
    """One layer's fused dot and reduce, computations and instructions numbered ``n``."""
    return f"""
%{reducer}.{n} (x.{n}: f32[], y.{n}: f32[]) -> f32[] {{
  %x.{n} = f32[] parameter(0)
  %y.{n} = f32[] parameter(1)
  ROOT %s.{n} = f32[] {reducer}(f32[] %x.{n}, f32[] %y.{n})
}}

%fused_computation.{n} (a.{n}: f32[8,16], b.{n}: f32[16,32]) -> f32[8] {{
  %a.{n} = f32[8,16]{{1,0}} parameter(0)
  %b.{n} = f32[16,32]{{1,0}} parameter(1)
  %d.{n} = f32[8,32]{{1,0}} dot(f32[8,16]{{1,0}} %{lhs}.{n}, f32[16,32]{{1,0}} %b.{n}), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}, metadata={{op_name="{op_name}/dot_general" source_file="/m.py" source_line={10 + n}}}
  %z.{n} = f32[] constant(0)
  ROOT %r.{n} = f32[8]{{0}} reduce(f32[8,32]{{1,0}} %d.{n}, f32[] %z.{n}), dimensions={dims}, to_apply=%{reducer}.{n}, metadata={{op_name="{op_name}/reduce_sum"}}
}}
"""


def _module(*layers: str) -> str:
    calls = "\n".join(f"  %f.{k} = f32[8]{{0}} fusion(f32[8,16]{{1,0}} %p, f32[16,32]{{1,0}} %q), kind=kOutput, "
                      f"calls=%fused_computation.{k}" for k in range(len(layers)))
    outs = ", ".join(f"%f.{k}" for k in range(len(layers)))
    shape = ", ".join("f32[8]{0}" for _ in layers)
    return ("HloModule m\n" + "".join(layers) + "\nENTRY %main (p: f32[8,16], q: f32[16,32]) -> (" + shape
            + ") {\n  %p = f32[8,16]{1,0} parameter(0)\n  %q = f32[16,32]{1,0} parameter(1)\n" + calls
            + f"\n  ROOT %t = ({shape}) tuple({outs})\n}}\n")


def test_renamed_layers_share_one_key_and_one_cost(monkeypatch) -> None:
    monkeypatch.setattr(walk, "SHARE_MIN_COMPUTATIONS", 0)  # (a module this small is not keyed by default)
    module = parse_hlo_text(_module(_layer(0, "layers_0"), _layer(1, "layers_1"), _layer(2, "layers_2")))
    keys = StructureKeys(module)
    assert keys.key("fused_computation.0") == keys.key("fused_computation.1") == keys.key("fused_computation.2")
    assert keys.key("fused_computation.0") is not None
    analyzer = walk._Analyzer(module)
    works = [analyzer.computation_work(f"fused_computation.{k}") for k in range(3)]
    assert works[1] is works[0] and works[2] is works[0]  # (computed once)
    # dot 8x16 @ 16x32: 2 * 8 * 32 * 16 FLOPs; reduce of 8x32 over dim 1 with add: 8 * 32 - 8 additions.
    assert works[0].flops == 2 * 8 * 32 * 16 + (8 * 32 - 8)
    fbs = [analyzer.fused_bytes(f"fused_computation.{k}") for k in range(3)]
    assert fbs[1] is fbs[0] and fbs[2] is fbs[0]
    # Both parameters read whole (4 bytes an element), the f32[8] result written.
    assert fbs[0].read_per_parameter == {-1: 0, 0: 8 * 16 * 4, 1: 16 * 32 * 4}
    assert fbs[0].written == 8 * 4


def test_a_small_module_is_not_keyed() -> None:
    """Below ``SHARE_MIN_COMPUTATIONS`` computations the walk keys nothing (its keys would cost more than they
    save): each computation is costed alone, to the same figures."""
    module = parse_hlo_text(_module(_layer(0, "layers_0"), _layer(1, "layers_1")))
    assert len(module.computations) < walk.SHARE_MIN_COMPUTATIONS
    analyzer = walk._Analyzer(module)
    assert analyzer.structures is None
    first, second = (analyzer.computation_work(f"fused_computation.{k}") for k in range(2))
    assert second is not first and second == first


@pytest.mark.parametrize("other", [
    _layer(1, "layers_1", dims="{0}"),  # an attribute a rule reads: another reduction
    _layer(1, "layers_1", lhs="b"),  # other operands: the dot of b with b
    _layer(1, "layers_1", reducer="maximum"),  # a called computation of another structure
])
def test_what_a_rule_reads_tells_structures_apart(other: str) -> None:
    if "%b.1, f32[16,32]{1,0} %b.1" in other:
        other = other.replace("f32[8,16]{1,0} %b.1", "f32[16,32]{1,0} %b.1")
    module = parse_hlo_text(_module(_layer(0, "layers_0"), other))
    keys = StructureKeys(module)
    assert keys.key("fused_computation.0") != keys.key("fused_computation.1")


def test_the_key_gives_up_where_it_cannot_be_sure() -> None:
    # A called computation's name also inside another attribute's text: the mask could not tell them apart.
    text = _module(_layer(0, "layers_0")).replace('op_name="layers_0/reduce_sum"', 'op_name="add.0"')
    text = text.replace(", metadata={op_name=\"add.0\"}", ", frontend_attributes={x=\"add.0\"}")
    keys = StructureKeys(parse_hlo_text(text))
    assert keys.key("fused_computation.0") is None
    assert keys.key("add.0") is not None
    # A text only a full decode can read (a string before the metadata key): kept whole, so no key.
    assert structure.without_metadata(', custom_call_target="x", metadata={op_name="a"}') is None
    assert structure.without_metadata("<decoded>") is None
    assert structure.without_metadata(", dimensions={1}") == ", dimensions={1}"
    assert structure.without_metadata(', dimensions={1}, metadata={op_name="a/b" source_line=3}') \
        == ", dimensions={1}"
    assert structure.without_metadata(', metadata={op_name="a"}, backend_config={"k":1}') == ', backend_config={"k":1}'


def test_called_computations_of_any_mapping_key_alike(monkeypatch) -> None:
    """``HloInstruction.called_computations`` is a mapping of role -> names: the key in C reads a mapping other
    than a dict and names in a list as its Python specification does (the parser gives dicts of tuples)."""
    from types import MappingProxyType

    if c_structure_key is None:
        pytest.skip("the C extension is not built")
    keys = {}
    for way in ("c", "python"):
        module = parse_hlo_text(_module(_layer(0, "layers_0"), _layer(1, "layers_1")))
        for k in range(2):  # (the reduce's to_apply, handed over as a mappingproxy of a list)
            root = module.computation(f"fused_computation.{k}").root
            root.called_computations = MappingProxyType({"to_apply": list(root.called_computations["to_apply"])})
        if way == "python":
            monkeypatch.setattr(structure, "c_structure_key", None)
        found = StructureKeys(module)
        keys[way] = [found.key(f"fused_computation.{k}") for k in range(2)]
    assert keys["c"] == keys["python"]
    assert keys["c"][0] == keys["c"][1] is not None  # (renamed layers: one structure)


def _rows(text: str, monkeypatch, share: bool) -> tuple:
    monkeypatch.setattr(walk, "SHARE_STRUCTURES", share)
    monkeypatch.setattr(walk, "SHARE_MIN_COMPUTATIONS", 0)  # (every module keyed, however small)
    mc = module_cost(parse_hlo_text(text))
    rows = [(r.computation, r.instruction.name, tuple(r.cost), r.count) for r in mc.rows]
    return rows, (mc.flops, mc.transcendentals, mc.bytes_read, mc.bytes_written, mc.comm_bytes, mc.flags)


def test_sharing_changes_no_row_of_any_module(monkeypatch, hlo_paths) -> None:
    """Every fixture and corpus module: the same rows, costs and totals with computations shared by structure
    as without; and the key's C reader and the key in C equal their Python specifications on every built
    computation (the same id for each, ids given in the order first met)."""
    checked = shared = 0
    for path in hlo_paths(5_000_000):
        text = path.read_text(encoding="utf-8", errors="replace")
        try:
            module = parse_hlo_text(text)
        except Exception:  # noqa: BLE001 - texts that are not one module (XLA test files): not costed
            continue
        assert repr(_rows(text, monkeypatch, True)) == repr(_rows(text, monkeypatch, False)), path.name
        if c_structure_fields is not None:
            bare_c: dict = {}
            bare_py: dict = {}
            for comp in module.computations:
                if comp.is_built and not comp.is_entry:
                    args = (comp.instructions, comp.name_index())
                    assert (c_structure_fields(*args, bare_c, structure.without_metadata)
                            == py_structure_fields(*args, bare_py, structure.without_metadata)), (path.name, comp.name)
            assert bare_c == bare_py
        keys = StructureKeys(module)
        names = [c.name for c in module.computations if not c.is_entry]
        found = [keys.key(n) for n in names]
        if c_structure_key is not None:  # (the key in C, its callees' keys by recursion, against its specification)
            monkeypatch.setattr(structure, "c_structure_key", None)
            by_python = StructureKeys(module)
            assert [by_python.key(n) for n in names] == found, path.name
            monkeypatch.undo()
        shared += len(names) - len(set(found) - {None}) - found.count(None)
        checked += 1
    assert checked > 300, checked
    assert shared > 1000, shared  # (layers do repeat: the corpus's fused computations share their structures)


_HAND_TEXTS = [  # (attribute text, what cutting its metadata out gives, by hand)
    ("", ""),
    ("<decoded>", None),  # (the parser's placeholder: the text was decoded at parse time)
    (", dimensions={1}", ", dimensions={1}"),
    (', metadata={op_name="a" source_line=3}, backend_config={"x":1}', ', backend_config={"x":1}'),
    (', dimensions={0}, metadata={op_name="b"}', ", dimensions={0}"),
    (", metadata={}", ""),
    (', metadata= {op_name="c"}', ', metadata= {op_name="c"}'),  # (a space before the value: nothing cut)
    (', custom_call_target="metadata=", metadata={op_name="d"}', None),  # (a '"' before the key)
    (', metadata={op_name="e"}, metadata={op_name="f"}', None),  # (the key twice)
    (', metadata={op_name="g}', None),  # (a string left open: not known for sure)
]


@pytest.mark.parametrize("text, expected", _HAND_TEXTS)
def test_without_metadata_by_hand(text: str, expected: str | None) -> None:
    assert structure.py_without_metadata(text) == expected
    if structure.c_without_metadata is not None:
        assert structure.c_without_metadata(text) == expected


def test_without_metadata_in_c_equals_python_on_every_text(hlo_paths) -> None:
    """The C ``without_metadata`` gives what its Python specification gives for every attribute text of every
    fixture and corpus module."""
    if structure.c_without_metadata is None:
        pytest.skip("the _attribute_scan extension was not built")
    texts: set[str] = set()
    for path in hlo_paths(5_000_000):
        try:
            module = parse_hlo_text(path.read_text(encoding="utf-8", errors="replace"))
        except Exception:  # noqa: BLE001 - texts that are not one module (XLA test files)
            continue
        texts.update(i.attribute_text for c in module.computations for i in c.instructions)
    differ = [t for t in texts if structure.c_without_metadata(t) != structure.py_without_metadata(t)]
    assert not differ, differ[:3]
    assert sum("metadata=" in t for t in texts) > 10_000, len(texts)
