"""The one exception family of the HLO text reader."""

from __future__ import annotations

from hloscope.errors import HloscopeError


class HloParseError(HloscopeError):
    """HLO text that hloscope cannot read, with where and why.

    Attributes:
        msg: what was expected and what was found.
        source: the file path, or ``"<string>"``.
        doc: the text being parsed.
        pos: character offset of the problem in ``doc`` (``len(doc)`` at end of input).
        lineno, colno: 1-based line and column of ``pos``.
        computation, instruction: names of the enclosing computation and instruction, when known.
        byte_offset: for input that is not text at all (not UTF-8), the offset of the first bad byte; else None.

    The message reads ``<source>:<line>:<col>: <msg> (in computation X, instruction Y)`` followed by the
    offending line and a caret under the position, as compilers print it; at the end of the text,
    ``<source>: <msg> (at end of document, line N)``; for bytes that are not text, ``<source>: byte N: <msg>``.
    """

    def __init__(
        self,
        msg: str,
        doc: str,
        pos: int,
        *,
        source: str = "<string>",
        computation: str = "",
        instruction: str = "",
        byte_offset: int | None = None,
    ) -> None:
        pos = max(0, min(pos, len(doc)))
        self.msg = msg
        self.doc = doc
        self.pos = pos
        self.source = source
        self.computation = computation
        self.instruction = instruction
        self.byte_offset = byte_offset
        self.lineno = doc.count("\n", 0, pos) + 1
        line_start = doc.rfind("\n", 0, pos) + 1
        self.colno = pos - line_start + 1
        super().__init__(self._format(line_start))

    def _format(self, line_start: int) -> str:
        if self.byte_offset is not None:
            return f"{self.source}: byte {self.byte_offset}: {self.msg}"
        where = [f"computation {self.computation!r}"] if self.computation else []
        if self.instruction:
            where.append(f"instruction {self.instruction!r}")
        context = f" (in {', '.join(where)})" if where else ""
        if self.pos >= len(self.doc):
            head = f"{self.source}: {self.msg}{context} (at end of document, line {self.lineno})"
        else:
            head = f"{self.source}:{self.lineno}:{self.colno}: {self.msg}{context}"
        line_end = self.doc.find("\n", line_start)
        line = self.doc[line_start : line_end if line_end >= 0 else len(self.doc)]
        if not line.strip():
            return head
        # Keep the excerpt short on the enormous lines real HLO has (metadata, backend configs).
        col = self.colno - 1
        lo = max(0, col - 60)
        excerpt = line[lo : col + 60]
        prefix = "..." if lo else ""
        return f"{head}\n    {prefix}{excerpt}\n    {' ' * (len(prefix) + col - lo)}^"
