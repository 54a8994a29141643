"""Shared by the parser tests: the optional C twins of the parser's Python reads."""

from __future__ import annotations

import shutil
import sysconfig
from typing import Callable

import pytest


def _compiled_twin(function: Callable | None, extension: str) -> Callable:
    """``function`` (an optional C extension's function), or a skip when the extension is not built because no C
    compiler is here -- and a failure when one is (then the install is broken: ``pip install -e .`` builds it)."""
    if function is None:
        cc = (sysconfig.get_config_var("CC") or "cc").split()[0]
        if shutil.which(cc):
            pytest.fail(f"the C extension hloscope.parsers.{extension} is not built, though {cc} is here: "
                        "reinstall with `pip install -e .`")
        pytest.skip(f"the optional C extension {extension} is not built (no C compiler)")
    return function


@pytest.fixture(scope="session")
def compiled_twin() -> Callable[[Callable | None, str], Callable]:
    """``_compiled_twin``, for the fixtures of the tests of each C twin."""
    return _compiled_twin
