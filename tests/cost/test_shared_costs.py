"""The cost walk shares work between instructions and computations that must cost the same
(``hloscope.cost.module``): an elementwise or data-movement instruction by (opcode, result shape, operand shapes),
a small reducer by its opcode and shape columns. These tests pin the contract each sharing relies on, and check
that shared and unshared costs agree, with the expected numbers worked by hand."""

from __future__ import annotations

import pytest

from hloscope._compiled import compiled
from hloscope.cost import RULES, data_movement, elementwise, module_cost
from hloscope.cost import module as walk
from hloscope.parsers import parse_hlo_text

#: The rules that read nothing but the instruction's opcode, its result shape and its operands' shapes.
_SHAPE_ONLY_RULES = {elementwise.cost, data_movement.move, data_movement.slice_, data_movement.dynamic_update_slice,
                     data_movement.gather, data_movement.copy}


def test_every_shape_shared_opcode_takes_a_shape_only_rule() -> None:
    """A rule that came to read an attribute (a slice's strides, a copy's layout) would make two instructions with
    the same shapes cost differently: such an opcode must leave ``_SHAPE_RULED``."""
    assert walk._SHAPE_RULED <= set(RULES)
    assert {RULES[op] for op in walk._SHAPE_RULED} <= _SHAPE_ONLY_RULES


MODULE = """HloModule m

%add.1 (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(f32[] %a, f32[] %b)
}

%add.2 (x: f32[], y: f32[]) -> f32[] {
  %x = f32[] parameter(0)
  %y = f32[] parameter(1)
  ROOT %t = f32[] add(f32[] %x, f32[] %y)
}

%max.3 (x: f32[], y: f32[]) -> f32[] {
  %x = f32[] parameter(0)
  %y = f32[] parameter(1)
  ROOT %t = f32[] maximum(f32[] %x, f32[] %y)
}

%fused.5 (x: f32[8,128]) -> f32[8,128] {
  %x = f32[8,128]{1,0} parameter(0)
  ROOT %m = f32[8,128]{1,0} multiply(%x, %x)
}

%fused.6 (x: f32[8,64]) -> f32[8,64] {
  %x = f32[8,64]{1,0} parameter(0)
  ROOT %m = f32[8,64]{1,0} multiply(%x, %x)
}

ENTRY %main (p: f32[8,128], q: f32[8,128], h: bf16[8,128]) -> (f32[8], f32[8], f32[8], f32[8,64], f32[8,128]) {
  %p = f32[8,128]{1,0} parameter(0)
  %q = f32[8,128]{1,0} parameter(1)
  %h = bf16[8,128]{1,0} parameter(2)
  %e1 = f32[8,128]{1,0} multiply(%p, %q)
  %e2 = f32[8,128]{1,0} multiply(%q, %p)
  %c = f32[8,128]{1,0} convert(%h)
  %e3 = f32[8,128]{1,0} multiply(%c, %p)
  %z = f32[] constant(0)
  %r1 = f32[8] reduce(%e1, %z), dimensions={1}, to_apply=%add.1
  %r2 = f32[8] reduce(%e2, %z), dimensions={1}, to_apply=%add.2
  %r3 = f32[8] reduce(%e3, %z), dimensions={1}, to_apply=%max.3
  %s = f32[8,64]{1,0} slice(%e1), slice={[0:8], [0:64]}
  %t = f32[8,64]{1,0} slice(%e2), slice={[0:8], [64:128]}
  %e4 = f32[8,64]{1,0} multiply(%s, %t)
  %w = f32[8,128]{1,0} convert(%e1)
  %f5 = f32[8,128]{1,0} fusion(%w), kind=kLoop, calls=%fused.5
  %f6 = f32[8,64]{1,0} fusion(%e4), kind=kLoop, calls=%fused.6
  ROOT %o = (f32[8], f32[8], f32[8], f32[8,64], f32[8,128]) tuple(%r1, %r2, %r3, %f6, %f5)
}
"""


@pytest.fixture(scope="module")
def rows() -> dict:
    return {r.instruction.name: r.cost for r in module_cost(parse_hlo_text(MODULE)).rows}


