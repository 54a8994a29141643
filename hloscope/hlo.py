"""The in-memory model of an XLA HLO module: plain data, no I/O, no cost logic.

The names follow XLA's own (``xla/hlo/ir/hlo_module.h``, ``hlo_computation.h``, ``hlo_instruction.h``,
``xla/shape.h``). Every record is read-only after parsing. Typed attribute values are small records: replica groups
here, windows, convolution dimension numbers, slices, padding and stack frames in ``hloscope.hlo_values`` (read from
here too); attributes hloscope does not know are kept as their raw text. Two things are made on first use rather
than by the parser, invisibly to a reader: an instruction's decoded attributes, and the instructions of a
computation the parser handed over as columns (``HloComputation``, ``InstructionSource``).

Units: sizes are bytes (``*_bytes``); nothing here has a time.
"""

from __future__ import annotations

import json
import math
from itertools import chain
from operator import attrgetter
from types import MappingProxyType
from typing import Any, Iterable, Iterator, Mapping, NamedTuple, Protocol

from hloscope._record import FrozenRecord

#: Sets a field of a ``FrozenRecord`` in its ``__init__`` (its own ``__setattr__`` refuses).
_set = object.__setattr__

# --------------------------------------------------------------------------------------------------
# Element types
# --------------------------------------------------------------------------------------------------

#: Bits per element of each XLA ``PrimitiveType`` as printed in HLO text (``xla/xla_data.proto``,
#: ``primitive_util::BitWidth``). ``pred`` is stored in one byte. Sub-byte types (``s4``, ``u4``, ``s2``,
#: ``u2``, ``s1``, ``u1``, the f4/f6 types) are packed, so an array's size is ``ceil(elements * bits / 8)``.
ELEMENT_BITS: Mapping[str, int] = {
    "pred": 8,
    "s1": 1, "u1": 1, "s2": 2, "u2": 2, "s4": 4, "u4": 4,
    "s8": 8, "u8": 8, "s16": 16, "u16": 16, "s32": 32, "u32": 32, "s64": 64, "u64": 64,
    "f4e2m1fn": 4, "f6e2m3fn": 6, "f6e3m2fn": 6,
    "f8e3m4": 8, "f8e4m3": 8, "f8e4m3fn": 8, "f8e4m3fnuz": 8, "f8e4m3b11fnuz": 8,
    "f8e5m2": 8, "f8e5m2fnuz": 8, "f8e8m0fnu": 8,
    "bf16": 16, "f16": 16, "f32": 32, "f64": 64,
    "c64": 64, "c128": 128,
    # Not arrays: a token carries ordering only, an opaque value is backend-defined.
    "token": 0, "opaque": 0,
}

FLOAT_TYPES = frozenset(t for t in ELEMENT_BITS if t.startswith(("f", "bf")))
COMPLEX_TYPES = frozenset({"c64", "c128"})
INTEGER_TYPES = frozenset(t for t in ELEMENT_BITS if t[0] in "su")

#: The memory space of host memory in a layout (``S(5)``): XLA's ``Layout::kHostMemorySpace`` (xla/layout.h),
#: where host offloading (``jax.memory.Space.Host``, ``MoveToHost``) puts buffers.
HOST_MEMORY_SPACE = 5


class Layout(FrozenRecord):
    """An array layout as printed between braces after the dims: ``{1,0:T(8,128)(2,1)S(1)}``.

    Attributes:
        minor_to_major: dimension numbers, most minor first (XLA ``Layout::minor_to_major``).
        tiles: TPU/GPU tiling, one tuple of tile dims per ``T(...)`` group, outermost first
            (``T(8,128)(2,1)`` -> ``((8, 128), (2, 1))``). Empty when untiled.
        memory_space: the ``S(n)`` memory space; 0 is device HBM, other values are backend-defined
            (on TPU 1 is VMEM, 5 is host memory).
        raw: the full text between the braces, including parts hloscope does not interpret.

    Immutable (``hloscope._record.FrozenRecord``: compared, hashed and printed by its fields).
    """

    __slots__ = ("minor_to_major", "tiles", "memory_space", "raw")
    minor_to_major: tuple[int, ...]
    tiles: tuple[tuple[int, ...], ...]
    memory_space: int
    raw: str

    def __init__(self, minor_to_major: tuple[int, ...], tiles: tuple[tuple[int, ...], ...] = (),
                 memory_space: int = 0, raw: str = "") -> None:
        _set(self, "minor_to_major", minor_to_major)
        _set(self, "tiles", tiles)
        _set(self, "memory_space", memory_space)
        _set(self, "raw", raw)


