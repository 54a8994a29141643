"""Buffers and their live ranges over a scheduled module: XLA's alias analysis and live-range flattening,
re-done on the parsed text.

A *value* is one array (or one tuple's index table) that an instruction defines. Values that must share memory
-- a ``while``'s operand, its body's parameter and root and its result; a ``conditional``'s branch roots and its
result; an in-place ``dynamic-update-slice``/``scatter`` or a fusion/custom call with
``output_to_operand_aliasing`` and its operand -- are merged into one *buffer*, as XLA's ``HloAliasAnalysis``
does. Instructions that only name part of a value (``get-tuple-element``, ``tuple``, ``bitcast``, the ``-done``
half of an async pair, ``optimization-barrier``) define nothing: they hand on the values they name.

Times follow XLA's ``HloLiveRange``: the entry computation's instructions in schedule order (the printed order
of an ``is_scheduled=true`` module), with the computations a ``while``, ``conditional`` or ``call`` runs
flattened in just before the instruction that runs them. A buffer is live from the first definition of any of
its values to the last instruction that reads one (operands read by a non-aliasing instruction), and to the
end of the program when a value reaches the entry's ``ROOT`` (live out).

Sizes are ``Shape.hbm_size_bytes`` (layout padding included, ``T(8,128)`` tiles on TPU; leaves in on-chip
memory spaces such as TPU VMEM ``S(1)`` and host memory ``S(5)`` count 0 here, ``host_size_bytes`` records the
latter). A tuple's index table is one pointer (8 bytes) per element (``ShapeUtil::ByteSizeOf(shape,
pointer_size=8)``; XLA:CPU and XLA:GPU use 8).

Fusion, ``to_apply`` (reductions, sorts, all-reduce) and async-wrapped computations are not walked: their
values live in registers or in the buffers of the instruction that calls them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from itertools import repeat
from typing import TYPE_CHECKING, Any, Union

from hloscope._compiled import PURE_PYTHON, compiled
from hloscope._record import Record
from hloscope._regex import LazyPattern
from hloscope.cost.elementwise import OPCODES as ELEMENTWISE_OPCODES

if TYPE_CHECKING:
    from hloscope.hlo import HloComputation, HloModule, Shape

__all__ = ["Buffer", "Liveness", "POINTER_BYTES", "analyze_liveness"]

#: Bytes per element of a tuple's index table (XLA:CPU/GPU pointer size).
POINTER_BYTES = 8
#: Granule of TPU allocations: a tuple's index table is rounded up to it (measured: a 9-element output tuple
#: of a deviceless TPU v5e compile adds 512 bytes to ``memory_analysis().output_size_in_bytes``, not 72).
TPU_GRANULE_BYTES = 512

#: A value tree: an int (the value id of an array) or (table value id, children) for a tuple.
Tree = Union[int, tuple[int, tuple["Tree", ...]]]

#: Instructions whose result is (part of) an operand's value: they define no memory of their own.
_PASS_THROUGH = frozenset({"bitcast", "optimization-barrier", "add-dependency", "domain", "async-update"})
_CONTROL = frozenset({"while", "conditional", "call"})
#: Opcodes that run in place on operand 0 (XLA ``HloDataflowAnalysis::GetInPlaceInputOutputPairs``).
_IN_PLACE = frozenset({"dynamic-update-slice", "scatter"})
#: Opcodes ``_Walk._aliased_result`` may find an aliased result for (besides every ``*-start``).
_MAY_ALIAS = _IN_PLACE | {"send", "fusion", "custom-call"}
#: One ``{output index}: (operand number, {operand index}...)`` pair of ``output_to_operand_aliasing`` or of
#: the module header's ``input_output_alias``.
_ALIASING = LazyPattern(r"\{([\d,\s]*)\}\s*:\s*\(\s*(\d+)\s*,\s*\{([\d,\s]*)\}")


class Buffer(Record):
    """Memory that one or more values share, with its live range.

    Attributes:
        id: index in ``Liveness.buffers``.
        size_bytes: bytes in device memory (HBM): the largest of its values.
        host_bytes: bytes in host memory (``S(5)``).
        start, end: first and last time (index into ``Liveness.sequence``) the buffer is live, inclusive.
        kind: ``"parameter"`` (holds an entry parameter), ``"constant"``, ``"output"`` (live out of the entry
            computation) or ``"temp"``.
        live_out: True when a value reaches the entry ``ROOT``.
        aliased_parameter: for a ``parameter`` buffer that is also live out (``input_output_alias``, a donated
            argument), True.
        is_tuple_table: True for a tuple's index table.
        defined_by: (computation, instruction) of the first definition.
        shape: the shape of that first value.
        share_candidates: buffers this one may take over in place when their last use is this buffer's
            definition (XLA ``CanShareOperandBufferWithUser``: an elementwise instruction or a loop fusion
            reading the operand elementwise, same byte size).
        post_order: the smallest post-order position of its values' instructions (``post_order_positions``):
            the buffer assigner's tie-break among buffers of one size.

    Compared and printed by these fields (``hloscope._record.Record``), which may be set; ``_liveness_walk.c``
    ``make_buffers`` fills the slots of the buffers it makes directly.
    """

    __slots__ = ("id", "size_bytes", "host_bytes", "start", "end", "kind", "live_out", "aliased_parameter",
                 "is_tuple_table", "defined_by", "shape", "share_candidates", "post_order")
    id: int
    size_bytes: int
    host_bytes: int
    start: int
    end: int
    kind: str
    live_out: bool
    aliased_parameter: bool
    is_tuple_table: bool
    defined_by: tuple[str, str]
    shape: Any
    share_candidates: tuple[int, ...]
    post_order: int

    def __init__(self, id: int, size_bytes: int, host_bytes: int, start: int, end: int, kind: str,  # noqa: A002
                 live_out: bool, aliased_parameter: bool, is_tuple_table: bool, defined_by: tuple[str, str],
                 shape: Any, share_candidates: tuple[int, ...] = (), post_order: int = 0) -> None:
        self.id = id
        self.size_bytes = size_bytes
        self.host_bytes = host_bytes
        self.start = start
        self.end = end
        self.kind = kind
        self.live_out = live_out
        self.aliased_parameter = aliased_parameter
        self.is_tuple_table = is_tuple_table
        self.defined_by = defined_by
        self.shape = shape
        self.share_candidates = share_candidates
        self.post_order = post_order


class Liveness(Record):
    """Every buffer of a module, and the flattened schedule its times index.

    Attributes:
        sequence: (computation name, instruction name) per time.
        buffers: every buffer.
        operand_buffers: per buffer id, the buffers of its defining instruction's top-level operands (XLA tries
            these allocations first).
        copies_of: per buffer defined by a ``copy``, the buffers the copy reads (a copy never shares them).
        scheduled: whether the module said ``is_scheduled=true`` (else the printed order is used as the
            schedule, and ``Footprint`` says so).
        tiled: whether the entry computation's arrays carry tiled layouts (``T(8,128)``: a TPU program); tuple
            index tables are then ``TPU_GRANULE_BYTES``-rounded.

    Compared and printed by these fields (``hloscope._record.Record``), which may be set.
    """

    __slots__ = ("sequence", "buffers", "operand_buffers", "copies_of", "scheduled", "tiled")
    sequence: list[tuple[str, str]]
    buffers: list[Buffer]
    operand_buffers: dict[int, tuple[int, ...]]
    copies_of: dict[int, frozenset[int]]
    scheduled: bool
    tiled: bool

    def __init__(self, sequence: list[tuple[str, str]] | None = None, buffers: list[Buffer] | None = None,
                 operand_buffers: dict[int, tuple[int, ...]] | None = None,
                 copies_of: dict[int, frozenset[int]] | None = None, scheduled: bool = True,
                 tiled: bool = False) -> None:
        self._init_fields([] if sequence is None else sequence, [] if buffers is None else buffers,
                          {} if operand_buffers is None else operand_buffers, {} if copies_of is None else copies_of,
                          scheduled, tiled)


class _Walk:
    """One pass over the module: value trees, definition and use times, merges."""

    def __init__(self, module: HloModule) -> None:
        self.module = module
        self.parent: list[int] = []  # union-find over value ids
        self.define_time: list[int] = []
        self.last_use: list[int] = []
        self.shapes: list[Shape | None] = []  # None for a tuple table
        self.table_len: list[int] = []
        self.origin: list[tuple[str, str, str]] = []  # (computation, instruction, kind)
        self.share: list[tuple[int, int, int]] = []  # (new value, operand value, time)
        #: fused computation name -> parameter name -> indices of the instructions using it (``_parameter_users``)
        self.users: dict[str, dict[str, list[int]]] = {}
        self.operand_values: dict[int, tuple[int, ...]] = {}
        self.copy_reads: dict[int, tuple[int, ...]] = {}
        self.sequence: list[tuple[str, str]] = []
        self.now = 0  # the time of the instruction being walked
        self.live_out: set[int] = set()
        self.entry_params: dict[int, Tree] = {}
        self.post_order: dict[tuple[str, str], int] = {}

    # -- values ------------------------------------------------------------------------------------
    def _value(self, shape: Shape | None, comp: str, inst: str, kind: str, table_len: int = 0) -> int:
        vid = len(self.parent)
        self.parent.append(vid)
        self.define_time.append(self.now)
        self.last_use.append(-1)
        self.shapes.append(shape)
        self.table_len.append(table_len)
        self.origin.append((comp, inst, kind))
        return vid

    def new_tree(self, shape: Shape, comp: str, inst: str, kind: str) -> Tree:
        if shape.is_tuple:
            table = self._value(None, comp, inst, kind, len(shape.tuple_shapes))
            return (table, tuple(self.new_tree(s, comp, inst, kind) for s in shape.tuple_shapes))
        return self._value(shape, comp, inst, kind)

    def find(self, v: int) -> int:
        parent = self.parent
        while parent[v] != v:
            parent[v] = parent[parent[v]]
            v = parent[v]
        return v

    def merge(self, a: Tree, b: Tree) -> None:
        """Make the values of two trees of the same shape share buffers, leaf by leaf."""
        if isinstance(a, int) or isinstance(b, int):
            if isinstance(a, int) and isinstance(b, int):
                ra, rb = self.find(a), self.find(b)
                if ra != rb:
                    self.parent[rb] = ra
            return
        self.merge(a[0], b[0])
        for x, y in zip(a[1], b[1]):
            self.merge(x, y)

    def leaves(self, tree: Tree) -> list[int]:
        if isinstance(tree, int):
            return [tree]
        out = [tree[0]]
        for child in tree[1]:
            out.extend(self.leaves(child))
        return out

    def use(self, tree: Tree, time: int) -> None:
        last = self.last_use
        for v in self.leaves(tree):
            if last[v] < time:
                last[v] = time

    # -- the walk ----------------------------------------------------------------------------------
    def computation(self, comp: HloComputation, params: list[Tree]) -> Tree:
        """Walk one computation; returns its root's tree."""
        trees: dict[str, Tree] = {}
        cname = comp.name
        run = None if PURE_PYTHON else plain_run
        operands = None
        if run is None:
            for inst in comp.instructions:
                trees[inst.name] = self.instruction(cname, inst, trees, params)
        else:  # (plain instructions by columns in C, the others one by one here; lazy bodies stay unbuilt)
            names, opcodes, shapes = comp.names, comp.opcodes, comp.shapes
            operands = comp.operand_lists(range(len(names)))
            i, n = 0, len(names)
            while i < n:
                i = run(self, i, cname, names, opcodes, shapes, operands, trees, _NEEDS_PYTHON, ELEMENTWISE_OPCODES)
                if i < n:
                    trees[names[i]] = self.instruction(cname, comp.instruction_at(i), trees, params)
                    i += 1
        positions = self.post_order
        if (cname, comp.root_name) not in positions:  # (then no name of ``comp`` is there: they come together)
            keys = dict.fromkeys(zip(repeat(cname), post_order(comp, operands)))  # (a name's first place)
            positions.update(zip(keys, range(len(positions), len(positions) + len(keys))))
        return trees[comp.root_name]

    def instruction(self, cname: str, inst: Any, trees: dict[str, Tree], params: list[Tree]) -> Tree:
        op = inst.opcode
        ops = [trees[o] for o in inst.operands if o in trees]
        module = self.module
        if op == "parameter":
            self._tick(cname, inst.name)
            if params:
                tree = params[inst.parameter_number] if inst.parameter_number < len(params) else \
                    self.new_tree(inst.shape, cname, inst.name, "temp")
            else:
                tree = self.new_tree(inst.shape, cname, inst.name, "parameter")
                self.entry_params[inst.parameter_number] = tree
            return tree
        if op in _CONTROL:
            called = inst.called_computations
            if op == "while" and ops:
                state = ops[0]
                for role in ("condition", "body"):
                    for name in called.get(role, ()):
                        root = self.computation(module.computation(name), [state])
                        if role == "body":
                            self.merge(state, root)
                time = self._tick(cname, inst.name)
                self.use(state, time)
                return state
            if op == "conditional":
                branches = called.get("branch_computations", ()) or \
                    called.get("true_computation", ()) + called.get("false_computation", ())
                roots = [self.computation(module.computation(name), [ops[i + 1]] if i + 1 < len(ops) else [])
                         for i, name in enumerate(branches)]
                time = self._tick(cname, inst.name)
                result = self.new_tree(inst.shape, cname, inst.name, "temp")
                for root in roots:
                    self.merge(result, root)
                for t in ops:
                    self.use(t, time)
                return result
            # call
            root = None
            for name in called.get("to_apply", ()) + called.get("calls", ()):
                root = self.computation(module.computation(name), ops)
            time = self._tick(cname, inst.name)
            return root if root is not None else self.new_tree(inst.shape, cname, inst.name, "temp")

        sequence = self.sequence  # (``_tick``, inlined: once per instruction)
        sequence.append((cname, inst.name))
        time = self.now = len(sequence) - 1
        if op == "get-tuple-element":
            tree = ops[0] if ops else None
            index = inst.attribute("index", 0)
            if isinstance(tree, tuple) and isinstance(index, int) and 0 <= index < len(tree[1]):
                return tree[1][index]
            return self.new_tree(inst.shape, cname, inst.name, "temp")
        if op == "tuple":
            table = self._value(None, cname, inst.name, "temp", len(ops))
            return (table, tuple(ops))
        if op in _PASS_THROUGH and ops:
            return ops[0]
        if op.endswith("-done") and ops:
            return self._done(op, ops[0], inst, cname)
        tree = self._aliased_result(op, inst, ops, cname) if op in _MAY_ALIAS or op.endswith("-start") else None
        if tree is None:
            kind = "constant" if op == "constant" else "temp"
            shape = inst.shape
            tree = self.new_tree(shape, cname, inst.name, kind) if shape.is_tuple else \
                self._value(shape, cname, inst.name, kind)
            if isinstance(tree, int) and (op in ELEMENTWISE_OPCODES or
                                          (op == "fusion" and inst.attribute("kind") == "kLoop")):
                self._share_candidates(tree, inst, ops, time)
        last_use = self.last_use
        for t in ops:
            if not isinstance(t, int):
                self.use(t, time)
            elif last_use[t] < time:  # (an array operand, the common case: ``use`` without a list of leaves)
                last_use[t] = time
        if isinstance(tree, int):
            self.operand_values[tree] = tuple([t for t in ops if isinstance(t, int)])
            if op == "copy":
                self.copy_reads[tree] = tuple(v for t in ops for v in self.leaves(t))
        return tree

    def _tick(self, cname: str, iname: str) -> int:
        self.sequence.append((cname, iname))
        self.now = len(self.sequence) - 1
        return self.now

    def _done(self, op: str, start: Tree, inst: Any, cname: str) -> Tree:
        if isinstance(start, int):
            return start
        children = start[1]
        if op == "copy-done":
            return children[0]
        if op in ("send-done",):
            return self.new_tree(inst.shape, cname, inst.name, "temp")
        if op == "recv-done":
            return (self._value(None, cname, inst.name, "temp", 2),
                    (children[0], self.new_tree(inst.shape.tuple_shapes[1], cname, inst.name, "temp")))
        return children[1] if len(children) > 1 else start

    def _aliased_result(self, op: str, inst: Any, ops: list[Tree], cname: str) -> Tree | None:
        """The result tree of an instruction whose result (or part of it) is an operand's memory."""
        if op in _IN_PLACE and ops:
            if isinstance(ops[0], int) or not inst.shape.is_tuple:
                return ops[0]
            return (self._value(None, cname, inst.name, "temp", len(ops)), tuple(ops[:len(inst.shape.tuple_shapes)]))
        if op.endswith("-start") or op == "send":
            shape = inst.shape
            if not shape.is_tuple or not shape.tuple_shapes or not ops:
                return self.new_tree(shape, cname, inst.name, "temp")
            shapes = shape.tuple_shapes
            table = self._value(None, cname, inst.name, "temp", len(shapes))
            first = shapes[0]
            # The elements that hold the operands (the input half of the async pair): no new memory.
            held: dict[int, Tree] = {}
            if op == "copy-start" and len(shapes) > 1:
                held[1] = ops[0]
            elif first.is_tuple and len(ops) > 1 and len(first.tuple_shapes) == len(ops):
                held[0] = (self._value(None, cname, inst.name, "temp", len(ops)), tuple(ops))
            elif first.is_tuple and len(first.tuple_shapes) == 1 and len(ops) == 1:
                held[0] = (self._value(None, cname, inst.name, "temp", 1), (ops[0],))
            elif isinstance(ops[0], int) and _same_array(self.shapes[ops[0]], first):
                held[0] = ops[0]
            return (table, tuple(held[k] if k in held else self.new_tree(s, cname, inst.name, "temp")
                                 for k, s in enumerate(shapes)))
        if op in ("fusion", "custom-call"):
            pairs = _output_operand_pairs(inst, self.module)
            if not pairs:
                return None
            sources = {}
            for out_index, (operand, operand_index) in pairs:
                source = _subtree(ops[operand], operand_index) if operand < len(ops) else None
                if source is not None and not out_index:
                    return source
                if source is not None and len(out_index) == 1:
                    sources[out_index[0]] = source
            if not sources or not inst.shape.is_tuple:
                return None
            table = self._value(None, cname, inst.name, "temp", len(inst.shape.tuple_shapes))
            return (table, tuple(sources[k] if k in sources else self.new_tree(s, cname, inst.name, "temp")
                                 for k, s in enumerate(inst.shape.tuple_shapes)))
        return None

    def _share_candidates(self, vid: int, inst: Any, ops: list[Tree], time: int) -> None:
        shape = inst.shape
        size = shape.hbm_size_bytes
        for i, t in enumerate(ops):
            if isinstance(t, int) and self.shapes[t] is not None and self.shapes[t].hbm_size_bytes == size:
                if inst.opcode == "fusion" and not _elementwise_use(inst, i, self.module, self.users):
                    continue
                self.share.append((vid, t, time))


