"""Generated programs, compiled for CPU and deviceless TPUs: hloscope analyzes every one, and its FLOPs match
XLA's ``cost_analysis()`` of the same executable (issue #20).

For each program of ``programs.CATALOGUE`` and each target, the test compiles the program itself
(``jax.jit(fn).lower(*ShapeDtypeStructs with shardings).compile()``), gives ``compiled.as_text()`` to
``hloscope.analyze`` and reads XLA's figure from ``compiled.cost_analysis()`` of the same ``compiled``:

- ``test_analyzes``: a ``Report`` comes back with one module, finite non-negative FLOPs, and no instruction
  whose cost rule failed (unknown opcodes are allowed, as flags);
- ``test_flops_match_xla``: hloscope's module FLOPs equal XLA's within 0.1 % after hloscope's documented
  departures (``xla_departures.py``, computed from XLA's number and the HLO text, not from hloscope's output);
  for loops (where XLA's ``known_trip_count`` or hloscope's ``inferred-trip-count`` gives the trip count), plus
  ``(executions - 1) x body FLOPs`` of each loop body, counted by hand in the catalogue, within 1 %; a loop with
  a data-dependent trip count must be flagged ``unknown-trip-count``.

Targets: ``cpu`` (the JAX CPU backend with 8 host devices, ``conftest.py``) and deviceless ``tpu-v5e``,
``tpu-v5p``, ``tpu-v6e`` (libtpu topologies with 8 devices). The whole catalogue runs on cpu and tpu-v5e, the
``representative`` subset on tpu-v5p and tpu-v6e (``HLOSCOPE_GENERATOR_FULL=1``: everything everywhere). Each
(program, target) compiles once per session (``_outcome``).

Known hloscope discrepancies are ``xfail(strict=True)`` in ``KNOWN``, with the measured numbers.
"""

from __future__ import annotations

import importlib.util
import math
import os
import time
from dataclasses import dataclass
from typing import Any

import pytest

jax = pytest.importorskip("jax")
np = pytest.importorskip("numpy")

from programs import CATALOGUE, Program  # noqa: E402 - after the skip: the catalogue imports JAX
from xla_departures import adjustment, whiles  # noqa: E402

#: target -> (hloscope chip to score against, libtpu topology or None for the JAX CPU backend)
TARGETS = {
    "cpu": ("tpu-v5e", None),  # the chip only scores the roofline; FLOPs do not depend on it
    "tpu-v5e": ("tpu-v5e", "v5e:2x4"),
    "tpu-v5p": ("tpu-v5p", "v5p:2x2x2"),
    "tpu-v6e": ("tpu-v6e", "v6e:2x4"),
}
FULL = os.environ.get("HLOSCOPE_GENERATOR_FULL", "") not in ("", "0")
SUBSET_TARGETS = ("tpu-v5p", "tpu-v6e")
RTOL = 1e-3
#: Loops: the body FLOPs are counted by hand (programs.py): compiler-added elementwise ops are left out.
LOOP_RTOL = 1e-2

#: (program, target, test) -> reason: hloscope discrepancies, xfail(strict=True). test: "analyzes" or "flops".
KNOWN: dict[tuple[str, str, str], str] = {}

# (The kCustom gather/scatter fusions of gather_rows and scatter_add on TPU, formerly here: hloscope now costs
# such a fusion's FLOPs as XLA does, its first gather/scatter alone -- cost/fusion.py, docs/xla_cost_rules.md §6.1.)


# ---- compiling ---------------------------------------------------------------------------------------------


_TOPOLOGIES: dict[str, Any] = {}


def devices(target: str) -> list[Any]:
    """The devices meshes are built on: ``jax.devices()`` for cpu, a deviceless topology's for a TPU (made
    once per session, so that every mesh shares its devices)."""
    topology = TARGETS[target][1]
    if topology is None:
        return list(jax.devices())
    if topology not in _TOPOLOGIES:
        if importlib.util.find_spec("libtpu") is None:
            pytest.skip("deviceless TPU compiles need libtpu")
        from jax.experimental import topologies

        _TOPOLOGIES[topology] = topologies.get_topology_desc(topology, "tpu")
    return list(_TOPOLOGIES[topology].devices)


def mesh_for(prog: Program, target: str) -> Any:
    from jax.sharding import Mesh

    devs = devices(target)
    if len(devs) < prog.needs_devices:
        pytest.skip(f"{prog.name} needs {prog.needs_devices} devices, {target} has {len(devs)} (JAX's CPU backend "
                    "started before tests/generator/conftest.py set XLA_FLAGS, or with another device count)")
    if not prog.mesh:
        return Mesh(np.array(devs[:1]), ("_",))
    sizes = tuple(size for _, size in prog.mesh)
    return Mesh(np.array(devs[: prog.needs_devices], dtype=object).reshape(sizes), tuple(n for n, _ in prog.mesh))


