"""Attributes decoded on first access: the ``hlo.AttributeDecoder`` of the parser, with metadata and stack frames.

An instruction keeps its attribute text as printed; ``Decoder.decode`` splits it into ``key=value`` pairs and
decodes them (typed values by ``_hlo_attrs.ATTRIBUTE_PARSERS``, ``metadata={...}`` once per distinct text, front
end attributes, backend config, sharding). ``resolve_stack_frames`` joins the module's ``StackFrames`` tables
into the frames a ``metadata={stack_frame_id=N}`` resolves to.
"""

from __future__ import annotations

from itertools import compress, count, repeat
from operator import attrgetter, is_, is_not
from typing import TYPE_CHECKING, Any

from hloscope._compiled import PURE_PYTHON, compiled
from hloscope._regex import LazyPattern
from hloscope.hlo import CALLED_COMPUTATION_ROLES, DecodedAttributes, HloInstruction, Metadata
from hloscope.parsers import _hlo_re as r
from hloscope.parsers._attribute_value import KNOWN, KNOWN_IF_READ, metadata_fields
from hloscope.parsers._attribute_value import attribute_value as read_attribute_value
from hloscope.parsers._errors import HloParseError
from hloscope.parsers._hlo_attrs import ATTRIBUTE_PARSERS, LIST_CALL_KEYS
from hloscope.parsers._hlo_lexer import ParserBase, split_attributes

if TYPE_CHECKING:  # pragma: no cover
    from hloscope.hlo_values import StackFrame


_ATTRIBUTE_TEXT = attrgetter("attribute_text")
#: The decoder the parser gave an instruction (``HloInstruction(decoder=...)``).
_DECODER = attrgetter("_decoder")
#: ``metadata_column``'s mark of a row not read yet.
_UNREAD = object()
#: ``Decoder.py_metadata_column``'s reading in C, or None when the extension was not built.
c_metadata_column = compiled("hloscope.parsers._attribute_scan", "metadata_column")
#: Keys ``decode`` does not file under ``attributes``.
_NOT_ATTRIBUTES = frozenset({"metadata", "backend_config", "frontend_attributes", "sharding",
                             *CALLED_COMPUTATION_ROLES, *LIST_CALL_KEYS})


