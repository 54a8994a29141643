"""Chip specifications for roofline analysis: the built-in chips, lookup by name or JAX ``device_kind``.

The roofline model of "How to Scale Your Model" (Austin et al. 2025) needs three numbers per chip::

    T_compute = FLOPs / peak_flops_per_s[dtype]
    T_memory  = HBM bytes / hbm_bytes_per_s
    T_comm    = wire bytes / link bandwidth (ICI, NVLink or Infinity Fabric, PCIe or DCN, bytes/s in ONE
                direction)

The chips are data, not code. The built-in table (TPU v4, v5e, v5p, v6e, TPU7x; NVIDIA A100 SXM4 80GB, H100
SXM, H200 SXM, B200; AMD Instinct MI300X, MI325X, MI355X) is ``hloscope/roofline/chips.toml``, package data
in the same TOML format as a user's chip file, read by the same reader and validator
(:func:`hloscope.roofline.chip_files.load_chip_file`) the first time a chip is looked up, then cached. Each
number carries its source in ``ChipSpec.sources``. The user's files (``chips.toml``, ``host.toml`` in
:func:`config_dir`) override and extend the built-ins through :func:`all_chips`.

Layout of the chip code:

* :mod:`hloscope.roofline.chip_spec`: :class:`ChipSpec` (one chip's numbers, validated), units, dtype
  classes, errors, the JSON dict form and the id/alias index;
* :mod:`hloscope.roofline.chip_files`: the TOML format (read, validate, write), the config directory;
* this module: the built-in table, lookup (:func:`get_chip`, :func:`get_device_spec`, :func:`all_chips`)
  and the roofline curve. It re-exports the public names of the other two, so
  ``from hloscope.roofline.chips import ChipSpec, get_chip, chip_from_dict, GiB`` keeps working.

Units and meanings are described in :mod:`hloscope.roofline.chip_spec` and ``docs/chips.md``: every
quantity carries its unit in its name (``*_bytes``, ``*_bytes_per_s``, ``*_flops_per_s``), peaks are dense,
bandwidths one direction, figures per chip.

Importing this module is cheap: it needs only the standard library, and reads no file until a chip is
looked up (numpy is imported lazily by :func:`roofline_flops_per_s` for array inputs).
"""

from __future__ import annotations

import functools
import math
import os
import re
import types
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from hloscope._regex import LazyPattern
from hloscope.roofline.chip_files import (
    BUILTIN_CHIPS_FILE_NAME,
    CHIPS_FILE_NAME,
    HOST_FILE_NAME,
    builtin_chips_file,
    chips_to_toml,
    config_dir,
    load_builtin_chip_file,
    load_chip_file,
    load_user_chips,
)
from hloscope.roofline.chip_spec import (
    DTYPE_KEYS,
    GB,
    KINDS,
    LEGACY_KEYS,
    ChipSpec,
    ChipSpecError,
    GiB,
    LookupTables,
    MiB,
    UnknownChipError,
    _is_number,
    canonical_dtype,
    chip_from_dict,
    chip_to_dict,
    find_chip,
    lookup_tables,
)

if TYPE_CHECKING:
    #: Built-in chips by id (read-only), loaded on first access.
    CHIPS: Mapping[str, ChipSpec]

