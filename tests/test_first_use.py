"""What hloscope makes on first use rather than at import: regular expressions (``hloscope._regex.LazyPattern``,
which reads as ``re.compile``'s pattern) and the model's rarely used attribute values (``hloscope.hlo_values``)."""

from __future__ import annotations

import importlib
import pkgutil
import re

import pytest

import hloscope
from hloscope._regex import LazyPattern


def _all_lazy_patterns() -> list[tuple[str, str, LazyPattern]]:
    found = []
    for info in pkgutil.walk_packages(hloscope.__path__, "hloscope."):
        if info.name.endswith("__main__") or info.name.startswith(("hloscope.pytest_plugin", "hloscope.pod")):
            continue  # (the command line runs on import; the plugin and Dask are their own tests')
        module = importlib.import_module(info.name)
        found += [(info.name, name, value) for name, value in vars(module).items() if isinstance(value, LazyPattern)]
    return found


def test_every_pattern_of_hloscope_compiles() -> None:
    """Each module-level ``LazyPattern`` is a valid regular expression (a bad one would raise only at first use)."""
    patterns = _all_lazy_patterns()
    assert len(patterns) >= 60  # (hloscope's module-level patterns: 84 when they were made lazy)
    for module, name, pattern in patterns:
        compiled = pattern.compiled()
        assert isinstance(compiled, re.Pattern), f"{module}.{name}"


def test_a_lazy_pattern_matches_as_the_compiled_one() -> None:
    source, flags = r"(\w+)=(\d+)", re.ASCII
    lazy, compiled = LazyPattern(source, flags), re.compile(source, flags)
    text = "a=1, bb=22, c=x"
    assert lazy.findall(text) == compiled.findall(text) == [("a", "1"), ("bb", "22")]
    assert lazy.match(text, 4) is None and compiled.match(text, 4) is None
    assert lazy.search(text, 4).groups() == ("bb", "22")
    assert lazy.sub("_", text) == compiled.sub("_", text) == "_, _, c=x"
    assert lazy.flags == compiled.flags and lazy.groups == 2
    assert lazy.pattern == source


def test_compiled_at_first_use_and_kept() -> None:
    """Nothing is compiled before the first use (a bad pattern is readable until then); the methods asked for
    are kept on the instance, so the second read does not compile again."""
    bad = LazyPattern(r"(unclosed")
    assert bad.pattern == "(unclosed"
    with pytest.raises(re.error):
        bad.match("x")
    lazy = LazyPattern(r"x+")
    assert "match" not in vars(lazy)
    first = lazy.match
    assert vars(lazy)["match"] is first and lazy.match is first
    with pytest.raises(AttributeError):
        lazy.__no_such_dunder__


def test_the_models_rare_values_load_on_first_use() -> None:
    """``hloscope.hlo`` does not make the attribute-value dataclasses at import (``hloscope.hlo_values``: ~1 ms
    each); it still gives them by name, the same classes."""
    import subprocess
    import sys

    probe = ("import sys, hloscope.hlo as h; before = 'hloscope.hlo_values' in sys.modules; "
             "from hloscope.hlo import WindowDimension, StackFrame; import hloscope.hlo_values as v; "
             "print(before, WindowDimension is v.WindowDimension and StackFrame is v.StackFrame)")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False", "True"]
    with pytest.raises(AttributeError):
        import hloscope.hlo

        hloscope.hlo.NoSuchValue  # noqa: B018