def _tiled(module: HloModule) -> bool:
    """Whether an entry parameter or the entry root has an array leaf with a tiled layout (a TPU program)."""
    entry = module.entry
    all_shapes = entry.shapes
    shapes = [shape for shape, op in zip(all_shapes, entry.opcodes) if op == "parameter"]
    shapes.append(all_shapes[entry.root_index])
    stack = list(shapes)
    while stack:
        s = stack.pop()
        if s.is_tuple:
            stack.extend(s.tuple_shapes)
        elif s.layout is not None and s.layout.tiles:
            return True
    return False


def post_order(comp: HloComputation, operands: Sequence[Sequence[str]] | None = None) -> list[str]:
    """The instruction names of ``comp`` in XLA's post order (``HloComputation::MakeInstructionPostOrder``):
    a depth-first walk of operands, first operand first, from each instruction without users in printed order
    (the root among them); an instruction comes after all its operands. ``py_post_order`` over the
    computation's columns (``operands``: its operand lists, when the caller has them), or its C twin
    (``_post_order.c``) where it was built."""
    names = comp.names
    if operands is None:
        operands = comp.operand_lists(range(len(names)))
    return (py_post_order if PURE_PYTHON or c_post_order is None else c_post_order)(names, operands)


def py_post_order(names: Sequence[str], operands: Sequence[Sequence[str]]) -> list[str]:
    """``post_order`` of the instructions ``names`` (printed order) whose operand names are ``operands``: the
    specification of ``_post_order.c`` (a name not in ``names`` is passed over; names the walk never reaches, a
    cycle, follow in printed order)."""
    index = {n: i for i, n in enumerate(names)}
    used = [False] * len(names)
    for ops in operands:
        for o in ops:
            k = index.get(o)
            if k is not None:
                used[k] = True
    state = [0] * len(names)  # 0 new, 1 visiting, 2 done
    out: list[str] = []
    for start in range(len(names)):
        if used[start] or state[start]:
            continue
        stack = [start]
        while stack:
            i = stack[-1]
            if state[i]:
                stack.pop()
                if state[i] == 1:
                    state[i] = 2
                    out.append(names[i])
                continue
            state[i] = 1
            for o in reversed(operands[i]):
                k = index.get(o)
                if k is not None and not state[k]:
                    stack.append(k)
    out.extend(n for i, n in enumerate(names) if not state[i])  # (a cycle, which the parser rejects)
    return out


