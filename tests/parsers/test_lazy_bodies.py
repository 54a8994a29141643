"""Computations whose instructions are built on first use (``HloComputation`` with an ``InstructionSource``).

The parser hands over the bodies XLA prints as rows checked in bulk (``_Parser._lazy_body``); the column view
(names, opcodes, shapes, parameters, operands, uses, users) must then say exactly what the built instructions say, and
the cost model -- which reads columns -- must give the same numbers on a module whose instructions were all
built first (where the columns are derived from the instructions instead). Inputs: every HLO fixture, and the
HLO texts of the public corpus that XLA accepts (skipped when the corpus is absent).
"""

from __future__ import annotations

from itertools import chain
from pathlib import Path

import pytest

from hloscope.cost import module_cost
from hloscope.hlo import HloComputation, HloModule
from hloscope.parsers import HloParseError, _hlo_text, parse_hlo_text

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "hlo"
FIXTURE_TEXTS = sorted(FIXTURES.glob("*.hlo.txt"))


@pytest.fixture
def every_body_lazy(monkeypatch: pytest.MonkeyPatch) -> None:
    """Hand over every body XLA printed lazily, however short, loop bodies too (the parser builds short ones and
    those that are surely no fused computation at once)."""
    monkeypatch.setattr(_hlo_text, "_LAZY_MIN_LINES", 1)
    monkeypatch.setattr(_hlo_text, "_not_fused", lambda matches: False)


def _built(module: HloModule) -> HloModule:
    for comp in module.computations:
        comp.instructions
    return module


def _columns(comp: HloComputation) -> dict:
    n = len(comp)
    return {
        "names": comp.names,
        "opcodes": comp.opcodes,
        "shapes": list(comp.shapes),
        "parameter_index": dict(comp.parameter_index),
        "operand_lists": comp.operand_lists(range(n)),
        "operand_names": comp.operand_names(),
        "operand_names_odd": comp.operand_names(range(1, n, 2)),
        "root_index": comp.root_index,
        "len": n,
        "operand_users": comp.operand_users(_asked(comp)),
    }


def _asked(comp: HloComputation) -> set[str]:
    """Names to ask ``operand_users`` for: the parameters, every other instruction's name, and one no
    instruction uses."""
    return set(comp.names[::2]) | {comp.names[i] for i in comp.parameter_index.values()} | {"no.such.name"}


