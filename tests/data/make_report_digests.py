"""Write ``report_digests.json``: a digest of each section of the JSON report of every fixture (and corpus
input), for ``tests/test_report_identity.py``.

Run from the repository root, on the commit whose outputs are the reference::

    python tests/data/make_report_digests.py

The inputs and chips are ``benchmarks/report_snapshot.py``'s (every fixture HLO, the dump dir, the three
profiles; the corpus's TPU Chrome traces and MI300X XSpaces when ``../shared/corpus`` is present). Each report is
``hloscope.analyze(path, chip=chip).to_json()``, with the trace files of ``coverage.files`` by name only (where
the checkout lies is not a result); the digest is the SHA-256 of each top-level key's canonical JSON, and for ``ops`` of each column.
Regenerate only when a change of the numbers is meant, and say so in the commit.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OUT = Path(__file__).with_name("report_digests.json")


def report_digests(path: str, chip: str) -> dict[str, str]:
    """Section -> SHA-256 hex digest (first 16 characters) of the report of ``path`` on ``chip``."""
    import hloscope

    doc = json.loads(hloscope.analyze(path, chip=chip).to_json())
    coverage = doc.get("coverage") or {}
    if "files" in coverage:  # (where the checkout is: not a result)
        coverage["files"] = [Path(f).name for f in coverage["files"]]
    out = {}
    for key, value in sorted(doc.items()):
        if key == "ops":
            columns = sorted({c for row in value for c in row})
            for c in columns:
                out[f"ops.{c}"] = _digest([row.get(c) for row in value])
            out["ops.rows"] = _digest(len(value))
        else:
            out[key] = _digest(value)
    return out


def _digest(value) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()[:16]


def main() -> int:
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    sys.path.insert(0, str(ROOT))
    from benchmarks.report_snapshot import inputs

    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=ROOT).stdout.strip()
    doc = {"commit": commit, "inputs": {}}
    for label, path, chip in inputs():
        if not Path(path).exists():
            continue
        rel = os.path.relpath(path, ROOT)
        doc["inputs"][rel] = {"chip": chip, "digests": report_digests(path, chip)}
        print(label, flush=True)
    OUT.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