class Shape(FrozenRecord):
    """An XLA shape: an array, a tuple of shapes (of any depth), a token or an opaque value.

    Attributes:
        element_type: lower-case XLA primitive type (``"f32"``, ``"bf16"``, ``"s4"``, ...), ``"tuple"``,
            ``"token"`` or ``"opaque"``.
        dims: array dimensions, major to minor as printed; for a dynamic dim (``<=8``) the bound.
        dynamic_dims: per dim, True where the dim is dynamic (printed ``<=N``).
        layout: the layout, or None when the text printed none.
        tuple_shapes: element shapes of a tuple; empty for arrays.
        element_count: number of elements of an array shape (1 for a scalar); for a tuple, the sum over its
            leaves.
        size_bytes: bytes of the data, packed: ``ceil(elements * bits / 8)`` per array, summed over tuple
            leaves. Excludes tuple index tables and tiling padding, as XLA's ``HloCostAnalysis`` does
            (``ShapeUtil::ByteSizeOf`` of each leaf array). Dynamic dims count at their bound.
        padded_size_bytes: bytes the array occupies in memory with its layout's first tile applied: each of
            the most-minor dims the tile covers is rounded up to a multiple of the tile (a scalar counts as one
            element padded to the tile). Equals ``size_bytes`` for untiled layouts. Summed over tuple leaves.
            TPU layouts tile (``{1,0:T(8,128)(2,1)}``), and XLA's TPU cost analysis charges these padded sizes
            (measured: ``f32[8,16]{1,0:T(8,128)}`` counts 4096 bytes; see docs/xla_cost_rules.md).
        is_dynamic: whether a dim (of any tuple leaf) is dynamic (printed ``<=N``).
        hbm_size_bytes: ``padded_size_bytes`` of the leaves in device memory (memory space 0, HBM): what moving
            the value costs in HBM traffic. Leaves in another space are on chip (TPU VMEM ``S(1)``, ...) or in
            host memory (``S(5)``) and count 0 here.
        host_size_bytes: ``padded_size_bytes`` of the leaves in host memory (``S(5)``, XLA's host-offload
            memory space; ``xla/layout.h`` ``kHostMemorySpace``).

    The sizes are computed at construction (not passed in), and are plain attributes: the cost model reads
    them per instruction, often through ``operator.attrgetter`` over a column of shapes, and the parser shares
    one ``Shape`` per distinct shape text. Immutable (``hloscope._record.FrozenRecord``): compared, hashed and
    printed by the five fields passed in.

    >>> Shape("bf16", (2, 3)).size_bytes
    12
    """

    __slots__ = ("element_type", "dims", "dynamic_dims", "layout", "tuple_shapes", "element_count", "size_bytes",
                 "padded_size_bytes", "is_dynamic", "hbm_size_bytes", "host_size_bytes", "_text")
    _compared = ("element_type", "dims", "dynamic_dims", "layout", "tuple_shapes")
    element_type: str
    dims: tuple[int, ...]
    dynamic_dims: tuple[bool, ...]
    layout: Layout | None
    tuple_shapes: tuple[Shape, ...]
    element_count: int
    size_bytes: int
    padded_size_bytes: int
    is_dynamic: bool
    hbm_size_bytes: int
    host_size_bytes: int
    _text: str | None

    def __init__(self, element_type: str, dims: tuple[int, ...] = (), dynamic_dims: tuple[bool, ...] = (),
                 layout: Layout | None = None, tuple_shapes: tuple[Shape, ...] = ()) -> None:
        setter = _set
        setter(self, "element_type", element_type)
        setter(self, "dims", dims)
        setter(self, "dynamic_dims", dynamic_dims)
        setter(self, "layout", layout)
        setter(self, "tuple_shapes", tuple_shapes)
        setter(self, "_text", None)
        if self.element_type == "tuple":
            leaves = self.tuple_shapes
            sizes = (sum(x.element_count for x in leaves), sum(x.size_bytes for x in leaves),
                     sum(x.padded_size_bytes for x in leaves), any(x.is_dynamic for x in leaves))
        elif self.element_type in ("token", "opaque"):
            sizes = (0, 0, 0, any(self.dynamic_dims))
        else:
            n = math.prod(self.dims)
            size = (n * ELEMENT_BITS.get(self.element_type, 0) + 7) // 8
            sizes = (n, size, self._padded_leaf_bytes() if self.layout is not None and self.layout.tiles
                     else size, any(self.dynamic_dims))
        setter(self, "element_count", sizes[0])
        setter(self, "size_bytes", sizes[1])
        setter(self, "padded_size_bytes", sizes[2])
        setter(self, "is_dynamic", sizes[3])
        # Where the bytes live (``Layout.memory_space``): device memory (HBM, space 0), host memory (space 5,
        # XLA's host-offload memory space ``S(5)``), or on chip (every other space: TPU VMEM ``S(1)``,
        # semaphores ``S(2)``, SMEM ``S(6)``...), which is no HBM traffic.
        if self.element_type == "tuple":
            hbm = sum(x.hbm_size_bytes for x in self.tuple_shapes)
            host = sum(x.host_size_bytes for x in self.tuple_shapes)
        else:
            space = self.layout.memory_space if self.layout is not None else 0
            hbm = sizes[2] if space == 0 else 0
            host = sizes[2] if space == HOST_MEMORY_SPACE else 0
        setter(self, "hbm_size_bytes", hbm)
        setter(self, "host_size_bytes", host)

    @property
    def is_tuple(self) -> bool:
        return self.element_type == "tuple"

    @property
    def is_array(self) -> bool:
        return self.element_type not in ("tuple", "token", "opaque")

    def _padded_leaf_bytes(self) -> int:
        layout = self.layout
        tile = layout.tiles[0]
        m2m = layout.minor_to_major or tuple(range(len(self.dims) - 1, -1, -1))
        if len(m2m) != len(self.dims) or sorted(m2m) != list(range(len(self.dims))):
            raise ValueError(f"layout {{{layout.raw}}}: minor_to_major {list(m2m)} is not a permutation of the "
                             f"{len(self.dims)} dimensions of {self.element_type}{list(self.dims)}")
        physical = [self.dims[d] for d in reversed(m2m)] or [1]  # major to minor
        k = len(tile)
        if k > len(physical):
            physical = [1] * (k - len(physical)) + physical
        for i, t in enumerate(tile):
            j = len(physical) - k + i
            if t > 0:
                physical[j] = -(-physical[j] // t) * t
        bits = ELEMENT_BITS.get(self.element_type, 0)
        return (math.prod(physical) * bits + 7) // 8

    def leaves(self) -> Iterator[Shape]:
        """The array (and token) shapes of a tuple, depth first; the shape itself for an array."""
        if self.is_tuple:
            for s in self.tuple_shapes:
                yield from s.leaves()
        else:
            yield self

    def __str__(self) -> str:
        """``f32[8,<=16]``, ``(f32[2], s32[])``: type and dims as XLA prints them, without the layout (made once:
        a module shares one ``Shape`` per distinct text among many instructions)."""
        text = self._text
        if text is None:
            if self.is_tuple:
                text = "(" + ", ".join(str(s) for s in self.tuple_shapes) + ")"
            elif not self.is_array:
                text = self.element_type
            else:
                dynamic = self.dynamic_dims or (False,) * len(self.dims)
                text = f"{self.element_type}[{','.join(('<=' if d else '') + str(n) for n, d in zip(self.dims, dynamic))}]"
            _set(self, "_text", text)
        return text


# --------------------------------------------------------------------------------------------------
# Typed attribute values
# --------------------------------------------------------------------------------------------------


class ReplicaGroups:
    """Replica groups of a collective, with the form they were printed in. Read-only.

    Attributes:
        groups: each group's replica (or, with ``use_global_device_ids``, global device) ids. Empty means "one
            group of every replica/partition", as XLA prints ``replica_groups={}``. For the iota and mesh
            forms the groups are listed on first access (a mesh may number up to 2**20 devices).
        form: ``"explicit"``, ``"iota"`` or ``"mesh"``.
        raw: the text as printed.
        group_size: devices per group (the first group's, for explicit groups: XLA requires equal groups), or
            None when the groups are empty (all replicas/partitions). Known without listing the groups.
        num_groups: how many groups (0 for empty groups).

    Forms (XLA ``hlo_parser.cc``, ``ParseCollectiveDeviceListBase``; ``IotaReplicaGroupList``,
    ``MeshAxesReplicaGroupList``): explicit ``{{0,1},{2,3}}``, iota ``[2,4]<=[8]`` or ``[4,2]<=[2,4]T(1,0)``, and
    the mesh-axes form ``mesh['x'=2,'y'=4] {'y'}`` or ``mesh['x'=2,'y'=4], device_ids=([4,2]T(1,0)) {'y'}``
    (groups vary along the named axes, all others fixed; ``hloscope.parsers._hlo_groups`` says how).
    """

    __slots__ = ("form", "raw", "group_size", "num_groups", "_groups", "_expand")

    def __init__(self, groups: tuple[tuple[int, ...], ...] = (), form: str = "explicit", raw: str = "") -> None:
        self.form = form
        self.raw = raw
        self._groups: tuple[tuple[int, ...], ...] | None = groups
        self._expand: Any = None
        self.group_size: int | None = len(groups[0]) if groups else None
        self.num_groups = len(groups)

    @classmethod
    def lazy(cls, form: str, raw: str, group_size: int, num_groups: int, expand: Any) -> ReplicaGroups:
        """Groups of known size and count, listed by ``expand()`` (a function) on first access to ``groups``."""
        out = cls((), form, raw)
        out._groups, out._expand, out.group_size, out.num_groups = None, expand, group_size, num_groups
        return out

    @property
    def groups(self) -> tuple[tuple[int, ...], ...]:
        groups = self._groups
        if groups is None:
            groups = self._groups = self._expand()
            self._expand = None
        return groups

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ReplicaGroups):
            return NotImplemented
        return (self.form, self.group_size, self.num_groups) == (other.form, other.group_size, other.num_groups) \
            and self.groups == other.groups

    def __hash__(self) -> int:
        return hash((self.form, self.group_size, self.num_groups))

    def __repr__(self) -> str:
        return f"ReplicaGroups({self.raw or self.groups!r}, form={self.form!r}, group_size={self.group_size})"


