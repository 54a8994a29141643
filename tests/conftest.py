"""Shared test setup: JAX on CPU, the public corpus and the repository's fixtures."""

from __future__ import annotations

import os
from pathlib import Path

os.environ.setdefault("JAX_PLATFORMS", "cpu")
# Tests that make deviceless TPU topologies themselves (not through hloscope.compile, which sets it) would
# otherwise fail on libtpu's /tmp/libtpu_lockfile when two xdist workers load libtpu at once; no TPU is driven.
os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")

import pytest  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
#: The public corpus of real HLO texts, traces and profiles (``/work/shared/corpus``: see its README.md);
#: tests that need it are skipped where it is absent.
CORPUS = REPO.parent / "shared" / "corpus"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "slow: a test that takes seconds (still runs by default; deselect with -m 'not slow')"
    )


@pytest.fixture(scope="session")
def corpus_dir() -> Path:
    if not CORPUS.is_dir():
        pytest.skip(f"public corpus absent: {CORPUS}")
    return CORPUS


@pytest.fixture(scope="session")
def fixtures_dir() -> Path:
    return REPO / "fixtures"