#: ``py_post_order`` in C (``hloscope/memory/_post_order.c``), None when the extension was not built
#: (``post_order`` takes the Python one then, and with ``HLOSCOPE_PURE_PYTHON=1``).
c_post_order = compiled("hloscope.memory._post_order", "post_order")
#: ``_Walk.instruction``'s last branch over a run of plain instructions, in C (``hloscope/memory/_liveness_walk.c``),
#: None when the extension was not built (``_Walk.computation`` takes every instruction in Python then, and with
#: ``HLOSCOPE_PURE_PYTHON=1``).
plain_run = compiled("hloscope.memory._liveness_walk", "plain_run")
#: ``py_make_buffers`` in C (``hloscope/memory/_liveness_walk.c``), None when the extension was not built.
c_make_buffers = compiled("hloscope.memory._liveness_walk", "make_buffers")
#: ``py_link_buffers`` in C (``hloscope/memory/_liveness_walk.c``), None when the extension was not built.
c_link_buffers = compiled("hloscope.memory._liveness_walk", "link_buffers")
#: Opcodes ``_Walk.instruction`` takes in Python even where ``plain_run`` was built (besides every ``*-start``
#: and ``*-done``, and results that are tuples): parameters, control flow, tuples, pass-through, aliasing.
_NEEDS_PYTHON = frozenset({"parameter", "get-tuple-element", "tuple"}) | _CONTROL | _PASS_THROUGH | _MAY_ALIAS