def with_shardings(args: tuple[Any, ...], specs: tuple[Any, ...] | None, mesh: Any) -> tuple[Any, ...]:
    from jax.sharding import NamedSharding, PartitionSpec

    specs = specs or (None,) * len(args)

    def place(spec: Any):
        sharding = NamedSharding(mesh, spec if spec is not None else PartitionSpec())

        def leaf(x: Any) -> Any:
            if hasattr(x, "shape") and hasattr(x, "dtype"):
                return jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=sharding)
            return x
        return leaf

    return tuple(jax.tree.map(place(spec), arg) for arg, spec in zip(args, specs))


@dataclass
class Outcome:
    """One (program, target): the compiled text, XLA's FLOPs, and hloscope's report or the error it raised."""

    text: str = ""
    xla_flops: float = 0.0
    report: Any = None
    error: BaseException | None = None
    compile_s: float = 0.0
    analyze_s: float = 0.0


_OUTCOMES: dict[tuple[str, str], Outcome] = {}


def _outcome(prog: Program, target: str) -> Outcome:
    key = (prog.name, target)
    if key in _OUTCOMES:
        return _OUTCOMES[key]
    import hloscope

    mesh = mesh_for(prog, target)
    built = prog.build(mesh)
    args = with_shardings(built.args, built.specs, mesh)
    t0 = time.perf_counter()
    compiled = jax.jit(built.fn).lower(*args).compile()
    out = Outcome(compile_s=time.perf_counter() - t0)
    out.text = compiled.as_text()
    cost = compiled.cost_analysis()
    if isinstance(cost, (list, tuple)):
        cost = cost[0]
    out.xla_flops = float(cost.get("flops", 0.0))
    t0 = time.perf_counter()
    try:
        out.report = hloscope.analyze(out.text, chip=TARGETS[target][0])
    except Exception as err:  # noqa: BLE001 - reported by test_analyzes
        out.error = err
    out.analyze_s = time.perf_counter() - t0
    _OUTCOMES[key] = out
    return out


def module_flops(report: Any) -> float:
    assert len(report.modules) == 1, report.modules
    return float(report.modules["flops"].iloc[0])


def _flags(value: Any) -> set[str]:
    """A flags cell (comma-joined string, or a list) as a set."""
    if isinstance(value, str):
        return {f for f in value.split(",") if f}
    return set(value) if isinstance(value, (list, tuple, set, frozenset)) else set()


def flagged(report: Any, flag: str) -> list[str]:
    """Instructions of ``report`` carrying ``flag``."""
    ops = report.ops
    return [str(name) for name, flags in zip(ops["instruction"], ops["caveats"]) if flag in _flags(flags)]


# ---- parameters ------------------------------------------------------------------------------------------------


def _runs_on(prog: Program, target: str) -> bool:
    if prog.targets is not None and target not in prog.targets:
        return False
    return FULL or target not in SUBSET_TARGETS or prog.representative


def _cases(test: str) -> list[Any]:
    cases = []
    for prog in CATALOGUE:
        for target in TARGETS:
            if not _runs_on(prog, target):
                continue
            reason = KNOWN.get((prog.name, target, test))
            marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
            cases.append(pytest.param(prog, target, id=f"{prog.name}-{target}", marks=marks))
    return cases


# ---- tests -------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("prog", "target"), _cases("analyzes"))
def test_analyzes(prog: Program, target: str) -> None:
    out = _outcome(prog, target)
    if out.error is not None:
        raise AssertionError(f"hloscope.analyze raised on {prog.name} ({target}): "
                             f"{type(out.error).__name__}: {out.error}") from out.error
    report = out.report
    flops = module_flops(report)
    assert math.isfinite(flops) and flops >= 0, flops
    failed = flagged(report, "cost-rule-failed")
    assert not failed, f"cost rules failed on {failed}"


@pytest.mark.parametrize(("prog", "target"), _cases("flops"))
def test_flops_match_xla(prog: Program, target: str) -> None:
    out = _outcome(prog, target)
    if out.error is not None:
        pytest.fail(f"no report: {type(out.error).__name__}: {out.error}")
    report = out.report
    ours = module_flops(report)
    adj = adjustment(out.text)
    expected = out.xla_flops + adj.flops
    n_while, n_known = whiles(out.text)
    if n_while:
        flags = _flags(report.modules["caveats"].iloc[0])
        if prog.dynamic_loop:  # no FLOPs to expect; hloscope must say it does not know the trip count
            assert "unknown-trip-count" in flags, f"{prog.name} ({target}): data-dependent loop, flags {flags}"
            return
        if not prog.loops:
            pytest.skip(f"{n_while} while loop(s) the compiler made (no hand-derived body FLOPs)")
        if n_known < n_while and ("inferred-trip-count" not in flags or "unknown-trip-count" in flags):
            pytest.skip("trip count known to neither XLA (no known_trip_count) nor hloscope (unknown-trip-count)")
        expected += sum((execs - 1) * body for execs, body in prog.loops)
    detail = (f"{prog.name} ({target}): hloscope {ours:.6g}, XLA {out.xla_flops:.6g}, expected {expected:.6g} "
              f"(departures {adj.terms}, loops {prog.loops if n_while else ()})")
    assert ours == pytest.approx(expected, rel=LOOP_RTOL if n_while else RTOL, abs=1.0), detail