class Decoder(ParserBase):
    """Decoding of kept attribute texts, and of metadata."""

    __slots__ = ()

    def decode(self, inst: HloInstruction) -> DecodedAttributes:
        """Decode an instruction's kept attribute text (``AttributeDecoder`` protocol)."""
        text = inst.attribute_text
        pairs = None if "//" in text or "/*" in text else split_attributes(text)
        pos = -1  # the line's offset, looked up only when needed (the table of line starts costs a pass)
        if pairs is None:
            # A string or nested value holds ", key=": scan the line properly.
            pos = self._line_pos(inst.line)
            start = self.src.find(text, pos) if text else -1
            if start < 0:
                raise self.error("cannot locate the attribute text of this instruction", pos, inst.name)
            pairs, _ = self._attribute_pairs(start, inst.name)
        pairs = [(k, v) for k, v in pairs if k not in CALLED_COMPUTATION_ROLES and k not in LIST_CALL_KEYS]
        try:
            return self._decoded(pairs, inst.name, pos, inst.line)
        except HloParseError as e:
            # Name the computation in the message (found only now: an instruction does not know its computation).
            owner = next((c.name for c in self.done.values() if any(i is inst for i in c.instructions)), "")
            raise HloParseError(e.msg, e.doc, e.pos, source=e.source, computation=owner,
                                instruction=e.instruction) from None

    def attribute_value(self, inst: HloInstruction, key: str) -> tuple[bool, str]:
        """The raw text of one ``key=value`` of an instruction's kept attribute text, found without decoding the
        rest: ``(True, value)``, ``(True, "")`` when ``key`` is absent, or ``(False, "")`` when only a full
        ``decode`` can tell (``_attribute_value.attribute_value``; a value not plainly balanced is known when a
        full decode already read it, as the metadata texts in ``self.metadata``). Used for the ops table's
        metadata and fusion kinds, where a full decode per instruction took most of a report's time (issue #16).
        """
        status, value = read_attribute_value(inst.attribute_text, key)
        if status == KNOWN_IF_READ:
            return (True, value) if value in self.metadata else (False, "")
        return (status == KNOWN, value)

    def attribute_alone(self, inst: HloInstruction, key: str, default: Any = None) -> tuple[bool, Any]:
        """``(True, inst.attributes.get(key, default))`` read from ``key``'s text alone (``attribute_value``),
        or ``(False, None)`` when a full decode must tell (also for a value its converter rejects: the full
        decode raises the located error, and for the keys ``decode`` files elsewhere than ``attributes``)."""
        if key in _NOT_ATTRIBUTES:
            return (False, None)
        known, value = self.attribute_value(inst, key)
        if not known:
            return (False, None)
        if not value:
            return (True, default)
        parser = ATTRIBUTE_PARSERS.get(key)
        if parser is None:
            return (True, value)
        try:
            return (True, parser(value))
        except Exception:  # noqa: BLE001 - the full decode reports it, located
            return (False, None)

    def metadata_of(self, inst: HloInstruction) -> Metadata | None | bool:
        """``inst.metadata`` read alone (``attribute_value``), or False when a full decode must tell. Kept by
        attribute text: instructions printed with the same attributes have the same metadata (what
        ``attribute_value`` answers depends on the text alone, and on which metadata texts were read before only
        where it would otherwise answer False -- which is not kept)."""
        text = inst.attribute_text
        md = self.metadata_by_text.get(text, False)
        if md is not False:
            return md
        known, value = self.attribute_value(inst, "metadata")
        if not known:
            return False
        if value:
            md = self.metadata.get(value)
            if md is None:
                md = self._metadata(value)
        else:
            md = None
        self.metadata_by_text[text] = md
        return md

    def metadata_column(self, insts: list[HloInstruction]) -> list[Metadata | None] | None:
        """``[inst.metadata for inst in insts]`` for instructions this decoder decodes (``metadata_column``;
        None when one of them is another decoder's -- rows of another parse --, checked in the same pass): one
        pass reads each row as ``metadata_of`` would, each distinct text once (kept in ``metadata_by_text``; an
        empty text has no metadata), in C where the extension was built (``_attribute_scan.metadata_column``;
        ``py_metadata_column`` is its specification), and the rows it leaves (a text only a full decode can
        read, an instruction already decoded, as one decoded when parsed, whose text is the placeholder
        ``<decoded>``) go through the property."""
        column = c_metadata_column
        if column is None or PURE_PYTHON:
            if any(map(is_not, map(_DECODER, insts), repeat(self))):
                return None
            out = self.py_metadata_column(insts)
            unread = list(compress(count(), map(is_, out, repeat(_UNREAD))))
        else:
            found = column(insts, self.metadata_by_text, self.metadata, self.frames, Metadata, self._metadata, _UNREAD,
                           self)
            if found is None:
                return None
            out, unread = found  # (the rows left unread, by index)
        for k in unread:
            out[k] = insts[k].metadata
        return out

    def py_metadata_column(self, insts: list[HloInstruction]) -> list:
        """What ``metadata_column`` reads of each row before the property: None for an empty text or one without
        ``metadata`` in it, ``_UNREAD`` for an instruction already decoded, else what ``metadata_by_text`` holds
        or ``metadata_of`` reads (``_UNREAD`` where that cannot tell)."""
        by_text = self.metadata_by_text
        out: list = []
        for inst in insts:
            text = inst.attribute_text
            if not text:
                out.append(None)
            elif inst._decoded is not None:
                out.append(_UNREAD)
            elif "metadata" not in text:  # (what ``attribute_value`` answers first: none, read without a memo)
                out.append(None)
            else:
                md = by_text.get(text, _UNREAD)
                if md is _UNREAD:
                    md = self.metadata_of(inst)
                out.append(_UNREAD if md is False else md)
        return out

    def _decoded(self, pairs: list[tuple[str, str]], name: str, pos: int, line: int = 0) -> DecodedAttributes:
        """Decode ``pairs``; ``pos`` is the instruction's offset, or -1 to look it up from ``line`` for an
        error message."""
        attributes: dict[str, Any] = {}
        metadata = None
        backend_config = ""
        frontend: dict[str, str] = {}
        sharding = ""
        for key, value in pairs:
            if key == "metadata":
                metadata = self.metadata.get(value)
                if metadata is None:
                    metadata = self._metadata(value)
            elif key == "backend_config":
                backend_config = r.unquote(value) if value.startswith('"') else value
            elif key == "frontend_attributes":
                try:
                    frontend = r.frontend_attributes(value)
                except Exception as e:  # noqa: BLE001
                    pos = pos if pos >= 0 else self._line_pos(line)
                    at = self.src.find("frontend_attributes=", pos)
                    raise self.error(f"bad frontend_attributes: {e}", pos if at < 0 else at, name) from None
            elif key == "sharding":
                sharding = value
            else:
                parser = ATTRIBUTE_PARSERS.get(key)
                if parser is None:
                    attributes[key] = value
                else:
                    if "/*" in value and value[0] != '"':
                        value = r.strip_comments(value)  # `lhs_contracting_dims={/*k*/1}` (XLA test files)
                    try:
                        attributes[key] = parser(value)
                    except Exception as e:  # noqa: BLE001 - any failure of a converter is a bad value
                        pos = pos if pos >= 0 else self._line_pos(line)
                        at = self.src.find(key + "=", pos)
                        raise self.error(f"bad value for {key}: {e}", pos if at < 0 else at, name) from None
        return DecodedAttributes(attributes, metadata, backend_config, frontend, sharding)

    def _metadata(self, value: str) -> Metadata:
        op_type, op_name, source_file, line_text, frame_text = metadata_fields(value)
        try:
            source_line = int(line_text) if line_text else 0
            frame = int(frame_text) if frame_text else 0
        except ValueError:
            source_line, frame = 0, 0
        source_file = r.unquote(source_file) if source_file.startswith('"') else source_file
        if not source_file and frame:
            resolved = self.frames.get(frame)
            if resolved is not None:
                source_file, source_line = resolved.file_name, resolved.line
        md = Metadata(r.unquote(op_type) if op_type.startswith('"') else op_type,
                      r.unquote(op_name) if op_name.startswith('"') else op_name,
                      source_file, source_line, frame, value)
        self.metadata[value] = md
        return md


