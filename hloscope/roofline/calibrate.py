"""Measure this machine's CPU with JAX and describe it as a chip (id ``"host"``) for roofline analysis.

``hloscope calibrate`` runs :func:`calibrate_host` and :func:`save_host_chip`; afterwards
:func:`hloscope.roofline.chips.load_user_chips` returns the host chip, and JAX's CPU ``device_kind``
(``"cpu"``) resolves to it. What is measured:

* **Matmul FLOP/s** for f32 and bf16: a jitted ``a @ b`` on ``[n, n]`` operands placed on the JAX CPU device,
  FLOPs = ``2 * n**3`` per call, best of ``repeats`` timed calls after one warm-up call (which also compiles).
* **Memory bandwidth**: a jitted, buffer-donating ``x + 1`` over an f32 array of ``memory_bytes`` (choose it
  much larger than the last-level cache; the default is 256 MiB). Each call reads and writes the array once,
  so bytes = ``2 * memory_bytes``. Donation makes XLA write in place; without it every call maps a fresh
  output buffer and the page faults, not DRAM, set the time (about 8x slower on the machine this was
  written on).

The host has no ICI, NVLink or network of its own. Transfers between JAX CPU devices (e.g. under
``--xla_force_host_platform_device_count``) and "host <-> device" copies are memory copies, each byte read
once and written once, so ``pcie_bytes_per_s`` and ``dcn_bytes_per_s`` are set to half the measured memory
bandwidth; ``peer_link_bytes_per_s`` then reports that copy bandwidth. ``hbm_capacity_bytes`` is the physical RAM and
``on_chip_memory_bytes`` the caches that Linux reports for CPU 0.

JAX is imported inside :func:`calibrate_host`, so importing this module stays cheap.
"""

from __future__ import annotations

import datetime as _dt
import os
import platform
import time
from pathlib import Path
from typing import Callable, Sequence

from hloscope._atomic import write_file
from hloscope.roofline.chips import HOST_FILE_NAME, MiB, ChipSpec, chips_to_toml, config_dir

__all__ = ["HOST_CHIP_ID", "calibrate_host", "cpu_model_name", "save_host_chip"]

#: Id of the calibrated host chip.
HOST_CHIP_ID = "host"

_MATMUL_DTYPES = {"f32": "float32", "bf16": "bfloat16"}


