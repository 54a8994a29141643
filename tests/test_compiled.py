"""``hloscope._compiled.compiled``: an optional C function, or None -- the Python twin then runs."""

from __future__ import annotations

from hloscope._compiled import compiled


def test_a_missing_extension_or_function_is_none() -> None:
    assert compiled("hloscope.parsers._no_such_extension", "block_rows") is None
    # (an extension built from an older source, without a function added since: the twin runs, no import error)
    assert compiled("json", "no_such_function") is None
    assert compiled("json", "dumps") is not None
