"""Per-device memory footprint of one compiled module: what ``compiled.memory_analysis()`` reports, predicted from
the post-optimization HLO text alone, with where the peak is and what fills it.

XLA's ``CompiledMemoryStats`` (``xla/pjrt/pjrt_executable.h``) splits a program's device memory into
argument, output, alias (output bytes that reuse a donated argument's memory) and temp allocations; a program
needs ``argument + output - alias + temp`` bytes while it runs (plus its generated code, which HLO text does
not show). hloscope computes each from the buffers of ``hloscope.memory.liveness`` and the allocations of
``hloscope.memory.assignment``:

* ``argument_bytes``: every entry parameter's buffers (tuple index tables included), padded sizes;
* ``output_bytes``: every buffer that reaches the entry ``ROOT`` (its index tables included);
* ``alias_bytes``: the argument buffers that are also output buffers (``input_output_alias``, donated
  arguments);
* ``temp_bytes``: the peak live bytes of the buffers that get no allocation of their own (the temp set).

Sizes are HBM sizes (``Shape.hbm_size_bytes``: TPU tile padding in, on-chip memory spaces such as VMEM ``S(1)``
out); bytes in host memory (``S(5)``) are ``host_bytes``, not HBM.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from hloscope._gc import paused_gc
from hloscope._record import FrozenRecord, Record

if TYPE_CHECKING:
    from hloscope.hlo import HloModule

__all__ = ["GIB", "LiveBuffer", "MemoryFootprint", "footprint"]

#: Bytes per GiB (2**30), the unit of the verdicts.
GIB = float(1 << 30)
#: How many of the largest live buffers at the peak are kept.
TOP_BUFFERS = 10


class LiveBuffer(FrozenRecord):
    """One buffer live at the peak.

    Attributes:
        instruction, computation: where its first value is defined.
        op_name, source: the framework op name and ``file:line`` of that instruction's metadata ("" if none).
        result_shape: the shape of that value (``"(tuple index table)"`` for a tuple's pointer table).
        size_bytes: its HBM bytes (padded).
        kind: ``parameter``, ``output``, ``constant`` or ``temp``.

    Immutable (``hloscope._record.FrozenRecord``: compared, hashed and printed by these fields).
    """

    __slots__ = ("instruction", "computation", "op_name", "source", "result_shape", "size_bytes", "kind")
    instruction: str
    computation: str
    op_name: str
    source: str
    result_shape: str
    size_bytes: int
    kind: str

    def __init__(self, instruction: str, computation: str, op_name: str, source: str, result_shape: str,
                 size_bytes: int, kind: str) -> None:
        self._init_fields(instruction, computation, op_name, source, result_shape, size_bytes, kind)

    def to_dict(self) -> dict[str, Any]:
        """The fields by name (the report document's form)."""
        return {name: getattr(self, name) for name in self._fields}


class MemoryFootprint(Record):
    """The per-device memory of one module (module docstring for each figure's rule).

    Attributes:
        module: the HLO module name.
        argument_bytes, output_bytes, alias_bytes, temp_bytes: as XLA's ``CompiledMemoryStats`` (bytes).
        host_bytes: bytes of buffers in host memory (``S(5)``), not in HBM.
        peak_instruction, peak_computation: the instruction at which the temp set peaks (the last one that
            defines or reads a buffer live there); "" when there are no temps.
        peak_op_name, peak_source: its framework op name and ``file:line``.
        top_buffers: the largest buffers live at the peak (at most ``TOP_BUFFERS``), largest first, of every kind
            (arguments and outputs live then too).
        scheduled: whether the module was ``is_scheduled=true`` (otherwise the printed order stands in for the
            schedule and the peak is an estimate; ``notes`` says so).
        hbm_capacity_bytes: the chip's HBM per device, when a chip was given (else None).
        notes: caveats in words.

    Compared and printed by these fields (``hloscope._record.Record``), which may be set.
    """

    _fields = ("module", "argument_bytes", "output_bytes", "alias_bytes", "temp_bytes", "host_bytes",
               "peak_instruction", "peak_computation", "peak_op_name", "peak_source", "top_buffers", "scheduled",
               "hbm_capacity_bytes", "notes")
    module: str
    argument_bytes: int
    output_bytes: int
    alias_bytes: int
    temp_bytes: int
    host_bytes: int
    peak_instruction: str
    peak_computation: str
    peak_op_name: str
    peak_source: str
    top_buffers: list[LiveBuffer]
    scheduled: bool
    hbm_capacity_bytes: float | None
    notes: list[str]

    def __init__(self, module: str, argument_bytes: int, output_bytes: int, alias_bytes: int, temp_bytes: int,
                 host_bytes: int = 0, peak_instruction: str = "", peak_computation: str = "", peak_op_name: str = "",
                 peak_source: str = "", top_buffers: list[LiveBuffer] | None = None, scheduled: bool = True,
                 hbm_capacity_bytes: float | None = None, notes: list[str] | None = None) -> None:
        self._init_fields(module, argument_bytes, output_bytes, alias_bytes, temp_bytes, host_bytes, peak_instruction,
                          peak_computation, peak_op_name, peak_source, [] if top_buffers is None else top_buffers,
                          scheduled, hbm_capacity_bytes, [] if notes is None else notes)

    @property
    def total_bytes(self) -> int:
        """Bytes the program needs on the device while it runs: ``argument + output - alias + temp``."""
        return self.argument_bytes + self.output_bytes - self.alias_bytes + self.temp_bytes

    @property
    def headroom_bytes(self) -> float:
        """``hbm_capacity_bytes - total_bytes`` (negative: does not fit); NaN without a chip."""
        return math.nan if self.hbm_capacity_bytes is None else self.hbm_capacity_bytes - self.total_bytes

    @property
    def fits(self) -> bool | None:
        """Whether ``total_bytes`` fits the chip's HBM; None without a chip."""
        return None if self.hbm_capacity_bytes is None else self.total_bytes <= self.hbm_capacity_bytes

    @property
    def verdict(self) -> str:
        """``fits: 12.3 GiB of 16 GiB (3.7 GiB free)``, ``does not fit by 4.2 GiB (20.2 GiB of 16 GiB)`` or
        ``no chip capacity``."""
        if self.hbm_capacity_bytes is None:
            return "no chip capacity"
        need, cap = self.total_bytes / GIB, self.hbm_capacity_bytes / GIB
        if self.fits:
            return f"fits: {need:.3g} GiB of {cap:.3g} GiB ({(cap - need):.3g} GiB free)"
        return f"does not fit by {(need - cap):.3g} GiB ({need:.3g} GiB of {cap:.3g} GiB)"

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict: the fields, ``total_bytes``, ``headroom_bytes`` (null without a chip), ``fits``."""
        out = {name: getattr(self, name) for name in self._fields}  # (copies of the lists, as asdict made)
        out["top_buffers"] = [b.to_dict() for b in self.top_buffers]
        out["notes"] = list(self.notes)
        out["total_bytes"] = self.total_bytes
        out["headroom_bytes"] = None if self.hbm_capacity_bytes is None else self.headroom_bytes
        out["fits"] = self.fits
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> MemoryFootprint:
        """The inverse of ``to_dict`` (derived keys ignored).

        Raises:
            KeyError, TypeError: a missing or mistyped field (the report reader wraps these with the file name).
        """
        names = set(cls._fields)
        kept = {k: v for k, v in data.items() if k in names}
        kept["top_buffers"] = [LiveBuffer(**b) for b in data.get("top_buffers") or ()]
        kept["notes"] = list(data.get("notes") or ())
        return cls(**kept)


def footprint(module: HloModule, chip: Any = None) -> MemoryFootprint:
    """Predict ``compiled.memory_analysis()`` for ``module`` (one device's program) and place its peak.

    Args:
        module: a parsed post-optimization module (``hloscope.parse_hlo``); SPMD-partitioned modules are
            already per device.
        chip: a ``hloscope.roofline.chips.ChipSpec`` (or anything with ``hbm_capacity_bytes``): when given, its
            HBM capacity per device gives ``fits`` and ``headroom_bytes``.

    Checked against XLA on the test generator's programs (CPU and deviceless TPU): benchmarks/memory_vs_xla.py,
    docs/memory.md.
    """
    return footprint_and_model(module, chip)[0]


def footprint_and_model(module: HloModule, chip: Any = None) -> tuple[MemoryFootprint, tuple]:
    """``footprint(module, chip)`` and the model it was made of (the liveness walk and the buffer assignment), for
    a caller about to exit (``forked._child``), which holds them to its end instead of freeing them: freeing the
    walk's objects was 6% of mixtral's footprint, and the process's exit frees nothing."""
    # (imported here: a process that only reads footprints -- the command line's parent, whose forked child
    # computes them -- never loads the memory model)
    from hloscope.memory.assignment import assign_buffers
    from hloscope.memory.liveness import analyze_liveness

    with paused_gc():  # a few objects per instruction, all kept until the footprint is made: no garbage
        liveness = analyze_liveness(module)
        assignment = assign_buffers(liveness)
    return _footprint_of(module, chip, liveness, assignment), (liveness, assignment)


def _footprint_of(module: HloModule, chip: Any, liveness: Any, assignment: Any) -> MemoryFootprint:
    """The footprint of ``module`` from its liveness walk and buffer assignment."""
    buffers = liveness.buffers
    arguments = [b for b in buffers if b.kind == "parameter"]
    argument_bytes = sum(b.size_bytes for b in arguments)
    output_bytes = sum(b.size_bytes for b in buffers if b.live_out)
    alias_bytes = sum(b.size_bytes for b in arguments if b.live_out)
    host_bytes = sum(b.host_bytes for b in buffers)
    notes = []
    if not liveness.scheduled:
        notes.append("the module is not scheduled (is_scheduled=true missing): the printed order stands in for "
                     "XLA's schedule, so the temp peak is an estimate")
    fp = MemoryFootprint(module.name, argument_bytes, output_bytes, alias_bytes, assignment.temp_bytes, host_bytes,
                         scheduled=liveness.scheduled, notes=notes)
    if chip is not None and getattr(chip, "hbm_capacity_bytes", None):
        fp.hbm_capacity_bytes = float(chip.hbm_capacity_bytes)
    t = assignment.peak_time
    if t < 0 or t >= len(liveness.sequence):
        return fp
    comp, inst = liveness.sequence[t]
    fp.peak_computation, fp.peak_instruction = comp, inst
    fp.peak_op_name, fp.peak_source = _metadata(module, comp, inst)
    live = sorted((b for b in buffers if b.start <= t <= b.end and b.size_bytes > 0),
                  key=lambda b: (-b.size_bytes, b.id))[:TOP_BUFFERS]
    for b in live:
        bcomp, binst = b.defined_by
        op_name, source = _metadata(module, bcomp, binst)
        shape = "(tuple index table)" if b.is_tuple_table else str(b.shape)
        fp.top_buffers.append(LiveBuffer(binst, bcomp, op_name, source, shape, b.size_bytes, b.kind))
    return fp


def _metadata(module: HloModule, computation: str, instruction: str) -> tuple[str, str]:
    """(op_name, source) of an instruction's metadata; ("", "") when it has none or cannot be found."""
    try:
        comp = module.computation(computation)
        inst = comp.instruction_at(comp.index_of(instruction))
    except (KeyError, ValueError, IndexError):
        return "", ""
    md = inst.metadata
    return (md.op_name, md.source) if md is not None else ("", "")