class Metadata(NamedTuple):
    """``metadata={...}`` of an instruction (XLA ``OpMetadata``), with the stack frame resolved. Immutable, read
    by name (a named tuple: one is made per distinct metadata text, thousands in a module, and a frozen
    dataclass took three times as long to make).

    ``source_file``/``source_line`` come from the printed fields or, for newer JAX, from
    ``stack_frame_id`` resolved through the module's ``StackFrames`` table to its innermost frame.
    """

    op_type: str = ""
    op_name: str = ""
    source_file: str = ""
    source_line: int = 0
    stack_frame_id: int = 0
    raw: str = ""

    @property
    def source(self) -> str:
        """``file:line``, or ``""`` when the metadata has no source location."""
        return f"{self.source_file}:{self.source_line}" if self.source_file else ""


# --------------------------------------------------------------------------------------------------
# Instructions, computations, modules
# --------------------------------------------------------------------------------------------------

#: Attribute keys whose value names called computations, mapped to the role hloscope files them under.
CALLED_COMPUTATION_ROLES: Mapping[str, str] = {
    "calls": "calls",
    "to_apply": "to_apply",
    "condition": "condition",
    "body": "body",
    "branch_computations": "branch_computations",
    "true_computation": "branch_computations",
    "false_computation": "branch_computations",
    "async_wrapped_computation": "calls",
    "select": "select",
    "scatter": "scatter",
}


