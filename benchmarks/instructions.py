"""Instructions executed by one steady-state ``hloscope.analyze(text, chip=...)`` with its two DataFrames, counted by
``valgrind --tool=callgrind``: a measure of the end-to-end analysis that does not move from run to run, for
judging a change on a machine whose wall times do (issue #16; benchmarks/README.md, stop 40).

Usage (from the repository root; needs ``valgrind`` on PATH)::

    python benchmarks/instructions.py                   # issue #16's corpus modules
    python benchmarks/instructions.py --hlo A.hlo B.hlo
    python benchmarks/instructions.py --tree ../other   # another checkout of hloscope (its C extensions built)

Each module runs in a child under callgrind that imports hloscope, runs one analyze untimed (imports, caches),
then the counted one: collection is on only inside ``operator.call`` (``--toggle-collect=_operator_call``),
which hloscope itself never calls. Counts are in millions of instructions (``Ir``); callgrind runs ~50x slower
than the program (~1-2 minutes per corpus module).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks.analyze import corpus_files  # noqa: E402

_CHILD = """
import operator, os, sys
os.environ.setdefault("JAX_PLATFORMS", "cpu")
import hloscope
text = open(sys.argv[1]).read()

def run():
    report = hloscope.analyze(text, chip=sys.argv[2])
    report.ops, report.modules
    return report

run()
operator.call(run)
"""


def instructions(path: Path, chip: str, tree: Path) -> int:
    """Instructions callgrind counts in one steady-state analyze of the HLO text at ``path`` with hloscope from
    ``tree``. Raises RuntimeError when callgrind reports no count."""
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(_CHILD)
    try:
        env = dict(os.environ, PYTHONPATH=str(tree))
        out = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null",
                              "--toggle-collect=_operator_call", sys.executable, f.name, str(path), chip],
                             capture_output=True, text=True, env=env, cwd=tree)
    finally:
        os.unlink(f.name)
    m = re.search(r"Collected : (\d+)", out.stderr)
    if m is None:
        raise RuntimeError(f"callgrind gave no count for {path}:\n{out.stderr[-2000:]}")
    return int(m.group(1))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hlo", nargs="*", type=Path, help="HLO text files (default: issue #16's corpus modules)")
    ap.add_argument("--corpus", type=Path, default=REPO.parent / "shared" / "corpus")
    ap.add_argument("--chip", default="tpu-v5e")
    ap.add_argument("--tree", type=Path, default=REPO, help="the hloscope checkout to count")
    args = ap.parse_args(argv)
    if shutil.which("valgrind") is None:
        print("instructions.py: valgrind is not on PATH", file=sys.stderr)
        return 2
    paths = args.hlo or corpus_files(args.corpus)
    if not paths:
        print(f"instructions.py: no HLO files (corpus {args.corpus} absent?)", file=sys.stderr)
        return 2
    for path in paths:
        count = instructions(path, args.chip, args.tree.resolve())
        print(f"{path.name[-45:]:45s} {count / 1e6:10.1f} M instructions")
    return 0


if __name__ == "__main__":
    sys.exit(main())
