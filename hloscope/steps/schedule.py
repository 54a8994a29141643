"""Which collectives *can* overlap, from the schedule alone: the roofline work XLA placed between each async
collective's ``-start`` and its ``-done`` (:func:`async_overlap`).

A post-optimization module is scheduled: its instructions are printed in the order they run. An async
collective (``all-reduce-start``/``-done``, ``all-gather-start``/``-done``, ``collective-permute-start``/``-done``,
``async-start``/``-update``/``-done`` wrapping a collective, ``send``/``send-done``, ``recv``/``recv-done``) is in
flight from its start to its done, and only the work scheduled between them can hide it (XLA's latency-hiding
scheduler places that work there; "How to Scale Your Model", Part 1, on overlapping communication with compute).
A synchronous collective (``all-reduce``) hides nothing.

For an async pair that runs ``n`` times per module run, with ``R_comm`` its roofline time (per module run, the
ops table's ``roofline_s`` of the start) and ``W`` the roofline time of the non-communication work between start
and done (per module run: the ops between, and everything the ``while``/``call``/``conditional`` between call,
transitively)::

    overlap_window_s   = W
    exposed (roofline) = max(R_comm - W, 0)          -- a synchronous collective: R_comm

and the module's ``exposed_comm_roofline_s`` is the sum over its collectives: a lower bound on the
communication the device waits for, were every op at its roof (more work between start and done cannot hide
more than itself).
"""

from __future__ import annotations

from itertools import compress, repeat
from operator import eq, ne, or_
from typing import TYPE_CHECKING, Iterable

from hloscope._columns import column_array, column_codes, column_list

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

    from hloscope.hlo import HloComputation, HloModule

_CONTROL = frozenset({"while", "call", "conditional"})


def async_overlap(modules: Iterable[HloModule], ops: pd.DataFrame
                  ) -> tuple[dict[tuple[str, str], float], dict[str, float]]:
    """The overlap window of every async collective and each module's exposed communication at the roof.

    Args:
        modules: the scheduled modules behind ``ops``.
        ops: the scored ops table (``roofline.tables.OP_COLUMNS``; ``roofline_s`` per module run).

    Returns:
        ``(windows, exposed)``: (module, start instruction) -> ``overlap_window_s`` (seconds per module run) for
        each async collective whose done was found; module -> ``exposed_comm_roofline_s`` (seconds per module run;
        NaN when a collective's roofline time is unknown). Modules without collectives map to 0.
    """
    import math

    windows: dict[tuple[str, str], float] = {}
    exposed: dict[str, float] = {}
    # The table's columns read once as lists (a pandas mask, .loc and groupby per module cost about a
    # millisecond on the pytest plugin's small programs: a third of their analysis); rows split by module.
    modules = list(modules)
    communicating = _communicating(ops)
    single = _single_module(ops)
    if single is not None:  # (one module: the collectives' rows alone, unless one is asynchronous)
        found = _synchronous_exposed(ops, communicating) if any(m.name == single for m in modules) else None
        if found is not None:
            exposed = {m.name: 0.0 for m in modules}  # (a module without rows: 0, as below)
            exposed[single] = found
            return windows, exposed
    columns = [column_list(ops, c) for c in ("module", "instruction", "opcode", "computation")]
    columns += [communicating.tolist(), column_list(ops, "roofline_s")]
    names = columns[0]
    n = len(names)
    rows_of: dict[str, list[int] | None] = {}
    if n and names.count(names[0]) == n:  # (one module owns every row: the common case)
        rows_of[names[0]] = None
    else:
        for i, m in enumerate(names):
            rows_of.setdefault(m, []).append(i)
    for module in modules:
        mine = rows_of.get(module.name, [])
        if mine is None:
            _, instruction, opcode, computation, is_comm, roofline = columns
        else:
            _, instruction, opcode, computation, is_comm, roofline = ([c[i] for i in mine] for c in columns)
        comm_rows = list(compress(range(len(is_comm)), is_comm))
        comm = {instruction[i] for i in comm_rows}
        roof = {instruction[i]: roofline[i] for i in comm_rows}
        pending = set(comm)
        total = 0.0
        # The work between a start and its done, by instruction: only where a collective is asynchronous (a
        # start, send or recv: ``_async_spans``, which pairs nothing else; mixtral's 28,000 rows hold none, and
        # then no computation is walked).
        opcodes_of_comm = {opcode[i] for i in comm_rows}
        if any(op.endswith("-start") or op in ("send", "recv") for op in opcodes_of_comm):
            work = {name: 0.0 if r != r else r for name, r, c in zip(instruction, roofline, is_comm) if not c}
            by_comp = _ComputationWork(computation, roofline, is_comm)
            homes = {computation[i] for i in comm_rows}  # (instruction names are unique in a module)
            for comp in module.computations:
                if comp.name not in homes:
                    continue
                for start, w in _pairs(module, comp, comm, work, by_comp):
                    windows[(module.name, start)] = w
                    r = roof.get(start, math.nan)
                    total += max(r - w, 0.0) if r == r else math.nan
                    pending.discard(start)
        # Synchronous collectives, and starts whose done was not found: fully exposed (summed in the table's
        # order: a set's order changes with the interpreter's hash seed, and the sum's last bit with it).
        for i in comm_rows:
            name = instruction[i]
            if name in pending and not name.endswith("-done"):
                total += roof.get(name, math.nan)
        exposed[module.name] = total
    return windows, exposed