class DecodedAttributes(NamedTuple):
    """The lazily decoded part of an instruction (see ``HloInstruction``)."""

    attributes: Mapping[str, Any]
    metadata: Metadata | None
    backend_config_text: str
    frontend_attributes: Mapping[str, str]
    sharding: str


class AttributeDecoder(Protocol):
    """Turns an instruction's kept attribute text into ``DecodedAttributes`` (implemented by the parser)."""

    source: str

    def decode(self, inst: HloInstruction) -> DecodedAttributes: ...


_NO_CALLS: Mapping[str, tuple[str, ...]] = MappingProxyType({})
_NAME = attrgetter("name")
#: ``HloComputation.instruction`` lookups by a scan of the names before it builds a name -> index dict.
_SCANS_BEFORE_INDEX = 8
#: Instructions ``HloComputation.instruction_at`` builds one by one before it builds them all at once.
_BUILT_ALONE_MAX = 8
_OPCODE = attrgetter("opcode")
_SHAPE = attrgetter("shape")
_OPERANDS = attrgetter("operands")
_NOTHING_DECODED = DecodedAttributes(MappingProxyType({}), None, "", MappingProxyType({}), "")


class HloInstruction:
    """One HLO instruction (XLA ``HloInstruction``). Read-only by convention once parsed.

    The structural fields are set when parsing; the attribute fields (``attributes``, ``metadata``,
    ``backend_config_text``, ``frontend_attributes``, ``sharding``) are decoded from the kept attribute text on
    first access, which keeps parsing a multi-megabyte module fast. A malformed attribute value therefore
    raises ``HloParseError`` (naming file and line) when first read.

    Attributes:
        name: instruction name without the ``%`` sigil, unique in its computation.
        opcode: XLA opcode as printed (``"fusion"``, ``"all-reduce-start"``, ...). Opcodes hloscope does not
            know are kept as printed; ``HloModule.unknown_opcodes`` lists them.
        shape: result shape.
        operands: operand instruction names, in order.
        called_computations: role -> called computation names (roles ``calls``, ``to_apply``,
            ``condition``, ``body``, ``branch_computations``; ``calls`` also holds an async op's wrapped
            computation).
        is_root: True for the computation's ``ROOT``.
        line: 1-based line of the instruction in its source text (0 when unknown).
        literal: the literal text of a ``constant``, else ``""``.
        parameter_number: a ``parameter``'s index, else -1.
        attributes: every other ``key=value`` after the operand list; typed where hloscope knows the key
            (see ``parsers._hlo_attrs``), else the raw text.
        metadata: ``metadata={...}`` or None; ``source_file``/``source_line`` resolved through the module's
            stack frame table when only ``stack_frame_id`` is printed.
        backend_config_text: the raw ``backend_config`` (``backend_config`` gives it parsed as JSON).
        frontend_attributes: ``frontend_attributes={k="v",...}``.
        sharding: raw ``sharding={...}`` text, or ``""``.
    """

    __slots__ = ("name", "opcode", "shape", "operands", "called_computations", "is_root", "line", "literal",
                 "parameter_number", "attribute_text", "_decoder", "_decoded")

    def __init__(
        self,
        name: str,
        opcode: str,
        shape: Shape,
        operands: tuple[str, ...] = (),
        called_computations: Mapping[str, tuple[str, ...]] = _NO_CALLS,
        is_root: bool = False,
        line: int = 0,
        literal: str = "",
        parameter_number: int = -1,
        attribute_text: str = "",
        decoder: AttributeDecoder | None = None,
    ) -> None:
        self.name = name
        self.opcode = opcode
        self.shape = shape
        self.operands = operands
        self.called_computations = called_computations
        self.is_root = is_root
        self.line = line
        self.literal = literal
        self.parameter_number = parameter_number
        self.attribute_text = attribute_text
        self._decoder = decoder
        self._decoded: DecodedAttributes | None = None if attribute_text else _NOTHING_DECODED

    def _decode(self) -> DecodedAttributes:
        decoded = self._decoded
        if decoded is None:
            assert self._decoder is not None
            decoded = self._decoded = self._decoder.decode(self)
        return decoded

    @property
    def attributes(self) -> Mapping[str, Any]:
        return self._decode().attributes

    @property
    def metadata(self) -> Metadata | None:
        if self._decoded is None:
            # Read the metadata alone when the decoder can (the ops table reads it for every row).
            alone = getattr(self._decoder, "metadata_of", None)
            if alone is not None:
                md = alone(self)
                if md is not False:
                    return md
        return self._decode().metadata

    def attribute(self, key: str, default: Any = None) -> Any:
        """``attributes.get(key, default)``, read from ``key``'s printed text alone when the decoder can (a
        fusion's ``kind`` or ``output_to_operand_aliasing``, read for every fusion by the ops table and the
        memory model), else from the decoded attributes."""
        if self._decoded is None:
            alone = getattr(self._decoder, "attribute_alone", None)
            if alone is not None:
                known, value = alone(self, key, default)
                if known:
                    return value
        return self.attributes.get(key, default)

    @property
    def backend_config_text(self) -> str:
        return self._decode().backend_config_text

    @property
    def frontend_attributes(self) -> Mapping[str, str]:
        return self._decode().frontend_attributes

    @property
    def sharding(self) -> str:
        return self._decode().sharding

    @property
    def backend_config(self) -> Any:
        """``backend_config`` parsed as JSON (a dict for the GPU/CPU/TPU configs JAX emits).

        Returns the raw string when it is not JSON (older XLA printed quoted strings), and None when
        the instruction has no backend config.
        """
        text = self.backend_config_text
        if not text:
            return None
        try:
            return json.loads(text)
        except ValueError:
            return text

    def calls(self) -> tuple[str, ...]:
        """All called computation names, in role order (fusion body, to_apply, condition, body, branches)."""
        out: tuple[str, ...] = ()
        for names in self.called_computations.values():
            out += names
        return out

    def __repr__(self) -> str:
        return f"HloInstruction({self.name!r}, {self.opcode!r}, {self.shape})"