def _same_array(a: Shape | None, b: Shape) -> bool:
    return a is not None and a.element_type == b.element_type and a.dims == b.dims


def _subtree(tree: Tree, index: tuple[int, ...]) -> Tree | None:
    for i in index:
        if isinstance(tree, int) or i >= len(tree[1]):
            return None
        tree = tree[1][i]
    return tree


def _output_operand_pairs(inst: Any, module: HloModule) -> list[tuple[tuple[int, ...], tuple[int, tuple[int, ...]]]]:
    """(output index, (operand number, operand index)) pairs an instruction writes in place: its
    ``output_to_operand_aliasing`` attribute, else (fusions) a fused ``dynamic-update-slice``/``scatter`` root
    whose operand 0 is a fused parameter (XLA ``GetInPlaceInputOutputPairs``)."""
    text = inst.attribute("output_to_operand_aliasing")
    if isinstance(text, str) and text:
        return _parse_aliasing(text)
    if inst.opcode != "fusion":
        return []
    names = inst.called_computations.get("calls", ())
    if not names:
        return []
    comp = module.computation(names[0])
    root = comp.root_index
    roots = [(root, ())]
    if comp.opcodes[root] == "tuple":
        roots = [(comp.index_of(n), (k,)) for k, n in enumerate(comp.operands_at(root))]
    pairs = []
    for index, out_index in roots:
        op = comp.opcodes[index]
        while op == "bitcast":
            index = comp.index_of(comp.operands_at(index)[0])
            op = comp.opcodes[index]
        if op not in _IN_PLACE:
            continue
        source = comp.index_of(comp.operands_at(index)[0])
        while comp.opcodes[source] == "bitcast":
            source = comp.index_of(comp.operands_at(source)[0])
        if comp.opcodes[source] == "parameter":
            number = comp.instruction_at(source).parameter_number
            pairs.append((out_index, (number, ())))
    return pairs


