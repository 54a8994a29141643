"""Hand-made reports for the engine's tests: ops tables written out row by row, totals summed by hand."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from hloscope.result import Report
from hloscope.roofline.chips import get_chip
from hloscope.roofline.tables import MODULE_COLUMNS, OP_COLUMNS

_TEXT = ("module", "computation", "instruction", "opcode", "category", "op_name", "source", "comm_kind", "dtype",
         "bound", "caveats", "result_shape")


def op(instruction: str, opcode: str, op_name: str, shape: str, roofline_s: float, *, module: str = "m",
       bound: str = "memory", comm_kind: str = "", wire_bytes: float = 0.0, flops: float = 0.0,
       hbm_bytes: float = 0.0, category: str = "", measured_s: float = math.nan, **extra: Any) -> dict:
    """One row of the ops table (the other columns null)."""
    dtype = shape.split("[", 1)[0].lstrip("(") if "[" in shape else ""
    row = {c: ("" if c in _TEXT else math.nan) for c in OP_COLUMNS}
    row.update(module=module, computation="main", instruction=instruction, opcode=opcode,
               category=category or ("collective" if comm_kind else "elementwise"), op_name=op_name, result_shape=shape,
               dtype=dtype, bound=bound, roofline_s=roofline_s, comm_kind=comm_kind, wire_bytes=wire_bytes,
               flops=flops, hbm_bytes=hbm_bytes, executions=1.0, measured_s=measured_s,
               compute_s=0.0, memory_s=roofline_s if bound == "memory" else 0.0,
               comm_s=roofline_s if bound == "communication" else 0.0)
    row.update(extra)
    return row


def report(rows: list[dict], chip: str = "tpu-v5e", modules: list[str] | None = None) -> Report:
    """A report of ``rows``; each module's totals are the sums of its rows (measured_s: NaN unless a row has
    one)."""
    ops = pd.DataFrame(rows, columns=OP_COLUMNS)
    names = modules if modules is not None else list(dict.fromkeys(r["module"] for r in rows)) or ["m"]
    mods = []
    for name in names:
        mine = [r for r in rows if r["module"] == name]
        measured = [r["measured_s"] for r in mine if not math.isnan(r["measured_s"])]
        mods.append({c: math.nan for c in MODULE_COLUMNS} | {
            "name": name, "flops": sum(r["flops"] for r in mine), "transcendentals": 0.0,
            "hbm_bytes": sum(r["hbm_bytes"] for r in mine),
            "wire_bytes": sum(r["wire_bytes"] for r in mine),
            "compute_s": sum(r["compute_s"] for r in mine), "memory_s": sum(r["memory_s"] for r in mine),
            "comm_s": sum(r["comm_s"] for r in mine), "roofline_s": sum(r["roofline_s"] for r in mine),
            "measured_s": sum(measured) if measured else math.nan, "dtype": "f32", "caveats": ""})
    return Report(ops, pd.DataFrame(mods, columns=MODULE_COLUMNS), get_chip(chip), {"static": True}, [])
