"""The ``Report`` record and its JSON/CSV forms (schema in docs/report.md)."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

    from hloscope.roofline.chips import ChipSpec

SCHEMA = "hloscope.report/1"


@dataclass
class Report:
    """Result of ``hloscope.analyze``.

    Attributes:
        ops: per-op DataFrame (``report.table.OP_COLUMNS``), totals per module run.
        modules: per-module DataFrame (``report.table.MODULE_COLUMNS``).
        chip: the chip the ops were scored against.
        coverage: for traces, ``joined_time_fraction`` (share of measured op time that joined an instruction
            with a cost), ``steps``, ``devices``, ``files``; for static reports, ``{"static": True}``.
        notes: human-readable caveats (e.g. "host chip calibrated on the fly").
    """

    ops: pd.DataFrame
    modules: pd.DataFrame
    chip: ChipSpec
    coverage: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """The JSON document: ``schema``, ``chip``, ``modules``, ``ops``, ``coverage``, ``notes``."""
        from hloscope.roofline.chips import chip_to_dict

        return {
            "schema": SCHEMA,
            "chip": chip_to_dict(self.chip),
            "modules": _records(self.modules),
            "ops": [dict(r, flags=[f for f in (r["flags"] or "").split(",") if f]) for r in _records(self.ops)],
            "coverage": self.coverage,
            "notes": self.notes,
        }

    def to_json(self, indent: int | None = 1) -> str:
        return json.dumps(self.to_dict(), indent=indent, allow_nan=False)

    def to_csv(self) -> str:
        return self.ops.to_csv(index=False)


def _records(df: pd.DataFrame) -> list[dict[str, Any]]:
    """Rows as dicts with NaN -> None and numpy scalars -> Python (JSON has no NaN)."""
    out = []
    for rec in df.to_dict(orient="records"):
        clean = {}
        for k, v in rec.items():
            if hasattr(v, "item"):
                v = v.item()
            if isinstance(v, float) and (math.isnan(v) or math.isinf(v)):
                v = None
            clean[k] = v
        out.append(clean)
    return out