def _parse_aliasing(text: str) -> list[tuple[tuple[int, ...], tuple[int, tuple[int, ...]]]]:
    """``{ {0}: (1, {}), {1}: (2, {0}) }`` -> [((0,), (1, ())), ((1,), (2, (0,)))]."""
    pairs = []
    for out, operand, index in _ALIASING.findall(text):
        pairs.append((_ints(out), (int(operand), _ints(index))))
    return pairs


def _ints(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.replace(" ", "").split(",") if x)


def _elementwise_use(inst: Any, operand: int, module: HloModule,
                     users: dict[str, dict[str, list[int]]] | None = None) -> bool:
    """Whether a loop fusion reads operand ``operand`` only elementwise (every user of the fused parameter is
    an elementwise instruction of the same dims): XLA lets its output take over that operand's buffer.
    ``users``: a cache of ``_parameter_users`` by computation name (a fused computation is asked once per
    operand of each fusion calling it; scanning its body each time was quadratic on large fusions)."""
    names = inst.called_computations.get("calls", ())
    if not names:
        return False
    comp = module.computation(names[0])
    try:
        param = comp.parameter_index[operand]
    except KeyError:
        return False
    name = comp.names[param]
    dims = comp.shapes[param].dims
    opcodes, shapes = comp.opcodes, comp.shapes
    by_name = users.get(comp.name) if users is not None else None
    if by_name is None:
        by_name = _parameter_users(comp)
        if users is not None:
            users[comp.name] = by_name
    found = False
    for i in by_name.get(name, ()):
        if opcodes[i] not in ELEMENTWISE_OPCODES or shapes[i].dims != dims:
            return False
        found = True
    return found