__all__ = [
    "GB",
    "GiB",
    "MiB",
    "DTYPE_KEYS",
    "KINDS",
    "LEGACY_KEYS",
    "CHIPS",
    "BUILTIN_CHIPS_FILE_NAME",
    "CHIPS_FILE_NAME",
    "HOST_FILE_NAME",
    "ChipSpec",
    "ChipSpecError",
    "UnknownChipError",
    "all_chips",
    "builtin_chips",
    "builtin_chips_file",
    "canonical_dtype",
    "chip_from_dict",
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
# Built-in chips
# --------------------------------------------------------------------------------------------------


@functools.cache
def _builtin_state() -> tuple[Mapping[str, ChipSpec], LookupTables]:
    chips = load_builtin_chip_file()
    return types.MappingProxyType(chips), lookup_tables(chips)


def builtin_chips() -> Mapping[str, ChipSpec]:
    """The built-in chips by id, read from the packaged ``chips.toml`` on the first call and cached.

    The file is read with :func:`load_chip_file` (``with_builtins=False``), the reader user chip files go
    through; the same ChipSpec objects are returned on every call.

    Returns:
        A read-only mapping, in file order.

    Raises:
        ChipSpecError: the packaged file is missing or invalid (a broken install).
    """
    return _builtin_state()[0]


def builtin_lookup_tables() -> LookupTables:
    """The id/alias index of :func:`builtin_chips` (built once, for :func:`get_chip`)."""
    return _builtin_state()[1]


def __getattr__(name: str) -> Any:
    # ``CHIPS`` is computed on first access, so importing this module reads no file (PEP 562).
    if name == "CHIPS":
        return builtin_chips()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# --------------------------------------------------------------------------------------------------
# Lookup
# --------------------------------------------------------------------------------------------------


def get_chip(id_or_alias: str, extra: Mapping[str, ChipSpec] | None = None) -> ChipSpec:
    """Find a chip by id or alias (a JAX ``device_kind`` such as ``"TPU v5 lite"`` works).

    Matching ignores case and every character that is not a letter or digit (``"tpu_v5e"``, ``"TPU v5e"``
    and ``"tpu-v5e"`` are the same). Search order: ``extra`` ids, built-in ids, ``extra`` aliases, built-in
    aliases; so user chips (e.g. from :func:`all_chips` or :func:`load_user_chips`) shadow built-ins.

    Args:
        id_or_alias: the name to look up.
        extra: additional chips by id, searched first.

    Returns:
        The matching ChipSpec (per chip; see :func:`get_device_spec` for a per-device view).

    Raises:
        UnknownChipError: nothing matches; the message lists the known ids and the closest match.
    """
    search = [lookup_tables(extra)] if extra else []
    search.append(builtin_lookup_tables())
    return find_chip(id_or_alias, search)


# ROCm device kinds that name no chip directly. XLA's ROCm executor names a device by HIP's marketing name
# ("AMD Instinct MI300X") and falls back to the gfx target with its feature flags
# ("gfx942:sramecc+:xnack-") when HIP gives no name (openxla/xla rocm_executor.cc, CreateDeviceDescription);
# SR-IOV guests (cloud VMs) see a " VF" suffix ("AMD Instinct MI350X VF" in jax-ml/jax PR 37634).
_GFX_TARGET_RE = LazyPattern(r"^\s*(gfx[0-9a-f]+)(?::[a-z0-9_]+[+-]?)*\s*$", re.IGNORECASE)
_VIRTUAL_FUNCTION_RE = LazyPattern(r"\s+VF\s*$", re.IGNORECASE)


def get_device_spec(device_kind: str, extra: Mapping[str, ChipSpec] | None = None) -> ChipSpec:
    """The spec of ONE JAX device of the given kind: :func:`get_chip` followed by :meth:`ChipSpec.per_device`.

    Besides every id and alias, two spellings that JAX on ROCm reports are understood: a gfx target with
    feature flags (``"gfx942:sramecc+:xnack-"`` is looked up as ``"gfx942"``) and an SR-IOV virtual function
    (``"AMD Instinct MI300X VF"`` as ``"AMD Instinct MI300X"``).

    Args:
        device_kind: ``jax.Device.device_kind`` (or any id/alias), e.g. ``"TPU v5 lite"``,
            ``"NVIDIA H100 80GB HBM3"``, ``"AMD Instinct MI300X"``.
        extra: as for :func:`get_chip`.

    Returns:
        The per-device ChipSpec (the chip itself unless it has several devices per chip, like TPU7x).

    Raises:
        UnknownChipError: nothing matches (the error is the one for ``device_kind`` as given).
    """
    try:
        return get_chip(device_kind, extra).per_device()
    except UnknownChipError as err:
        kind = str(device_kind)
        gfx = _GFX_TARGET_RE.match(kind)
        for variant in (gfx.group(1) if gfx else None, _VIRTUAL_FUNCTION_RE.sub("", kind)):
            if variant and variant != kind:
                try:
                    return get_chip(variant, extra).per_device()
                except UnknownChipError:
                    pass
        described = _by_description(kind, extra)
        if described is not None:
            return described.per_device()
        raise err from None


# A device a profiler plane describes instead of naming (``hloscope.parsers._xspace_events._device_kind``):
# "AMD GPU (gfx9.4, 304 CUs, 192 GiB HBM)".
_DESCRIBED_RE = LazyPattern(r"^(?P<vendor>\w+) GPU \((?:.*, )?(?P<gib>\d+) GiB HBM\)$")


def _by_description(kind: str, extra: Mapping[str, ChipSpec] | None) -> ChipSpec | None:
    """The one GPU of the vendor whose HBM capacity is the described memory size (within 2%), else None.

    Within a vendor's table the capacity tells the chips apart (AMD: MI300X 192 GiB, MI325X 256 GiB, MI355X
    288 GiB; ROCm "GPU hardware specifications" table); two chips of one capacity give None.
    """
    m = _DESCRIBED_RE.match(kind)
    if m is None:
        return None
    memory_bytes = int(m.group("gib")) * 2**30
    chips = {**builtin_chips(), **(extra or {})}
    found = [c for c in chips.values()
             if c.kind == "gpu" and c.name.split()[0].lower() == m.group("vendor").lower()
             and c.hbm_capacity_bytes and abs(c.hbm_capacity_bytes - memory_bytes) <= 0.02 * memory_bytes]
    return found[0] if len(found) == 1 else None


def all_chips(directory: str | os.PathLike[str] | None = None) -> dict[str, ChipSpec]:
    """Built-in chips, overridden and extended by the user's chips (:func:`load_user_chips`).

    Args:
        directory: the configuration directory; defaults to :func:`config_dir`.

    Returns:
        Chips by id; pass it as ``extra`` to :func:`get_chip` so user chips win lookups.

    Raises:
        ChipSpecError: a user chip file is invalid.
    """
    merged = dict(builtin_chips())
    for chip_id, chip in load_user_chips(directory).items():
        merged.pop(chip_id, None)  # re-insert at the end so user chips come last (and win alias clashes)
        merged[chip_id] = chip
    return merged


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