def test_same_shapes_share_a_cost_and_others_do_not(rows) -> None:
    elements, f32_bytes = 8 * 128, 8 * 128 * 4
    # multiply: one FLOP per output element; both operands read, the result written.
    assert rows["e1"] is rows["e2"]  # (same opcode, same shapes: one cost)
    assert (rows["e1"].flops, rows["e1"].bytes_read, rows["e1"].bytes_written) == (elements, 2 * f32_bytes, f32_bytes)
    assert rows["e3"] is rows["e1"]  # (its operand %c is a convert's result of the same shape)
    # convert reads the bf16 operand (2 bytes an element), writes f32: another opcode, another cost.
    assert (rows["c"].flops, rows["c"].bytes_read, rows["c"].bytes_written) == (elements, elements * 2, f32_bytes)
    # The same opcodes on other shapes: their own costs.
    assert (rows["e4"].flops, rows["e4"].bytes_read, rows["e4"].bytes_written) == (512, 2 * 512 * 4, 512 * 4)
    assert (rows["w"].flops, rows["w"].bytes_read, rows["w"].bytes_written) == (elements, f32_bytes, f32_bytes)
    # Two slices of other bounds, the same shapes: read and write the result's bytes (data_movement.slice_).
    assert rows["s"] == rows["t"]
    assert (rows["s"].bytes_read, rows["s"].bytes_written) == (8 * 64 * 4, 8 * 64 * 4)


def test_small_computations_with_the_same_columns_share_their_work(rows) -> None:
    # reduce over 128 of 1024 elements: 1024 - 8 applications of the reducer, one FLOP each (add or maximum).
    for name in ("r1", "r2", "r3"):
        assert rows[name].flops == 8 * 128 - 8
    module = parse_hlo_text(MODULE)
    analyzer = walk._Analyzer(module)
    first, second, other = (analyzer.computation_work(n) for n in ("add.1", "add.2", "max.3"))
    assert second is first  # renamed twins: one shared result
    assert other is not first and other.flops == first.flops == 1
    # The same opcodes on other shapes: other work (one FLOP per element of each fused multiply).
    assert (analyzer.computation_work("fused.5").flops, analyzer.computation_work("fused.6").flops) == (1024, 512)
    assert (rows["f5"].flops, rows["f6"].flops) == (1024, 512)
    assert len(analyzer.work_by_columns) == 4


def _walked(text: str, monkeypatch, maker) -> tuple:
    """The rows (computation, instruction, cost, count) and totals of ``module_cost`` with ``maker`` as the C
    maker of shared-cost rows (None: the Python walk makes every row)."""
    monkeypatch.setattr(walk, "shared_rows", maker)
    mc = module_cost(parse_hlo_text(text))
    rows = [(type(r).__name__, r.computation, r.instruction.name, r.instruction.line, tuple(r.cost), r.count)
            for r in mc.rows]
    return rows, (mc.flops, mc.transcendentals, mc.bytes_read, mc.bytes_written, mc.comm_bytes, mc.flags)


def _same(a, b) -> bool:
    return repr(a) == repr(b)  # (NaN costs compare equal by their text)


def test_shared_rows_made_in_c_equal_the_walk(monkeypatch, hlo_paths) -> None:
    """``_cost_walk.shared_rows`` makes the rows of instructions whose shared cost is known: every fixture and
    corpus module costs to the same rows, in the same order, with it as without it."""
    if walk.shared_rows is None:
        pytest.skip("the C extension is not built (or HLOSCOPE_PURE_PYTHON is set)")
    maker = walk.shared_rows
    paths = hlo_paths(5_000_000)
    checked = 0
    for path in paths:
        text = path.read_text(encoding="utf-8", errors="replace")
        try:
            parse_hlo_text(text)
        except Exception:  # noqa: BLE001 - texts that are not one module (XLA test files): not costed
            continue
        assert _same(_walked(text, monkeypatch, maker), _walked(text, monkeypatch, None)), path.name
        checked += 1
    assert checked > 300, checked


def test_shared_rows_stop_where_the_walk_must_look(monkeypatch) -> None:
    """An operand the computation does not hold (a key the walk cannot make) and a first sight of a shape
    (a key not yet costed) are left to the walk; the rows are the walk's."""
    if walk.shared_rows is None:
        pytest.skip("the C extension is not built (or HLOSCOPE_PURE_PYTHON is set)")
    text = ("HloModule m\n\nENTRY %e (p: f32[8], q: f32[8]) -> f32[8] {\n  %p = f32[8]{0} parameter(0)\n"
            "  %q = f32[8]{0} parameter(1)\n  %a = f32[8]{0} add(%p, %q)\n  %b = f32[8]{0} add(%p, %q)\n"
            "  %c = f32[8]{0} multiply(%a, %b)\n  %d = f32[8]{0} add(%c, %a)\n  ROOT %r = f32[8]{0} negate(%d)\n}\n")
    with_c, without = _walked(text, monkeypatch, walk.shared_rows), _walked(text, monkeypatch, None)
    assert _same(with_c, without)
    assert [r[2] for r in with_c[0]] == ["p", "q", "a", "b", "c", "d", "r"]
    assert with_c[1][0] == 5 * 8  # five elementwise instructions (a, b, c, d, r) of 8 elements, a FLOP each


