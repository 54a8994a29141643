"""Shared test setup: JAX on CPU, the public corpus and the repository's fixtures."""

from __future__ import annotations

import os
import shutil
import sysconfig
from pathlib import Path
from typing import Callable

os.environ.setdefault("JAX_PLATFORMS", "cpu")
# Tests that make deviceless TPU topologies themselves (not through hloscope.compile, which sets it) would
# otherwise fail on libtpu's /tmp/libtpu_lockfile when two xdist workers load libtpu at once; no TPU is driven.
os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")
# hloscope's cache (hloscope._cache: the parsed built-in chip table) in a directory of this run, not the user's.
if "HLOSCOPE_CACHE_DIR" not in os.environ:
    import atexit
    import tempfile

    os.environ["HLOSCOPE_CACHE_DIR"] = tempfile.mkdtemp(prefix="hloscope-test-cache-")
    atexit.register(shutil.rmtree, os.environ["HLOSCOPE_CACHE_DIR"], True)

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


#: The corpus's folders of HLO texts.
CORPUS_HLO_KINDS = ("hlo_cpu", "hlo_gpu", "hlo_tpu", "hlo_generic")


@pytest.fixture(scope="session")
def hlo_paths(corpus_dir: Path) -> Callable[..., list[Path]]:
    """``hlo_paths(max_bytes, fixtures=True)``: the repository's HLO text fixtures (``fixtures/hlo/*.hlo.txt``,
    sorted; left out with ``fixtures=False``), then every corpus HLO file (``*.hlo`` and ``*.txt`` of
    ``CORPUS_HLO_KINDS``) smaller than ``max_bytes``, sorted: the inputs of the tests that hold two forms of one
    computation equal. Skips, as ``corpus_dir`` does, where the corpus is absent."""

    def paths(max_bytes: int, fixtures: bool = True) -> list[Path]:
        found = sorted((REPO / "fixtures" / "hlo").glob("*.hlo.txt")) if fixtures else []
        return found + sorted(p for d in CORPUS_HLO_KINDS for p in (corpus_dir / d).glob("*")
                              if p.suffix in (".hlo", ".txt") and p.stat().st_size < max_bytes)

    return paths


def _compiled_twin(function: Callable | None, extension: str) -> Callable:
    """``function`` (an optional C extension's function), or a skip when the extension is not built because no C
    compiler is here -- and a failure when one is (then the install is broken: ``pip install -e .`` builds it)."""
    if function is None:
        cc = (sysconfig.get_config_var("CC") or "cc").split()[0]
        if shutil.which(cc):
            pytest.fail(f"the C extension {extension} is not built, though {cc} is here: "
                        "reinstall with `pip install -e .`")
        pytest.skip(f"the optional C extension {extension} is not built (no C compiler)")
    return function


@pytest.fixture(scope="session")
def compiled_twin() -> Callable[[Callable | None, str], Callable]:
    """``_compiled_twin``, for the fixtures of the tests of each C twin."""
    return _compiled_twin
