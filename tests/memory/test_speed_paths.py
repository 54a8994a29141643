"""The memory model's fast paths give what the general paths give: the one-value buffer of ``analyze_liveness``
against the merged-values one, the bisected ``_Anchors.candidates`` against a scan of every anchor, and the
collector pause of ``footprint`` leaves the collector as it found it."""

from __future__ import annotations

import gc
import random
from pathlib import Path
from types import SimpleNamespace

import pytest

import hloscope
from hloscope.hlo import Shape
from hloscope.memory import assignment, footprint, liveness

FIXTURES = sorted((Path(__file__).resolve().parents[2] / "fixtures" / "hlo").glob("*.hlo.txt"))


def _buffer_fields(b: liveness.Buffer) -> tuple:
    return (b.id, b.size_bytes, b.host_bytes, b.start, b.end, b.kind, b.live_out, b.aliased_parameter,
            b.is_tuple_table, b.defined_by, b.shape, b.share_candidates, b.post_order)


def _walk_with_values() -> tuple[liveness._Walk, dict[str, int]]:
    """A walk holding one value of each sort, times set by hand (no module: only the value lists are read)."""
    walk = liveness._Walk(None)
    ids = {}

    def value(name, time, shape, kind, last_use=-1, table_len=0):
        walk.now = time
        v = walk._value(shape, "main", name, kind, table_len)
        walk.last_use[v] = last_use
        walk.post_order[("main", name)] = 100 - time
        ids[name] = v

    value("param", 2, Shape("f32", (8, 128)), "parameter", last_use=5)
    value("donated", 3, Shape("f32", (4,)), "parameter", last_use=4)
    value("const", 4, Shape("bf16", (3, 5)), "constant", last_use=9)
    value("dead", 6, Shape("s32", (7,)), "temp")  # never read: live at its definition only
    value("temp", 7, Shape("f32", (2, 2)), "temp", last_use=11)
    value("out", 8, Shape("f32", (16,)), "temp", last_use=9)
    value("table", 10, None, "temp", last_use=12, table_len=3)
    value("const_out", 12, Shape("u8", (100,)), "constant")
    walk.live_out.update({ids["donated"], ids["out"], ids["const_out"]})
    return walk, ids


@pytest.mark.parametrize("tiled", [False, True])
def test_single_buffer_equals_merged_buffer_of_one_value(tiled):
    walk, ids = _walk_with_values()
    for v in ids.values():
        fast = liveness._single_buffer(walk, 7, v, 40, tiled)
        general = liveness._merged_buffer(walk, 7, [v], 40, tiled)
        assert _buffer_fields(fast) == _buffer_fields(general)


def test_single_buffer_by_hand():
    walk, ids = _walk_with_values()

    def buf(name, tiled=False):
        return liveness._single_buffer(walk, 0, ids[name], 40, tiled)

    param = buf("param")
    assert (param.start, param.end, param.kind, param.size_bytes) == (0, 40, "parameter", 4096)
    assert buf("param").aliased_parameter is False and buf("donated").aliased_parameter is True
    assert (buf("const").start, buf("const").end, buf("const").kind, buf("const").size_bytes) == (4, 9, "constant", 30)
    assert (buf("dead").start, buf("dead").end, buf("dead").kind) == (6, 6, "temp")
    assert (buf("out").start, buf("out").end, buf("out").kind, buf("out").live_out) == (8, 40, "output", True)
    assert (buf("const_out").kind, buf("const_out").end) == ("output", 40)
    assert (buf("table").size_bytes, buf("table").is_tuple_table, buf("table").shape) == (24, True, None)
    assert buf("table", tiled=True).size_bytes == 512
    assert (buf("temp").defined_by, buf("temp").post_order) == (("main", "temp"), 93)


def test_merged_buffer_spans_its_values():
    walk, ids = _walk_with_values()
    b = liveness._merged_buffer(walk, 3, [ids["dead"], ids["temp"]], 40, False)
    assert (b.start, b.end, b.kind, b.size_bytes) == (6, 11, "temp", 28)
    assert (b.defined_by, b.post_order) == (("main", "dead"), 93)


def _merged_by_definition(walk, bid, values, end, tiled):
    """The buffer of values sharing memory, each field from its definition (a pass over the values per field):
    live from the first definition to the last use or definition of any, to ``end`` when one is a parameter or
    live out; kind parameter > output > constant (all constants) > temp; as large as the largest array, or an
    index table as large as the largest table when any value is one; shape and name of the first defined."""
    kinds = {walk.origin[v][2] for v in values}
    live_out = any(v in walk.live_out for v in values)
    start = min(walk.define_time[v] for v in values)
    stop = max(max(walk.last_use[v], walk.define_time[v]) for v in values)
    if "parameter" in kinds:
        kind, start, stop = "parameter", 0, end
    elif live_out:
        kind, stop = "output", end
    else:
        kind = "constant" if kinds == {"constant"} else "temp"
    first = min(values, key=lambda v: walk.define_time[v])
    tables = [walk.table_len[v] for v in values if walk.shapes[v] is None]
    if tables:
        size, host, shape = liveness._table_bytes(max(tables), tiled), 0, None
    else:
        size = max(walk.shapes[v].hbm_size_bytes for v in values)
        host = max(walk.shapes[v].host_size_bytes for v in values)
        shape = walk.shapes[first]
    order = min(walk.post_order.get(walk.origin[v][:2], 0) for v in values)
    return (bid, size, host, start, stop, kind, live_out, kind == "parameter" and live_out, bool(tables),
            walk.origin[first][:2], shape, (), order)