def test_shared_rows_answer_each_memo_with_its_own_costs() -> None:
    """A key ``by_shapes`` answered is answered again without the dict (from its objects' addresses), but only for
    that dict: another dict holding the same key -- another module's walk -- gets its own cost, and so does the
    first again after it. (An answer kept for the wrong dict would give one walk another's costs.)"""
    if walk.shared_rows is None:
        pytest.skip("the C extension is not built (or HLOSCOPE_PURE_PYTHON is set)")
    comp = parse_hlo_text("HloModule m\n\nENTRY %e (p: f32[8]) -> f32[8] {\n  %p = f32[8]{0} parameter(0)\n"
                          "  %a = f32[8]{0} add(%p, %p)\n  ROOT %b = f32[8]{0} add(%p, %p)\n}\n").entry
    insts, index, shapes = comp.instructions, comp.name_index(), comp.shapes
    key = ("add", id(insts[1].shape), id(shapes[0]), id(shapes[0]))

    def costs(by_shapes: dict) -> list:
        rows: list = []
        stop = walk.shared_rows(insts, 1, "e", 1.0, index, shapes, by_shapes, walk._SHAPE_RULED, walk.CostRow, rows,
                                None)
        assert stop == len(insts)
        return [r.cost for r in rows]

    first, second = {key: walk.OpCost(flops=1)}, {key: walk.OpCost(flops=2)}
    for by_shapes in (first, first, second, second, first):
        assert all(c is by_shapes[key] for c in costs(by_shapes))


# -- instructions of one attribute key (``structure.attribute_key``) ---------------------------------------------

KEYED = """HloModule m, replica_count=2, num_partitions=4

%add.1 (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(f32[] %a, f32[] %b)
}

%add.2 (x: f32[], y: f32[]) -> f32[] {
  %x = f32[] parameter(0)
  %y = f32[] parameter(1)
  ROOT %t = f32[] add(f32[] %x, f32[] %y)
}

%fma.3 (x: f32[], y: f32[]) -> f32[] {
  %x = f32[] parameter(0)
  %y = f32[] parameter(1)
  %m = f32[] multiply(f32[] %x, f32[] %y)
  ROOT %t = f32[] add(f32[] %m, f32[] %y)
}

ENTRY %main (p: f32[8,128], q: f32[128,64]) -> f32[8,64] {
  %p = f32[8,128]{1,0} parameter(0)
  %q = f32[128,64]{1,0} parameter(1)
  %d1 = f32[8,64]{1,0} dot(%p, %q), lhs_contracting_dims={1}, rhs_contracting_dims={0}, metadata={op_name="layer_0/dot"}
  %d2 = f32[8,64]{1,0} dot(%p, %q), lhs_contracting_dims={1}, rhs_contracting_dims={0}, metadata={op_name="layer_1/dot"}
  %d3 = f32[8,64]{1,0} dot(%p, %q), lhs_contracting_dims={1}, rhs_contracting_dims={0}, operand_precision={highest,highest}
  %z = f32[] constant(0)
  %r1 = f32[8] reduce(%p, %z), dimensions={1}, to_apply=%add.1
  %r2 = f32[8] reduce(%p, %z), dimensions={1}, to_apply=%add.2
  %r3 = f32[8] reduce(%p, %z), dimensions={1}, to_apply=%fma.3
  %a1 = f32[8,64]{1,0} all-reduce(%d1), channel_id=1, replica_groups={}, use_global_device_ids=true, to_apply=%add.1
  %a2 = f32[8,64]{1,0} all-reduce(%d2), channel_id=22, replica_groups={}, use_global_device_ids=true, to_apply=%add.2
  %a3 = f32[8,64]{1,0} all-reduce(%d3), replica_groups={}, to_apply=%add.1
  %a4 = f32[8,64]{1,0} all-reduce(%d1), channel_id=3, replica_groups={}, to_apply=%add.1
  %a5 = f32[8,64]{1,0} all-reduce(%a4), channel_id=5, replica_groups={}, to_apply=%fma.3
  ROOT %o = f32[8,64]{1,0} add(%a5, %a2)
}
"""


