"""Chip specifications for roofline analysis: peak FLOP/s, HBM bandwidth and interconnect bandwidths.

The roofline model of "How to Scale Your Model" (Austin et al. 2025) needs three numbers per chip::

    T_compute = FLOPs / peak_flops_per_s[dtype]
    T_memory  = HBM bytes / hbm_bytes_per_s
    T_comm    = wire bytes / link bandwidth (ICI, NVLink, PCIe or DCN, bytes/s in ONE direction)

This module holds those numbers for the built-in chips (TPU v4, v5e, v5p, v6e, TPU7x; NVIDIA A100 SXM4 80GB,
H100 SXM, H200 SXM, B200), resolves JAX ``device_kind`` strings to them, and reads user chip files (TOML).

Units
-----
Every quantity carries its unit in its name: ``*_bytes`` are bytes, ``*_bytes_per_s`` bytes per second,
``*_flops_per_s`` floating-point (or integer) operations per second. Decimal and binary prefixes are kept
apart and converted exactly once, here:

* GB = 1e9 bytes, TB = 1e12 bytes, GB/s = 1e9 bytes/s (vendor bandwidths and NVIDIA memory capacities).
* GiB = 2**30 bytes, MiB = 2**20 bytes (TPU HBM capacities, which Google and XLA state in GiB; VMEM and L2).
* Gb/s (bits) = 1.25e8 bytes/s (network interfaces).

What the numbers mean
---------------------
* ``peak_flops_per_s`` holds **dense** matrix-unit peaks. Vendor figures quoted "with sparsity" are halved.
  Keys are ``"f64"``, ``"f32"``, ``"bf16"`` (also used for f16), ``"fp8"``, ``"fp4"``, ``"int8"``,
  ``"int4"``. ``"f32"`` is the rate of an f32 dot at JAX's default precision: one bf16 MXU pass on a TPU,
  TF32 tensor cores on an A100 or newer (JAX "Matmul precision" guide); ``precision=HIGHEST`` is slower.
* Bandwidths are one direction. ``ici_link_bytes_per_s`` is per ICI link (one neighbour, one direction);
  a chip with wraparound can drive a ring in both directions (``ici_link_bidi_bytes_per_s``).
  ``nvlink_bytes_per_s`` is one GPU's total NVLink egress. ``dcn_bytes_per_s`` is one chip's share of
  data-centre network egress.
* Figures are per **chip**. TPU7x exposes each of its two TensorCores as a separate JAX device; use
  :meth:`ChipSpec.per_device` (or :func:`get_device_spec`) for the per-device share.
* TPU figures follow the book's Part 2 tables (the ones its worked examples use); vendor figures that differ
  slightly are quoted in ``sources``. Every field's provenance is in ``ChipSpec.sources``.

Importing this module is cheap: it needs only the standard library (numpy is imported lazily by
:func:`roofline_flops_per_s` for array inputs).
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import os
import re
import tomllib
import types
from dataclasses import dataclass, field
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from hloscope.errors import HloscopeError

__all__ = [
    "GB",
    "GiB",
    "MiB",
    "DTYPE_KEYS",
    "KINDS",
    "CHIPS",
    "CHIPS_FILE_NAME",
    "HOST_FILE_NAME",
    "ChipSpec",
    "ChipSpecError",
    "UnknownChipError",
    "all_chips",
    "canonical_dtype",
    "chip_to_dict",
    "chips_to_toml",
    "config_dir",
    "get_chip",
    "get_device_spec",
    "load_chip_file",
    "load_user_chips",
    "roofline_flops_per_s",
]

# --------------------------------------------------------------------------------------------------
# Units and vocabularies
# --------------------------------------------------------------------------------------------------

#: One decimal gigabyte (SI): vendor bandwidths ("GB/s") and NVIDIA memory capacities ("80GB").
GB = 10**9
#: One gibibyte: TPU HBM capacities (Google Cloud and XLA state them in GiB).
GiB = 2**30
#: One mebibyte: VMEM (JAX ``tpu_info``) and GPU L2 sizes (CUDA device queries).
MiB = 2**20
#: Bytes per second in one gigabit per second (network interface speeds).
_GBIT_PER_S_BYTES_PER_S = 1.25e8

#: Peak-table keys, widest first. ``bf16`` also covers f16; ``fp8`` covers every f8 variant (and f6);
#: ``fp4`` is f4e2m1fn (NVIDIA Blackwell NVFP4/MXFP4).
DTYPE_KEYS: tuple[str, ...] = ("f64", "f32", "bf16", "fp8", "fp4", "int8", "int4")

#: Allowed values of :attr:`ChipSpec.kind`.
KINDS: frozenset[str] = frozenset({"tpu", "gpu", "cpu", "other"})

#: File names inside :func:`config_dir`.
CHIPS_FILE_NAME = "chips.toml"
HOST_FILE_NAME = "host.toml"

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

_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]*$")


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
        hbm_bytes: main-memory capacity, bytes.
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
        nvlink_bytes_per_s: one GPU's NVLink egress into its NVLink domain, one direction, bytes/s.
        nvlink_domain_size: GPUs in one NVLink domain (8 for HGX/DGX nodes).
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
    hbm_bytes: int
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
        put(self, "hbm_bytes", _positive_int(self.hbm_bytes, "hbm_bytes"))
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
        divided = ("peak_flops_per_s", "hbm_bytes_per_s", "hbm_bytes", "on_chip_memory_bytes",
                   "ici_link_bytes_per_s", "nvlink_bytes_per_s", "pcie_bytes_per_s", "dcn_bytes_per_s")
        return dataclasses.replace(
            self,
            id=f"{self.id}-device",
            name=f"{self.name}, one of {n} devices per chip",
            aliases=(),
            peak_flops_per_s={k: v / n for k, v in self.peak_flops_per_s.items()},
            hbm_bytes_per_s=self.hbm_bytes_per_s / n,
            hbm_bytes=self.hbm_bytes // n,
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
_REQUIRED_FIELDS = ("peak_flops_per_s", "hbm_bytes_per_s", "hbm_bytes")
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
# Built-in chips
# --------------------------------------------------------------------------------------------------

_READ = "read 2026-11-22"
_BOOK = "How to Scale Your Model (Austin et al., 2025)"
_BOOK_TPU_TABLE = (
    f"{_BOOK}, Part 2 'How to Think About TPUs', 'TPU Specs' table, "
    "https://jax-ml.github.io/scaling-book/tpus/ "
    f"(tpus.md @ github.com/jax-ml/scaling-book 54e2c43), {_READ}"
)
_BOOK_ICI_TABLE = (
    f"{_BOOK}, Part 2, interconnect table 'ICI BW/link (one-way, bytes/s)', "
    f"https://jax-ml.github.io/scaling-book/tpus/, {_READ}"
)
_BOOK_TPU_NET = (
    f"{_BOOK}, Part 2 'TPU Networking': v5e/v6e connect 4 nearest neighbours (2D torus), v4/v5p 6 (3D "
    "torus); wraparound on axes of 16 (v5e/v6e) or on full 4x4x4 cubes (v4/v5p); links full duplex "
    f"(table gives one-way and bidi = 2x), https://jax-ml.github.io/scaling-book/tpus/, {_READ}"
)
_BOOK_PCIE_DCN = (
    f"{_BOOK}, Part 2, after the ICI table: 'PCIe bandwidth is typically around 1.6e10 bytes/second per TPU "
    "(3.2e10 for TPU v6e), while DCN bandwidth is typically around 6.25e9 bytes/second per TPU (12.5e9 for "
    f"TPU v6e and 3.125e9 for TPU v5e)', https://jax-ml.github.io/scaling-book/tpus/, {_READ}"
)
_BOOK_V4_PCIE = (
    f"{_BOOK}, Part 2 'PCIe bandwidth is limited': 'PCIe bandwidth for TPU v4 is 16GB / second each way', "
    f"{_READ}"
)
_BOOK_7X_ICI = (
    f"{_BOOK}, Part 2 interconnect table, 2026 revision with a TPU7x row (9.0e10 one-way, 1.8e11 bidi per "
    "link; DCN 12.5e9 per TPU for v6e and TPU7x), as mirrored by translations of tpus.md; consistent with "
    f"Google's 1200 GB/s bidirectional ICI per chip over 6 links, {_READ}"
)
_JAX_TPU_INFO = "JAX 0.10.2 jax/_src/pallas/mosaic/tpu_info.py (_get_tpu_info_impl, per-TensorCore figures)"
_JAX_DEVICE_KIND = (
    "JAX device_kind strings: jax/_src/pallas/mosaic/tpu_info.py chip_version_from_device_kind (JAX 0.10.2) "
    "and openxla/xla xla/python/ifrt/ir/utils.cc GetDeviceMemoryInBytes"
)
_XLA_MEM = "openxla/xla xla/python/ifrt/ir/utils.cc GetDeviceMemoryInBytes (kGB = 1024*1024*1024)"
_JAX_PRECISION = (
    "f32 dots at JAX's default precision run as one bf16 MXU pass on TPU (JAX 'Matmul precision' guide, "
    f"https://docs.jax.dev/en/latest/201/precision.html, {_READ}); precision=HIGHEST takes several passes"
)
_GOOGLE_V4 = (
    "Google Cloud TPU v4 docs, https://docs.cloud.google.com/tpu/docs/v4: 'Peak compute per chip 275 "
    f"teraflops (bf16 or int8)', 'HBM2 capacity and bandwidth 32 GiB, 1200 GBps', 3D mesh/torus, {_READ}"
)
_GOOGLE_V5E = (
    "Google Cloud TPU v5e docs, https://docs.cloud.google.com/tpu/docs/v5e: 197 TFLOPs bf16, 393 TOPs "
    "int8, 16 GB HBM2 at 819 GBps, 400 GBps bidirectional ICI per chip, 4 ICI ports per chip, 2D torus, "
    f"2 x 100 Gbps NICs per 8-chip host, {_READ}"
)
_GOOGLE_V5P = (
    "Google Cloud TPU v5p docs, https://docs.cloud.google.com/tpu/docs/v5p: 459 TFLOPs bf16 and FP8, "
    "HBM 95 GiB at 2765 GBps, 1200 GBps bidirectional ICI per chip, 50 Gbps DCN per chip, 3D torus, "
    f"{_READ}"
)
_GOOGLE_7X = (
    "Google Cloud TPU7x (Ironwood) docs, https://docs.cloud.google.com/tpu/docs/tpu7x, system "
    "architecture table: 2307 TFLOPs bf16, 4614 TFLOPs FP8, 192 GiB HBM at 7380 GB/s, 1200 GB/s "
    "bidirectional ICI per chip, 100 Gb/s DCN per chip, 2 TensorCores per chip exposed as two devices "
    f"(no megacore); v6e column: 918 TFLOPs bf16/FP8, 32 GiB at 1638 GB/s, 800 GB/s ICI, {_READ}"
)

_BOOK_GPU = (
    f"{_BOOK}, Part 12 'How to Think About GPUs', https://jax-ml.github.io/scaling-book/gpus/, {_READ}"
)
_BOOK_GPU_NVLINK = (
    f"{_BOOK_GPU}: NVLink table, 'Node GPU to GPU bandwidth (GB/s full-duplex)' 300 (Ampere) / 450 "
    "(Hopper) / 900 (Blackwell) per GPU each way, node size (NVLink domain) 8"
)
_BOOK_GPU_IB = (
    f"{_BOOK_GPU}: reference DGX SuperPod nodes have '8 400Gbps CX7 NICs (one per GPU)', i.e. 400 GB/s "
    "node egress = 5e10 bytes/s per GPU (H100; B200 node egress 400e9 likewise)"
)
_NV_BASEPOD = (
    "NVIDIA DGX BasePOD reference architecture, core components, https://docs.nvidia.com/dgx-basepod/"
    "reference-architecture-infrastructure-foundation-enterprise-ai/latest/core-components.html: DGX "
    "H100/H200/B200 have eight single-port ConnectX-7 VPI, up to 400 Gb/s; DGX B200 has 1.4TB of GPU "
    f"memory, DGX H200 1,128 GB, DGX H100 640 GB, {_READ}"
)
_NV_A100 = (
    "NVIDIA A100 Tensor Core GPU datasheet (nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf), A100 80GB "
    "SXM: BF16 312 TFLOPS, TF32 156 TFLOPS, INT8 624 TOPS, INT4 1248 TOPS, FP64 Tensor Core 19.5 TFLOPS "
    "(dense; sparse figures are 2x), 80GB HBM2e at 2,039 GB/s, NVLink 600 GB/s, PCIe Gen4 64 GB/s; as "
    f"tabulated at https://glennklockwood.com/garden/processors/A100, {_READ}"
)
_NV_DGX_A100 = (
    "NVIDIA DGX A100: eight Mellanox ConnectX-6 200 Gb/s HDR InfiniBand adapters, one per GPU "
    f"(https://developer.nvidia.com/blog/defining-ai-innovation-with-dgx-a100), {_READ}"
)
_NV_H100 = (
    "NVIDIA H100 Tensor Core GPU datasheet, H100 SXM column, https://www.nvidia.com/en-us/data-center/h100/: "
    "BF16/FP16 1,979 TFLOPS*, FP8 3,958 TFLOPS*, INT8 3,958 TOPS*, TF32 989 TFLOPS*, FP64 Tensor Core "
    "67 TFLOPS, 80GB, 3.35TB/s, NVLink 900GB/s, PCIe Gen5 128GB/s (* with sparsity; 'specifications 1/2 "
    f"lower without sparsity'); the book's Part 1 Question 5 halves them the same way, {_READ}"
)
_NV_H200 = (
    "NVIDIA H200 Tensor Core GPU, https://www.nvidia.com/en-us/data-center/h200/: H200 SXM 141GB HBM3e at "
    "4.8TB/s; Tensor Core FLOPS identical to H100 SXM (BF16 1,979 TFLOPS* with sparsity); NVLink 900GB/s; "
    f"PCIe Gen5 128GB/s, {_READ}"
)
_NV_B200 = (
    "NVIDIA HGX B200 (1,000 W) per-GPU dense figures: BF16 2.25 PFLOPS, FP8/FP6/INT8 4.5, FP4 9.0, TF32 "
    "1.1, FP64 40 TFLOPS (sparse = 2x), from NVIDIA's Blackwell datasheet as tabulated at "
    f"https://glennklockwood.com/garden/processors/B200, {_READ}; the book's Part 12 table gives 2.3e15 "
    "bf16, 4.5e15 fp8/int8, 9.0e15 fp4"
)

_TPU_F32 = {"peak_flops_per_s.f32": _JAX_PRECISION}


def _tpu(
    *,
    id: str,
    name: str,
    aliases: tuple[str, ...],
    peaks: Mapping[str, float],
    hbm_bytes_per_s: float,
    hbm_bytes: int,
    on_chip: Mapping[str, int],
    ici_link_bytes_per_s: float,
    ici_links_per_chip: int,
    ici_torus_axes: int,
    pcie_bytes_per_s: float,
    dcn_bytes_per_s: float,
    sources: Mapping[str, str],
    devices_per_chip: int = 1,
) -> ChipSpec:
    base_sources = {
        "kind": "a Google Cloud TPU",
        "aliases": _JAX_DEVICE_KIND,
        "devices_per_chip": _JAX_TPU_INFO + " (num_physical_tensor_cores_per_chip, supports_megacore)",
        "ici_bidirectional": _BOOK_TPU_NET,
        "ici_torus_axes": _BOOK_TPU_NET,
        "ici_wraparound": _BOOK_TPU_NET,
        **_TPU_F32,
    }
    return ChipSpec(
        id=id,
        name=name,
        kind="tpu",
        aliases=aliases,
        peak_flops_per_s={**peaks, "f32": peaks["bf16"]},
        hbm_bytes_per_s=hbm_bytes_per_s,
        hbm_bytes=hbm_bytes,
        on_chip_memory_bytes=on_chip,
        devices_per_chip=devices_per_chip,
        ici_link_bytes_per_s=ici_link_bytes_per_s,
        ici_links_per_chip=ici_links_per_chip,
        ici_bidirectional=True,
        ici_torus_axes=ici_torus_axes,
        ici_wraparound=True,
        pcie_bytes_per_s=pcie_bytes_per_s,
        dcn_bytes_per_s=dcn_bytes_per_s,
        sources={**base_sources, **sources},
    )


def _builtin_chips() -> dict[str, ChipSpec]:
    chips = [
        _tpu(
            id="tpu-v4",
            name="TPU v4",
            aliases=("TPU v4", "TPU v4p", "v4"),
            peaks={"bf16": 2.75e14, "int8": 2.75e14},
            hbm_bytes_per_s=1.2e12,
            hbm_bytes=32 * GiB,
            on_chip={"vmem": 2 * 16 * MiB, "cmem": 134_000_000},
            ici_link_bytes_per_s=4.5e10,
            ici_links_per_chip=6,
            ici_torus_axes=3,
            pcie_bytes_per_s=1.6e10,
            dcn_bytes_per_s=6.25e9,
            sources={
                "name": _GOOGLE_V4,
                "peak_flops_per_s": f"{_BOOK_TPU_TABLE}: TPU v4p 2.75e14 bf16 and int8; {_GOOGLE_V4}",
                "hbm_bytes_per_s": f"{_BOOK_TPU_TABLE}: TPU v4p 1.2e12; {_GOOGLE_V4}",
                "hbm_bytes": f"{_GOOGLE_V4}; {_XLA_MEM}: 'TPU v4' 32 GiB",
                "on_chip_memory_bytes": (
                    f"{_JAX_TPU_INFO}: TPU_V4 vmem 16 MiB per core x 2 cores, cmem 134,000,000 bytes per chip"
                ),
                "ici_link_bytes_per_s": f"{_BOOK_ICI_TABLE}: TPU v4p 4.5e10",
                "ici_links_per_chip": _BOOK_TPU_NET + " (6 neighbours in 3D)",
                "pcie_bytes_per_s": _BOOK_V4_PCIE,
                "dcn_bytes_per_s": _BOOK_PCIE_DCN + " (v4: the typical 6.25e9)",
            },
        ),
        _tpu(
            id="tpu-v5e",
            name="TPU v5e",
            aliases=("TPU v5 lite", "TPU v5e", "v5e", "TPU v5 litepod", "v5litepod"),
            peaks={"bf16": 1.97e14, "int8": 3.94e14, "int4": 7.88e14},
            # The book's Part 2 table at 54e2c43 gives 8.1e11; later revisions, JAX tpu_info (8.20e11) and
            # Google (819 GBps) say 8.2e11. 8.1e11 is kept to match the worked examples this project checks.
            hbm_bytes_per_s=8.1e11,
            hbm_bytes=16 * GiB,
            on_chip={"vmem": 128 * MiB},
            ici_link_bytes_per_s=4.5e10,
            ici_links_per_chip=4,
            ici_torus_axes=2,
            pcie_bytes_per_s=1.6e10,
            dcn_bytes_per_s=3.125e9,
            sources={
                "name": _GOOGLE_V5E,
                "peak_flops_per_s": f"{_BOOK_TPU_TABLE}: TPU v5e 1.97e14 bf16, 3.94e14 int8; {_GOOGLE_V5E}",
                "peak_flops_per_s.int4": f"{_JAX_TPU_INFO}: TPU_V5E int4_ops_per_second 7.88e14",
                "hbm_bytes_per_s": (
                    f"{_BOOK_TPU_TABLE}: TPU v5e 8.1e11 (later revisions of the book, and Part 1's "
                    f"'1.97e14 / 8.20e11 = 240', use 8.2e11; {_GOOGLE_V5E}; {_JAX_TPU_INFO}: 8.20e11)"
                ),
                "hbm_bytes": f"{_BOOK}, Part 2: 'TPU v5e has 16GiB of HBM'; {_XLA_MEM}: 'TPU v5 lite' 16 GiB",
                "on_chip_memory_bytes": (
                    f"{_BOOK}, Part 2: VMEM '128 MiB on TPU v5e'; {_JAX_TPU_INFO}: TPU_V5E vmem 128 MiB"
                ),
                "ici_link_bytes_per_s": (
                    f"{_BOOK_ICI_TABLE}: TPU v5e 4.5e10 (Part 1's two-chip example: 'copy 4.5e10 bytes/s "
                    f"in each direction'); {_GOOGLE_V5E}"
                ),
                "ici_links_per_chip": f"{_GOOGLE_V5E} ('ICI ports per chip 4')",
                "pcie_bytes_per_s": _BOOK_PCIE_DCN,
                "dcn_bytes_per_s": _BOOK_PCIE_DCN + f"; {_GOOGLE_V5E}",
            },
        ),
        _tpu(
            id="tpu-v5p",
            name="TPU v5p",
            aliases=("TPU v5", "TPU v5p", "v5p"),
            peaks={"bf16": 4.59e14, "int8": 9.18e14, "fp8": 4.59e14, "int4": 1.84e15},
            hbm_bytes_per_s=2.8e12,
            hbm_bytes=95 * GiB,
            on_chip={"vmem": 2 * 64 * MiB},
            ici_link_bytes_per_s=9e10,
            ici_links_per_chip=6,
            ici_torus_axes=3,
            pcie_bytes_per_s=1.6e10,
            dcn_bytes_per_s=6.25e9,
            sources={
                "name": _GOOGLE_V5P,
                "peak_flops_per_s": f"{_BOOK_TPU_TABLE}: TPU v5p 4.59e14 bf16, 9.18e14 int8",
                "peak_flops_per_s.fp8": f"{_GOOGLE_V5P} ('Peak compute per chip (FP8) 459')",
                "peak_flops_per_s.int4": f"{_JAX_TPU_INFO}: TPU_V5P int4 1.84e15 per chip",
                "hbm_bytes_per_s": f"{_BOOK_TPU_TABLE}: TPU v5p 2.8e12; {_GOOGLE_V5P}",
                "hbm_bytes": f"{_GOOGLE_V5P}; {_XLA_MEM}: 'TPU v5' 95 GiB (the book's table rounds to 96GB)",
                "on_chip_memory_bytes": f"{_JAX_TPU_INFO}: TPU_V5P vmem 64 MiB per core x 2 cores",
                "ici_link_bytes_per_s": f"{_BOOK_ICI_TABLE}: TPU v5p 9e10; {_GOOGLE_V5P}",
                "ici_links_per_chip": _BOOK_TPU_NET + " (6 neighbours in 3D)",
                "pcie_bytes_per_s": _BOOK_PCIE_DCN,
                "dcn_bytes_per_s": f"{_BOOK_PCIE_DCN}; {_GOOGLE_V5P} (50 Gb/s = 6.25e9 B/s)",
            },
        ),
        _tpu(
            id="tpu-v6e",
            name="TPU v6e (Trillium)",
            aliases=("TPU v6 lite", "TPU v6e", "v6e", "Trillium"),
            peaks={"bf16": 9.2e14, "int8": 1.84e15, "fp8": 9.2e14, "int4": 3.68e15},
            hbm_bytes_per_s=1.6e12,
            hbm_bytes=32 * GiB,
            on_chip={"vmem": 128 * MiB},
            ici_link_bytes_per_s=9e10,
            ici_links_per_chip=4,
            ici_torus_axes=2,
            pcie_bytes_per_s=3.2e10,
            dcn_bytes_per_s=1.25e10,
            sources={
                "name": _GOOGLE_7X,
                "peak_flops_per_s": f"{_BOOK_TPU_TABLE}: TPU v6e 9.20e14 bf16, 1.84e15 int8; {_GOOGLE_7X}",
                "peak_flops_per_s.fp8": f"{_JAX_TPU_INFO}: TPU_V6E fp8 9.20e14; {_GOOGLE_7X}",
                "peak_flops_per_s.int4": f"{_JAX_TPU_INFO}: TPU_V6E int4 3.68e15",
                "hbm_bytes_per_s": f"{_BOOK_TPU_TABLE}: TPU v6e 1.6e12; {_GOOGLE_7X}",
                "hbm_bytes": f"{_GOOGLE_7X}; {_XLA_MEM}: 'TPU v6 lite' 32 GiB",
                "on_chip_memory_bytes": f"{_JAX_TPU_INFO}: TPU_V6E vmem 128 MiB",
                "ici_link_bytes_per_s": f"{_BOOK_ICI_TABLE}: TPU v6e 9e10; {_GOOGLE_7X}",
                "ici_links_per_chip": _BOOK_TPU_NET + " (4 neighbours in 2D)",
                "pcie_bytes_per_s": _BOOK_PCIE_DCN,
                "dcn_bytes_per_s": f"{_BOOK_PCIE_DCN}; {_GOOGLE_7X} (100 Gb/s = 1.25e10 B/s)",
            },
        ),
        _tpu(
            id="tpu7x",
            name="TPU7x (Ironwood)",
            aliases=("TPU7x", "TPU 7x", "TPU v7x", "v7x", "Ironwood"),
            # Ironwood has no int8 MXU mode (JAX tpu_info: int8 'Not Available'; is_matmul_supported for
            # generation 7 lists f32/bf16/fp8 only), so int8 falls back to bf16 with fallback=True.
            peaks={"bf16": 2.307e15, "fp8": 4.614e15},
            hbm_bytes_per_s=7.38e12,
            hbm_bytes=192 * GiB,
            on_chip={"vmem": 2 * 64 * MiB},
            ici_link_bytes_per_s=9e10,
            ici_links_per_chip=6,
            ici_torus_axes=3,
            pcie_bytes_per_s=1.6e10,
            dcn_bytes_per_s=1.25e10,
            devices_per_chip=2,
            sources={
                "name": _GOOGLE_7X,
                "peak_flops_per_s": (
                    f"{_GOOGLE_7X}; the book's 2026 table row (2.30e15 bf16, 4.61e15 8-bit) and "
                    f"{_JAX_TPU_INFO} "
                    "(2.31e15 bf16, 4.60e15 fp8, int8 'Not Available') agree"
                ),
                "hbm_bytes_per_s": f"{_GOOGLE_7X} (7380 GB/s; the book's 2026 table rounds to 7.4e12)",
                "hbm_bytes": f"{_GOOGLE_7X} ('HBM capacity per chip (GiB) 192')",
                "on_chip_memory_bytes": f"{_JAX_TPU_INFO}: TPU_7X vmem 64 MiB per TensorCore x 2",
                "devices_per_chip": (
                    f"{_GOOGLE_7X}; {_JAX_TPU_INFO}: TPU_7X has 2 physical TensorCores and no megacore"
                ),
                "ici_link_bytes_per_s": _BOOK_7X_ICI,
                "ici_links_per_chip": (
                    f"{_GOOGLE_7X}: 1200 GB/s bidirectional per chip, as v5p's 6-link 3D torus "
                    "(1200 / 6 links / 2 directions = 100 GB/s nominal one way per link)"
                ),
                "ici_torus_axes": f"{_GOOGLE_7X} (3D torus of 4x4x4 cubes, like v5p); {_BOOK_TPU_NET}",
                "pcie_bytes_per_s": _BOOK_PCIE_DCN + " (TPU7x: the typical 1.6e10)",
                "dcn_bytes_per_s": f"{_GOOGLE_7X} (100 Gb/s = 1.25e10 B/s); {_BOOK_7X_ICI}",
            },
        ),
        ChipSpec(
            id="a100",
            name="NVIDIA A100 SXM4 80GB",
            kind="gpu",
            aliases=("NVIDIA A100-SXM4-80GB", "A100 SXM4 80GB", "A100 SXM", "a100-80gb"),
            peak_flops_per_s={
                "bf16": 3.12e14, "f32": 1.56e14, "int8": 6.24e14, "int4": 1.248e15, "f64": 1.95e13,
            },
            hbm_bytes_per_s=2.039e12,
            hbm_bytes=80 * GB,
            on_chip_memory_bytes={"l2": 40 * MiB},
            nvlink_bytes_per_s=3e11,
            nvlink_domain_size=8,
            pcie_bytes_per_s=3.2e10,
            dcn_bytes_per_s=200 * _GBIT_PER_S_BYTES_PER_S,
            sources={
                "name": _NV_A100,
                "kind": "an NVIDIA data-centre GPU",
                "devices_per_chip": "one CUDA device (one JAX device) per GPU",
                "aliases": "JAX/CUDA device name of the A100 SXM4 80GB ('NVIDIA A100-SXM4-80GB')",
                "peak_flops_per_s": f"{_NV_A100}; {_BOOK_GPU}: A100 3.1e14 bf16, 6.2e14 int8",
                "peak_flops_per_s.f32": (
                    f"TF32 tensor-core rate (156 TFLOPS dense), which f32 dots use at JAX's default "
                    f"precision on Ampere and newer (JAX 'Matmul precision' guide); {_NV_A100}"
                ),
                "hbm_bytes_per_s": _NV_A100,
                "hbm_bytes": _NV_A100 + " (80GB taken as 80e9 bytes)",
                "on_chip_memory_bytes": (
                    f"{_BOOK_GPU}: A100 L2 40MB (a CUDA device query reports 41943040 bytes = 40 MiB)"
                ),
                "nvlink_bytes_per_s": f"{_NV_A100} (600 GB/s total = 300 GB/s each way); {_BOOK_GPU_NVLINK}",
                "nvlink_domain_size": _BOOK_GPU_NVLINK,
                "pcie_bytes_per_s": _NV_A100 + " (64 GB/s total = 32 GB/s each way)",
                "dcn_bytes_per_s": _NV_DGX_A100 + " (200 Gb/s = 2.5e10 B/s per GPU)",
            },
        ),
        ChipSpec(
            id="h100",
            name="NVIDIA H100 SXM5 80GB",
            kind="gpu",
            aliases=("NVIDIA H100 80GB HBM3", "H100 SXM", "H100 SXM5", "h100-sxm", "h100-80gb"),
            peak_flops_per_s={
                "bf16": 9.895e14, "f32": 4.945e14, "fp8": 1.979e15, "int8": 1.979e15, "f64": 6.7e13,
            },
            hbm_bytes_per_s=3.35e12,
            hbm_bytes=80 * GB,
            on_chip_memory_bytes={"l2": 50 * MiB},
            nvlink_bytes_per_s=4.5e11,
            nvlink_domain_size=8,
            pcie_bytes_per_s=6.4e10,
            dcn_bytes_per_s=400 * _GBIT_PER_S_BYTES_PER_S,
            sources={
                "name": _NV_H100,
                "kind": "an NVIDIA data-centre GPU",
                "devices_per_chip": "one CUDA device (one JAX device) per GPU",
                "aliases": "JAX/CUDA device name of the H100 SXM5 ('NVIDIA H100 80GB HBM3')",
                "peak_flops_per_s": (
                    f"{_NV_H100}; sparse figures halved: BF16 1,979/2, FP8 and INT8 3,958/2; "
                    "FP64 Tensor Core "
                    f"67 (dense); {_BOOK_GPU}: H100 9.9e14 bf16, 2.0e15 fp8/int8"
                ),
                "peak_flops_per_s.f32": (
                    f"TF32 tensor-core rate 989/2 TFLOPS, which f32 dots use at JAX's default precision "
                    f"(JAX 'Matmul precision' guide); {_NV_H100}"
                ),
                "hbm_bytes_per_s": f"{_NV_H100}; {_BOOK_GPU}: 'about 3.35TB/s on H100'",
                "hbm_bytes": _NV_H100 + " (80GB taken as 80e9 bytes); " + _NV_BASEPOD,
                "on_chip_memory_bytes": (
                    f"{_BOOK_GPU}: H100 L2 capacity 50MB (CUDA reports 52428800 bytes = 50 MiB)"
                ),
                "nvlink_bytes_per_s": f"{_NV_H100} (900 GB/s total = 450 GB/s each way); {_BOOK_GPU_NVLINK}",
                "nvlink_domain_size": _BOOK_GPU_NVLINK,
                "pcie_bytes_per_s": _NV_H100 + " (128 GB/s total = 64 GB/s each way)",
                "dcn_bytes_per_s": f"{_BOOK_GPU_IB}; {_NV_BASEPOD}",
            },
        ),
        ChipSpec(
            id="h200",
            name="NVIDIA H200 SXM 141GB",
            kind="gpu",
            aliases=("NVIDIA H200", "H200 SXM", "h200-sxm", "h200-141gb"),
            peak_flops_per_s={
                "bf16": 9.895e14, "f32": 4.945e14, "fp8": 1.979e15, "int8": 1.979e15, "f64": 6.7e13,
            },
            hbm_bytes_per_s=4.8e12,
            hbm_bytes=141 * GB,
            on_chip_memory_bytes={"l2": 50 * MiB},
            nvlink_bytes_per_s=4.5e11,
            nvlink_domain_size=8,
            pcie_bytes_per_s=6.4e10,
            dcn_bytes_per_s=400 * _GBIT_PER_S_BYTES_PER_S,
            sources={
                "name": _NV_H200,
                "kind": "an NVIDIA data-centre GPU",
                "devices_per_chip": "one CUDA device (one JAX device) per GPU",
                "aliases": "JAX/CUDA device name of the H200 SXM ('NVIDIA H200')",
                "peak_flops_per_s": (
                    f"{_NV_H200}; values as for H100 SXM: {_NV_H100}; {_BOOK_GPU}: H200 9.9e14 bf16"
                ),
                "peak_flops_per_s.f32": (
                    "TF32 tensor-core rate, as for H100 SXM (JAX default f32 dot precision)"
                ),
                "hbm_bytes_per_s": f"{_NV_H200}; {_BOOK_GPU}: H200 4.8e12",
                "hbm_bytes": f"{_NV_H200} (141GB taken as 141e9 bytes); {_NV_BASEPOD}",
                "on_chip_memory_bytes": f"{_BOOK_GPU}: H200 L2 capacity 50MB (same die as H100: 50 MiB)",
                "nvlink_bytes_per_s": f"{_NV_H200} (900 GB/s total = 450 GB/s each way); {_BOOK_GPU_NVLINK}",
                "nvlink_domain_size": _BOOK_GPU_NVLINK,
                "pcie_bytes_per_s": _NV_H200 + " (128 GB/s total = 64 GB/s each way)",
                "dcn_bytes_per_s": f"{_NV_BASEPOD}; {_BOOK_GPU_IB}",
            },
        ),
        ChipSpec(
            id="b200",
            name="NVIDIA B200 (HGX, 1000 W)",
            kind="gpu",
            aliases=("NVIDIA B200", "B200 SXM", "HGX B200", "b200-sxm"),
            peak_flops_per_s={
                "bf16": 2.25e15, "f32": 1.1e15, "fp8": 4.5e15, "int8": 4.5e15, "fp4": 9e15, "f64": 4e13,
            },
            hbm_bytes_per_s=8e12,
            hbm_bytes=180 * GB,
            on_chip_memory_bytes={"l2": 126 * MiB + MiB // 2},
            nvlink_bytes_per_s=9e11,
            nvlink_domain_size=8,
            pcie_bytes_per_s=6.4e10,
            dcn_bytes_per_s=400 * _GBIT_PER_S_BYTES_PER_S,
            sources={
                "name": _NV_B200,
                "kind": "an NVIDIA data-centre GPU",
                "devices_per_chip": "one CUDA device (one JAX device) per GPU",
                "aliases": "JAX/CUDA device name of the B200 ('NVIDIA B200')",
                "peak_flops_per_s": _NV_B200,
                "peak_flops_per_s.f32": (
                    "TF32 tensor-core rate (1.1 PFLOPS dense), which f32 dots use at JAX's default "
                    "precision; "
                    f"{_NV_B200}"
                ),
                "hbm_bytes_per_s": (
                    f"NVIDIA: 8 TB/s per B200; {_BOOK_GPU}: 'about ... 9TB/s on B200' in the text, 8.0e12 in "
                    "its table (the driver-reported bus width gives 7.67e12: github.com/pytorch/ao PR 4002)"
                ),
                "hbm_bytes": (
                    f"{_NV_BASEPOD}: DGX B200 1.4TB (1,440 GB) for 8 GPUs = 180 GB each; the book's table "
                    "and early HGX material say 192GB per GPU"
                ),
                "on_chip_memory_bytes": (
                    "CUDA device query on a B200 'L2 Cache Size: 126.50 MB' (github.com/pytorch/ao PR 4002); "
                    f"{_BOOK_GPU}: B200 L2 126MB"
                ),
                "nvlink_bytes_per_s": (
                    f"NVLink 5: 1.8 TB/s bidirectional per GPU = 900 GB/s each way; {_BOOK_GPU_NVLINK}"
                ),
                "nvlink_domain_size": (
                    _BOOK_GPU_NVLINK + " (HGX/DGX B200: 8; GB200 NVL72 is a different system)"
                ),
                "pcie_bytes_per_s": (
                    "PCIe Gen5 x16 host link, 64 GB/s each way (conservative: some sources list Gen6 for "
                    "Blackwell; DGX B200 hosts are PCIe Gen5 Xeons)"
                ),
                "dcn_bytes_per_s": f"{_NV_BASEPOD}; {_BOOK_GPU_IB}",
            },
        ),
    ]
    return {chip.id: chip for chip in chips}


#: Built-in chips by id (read-only).
CHIPS: Mapping[str, ChipSpec] = types.MappingProxyType(_builtin_chips())


# --------------------------------------------------------------------------------------------------
# Lookup
# --------------------------------------------------------------------------------------------------


def _lookup_tables(chips: Mapping[str, ChipSpec]) -> tuple[dict[str, ChipSpec], dict[str, ChipSpec]]:
    """Normalized id -> chip and normalized alias -> chip; later chips win alias clashes."""
    by_id: dict[str, ChipSpec] = {}
    by_alias: dict[str, ChipSpec] = {}
    for chip in chips.values():
        by_id[_norm(chip.id)] = chip
        for alias in chip.aliases:
            by_alias[_norm(alias)] = chip
    return by_id, by_alias


_BUILTIN_TABLES = _lookup_tables(CHIPS)


def get_chip(id_or_alias: str, extra: Mapping[str, ChipSpec] | None = None) -> ChipSpec:
    """Find a chip by id or alias (a JAX ``device_kind`` such as ``"TPU v5 lite"`` works).

    Matching ignores case and every character that is not a letter or digit (``"tpu_v5e"``, ``"TPU v5e"``
    and ``"tpu-v5e"`` are the same). Search order: ``extra`` ids, ``extra`` aliases, built-in ids, built-in
    aliases; so user chips (e.g. from :func:`all_chips` or :func:`load_user_chips`) shadow built-ins.

    Args:
        id_or_alias: the name to look up.
        extra: additional chips by id, searched first.

    Returns:
        The matching ChipSpec (per chip; see :func:`get_device_spec` for a per-device view).

    Raises:
        UnknownChipError: nothing matches; the message lists the known ids and the closest match.
    """
    key = _norm(str(id_or_alias))
    tables = [_lookup_tables(extra)] if extra else []
    tables.append(_BUILTIN_TABLES)
    if key:
        for by_id, _ in tables:
            if key in by_id:
                return by_id[key]
        for _, by_alias in tables:
            if key in by_alias:
                return by_alias[key]
    candidates: dict[str, str] = {}  # normalized name -> chip id, built-ins first so extra wins
    known_ids: set[str] = set()
    for by_id, by_alias in reversed(tables):
        for table in (by_alias, by_id):
            for name, chip in table.items():
                candidates[name] = chip.id
                known_ids.add(chip.id)
    close = difflib.get_close_matches(key, list(candidates), n=1, cutoff=0.5) if key else []
    raise UnknownChipError(str(id_or_alias), known_ids, candidates[close[0]] if close else None)


def get_device_spec(device_kind: str, extra: Mapping[str, ChipSpec] | None = None) -> ChipSpec:
    """The spec of ONE JAX device of the given kind: :func:`get_chip` followed by :meth:`ChipSpec.per_device`.

    Args:
        device_kind: ``jax.Device.device_kind`` (or any id/alias).
        extra: as for :func:`get_chip`.

    Returns:
        The per-device ChipSpec (the chip itself unless it has several devices per chip, like TPU7x).

    Raises:
        UnknownChipError: nothing matches.
    """
    return get_chip(device_kind, extra).per_device()


# --------------------------------------------------------------------------------------------------
# Roofline curve
# --------------------------------------------------------------------------------------------------


def roofline_flops_per_s(chip: ChipSpec, dtype: str, intensity: Any) -> Any:
    """Attainable FLOP/s at an arithmetic intensity: ``min(peak, intensity * hbm_bytes_per_s)``.

    Args:
        chip: the chip.
        dtype: compute dtype, as for :meth:`ChipSpec.peak_flops_for` (fallbacks apply silently).
        intensity: FLOPs per HBM byte: a number, or a sequence / numpy array of them (>= 0).

    Returns:
        A float for a scalar intensity, else a float numpy array of the same shape.

    Raises:
        ValueError: an intensity is negative or NaN, or ``dtype`` is unknown.
    """
    peak, _ = chip.peak_flops_for(dtype)
    bandwidth = chip.hbm_bytes_per_s
    if _is_number(intensity):
        value = float(intensity)
        if math.isnan(value) or value < 0:
            raise ValueError(f"arithmetic intensity must be >= 0, got {intensity!r}")
        return min(peak, value * bandwidth)
    import numpy as np  # lazily: keeps `import hloscope.roofline.chips` cheap

    arr = np.asarray(intensity, dtype=float)
    if np.isnan(arr).any() or (arr < 0).any():
        raise ValueError("arithmetic intensities must be >= 0 and not NaN")
    if arr.ndim == 0:
        return float(min(peak, float(arr) * bandwidth))
    return np.minimum(peak, arr * bandwidth)


# --------------------------------------------------------------------------------------------------
# JSON
# --------------------------------------------------------------------------------------------------


def chip_to_dict(chip: ChipSpec) -> dict[str, Any]:
    """A JSON-ready dict of every field, plus derived values.

    Args:
        chip: the chip.

    Returns:
        Keys: every ChipSpec field (``id``, ``name``, ``kind``, ``aliases`` as a list,
        ``peak_flops_per_s`` {dtype: FLOP/s}, ``hbm_bytes_per_s``, ``hbm_bytes``, ``on_chip_memory_bytes``,
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


# --------------------------------------------------------------------------------------------------
# TOML chip files
# --------------------------------------------------------------------------------------------------


def chip_from_dict(data: Mapping[str, Any]) -> ChipSpec:
    """The inverse of :func:`chip_to_dict` (derived keys ignored), for chips read back from a report JSON.

    Raises:
        ChipSpecError: a field is missing or invalid (the message names it).
    """
    kwargs: dict[str, Any] = {}
    for name in _FIELDS:
        if name in data and data[name] is not None:
            value = data[name]
            kwargs[name] = tuple(value) if isinstance(value, list) else value
    try:
        return ChipSpec(**kwargs)
    except TypeError as e:
        raise ChipSpecError(f"chip in report JSON: {e}", chip=data.get("id")) from None


def config_dir() -> Path:
    """hloscope's configuration directory.

    Returns:
        ``$HLOSCOPE_CONFIG_DIR`` if set, else ``$XDG_CONFIG_HOME/hloscope`` if ``XDG_CONFIG_HOME`` is set,
        else ``~/.config/hloscope``. The directory need not exist.
    """
    explicit = os.environ.get("HLOSCOPE_CONFIG_DIR")
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_CONFIG_HOME")
    if xdg:
        return Path(xdg).expanduser() / "hloscope"
    return Path.home() / ".config" / "hloscope"


_TOML_POS_RE = re.compile(r"at line (\d+), column (\d+)")
_HEADER_RE = re.compile(
    r"^\s*\[\s*chips\s*\.\s*(\"[^\"]*\"|'[^']*'|[A-Za-z0-9_-]+)\s*(?:\.\s*([A-Za-z0-9_-]+)\s*)?\]"
)
_KEY_RE = re.compile(r"^\s*(\"[^\"]*\"|'[^']*'|[A-Za-z0-9_-]+)\s*=")


def _locate_toml_error(text: str, line: int | None) -> tuple[str | None, str | None]:
    """Best-effort (chip, field) for a TOML syntax error at ``line``: the enclosing [chips.<id>] table
    and the key being assigned on that line."""
    if line is None:
        return None, None
    chip: str | None = None
    sub: str | None = None
    lines = text.splitlines()
    for raw in lines[: max(line - 1, 0)]:
        m = _HEADER_RE.match(raw)
        if m:
            chip, sub = m.group(1).strip("\"'").lower(), m.group(2)
        elif re.match(r"^\s*\[", raw):
            chip, sub = None, None
    fld: str | None = None
    if 0 < line <= len(lines):
        here = lines[line - 1]
        m = _HEADER_RE.match(here)
        if m:
            return m.group(1).strip("\"'").lower(), m.group(2)
        m = _KEY_RE.match(here)
        if m:
            key = m.group(1).strip("\"'")
            fld = f"{sub}.{key}" if sub else key
    return chip, fld


def load_chip_file(
    path: str | os.PathLike[str], *, bases: Mapping[str, ChipSpec] | None = None
) -> dict[str, ChipSpec]:
    """Read a TOML chip file (format: ``docs/chips.md``).

    One ``[chips.<id>]`` table per chip. ``base = "<id or alias>"`` starts from another chip (a built-in,
    one in ``bases`` or one earlier or later in the same file) and overrides only the fields given; mapping
    fields (``peak_flops_per_s``, ``on_chip_memory_bytes``, ``sources``) are merged entry by entry. A table
    whose id equals a known chip's id uses that chip as its base implicitly. Ids are case-insensitive and
    stored in lower case. Fields set here without an entry in ``sources`` get the source
    ``"user chip file <path>"``.

    Args:
        path: the TOML file.
        bases: chips that ``base`` may name, searched before the built-ins (e.g. the calibrated host).

    Returns:
        The file's chips by id, in file order.

    Raises:
        ChipSpecError: unreadable file, invalid TOML (the message carries tomllib's line and column), an
            unknown or missing required field, a non-numeric, non-positive or non-finite value, an unknown
            base, or a cycle of bases. The error names the file, the chip and the field.
    """
    p = Path(path)
    try:
        data = p.read_bytes()
    except OSError as err:
        raise ChipSpecError(f"cannot read chip file: {err.strerror or err}", path=p) from err
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ChipSpecError(
            f"chip file is not UTF-8 text ({err.reason} at byte {err.start})", path=p
        ) from err
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        m = _TOML_POS_RE.search(str(err))
        line, column = (int(m.group(1)), int(m.group(2))) if m else (None, None)
        chip, fld = _locate_toml_error(text, line)
        raise ChipSpecError(
            f"invalid TOML: {err}", path=p, chip=chip, field=fld, line=line, column=column
        ) from err
    return _chips_from_document(doc, p, bases)


def _chips_from_document(
    doc: Mapping[str, Any], path: Path, bases: Mapping[str, ChipSpec] | None
) -> dict[str, ChipSpec]:
    for key in doc:
        if key not in ("chips", "format_version"):
            raise ChipSpecError(
                f"unknown top-level key {key!r}; a chip file holds [chips.<id>] tables", path=path, field=key
            )
    if "format_version" in doc and doc["format_version"] != 1:
        raise ChipSpecError(f"unsupported format_version {doc['format_version']!r}; expected 1", path=path,
                            field="format_version")
    raw_chips = doc.get("chips", {})
    if not isinstance(raw_chips, Mapping):
        raise ChipSpecError("'chips' must be a table of [chips.<id>] tables", path=path, field="chips")

    known = dict(bases) if bases is not None else {}
    # An id that matches a known chip's id (ignoring case and punctuation) overrides that chip: it takes
    # the chip's canonical id and uses it as its implicit base.
    canonical = {_norm(chip.id): chip for chip in (*CHIPS.values(), *known.values())}
    tables: dict[str, Mapping[str, Any]] = {}
    seen: dict[str, str] = {}
    for raw_id, table in raw_chips.items():
        if not _ID_RE.match(raw_id):
            raise ChipSpecError(
                f"chip id must match {_ID_RE.pattern} (letters, digits, '-' and '_')",
                path=path, chip=raw_id, field="id",
            )
        match = canonical.get(_norm(raw_id))
        chip_id = match.id if match is not None else raw_id.lower()
        if _norm(chip_id) in seen:
            raise ChipSpecError(
                f"chip defined twice (as {seen[_norm(chip_id)]!r} and {raw_id!r}; "
                "ids ignore case and punctuation)",
                path=path, chip=chip_id,
            )
        seen[_norm(chip_id)] = raw_id
        if not isinstance(table, Mapping):
            raise ChipSpecError(f"must be a table, got {_describe(table)}", path=path, chip=chip_id)
        tables[chip_id] = table

    resolved: dict[str, ChipSpec] = {}
    in_progress: list[str] = []

    def resolve(chip_id: str) -> ChipSpec:
        if chip_id in resolved:
            return resolved[chip_id]
        if chip_id in in_progress:
            cycle = " -> ".join([*in_progress[in_progress.index(chip_id):], chip_id])
            raise ChipSpecError(f"cycle of bases: {cycle}", path=path, chip=chip_id, field="base")
        in_progress.append(chip_id)
        table = tables[chip_id]
        base: ChipSpec | None = None
        if "base" in table:
            base_name = table["base"]
            if not isinstance(base_name, str) or not base_name.strip():
                raise ChipSpecError(f"must be a chip id or alias, got {_describe(base_name)}", path=path,
                                    chip=chip_id, field="base")
            local = next((cid for cid in tables if _norm(cid) == _norm(base_name)), None)
            if local is not None and local != chip_id:
                base = resolve(local)
            else:
                try:
                    base = get_chip(base_name, known)
                except UnknownChipError as err:
                    raise ChipSpecError(str(err), path=path, chip=chip_id, field="base") from None
        else:
            base = canonical.get(_norm(chip_id))
        try:
            spec = _spec_from_table(chip_id, table, base, path)
        except ChipSpecError as err:
            raise err.located(path=path, chip=chip_id) from None
        in_progress.pop()
        resolved[chip_id] = spec
        return spec

    for chip_id in tables:
        resolve(chip_id)
    return {chip_id: resolved[chip_id] for chip_id in tables}


_SCALAR_FIELDS = tuple(f for f in _FIELDS if f not in (*_MAPPING_FIELDS, "id", "name", "kind", "aliases"))


def _spec_from_table(chip_id: str, table: Mapping[str, Any], base: ChipSpec | None, path: Path) -> ChipSpec:
    allowed = (set(_FIELDS) - {"id"}) | {"base"}
    for key in table:
        if key not in allowed:
            raise ChipSpecError(
                f"unknown field; known fields: base, {', '.join(f for f in _FIELDS if f != 'id')}", field=key
            )
    default_source = f"user chip file {path}"
    same_chip = base is not None and base.id == chip_id

    values: dict[str, Any] = {"id": chip_id}
    if "name" in table:
        values["name"] = table["name"]
    elif base is None:
        values["name"] = chip_id
    else:
        values["name"] = base.name if same_chip else f"{base.name} ({chip_id})"
    values["kind"] = table.get("kind", base.kind if base else _DEFAULTS["kind"])

    if "aliases" in table:
        raw_aliases = table["aliases"]
        if not isinstance(raw_aliases, list):
            raise ChipSpecError(f"must be a list of strings, got {_describe(raw_aliases)}", field="aliases")
        raw_aliases = [_text(a, "aliases") for a in raw_aliases]
        inherited = list(base.aliases) if same_chip else []
        values["aliases"] = tuple(dict.fromkeys([*inherited, *raw_aliases]))
    else:
        values["aliases"] = base.aliases if same_chip else ()

    # A value gets the default source "user chip file <path>" only when the file changes it (relative to
    # the base, or to the default when there is no base) and gives no source of its own for it.
    changed: list[str] = []
    for name in ("peak_flops_per_s", "on_chip_memory_bytes"):
        merged = dict(getattr(base, name)) if base else {}
        if name in table:
            for key, value in _table(table[name], name).items():
                if merged.get(key, None) != value or key not in merged:
                    changed.append(f"{name}.{key}")
                merged[key] = value
        elif base is None and name in _REQUIRED_FIELDS:
            raise ChipSpecError("missing required field", field=name)
        values[name] = merged
    for name in _SCALAR_FIELDS:
        previous = getattr(base, name) if base is not None else _DEFAULTS.get(name)
        if name in table:
            values[name] = table[name]
            if table[name] != previous or type(table[name]) is not type(previous):
                changed.append(name)
        elif base is not None:
            values[name] = previous
        elif name in _REQUIRED_FIELDS:
            raise ChipSpecError("missing required field", field=name)
        else:
            values[name] = previous
    if "name" in table and (base is None or table["name"] != base.name):
        changed.append("name")
    if "kind" in table and table["kind"] != (base.kind if base else _DEFAULTS["kind"]):
        changed.append("kind")
    if "aliases" in table and values["aliases"] != (base.aliases if same_chip else ()):
        changed.append("aliases")

    given = dict(_table(table["sources"], "sources")) if "sources" in table else {}
    sources: dict[str, str] = dict(base.sources) if base else {}
    for key in changed:
        sources.pop(key, None)  # the base's provenance no longer applies
        if key not in given and key.split(".")[0] not in given:
            sources[key] = default_source
    sources.update(given)
    values["sources"] = sources
    return ChipSpec(**values)


def load_user_chips(directory: str | os.PathLike[str] | None = None) -> dict[str, ChipSpec]:
    """The user's chips: ``host.toml`` (written by ``hloscope calibrate``) then ``chips.toml``.

    ``chips.toml`` may use the host chip as a ``base`` and overrides it on an id clash. Missing files are
    skipped.

    Args:
        directory: where to look; defaults to :func:`config_dir`.

    Returns:
        Chips by id (empty if neither file exists).

    Raises:
        ChipSpecError: a file exists but is invalid.
    """
    root = Path(directory) if directory is not None else config_dir()
    chips: dict[str, ChipSpec] = {}
    host = root / HOST_FILE_NAME
    if host.is_file():
        chips.update(load_chip_file(host))
    user = root / CHIPS_FILE_NAME
    if user.is_file():
        chips.update(load_chip_file(user, bases=chips))
    return chips


def all_chips(directory: str | os.PathLike[str] | None = None) -> dict[str, ChipSpec]:
    """Built-in chips, overridden and extended by the user's chips (:func:`load_user_chips`).

    Args:
        directory: the configuration directory; defaults to :func:`config_dir`.

    Returns:
        Chips by id; pass it as ``extra`` to :func:`get_chip` so user chips win lookups.

    Raises:
        ChipSpecError: a user chip file is invalid.
    """
    merged = dict(CHIPS)
    for chip_id, chip in load_user_chips(directory).items():
        merged.pop(chip_id, None)  # re-insert at the end so user chips come last (and win alias clashes)
        merged[chip_id] = chip
    return merged


# ---- writing -------------------------------------------------------------------------------------------

_BARE_KEY_RE = re.compile(r"^[A-Za-z0-9_-]+$")


def _toml_key(key: str) -> str:
    return key if _BARE_KEY_RE.match(key) else _toml_str(key)


def _toml_str(value: str) -> str:
    out = ['"']
    for ch in value:
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def _toml_float(value: float) -> str:
    """Shortest round-tripping TOML float; scientific notation from 1e6 up (``1.97e+14``)."""
    text = repr(float(value))
    if abs(value) >= 1e6 and "e" not in text:
        for digits in range(17):
            candidate = f"{value:.{digits}e}"
            if float(candidate) == value:
                return candidate
    return text


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _toml_float(value)
    if isinstance(value, str):
        return _toml_str(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    raise TypeError(f"cannot write {type(value).__name__} to TOML")


def chips_to_toml(chips: Iterable[ChipSpec] | Mapping[str, ChipSpec], *, header: str | None = None) -> str:
    """Render chips in the chip-file format that :func:`load_chip_file` reads back to equal ChipSpecs.

    Args:
        chips: the chips (a mapping's values are used).
        header: optional comment text for the top of the file (one ``#`` line per text line).

    Returns:
        TOML text.
    """
    specs = list(chips.values()) if isinstance(chips, Mapping) else list(chips)
    lines: list[str] = []
    if header:
        lines.extend(f"# {line}".rstrip() for line in header.splitlines())
    lines.append("format_version = 1")
    for chip in specs:
        prefix = f"chips.{_toml_key(chip.id)}"
        lines.append("")
        lines.append(f"[{prefix}]")
        for name in ("name", "kind", "aliases", *_SCALAR_FIELDS):
            value = getattr(chip, name)
            if value is not None:
                lines.append(f"{name} = {_toml_value(value)}")
        for name in _MAPPING_FIELDS:
            mapping = getattr(chip, name)
            if not mapping:
                continue
            lines.append("")
            lines.append(f"[{prefix}.{name}]")
            for key, value in mapping.items():
                lines.append(f"{_toml_key(key)} = {_toml_value(value)}")
    return "\n".join(lines) + "\n"