def metadata_column(insts: list[HloInstruction]) -> list[Metadata | None]:
    """``[inst.metadata for inst in insts]``: in bulk (``Decoder.metadata_column``: each distinct attribute text
    read once; the ops table reads every row's, issue #16) where the instructions were all parsed by one
    ``Decoder``, else one by one. The same objects as the properties give, in order."""
    decoder = _DECODER(insts[0]) if insts else None
    out = decoder.metadata_column(insts) if isinstance(decoder, Decoder) else None
    return out if out is not None else [inst.metadata for inst in insts]


def resolve_stack_frames(tables: dict[str, dict[int, str]]) -> dict[int, StackFrame]:
    """Join the ``FileNames``/``FunctionNames``/``FileLocations``/``StackFrames`` tables (XLA
    ``StackFrameIndexProto``, printed 1-based) into frame id -> innermost file, function and line. A field that is
    missing or not a number reads as 0 (the tables are informative; a damaged row costs its location only)."""
    frames_table = tables.get("StackFrames")
    if not frames_table:
        return {}
    from hloscope.hlo_values import StackFrame

    files = {k: r.unquote(v) if v.startswith('"') else v for k, v in tables.get("FileNames", {}).items()}
    functions = {k: r.unquote(v) if v.startswith('"') else v for k, v in tables.get("FunctionNames", {}).items()}
    # (a row as XLA prints it by one match; any other through ``braced_fields``, which reads the same fields)
    locations: dict[int, tuple[int, int, int]] = {}
    for k, v in tables.get("FileLocations", {}).items():
        m = _LOCATION_ROW.match(v)
        if m is not None:
            locations[k] = (int(m[1]), int(m[2]), int(m[3]))
        else:
            fields = r.braced_fields(v)
            locations[k] = (_int(fields.get("file_name_id")), _int(fields.get("function_name_id")),
                            _int(fields.get("line")))
    frames = {}
    for frame_id, text in frames_table.items():
        m = _FRAME_ROW.match(text)
        if m is not None:
            location, parent = int(m[1]), int(m[2])
        else:
            fields = r.braced_fields(text)
            location, parent = _int(fields.get("file_location_id")), _int(fields.get("parent_frame_id"))
        file_id, function_id, line = locations.get(location, _NO_LOCATION)
        frames[frame_id] = StackFrame(files.get(file_id, ""), functions.get(function_id, ""), line, parent)
    return frames


#: Rows of ``FileLocations`` and ``StackFrames`` as XLA prints them (each field once, in the proto's order; at
#: most 18 digits, which ``int`` reads exactly).
_LOCATION_ROW = LazyPattern(r"\{file_name_id=(\d{1,18}) function_name_id=(\d{1,18}) line=(\d{1,18})"
                            r"(?: end_line=\d{1,18} column=\d{1,18} end_column=\d{1,18})?\}\Z")
_FRAME_ROW = LazyPattern(r"\{file_location_id=(\d{1,18}) parent_frame_id=(\d{1,18})\}\Z")
#: A frame's location where its ``file_location_id`` names no row: ids 0 (what ``_int`` reads of nothing).
_NO_LOCATION = (0, 0, 0)


def _int(text: str | None) -> int:
    try:
        return int(text) if text else 0
    except ValueError:
        return 0