def _single_module(ops: pd.DataFrame) -> str | None:
    """The module owning every row of ``ops`` when the table keeps its module column as codes into one name
    (``_columns.column_codes``), else None (several modules, or a table read otherwise)."""
    coded = column_codes(ops, "module")
    if coded is None or len(ops) == 0:
        return None
    _, categories = coded
    return categories[0] if len(categories) == 1 else None


def _synchronous_exposed(ops: pd.DataFrame, communicating: np.ndarray) -> float | None:
    """A one-module table's exposed communication at the roof when none of its collectives is asynchronous (no
    start, send or recv: each is exposed in full, the done of none to pair), read from the collectives' rows
    alone; None when one is asynchronous (``async_overlap`` walks the schedule then). The same sum, in the same
    row order, as ``async_overlap``'s loop makes."""
    import math

    import numpy as np

    rows = np.flatnonzero(communicating)
    opcodes = column_array(ops, "opcode", object)[rows].tolist()
    if any(op.endswith("-start") or op in ("send", "recv") for op in set(opcodes)):
        return None
    names = column_array(ops, "instruction", object)[rows].tolist()
    roof = dict(zip(names, column_array(ops, "roofline_s")[rows].tolist()))
    total = 0.0
    for name in names:
        if not name.endswith("-done"):
            total += roof.get(name, math.nan)
    return total


def _communicating(ops: pd.DataFrame) -> np.ndarray:
    """Whether each row of ``ops`` is a collective or an op with a comm_kind (``category == "collective" or
    str(comm_kind) != ""``), as a bool array: by C-level maps over the two columns, or, where the table keeps them
    as codes (``_columns.column_codes``), once per distinct string, spread over the rows by their codes."""
    import numpy as np

    coded = [column_codes(ops, c) for c in ("category", "comm_kind")]
    if None in coded:
        return np.fromiter(map(or_, map(eq, column_list(ops, "category"), repeat("collective")),
                               map(ne, map(str, column_list(ops, "comm_kind")), repeat(""))), bool, len(ops))
    (category_codes, categories), (kind_codes, kinds) = coded
    return (np.array([c == "collective" for c in categories.tolist()], dtype=bool)[category_codes]
            | np.array([str(k) != "" for k in kinds.tolist()], dtype=bool)[kind_codes])


