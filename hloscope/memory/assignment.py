"""XLA's buffer assignment, re-done on the buffers of ``hloscope.memory.liveness``: which buffers get an
allocation of their own, which reuse one, and how large the temp allocation must be.

The rules are those of ``BufferAssigner`` (``xla/service/buffer_assignment.cc``, ``AssignBuffersForComputations``,
``AssignSingleHloBuffer``, ``MaybeAssignBuffer``, ``LiveRangeInterferes``):

1. Buffers are taken largest first; at equal size live-out ones first, then by the post-order position of
   their first instruction (``HloComputation::MakeInstructionPostOrder``, callees before callers).
2. A constant gets a read-only allocation; an entry parameter gets its own allocation, reusable by later
   buffers only when the parameter is aliased to an output (``input_output_alias``, a donated argument); a
   tuple's index table gets its own allocation.
3. Any other buffer first tries the allocations of its defining instruction's operands, then every reusable
   allocation from the smallest up. It may join one when it fits, its live range interferes with no buffer
   already there (touching ranges are allowed when the instruction takes over its operand's memory,
   ``CanShareOperandBufferWithUser``), it is not a ``copy`` of a buffer there, and -- for a live-out buffer --
   the allocation has exactly its size. So early temporaries often sit in an output's allocation before the
   output is written.
4. What is left and not live out is the *temp* set, packed by the heap simulator into the preallocated temp
   allocation; what is left and live out gets a new allocation.

The temp allocation's size is estimated as the peak of the temp set's live bytes over the schedule, each
buffer rounded up to the allocation alignment (a buffer that takes over a dying operand's memory counts once). XLA's best-fit heap packs the same set and can only need
as much or more (fragmentation); ``compiled.memory_analysis().temp_size_in_bytes`` is that packed size.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right, insort
from typing import TYPE_CHECKING

from hloscope._compiled import PURE_PYTHON, compiled
from hloscope._record import Record

if TYPE_CHECKING:
    from hloscope.memory.liveness import Buffer, Liveness

__all__ = ["Allocation", "Assignment", "CPU_ALIGNMENT_BYTES", "assign_buffers"]

#: Alignment of each buffer in XLA:CPU's temp allocation (``cpu_function_runtime::MinAlign()``, 64 bytes):
#: a 1-byte and a 4-byte temp need 65 bytes (checked: ``while_converge`` of tests/generator on CPU). TPU buffer
#: sizes are already multiples of the tile padding; no extra alignment is applied to tiled modules.
CPU_ALIGNMENT_BYTES = 64


class Allocation(Record):
    """One allocation: ``kind`` is ``parameter``, ``constant``, ``tuple``, ``output`` or ``reused``; ``size_bytes``
    its size; ``buffers`` the ids of the buffers in it; ``live_out`` whether any of them is live out. Compared and
    printed by these fields (``hloscope._record.Record``), which may be set."""

    __slots__ = ("kind", "size_bytes", "buffers", "live_out", "readonly")
    kind: str
    size_bytes: int
    buffers: list[int]
    live_out: bool
    readonly: bool

    def __init__(self, kind: str, size_bytes: int, buffers: list[int] | None = None, live_out: bool = False,
                 readonly: bool = False) -> None:
        self.kind = kind
        self.size_bytes = size_bytes
        self.buffers = [] if buffers is None else buffers
        self.live_out = live_out
        self.readonly = readonly


class Assignment(Record):
    """Allocations, the temp set, and the temp set's peak.

    Attributes:
        allocations: every allocation but the temp one.
        temp_buffers: ids of the buffers packed into the temp allocation.
        temp_bytes: peak live bytes of ``temp_buffers`` (the temp allocation's size, before fragmentation).
        peak_time: the time (index into ``Liveness.sequence``) of that peak; -1 when there are no temps.

    Compared and printed by these fields (``hloscope._record.Record``), which may be set.
    """

    __slots__ = ("allocations", "temp_buffers", "temp_bytes", "peak_time")
    allocations: list[Allocation]
    temp_buffers: list[int]
    temp_bytes: int
    peak_time: int

    def __init__(self, allocations: list[Allocation], temp_buffers: list[int], temp_bytes: int,
                 peak_time: int) -> None:
        self._init_fields(allocations, temp_buffers, temp_bytes, peak_time)


#: Above any time index (the ``bisect`` bound for "every range starting at or before t").
_AFTER_ALL = float("inf")


def _interferes(a: Buffer, b: Buffer) -> bool:
    if a.start > b.end or b.start > a.end:
        return False
    if a.end == b.start:
        return a.id not in b.share_candidates
    if b.end == a.start:
        return b.id not in a.share_candidates
    return True


class _Anchors:
    """The live range of the first buffer of each reusable allocation (in the order they were made), to skip
    the allocations that certainly refuse a buffer: one whose first buffer's range overlaps the buffer's by more
    than a shared end point makes ``_interferes`` true, so ``try_assign`` would refuse. XLA tries every
    reusable allocation in turn; on modules with many live-out buffers nearly every try fails on that first
    buffer (the corpus's mixtral: 13 million tries).

    An anchor ``[s, e]`` is kept for a buffer ``[start, end]`` exactly when ``s >= end`` or ``e <= start`` (the
    negation of "overlaps by more than a shared end point": ``s <= end``, ``start <= e``, ``e != start``,
    ``s != end``; times are ints). So the anchors are kept twice, sorted by start and sorted by end, and the
    kept ones are a tail of the first list and a head of the second, found by bisection: a call costs the size
    of its answer (mixtral: 0.2 allocations on average, of 545), not the number of anchors, and no numpy call.
    The answer keeps the order XLA tries allocations in (the last reusable one first); the ones left out would
    each have refused the buffer without side effects, so leaving them out changes no assignment."""

    __slots__ = ("indices", "by_start", "by_end")

    def __init__(self) -> None:
        self.indices: list[int] = []  # per anchor, in the order added: its allocation index
        self.by_start: list[tuple[int, int]] = []  # (start, position in ``indices``), sorted
        self.by_end: list[tuple[int, int]] = []  # (end, position in ``indices``), sorted

    def add(self, index: int, first: Buffer) -> None:
        position = len(self.indices)
        self.indices.append(index)
        insort(self.by_start, (first.start, position))
        insort(self.by_end, (first.end, position))

    def candidates(self, b: Buffer) -> list[int]:
        """The allocation indices, last added first, minus those whose first buffer surely interferes with b."""
        by_start, by_end = self.by_start, self.by_end
        late = bisect_left(by_start, (b.end,))  # by_start[late:]: the anchors starting at or after b's end
        early = bisect_left(by_end, (b.start + 1,))  # by_end[:early]: those ending at or before b's start
        if late == len(by_start) and not early:  # (the common answer on large modules)
            return []
        positions = {p for _, p in by_start[late:]}
        positions.update(p for _, p in by_end[:early])
        indices = self.indices
        return [indices[p] for p in sorted(positions, reverse=True)]


#: ``_py_assign`` in C (``hloscope/memory/_buffer_assign.c``; None when that optional extension was not built).
assign_run = compiled("hloscope.memory._buffer_assign", "assign_run")


def assign_buffers(liveness: Liveness) -> Assignment:
    """Assign every buffer of ``liveness`` to an allocation or to the temp set (module docstring).

    Runs in C where the extension was built (``assign_run``; not with ``HLOSCOPE_PURE_PYTHON=1``, nor for a
    buffer size beyond 2**52 bytes), else ``_py_assign``, its specification: the same allocations, temp set and
    peak (tests/memory/test_buffer_assign.py).

    Raises:
        ValueError: a temp buffer whose live range lies outside the schedule (C), or an index error of the
            same (Python): a ``Liveness`` not made by ``analyze_liveness``.
    """
    if assign_run is None or PURE_PYTHON:
        return _py_assign(liveness)
    try:
        allocations, temps, temp_bytes, peak_time = assign_run(
            liveness.buffers, liveness.operand_buffers, liveness.copies_of, liveness.tiled,
            len(liveness.sequence), 1 if liveness.tiled else CPU_ALIGNMENT_BYTES)
    except OverflowError:
        return _py_assign(liveness)
    return Assignment([Allocation(kind, size, ids, live_out, readonly)
                       for kind, size, ids, live_out, readonly in allocations], temps, temp_bytes, peak_time)


def _py_assign(liveness: Liveness) -> Assignment:
    """``assign_buffers`` in Python: the specification of ``hloscope/memory/_buffer_assign.c``."""
    buffers = liveness.buffers
    order = sorted(buffers, key=lambda b: (-b.size_bytes, not b.live_out, b.post_order, b.id))
    allocations: list[Allocation] = []
    allocation_of: dict[int, int] = {}
    anchors = _Anchors()  # the reusable allocations (largest first) by their first buffer, to skip sure refusals
    temps: list[int] = []

    # Per allocation, its buffers' live ranges sorted by (start, end). No two ranges of one allocation overlap
    # but at a shared end point (``_interferes`` admits nothing else), so their ends are sorted too, and the
    # ranges a buffer can touch are one run of them, found by bisection: the answer of testing every buffer of
    # the allocation, without walking them all (gemma2: 770,000 tests for 5,600 tries).
    ranges: dict[int, tuple[list[tuple[int, int]], list[int], list[int]]] = {}

    def add_range(index: int, b: Buffer) -> None:
        keys, ends, ids = ranges.setdefault(index, ([], [], []))
        at = bisect_right(keys, (b.start, b.end))
        keys.insert(at, (b.start, b.end))
        ends.insert(at, b.end)
        ids.insert(at, b.id)

    def try_assign(index: int, b: Buffer) -> bool:
        alloc = allocations[index]
        if alloc.readonly or alloc.kind == "tuple" or b.size_bytes > alloc.size_bytes:
            return False
        if b.live_out and alloc.size_bytes != b.size_bytes:
            return False
        copied = liveness.copies_of.get(b.id, ())
        if copied and any(other in copied for other in alloc.buffers):
            return False
        keys, ends, ids = ranges[index]
        for k in range(bisect_left(ends, b.start), bisect_right(keys, (b.end, _AFTER_ALL))):
            if _interferes(buffers[ids[k]], b):
                return False
        alloc.buffers.append(b.id)
        alloc.live_out |= b.live_out
        allocation_of[b.id] = index
        add_range(index, b)
        return True

    for b in order:
        if b.kind == "constant":
            allocation_of[b.id] = len(allocations)
            allocations.append(Allocation("constant", b.size_bytes, [b.id], readonly=True))
            continue
        if b.kind == "parameter":
            allocation_of[b.id] = len(allocations)
            allocations.append(Allocation("parameter", b.size_bytes, [b.id], b.live_out,
                                          readonly=not b.aliased_parameter))
            if b.aliased_parameter:
                anchors.add(len(allocations) - 1, b)
                add_range(len(allocations) - 1, b)
            continue
        if b.is_tuple_table and not b.live_out:
            if not liveness.tiled:  # XLA:CPU packs these index tables into the temp allocation; XLA:TPU
                temps.append(b.id)  # counts none in memory_analysis()'s temp (async-start tuples included)
            continue
        if b.is_tuple_table:
            allocation_of[b.id] = len(allocations)
            allocations.append(Allocation("tuple", b.size_bytes, [b.id], b.live_out))
            continue
        if b.size_bytes == 0:
            continue
        done = False
        for operand in liveness.operand_buffers.get(b.id, ()):
            index = allocation_of.get(operand)
            if index is not None and try_assign(index, b):
                done = True
                break
        if not done:
            for index in anchors.candidates(b):  # (every reusable one, last first, but those sure to refuse b)
                if try_assign(index, b):
                    done = True
                    break
        if done:
            continue
        if not b.live_out:
            temps.append(b.id)
            continue
        allocation_of[b.id] = len(allocations)
        allocations.append(Allocation("output", b.size_bytes, [b.id], True))
        anchors.add(len(allocations) - 1, b)
        add_range(len(allocations) - 1, b)
    temp_bytes, peak_time = _peak(liveness, temps, 1 if liveness.tiled else CPU_ALIGNMENT_BYTES)
    return Assignment(allocations, temps, temp_bytes, peak_time)


def _peak(liveness: Liveness, ids: list[int], alignment: int) -> tuple[int, int]:
    """Peak live bytes of the buffers ``ids``, each rounded up to ``alignment`` but the topmost (the one with
    the most rounding), and its time. A buffer that takes over a dying operand in the set
    (``share_candidates``) does not count both at the handover."""
    if not ids:
        return 0, -1
    buffers = liveness.buffers
    n = len(liveness.sequence) + 1
    delta = [0] * (n + 1)
    chosen = set(ids)
    taken: set[int] = set()
    for i in ids:
        b = buffers[i]
        size = -(-b.size_bytes // alignment) * alignment
        delta[b.start] += size
        delta[b.end + 1] -= size
        for cand in b.share_candidates:
            if cand in chosen and cand not in taken:
                taken.add(cand)
                shared = min(b.size_bytes, buffers[cand].size_bytes)
                delta[b.start] -= shared
                delta[b.start + 1] += shared
                break
    live = best = 0
    best_time = 0
    for t in range(n):
        live += delta[t]
        if live > best:
            best, best_time = live, t
    # The heap ends with its topmost buffer, unrounded: take back the largest rounding of those live at the peak.
    slack = max((-(-buffers[i].size_bytes // alignment) * alignment - buffers[i].size_bytes for i in ids
                 if buffers[i].start <= best_time <= buffers[i].end), default=0)
    return best - slack, best_time
