"""``hloscope._compiled.compiled``: an optional C function, or None -- the Python twin then runs."""

from __future__ import annotations

from hloscope._compiled import compiled


def test_a_missing_extension_or_function_is_none() -> None:
    assert compiled("hloscope.parsers._no_such_extension", "block_rows") is None
    # (an extension built from an older source, without a function added since: the twin runs, no import error)
    assert compiled("json", "no_such_function") is None
    assert compiled("json", "dumps") is not None


def test_an_extension_of_another_interface_version_is_none(monkeypatch) -> None:
    """A build from a source whose functions took other arguments (its ``ABI`` constant older than the one
    ``_compiled.ABI`` asks of it) reads as not built: calling it the new way would raise."""
    import types

    from hloscope import _compiled

    old = types.ModuleType("old_build")
    old.shared_rows = print
    monkeypatch.setitem(__import__("sys").modules, "old_build", old)
    monkeypatch.setitem(_compiled.ABI, "old_build", 2)
    assert compiled("old_build", "shared_rows") is None  # (no ABI declared: 0)
    old.ABI = 2
    assert compiled("old_build", "shared_rows") is print
    built = compiled("hloscope.cost._cost_walk", "shared_rows")
    assert built is None or __import__("hloscope.cost._cost_walk", fromlist=["ABI"]).ABI == _compiled.ABI[
        "hloscope.cost._cost_walk"]


def test_no_extension_built_in_place_is_older_than_its_source() -> None:
    """An editable install keeps each extension built in place beside its C source, and a build that fails later
    (a compile error in an edited source) leaves the old one there, silently: the tests would then hold the old C
    to the new Python. Every in-place build is at least as new as its source (rebuild: ``pip install -e .``)."""
    from pathlib import Path

    package = Path(__file__).resolve().parents[1] / "hloscope"
    stale = []
    for source in package.rglob("*.c"):
        for built in source.parent.glob(source.stem + ".*.so"):
            if built.stat().st_mtime < source.stat().st_mtime:
                stale.append(f"{built.name} is older than {source.relative_to(package.parent)}")
    assert not stale, "; ".join(stale) + ": rebuild with `pip install -e .` (and read its compiler output)"
