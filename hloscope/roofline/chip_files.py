"""Chip files: the TOML format that holds the built-in chips and the user's, read, validated and written.

One format and one reader for every chip hloscope knows:

* the built-in table, ``hloscope/roofline/chips.toml``, shipped as package data (:func:`builtin_chips_file`)
  and read lazily by :func:`hloscope.roofline.chips.builtin_chips`;
* the user's ``chips.toml`` (hand-written overrides and new chips) and ``host.toml`` (written by
  ``hloscope calibrate``) in :func:`config_dir`, read by :func:`load_user_chips`.

Both go through :func:`load_chip_file`, so a built-in chip and a user chip are validated by the same code and
a syntax or value error names the file, the chip, the field (and the line and column for TOML syntax
errors) in the same way. The format is documented in ``docs/chips.md``; in short::

    format_version = 1                    # optional

    [chips.<id>]                          # one table per chip
    base = "<id or alias>"                # optional: start from another chip, override only what is given
    name = "..."
    kind = "gpu"                          # tpu | gpu | cpu | other
    aliases = ["JAX device_kind", ...]
    hbm_bytes_per_s = 3.35e12             # bytes/s
    hbm_capacity_bytes = 80000000000      # bytes (the old key hbm_bytes is still read)
    ...                                   # every other scalar field of ChipSpec

    [chips.<id>.peak_flops_per_s]         # dense FLOP/s by dtype key
    bf16 = 9.895e14

    [chips.<id>.on_chip_memory_bytes]     # bytes by memory name
    [chips.<id>.sources]                  # provenance by field name or "<field>.<key>"

Only the standard library is used (``tomllib`` reads, :func:`chips_to_toml` writes).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hloscope._regex import LazyPattern
from hloscope.roofline.chip_spec import (
    _DEFAULTS,
    _FIELDS,
    _ID_RE,
    _MAPPING_FIELDS,
    _REQUIRED_FIELDS,
    ChipSpec,
    ChipSpecError,
    UnknownChipError,
    _describe,
    _norm,
    _table,
    _text,
    find_chip,
    lookup_tables,
    translate_legacy_keys,
)

if TYPE_CHECKING:
    from importlib.resources.abc import Traversable

__all__ = [
    "BUILTIN_CHIPS_FILE_NAME",
    "CHIPS_FILE_NAME",
    "HOST_FILE_NAME",
    "builtin_chips_file",
    "chips_to_toml",
    "config_dir",
    "load_builtin_chip_file",
    "load_chip_file",
    "load_user_chips",
]

#: The user's hand-written chip file, inside :func:`config_dir`.
CHIPS_FILE_NAME = "chips.toml"
#: The calibrated host chip, inside :func:`config_dir` (written by ``hloscope calibrate``).
HOST_FILE_NAME = "host.toml"
#: The built-in chip table, package data of ``hloscope.roofline`` (same format as a user chip file).
BUILTIN_CHIPS_FILE_NAME = "chips.toml"


def builtin_chips_file() -> Traversable:
    """The packaged built-in chip table, ``hloscope/roofline/chips.toml``.

    Returns:
        An :mod:`importlib.resources` handle (a :class:`pathlib.Path` for an ordinary install, editable or
        not), readable with ``read_bytes()`` and accepted by :func:`load_chip_file`.
    """
    beside = Path(__file__).with_name(BUILTIN_CHIPS_FILE_NAME)
    if beside.is_file():  # (an install on disk: the path importlib.resources gives, without its ~9 ms import)
        return beside
    from importlib.resources import files  # lazily: not needed unless chips are looked up

    return files("hloscope.roofline").joinpath(BUILTIN_CHIPS_FILE_NAME)


def config_dir() -> Path:
    """hloscope's configuration directory.

    Returns:
        ``$HLOSCOPE_CONFIG_DIR`` if set, else ``$XDG_CONFIG_HOME/hloscope`` if ``XDG_CONFIG_HOME`` is set,
        else ``~/.config/hloscope``. The directory need not exist.
    """
    explicit = os.environ.get("HLOSCOPE_CONFIG_DIR")
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_CONFIG_HOME")
    if xdg:
        return Path(xdg).expanduser() / "hloscope"
    return Path.home() / ".config" / "hloscope"


_TOML_POS_RE = LazyPattern(r"at line (\d+), column (\d+)")
_HEADER_RE = LazyPattern(
    r"^\s*\[\s*chips\s*\.\s*(\"[^\"]*\"|'[^']*'|[A-Za-z0-9_-]+)\s*(?:\.\s*([A-Za-z0-9_-]+)\s*)?\]"
)
_KEY_RE = LazyPattern(r"^\s*(\"[^\"]*\"|'[^']*'|[A-Za-z0-9_-]+)\s*=")


def _locate_toml_error(text: str, line: int | None) -> tuple[str | None, str | None]:
    """Best-effort (chip, field) for a TOML syntax error at ``line``: the enclosing [chips.<id>] table
    and the key being assigned on that line."""
    if line is None:
        return None, None
    chip: str | None = None
    sub: str | None = None
    lines = text.splitlines()
    for raw in lines[: max(line - 1, 0)]:
        m = _HEADER_RE.match(raw)
        if m:
            chip, sub = m.group(1).strip("\"'").lower(), m.group(2)
        elif re.match(r"^\s*\[", raw):
            chip, sub = None, None
    fld: str | None = None
    if 0 < line <= len(lines):
        here = lines[line - 1]
        m = _HEADER_RE.match(here)
        if m:
            return m.group(1).strip("\"'").lower(), m.group(2)
        m = _KEY_RE.match(here)
        if m:
            key = m.group(1).strip("\"'")
            fld = f"{sub}.{key}" if sub else key
    return chip, fld


def load_chip_file(
    path: str | os.PathLike[str] | Traversable,
    *,
    bases: Mapping[str, ChipSpec] | None = None,
    with_builtins: bool = True,
) -> dict[str, ChipSpec]:
    """Read and validate a TOML chip file (format: ``docs/chips.md``): a user's, or the built-in table.

    One ``[chips.<id>]`` table per chip. ``base = "<id or alias>"`` starts from another chip (one in
    ``bases``, a built-in, or one earlier or later in the same file) and overrides only the fields given;
    mapping fields (``peak_flops_per_s``, ``on_chip_memory_bytes``, ``sources``) are merged entry by entry. A
    table whose id equals a known chip's id uses that chip as its base implicitly. Ids are case-insensitive
    and stored in lower case. Fields set here without an entry in ``sources`` get the source
    ``"user chip file <path>"``. The old key ``hbm_bytes`` is read as ``hbm_capacity_bytes`` (also in
    ``sources``).

    Args:
        path: the TOML file (a path, or an :mod:`importlib.resources` handle such as
            :func:`builtin_chips_file`).
        bases: chips that ``base`` may name (e.g. the calibrated host), searched before the built-ins.
        with_builtins: whether the built-in chips may serve as bases (explicit or implicit). False reads the
            file on its own, as the built-in table itself is read.

    Returns:
        The file's chips by id, in file order.

    Raises:
        ChipSpecError: unreadable file, invalid TOML (the message carries tomllib's line and column), an
            unknown or missing required field, a non-numeric, non-positive or non-finite value, an unknown
            base, or a cycle of bases. The error names the file, the chip and the field.
    """
    p, _, text = _read_chip_file(path)
    return _chips_from_document(_toml_document(text, p), p, bases, with_builtins)


def load_builtin_chip_file() -> dict[str, ChipSpec]:
    """``load_chip_file(builtin_chips_file(), with_builtins=False)``, its TOML parsed once per version of the
    file: the parsed document is kept in the user's cache directory for exactly the file's bytes
    (:mod:`hloscope._cache`), which saves each command-line process ~10 ms of ``tomllib``. The chips are
    validated from that document by the same code every time.

    Raises:
        ChipSpecError: as ``load_chip_file`` (a broken install).
    """
    from hloscope import _cache

    p, data, text = _read_chip_file(builtin_chips_file())
    doc = _cache.load("chips-toml", data)
    if not isinstance(doc, dict):
        doc = _toml_document(text, p)
        _cache.store("chips-toml", data, doc)
    return _chips_from_document(doc, p, None, False)


def _read_chip_file(path: str | os.PathLike[str] | Traversable) -> tuple[Path, bytes, str]:
    """The path to name in errors, the bytes and the text of a chip file.

    Raises:
        ChipSpecError: unreadable, or not UTF-8."""
    if isinstance(path, (str, os.PathLike)):
        p = Path(path)
        read_bytes = p.read_bytes
    else:  # an importlib.resources Traversable that is not a filesystem path (e.g. inside a zip)
        p = Path(str(path))
        read_bytes = path.read_bytes
    try:
        data = read_bytes()
    except OSError as err:
        raise ChipSpecError(f"cannot read chip file: {err.strerror or err}", path=p) from err
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ChipSpecError(
            f"chip file is not UTF-8 text ({err.reason} at byte {err.start})", path=p
        ) from err
    return p, data, text


def _toml_document(text: str, p: Path) -> dict[str, Any]:
    """``tomllib.loads(text)``; raises ChipSpecError naming ``p``, the line, column, chip and field."""
    import tomllib  # lazily: a cached built-in table needs none (~3 ms of a report's imports)

    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        m = _TOML_POS_RE.search(str(err))
        line, column = (int(m.group(1)), int(m.group(2))) if m else (None, None)
        chip, fld = _locate_toml_error(text, line)
        raise ChipSpecError(
            f"invalid TOML: {err}", path=p, chip=chip, field=fld, line=line, column=column
        ) from err


def _chips_from_document(
    doc: Mapping[str, Any], path: Path, bases: Mapping[str, ChipSpec] | None, with_builtins: bool
) -> dict[str, ChipSpec]:
    for key in doc:
        if key not in ("chips", "format_version"):
            raise ChipSpecError(
                f"unknown top-level key {key!r}; a chip file holds [chips.<id>] tables", path=path, field=key
            )
    if "format_version" in doc and doc["format_version"] != 1:
        raise ChipSpecError(f"unsupported format_version {doc['format_version']!r}; expected 1", path=path,
                            field="format_version")
    raw_chips = doc.get("chips", {})
    if not isinstance(raw_chips, Mapping):
        raise ChipSpecError("'chips' must be a table of [chips.<id>] tables", path=path, field="chips")

    known = dict(bases) if bases is not None else {}
    search = [lookup_tables(known)] if known else []
    builtin: Mapping[str, ChipSpec] = {}
    if with_builtins:
        from hloscope.roofline import chips as _chips  # lazily: chips.py imports this module

        builtin = _chips.builtin_chips()
        search.append(_chips.builtin_lookup_tables())
    # An id that matches a known chip's id (ignoring case and punctuation) overrides that chip: it takes
    # the chip's canonical id and uses it as its implicit base.
    canonical = {_norm(chip.id): chip for chip in (*builtin.values(), *known.values())}
    tables: dict[str, Mapping[str, Any]] = {}
    seen: dict[str, str] = {}
    for raw_id, table in raw_chips.items():
        if not _ID_RE.match(raw_id):
            raise ChipSpecError(
                f"chip id must match {_ID_RE.pattern} (letters, digits, '-' and '_')",
                path=path, chip=raw_id, field="id",
            )
        match = canonical.get(_norm(raw_id))
        chip_id = match.id if match is not None else raw_id.lower()
        if _norm(chip_id) in seen:
            raise ChipSpecError(
                f"chip defined twice (as {seen[_norm(chip_id)]!r} and {raw_id!r}; "
                "ids ignore case and punctuation)",
                path=path, chip=chip_id,
            )
        seen[_norm(chip_id)] = raw_id
        if not isinstance(table, Mapping):
            raise ChipSpecError(f"must be a table, got {_describe(table)}", path=path, chip=chip_id)
        tables[chip_id] = table

    resolved: dict[str, ChipSpec] = {}
    in_progress: list[str] = []

    def resolve(chip_id: str) -> ChipSpec:
        if chip_id in resolved:
            return resolved[chip_id]
        if chip_id in in_progress:
            cycle = " -> ".join([*in_progress[in_progress.index(chip_id):], chip_id])
            raise ChipSpecError(f"cycle of bases: {cycle}", path=path, chip=chip_id, field="base")
        in_progress.append(chip_id)
        table = tables[chip_id]
        base: ChipSpec | None = None
        if "base" in table:
            base_name = table["base"]
            if not isinstance(base_name, str) or not base_name.strip():
                raise ChipSpecError(f"must be a chip id or alias, got {_describe(base_name)}", path=path,
                                    chip=chip_id, field="base")
            local = next((cid for cid in tables if _norm(cid) == _norm(base_name)), None)
            if local is not None and local != chip_id:
                base = resolve(local)
            else:
                try:
                    base = find_chip(base_name, search)
                except UnknownChipError as err:
                    raise ChipSpecError(str(err), path=path, chip=chip_id, field="base") from None
        else:
            base = canonical.get(_norm(chip_id))
        try:
            spec = _spec_from_table(chip_id, table, base, path)
        except ChipSpecError as err:
            raise err.located(path=path, chip=chip_id) from None
        in_progress.pop()
        resolved[chip_id] = spec
        return spec

    for chip_id in tables:
        resolve(chip_id)
    return {chip_id: resolved[chip_id] for chip_id in tables}


_SCALAR_FIELDS = tuple(f for f in _FIELDS if f not in (*_MAPPING_FIELDS, "id", "name", "kind", "aliases"))


def _spec_from_table(chip_id: str, table: Mapping[str, Any], base: ChipSpec | None, path: Path) -> ChipSpec:
    """One ``[chips.<id>]`` table (old key names already accepted) on top of ``base`` -> a validated ChipSpec."""
    table, renamed = translate_legacy_keys(table)
    try:
        return _spec_from_current_table(chip_id, table, base, path)
    except ChipSpecError as err:
        if err.field not in renamed:
            raise
        # Name the key the file actually uses.
        raise ChipSpecError(f"{err.problem} (old name of {err.field!r})", chip=err.chip,
                            field=renamed[err.field]) from None


def _spec_from_current_table(
    chip_id: str, table: Mapping[str, Any], base: ChipSpec | None, path: Path
) -> ChipSpec:
    allowed = (set(_FIELDS) - {"id"}) | {"base"}
    for key in table:
        if key not in allowed:
            raise ChipSpecError(
                f"unknown field; known fields: base, {', '.join(f for f in _FIELDS if f != 'id')}", field=key
            )
    default_source = f"user chip file {path}"
    same_chip = base is not None and base.id == chip_id

    values: dict[str, Any] = {"id": chip_id}
    if "name" in table:
        values["name"] = table["name"]
    elif base is None:
        values["name"] = chip_id
    else:
        values["name"] = base.name if same_chip else f"{base.name} ({chip_id})"
    values["kind"] = table.get("kind", base.kind if base else _DEFAULTS["kind"])

    if "aliases" in table:
        raw_aliases = table["aliases"]
        if not isinstance(raw_aliases, list):
            raise ChipSpecError(f"must be a list of strings, got {_describe(raw_aliases)}", field="aliases")
        raw_aliases = [_text(a, "aliases") for a in raw_aliases]
        inherited = list(base.aliases) if same_chip else []
        values["aliases"] = tuple(dict.fromkeys([*inherited, *raw_aliases]))
    else:
        values["aliases"] = base.aliases if same_chip else ()

    # A value gets the default source "user chip file <path>" only when the file changes it (relative to
    # the base, or to the default when there is no base) and gives no source of its own for it.
    changed: list[str] = []
    for name in ("peak_flops_per_s", "on_chip_memory_bytes"):
        merged = dict(getattr(base, name)) if base else {}
        if name in table:
            for key, value in _table(table[name], name).items():
                if merged.get(key, None) != value or key not in merged:
                    changed.append(f"{name}.{key}")
                merged[key] = value
        elif base is None and name in _REQUIRED_FIELDS:
            raise ChipSpecError("missing required field", field=name)
        values[name] = merged
    for name in _SCALAR_FIELDS:
        previous = getattr(base, name) if base is not None else _DEFAULTS.get(name)
        if name in table:
            values[name] = table[name]
            if table[name] != previous or type(table[name]) is not type(previous):
                changed.append(name)
        elif base is not None:
            values[name] = previous
        elif name in _REQUIRED_FIELDS:
            raise ChipSpecError("missing required field", field=name)
        else:
            values[name] = previous
    if "name" in table and (base is None or table["name"] != base.name):
        changed.append("name")
    if "kind" in table and table["kind"] != (base.kind if base else _DEFAULTS["kind"]):
        changed.append("kind")
    if "aliases" in table and values["aliases"] != (base.aliases if same_chip else ()):
        changed.append("aliases")

    given = dict(_table(table["sources"], "sources")) if "sources" in table else {}
    sources: dict[str, str] = dict(base.sources) if base else {}
    for key in changed:
        sources.pop(key, None)  # the base's provenance no longer applies
        if key not in given and key.split(".")[0] not in given:
            sources[key] = default_source
    sources.update(given)
    values["sources"] = sources
    return ChipSpec(**values)


def load_user_chips(directory: str | os.PathLike[str] | None = None) -> dict[str, ChipSpec]:
    """The user's chips: ``host.toml`` (written by ``hloscope calibrate``) then ``chips.toml``.

    ``chips.toml`` may use the host chip as a ``base`` and overrides it on an id clash. Missing files are
    skipped.

    Args:
        directory: where to look; defaults to :func:`config_dir`.

    Returns:
        Chips by id (empty if neither file exists).

    Raises:
        ChipSpecError: a file exists but is invalid.
    """
    root = Path(directory) if directory is not None else config_dir()
    chips: dict[str, ChipSpec] = {}
    host = root / HOST_FILE_NAME
    if host.is_file():
        chips.update(load_chip_file(host))
    user = root / CHIPS_FILE_NAME
    if user.is_file():
        chips.update(load_chip_file(user, bases=chips))
    return chips


# ---- writing -------------------------------------------------------------------------------------------

_BARE_KEY_RE = LazyPattern(r"^[A-Za-z0-9_-]+$")


def _toml_key(key: str) -> str:
    return key if _BARE_KEY_RE.match(key) else _toml_str(key)


def _toml_str(value: str) -> str:
    out = ['"']
    for ch in value:
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def _toml_float(value: float) -> str:
    """Shortest round-tripping TOML float; scientific notation from 1e6 up (``1.97e+14``)."""
    text = repr(float(value))
    if abs(value) >= 1e6 and "e" not in text:
        for digits in range(17):
            candidate = f"{value:.{digits}e}"
            if float(candidate) == value:
                return candidate
    return text


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _toml_float(value)
    if isinstance(value, str):
        return _toml_str(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    raise TypeError(f"cannot write {type(value).__name__} to TOML")


def chips_to_toml(chips: Iterable[ChipSpec] | Mapping[str, ChipSpec], *, header: str | None = None) -> str:
    """Render chips in the chip-file format that :func:`load_chip_file` reads back to equal ChipSpecs.

    Args:
        chips: the chips (a mapping's values are used).
        header: optional comment text for the top of the file (one ``#`` line per text line).

    Returns:
        TOML text.
    """
    specs = list(chips.values()) if isinstance(chips, Mapping) else list(chips)
    lines: list[str] = []
    if header:
        lines.extend(f"# {line}".rstrip() for line in header.splitlines())
    lines.append("format_version = 1")
    for chip in specs:
        prefix = f"chips.{_toml_key(chip.id)}"
        lines.append("")
        lines.append(f"[{prefix}]")
        for name in ("name", "kind", "aliases", *_SCALAR_FIELDS):
            value = getattr(chip, name)
            if value is not None:
                lines.append(f"{name} = {_toml_value(value)}")
        for name in _MAPPING_FIELDS:
            mapping = getattr(chip, name)
            if not mapping:
                continue
            lines.append("")
            lines.append(f"[{prefix}.{name}]")
            for key, value in mapping.items():
                lines.append(f"{_toml_key(key)} = {_toml_value(value)}")
    return "\n".join(lines) + "\n"