@pytest.fixture(scope="module")
def keyed() -> dict:
    return {r.instruction.name: r.cost for r in module_cost(parse_hlo_text(KEYED)).rows}


def test_instructions_of_one_attribute_key_share_a_cost(keyed) -> None:
    # dot: 2 * 8 * 64 * 128 FLOPs; names and metadata differ, nothing a rule reads does: one cost.
    assert keyed["d1"] is keyed["d2"]
    assert keyed["d1"].flops == 2 * 8 * 64 * 128
    # f32 x f32 at operand_precision=highest: the same FLOPs, flagged (dot.precision_flags): its own cost.
    assert keyed["d3"] is not keyed["d1"] and keyed["d3"].flags == {"operand-precision:highest"}
    # reduce of 1024 elements to 8 through renamed twins (add.1, add.2: 1 FLOP an application) shares; fma.3's
    # two FLOPs an application do not.
    assert keyed["r2"] is keyed["r1"] and keyed["r1"].flops == 1024 - 8
    assert keyed["r3"].flops == 2 * (1024 - 8)


def test_collectives_share_across_channel_ids_but_not_group_modes(keyed) -> None:
    """A collective's ``channel_id`` value is never read, whether it is there is (XLA's CollectiveOpGroupMode:
    replica_groups={} spans the replicas without it, the partitions with it, every device with
    use_global_device_ids)."""
    data = 8 * 64 * 4
    assert keyed["a2"] is keyed["a1"]  # (channel 1 and 22, renamed reducers, all 8 devices)
    assert (keyed["a1"].group_size, keyed["a1"].comm_bytes) == (8, 2 * 7 / 8 * data)
    assert (keyed["a3"].group_size, keyed["a3"].comm_bytes) == (2, 2 * 1 / 2 * data)  # no channel: replicas
    assert (keyed["a4"].group_size, keyed["a4"].comm_bytes) == (4, 2 * 3 / 4 * data)  # channel: partitions
    # Reduction FLOPs: (N-1)/N x elements x the reducer's FLOPs (1 for add, 2 for fma.3).
    assert keyed["a4"].flops == 3 / 4 * 512 and keyed["a5"].flops == 3 / 4 * 512 * 2



def test_c_key_answers_small_computations_from_the_columns_memo() -> None:
    """``attribute_key_of`` reads a called computation's work from ``work_by_columns`` (keyed[9]) by its opcode and
    shape columns, as ``computation_work`` answers first, without calling it; it calls it where that memo lacks
    the key (or the computation is not small), and the work it read is kept in ``work`` as the method keeps it."""
    c_key = compiled("hloscope.cost._cost_walk", "attribute_key_of")
    if c_key is None:
        pytest.skip("_cost_walk not built")
    module = parse_hlo_text(KEYED)
    entry = module.entry
    analyzer = walk._Analyzer(module)
    add1, add2 = module.computation("add.1"), module.computation("add.2")
    assert add1.opcodes == add2.opcodes and all(a is b for a, b in zip(add1.shapes, add2.shapes))
    sentinel = object()
    calls = []

    def computation_work(name):
        calls.append(name)
        return analyzer.computation_work(name)

    r2 = next(i for i in entry.instructions if i.name == "r2")  # (to_apply=%add.2)
    analyzer.work_by_columns[(add1.opcodes, *map(id, add1.shapes))] = sentinel
    keyed = analyzer.keyed()[:8] + (computation_work,) + analyzer.keyed()[9:]
    key = c_key(r2, entry.name_index(), entry.shapes, keyed, False)
    assert key[-1] == (("to_apply", (sentinel,)),) and calls == [] and analyzer.work["add.2"] is sentinel
    # Larger than keyed[11]: left to the method (which answers from the same memo, by its own bound).
    del analyzer.work["add.2"]
    key = c_key(r2, entry.name_index(), entry.shapes, keyed[:11] + (len(add2.opcodes) - 1,) + keyed[12:], False)
    assert calls == ["add.2"] and key[-1] == (("to_apply", (sentinel,)),)
    # Not in the memo: the method is called and costs it.
    del analyzer.work["add.2"]
    analyzer.work_by_columns.clear()
    key = c_key(r2, entry.name_index(), entry.shapes, keyed, False)
    assert calls == ["add.2", "add.2"] and key[-1] == (("to_apply", (analyzer.work["add.2"],)),)
    assert analyzer.work["add.2"] is not sentinel and analyzer.work["add.2"].flops == 1