def _parameter_users(comp: Any) -> dict[str, list[int]]:
    """Parameter name -> the indices (in order, each once) of the instructions of ``comp`` that use it
    (``HloComputation.operand_users``: counted in bulk on a body the parser kept as rows)."""
    names = comp.names
    return comp.operand_users({names[i] for i in comp.parameter_index.values()})


def analyze_liveness(module: HloModule) -> Liveness:
    """Buffers of ``module`` with live ranges over its flattened schedule (module docstring).

    Raises:
        KeyError: a called computation is missing (the parser rejects such modules first).
    """
    walk = _Walk(module)
    root = walk.computation(module.entry, [])
    end = len(walk.sequence) - 1
    for out_index, (number, param_index) in _parse_aliasing(module.header_attributes.get("input_output_alias", "")):
        param = walk.entry_params.get(number)
        out = _subtree(root, out_index)
        source = _subtree(param, param_index) if param is not None else None
        if out is not None and source is not None:
            walk.merge(source, out)
    for v in walk.leaves(root):
        walk.live_out.add(v)
    result = Liveness(sequence=walk.sequence,
                      scheduled=str(module.header_attributes.get("is_scheduled", "")).lower() == "true",
                      tiled=_tiled(module))
    make = py_make_buffers if PURE_PYTHON or c_make_buffers is None else c_make_buffers
    result.buffers, buffer_of = make(walk, end, result.tiled, _merged_buffer, Buffer, POINTER_BYTES, TPU_GRANULE_BYTES)
    link = py_link_buffers if PURE_PYTHON or c_link_buffers is None else c_link_buffers
    link(walk, result.buffers, buffer_of, result.operand_buffers, result.copies_of)
    return result


