"""``json.dumps(doc, indent=1, allow_nan=False)``, the same text, several times faster on report documents.

Python's ``json`` uses its C encoder only without ``indent``; with it every value goes through the pure-Python
encoder (0.26 s for the 13.6 MB report of a 4 MB module). A report is mostly flat rows (dicts of scalars with
a list or two): runs of scalar items are encoded by the C encoder with the item separator set to the newline
and indentation that ``indent=1`` would print at that depth (``json.JSONEncoder(separators=...)``), and only
the containers are walked in Python. Scalars are printed by the same C code either way (``float.__repr__``,
``int.__repr__``, ``encode_basestring_ascii``; keys that are not strings converted as ``json`` does), and
anything else is handed to ``json.dumps`` itself, re-indented (its text holds no raw newline but those it
printed). tests/report/test_json_text.py holds it to ``json.dumps`` on fixture reports and random documents.
"""

from __future__ import annotations

import json
from typing import Any

_SCALAR = (str, int, float, type(None))  # (bool is an int)
_encoders: dict[int, Any] = {}


def dumps_indent1(doc: Any) -> str:
    """``json.dumps(doc, indent=1, allow_nan=False)``.

    Raises:
        ValueError: a float is NaN or infinite (as ``allow_nan=False``).
        TypeError: a value JSON cannot hold (as ``json.dumps``).
    """
    out: list[str] = []
    _emit(doc, 0, out)
    return "".join(out)


def _encoder(level: int):
    """The C encoder of scalars and flat containers whose items sit at indentation ``level + 1``."""
    enc = _encoders.get(level)
    if enc is None:
        enc = _encoders[level] = json.JSONEncoder(allow_nan=False, separators=(",\n" + " " * (level + 1), ": ")).encode
    return enc


def _emit(obj: Any, level: int, out: list[str]) -> None:
    if isinstance(obj, _SCALAR):
        out.append(_encoder(level)(obj))
    elif isinstance(obj, dict):
        _emit_dict(obj, level, out)
    elif isinstance(obj, (list, tuple)):
        _emit_list(obj, level, out)
    else:  # (anything else: json.dumps's own answer, a TypeError for most)
        out.append(json.dumps(obj, indent=1, allow_nan=False).replace("\n", "\n" + " " * level))


def _emit_dict(obj: dict, level: int, out: list[str]) -> None:
    if not obj:
        out.append("{}")
        return
    pad = "\n" + " " * (level + 1)
    enc = _encoder(level)
    items = list(obj.items())
    nested = [i for i, (_, v) in enumerate(items) if not isinstance(v, _SCALAR)]
    if not nested:
        out.append("{" + pad + enc(obj)[1:-1] + "\n" + " " * level + "}")
        return
    out.append("{")
    sep = ""
    start = 0
    for i in nested + [len(items)]:
        if i > start:  # a run of scalar items: one C encoding
            out.append(sep + pad + enc(dict(items[start:i]))[1:-1])
            sep = ","
        if i < len(items):
            key, value = items[i]
            out.append(sep + pad + enc(key if isinstance(key, str) else _key_text(key)) + ": ")
            _emit(value, level + 1, out)
            sep = ","
        start = i + 1
    out.append("\n" + " " * level + "}")


def _key_text(key: Any) -> str:
    """A dict key that is not a string as ``json`` turns it into one (the C encoder does the same for the keys of
    the scalar runs)."""
    if key is True:
        return "true"
    if key is False:
        return "false"
    if key is None:
        return "null"
    if isinstance(key, float):
        return json.JSONEncoder(allow_nan=False).encode(key)
    if isinstance(key, int):
        return int.__repr__(key)
    raise TypeError(f"keys must be str, int, float, bool or None, not {type(key).__name__}")


def _emit_list(obj: list | tuple, level: int, out: list[str]) -> None:
    if not obj:
        out.append("[]")
        return
    pad = "\n" + " " * (level + 1)
    if all(isinstance(v, _SCALAR) for v in obj):
        out.append("[" + pad + _encoder(level)(list(obj))[1:-1] + "\n" + " " * level + "]")
        return
    out.append("[")
    for i, value in enumerate(obj):
        out.append(("," if i else "") + pad)
        _emit(value, level + 1, out)
    out.append("\n" + " " * level + "]")
