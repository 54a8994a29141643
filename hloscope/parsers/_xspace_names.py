"""What the planes, lines and stats of an XSpace are called, and how one stat's value reads.

Names follow ``xla/tsl/profiler/utils/xplane_schema.cc`` and were checked against real captures (what each
platform writes: ``docs/xspace.md``). The helpers here turn a stat (an ``XStat`` message) into a Python value
and split the ``<module>(<program_id>)`` keys the profiler uses for modules. Shared by the other
``_xspace_*`` modules; no I/O.
"""

from __future__ import annotations

import zlib
from typing import Any

from hloscope._regex import LazyPattern

# Names from xla/tsl/profiler/utils/xplane_schema.cc (checked against real files, see docs/xspace.md).
METADATA_PLANE = "/host:metadata"
HOST_PLANE = "/host:CPU"
XLA_OPS_LINE = "XLA Ops"
XLA_MODULES_LINE = "XLA Modules"
STEPS_LINE = "Steps"
STAT_HLO_PROTO = "Hlo Proto"
STAT_HLO_OP = "hlo_op"
STAT_HLO_MODULE = "hlo_module"
STAT_PROGRAM_ID = "program_id"
STAT_DEVICE_ORDINAL = "device_ordinal"
STAT_CORRELATION_ID = "correlation_id"
STAT_STEP_NUM = "step_num"
STAT_GROUP_ID = "group_id"

# Lines that xprof *derives* from raw GPU stream lines when it post-processes an XSpace. A raw capture has
# none of them; if one is present its events duplicate the kernels, so op_events never reads them on GPU.
_GPU_DERIVED_LINES = frozenset(
    {
        XLA_OPS_LINE,
        XLA_MODULES_LINE,
        STEPS_LINE,
        "Async XLA Ops",
        "Framework Ops",
        "Framework Name Scope",
        "Source code",
        "Launch Stats",
        "Host Offload Ops",
        "_counters_",
    }
)

_DEVICE_RE = LazyPattern(r"^/device:(TPU|GPU):(\d+)$")
_MODULE_KEY_RE = LazyPattern(r"^(?P<name>.*)\((?P<id>-?\d+)\)$")  # "jit_f(6)", "jit_step(1203...885)"
_U64 = (1 << 64) - 1
_RECAPTURE = (
    "re-capture the profile with jax.profiler.trace(log_dir) and pass log_dir/plugins/profile/<run>/*.xplane.pb"
)

# Columns of the per-file tables of ``op_events`` / ``step_events`` (the one op-events schema that readers
# return is ``hloscope.parsers.events.OP_COLUMNS``; ``read_xspace_events`` maps these onto it).
OP_EVENT_COLUMNS = (
    "plane",
    "device_id",
    "line",
    "name",
    "hlo_op",
    "hlo_module",
    "program_id",
    "start_ps",
    "duration_ps",
    "self_ps",
)
STEP_EVENT_COLUMNS = ("plane", "device_id", "line", "name", "step_num", "start_ps", "end_ps", "duration_ps")

# Plane stats naming the device (what ``read_xspace_events`` reports as ``device_kind``), in order of preference:
# TPU planes carry ``device_type_string`` ("TPU v6 Lite"), NVIDIA GPU planes ``gpu_device_name``
# ("NVIDIA H100 80GB HBM3"); the ROCm captures of the corpus carry neither (only ``device_vendor``).
STAT_DEVICE_TYPE = "device_type_string"
STAT_GPU_DEVICE_NAME = "gpu_device_name"
DEVICE_KIND_STATS = (STAT_DEVICE_TYPE, STAT_GPU_DEVICE_NAME)


# --------------------------------------------------------------------------------------------------------
# Stat values


def _stat_value(stat, stat_names: dict[int, str]) -> Any:
    """Value of one XStat; ``ref_value`` resolved to the referenced XStatMetadata name, gzip strings inflated."""
    kind = stat.WhichOneof("value")
    if kind is None:
        return None
    if kind == "ref_value":
        return stat_names.get(stat.ref_value, "")
    if kind == "compressed_str_value":
        try:
            return zlib.decompress(stat.compressed_str_value, zlib.MAX_WBITS | 32).decode("utf-8", "replace")
        except zlib.error:
            return ""
    return getattr(stat, kind)


def _stat_names(plane) -> dict[int, str]:
    return {k: v.name for k, v in plane.stat_metadata.items()}


def _stat_ids(stat_names: dict[int, str], wanted: dict[str, str]) -> dict[int, str]:
    """Map stat-metadata ids whose name is in ``wanted`` to ``wanted[name]`` (a short field key)."""
    return {k: wanted[n] for k, n in stat_names.items() if n in wanted}


def _as_program_id(value: Any) -> int | None:
    """Program ids are uint64 fingerprints on TPU; a negative int64 is the same 64 bits reinterpreted."""
    if value is None or isinstance(value, (bytes, float)):
        return None
    if isinstance(value, str):
        try:
            value = int(value)
        except ValueError:
            return None
    return int(value) & _U64


def _split_module_key(key: str) -> tuple[str, int | None]:
    """``"jit_f(6)"`` -> ``("jit_f", 6)``; a name without a ``(id)`` suffix is returned unchanged."""
    m = _MODULE_KEY_RE.match(key)
    if not m:
        return key, None
    return m.group("name"), int(m.group("id")) & _U64


def _as_int64(v: int) -> int:
    """A uint64 read off the wire as the int64 with the same 64 bits."""
    return v - (1 << 64) if v >> 63 else v


def _device_id(plane_name: str) -> tuple[str | None, int]:
    """``"/device:GPU:3"`` -> ``("GPU", 3)``; any other plane name -> ``(None, -1)``."""
    m = _DEVICE_RE.match(plane_name)
    if not m:
        return None, -1
    return m.group(1), int(m.group(2))
