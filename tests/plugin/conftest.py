"""Shared helpers of the plugin tests: pytester, the plugin's command-line switch, JAX environments."""

from __future__ import annotations

import importlib.metadata
import os
from pathlib import Path

import pytest

# In-process pytester runs drop the modules they imported when they end, and numpy or jaxlib (C extensions)
# cannot be imported twice in one process: import what the plugin's analysis needs here, once, so every run
# shares it. (Importing jax starts no backend: subprocess runs still choose their own XLA_FLAGS.)
import jax  # noqa: F401  (reading a trace's HLO protos uses jaxlib)
import numpy  # noqa: F401
import pandas  # noqa: F401

import hloscope.analysis  # noqa: F401
import hloscope.pytest_plugin  # noqa: F401
import hloscope.roofline.tables  # noqa: F401

try:  # the trace reader's protobuf modules (C extension too)
    from google.protobuf import descriptor_pool  # noqa: F401
    import hloscope.parsers._xspace  # noqa: F401
except ImportError:  # pragma: no cover - then the trace tests report the problem themselves
    pass


def pytest_configure(config: pytest.Config) -> None:
    # pytester, registered here rather than with ``pytest_plugins`` (which pytest refuses outside the rootdir's
    # conftest): pytest_configure and pytest_addoption are historic, so a late registration still gets both.
    if not config.pluginmanager.has_plugin("pytester"):
        config.pluginmanager.import_plugin("pytester")

ROOT = Path(__file__).resolve().parents[2]
HLO = ROOT / "fixtures" / "hlo"


def _installed_as_entry_point() -> bool:
    return any(ep.value.startswith("hloscope.pytest_plugin")
               for ep in importlib.metadata.entry_points(group="pytest11"))


#: Arguments that load the plugin: none once the pytest11 entry point is installed (loading it twice fails).
#: (In-process runs find it imported already, hence no assertion rewriting and a warning about that, ignored.)
PLUGIN = [] if _installed_as_entry_point() else ["-p", "hloscope.pytest_plugin",
                                                  "-W", "ignore::pytest.PytestAssertRewriteWarning"]


@pytest.fixture
def jax_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Environment of a subprocess pytest run that compiles with JAX: CPU backend with 8 host devices (set
    before JAX is imported, hence subprocess runs), no persistent compilation cache, hloscope importable."""
    monkeypatch.setenv("JAX_PLATFORMS", "cpu")
    monkeypatch.setenv("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
    monkeypatch.setenv("JAX_ENABLE_COMPILATION_CACHE", "false")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p))
    monkeypatch.delenv("PYTEST_ADDOPTS", raising=False)


@pytest.fixture(autouse=True)
def _not_an_xdist_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    """The pytest runs these tests start are not xdist workers, even when this suite runs under ``-n``: the
    worker's environment (``PYTEST_XDIST_WORKER``, ...) is inherited by them and would make the plugin act as
    a worker (no summary, baselines left to the controller)."""
    for name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
        monkeypatch.delenv(name, raising=False)