@pytest.mark.parametrize("tiled", [False, True])
def test_merged_buffer_equals_its_definition_for_every_set_of_values(tiled):
    walk, ids = _walk_with_values()
    values = sorted(ids.values())
    for mask in range(1, 1 << len(values)):
        group = [v for k, v in enumerate(values) if mask >> k & 1]
        got = _buffer_fields(liveness._merged_buffer(walk, 5, group, 40, tiled))
        assert got == _merged_by_definition(walk, 5, group, 40, tiled), group


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.name)
def test_merged_buffers_of_modules_equal_their_definition(path, monkeypatch):
    seen = []

    def checked(walk, bid, values, end, tiled):
        buffer = merged(walk, bid, values, end, tiled)
        expected = _merged_by_definition(walk, bid, values, end, tiled)
        seen.append(_buffer_fields(buffer) == expected)  # (share candidates are linked later: () here)
        return buffer

    merged = liveness._merged_buffer
    monkeypatch.setattr(liveness, "_merged_buffer", checked)
    liveness.analyze_liveness(hloscope.parse_hlo(path.read_text()))
    assert all(seen), f"{seen.count(False)} of {len(seen)} merged buffers differ"


def test_groups_are_the_union_find_classes_in_order_of_first_value():
    walk = liveness._Walk(None)
    for _ in range(9):
        walk._value(Shape("f32", (1,)), "main", "x", "temp")
    for a, b in [(5, 2), (8, 5), (7, 3), (0, 6)]:
        walk.merge(a, b)
    assert liveness._groups(walk) == [[0, 6], [1], [2, 5, 8], [3, 7], [4]]


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.name)
def test_liveness_with_fast_path_equals_general_path(path, monkeypatch):
    module = hloscope.parse_hlo(path.read_text())
    fast = liveness.analyze_liveness(module)
    monkeypatch.setattr(liveness, "_single_buffer",
                        lambda walk, bid, v, end, tiled: liveness._merged_buffer(walk, bid, [v], end, tiled))
    general = liveness.analyze_liveness(module)
    assert [_buffer_fields(b) for b in fast.buffers] == [_buffer_fields(b) for b in general.buffers]
    assert len(fast.buffers) > 0


def _candidates_by_scan(added: list[tuple[int, int, int]], b) -> list[int]:
    """Every anchor, last added first, less those overlapping b by more than a shared end point."""
    return [index for index, s, e in reversed(added)
            if not (s <= b.end and b.start <= e and e != b.start and s != b.end)]


def test_candidates_equal_a_scan_of_every_anchor():
    rng = random.Random(7)
    for _ in range(200):
        anchors = assignment._Anchors()
        added = []
        for k in range(rng.randrange(0, 40)):
            s = rng.randrange(0, 30)
            first = SimpleNamespace(start=s, end=s + rng.randrange(0, 12))
            index = 3 * k + rng.randrange(0, 3)
            anchors.add(index, first)
            added.append((index, first.start, first.end))
            for _ in range(5):
                start = rng.randrange(0, 35)
                b = SimpleNamespace(start=start, end=start + rng.randrange(0, 10))
                assert anchors.candidates(b) == _candidates_by_scan(added, b)


def test_candidates_by_hand():
    anchors = assignment._Anchors()
    for index, (s, e) in enumerate([(0, 10), (5, 20), (12, 20), (20, 30)]):
        anchors.add(index, SimpleNamespace(start=s, end=e))
    assert anchors.candidates(SimpleNamespace(start=10, end=12)) == [3, 2, 0]
    assert anchors.candidates(SimpleNamespace(start=6, end=8)) == [3, 2]
    assert anchors.candidates(SimpleNamespace(start=0, end=40)) == []


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.name)
def test_assignment_equals_trying_every_reusable_allocation(path, monkeypatch):
    module = hloscope.parse_hlo(path.read_text())
    lv = liveness.analyze_liveness(module)

    def run():
        a = assignment.assign_buffers(lv)
        return ([(x.kind, x.size_bytes, x.buffers, x.live_out, x.readonly) for x in a.allocations],
                a.temp_buffers, a.temp_bytes, a.peak_time)

    fast = run()
    # The reference: every reusable allocation, last first (XLA's order), none skipped.
    monkeypatch.setattr(assignment._Anchors, "candidates", lambda self, b: self.indices[::-1])
    assert run() == fast


@pytest.mark.parametrize("enabled", [True, False])
def test_footprint_walks_with_the_collector_paused_and_restores_it(enabled, monkeypatch):
    module = hloscope.parse_hlo(FIXTURES[0].read_text())
    seen = []
    walk = liveness.analyze_liveness

    def recording(m):
        seen.append(gc.isenabled())
        return walk(m)

    monkeypatch.setattr(liveness, "analyze_liveness", recording)  # (footprint imports it when called)
    was = gc.isenabled()
    try:
        (gc.enable if enabled else gc.disable)()
        footprint(module)
        assert gc.isenabled() is enabled
    finally:
        (gc.enable if was else gc.disable)()
    assert seen == [False]