class _ComputationWork:
    """computation -> roofline seconds (per module run) of its non-communication ops, from one module's ops-table
    columns (``computation``, ``roofline_s``, and whether each row is communication), made on first use: only a
    ``while``/``call``/``conditional`` scheduled inside an async window needs it. The sum is pandas'
    ``groupby(...).sum()`` (NaN skipped)."""

    __slots__ = ("_computation", "_roofline", "_is_comm", "_sums")

    def __init__(self, computation: list[str], roofline: list[float], is_comm: list[bool]) -> None:
        self._computation, self._roofline, self._is_comm = computation, roofline, is_comm
        self._sums: dict[str, float] | None = None

    def get(self, computation: str, default: float) -> float:
        if self._sums is None:
            import pandas as pd

            work = [not c for c in self._is_comm]
            self._sums = pd.Series(list(compress(self._roofline, work)), dtype=float).groupby(
                list(compress(self._computation, work))).sum().to_dict()
        return self._sums.get(computation, default)


def async_done_pairs(modules: Iterable[HloModule]) -> dict[tuple[str, str], str]:
    """(module, ``*-done`` instruction) -> its ``*-start`` instruction (through ``async-update`` chains), for
    every async op of every computation (``_async_spans``)."""
    return {(module.name, comp.names[d]): comp.names[k]
            for module in modules for comp in module.computations for k, d, _ in _async_spans(comp)}


def _async_spans(comp: HloComputation) -> list[tuple[int, int, frozenset[str]]]:
    """``(start, done, updates)`` of every async op of ``comp`` (``*-start``, ``send``, ``recv``) whose done
    follows it: the indices of the start and of a done, and the names of the ``*-update`` ops between them. A
    done's (or an update's) first operand is its start, or an update of it."""
    origin: dict[str, int] = {}  # start or update name -> the start's index
    updates: dict[int, set[str]] = {}
    out = []
    opcodes = comp.opcodes
    asynchronous = {op for op in set(opcodes) if op.endswith(("-start", "-update", "-done")) or op in ("send", "recv")}
    if not asynchronous:
        return out
    names = comp.names
    for i in [i for i, op in enumerate(opcodes) if op in asynchronous]:
        name, op = names[i], opcodes[i]
        if op.endswith("-start") or op in ("send", "recv"):
            origin[name] = i
        elif op.endswith(("-update", "-done")):
            operands = comp.operands_at(i)
            k = origin.get(operands[0]) if operands else None
            if k is None:
                continue
            if op.endswith("-update"):
                origin[name] = k
                updates.setdefault(k, set()).add(name)
            else:
                out.append((k, i, frozenset(updates.get(k, ()))))
    return out


def _pairs(module: HloModule, comp: HloComputation, comm: set[str], work: dict[str, float],
           by_comp: _ComputationWork) -> list[tuple[str, float]]:
    """``(start, W)`` of every async collective of ``comp`` whose done follows it in the schedule (its first
    done): ``W`` sums the work scheduled between, other communication and the start's own updates left out."""
    names, opcodes = comp.names, comp.opcodes
    out = []
    seen: set[int] = set()
    for k, d, own_updates in _async_spans(comp):
        if names[k] not in comm or k in seen:
            continue
        seen.add(k)
        between = 0.0
        for j in range(k + 1, d):
            if names[j] in comm or names[j] in own_updates:
                continue
            between += work.get(names[j], 0.0)
            if opcodes[j] in _CONTROL:
                between += _called_work(module, comp.instruction_at(j), by_comp, set())
        out.append((names[k], between))
    return out


def _called_work(module: HloModule, inst, by_comp: _ComputationWork, seen: set[str]) -> float:
    """Roofline seconds (per module run) of the non-communication ops of every computation ``inst`` calls,
    transitively through control flow (fusions are one row of the ops table each: nothing to add)."""
    total = 0.0
    for called in inst.called_computations.values():
        for cname in called:
            if cname in seen:
                continue
            seen.add(cname)
            total += by_comp.get(cname, 0.0)
            comp = module.computation(cname)
            for j, op in enumerate(comp.opcodes):
                if op in _CONTROL:
                    total += _called_work(module, comp.instruction_at(j), by_comp, seen)
    return total
