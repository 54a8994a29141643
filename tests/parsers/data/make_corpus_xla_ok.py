"""Regenerate ``corpus_xla_ok.txt``: the JSONL corpus records that XLA's own HLO parser accepts.

Usage (from the repository root; takes a few minutes)::

    JAX_PLATFORMS=cpu python tests/parsers/data/make_corpus_xla_ok.py [CORPUS_DIR]

``CORPUS_DIR`` defaults to ``<repo>/../shared/corpus`` (the public corpus; see its README.md). Every record of
every ``{hlo_tpu,hlo_gpu,hlo_cpu,hlo_generic}/*.jsonl`` file (one HLO module per line, field ``text``) is fed to
``jax._src.lib.xla_client.hlo.hlo_module_from_text``. Some records make XLA's parser CHECK-abort the process,
so the records are parsed in a child process that is restarted after the record it died on (that record
counts as rejected). The output lists ``<file name>:<0-based line>`` of each accepted record, one per line,
after ``#`` comment lines naming the corpus and the jaxlib version, as one line per JSONL file:
``<file name>: <ranges>`` with ranges of 0-based line numbers such as ``0-4 6 9-120``. ``tests/parsers/
test_corpus.py`` requires hloscope to parse these (and never to raise anything but ``HloParseError`` on others).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT_CORPUS = HERE.parents[2].parent / "shared" / "corpus"
OUT = HERE / "corpus_xla_ok.txt"
KINDS = ("hlo_tpu", "hlo_gpu", "hlo_cpu", "hlo_generic")


def records(corpus: Path) -> list[tuple[str, str, int]]:
    out = []
    for kind in KINDS:
        for f in sorted((corpus / kind).glob("*.jsonl")):
            with open(f, encoding="utf-8") as fh:
                out.extend((kind, f.name, ln) for ln, _ in enumerate(fh))
    return out


def child(corpus: Path, start: int, verdicts: Path) -> None:
    """Parse records from ``start`` on, appending ``index<TAB>OK|FAIL`` lines as it goes."""
    from jax._src.lib import xla_client as xc

    recs = records(corpus)
    lines: dict[str, list[str]] = {}
    with open(verdicts, "a") as w:
        for idx in range(start, len(recs)):
            kind, name, ln = recs[idx]
            if name not in lines:
                lines[name] = (corpus / kind / name).read_text(encoding="utf-8").split("\n")
            text = json.loads(lines[name][ln])["text"]
            try:
                xc.hlo.hlo_module_from_text(text)
                verdict = "OK"
            except Exception:  # noqa: BLE001 - any rejection is a verdict
                verdict = "FAIL"
            w.write(f"{idx}\t{verdict}\n")
            w.flush()


def _ranges(numbers: list[int]) -> str:
    """``[0, 1, 2, 5, 7, 8]`` -> ``"0-2 5 7-8"``."""
    out = []
    start = prev = numbers[0]
    for n in numbers[1:] + [None]:
        if n is not None and n == prev + 1:
            prev = n
            continue
        out.append(str(start) if start == prev else f"{start}-{prev}")
        if n is not None:
            start = prev = n
    return " ".join(out)


def read_ok(path: Path = OUT) -> set[tuple[str, int]]:
    """The (file name, line) pairs listed in ``path``."""
    out = set()
    for line in path.read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        name, _, ranges = line.partition(": ")
        for part in ranges.split():
            a, _, b = part.partition("-")
            out.update((name, n) for n in range(int(a), int(b or a) + 1))
    return out


def main() -> int:
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        child(Path(sys.argv[2]), int(sys.argv[3]), Path(sys.argv[4]))
        return 0
    corpus = Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_CORPUS
    recs = records(corpus)
    verdicts = OUT.with_suffix(".partial")
    verdicts.write_text("")
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    start = 0
    while start < len(recs):
        subprocess.run([sys.executable, __file__, "--child", str(corpus), str(start), str(verdicts)], env=env,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        done = [line.split("\t") for line in verdicts.read_text().splitlines()]
        last = int(done[-1][0]) if done else start - 1
        if last + 1 < len(recs):  # the child died on record last + 1: XLA's parser aborted on it
            with open(verdicts, "a") as w:
                w.write(f"{last + 1}\tCRASH\n")
        start = max(start, last + 2)
    verdict = {int(i): v for i, v in (line.split("\t") for line in verdicts.read_text().splitlines())}
    verdicts.unlink()
    import jaxlib

    ok: dict[str, list[int]] = {}
    for i in sorted(verdict):
        if verdict[i] == "OK":
            ok.setdefault(recs[i][1], []).append(recs[i][2])
    n_ok = sum(len(v) for v in ok.values())
    header = [
        "# JSONL corpus records XLA's HLO parser accepts (xla_client.hlo.hlo_module_from_text),",
        f"# jaxlib {jaxlib.__version__}; corpus: <repo>/../shared/corpus ({len(recs)} records, {n_ok} accepted).",
        "# Regenerate: JAX_PLATFORMS=cpu python tests/parsers/data/make_corpus_xla_ok.py",
        "# <jsonl file name>: <0-based line numbers, as ranges a-b (inclusive) and single numbers>",
    ]
    OUT.write_text("\n".join(header + [f"{name}: {_ranges(lines)}" for name, lines in ok.items()]) + "\n")
    print(f"{OUT}: {n_ok} of {len(recs)} records accepted "
          f"({sum(v == 'CRASH' for v in verdict.values())} crashed XLA's parser)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