def cpu_model_name() -> str:
    """A human-readable CPU description for ``sources``.

    Returns:
        ``/proc/cpuinfo``'s ``model name`` (x86) or ``Hardware``/``Processor`` (Arm) when available, else
        :func:`platform.processor` or :func:`platform.machine`.
    """
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                key, _, value = line.partition(":")
                if key.strip() in ("model name", "Hardware", "Processor", "cpu model") and value.strip():
                    return value.strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def _physical_memory_bytes() -> int | None:
    try:
        pages = os.sysconf("SC_PHYS_PAGES")
        page_size = os.sysconf("SC_PAGE_SIZE")
        if pages > 0 and page_size > 0:
            return int(pages * page_size)
    except (AttributeError, ValueError, OSError):
        pass
    try:
        with open("/proc/meminfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024  # reported in kB (KiB)
    except (OSError, ValueError, IndexError):
        pass
    return None


def _cache_sizes_bytes() -> dict[str, int]:
    """CPU 0's data/unified caches from sysfs, e.g. ``{"l1d": 32768, "l2": 1048576, "l3": 33554432}``."""
    out: dict[str, int] = {}
    root = Path("/sys/devices/system/cpu/cpu0/cache")
    try:
        entries = sorted(root.glob("index*"))
    except OSError:
        return out
    for entry in entries:
        try:
            level = (entry / "level").read_text().strip()
            kind = (entry / "type").read_text().strip()
            size = (entry / "size").read_text().strip().upper()
        except OSError:
            continue
        if kind == "Instruction" or not size:
            continue
        scale = {"K": 1024, "M": 1024**2, "G": 1024**3}.get(size[-1], 1)
        digits = size[:-1] if size[-1] in "KMG" else size
        if not digits.isdigit():
            continue
        name = f"l{level}d" if kind == "Data" else f"l{level}"
        out[name] = int(digits) * scale
    return out


def _best_seconds(run: Callable[[], object], repeats: int) -> float:
    """Best wall time of ``repeats`` calls of ``run`` (which must block until its result is ready)."""
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
    return max(best, 1e-9)


def calibrate_host(
    *,
    repeats: int = 5,
    size: int = 2048,
    memory_bytes: int = 256 * MiB,
    dtypes: Sequence[str] = ("f32", "bf16"),
) -> ChipSpec:
    """Measure this machine's matmul FLOP/s and memory bandwidth with JAX on the CPU.

    With the defaults this takes about 2-4 s on a 2-core machine (plus JAX start-up); tests pass small
    ``size``/``memory_bytes``.

    Args:
        repeats: timed calls per measurement (after one warm-up call); the best is kept.
        size: matmul operand side ``n`` (FLOPs = ``2 * n**3`` per call).
        memory_bytes: bytes of the f32 array streamed by the bandwidth test; use much more than the
            last-level cache for a DRAM figure.
        dtypes: matmul dtypes to measure, from ``"f32"`` and ``"bf16"``; at least one.

    Returns:
        A ChipSpec with id ``"host"``, kind ``"cpu"``, alias ``"cpu"`` (JAX's CPU ``device_kind``), the
        measured ``peak_flops_per_s`` and ``hbm_bytes_per_s``, physical RAM as ``hbm_capacity_bytes``, the CPU caches
        as ``on_chip_memory_bytes``, half the memory bandwidth as ``pcie_bytes_per_s`` and
        ``dcn_bytes_per_s`` (memory copies), and ``sources`` saying what was measured, when and on what.

    Raises:
        ValueError: a non-positive argument, or an unsupported dtype.
        RuntimeError: JAX has no CPU device.
    """
    if repeats < 1 or size < 1 or memory_bytes < 4:
        raise ValueError(
            f"need repeats >= 1, size >= 1, memory_bytes >= 4; got {repeats}, {size}, {memory_bytes}"
        )
    dtypes = tuple(dtypes)
    unknown = [d for d in dtypes if d not in _MATMUL_DTYPES]
    if not dtypes or unknown:
        raise ValueError(f"dtypes must be a non-empty subset of {sorted(_MATMUL_DTYPES)}, got {list(dtypes)}")

    import jax
    import jax.numpy as jnp
    import numpy as np

    try:
        cpu = jax.devices("cpu")[0]
    except RuntimeError as err:
        raise RuntimeError(f"JAX has no CPU device to calibrate: {err}") from err

    today = _dt.datetime.now(_dt.timezone.utc).date().isoformat()
    where = (
        f"measured by hloscope calibrate on {today}, {cpu_model_name()} ({os.cpu_count()} logical CPUs), "
        f"{platform.system()} {platform.machine()}, jax {jax.__version__}"
    )

    rng = np.random.default_rng(0)
    peaks: dict[str, float] = {}
    sources: dict[str, str] = {}
    matmul = jax.jit(lambda a, b: a @ b)
    for key in dtypes:
        dtype = getattr(jnp, _MATMUL_DTYPES[key])
        a = jax.device_put(rng.standard_normal((size, size), dtype=np.float32), cpu).astype(dtype)
        b = jax.device_put(rng.standard_normal((size, size), dtype=np.float32), cpu).astype(dtype)
        matmul(a, b).block_until_ready()  # compile + warm caches
        seconds = _best_seconds(lambda: matmul(a, b).block_until_ready(), repeats)
        peaks[key] = 2.0 * size**3 / seconds
        sources[f"peak_flops_per_s.{key}"] = (
            f"{where}: jitted {key}[{size},{size}] @ {key}[{size},{size}], 2*n^3 FLOPs, best of {repeats} "
            f"calls after a warm-up: {seconds * 1e3:.3f} ms"
        )

    elements = max(memory_bytes // 4, 1)
    streamed_bytes = elements * 4
    bump = jax.jit(lambda x: x + 1.0, donate_argnums=0)
    state = {"x": jax.device_put(np.zeros(elements, dtype=np.float32), cpu)}

    def stream() -> None:
        state["x"] = bump(state["x"])
        state["x"].block_until_ready()

    stream()  # compile + first touch
    seconds = _best_seconds(stream, repeats)
    memory_bytes_per_s = 2.0 * streamed_bytes / seconds  # one read and one write of every byte
    sources["hbm_bytes_per_s"] = (
        f"{where}: jitted in-place (donated) f32 x + 1 over {streamed_bytes} bytes, bytes = read + write = "
        f"{2 * streamed_bytes}, best of {repeats} calls after a warm-up: {seconds * 1e3:.3f} ms"
    )
    copy_bytes_per_s = memory_bytes_per_s / 2
    copy_note = (
        f"half the measured memory bandwidth ({memory_bytes_per_s:.4g} B/s): on one host, transfers between "
        f"JAX CPU devices and host<->device copies are memory copies (read once + write once); {where}"
    )
    sources["pcie_bytes_per_s"] = copy_note
    sources["dcn_bytes_per_s"] = copy_note

    ram = _physical_memory_bytes()
    if ram:
        sources["hbm_capacity_bytes"] = (
            f"physical RAM (sysconf SC_PHYS_PAGES * SC_PAGE_SIZE or /proc/meminfo); {where}"
        )
    else:
        ram = streamed_bytes
        sources["hbm_capacity_bytes"] = (
            f"physical RAM unknown; the {streamed_bytes} bytes streamed is a lower bound; {where}"
        )
    caches = _cache_sizes_bytes()
    if caches:
        sources["on_chip_memory_bytes"] = f"CPU 0 caches from /sys/devices/system/cpu/cpu0/cache; {where}"
    sources["name"] = where
    sources["kind"] = "the host CPU, driven through JAX's CPU backend"
    sources["aliases"] = "'cpu' is jax.devices('cpu')[0].device_kind"
    sources["devices_per_chip"] = (
        "one JAX CPU device per host (without --xla_force_host_platform_device_count)"
    )

    return ChipSpec(
        id=HOST_CHIP_ID,
        name=f"host CPU: {cpu_model_name()} ({os.cpu_count()} logical CPUs)",
        kind="cpu",
        aliases=("cpu",),
        peak_flops_per_s=peaks,
        hbm_bytes_per_s=memory_bytes_per_s,
        hbm_capacity_bytes=ram,
        on_chip_memory_bytes=caches,
        devices_per_chip=1,
        pcie_bytes_per_s=copy_bytes_per_s,
        dcn_bytes_per_s=copy_bytes_per_s,
        sources=sources,
    )


def save_host_chip(chip: ChipSpec, path: str | os.PathLike[str] | None = None) -> Path:
    """Write a chip to ``host.toml`` atomically, in the format that ``load_chip_file`` reads back.

    The text goes to a temporary file in the destination directory, is flushed and fsynced, and then
    replaces the destination with :func:`os.replace` (``hloscope._atomic.write_file``), so readers see the old
    file or the new one, never a partial one.

    Args:
        chip: the chip to save (normally from :func:`calibrate_host`).
        path: destination file; defaults to ``config_dir() / "host.toml"``. Parent directories are created.

    Returns:
        The path written.

    Raises:
        OSError: the directory cannot be created or written.
    """
    target = Path(path) if path is not None else config_dir() / HOST_FILE_NAME
    target.parent.mkdir(parents=True, exist_ok=True)
    text = chips_to_toml(
        [chip],
        header=(
            "hloscope chip file written by `hloscope calibrate`; re-run it to refresh.\n"
            "Format: docs/chips.md. Units: bytes, bytes/s, FLOP/s."
        ),
    )
    return write_file(target, lambda stream: stream.write(text), newline="\n", fsync=True)
