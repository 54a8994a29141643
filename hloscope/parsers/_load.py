"""Where HLO text comes from: a string, a file, or an XLA dump directory (``--xla_dump_to``)."""

from __future__ import annotations

import os
from pathlib import Path

from hloscope._regex import LazyPattern
from hloscope.hlo import HloModule
from hloscope.parsers._errors import HloParseError
from hloscope.parsers._hlo_text import parse_hlo_text

#: Suffix of the post-optimization module text XLA writes into a dump directory (``xla/service/dump.cc``:
#: ``<prefix>.<module>.after_optimizations.txt``, ``...cpu_after_optimizations.txt`` on newer CPU builds). Side
#: files such as ``*after_optimizations-buffer-assignment.txt`` or ``*_before_buffer_assignment.txt`` end
#: otherwise and are not modules.
DUMP_SUFFIX = "after_optimizations.txt"
#: The start of a one-line ``str`` that ``parse_hlo`` reads as HLO text: the keyword ``HloModule`` or ``ENTRY``
#: (not the start of a longer name such as ``ENTRY.txt``), or a computation header without ``ENTRY``:
#: ``%name (params) -> shape``, or ``%name {`` followed by the first instruction's ``[ROOT] name =``.
_TEXT_START = LazyPattern(
    r"""\s*(?:(?:HloModule|ENTRY)(?![\w.\-])"""
    r"""|%?[^\s(){}=%,/"]+\s*(?:\([^\n]*?\)\s*->|\{\s*(?:ROOT\s+)?%?[^\s(){}=%,/"]+\s*=))"""
)


def parse_hlo(text_or_path: str | bytes | os.PathLike[str], *, module: str | None = None) -> HloModule:
    """Parse HLO from a string, bytes, a text file, or an XLA dump directory.

    Whether a ``str`` is HLO text or a path is decided by its content alone, never by trying the file system:
    it is text when it holds a line break or nothing but white space (``""`` is an empty text, not the current
    directory), or when it starts (after white space) with the ``HloModule``
    keyword or with a computation header (``[ENTRY] %name (params) -> shape {`` or ``%name {`` and an
    instruction); any other ``str`` is a path, and so is every ``os.PathLike`` (``pathlib.Path``). So a module
    on one line (``"HloModule m ENTRY e { ... }"``) or a bare computation (``"ENTRY e { ROOT ... }"``) is text
    however short, and a text never reaches the file system; a path holding a NUL byte cannot name a file and
    is a ``MissingPathError`` at once, without a look-up. ``bytes`` (or a ``bytearray`` / ``memoryview``) are
    always HLO text, encoded as UTF-8 (what ``open(f, "rb").read()`` gives), never a path.

    Args:
        text_or_path: HLO text (as ``compiled.as_text()`` returns it, as ``str`` or UTF-8 ``bytes``), a path to
            a text file, or a directory written by ``XLA_FLAGS=--xla_dump_to=DIR``.
        module: for a dump directory holding several modules, a substring of the wanted module's file or
            module name (e.g. ``"jit_train_step"``).

    Returns:
        The parsed ``HloModule`` (``source``: the path, ``"<string>"`` or ``"<bytes>"``).

    Raises:
        HloParseError: the text is not HLO (names file, line and column); bytes or a file that are not UTF-8
            text or hold a NUL byte (``<source>: byte N: ...``, N the offset of the first bad byte).
        MissingPathError: (a ``FileNotFoundError`` too) the path does not exist, is a broken symbolic link, or
            the system cannot look it up (a name too long, a NUL byte); the message names it (shortened past 200
            characters, a NUL shown as ``\\0``).
        UnreadablePathError: the system will not read the path or a file of the dump directory (permission
            denied, an I/O error), or the path is a directory holding no post-optimization module (a directory
            where a file is expected); the message names the path.
        ValueError: a dump directory holds several post-optimization modules and ``module`` does not pick
            exactly one (the message lists them).

    Paths in messages (and in ``HloModule.source``) show control characters escaped
    (``hloscope.errors.escaped``): a hostile file name cannot send escape sequences to a terminal.
    """
    from hloscope.errors import MissingPathError, UnreadablePathError, escaped

    if isinstance(text_or_path, (bytes, bytearray, memoryview)):
        data = bytes(text_or_path)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as e:
            prefix = data[: e.start].decode("utf-8")
            raise HloParseError(f"not UTF-8 text, so not HLO text ({e.reason}); bytes are read as UTF-8 HLO text, "
                                "never as a path", prefix, len(prefix), source="<bytes>", byte_offset=e.start) from None
        nul = text.find("\0")
        if nul >= 0:
            raise HloParseError("a NUL byte, so not HLO text (a serialized HloModuleProto? pass its text, "
                                "compiled.as_text())", text[:nul], nul, source="<bytes>",
                                byte_offset=len(text[:nul].encode("utf-8"))) from None
        return parse_hlo_text(text, source="<bytes>")
    if isinstance(text_or_path, str) and is_hlo_text(text_or_path):
        return parse_hlo_text(text_or_path)
    path = Path(text_or_path)
    if "\0" in str(path):
        raise MissingPathError(_shown(path), f"no such file or directory (a path cannot hold a NUL byte)"
                                             f"{_hint(text_or_path)}")
    try:
        is_dir = path.is_dir()
    except PermissionError as e:  # a directory above it that cannot be searched
        raise UnreadablePathError.from_os_error(path, e) from None
    except OSError as e:  # a path the system cannot look up (a name too long, ...)
        raise MissingPathError(_shown(path), f"no such file or directory ({e.strerror}){_hint(text_or_path)}") \
            from None
    try:
        if is_dir:
            files = dump_modules(path)
            if not files:  # a directory where an HLO file is expected (or an empty dump)
                raise UnreadablePathError(_shown(path), f"is a directory holding no post-optimization module "
                                                        f"(*{DUMP_SUFFIX}); expected an HLO text file, or an XLA "
                                                        "dump dir (XLA_FLAGS=--xla_dump_to=DIR)")
            if module is not None:
                files = [f for f in files if module in f.name]
            if len(files) != 1:
                names = ", ".join(f.name for f in dump_modules(path)) or "none"
                raise ValueError(escaped(
                    f"{path}: {'no' if not files else len(files)} post-optimization modules "
                    f"(*{DUMP_SUFFIX}) match{'' if module is None else f' {module!r}'}; "
                    f"pass module=<part of the name> to pick one of: {names}"
                ))
            path = files[0]
        if not path.exists():
            if path.is_symlink():
                raise MissingPathError(_shown(path), f"no such file or directory (a broken symbolic link, to "
                                                     f"{os.readlink(path)!r}){_hint(text_or_path)}")
            raise MissingPathError(_shown(path), f"no such file or directory{_hint(text_or_path)}")
        source = escaped(str(path))
        try:
            text = read_text(path)
        except HloParseError as e:  # not UTF-8, or a NUL: located already; the path shown escaped
            if e.source == source:
                raise
            raise HloParseError(e.msg, e.doc, e.pos, source=source, byte_offset=e.byte_offset) from None
    except FileNotFoundError as e:
        if isinstance(e, MissingPathError):
            raise
        raise UnreadablePathError.from_os_error(path, e) from None  # removed while it was read
    except OSError as e:  # permission denied, a directory named like a file, an I/O error
        raise UnreadablePathError.from_os_error(path, e) from None
    return parse_hlo_text(text, source=source)


