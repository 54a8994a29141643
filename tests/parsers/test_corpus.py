"""hloscope's HLO text reader on every HLO text of the public corpus, judged by XLA's own parser.

Inputs: ``<repo>/../shared/corpus`` (skipped when absent; see its README.md): every file in ``hlo_tpu``,
``hlo_gpu``, ``hlo_cpu`` and ``hlo_generic``.

* A text file that XLA's parser accepts (``PARSE_CHECK.tsv``, column ``xla_parser_jaxlib_0.10.2`` = ``OK``) must
  parse, and every instruction's attributes must decode (they are decoded lazily, on first access).
* A JSONL file holds one module per line (field ``text``, mostly raw strings of XLA's C++ tests); the records
  XLA accepts are listed in ``data/corpus_xla_ok.txt`` (written by ``data/make_corpus_xla_ok.py``) and must
  parse and decode the same way.
* Anything else -- texts XLA rejects (``FAIL``, or ``CRASH`` where its parser aborts), files holding several
  modules separated by ``// -----`` (XLA's verdict is for the whole file, as one text; each part is also read
  after ``split_modules``), files that are not HLO (``N/A(not HLO text)``: buffer assignments, flag files) --
  may parse or raise ``HloParseError``, and nothing else.

The biggest texts (several MB each) are marked ``slow``; they still run by default.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from hloscope.hlo import HloModule
from hloscope.parsers import HloParseError, parse_hlo_text
from hloscope.parsers._hlo_text import split_modules

CORPUS = Path(__file__).resolve().parents[2].parent / "shared" / "corpus"
KINDS = ("hlo_tpu", "hlo_gpu", "hlo_cpu", "hlo_generic")
XLA_OK_LIST = Path(__file__).resolve().parent / "data" / "corpus_xla_ok.txt"
SLOW_BYTES = 2_000_000


def _files() -> list[Path]:
    if not CORPUS.is_dir():
        return []
    return sorted(p for kind in KINDS if (CORPUS / kind).is_dir() for p in (CORPUS / kind).iterdir() if p.is_file())


def _param(p: Path):
    marks = [pytest.mark.slow] if p.stat().st_size > SLOW_BYTES else []
    return pytest.param(p, id=f"{p.parent.name}/{p.name}", marks=marks)


FILES = _files()
TEXT_FILES = [_param(p) for p in FILES if p.suffix != ".jsonl"]
JSONL_FILES = [_param(p) for p in FILES if p.suffix == ".jsonl"]


def _xla_verdicts() -> dict[str, str]:
    """File name -> XLA's verdict (``OK``, ``FAIL``, ``CRASH``, ``N/A(not HLO text)``; for a JSONL file the
    counts ``FAIL=5 OK=241``)."""
    with open(CORPUS / "PARSE_CHECK.tsv", newline="", encoding="utf-8") as f:
        return {row["file"]: row["xla_parser_jaxlib_0.10.2"] for row in csv.DictReader(f, delimiter="\t")}


def _xla_ok_records() -> dict[str, set[int]]:
    out: dict[str, set[int]] = {}
    for line in XLA_OK_LIST.read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        name, _, ranges = line.partition(": ")
        lines = out.setdefault(name, set())
        for part in ranges.split():
            a, _, b = part.partition("-")
            lines.update(range(int(a), int(b or a) + 1))
    return out


def _decode_all(module: HloModule) -> None:
    """Read every lazily decoded part of every instruction (a malformed value raises HloParseError here)."""
    for _, inst in module.instructions():
        inst.attributes
        inst.metadata
        inst.frontend_attributes
        inst.backend_config


def _parse_or_parse_error(text: str, source: str) -> str:
    """Parse ``text``; return "" when it parsed (and decoded), the HloParseError message when not. Any other
    exception propagates and fails the test."""
    try:
        _decode_all(parse_hlo_text(text, source))
    except HloParseError as e:
        return e.msg
    return ""


@pytest.fixture(scope="module")
def verdicts(corpus_dir: Path) -> dict[str, str]:
    return _xla_verdicts()


@pytest.fixture(scope="module")
def xla_ok_records(corpus_dir: Path) -> dict[str, set[int]]:
    return _xla_ok_records()


@pytest.mark.parametrize("path", TEXT_FILES)
def test_text_file(path: Path, verdicts: dict[str, str]) -> None:
    verdict = verdicts.get(path.name, "?")
    text = path.read_text(encoding="utf-8", errors="replace")
    source = f"{path.parent.name}/{path.name}"
    if verdict == "OK":
        _decode_all(parse_hlo_text(text, source))  # XLA reads it: so must hloscope
        return
    # XLA rejects it, or it is not HLO text: HloParseError or a module, nothing else.
    _parse_or_parse_error(text, source)
    if "// -----" in text:
        for k, part in enumerate(split_modules(text)):
            _parse_or_parse_error(part, f"{source} (module {k})")


@pytest.mark.parametrize("path", JSONL_FILES)
def test_jsonl_records(path: Path, xla_ok_records: dict[str, set[int]]) -> None:
    ok = xla_ok_records.get(path.name, set())
    failures = []
    n_lines = 0
    with open(path, encoding="utf-8") as f:
        for line_no, line in enumerate(f):
            n_lines += 1
            text = json.loads(line)["text"]
            msg = _parse_or_parse_error(text, f"{path.name}:{line_no}")
            if msg and line_no in ok:
                failures.append(f"{path.name}:{line_no}: {msg}")
    assert not [n for n in ok if n >= n_lines], "data/corpus_xla_ok.txt lists records this file lacks: regenerate it"
    assert not failures, f"{len(failures)} records XLA accepts do not parse:\n" + "\n".join(failures[:20])


def test_xla_ok_list_covers_the_corpus(corpus_dir: Path, xla_ok_records: dict[str, set[int]]) -> None:
    """The list names only JSONL files of the corpus, and agrees with PARSE_CHECK.tsv's per-file counts."""
    verdicts = _xla_verdicts()
    jsonl = {p.name for p in FILES if p.suffix == ".jsonl"}
    assert set(xla_ok_records) <= jsonl
    for name in jsonl:
        counts = dict(part.split("=") for part in verdicts.get(name, "").split() if "=" in part)
        if "OK" in counts:
            assert len(xla_ok_records.get(name, ())) == int(counts["OK"]), name
