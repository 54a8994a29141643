"""``hloscope._record``: the value classes written out instead of made by ``@dataclass`` compare, hash, print, refuse
changes and pickle as the dataclasses they replace -- checked against a dataclass made here with the same fields."""

import copy
import dataclasses
import pickle

import pytest

from hloscope.advice._common import Advice, MatmulShape
from hloscope.cost.module import ModuleCost
from hloscope.hlo import HloModule, Layout, Shape
from hloscope.hlo_values import ConvolutionDimensionNumbers, PaddingDimension, SliceRange, StackFrame, WindowDimension
from hloscope.memory.assignment import Allocation, Assignment
from hloscope.memory.footprint import LiveBuffer, MemoryFootprint
from hloscope.memory.liveness import Buffer, Liveness
from hloscope.roofline.score import Bound, OpScore

LAYOUT = Layout((1, 0), ((8, 128),), 0, "1,0:T(8,128)")
# (an instance, the arguments that made it, the fields a dataclass of it would compare, frozen)
CASES = [
    (WindowDimension(3, 2, 1, 1), (3, 2, 1, 1), WindowDimension.__slots__, True),
    (ConvolutionDimensionNumbers(0, 3, (1, 2), 2, 3, (0, 1), 0, 3, (1, 2), "b01f_01io->b01f"),
     (0, 3, (1, 2), 2, 3, (0, 1), 0, 3, (1, 2), "b01f_01io->b01f"), ConvolutionDimensionNumbers.__slots__, True),
    (SliceRange(0, 8, 2), (0, 8, 2), ("start", "limit", "stride"), True),
    (PaddingDimension(1, 2), (1, 2), ("low", "high", "interior"), True),
    (StackFrame("a.py", "f", 3, 0), ("a.py", "f", 3, 0), ("file_name", "function_name", "line", "parent_frame_id"),
     True),
    (LAYOUT, ((1, 0), ((8, 128),), 0, "1,0:T(8,128)"), ("minor_to_major", "tiles", "memory_space", "raw"), True),
    (Shape("bf16", (16, 256), (), LAYOUT), ("bf16", (16, 256), (), LAYOUT),
     ("element_type", "dims", "dynamic_dims", "layout", "tuple_shapes"), True),
    (OpScore(1.0, 2.0, 0.0, 2.0, Bound.MEMORY, 0.5, 240.0, "bf16", frozenset({"x"})),
     (1.0, 2.0, 0.0, 2.0, Bound.MEMORY, 0.5, 240.0, "bf16", frozenset({"x"})), OpScore.__slots__, True),
    (Advice("r", "m", "dot.1", "e", "a", 1e-3, "b", "s"), ("r", "m", "dot.1", "e", "a", 1e-3, "b", "s"),
     Advice.__slots__, True),
    (MatmulShape(1, 2, 3, 4, 5, 6, 7), (1, 2, 3, 4, 5, 6, 7), MatmulShape.__slots__, True),
    (LiveBuffer("i", "c", "op", "f.py:1", "f32[2]", 8, "temp"), ("i", "c", "op", "f.py:1", "f32[2]", 8, "temp"),
     LiveBuffer.__slots__, True),
    (MemoryFootprint("m", 1, 2, 0, 3, notes=["n"]), ("m", 1, 2, 0, 3, 0, "", "", "", "", [], True, None, ["n"]),
     MemoryFootprint._fields, False),
    (Buffer(3, 64, 0, 1, 5, "temp", False, False, False, ("c", "i"), None, (1,), 2),
     (3, 64, 0, 1, 5, "temp", False, False, False, ("c", "i"), None, (1,), 2), Buffer.__slots__, False),
    (Liveness([("c", "i")], [], {1: (2,)}, {}, False, True), ([("c", "i")], [], {1: (2,)}, {}, False, True),
     Liveness.__slots__, False),
    (Allocation("temp", 8, [1, 2]), ("temp", 8, [1, 2], False, False), Allocation.__slots__, False),
    (Assignment([], [1], 8, 3), ([], [1], 8, 3), Assignment.__slots__, False),
    (ModuleCost(None, [], 1.0, 0.0, 2.0, 3.0, 0.0, frozenset({"f"})),
     (None, [], 1.0, 0.0, 2.0, 3.0, 0.0, frozenset({"f"})), ModuleCost.__slots__, False),
]