def _users_of(insts, asked: set[str]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for k, inst in enumerate(insts):
        for name in dict.fromkeys(inst.operands):  # (a name twice in one operand list: one user)
            if name in asked:
                out.setdefault(name, []).append(k)
    return out


def _from_instructions(comp: HloComputation) -> dict:
    insts = comp.instructions
    return {
        "names": tuple(i.name for i in insts),
        "opcodes": tuple(i.opcode for i in insts),
        "shapes": [i.shape for i in insts],
        "parameter_index": {i.parameter_number: k for k, i in enumerate(insts) if i.opcode == "parameter"},
        "operand_lists": [i.operands for i in insts],
        "operand_names": list(chain.from_iterable(i.operands for i in insts)),
        "operand_names_odd": list(chain.from_iterable(i.operands for i in insts[1::2])),
        "root_index": next(k for k, i in enumerate(insts) if i.name == comp.root_name),
        "len": len(insts),
        "operand_users": _users_of(insts, _asked(comp)),
    }


def _check_columns(text: str, source: str) -> int:
    """Columns of every not-yet-built computation against its built instructions; returns how many were lazy."""
    module = parse_hlo_text(text, source)
    lazy = 0
    for comp in module.computations:
        if comp.is_built:
            continue
        lazy += 1
        columns = _columns(comp)
        one = comp.instruction_at(len(comp) - 1)  # built alone, before the others
        assert comp.instruction(comp.names[0]).name == comp.names[0]
        assert not comp.is_built
        assert columns == _from_instructions(comp), f"{source}: {comp.name}"
        assert comp.is_built
        assert comp.instructions[-1] is one, "an instruction built alone is the one the tuple holds"
    return lazy


@pytest.mark.parametrize("path", FIXTURE_TEXTS, ids=lambda p: p.name)
def test_fixture_columns_match_the_built_instructions(path: Path, every_body_lazy: None) -> None:
    lazy = _check_columns(path.read_text(), path.name)
    assert lazy > 0, "XLA's own output takes the lazy path"


def _check_same_cost(text: str, source: str) -> None:
    lazy = module_cost(parse_hlo_text(text, source))
    built = module_cost(_built(parse_hlo_text(text, source)))
    assert len(lazy.rows) == len(built.rows), source
    for a, b in zip(lazy.rows, built.rows):
        assert (a.computation, a.instruction.name, a.count) == (b.computation, b.instruction.name, b.count)
        assert a.cost == b.cost, f"{source}: {a.instruction.name}"


@pytest.mark.parametrize("path", FIXTURE_TEXTS, ids=lambda p: p.name)
def test_cost_is_the_same_on_columns_and_on_built_instructions(path: Path, every_body_lazy: None) -> None:
    _check_same_cost(path.read_text(), path.name)


def test_corpus_columns_and_costs_match_the_built_instructions(corpus_dir: Path, every_body_lazy: None) -> None:
    checked = lazy = 0
    dirs = [corpus_dir / d for d in ("hlo_cpu", "hlo_gpu", "hlo_tpu", "hlo_generic")]
    for path in sorted(chain.from_iterable(d.glob(g) for g in ("*.txt", "*.hlo") for d in dirs)):
        text = path.read_text(encoding="utf-8", errors="replace")
        if len(text) > 3_000_000 or "HloModule" not in text:
            continue
        try:
            lazy += _check_columns(text, path.name)
        except HloParseError:
            continue  # texts XLA rejects may raise; tests/parsers/test_corpus.py judges those
        _check_same_cost(text, path.name)
        checked += 1
    assert checked > 200 and lazy > 10_000, (checked, lazy)


def test_a_computation_needs_instructions_or_a_source() -> None:
    with pytest.raises(ValueError, match="give its instructions"):
        HloComputation("c", None, "r")


def test_instruction_lookup_names_the_computation() -> None:
    module = parse_hlo_text((FIXTURES / "cpu_mlp_1dev.hlo.txt").read_text())
    comp = module.entry
    with pytest.raises(KeyError, match=f"computation '{comp.name}' has no instruction 'nope'"):
        comp.instruction("nope")
    for name in comp.names[:20]:  # past the scans, through the index
        assert comp.instruction(name).name == name


def test_which_bodies_are_lazy(monkeypatch: pytest.MonkeyPatch) -> None:
    """Long fused computations are handed over lazily; the entry computation (every reader builds it), short
    bodies (where the checks in bulk cost more than building) and the while loop's body and condition (every cost
    walk builds them) are built at once. Which computation is which is read from the callers."""
    monkeypatch.setattr(_hlo_text, "_LAZY_MIN_LINES", 20)  # (the fixtures' bodies are shorter than the default)
    text = (FIXTURES / "tpu-v5e_transformer_scan_grad.hlo.txt").read_text()
    module = parse_hlo_text(text)
    callers = {}
    for comp in _built(parse_hlo_text(text)).computations:
        for inst in comp.instructions:
            for role, names in inst.called_computations.items():
                callers.update(dict.fromkeys(names, (inst.opcode, role)))
    loop_parts = {name for name, caller in callers.items() if caller[0] == "while"}
    assert loop_parts  # (the scan's body and condition)
    for comp in module.computations:
        long = len(comp) >= _hlo_text._LAZY_MIN_LINES
        assert comp.is_built == (comp.is_entry or not long or comp.name in loop_parts), comp.name
        if not comp.is_built:
            assert callers[comp.name] == ("fusion", "calls"), comp.name
    assert any(not comp.is_built for comp in module.computations)


def test_loop_bodies_are_built_at_once() -> None:
    """A long while body (one tuple-shaped parameter) and a long body holding a collective are built as they are
    read; a long body of the same rows reading array parameters is kept lazy."""
    rows = _hlo_text._LAZY_MIN_LINES
    chain = "".join(f"  %n{k} = f32[2]{{0}} negate(%n{k - 1})\n" for k in range(1, rows))
    loop = ("%body (p: (f32[2])) -> (f32[2]) {\n  %p = (f32[2]{0}) parameter(0)\n"
            "  %n0 = f32[2]{0} get-tuple-element(%p), index=0\n" + chain
            + f"  ROOT %t = (f32[2]{{0}}) tuple(%n{rows - 1})\n}}\n\n")
    reduced = ("%sum (a: f32[], b: f32[]) -> f32[] {\n  %a = f32[] parameter(0)\n  %b = f32[] parameter(1)\n"
               "  ROOT %s = f32[] add(%a, %b)\n}\n\n"
               "%comm (n0: f32[2]) -> f32[2] {\n  %n0 = f32[2]{0} parameter(0)\n" + chain
               + f"  ROOT %r = f32[2]{{0}} all-reduce(%n{rows - 1}), replica_groups={{}}, to_apply=%sum\n}}\n\n")
    fused = "%fused (n0: f32[2]) -> f32[2] {\n  %n0 = f32[2]{0} parameter(0)\n" + chain + "}\n\n"
    entry = "ENTRY %e (x: f32[2]) -> f32[2] {\n  ROOT %x = f32[2]{0} parameter(0)\n}\n"
    module = parse_hlo_text("HloModule m\n\n" + loop + reduced + fused + entry)
    built = {comp.name: comp.is_built for comp in module.computations}
    assert built == {"body": True, "sum": True, "comm": True, "fused": False, "e": True}
    assert len(module.computation("body")) == rows + 2 and module.computation("fused").root.name == f"n{rows - 1}"


@pytest.mark.parametrize("path", FIXTURE_TEXTS[:6], ids=lambda p: p.name)
def test_operand_users_of_built_computations(path: Path) -> None:
    """``operand_users`` of computations the parser built at once (the entry, short bodies) reads the
    instructions."""
    module = parse_hlo_text(path.read_text(), path.name)
    built = [comp for comp in module.computations if comp.is_built]
    assert built
    for comp in built:
        asked = _asked(comp)
        assert comp.operand_users(asked) == _users_of(comp.instructions, asked), comp.name


def test_index_comments_in_operand_lists_are_read_in_bulk(every_body_lazy: None) -> None:
    """XLA prints ``/*index=5*/`` before every fifth operand of a long list: the body's operand names are still read
    over the whole body at once (``used_in_bulk``), and are the names the built instructions hold."""
    from hloscope.parsers._hlo_bodies import LazyBody

    ops = ", ".join(f"{'/*index=5*/' if k == 5 else ''}%p.{k % 2}" for k in range(7))
    text = ("HloModule m\n\n%body (a: f32[2], b: f32[2]) -> (f32[2], f32[2], f32[2], f32[2], f32[2], f32[2], f32[2]) {\n"
            "  %p.0 = f32[2]{0} parameter(0)\n  %p.1 = f32[2]{0} parameter(1)\n"
            f"  ROOT %t = (f32[2]{{0}}, f32[2]{{0}}, f32[2]{{0}}, f32[2]{{0}}, f32[2]{{0}}, f32[2]{{0}}, f32[2]{{0}}) "
            f"tuple({ops})\n}}\n\n"
            "ENTRY %e (x: f32[2]) -> f32[2] {\n  %x = f32[2]{0} parameter(0)\n  ROOT %n = f32[2]{0} negate(%x)\n}\n")
    body = parse_hlo_text(text).computation("body")
    source = body._source
    assert isinstance(source, LazyBody) and source.used_in_bulk
    assert body.operand_names() == ["p.0", "p.1", "p.0", "p.1", "p.0", "p.1", "p.0"]
    assert body.operand_names() == list(chain.from_iterable(i.operands for i in body.instructions))
