"""The cost record of one instruction, and what a cost rule may ask about its surroundings."""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Mapping, NamedTuple

if TYPE_CHECKING:
    from hloscope.hlo import HloComputation, HloInstruction, HloModule, Shape


class OpCost(NamedTuple):
    """Work of one execution of one instruction. Immutable, its fields read by name (a named tuple: the cost
    walk makes thousands, and a frozen dataclass's ``__init__`` took three times as long).

    Attributes:
        flops: floating-point (and integer) operations; a fused multiply-add counts 2, as XLA's
            ``HloCostAnalysis::kFmaFlops`` does.
        transcendentals: elementwise exp/log/tanh/... evaluations (XLA counts these instead of FLOPs).
        bytes_read: HBM bytes read at the instruction's boundary (operands), a lower bound: on-chip reuse
            and caches are not modelled, re-reads are.
        bytes_written: HBM bytes written at the boundary (the result).
        comm_bytes: bytes this device sends on the wire (collectives only), per the ring algorithm.
        comm_kind: the collective's opcode family (``all-reduce``, ``all-gather``, ...), else ``""``.
        group_size: devices per replica group of a collective (N), else 0.
        flags: caveats, e.g. ``opaque-custom-call``, ``unknown-trip-count``, ``dynamic-shape``.
    """

    flops: float = 0.0
    transcendentals: float = 0.0
    bytes_read: float = 0.0
    bytes_written: float = 0.0
    comm_bytes: float = 0.0
    comm_kind: str = ""
    group_size: int = 0
    flags: frozenset[str] = frozenset()

    @property
    def bytes_accessed(self) -> float:
        """``bytes_read + bytes_written``: the HBM traffic XLA calls "bytes accessed"."""
        return self.bytes_read + self.bytes_written


ZERO = OpCost()


class CostContext:
    """What a cost rule may look up besides its own instruction.

    Attributes:
        module: the module being costed.
        computation: the computation holding the instruction.
        by_name: instruction name -> instruction, for that computation (``HloComputation.instruction_map``: a
            computation not built yet builds only the instructions looked up), made on first use (few rules
            look up another instruction: a ``while``'s trip count; the map of a 23,000-instruction entry took
            ~3 ms).
        shape_of: instruction name -> result shape, for that computation (``HloComputation.shape_of``: read from
            its columns, nothing built). Raises KeyError.
    """

    __slots__ = ("module", "computation", "_by_name", "_computation_cost", "shape_of")

    def __init__(self, module: HloModule, computation: HloComputation,
                 computation_cost: Callable[[str], OpCost]) -> None:
        self.module = module
        self.computation = computation
        self._by_name: Mapping[str, HloInstruction] | None = None
        self._computation_cost = computation_cost
        self.shape_of: Callable[[str], Shape] = computation.shape_of

    @property
    def by_name(self) -> Mapping[str, HloInstruction]:
        found = self._by_name
        if found is None:
            found = self._by_name = self.computation.instruction_map()
        return found

    def operand_shape(self, inst: HloInstruction, index: int) -> Shape:
        """``shape_of`` operand ``index`` of ``inst``. Raises IndexError, KeyError."""
        return self.shape_of(inst.operands[index])

    def computation_cost(self, name: str) -> OpCost:
        """FLOPs, transcendentals, wire bytes and flags of a called computation (fused computation, reducer)
        run once, summed over its instructions; HBM bytes are 0 (its values stay on chip: the caller charges
        its own boundary). Computed once per computation."""
        return self._computation_cost(name)