def _keys(module):
    """``key(inst)``: ``attribute_key`` of an entry instruction, checked equal to the key ``_cost_walk.c`` makes
    (when built), with every called computation's work known."""
    from hloscope.cost.structure import attribute_key

    entry = module.entry
    analyzer = walk._Analyzer(module)
    for comp in module.computations:
        if not comp.is_entry:
            analyzer.computation_work(comp.name)
    c_key = compiled("hloscope.cost._cost_walk", "attribute_key_of")

    def key(inst):
        collective = inst.opcode in walk._COLLECTIVES
        found = attribute_key(inst, entry.shape_of, analyzer.computation_work, collective, {})
        if c_key is not None:
            keyed = analyzer.keyed()
            assert c_key(inst, entry.name_index(), entry.shapes, keyed, collective) == found
        return found

    return key


def test_attribute_key_refuses_what_it_cannot_be_sure_of() -> None:
    module = parse_hlo_text(KEYED)
    by_name = {i.name: i for i in module.entry.instructions}
    key = _keys(module)

    assert key(by_name["d1"]) == key(by_name["d2"]) is not None
    assert key(by_name["a1"]) != key(by_name["a3"])  # (with and without a channel_id)
    # A channel_id inside a string as well as printed: not masked, no key.
    a1 = by_name["a1"]
    for text in (a1.attribute_text + ', backend_config="channel_id=7"', a1.attribute_text + ", channel_id=x"):
        inst = type(a1)(a1.name, a1.opcode, a1.shape, a1.operands, a1.called_computations, False, 1, "", -1,
                        text, a1._decoder)
        assert key(inst) is None
    # A called computation's name found elsewhere in the text: no key.
    inst = type(a1)(a1.name, a1.opcode, a1.shape, a1.operands, a1.called_computations, False, 1, "", -1,
                    a1.attribute_text + ', frontend_attributes={x="add.1"}', a1._decoder)
    assert key(inst) is None
    # A channel_id printed first, or without ", " before it: cut only in the first case.
    for text, cut in ((", channel_id=4, replica_groups={}", ", channel_id=, replica_groups={}"),
                      (", x=1,channel_id=4", None), (", channel_id=4x", None), (", channel_id=", None)):
        inst = type(a1)(a1.name, a1.opcode, a1.shape, a1.operands, {}, False, 1, "", -1, text, a1._decoder)
        assert (key(inst) or (None, None, None, None))[3] == cut
    # An operand the computation lacks: no key (the rule then fails as it did).
    inst = type(a1)(a1.name, a1.opcode, a1.shape, ("nowhere",), a1.called_computations, False, 1, "", -1,
                    a1.attribute_text, a1._decoder)
    assert key(inst) is None


def test_attribute_keys_made_in_c_equal_the_specification(hlo_paths) -> None:
    """``_cost_walk.attribute_key_of`` gives ``structure.attribute_key``'s key for every instruction of every entry
    computation of the fixtures and the corpus whose opcode is keyed."""
    if compiled("hloscope.cost._cost_walk", "attribute_key_of") is None:
        pytest.skip("the C extension is not built")
    paths = hlo_paths(2_000_000)
    made = 0
    for path in paths:
        try:
            module = parse_hlo_text(path.read_text(encoding="utf-8", errors="replace"))
        except Exception:  # noqa: BLE001 - texts that are not one module (XLA test files)
            continue
        key = _keys(module)
        keyed = walk.keyed_opcodes()
        for inst in module.entry.instructions:
            if inst.opcode in keyed:
                made += key(inst) is not None
    assert made > 1000


def _module_texts(paths) -> list[tuple[str, str]]:
    """(name, text) of each file of ``paths``."""
    return [(p.name, p.read_text(encoding="utf-8", errors="replace")) for p in paths]


def _switch_changes_no_row(monkeypatch, switch: str, texts) -> int:
    """Assert that each text that is one module costs to the same rows, in the same order, with the walk's
    ``switch`` (a module flag of ``cost.module``) on and off; the number of modules compared."""
    maker = walk.shared_rows
    checked = 0
    for name, text in texts:
        try:
            parse_hlo_text(text)
        except Exception:  # noqa: BLE001 - texts that are not one module (XLA test files): not costed
            continue
        shared = _walked(text, monkeypatch, maker)
        monkeypatch.setattr(walk, switch, False)
        alone = _walked(text, monkeypatch, maker)
        monkeypatch.setattr(walk, switch, True)
        assert _same(shared, alone), name
        checked += 1
    return checked