def _twin(obj, fields, frozen):
    """A dataclass named as ``obj``'s class with ``fields`` (compared and printed)."""
    return dataclasses.make_dataclass(type(obj).__qualname__, list(fields), frozen=frozen)


@pytest.mark.parametrize(("obj", "args", "fields", "frozen"), CASES, ids=lambda c: type(c).__name__)
def test_record_behaves_as_its_dataclass(obj, args, fields, frozen):
    twin = _twin(obj, fields, frozen)(*(getattr(obj, f) for f in fields))
    assert repr(obj) == repr(twin)
    again = type(obj)(*args)
    assert obj == again and not (obj != again)
    assert obj != twin and obj != tuple(getattr(obj, f) for f in fields)  # (another class: never equal)
    if frozen:
        assert hash(obj) == hash(again) == hash(twin)
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(obj, fields[0], 1)
        with pytest.raises(dataclasses.FrozenInstanceError):
            delattr(obj, fields[0])
    else:
        with pytest.raises(TypeError):
            hash(obj)
        setattr(again, fields[1], 99)
        assert getattr(again, fields[1]) == 99 and again != obj
    for copied in (pickle.loads(pickle.dumps(obj)), copy.copy(obj), copy.deepcopy(obj)):
        assert type(copied) is type(obj) and copied == obj and repr(copied) == repr(obj)


def test_a_changed_field_breaks_equality():
    assert WindowDimension(3) != WindowDimension(4)
    assert Shape("f32", (2,)) != Shape("f32", (3,))
    assert hash(SliceRange(0, 8)) != hash(SliceRange(0, 9))


def test_shape_compares_by_the_fields_passed_in():
    """Its sizes are derived, not compared or printed; a pickled shape keeps them without computing them again."""
    a, b = Shape("bf16", (16, 256), (), LAYOUT), Shape("bf16", (16, 256), (), LAYOUT)
    str(a)  # (caches its text)
    assert a == b and hash(a) == hash(b)
    assert a.size_bytes == 16 * 256 * 2 and a.padded_size_bytes == 16 * 256 * 2
    assert repr(a) == ("Shape(element_type='bf16', dims=(16, 256), dynamic_dims=(), layout=" + repr(LAYOUT)
                       + ", tuple_shapes=())")
    c = pickle.loads(pickle.dumps(a))
    assert (c.size_bytes, c.element_count, c.hbm_size_bytes, str(c)) == (8192, 4096, 8192, "bf16[16,256]")


def test_module_replace_and_footprint_dict():
    module = HloModule("m", (), "main", {"k": "v"})
    renamed = module.replace(name="n")
    assert (renamed.name, renamed.entry_name, renamed.header_attributes) == ("n", "main", {"k": "v"})
    assert module.name == "m"
    fp = MemoryFootprint("m", 1, 2, 0, 3, top_buffers=[LiveBuffer("i", "c", "", "", "f32[2]", 8, "temp")])
    d = fp.to_dict()
    assert d["top_buffers"] == [{"instruction": "i", "computation": "c", "op_name": "", "source": "",
                                 "result_shape": "f32[2]", "size_bytes": 8, "kind": "temp"}]
    assert d["total_bytes"] == 6 and MemoryFootprint.from_dict(d) == fp
    d["notes"].append("x")
    assert fp.notes == []  # (the dict holds copies of the lists)


def test_none_is_a_dataclass():
    """Each of these classes is made at every import of a report's path: none is a ``@dataclass`` (which costs ~1
    ms to make); ``ChipSpec`` and ``Report``, which users derive variants of by ``dataclasses.replace``, are."""
    from hloscope.result.report import Report
    from hloscope.roofline.chip_spec import ChipSpec

    assert not [type(obj).__name__ for obj, *_ in CASES if dataclasses.is_dataclass(obj)]
    assert dataclasses.is_dataclass(ChipSpec) and dataclasses.is_dataclass(Report)