class InstructionSource(Protocol):
    """A parser's kept form of a computation body whose instructions are built on first use.

    Columns run over the instructions in printed order; ``build`` makes one instruction, ``build_all`` every
    one (both must give equal results for the same index, and must not fail: the parser checks the body when
    it reads it).
    """

    names: tuple[str, ...]
    opcodes: tuple[str, ...]
    shapes: tuple[Shape, ...]
    #: parameter number -> index of that ``parameter`` instruction.
    parameter_index: Mapping[int, int]

    def build(self, index: int) -> HloInstruction: ...

    def build_all(self) -> list[HloInstruction]: ...

    def operands(self, index: int) -> tuple[str, ...]: ...

    def operand_names(self, indices: Iterable[int] | None = None) -> list[str]: ...

    def operand_users(self, names: set[str]) -> dict[str, list[int]]: ...


class HloComputation:
    """A named list of instructions in order, one of them ``ROOT`` (XLA ``HloComputation``).

    Two ways to read it. ``instructions`` is the tuple of ``HloInstruction`` objects. The column view --
    ``names``, ``opcodes``, ``shapes``, ``parameter_index``, ``operands_at``, ``operand_lists``, ``operand_names``,
    ``index_of``, ``shape_of``, ``instruction_at``, ``instruction`` -- answers without building every instruction when the parser handed
    the body over as an ``InstructionSource``: a 50 MB module holds ~300,000 fused instructions that the cost
    model only needs as opcode and shape columns (``hloscope.cost``). ``instructions`` builds them all on
    first access, reusing any built one by one before. Equality and hashing are by identity.

    Args:
        name: computation name without the ``%`` sigil.
        instructions: the instructions, or None when ``source`` gives them.
        root_name: the ``ROOT`` instruction's name.
        is_entry: True for the module's ``ENTRY`` computation.
        parameter_shapes: parameter shapes in parameter-number order.
        line: 1-based line of the computation header in its source text (0 when unknown).
        source: where the instructions come from when ``instructions`` is None.
    """

    __slots__ = ("name", "root_name", "is_entry", "parameter_shapes", "line", "_instructions", "_source",
                 "_built", "_index", "_lookups", "_names", "_opcodes", "_shapes", "_parameter_index", "_opcode_set")

    def __init__(self, name: str, instructions: tuple[HloInstruction, ...] | None, root_name: str,
                 is_entry: bool = False, parameter_shapes: tuple[Shape, ...] = (), line: int = 0, *,
                 source: InstructionSource | None = None) -> None:
        if instructions is None and source is None:
            raise ValueError(f"computation {name!r}: give its instructions or a source of them")
        self.name = name
        self.root_name = root_name
        self.is_entry = is_entry
        self.parameter_shapes = parameter_shapes
        self.line = line
        self._instructions = instructions
        self._source = None if instructions is not None else source
        self._built: dict[int, HloInstruction] = {}
        self._index: dict[str, int] | None = None
        self._lookups = 0
        self._opcode_set: frozenset[str] | None = None
        if source is not None and instructions is None:
            self._names, self._opcodes, self._shapes = source.names, source.opcodes, source.shapes
            self._parameter_index: Mapping[int, int] | None = source.parameter_index
        else:  # made from the instructions on first use
            self._names = self._opcodes = self._shapes = self._parameter_index = None

    @property
    def instructions(self) -> tuple[HloInstruction, ...]:
        insts = self._instructions
        if insts is None:
            assert self._source is not None
            built = self._source.build_all()
            for i, inst in self._built.items():  # keep the objects handed out one by one
                built[i] = inst
            insts = self._instructions = tuple(built)
            self._source = None
            self._built = {}
        return insts

    @property
    def is_built(self) -> bool:
        """True once ``instructions`` exists (always, for a computation made from instructions)."""
        return self._instructions is not None

    def _columns_from_instructions(self) -> None:
        insts = self.instructions
        self._names = tuple(map(_NAME, insts))
        self._opcodes = tuple(map(_OPCODE, insts))
        self._shapes = tuple(map(_SHAPE, insts))

    @property
    def names(self) -> tuple[str, ...]:
        """Instruction names, in order."""
        if self._names is None:
            self._columns_from_instructions()
        return self._names

    @property
    def opcodes(self) -> tuple[str, ...]:
        """Instruction opcodes, in order."""
        if self._opcodes is None:
            self._columns_from_instructions()
        return self._opcodes

    @property
    def opcode_set(self) -> frozenset[str]:
        """The distinct opcodes (made once: "does this body hold a dot?" is asked per fusion by the ops table's
        category and dtype, and a scan of a large fused body each time added up)."""
        found = self._opcode_set
        if found is None:
            found = self._opcode_set = frozenset(self.opcodes)
        return found

    @property
    def shapes(self) -> tuple[Shape, ...]:
        """Instruction result shapes, in order."""
        if self._shapes is None:
            self._columns_from_instructions()
        return self._shapes

    @property
    def parameter_index(self) -> Mapping[int, int]:
        """Parameter number -> index of its ``parameter`` instruction."""
        index = self._parameter_index
        if index is None:
            index = self._parameter_index = {inst.parameter_number: i for i, inst in enumerate(self.instructions)
                                             if inst.opcode == "parameter"}
        return index

    def operands_at(self, index: int) -> tuple[str, ...]:
        """Operand names of instruction ``index``, without building it."""
        source = self._source
        return self.instructions[index].operands if source is None else source.operands(index)

    def operand_lists(self, indices: Iterable[int]) -> list[tuple[str, ...]]:
        """Operand names of each instruction in ``indices``, without building them."""
        source = self._source
        if source is None:
            insts = self.instructions
            return [insts[i].operands for i in indices]
        operands = source.operands
        return [operands(i) for i in indices]

    def operand_names(self, indices: Iterable[int] | None = None) -> list[str]:
        """Every operand name of the instructions at ``indices`` (all when None), in order, one per use."""
        source = self._source
        if source is not None:
            return source.operand_names(indices)
        if indices is None:
            return list(chain.from_iterable(map(_OPERANDS, self.instructions)))
        return list(chain.from_iterable(self.operand_lists(indices)))

    def operand_users(self, names: set[str]) -> dict[str, list[int]]:
        """For each of ``names`` that some instruction takes as an operand: the indices of those instructions, in
        order, each once (a name twice in one operand list is one user). Without building the instructions."""
        source = self._source
        if source is not None:
            return source.operand_users(names)
        out: dict[str, list[int]] = {}
        for i, operands in enumerate(map(_OPERANDS, self.instructions)):
            for name in operands:
                if name in names:
                    found = out.setdefault(name, [])
                    if not found or found[-1] != i:
                        found.append(i)
        return out

    def instruction_at(self, index: int) -> HloInstruction:
        """Instruction ``index`` (in printed order), built alone if the others are not. Raises IndexError."""
        insts = self._instructions
        if insts is not None:
            return insts[index]
        inst = self._built.get(index)
        if inst is None:
            assert self._source is not None
            if len(self._built) >= _BUILT_ALONE_MAX:  # many asked for one by one: one build of all is cheaper
                return self.instructions[index]
            if index < 0:
                index += len(self._source.names)
            inst = self._built[index] = self._source.build(index)
        return inst

    def index_of(self, name: str) -> int:
        """Index of the instruction called ``name``. Raises KeyError naming the computation when there is none."""
        index = self._index
        try:
            if index is None:
                # A few lookups scan the names (in C); more make an index worth building.
                self._lookups += 1
                if self._lookups <= _SCANS_BEFORE_INDEX:
                    return self.names.index(name)
                index = self.name_index()
            return index[name]
        except (KeyError, ValueError):
            raise KeyError(f"computation {self.name!r} has no instruction {name!r}") from None

    def name_index(self) -> dict[str, int]:
        """Instruction name -> its index: the index ``index_of`` and ``shape_of`` read (``shape_of(name)`` is
        ``shapes[name_index()[name]]``), made now if it was not."""
        index = self._index
        if index is None:
            names = self.names
            index = self._index = dict(zip(names, range(len(names))))
        return index

    def instruction(self, name: str) -> HloInstruction:
        """The instruction called ``name``. Raises KeyError naming the computation when there is none."""
        return self.instruction_at(self.index_of(name))

    def shape_of(self, name: str) -> Shape:
        """Result shape of the instruction called ``name``, without building it. Raises KeyError."""
        index = self._index
        if index is not None and self._shapes is not None:  # (the cost model's hot path: one lookup)
            i = index.get(name)
            if i is not None:
                return self._shapes[i]
        return self.shapes[self.index_of(name)]

    def instruction_map(self) -> Mapping[str, HloInstruction]:
        """Name -> instruction: a dict once the instructions are built, else a view that builds only the
        instructions looked up."""
        if self._instructions is not None:
            insts = self._instructions
            return dict(zip(map(_NAME, insts), insts))
        return _InstructionView(self)

    @property
    def root(self) -> HloInstruction:
        """The ``ROOT`` instruction (XLA prints it last, as a rule)."""
        return self.instruction_at(self.root_index)

    @property
    def root_index(self) -> int:
        """Index of the ``ROOT`` instruction. Raises KeyError when there is none (an empty computation)."""
        names = self.names
        if names and names[-1] == self.root_name:
            return len(names) - 1
        try:
            return names.index(self.root_name)
        except ValueError:
            raise KeyError(f"computation {self.name!r} has no root {self.root_name!r}") from None

    def __len__(self) -> int:
        insts = self._instructions
        return len(insts) if insts is not None else len(self.names)

    def __repr__(self) -> str:
        return f"HloComputation({self.name!r}, {len(self)} instructions, root={self.root_name!r})"


