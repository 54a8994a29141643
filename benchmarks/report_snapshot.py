"""Before/after check of a refactor: every fixture's report JSON, written once and compared field by field.

Usage (from the repository root)::

    python benchmarks/report_snapshot.py write DIR        # one JSON per input under DIR
    python benchmarks/report_snapshot.py compare OLD NEW  # what changed, input by input, field by field

The inputs are every real XLA output the repository and the shared corpus hold: ``fixtures/hlo/*.hlo.txt``
(scored against the chip named by the file's prefix; CPU HLO against ``h100`` so that no host calibration
enters), the dump dir, the three profiles, the corpus's TPU Chrome traces (``tpu-v6e``) and MI300X XSpaces
(``h100``, for want of an AMD chip). Each report is made by ``hloscope report INPUT --chip C --format json``
in a child process, as a user runs it; a failure is recorded as ``{"error": stderr}``.

``compare`` matches modules by name and ops by ``(module, computation, instruction)`` and prints, per input,
the columns whose values moved (relative 1e-9), the columns and keys that appeared or vanished, and the
coverage/notes changes. It exits 0 either way: the point is a list to read, not a verdict.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT.parent / "shared" / "corpus"


def inputs() -> list[tuple[str, str, str]]:
    """``(label, path, chip)`` of every input."""
    out = []
    for f in sorted((ROOT / "fixtures" / "hlo").glob("*.hlo.txt")):
        prefix = f.name.split("_")[0]
        chip = {"cpu": "h100", "gpu-h100": "h100"}.get(prefix, prefix)
        out.append((f.name, str(f), chip))
    out.append(("dump/cpu_small", str(ROOT / "fixtures" / "dump" / "cpu_small"), "h100"))
    for name in ("cpu_train_step", "gpu_mlp_train", "gpu_mlp_train_nocb"):
        out.append((f"profile/{name}", str(ROOT / "fixtures" / "profile" / name), "h100"))
    for f in sorted((CORPUS / "trace_json").glob("*.trace.json.gz")):
        out.append((f"corpus/{f.name[-40:]}", str(f), "tpu-v6e"))
    for f in sorted((CORPUS / "xplane").glob("*TraceLens*.xplane.pb")):
        out.append((f"corpus/{f.name[-50:]}", str(f), "h100"))
    return out


def write(directory: Path) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for label, path, chip in inputs():
        proc = subprocess.run([sys.executable, "-m", "hloscope", "report", path, "--chip", chip, "--format", "json"],
                              capture_output=True, text=True, cwd=ROOT)
        doc = json.loads(proc.stdout) if proc.returncode == 0 else {"error": proc.stderr.strip()[-2000:]}
        (directory / (label.replace("/", "__") + ".json")).write_text(json.dumps(doc, indent=1, sort_keys=True))
        print(f"{label}: {'ok' if proc.returncode == 0 else 'error ' + str(proc.returncode)}")


def _moved(a, b) -> bool:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        if math.isnan(a) and math.isnan(b):
            return False
        return abs(a - b) > 1e-9 * max(abs(a), abs(b), 1e-300)
    return a != b


def _rows(doc: dict, key: str, ident) -> dict:
    return {ident(r): r for r in doc.get(key) or []}


def compare(old_dir: Path, new_dir: Path) -> None:
    for f in sorted(old_dir.glob("*.json")):
        g = new_dir / f.name
        a = json.loads(f.read_text())
        b = json.loads(g.read_text()) if g.exists() else {"error": "missing"}
        lines = []
        if "error" in a or "error" in b:
            if a.get("error") != b.get("error"):
                lines.append(f"  error: {str(a.get('error'))[:120]!r} -> {str(b.get('error'))[:120]!r}")
        else:
            for key in sorted(set(a) | set(b)):
                if key in ("ops", "modules"):
                    continue
                if _moved(a.get(key), b.get(key)):
                    lines.append(f"  {key}: changed")
            for table, ident in (("modules", lambda r: r.get("name")),
                                 ("ops", lambda r: (r.get("module"), r.get("computation"), r.get("instruction")))):
                ra, rb = _rows(a, table, ident), _rows(b, table, ident)
                if set(ra) != set(rb):
                    lines.append(f"  {table}: {len(set(ra) - set(rb))} rows vanished, {len(set(rb) - set(ra))} appeared")
                cols_a = set().union(*(r.keys() for r in ra.values())) if ra else set()
                cols_b = set().union(*(r.keys() for r in rb.values())) if rb else set()
                if cols_a - cols_b:
                    lines.append(f"  {table}: columns gone {sorted(cols_a - cols_b)}")
                if cols_b - cols_a:
                    lines.append(f"  {table}: columns new {sorted(cols_b - cols_a)}")
                moved: dict[str, int] = {}
                for k in set(ra) & set(rb):
                    for col in cols_a & cols_b:
                        if _moved(ra[k].get(col), rb[k].get(col)):
                            moved[col] = moved.get(col, 0) + 1
                for col, n in sorted(moved.items()):
                    lines.append(f"  {table}.{col}: {n} of {len(set(ra) & set(rb))} rows moved")
        print(f"{f.stem}: {'unchanged' if not lines else ''}")
        for line in lines:
            print(line)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("write")
    w.add_argument("dir", type=Path)
    c = sub.add_parser("compare")
    c.add_argument("old", type=Path)
    c.add_argument("new", type=Path)
    args = p.parse_args()
    if args.cmd == "write":
        write(args.dir)
    else:
        compare(args.old, args.new)


if __name__ == "__main__":
    main()