def test_attribute_keyed_sharing_changes_no_row(monkeypatch, corpus_dir, hlo_paths) -> None:
    """Every fixture and corpus module costs to the same rows, in the same order, with and without the sharing
    by ``attribute_key``."""
    checked = _switch_changes_no_row(monkeypatch, "SHARE_ATTRIBUTE_KEYS", _module_texts(hlo_paths(5_000_000)))
    assert checked > 300 or not corpus_dir.exists(), checked


_CALLS = """HloModule calls

%helper (x: f32[64,64]) -> f32[64,64] {
  %x = f32[64,64]{1,0} parameter(0)
  %e = f32[64,64]{1,0} exponential(f32[64,64]{1,0} %x)
  ROOT %m = f32[64,64]{1,0} multiply(f32[64,64]{1,0} %e, f32[64,64]{1,0} %x)
}

%body (s: (s32[], f32[64,64])) -> (s32[], f32[64,64]) {
  %s = (s32[], f32[64,64]{1,0}) parameter(0)
  %i = s32[] get-tuple-element((s32[], f32[64,64]{1,0}) %s), index=0
  %v = f32[64,64]{1,0} get-tuple-element((s32[], f32[64,64]{1,0}) %s), index=1
  %c1 = f32[64,64]{1,0} call(f32[64,64]{1,0} %v), to_apply=%helper
  %c2 = f32[64,64]{1,0} call(f32[64,64]{1,0} %c1), to_apply=%helper
  %one = s32[] constant(1)
  %n = s32[] add(s32[] %i, s32[] %one)
  ROOT %t = (s32[], f32[64,64]{1,0}) tuple(s32[] %n, f32[64,64]{1,0} %c2)
}

%cond (s: (s32[], f32[64,64])) -> pred[] {
  %s = (s32[], f32[64,64]{1,0}) parameter(0)
  %i = s32[] get-tuple-element((s32[], f32[64,64]{1,0}) %s), index=0
  %lim = s32[] constant(4)
  ROOT %lt = pred[] compare(s32[] %i, s32[] %lim), direction=LT
}

ENTRY %main (p: f32[64,64]) -> f32[64,64] {
  %p = f32[64,64]{1,0} parameter(0)
  %a = f32[64,64]{1,0} call(f32[64,64]{1,0} %p), to_apply=%helper
  %zero = s32[] constant(0)
  %init = (s32[], f32[64,64]{1,0}) tuple(s32[] %zero, f32[64,64]{1,0} %a)
  %w = (s32[], f32[64,64]{1,0}) while((s32[], f32[64,64]{1,0}) %init), condition=%cond, body=%body, backend_config={"known_trip_count":{"n":"4"}}
  %r = f32[64,64]{1,0} get-tuple-element((s32[], f32[64,64]{1,0}) %w), index=1
  ROOT %b = f32[64,64]{1,0} call(f32[64,64]{1,0} %r), to_apply=%helper
}
"""


def test_a_callee_called_again_counts_at_every_call_site() -> None:
    """A helper called twice from the entry (once each) and twice from a loop body of 4 trips runs 2 + 2 x 4 = 10
    times: 10 x 64 x 64 = 40,960 multiplies and as many exponentials, plus the loop's 4 counter adds and 5
    compares (the condition runs once more than the body); each call site keeps its own rows of the helper."""
    mc = module_cost(parse_hlo_text(_CALLS))
    assert mc.flops == 10 * 64 * 64 + 4 + 5
    assert mc.transcendentals == 10 * 64 * 64
    helper = [(r.instruction.name, r.count) for r in mc.rows if r.computation == "helper"]
    assert helper == [("x", 1.0), ("e", 1.0), ("m", 1.0)] + [("x", 4.0), ("e", 4.0), ("m", 4.0)] * 2 + [
        ("x", 1.0), ("e", 1.0), ("m", 1.0)]


def test_call_rows_sharing_changes_no_row(monkeypatch, corpus_dir, hlo_paths) -> None:
    """Every fixture and corpus module under 1 MB that calls a computation costs to the same rows, in the same
    order, with and without the rows of a callee repeated per (callee, execution count) (``SHARE_CALL_ROWS``)."""
    texts = [("_CALLS", _CALLS)] + [(n, t) for n, t in _module_texts(hlo_paths(1_000_000)) if " call(" in t]
    checked = _switch_changes_no_row(monkeypatch, "SHARE_CALL_ROWS", texts)
    assert checked > 10 or not corpus_dir.exists(), checked