class _InstructionView(Mapping[str, "HloInstruction"]):
    """``HloComputation.instruction_map`` of a computation not built yet."""

    __slots__ = ("_comp",)

    def __init__(self, comp: HloComputation) -> None:
        self._comp = comp

    def __getitem__(self, name: str) -> HloInstruction:
        return self._comp.instruction(name)

    def __iter__(self) -> Iterator[str]:
        return iter(self._comp.names)

    def __len__(self) -> int:
        return len(self._comp)


class HloModule(FrozenRecord):
    """An HLO module: computations in printed order, the entry one last by XLA's convention.

    Attributes:
        name: module name from the ``HloModule`` header.
        computations: every computation, in printed order.
        entry_name: the ``ENTRY`` computation's name.
        header_attributes: header ``key=value`` pairs as raw text (``entry_computation_layout``, ...).
        num_partitions, replica_count: from the header; 1 when absent (XLA's defaults).
        stack_frames: stack frame id -> resolved frame, from the ``FileNames``/.../``StackFrames`` tables.
        source: where the text came from (a path, or ``"<string>"``).
        unknown_opcodes: opcodes hloscope parsed as opaque instructions.
        unknown_element_types: element types of its shapes without ``ELEMENT_BITS`` (their arrays count 0 bytes;
            its cost is flagged ``unknown-element-type``).

    Immutable (``hloscope._record.FrozenRecord``): compared and printed by these fields; ``replace`` makes a copy
    with some changed.
    """

    __slots__ = ("name", "computations", "entry_name", "header_attributes", "num_partitions", "replica_count",
                 "stack_frames", "source", "unknown_opcodes", "unknown_element_types", "_by_name", "__weakref__")
    _compared = __slots__[:-2]
    name: str
    computations: tuple[HloComputation, ...]
    entry_name: str
    header_attributes: Mapping[str, str]
    num_partitions: int
    replica_count: int
    stack_frames: Mapping[int, StackFrame]
    source: str
    unknown_opcodes: frozenset[str]
    unknown_element_types: frozenset[str]
    _by_name: dict[str, HloComputation]

    def __init__(self, name: str, computations: tuple[HloComputation, ...], entry_name: str,
                 header_attributes: Mapping[str, str] | None = None, num_partitions: int = 1, replica_count: int = 1,
                 stack_frames: Mapping[int, StackFrame] | None = None, source: str = "<string>",
                 unknown_opcodes: frozenset[str] = frozenset(), unknown_element_types: frozenset[str] = frozenset(),
                 _by_name: dict[str, HloComputation] | None = None) -> None:
        _set(self, "name", name)
        _set(self, "computations", computations)
        _set(self, "entry_name", entry_name)
        _set(self, "header_attributes", {} if header_attributes is None else header_attributes)
        _set(self, "num_partitions", num_partitions)
        _set(self, "replica_count", replica_count)
        _set(self, "stack_frames", {} if stack_frames is None else stack_frames)
        _set(self, "source", source)
        _set(self, "unknown_opcodes", unknown_opcodes)
        _set(self, "unknown_element_types", unknown_element_types)
        _set(self, "_by_name", _by_name or {c.name: c for c in computations})

    def replace(self, **changes: Any) -> HloModule:
        """A copy with the fields ``changes`` names changed (as ``dataclasses.replace`` of a dataclass)."""
        return HloModule(**{**{name: getattr(self, name) for name in self._compared}, **changes})

    @property
    def entry(self) -> HloComputation:
        return self._by_name[self.entry_name]

    def computation(self, name: str) -> HloComputation:
        """The computation called ``name``; raises KeyError naming the module when there is none."""
        try:
            return self._by_name[name]
        except KeyError:
            raise KeyError(f"module {self.name!r} has no computation {name!r}") from None

    def instructions(self) -> Iterator[tuple[HloComputation, HloInstruction]]:
        """Every (computation, instruction) pair, in printed order."""
        for comp in self.computations:
            for inst in comp.instructions:
                yield comp, inst

    @property
    def entry_computation_layout(self) -> str:
        return self.header_attributes.get("entry_computation_layout", "")


#: The typed values hloscope.hlo_values holds (decoded on demand: few modules read them), under their old home.
_VALUE_CLASSES = frozenset({"WindowDimension", "ConvolutionDimensionNumbers", "SliceRange", "PaddingDimension",
                            "StackFrame"})


def __getattr__(name: str) -> Any:
    """``hloscope.hlo.WindowDimension`` and the other classes of ``hloscope.hlo_values``, imported on first use
    (PEP 562): few modules hold them, so the parser imports them when it first decodes one."""
    if name in _VALUE_CLASSES:
        from hloscope import hlo_values

        return getattr(hlo_values, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
