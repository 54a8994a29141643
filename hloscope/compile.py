"""Compiling a JAX program for analysis: for the current backend, or deviceless for a TPU generation.

``compile_program`` turns what a user has -- a function and example arguments, a ``jax.stages.Lowered`` or a
``jax.stages.Compiled`` -- into the optimized HLO text that the rest of hloscope reads, and says what it was
compiled for. ``hloscope.analyze`` and the pytest plugin's ``hloscope.analyze`` both call it.

The deviceless target compiles for a TPU without one: libtpu (``pip install libtpu``) builds a topology of the
chip's generation (``v5e:2x4`` ...), the arguments' shardings are moved onto its devices, and XLA's TPU compiler
runs on the host. Topologies are made once per process and reused (``tpu_topology``), so that meshes built on
them (``tpu_topology(...).devices``) and the moved arguments share devices.

Importing this module is cheap: JAX is imported when a compile is asked for.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping

from hloscope.errors import ConfigError

if TYPE_CHECKING:
    from hloscope.roofline.chips import ChipSpec

__all__ = ["TARGETS", "CompiledProgram", "compile_program", "tpu_topology"]

#: What ``compile_program`` can compile for.
TARGETS = ("backend", "deviceless")


@dataclass(frozen=True)
class CompiledProgram:
    """A compiled program and where it was compiled for.

    Attributes:
        compiled: the ``jax.stages.Compiled``.
        hlo_text: its optimized HLO module text (``compiled.as_text()``).
        compiled_for: ``{"platform": "cpu"|"gpu"|"tpu", "device_kind": "TPU v5 lite"..., "devices": int}`` of the
            compile's shardings; ``{}`` when JAX does not tell.
        compile_s: seconds JAX spent lowering and compiling (wall clock); 0.0 for a given ``Compiled``.
        target: ``"backend"`` or ``"deviceless"`` (a given ``Lowered``/``Compiled`` reports what was asked).
        text_s: seconds spent getting ``hlo_text`` and ``compiled_for`` out of ``compiled`` (hloscope's side:
            ``hloscope.analyze`` counts it in ``Report.analysis_s``, not in ``compile_s``).
    """

    compiled: Any
    hlo_text: str
    compiled_for: Mapping[str, Any] = field(default_factory=dict)
    compile_s: float = 0.0
    target: str = "backend"
    text_s: float = 0.0


def compile_program(source: Any, args: tuple[Any, ...] = (), kwargs: Mapping[str, Any] | None = None, *,
                    chip: ChipSpec, target: str = "backend", topology: str | None = None) -> CompiledProgram:
    """Compile ``source`` for ``target`` and return its optimized HLO text.

    Args:
        source: one of
            - a function, jitted (``jax.jit(f)``) or not (then wrapped in ``jax.jit``); lowered as
              ``fn.lower(*args, **kwargs)`` and compiled;
            - a ``jax.stages.Lowered`` (compiled as is; ``target`` does not apply);
            - a ``jax.stages.Compiled`` (used as is: no compile, ``compile_s`` 0.0).
        args, kwargs: example arguments of a function -- arrays or ``jax.ShapeDtypeStruct`` (shape, dtype and,
            for a sharded program, sharding); anything ``jit(fn).lower`` accepts. Must be empty for a
            ``Lowered`` or ``Compiled``.
        chip: the chip the program will be scored against; the deviceless target compiles for its TPU
            generation (``chip.kind == "tpu"``).
        target: ``"backend"`` -- JAX's current backend (``jax.devices()``); ``"deviceless"`` -- a TPU topology
            of ``chip``'s generation through libtpu, no TPU needed. Arguments not already on TPU devices are
            moved there: ``NamedSharding`` meshes keep their shape and axis names (device id k -> the k-th TPU
            device), unsharded arrays are replicated over the first mesh found (or put on device 0).
        topology: deviceless only: libtpu topology name (``"v5e:2x4"``); default: the smallest known topology of
            the chip's generation with as many devices as the arguments' shardings use.

    Returns:
        ``CompiledProgram`` (``compiled``, ``hlo_text``, ``compiled_for``, ``compile_s``, ``target``,
        ``text_s``).

    Raises:
        TypeError: example arguments given with a ``Lowered``/``Compiled``, or a ``source`` that is none of the
            above.
        ConfigError: an unknown ``target``; a deviceless compile that cannot be done -- a non-TPU chip, no
            libtpu, an invalid or too small ``topology``, a sharding that cannot be moved, or XLA's TPU compile
            failing (the message names the fix). A backend compile's own errors propagate unchanged.
    """
    __tracebackhide__ = True
    if target not in TARGETS:
        raise ConfigError(f"invalid target {target!r}: expected one of {', '.join(TARGETS)}")
    kwargs = dict(kwargs or {})
    if _is_lowered(source):
        if args or kwargs:
            raise TypeError("hloscope.analyze(lowered) takes no example arguments")
        t0 = time.perf_counter()
        compiled = source.compile()
        compile_s = time.perf_counter() - t0
    elif _is_compiled(source):
        if args or kwargs:
            raise TypeError("hloscope.analyze(compiled) takes no example arguments")
        compiled, compile_s = source, 0.0
    elif callable(source):
        compiled, compile_s = _compile_function(source, tuple(args), kwargs, chip, target, topology)
    else:
        raise TypeError(f"hloscope.analyze cannot analyze a {type(source).__name__}: pass a function with "
                        "example arguments, a Lowered, a Compiled, HLO text or a path")
    t0 = time.perf_counter()
    text = compiled.as_text()
    compiled_for = _compiled_for(compiled)
    return CompiledProgram(compiled, text, compiled_for, compile_s, target, time.perf_counter() - t0)


def _compile_function(fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any], spec: ChipSpec, target: str,
                      topology: str | None) -> tuple[Any, float]:
    """(``Compiled``, seconds of lower + compile) of ``fn`` on the example arguments."""
    __tracebackhide__ = True
    import jax

    deviceless = target == "deviceless"
    if deviceless:
        if spec.kind != "tpu":
            raise ConfigError(f"target 'deviceless' compiles for a TPU, but the chip is {spec.id} ({spec.kind}): "
                              "use a TPU chip or target 'backend' (--hloscope-target backend)")
        n = _devices_needed((args, kwargs))
        if n:  # some argument is not on TPU devices yet (those on tpu_topology(...).devices are)
            args, kwargs = _retarget((args, kwargs), list(tpu_topology(spec, topology, n).devices))
    jitted = fn if hasattr(fn, "lower") else jax.jit(fn)
    t0 = time.perf_counter()
    try:
        compiled = jitted.lower(*args, **kwargs).compile()
    except Exception as err:
        if not deviceless:
            raise
        raise ConfigError(
            f"deviceless TPU compile for {spec.id} failed: {type(err).__name__}: {err}\n(hloscope moved the "
            "arguments' shardings onto the TPU topology; if the function names meshes or devices itself -- "
            "in_shardings=, with_sharding_constraint, shard_map -- build them on that topology's devices: "
            "hloscope.make_mesh(...) in the pytest plugin, or hloscope.compile.tpu_topology(chip).devices)"
        ) from err
    return compiled, time.perf_counter() - t0


def _is_lowered(x: Any) -> bool:
    return hasattr(x, "compile") and hasattr(x, "as_text") and hasattr(x, "compiler_ir")


def _is_compiled(x: Any) -> bool:
    return hasattr(x, "as_text") and hasattr(x, "runtime_executable")


def _compiled_for(compiled: Any) -> dict[str, Any]:
    """``{"platform", "device_kind", "devices"}`` of a JAX ``Compiled``; {} when it cannot be told."""
    try:
        import jax

        shardings = [s for s in jax.tree.leaves((compiled.input_shardings, compiled.output_shardings))
                     if hasattr(s, "device_set")]
        if not shardings:
            return {}
        devices = max((s.device_set for s in shardings), key=len)
        dev = next(iter(devices))
        return {"platform": str(dev.platform), "device_kind": str(dev.device_kind), "devices": len(devices)}
    except Exception:  # noqa: BLE001 - informational only
        return {}


# ---- deviceless TPU ------------------------------------------------------------------------------

# libtpu topology names by chip id: (prefix, torus dimensions).
_TPU_GENERATIONS = {"tpu-v4": ("v4", 3), "tpu-v5e": ("v5e", 2), "tpu-v5p": ("v5p", 3), "tpu-v6e": ("v6e", 2),
                    "tpu7x": ("tpu7x", 3)}
_SHAPES_2D = ("1x1", "2x1", "2x2", "2x4", "4x4", "4x8", "8x8", "8x16", "16x16")
_SHAPES_3D = ("1x1x1", "2x1x1", "2x2x1", "2x2x2", "2x2x4", "2x4x4", "4x4x4", "4x4x8", "4x8x8", "8x8x8")
# The deviceless TPU topology made for each (chip id, topology name): one each, the largest asked for.
_TOPOLOGIES: dict[tuple[str, str | None], Any] = {}


def tpu_topology(chip: ChipSpec, topology: str | None = None, devices: int = 1) -> Any:
    """A deviceless TPU topology (``jax.experimental.topologies``) of ``chip``'s generation with at least
    ``devices`` devices: one already made in this process when one fits, so that meshes built on its
    ``.devices`` and the arguments ``compile_program`` moves share devices.

    Args:
        chip: a TPU ``ChipSpec`` (``tpu-v4``, ``tpu-v5e``, ``tpu-v5p``, ``tpu-v6e``, ``tpu7x``; others need
            ``topology``).
        topology: libtpu topology name (``"v5e:2x4"``); default: the smallest known one with enough devices.
        devices: how many devices it must have.

    Raises:
        ConfigError: no libtpu, an invalid or too small ``topology``, or no known topology for the chip.
    """
    __tracebackhide__ = True
    for (chip_id, name), topo in _TOPOLOGIES.items():
        if chip_id == chip.id and name == topology and len(topo.devices) >= devices:
            return topo
    _TOPOLOGIES[(chip.id, topology)] = topo = _deviceless_topology(chip, topology, devices)
    return topo


def _deviceless_topology(spec: ChipSpec, name: str | None, n: int) -> Any:
    __tracebackhide__ = True
    import importlib.util

    if importlib.util.find_spec("libtpu") is None:
        raise ConfigError("target 'deviceless' needs libtpu (pip install libtpu; no TPU needed), or use target "
                          "'backend' (--hloscope-target backend)")
    # libtpu takes /tmp/libtpu_lockfile when it loads, so a second process compiling deviceless at the same time
    # (an xdist worker, a parallel CI job) would fail; no TPU is driven here, so sharing is safe.
    os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")
    from jax.experimental import topologies

    if name:
        try:
            topo = topologies.get_topology_desc(name, "tpu")
        except Exception as err:
            raise ConfigError(f"invalid TPU topology {name!r}: {err}") from None
        if len(topo.devices) < n:
            raise ConfigError(f"TPU topology {name} has {len(topo.devices)} devices; the arguments are sharded "
                              f"over {n}")
        return topo
    gen = _TPU_GENERATIONS.get(spec.id)
    if gen is None:
        raise ConfigError(f"no TPU topology known for chip {spec.id}: pass topology= (--hloscope-topology, ini "
                          "hloscope_topology), e.g. v5e:2x4")
    prefix, axes = gen
    for shape in _SHAPES_2D if axes == 2 else _SHAPES_3D:
        if math.prod(int(d) for d in shape.split("x")) * 2 < n:
            continue
        topo = topologies.get_topology_desc(f"{prefix}:{shape}", "tpu")
        if len(topo.devices) >= n:
            return topo
    raise ConfigError(f"no {prefix} topology with {n} devices known: pass topology= (--hloscope-topology)")


def _devices_needed(tree: Any) -> int:
    """How many TPU devices the arguments need: 1 + the highest device id of a sharding not yet on TPU devices
    (1 for unsharded arrays); 0 when every array is already on TPU devices."""
    import jax

    n = 0
    for leaf in jax.tree.leaves(tree):
        if not (hasattr(leaf, "shape") and hasattr(leaf, "dtype")):
            continue
        devices = getattr(getattr(leaf, "sharding", None), "device_set", None) or ()
        if not devices:
            n = max(n, 1)
        for d in devices:
            if getattr(d, "platform", "") != "tpu":
                n = max(n, int(d.id) + 1)
    return n


def _retarget(tree: Any, devices: list[Any]) -> Any:
    """Move every array argument's sharding onto the deviceless TPU ``devices`` (device ``id`` k -> the k-th),
    keeping meshes' shapes and axis names; unsharded arrays are replicated over the first mesh found (or put
    on the first device). Returns ``ShapeDtypeStruct`` leaves.

    Raises:
        ConfigError: a sharding other than ``NamedSharding`` over a ``Mesh`` or ``SingleDeviceSharding``.
    """
    __tracebackhide__ = True
    import jax
    import numpy as np
    from jax.sharding import Mesh, NamedSharding, PartitionSpec, SingleDeviceSharding

    meshes: dict[int, Mesh] = {}

    def move_mesh(mesh: Mesh) -> Mesh:
        got = meshes.get(id(mesh))
        if got is None:
            flat = [devices[d.id] for d in mesh.devices.flat]
            kwargs = {"axis_types": mesh.axis_types} if hasattr(mesh, "axis_types") else {}
            got = meshes[id(mesh)] = Mesh(np.array(flat, dtype=object).reshape(mesh.devices.shape),
                                          mesh.axis_names, **kwargs)
        return got

    def on_target(sharding: Any) -> bool:
        return all(getattr(d, "platform", "") == "tpu" for d in getattr(sharding, "device_set", ()) or ())

    default = None
    for leaf in jax.tree.leaves(tree):
        s = getattr(leaf, "sharding", None)
        if isinstance(s, NamedSharding) and isinstance(s.mesh, Mesh):
            default = s.mesh if on_target(s) else move_mesh(s.mesh)
            break

    def move(leaf: Any) -> Any:
        if not (hasattr(leaf, "shape") and hasattr(leaf, "dtype")):
            return leaf
        s = getattr(leaf, "sharding", None)
        if s is not None and on_target(s):
            new = s
        elif isinstance(s, NamedSharding) and isinstance(s.mesh, Mesh):
            new = NamedSharding(move_mesh(s.mesh), s.spec, memory_kind=s.memory_kind)
        elif isinstance(s, SingleDeviceSharding) or s is None:
            new = NamedSharding(default, PartitionSpec()) if default is not None else SingleDeviceSharding(devices[0])
        else:
            raise ConfigError(f"cannot move a {type(s).__name__} onto the deviceless TPU: use NamedSharding (or "
                              "build it on hloscope.make_mesh(...) / hloscope.compile.tpu_topology(chip).devices)")
        return jax.ShapeDtypeStruct(leaf.shape, leaf.dtype, sharding=new, weak_type=getattr(leaf, "weak_type", False))

    return jax.tree.map(move, tree)