def is_hlo_text(s: str) -> bool:
    """Whether ``parse_hlo`` reads the string ``s`` as HLO text (else as a path): see ``parse_hlo``."""
    return "\n" in s or _TEXT_START.match(s) is not None or not s.strip()


def parse_hlo_dump(path: str | os.PathLike[str]) -> list[HloModule]:
    """Parse every post-optimization module of an XLA dump directory, in file-name order."""
    return [parse_hlo_text(read_text(f), source=str(f)) for f in dump_modules(Path(path))]


def dump_modules(path: Path) -> list[Path]:
    """The ``*.after_optimizations.txt`` files of a dump directory, sorted by name."""
    return sorted(p for p in path.iterdir() if p.name.endswith(DUMP_SUFFIX) and p.is_file())


def read_text(path: Path) -> str:
    """Read a file as UTF-8, turning a decode failure into an ``HloParseError`` with its byte offset."""
    data = path.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        prefix = data[: e.start].decode("utf-8")
        raise HloParseError(
            "not UTF-8 text, so not HLO text (a binary file: an .xplane.pb profile, an HLO proto?)",
            prefix, len(prefix), source=str(path), byte_offset=e.start,
        ) from None
    nul = data.find(b"\0")
    if nul >= 0:
        prefix = data[:nul].decode("utf-8")
        raise HloParseError("a NUL byte, so not HLO text (a binary file: an .xplane.pb profile, an HLO proto?)",
                            prefix, len(prefix), source=str(path), byte_offset=nul)
    return text


def _shown(path: Path) -> str:
    """A path as an error message shows it: its first 100 characters when longer than 200, a NUL as ``\\0``."""
    text = str(path)
    if len(text) > 200:
        text = f"{text[:100]}... ({len(text)} characters)"
    return text.replace("\0", "\\0")


def _hint(given: str | os.PathLike[str]) -> str:
    """What a missing path that came as a ``str`` adds to its message: how a ``str`` is read as text."""
    if not isinstance(given, str):
        return ""
    return ("; a str is HLO text only when it holds a line break or starts with 'HloModule' or a computation "
            "header, and a path otherwise")
