"""What a chip is: the :class:`ChipSpec` record, its units and dtype classes, its errors and its JSON form.

The roofline model of "How to Scale Your Model" (Austin et al. 2025) needs three numbers per chip::

    T_compute = FLOPs / peak_flops_per_s[dtype]
    T_memory  = HBM bytes / hbm_bytes_per_s
    T_comm    = wire bytes / link bandwidth (ICI, NVLink or Infinity Fabric, PCIe or DCN, bytes/s in ONE
                direction)

This module defines the record that holds them and validates it; it holds no chips. The built-in chips are
data (``hloscope/roofline/chips.toml``), read by :mod:`hloscope.roofline.chip_files` (the same reader as
user chip files) and looked up through :mod:`hloscope.roofline.chips`, which re-exports every public name
defined here.

Units
-----
Every quantity carries its unit in its name: ``*_bytes`` are bytes, ``*_bytes_per_s`` bytes per second,
``*_flops_per_s`` floating-point (or integer) operations per second. One quantity, one name:
``hbm_bytes_per_s`` is HBM *bandwidth* and ``hbm_capacity_bytes`` HBM *capacity* (formerly called
``hbm_bytes``, a name that elsewhere in hloscope means HBM *traffic*; chip files and report JSON still
accept the old key, see :data:`LEGACY_KEYS`). Decimal and binary prefixes are kept apart:

* GB = 1e9 bytes, TB = 1e12 bytes, GB/s = 1e9 bytes/s (vendor bandwidths and NVIDIA memory capacities).
* GiB = 2**30 bytes, MiB = 2**20 bytes (TPU and AMD Instinct HBM capacities, which Google, XLA and AMD's
  ROCm documentation state in GiB; VMEM and caches).
* Gb/s (bits) = 1.25e8 bytes/s (network interfaces).

What the numbers mean
---------------------
* ``peak_flops_per_s`` holds **dense** matrix-unit peaks. Vendor figures quoted "with sparsity" are halved.
  Keys are ``"f64"``, ``"f32"``, ``"bf16"`` (also used for f16), ``"fp8"``, ``"fp4"``, ``"int8"``,
  ``"int4"``. ``"f32"`` is the rate of an f32 dot at JAX's default precision: one bf16 MXU pass on a TPU,
  TF32 tensor cores on an NVIDIA A100 or newer (JAX "Matmul precision" guide), full-precision FP32 matrix
  cores on AMD Instinct GPUs (XLA uses XF32 only on CUDA); ``precision=HIGHEST`` may be slower.
* Bandwidths are one direction. ``ici_link_bytes_per_s`` is per ICI link (one neighbour, one direction);
  a chip with wraparound can drive a ring in both directions (``ici_link_bidi_bytes_per_s``).
  ``nvlink_bytes_per_s`` is one GPU's total egress into its scale-up domain: NVLink on NVIDIA GPUs, the
  sum of the Infinity Fabric (xGMI) links on AMD Instinct GPUs. ``dcn_bytes_per_s`` is one chip's share of
  data-centre network egress.
* Figures are per **chip**. TPU7x exposes each of its two TensorCores as a separate JAX device; use
  :meth:`ChipSpec.per_device` (or :func:`hloscope.roofline.chips.get_device_spec`) for the per-device share.
* Every field's provenance is in ``ChipSpec.sources``.

Importing this module is cheap: it needs only the standard library.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
import types
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hloscope._regex import LazyPattern
from hloscope.errors import HloscopeError

__all__ = [
    "GB",
    "GiB",
    "MiB",
    "DTYPE_KEYS",
    "KINDS",
    "LEGACY_KEYS",
    "ChipSpec",
    "ChipSpecError",
    "UnknownChipError",
    "canonical_dtype",
    "chip_from_dict",
    "chip_to_dict",
    "find_chip",
    "lookup_tables",
]

# --------------------------------------------------------------------------------------------------
# Units and vocabularies
# --------------------------------------------------------------------------------------------------

#: One decimal gigabyte (SI): vendor bandwidths ("GB/s") and NVIDIA memory capacities ("80GB").
GB = 10**9
#: One gibibyte: TPU and AMD Instinct HBM capacities (Google Cloud, XLA and AMD's ROCm "GPU hardware
#: specifications" table state them in GiB).
GiB = 2**30
#: One mebibyte: VMEM (JAX ``tpu_info``), GPU L2 sizes (CUDA device queries) and AMD caches (ROCm docs).
MiB = 2**20

#: Old field names still accepted (and translated) in chip files and report JSON, by new name. A key in
#: ``sources`` (``"hbm_bytes"``) is translated the same way. Only the new names are ever written.
LEGACY_KEYS: Mapping[str, str] = types.MappingProxyType({"hbm_bytes": "hbm_capacity_bytes"})

#: Peak-table keys, widest first. ``bf16`` also covers f16; ``fp8`` covers every f8 variant (and f6);
#: ``fp4`` is f4e2m1fn (NVIDIA Blackwell NVFP4/MXFP4).
DTYPE_KEYS: tuple[str, ...] = ("f64", "f32", "bf16", "fp8", "fp4", "int8", "int4")

#: Allowed values of :attr:`ChipSpec.kind`.
KINDS: frozenset[str] = frozenset({"tpu", "gpu", "cpu", "other"})

# Canonical compute class of every dtype spelling we accept: XLA element types (as printed in HLO text),
# numpy/JAX dtype names and the table keys themselves. ``_WIDE_INT`` is a pseudo-class for 16/32/64-bit
# integer dots, which no matrix unit accelerates; they always resolve with ``fallback=True``.
_WIDE_INT = "int32"
_DTYPE_CLASS: dict[str, str] = {}
for _names, _cls in (
    (("f64", "float64", "fp64", "double", "c128", "complex128"), "f64"),
    (("f32", "float32", "fp32", "tf32", "float", "c64", "complex64"), "f32"),
    (("bf16", "bfloat16", "f16", "float16", "fp16", "half"), "bf16"),
    (
        (
            "fp8", "f8", "f8e3m4", "f8e4m3", "f8e4m3fn", "f8e4m3fnuz", "f8e4m3b11fnuz", "f8e5m2",
            "f8e5m2fnuz", "f8e8m0fnu", "float8_e3m4", "float8_e4m3", "float8_e4m3fn", "float8_e4m3fnuz",
            "float8_e4m3b11fnuz", "float8_e5m2", "float8_e5m2fnuz", "float8_e8m0fnu",
            # FP6 runs at the FP8 rate on Blackwell (HGX B200 table: FP6 = FP8 = 4.5 PFLOPS dense).
            "fp6", "f6e2m3fn", "f6e3m2fn", "float6_e2m3fn", "float6_e3m2fn",
        ),
        "fp8",
    ),
    (("fp4", "f4", "f4e2m1fn", "float4_e2m1fn", "nvfp4", "mxfp4"), "fp4"),
    (("int8", "s8", "u8", "i8", "uint8", "pred", "bool"), "int8"),
    (("int4", "s4", "u4", "i4", "uint4", "s2", "u2", "int2", "uint2", "s1", "u1"), "int4"),
    (
        ("s16", "u16", "s32", "u32", "s64", "u64", "int16", "uint16", "int32", "uint32", "int64",
         "uint64"),
        _WIDE_INT,
    ),
):
    for _n in _names:
        _DTYPE_CLASS[_n] = _cls
del _names, _cls, _n

# Where to look when a chip has no peak for a dtype class: the class itself, then wider types (int4 -> int8
# -> bf16 -> f32; fp8 -> bf16 -> f32; f64 -> f32). f32 and bf16 fall back to each other as a last resort;
# every chip has at least one of them (enforced by ChipSpec), so resolution always succeeds.
_FALLBACK_CHAIN: dict[str, tuple[str, ...]] = {
    "f64": ("f64", "f32", "bf16"),
    "f32": ("f32", "bf16"),
    "bf16": ("bf16", "f32"),
    "fp8": ("fp8", "bf16", "f32"),
    "fp4": ("fp4", "fp8", "bf16", "f32"),
    "int8": ("int8", "bf16", "f32"),
    "int4": ("int4", "int8", "bf16", "f32"),
    _WIDE_INT: ("f32", "bf16"),
}

_ID_RE = LazyPattern(r"^[A-Za-z0-9][A-Za-z0-9_-]*$")


def _norm(name: str) -> str:
    """Lookup key for ids and aliases: case-folded, with everything but letters and digits removed.

    ``"TPU v5 lite"``, ``"tpu-v5-lite"`` and ``"TPUv5Lite"`` all normalize to ``"tpuv5lite"``.
    """
    return re.sub(r"[^0-9a-z]", "", name.casefold())


def canonical_dtype(dtype: str) -> str:
    """Map an XLA element type, numpy/JAX dtype name or table key to its peak-table class.

    Args:
        dtype: e.g. ``"bf16"``, ``"f16"``, ``"f32"``, ``"s8"``, ``"u4"``, ``"f8e4m3fn"``, ``"bfloat16"``,
            ``"float8_e5m2"``, ``"int8"``. Case-insensitive.

    Returns:
        One of :data:`DTYPE_KEYS`, or ``"int32"`` for 16/32/64-bit integers (which have no table key and
        always resolve with a fallback).

    Raises:
        ValueError: ``dtype`` is not a numeric element type (e.g. ``"tuple"``, ``"token"``).
    """
    key = str(dtype).strip().lower()
    try:
        return _DTYPE_CLASS[key]
    except KeyError:
        raise ValueError(
            f"unknown dtype {dtype!r}: expected an XLA element type (bf16, f16, f32, f64, s8, u8, s4, u4, "
            f"f8e4m3fn, f8e5m2, f4e2m1fn, ...) or one of {', '.join(DTYPE_KEYS)}"
        ) from None


# --------------------------------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------------------------------


class ChipSpecError(HloscopeError):
    """A chip specification is invalid: bad TOML, a missing field, or a value of the wrong type or sign.

    The message names the file (when the spec came from one), the chip and the field; they are also
    available as attributes.

    Attributes:
        path: the chip file, or None for a spec built in code.
        chip: the chip id, or None when it cannot be determined (e.g. a TOML syntax error before any table).
        field: the field name (``"peak_flops_per_s.bf16"`` for a table entry), or None.
        line: 1-based line of a TOML syntax error, else None.
        column: 1-based column of a TOML syntax error, else None.
        problem: the message without the location prefix.
    """

    def __init__(
        self,
        problem: str,
        *,
        path: str | os.PathLike[str] | None = None,
        chip: str | None = None,
        field: str | None = None,
        line: int | None = None,
        column: int | None = None,
    ) -> None:
        self.problem = problem
        self.path = Path(path) if path is not None else None
        self.chip = chip
        self.field = field
        self.line = line
        self.column = column
        where = []
        if self.path is not None:
            where.append(str(self.path))
        if chip is not None:
            where.append(f"chip {chip!r}")
        if field is not None:
            where.append(f"field {field!r}")
        super().__init__(f"{', '.join(where)}: {problem}" if where else problem)

    def located(
        self, *, path: str | os.PathLike[str] | None = None, chip: str | None = None
    ) -> ChipSpecError:
        """Return a copy with ``path``/``chip`` filled in where this error lacks them.

        Args:
            path: chip file to attach.
            chip: chip id to attach.

        Returns:
            A new ChipSpecError (this one is not modified).
        """
        return ChipSpecError(
            self.problem,
            path=self.path if self.path is not None else path,
            chip=self.chip if self.chip is not None else chip,
            field=self.field,
            line=self.line,
            column=self.column,
        )


class UnknownChipError(HloscopeError):
    """No chip has the requested id or alias.

    Attributes:
        query: the id or alias that was looked up.
        known_ids: sorted ids of every chip that was searched.
        closest: the id of the closest match (by :func:`difflib.get_close_matches` over ids and aliases),
            or None.
    """

    def __init__(self, query: str, known_ids: Iterable[str], closest: str | None) -> None:
        self.query = query
        self.known_ids = tuple(sorted(known_ids))
        self.closest = closest
        hint = f"closest match: {closest!r}" if closest else "no close match"
        super().__init__(f"unknown chip {query!r}; {hint}; known chip ids: {', '.join(self.known_ids)}")


# --------------------------------------------------------------------------------------------------
# Validation helpers (shared by ChipSpec.__post_init__ and the TOML loader)
# --------------------------------------------------------------------------------------------------


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _describe(value: Any) -> str:
    return f"{type(value).__name__} {value!r}"


def _positive_float(value: Any, fld: str, *, optional: bool = False) -> float | None:
    if value is None and optional:
        return None
    if not _is_number(value):
        raise ChipSpecError(f"must be a number, got {_describe(value)}", field=fld)
    out = float(value)
    if not math.isfinite(out) or out <= 0:
        raise ChipSpecError(f"must be a positive finite number, got {value!r}", field=fld)
    return out


def _positive_int(value: Any, fld: str, *, optional: bool = False) -> int | None:
    if value is None and optional:
        return None
    if not _is_number(value):
        raise ChipSpecError(f"must be a positive whole number, got {_describe(value)}", field=fld)
    if isinstance(value, float):
        if not math.isfinite(value) or not value.is_integer():
            raise ChipSpecError(f"must be a positive whole number, got {value!r}", field=fld)
        value = int(value)
    if value <= 0:
        raise ChipSpecError(f"must be a positive whole number, got {value!r}", field=fld)
    return int(value)


def _boolean(value: Any, fld: str) -> bool:
    if not isinstance(value, bool):
        raise ChipSpecError(f"must be true or false, got {_describe(value)}", field=fld)
    return value


def _text(value: Any, fld: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ChipSpecError(f"must be a non-empty string, got {_describe(value)}", field=fld)
    return value


def _table(value: Any, fld: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ChipSpecError(f"must be a table, got {_describe(value)}", field=fld)
    return value


# --------------------------------------------------------------------------------------------------
# ChipSpec
# --------------------------------------------------------------------------------------------------


def _empty_mapping() -> Mapping[str, Any]:
    return types.MappingProxyType({})


@dataclass(frozen=True, slots=True)
class ChipSpec:
    """Roofline numbers for one chip (per chip, not per core; see :meth:`per_device`).

    Values are validated on construction (positive, finite, the right type) and mappings are frozen, so a
    ChipSpec is immutable. Derive variants with :func:`dataclasses.replace`.

    Attributes:
        id: short lower-case identifier, e.g. ``"tpu-v5e"``, ``"h100"``, ``"host"``.
        name: human-readable name.
        kind: ``"tpu"``, ``"gpu"``, ``"cpu"`` or ``"other"``.
        aliases: other names that resolve to this chip, including JAX ``device_kind`` strings
            (``"TPU v5 lite"``, ``"NVIDIA H100 80GB HBM3"``). Matching ignores case and punctuation.
        peak_flops_per_s: dense peak FLOP/s (OP/s for integers) per dtype key of :data:`DTYPE_KEYS`.
            Contains ``"bf16"`` or ``"f32"`` (or both).
        hbm_bytes_per_s: main-memory (HBM) bandwidth, bytes/s.
        hbm_capacity_bytes: main-memory (HBM) capacity, bytes (formerly ``hbm_bytes``).
        on_chip_memory_bytes: on-chip memories by name (``"vmem"``, ``"cmem"``, ``"l2"``, ...), bytes per
            chip.
        devices_per_chip: JAX devices one chip appears as (2 on TPU7x, whose TensorCores are separate
            devices; 1 elsewhere, including megacore v4/v5p).
        ici_link_bytes_per_s: TPU inter-chip interconnect bandwidth per link, one direction, bytes/s.
        ici_links_per_chip: ICI links (ports) per chip: 4 for a 2D torus, 6 for a 3D torus.
        ici_bidirectional: links are full duplex (the book's "bidi" bandwidth is twice the one-way one).
        ici_torus_axes: torus dimensionality: 2 (v5e, v6e) or 3 (v4, v5p, TPU7x).
        ici_wraparound: full-size slices have wraparound links on every axis (a torus, not a mesh). Smaller
            slices may not (v5e/v6e: only axes of 16; v4/v5p/TPU7x: only multiples of a 4x4x4 cube).
        nvlink_bytes_per_s: one GPU's egress into its scale-up domain, one direction, bytes/s: NVLink on
            NVIDIA GPUs, the sum of the Infinity Fabric (xGMI) links to the other GPUs on AMD Instinct GPUs.
        nvlink_domain_size: GPUs in that domain (8 for HGX/DGX nodes and AMD Instinct 8-GPU platforms).
        pcie_bytes_per_s: host <-> device PCIe bandwidth per chip, one direction, bytes/s.
        dcn_bytes_per_s: data-centre network egress per chip, one direction, bytes/s.
        sources: provenance of each value, keyed by field name or ``"<field>.<key>"`` for table entries
            (``"peak_flops_per_s.int8"``); see :meth:`source_for`.
    """

    id: str
    name: str
    kind: str
    aliases: tuple[str, ...]
    peak_flops_per_s: Mapping[str, float]
    hbm_bytes_per_s: float
    hbm_capacity_bytes: int
    on_chip_memory_bytes: Mapping[str, int] = field(default_factory=_empty_mapping)
    devices_per_chip: int = 1
    ici_link_bytes_per_s: float | None = None
    ici_links_per_chip: int | None = None
    ici_bidirectional: bool = False
    ici_torus_axes: int | None = None
    ici_wraparound: bool = False
    nvlink_bytes_per_s: float | None = None
    nvlink_domain_size: int | None = None
    pcie_bytes_per_s: float | None = None
    dcn_bytes_per_s: float | None = None
    sources: Mapping[str, str] = field(default_factory=_empty_mapping)

    def __post_init__(self) -> None:
        """Validate every field and freeze the mappings.

        Raises:
            ChipSpecError: a field is missing, of the wrong type, non-finite or not positive.
        """
        try:
            self._validate()
        except ChipSpecError as err:
            raise err.located(chip=self.id if isinstance(self.id, str) else None) from None

    def _validate(self) -> None:
        put = object.__setattr__
        if not isinstance(self.id, str) or not _ID_RE.match(self.id):
            raise ChipSpecError(
                f"must match {_ID_RE.pattern} (letters, digits, '-' and '_'), got {self.id!r}", field="id"
            )
        put(self, "name", _text(self.name, "name"))
        if self.kind not in KINDS:
            raise ChipSpecError(f"must be one of {', '.join(sorted(KINDS))}, got {self.kind!r}", field="kind")
        aliases = self.aliases
        if isinstance(aliases, str) or not isinstance(aliases, Iterable):
            raise ChipSpecError(f"must be a list of strings, got {_describe(aliases)}", field="aliases")
        put(self, "aliases", tuple(_text(a, "aliases") for a in aliases))

        peaks: dict[str, float] = {}
        for key, value in _table(self.peak_flops_per_s, "peak_flops_per_s").items():
            fld = f"peak_flops_per_s.{key}"
            if key not in DTYPE_KEYS:
                raise ChipSpecError(
                    f"unknown dtype key {key!r}; expected one of {', '.join(DTYPE_KEYS)}", field=fld
                )
            peaks[key] = _positive_float(value, fld)  # type: ignore[assignment]
        if "bf16" not in peaks and "f32" not in peaks:
            raise ChipSpecError("must contain a 'bf16' or an 'f32' peak", field="peak_flops_per_s")
        put(self, "peak_flops_per_s", types.MappingProxyType(peaks))

        put(self, "hbm_bytes_per_s", _positive_float(self.hbm_bytes_per_s, "hbm_bytes_per_s"))
        put(self, "hbm_capacity_bytes", _positive_int(self.hbm_capacity_bytes, "hbm_capacity_bytes"))
        on_chip: dict[str, int] = {}
        for key, value in _table(self.on_chip_memory_bytes, "on_chip_memory_bytes").items():
            fld = f"on_chip_memory_bytes.{key}"
            on_chip[_text(key, fld)] = _positive_int(value, fld)  # type: ignore[assignment]
        put(self, "on_chip_memory_bytes", types.MappingProxyType(on_chip))
        put(self, "devices_per_chip", _positive_int(self.devices_per_chip, "devices_per_chip"))

        for name in ("ici_link_bytes_per_s", "nvlink_bytes_per_s", "pcie_bytes_per_s", "dcn_bytes_per_s"):
            put(self, name, _positive_float(getattr(self, name), name, optional=True))
        for name in ("ici_links_per_chip", "ici_torus_axes", "nvlink_domain_size"):
            put(self, name, _positive_int(getattr(self, name), name, optional=True))
        for name in ("ici_bidirectional", "ici_wraparound"):
            _boolean(getattr(self, name), name)

        sources: dict[str, str] = {}
        for key, value in _table(self.sources, "sources").items():
            sources[_text(key, "sources")] = _text(value, f"sources.{key}")
        put(self, "sources", types.MappingProxyType(sources))

    def __hash__(self) -> int:
        # The generated hash would hash the (unhashable) mapping proxies; equal specs have equal ids.
        return hash((ChipSpec, self.id))

    # ---- compute -------------------------------------------------------------------------------------

    def peak_flops_for(self, dtype: str) -> tuple[float, bool]:
        """Peak dense FLOP/s for a dtype, falling back to a wider type when the chip has no figure for it.

        Fallback order: int4 -> int8 -> bf16 -> f32; fp4 -> fp8 -> bf16 -> f32; fp8 -> bf16 -> f32;
        f64 -> f32 -> bf16; 16/32/64-bit integers -> f32 -> bf16 (always a fallback); f32 <-> bf16 as a
        last resort.

        Args:
            dtype: an XLA element type (``"bf16"``, ``"f16"``, ``"f32"``, ``"f64"``, ``"s8"``, ``"u8"``,
                ``"s4"``, ``"f8e4m3fn"``, ``"f8e5m2"``, ...), a numpy name or a table key.

        Returns:
            ``(flops_per_s, fallback)``: the peak (always > 0) and whether it belongs to a different dtype
            than requested, so the caller can flag the estimate.

        Raises:
            ValueError: ``dtype`` is not a numeric element type.
        """
        cls = canonical_dtype(dtype)
        for key in _FALLBACK_CHAIN[cls]:
            peak = self.peak_flops_per_s.get(key)
            if peak is not None:
                return peak, key != cls
        # Unreachable: __post_init__ guarantees a bf16 or an f32 peak.
        raise AssertionError(f"chip {self.id!r} has neither a bf16 nor an f32 peak")

    def critical_intensity(self, dtype: str) -> float:
        """Arithmetic intensity (FLOPs per HBM byte) above which a kernel is compute-bound.

        ``peak_flops_per_s / hbm_bytes_per_s`` ("How to Scale Your Model", Part 1): ~240 for a TPU v5e in
        bf16, ~295 for an H100.

        Args:
            dtype: as for :meth:`peak_flops_for` (fallbacks apply silently).

        Returns:
            FLOPs per byte.
        """
        return self.peak_flops_for(dtype)[0] / self.hbm_bytes_per_s

    # ---- interconnect --------------------------------------------------------------------------------

    @property
    def ici_link_bidi_bytes_per_s(self) -> float | None:
        """Bytes/s one ICI link carries in both directions together (the book's "bidi" column).

        Returns:
            Twice :attr:`ici_link_bytes_per_s` for full-duplex links, the one-way figure otherwise, or None
            for chips without ICI.
        """
        if self.ici_link_bytes_per_s is None:
            return None
        return self.ici_link_bytes_per_s * (2 if self.ici_bidirectional else 1)

    @property
    def peer_link_bytes_per_s(self) -> float | None:
        """The fastest one-direction link to a peer device in the same slice or node.

        Returns:
            ``ici_link_bytes_per_s`` for TPUs, ``nvlink_bytes_per_s`` for GPUs, else ``pcie_bytes_per_s``
            (on a CPU host, device-to-device transfers are memory copies); None if none is known.
        """
        for value in (self.ici_link_bytes_per_s, self.nvlink_bytes_per_s, self.pcie_bytes_per_s):
            if value is not None:
                return value
        return None

    # ---- views ---------------------------------------------------------------------------------------

    def per_device(self) -> ChipSpec:
        """This chip's numbers divided among the JAX devices it appears as.

        For ``devices_per_chip == 1`` the spec itself is returned. Otherwise (TPU7x: 2) the peaks, HBM
        bandwidth and capacity, on-chip memories and every interconnect bandwidth are divided evenly (each
        device's fair share of the chip's links); link counts and topology stay as they are. The result has
        id ``"<id>-device"`` and no aliases, so it never shadows the chip in lookups.

        Returns:
            A ChipSpec with ``devices_per_chip == 1``.
        """
        n = self.devices_per_chip
        if n == 1:
            return self

        def share(value: float | None) -> float | None:
            return None if value is None else value / n

        note = f" (divided by devices_per_chip={n} for a per-device view)"
        divided = ("peak_flops_per_s", "hbm_bytes_per_s", "hbm_capacity_bytes", "on_chip_memory_bytes",
                   "ici_link_bytes_per_s", "nvlink_bytes_per_s", "pcie_bytes_per_s", "dcn_bytes_per_s")
        return dataclasses.replace(
            self,
            id=f"{self.id}-device",
            name=f"{self.name}, one of {n} devices per chip",
            aliases=(),
            peak_flops_per_s={k: v / n for k, v in self.peak_flops_per_s.items()},
            hbm_bytes_per_s=self.hbm_bytes_per_s / n,
            hbm_capacity_bytes=self.hbm_capacity_bytes // n,
            on_chip_memory_bytes={k: v // n for k, v in self.on_chip_memory_bytes.items()},
            devices_per_chip=1,
            ici_link_bytes_per_s=share(self.ici_link_bytes_per_s),
            nvlink_bytes_per_s=share(self.nvlink_bytes_per_s),
            pcie_bytes_per_s=share(self.pcie_bytes_per_s),
            dcn_bytes_per_s=share(self.dcn_bytes_per_s),
            sources={k: v + note if k.split(".")[0] in divided else v for k, v in self.sources.items()},
        )

    def source_for(self, field_name: str, key: str | None = None) -> str | None:
        """Provenance of one value.

        Args:
            field_name: a field name, e.g. ``"hbm_bytes_per_s"`` or ``"peak_flops_per_s"``.
            key: for mapping fields, the entry (``"int8"``); the entry's own source wins over the field's.

        Returns:
            The source text, or None if none is recorded.
        """
        if key is not None and f"{field_name}.{key}" in self.sources:
            return self.sources[f"{field_name}.{key}"]
        return self.sources.get(field_name)


#: Field names of ChipSpec in declaration order.
_FIELDS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(ChipSpec))
_MAPPING_FIELDS = ("peak_flops_per_s", "on_chip_memory_bytes", "sources")
_REQUIRED_FIELDS = ("peak_flops_per_s", "hbm_bytes_per_s", "hbm_capacity_bytes")
_DEFAULTS: dict[str, Any] = {
    "kind": "other",
    "aliases": (),
    "on_chip_memory_bytes": {},
    "devices_per_chip": 1,
    "ici_link_bytes_per_s": None,
    "ici_links_per_chip": None,
    "ici_bidirectional": False,
    "ici_torus_axes": None,
    "ici_wraparound": False,
    "nvlink_bytes_per_s": None,
    "nvlink_domain_size": None,
    "pcie_bytes_per_s": None,
    "dcn_bytes_per_s": None,
    "sources": {},
}




# --------------------------------------------------------------------------------------------------
# Lookup by id or alias
# --------------------------------------------------------------------------------------------------

#: Normalized id -> chip and normalized alias -> chip, for one collection of chips.
LookupTables = tuple[dict[str, ChipSpec], dict[str, ChipSpec]]


def lookup_tables(chips: Mapping[str, ChipSpec]) -> LookupTables:
    """Index chips for :func:`find_chip`.

    Args:
        chips: chips by id.

    Returns:
        ``(by_id, by_alias)``, keyed by :func:`_norm` of the id or alias; a later chip wins an alias clash.
    """
    by_id: dict[str, ChipSpec] = {}
    by_alias: dict[str, ChipSpec] = {}
    for chip in chips.values():
        by_id[_norm(chip.id)] = chip
        for alias in chip.aliases:
            by_alias[_norm(alias)] = chip
    return by_id, by_alias


def find_chip(id_or_alias: str, search: Iterable[LookupTables]) -> ChipSpec:
    """Find a chip by id or alias in several indexed collections, earlier collections first.

    Matching ignores case and every character that is not a letter or digit. Every collection's ids are
    tried before any collection's aliases, so an id never loses to an alias.

    Args:
        id_or_alias: the name to look up.
        search: :func:`lookup_tables` of each collection, in priority order.

    Returns:
        The matching chip.

    Raises:
        UnknownChipError: nothing matches; it lists every searched id and the closest id or alias
            (:func:`difflib.get_close_matches`, cutoff 0.5).
    """
    key = _norm(str(id_or_alias))
    tables = list(search)
    if key:
        for by_id, _ in tables:
            if key in by_id:
                return by_id[key]
        for _, by_alias in tables:
            if key in by_alias:
                return by_alias[key]
    import difflib  # lazily: only an unknown name needs it

    candidates: dict[str, str] = {}  # normalized name -> chip id; earlier collections written last, so win
    known_ids: set[str] = set()
    for by_id, by_alias in reversed(tables):
        for table in (by_alias, by_id):
            for name, chip in table.items():
                candidates[name] = chip.id
                known_ids.add(chip.id)
    close = difflib.get_close_matches(key, list(candidates), n=1, cutoff=0.5) if key else []
    raise UnknownChipError(str(id_or_alias), known_ids, candidates[close[0]] if close else None)


# --------------------------------------------------------------------------------------------------
# JSON
# --------------------------------------------------------------------------------------------------


def chip_to_dict(chip: ChipSpec) -> dict[str, Any]:
    """A JSON-ready dict of every field, plus derived values.

    Args:
        chip: the chip.

    Returns:
        Keys: every ChipSpec field (``id``, ``name``, ``kind``, ``aliases`` as a list,
        ``peak_flops_per_s`` {dtype: FLOP/s}, ``hbm_bytes_per_s``, ``hbm_capacity_bytes``, ``on_chip_memory_bytes``,
        ``devices_per_chip``, ``ici_*``, ``nvlink_*``, ``pcie_bytes_per_s``, ``dcn_bytes_per_s``,
        ``sources``), plus ``ici_link_bidi_bytes_per_s``, ``peer_link_bytes_per_s`` and
        ``critical_intensity_flops_per_byte`` {dtype: FLOPs/byte}. Absent values are None.
    """
    out: dict[str, Any] = {}
    for name in _FIELDS:
        value = getattr(chip, name)
        if isinstance(value, Mapping):
            value = dict(value)
        elif isinstance(value, tuple):
            value = list(value)
        out[name] = value
    out["ici_link_bidi_bytes_per_s"] = chip.ici_link_bidi_bytes_per_s
    out["peer_link_bytes_per_s"] = chip.peer_link_bytes_per_s
    out["critical_intensity_flops_per_byte"] = {
        k: v / chip.hbm_bytes_per_s for k, v in chip.peak_flops_per_s.items()
    }
    return out


def translate_legacy_keys(fields: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """Rename old field names (:data:`LEGACY_KEYS`) to their current names, in a chip's fields and sources.

    Used by the chip-file reader and by :func:`chip_from_dict`, so a ``host.toml`` written before the
    rename, or a report JSON saved then, still loads.

    Args:
        fields: one chip's fields by name (a ``[chips.<id>]`` table or a :func:`chip_to_dict` dict);
            a ``sources`` mapping inside it is translated too.

    Returns:
        ``(translated, used)``: a new dict with current names only, and ``{new name: old name}`` for each
        old name that was present (so errors can name the key the user actually wrote).

    Raises:
        ChipSpecError: both the old and the new name are given (field: the old name).
    """
    out = dict(fields)
    used: dict[str, str] = {}
    for old, new in LEGACY_KEYS.items():
        if old in out:
            if new in out:
                raise ChipSpecError(f"give {new!r} only; {old!r} is its old name", field=old)
            out[new] = out.pop(old)
            used[new] = old
    sources = out.get("sources")
    if isinstance(sources, Mapping) and any(old in sources for old in LEGACY_KEYS):
        renamed: dict[str, Any] = {}
        for key, text in sources.items():
            current = LEGACY_KEYS.get(key, key)
            if current != key and current in sources:
                continue  # a source under the current name wins over one under the old name
            renamed[current] = text
        out["sources"] = renamed
    return out, used


def chip_from_dict(data: Mapping[str, Any]) -> ChipSpec:
    """The inverse of :func:`chip_to_dict` (derived keys ignored), for chips read back from a report JSON.

    The old key ``hbm_bytes`` (HBM capacity, bytes) is accepted for ``hbm_capacity_bytes``, in the chip and
    in its ``sources``, so reports saved before the rename load.

    Raises:
        ChipSpecError: a field is missing or invalid (the message names it).
    """
    try:
        data, used = translate_legacy_keys(data)
    except ChipSpecError as err:
        raise err.located(chip=data.get("id") if isinstance(data.get("id"), str) else None) from None
    kwargs: dict[str, Any] = {}
    for name in _FIELDS:
        if name in data and data[name] is not None:
            value = data[name]
            kwargs[name] = tuple(value) if isinstance(value, list) else value
    try:
        return ChipSpec(**kwargs)
    except TypeError as e:
        raise ChipSpecError(f"chip in report JSON: {e}", chip=data.get("id")) from None
    except ChipSpecError as err:
        if err.field in used:
            raise ChipSpecError(f"{err.problem} (old name of {err.field!r})", chip=err.chip,
                                field=used[err.field]) from None
        raise