def py_make_buffers(walk: _Walk, end: int, tiled: bool, merged: Callable[..., Buffer], buffer_type: type,
                    pointer_bytes: int, granule_bytes: int) -> tuple[list[Buffer], list[int]]:
    """Every buffer of the walk's values, and per value id its buffer id: one buffer per class of the
    union-find (``_groups``: ids in the order of each class's smallest value), made by ``_single_buffer`` for a
    class of one value and by ``merged`` (``_merged_buffer``) for larger ones. The specification of
    ``make_buffers`` in ``_liveness_walk.c``, which builds the one-value buffers in C (tests/memory/
    test_liveness_walk.py holds the two equal); ``buffer_type``, ``pointer_bytes`` and ``granule_bytes`` are
    what it needs of this module (``Buffer``, ``POINTER_BYTES``, ``TPU_GRANULE_BYTES``)."""
    buffer_of = [0] * len(walk.parent)  # value id -> buffer id (every value gets one)
    buffers: list[Buffer] = []
    for values in _groups(walk):
        bid = len(buffers)
        if len(values) == 1:  # (most values share memory with no other: mixtral 28,446 of 29,418 buffers)
            buffer_of[values[0]] = bid
            buffers.append(_single_buffer(walk, bid, values[0], end, tiled))
        else:
            for v in values:
                buffer_of[v] = bid
            buffers.append(merged(walk, bid, values, end, tiled))
    return buffers, buffer_of


def py_link_buffers(walk: _Walk, buffers: list[Buffer], buffer_of: list[int],
                    operand_buffers: dict[int, tuple[int, ...]], copies_of: dict[int, frozenset[int]]) -> None:
    """What ties the buffers to each other, filled in place: each buffer's ``share_candidates`` (the operand
    buffers whose last use is its definition, from ``walk.share``), ``operand_buffers`` (per buffer, the buffers of
    the operands of the first instruction to define one of its values) and ``copies_of`` (per buffer a copy
    defines, the buffers it reads). The specification of ``link_buffers`` in ``_liveness_walk.c`` (tests/memory/
    test_liveness_walk.py holds the two equal)."""
    shares: dict[int, list[int]] = {}
    for new, operand, time in walk.share:
        b_new, b_op = buffer_of[new], buffer_of[operand]
        if b_new != b_op and buffers[b_op].end == time and buffers[b_new].start == time:
            shares.setdefault(b_new, []).append(b_op)
    for bid, cands in shares.items():
        buffers[bid].share_candidates = tuple(cands)
    buffer_at = buffer_of.__getitem__
    for v, operands in walk.operand_values.items():
        bid = buffer_of[v]
        if bid not in operand_buffers:  # (the first value of a buffer to define one wins)
            operand_buffers[bid] = tuple(map(buffer_at, operands))
    for v, reads in walk.copy_reads.items():
        copies_of[buffer_of[v]] = frozenset(map(buffer_at, reads))


