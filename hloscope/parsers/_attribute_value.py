"""One ``key=value`` of an instruction's attribute text, read without decoding the rest of it; the fields of a
``metadata={...}`` value.

``attribute_value(text, key)`` answers for ``Decoder.attribute_value`` (``_hlo_decode.py``), which the ops table
calls for every distinct attribute text (its metadata) and the cost and memory models for a fusion's ``kind``:
a full decode of each text was most of a report's time (issue #16). Two implementations give the same result:
``py_attribute_value`` (``str.find``, ``str.count`` and two regexes: the specification) and, when the optional
extension ``_attribute_scan`` was compiled at install (``setup.py``), the same checks as one pass in C, about ten
times faster. ``attribute_value`` is the C one when present; ``HLOSCOPE_PURE_PYTHON=1`` selects the Python one.
tests/parsers/test_attribute_value.py holds the two equal on every corpus and fixture text and on mutated texts.
``metadata_fields(value)`` reads the fields of a metadata value for ``Decoder._metadata`` (once per distinct
value: ~6,000 on gemma2): ``py_metadata_fields`` (``r.braced_fields``, a regex) and its C twin, likewise.
A change to one is a change to both; after editing the C file, rebuild it in place with ``pip install -e .``.
"""

from __future__ import annotations

from hloscope._compiled import PURE_PYTHON, compiled
from hloscope.parsers import _hlo_re as r

#: Statuses of ``attribute_value``.
UNKNOWN = 0  #: only a full decode can tell (a string or comment before the key, a value left open, ...)
KNOWN = 1  #: the value is the one returned (``""``: the key is absent)
KNOWN_IF_READ = 2  #: the value is the one returned if a full decode already read it whole, else UNKNOWN


def py_attribute_value(text: str, key: str) -> tuple[int, str]:
    """``(status, value)`` of ``key`` in an attribute text (``, a=1, b={...}``, as the parser keeps it).

    ``KNOWN`` with the raw value text, or with ``""`` when ``key`` is absent; ``UNKNOWN`` (value ``""``) when only
    a full decode can tell: a ``"`` before ``, key=``, a text ending in a separator or holding a line break or
    comment, ``key`` twice, brackets unbalanced before it, or a text that does not start with ``, name=``;
    ``KNOWN_IF_READ`` with the value when the value itself is not plainly balanced (not a ``{...}`` or a single
    token, a string left open, brackets unbalanced outside its strings): it is the decode's value only if a full
    decode already read that same value (the metadata texts the decoder keeps).

    Exactly what the full decode reads for ``key`` where it answers ``KNOWN``: ``split_attributes`` ends a value
    at the next ``, name=``; a value that is balanced, its strings closed, and ends in its closing brace (or is
    one token) cannot run on past that point.
    """
    probe = ", " + key + "="
    at = text.find(probe)
    if at < 0:
        return (UNKNOWN if key in text else KNOWN, "")
    start = at + len(probe)
    if (text.find('"', 0, at) >= 0 or text[-1] in ", \t" or text.find(probe, start) >= 0
            or "\n" in text or "//" in text or "/*" in text or r.ATTRIBUTE_SPLIT.match(text) is None):
        return (UNKNOWN, "")
    if at and (text.count("{", 0, at) != text.count("}", 0, at) or text.count("(", 0, at) != text.count(")", 0, at)
               or text.count("[", 0, at) != text.count("]", 0, at)):
        return (UNKNOWN, "")
    found = r.ATTRIBUTE_SPLIT.search(text, start)
    value = text[start:found.start() if found else len(text)].strip()
    if not value:
        return (UNKNOWN, "")
    first = value[0]
    if first == "{":
        if value[-1] != "}":
            return (KNOWN_IF_READ, value)
    elif first == '"' or value.startswith("mesh[") or " " in value or "\t" in value:
        return (KNOWN_IF_READ, value)
    check = r.STRING.sub("", value) if '"' in value else value
    if ('"' in check or check.count("{") != check.count("}") or check.count("(") != check.count(")")
            or check.count("[") != check.count("]")):
        return (KNOWN_IF_READ, value)
    return (KNOWN, value)


#: The fields of a ``metadata={...}`` value that ``hlo.Metadata`` holds, in ``metadata_fields``'s order.
METADATA_KEYS = ("op_type", "op_name", "source_file", "source_line", "stack_frame_id")


def py_metadata_fields(value: str) -> tuple[str, str, str, str, str]:
    """The raw texts (strings still quoted) of ``METADATA_KEYS`` in a ``metadata={...}`` value, ``""`` for a key
    it lacks: what ``r.braced_fields`` reads (a key repeated: its last value)."""
    fields = r.braced_fields(value)
    return tuple(fields.get(key, "") for key in METADATA_KEYS)


#: The C readers, or None when the extension was not built.
c_attribute_value = compiled("hloscope.parsers._attribute_scan", "attribute_value")
c_metadata_fields = compiled("hloscope.parsers._attribute_scan", "metadata_fields")
attribute_value = py_attribute_value if c_attribute_value is None or PURE_PYTHON else c_attribute_value
metadata_fields = py_metadata_fields if c_metadata_fields is None or PURE_PYTHON else c_metadata_fields