def _groups(walk: _Walk) -> list[list[int]]:
    """The values of each buffer (the union-find's classes), each list ascending, the lists ordered by their
    smallest value: buffer ids follow the order in which the walk defined each buffer's first value."""
    parent, find = walk.parent, walk.find
    groups: dict[int, list[int]] = {}
    for v in range(len(parent)):
        rep = v if parent[v] == v else find(v)
        values = groups.get(rep)
        if values is None:
            groups[rep] = [v]
        else:
            values.append(v)
    return list(groups.values())


def _merged_buffer(walk: _Walk, bid: int, values: list[int], end: int, tiled: bool) -> Buffer:
    """The buffer of the values ``values`` (ascending), which share memory: live from the first definition to
    the last use of any (to ``end`` when one is a parameter or live out), as large as the largest. (One pass over
    the values: most such buffers hold two, and a pass per field cost ~20 us a buffer.)"""
    origin, define_time, last_use, shapes = walk.origin, walk.define_time, walk.last_use, walk.shapes
    live, post_order = walk.live_out, walk.post_order
    kinds = set()
    live_out = False
    first = values[0]
    start = stop = define_time[first]
    order = None
    size = host = -1  # (the largest sizes of the arrays; -1: none yet)
    table = None  # (the largest index table's entries; None: no value is one)
    for v in values:
        comp, inst, kind = origin[v]
        kinds.add(kind)
        if v in live:
            live_out = True
        defined = define_time[v]
        if defined < start:
            first, start = v, defined
        used = last_use[v]
        if used < defined:
            used = defined
        if used > stop:
            stop = used
        at = post_order.get((comp, inst), 0)
        if order is None or at < order:
            order = at
        shape = shapes[v]
        if shape is None:
            if table is None or walk.table_len[v] > table:
                table = walk.table_len[v]
        else:
            if shape.hbm_size_bytes > size:
                size = shape.hbm_size_bytes
            if shape.host_size_bytes > host:
                host = shape.host_size_bytes
    if "parameter" in kinds:
        kind, start, stop = "parameter", 0, end
    elif live_out:
        kind, stop = "output", end
    elif kinds == {"constant"}:
        kind = "constant"
    else:
        kind = "temp"
    tables = table is not None
    if tables:
        size, host, shape = _table_bytes(table, tiled), 0, None
    else:
        shape = shapes[first]
    comp, inst, _ = origin[first]
    return Buffer(bid, size, host, start, stop, kind, live_out, kind == "parameter" and live_out, tables,
                  (comp, inst), shape, post_order=order)


def _single_buffer(walk: _Walk, bid: int, v: int, end: int, tiled: bool) -> Buffer:
    """``_merged_buffer(walk, bid, [v], end, tiled)`` for a value that shares its memory with no other, without
    the passes over a list of values (tests/memory/test_speed_paths.py checks the two agree)."""
    comp, inst, kind = walk.origin[v]
    live_out = v in walk.live_out
    start = walk.define_time[v]
    stop = walk.last_use[v]
    if stop < start:
        stop = start
    if kind == "parameter":
        start, stop = 0, end
    elif live_out:
        kind, stop = "output", end
    elif kind != "constant":
        kind = "temp"
    shape = walk.shapes[v]
    if shape is None:  # a tuple's index table
        size, host = _table_bytes(walk.table_len[v], tiled), 0
    else:
        size, host = shape.hbm_size_bytes, shape.host_size_bytes
    return Buffer(bid, size, host, start, stop, kind, live_out, kind == "parameter" and live_out, shape is None,
                  (comp, inst), shape, post_order=walk.post_order.get((comp, inst), 0))


def _table_bytes(entries: int, tiled: bool) -> int:
    """Bytes of a tuple's index table of ``entries`` pointers (``POINTER_BYTES`` each), rounded up to the TPU
    granule on a tiled (TPU) program."""
    size = POINTER_BYTES * entries
    return -(-size // TPU_GRANULE_BYTES) * TPU_GRANULE_BYTES if tiled else size
