"""Totals, op selection and assertions of a ``Report`` (``ReportAssertions``, mixed into ``Report``).

The same methods work in a notebook, a script and a pytest test (the plugin's fixture returns the ``Report``)::

    report = hloscope.analyze(jax.jit(step), params, batch, chip="tpu-v5e")
    report.assert_bound("dot", "compute")           # every matmul compute-bound on the chip
    report.assert_no_collective("all-gather")
    report.assert_mfu_at_least("40%")

A failed assertion raises ``AssertionError`` whose message is a table of the offending ops (instruction, opcode,
op_name and the numbers that decided), so a test failure says what to look at.
"""

from __future__ import annotations

import fnmatch
import re
from typing import TYPE_CHECKING, Any, Iterable

from hloscope.units import parse_fraction
from hloscope.units import quantity as format_quantity

if TYPE_CHECKING:
    import pandas as pd

    from hloscope.roofline.chips import ChipSpec

__all__ = ["BOUNDS", "COLLECTIVE_KINDS", "ReportAssertions"]

BOUNDS = ("compute", "memory", "communication")
COLLECTIVE_KINDS = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "ragged-all-to-all",
                    "collective-permute", "collective-broadcast")


class ReportAssertions:
    """Totals (``roofline_s``, ``flops``, ``hbm_bytes``, ``wire_bytes``, ``mfu``), ``select`` and ``assert_*``
    methods over a report's ``ops`` and ``modules`` tables and its ``chip``.

    Every total is per program run (per step for a trace), summed over the modules; units are in the names
    (seconds, FLOPs, bytes).
    """

    ops: pd.DataFrame
    modules: pd.DataFrame
    chip: ChipSpec

    def __repr__(self) -> str:
        return (f"<hloscope Report: {len(self.ops)} ops, roofline {format_quantity(self.roofline_s, 's')} on "
                f"{self.chip.id}>")

    # ---- totals ------------------------------------------------------------------------------------

    @property
    def roofline_s(self) -> float:
        """Total roofline time of the program (seconds per run): the sum of every op's roofline time."""
        return float(self.modules["roofline_s"].sum())

    @property
    def flops(self) -> float:
        """Total FLOPs per run (the modules' ``flops``)."""
        return float(self.modules["flops"].sum())

    @property
    def hbm_bytes(self) -> float:
        """Total HBM traffic per run, bytes read plus written (the modules' ``hbm_bytes``)."""
        return float(self.modules["hbm_bytes"].sum())

    @property
    def wire_bytes(self) -> float:
        """Bytes each device sends on the wire per run, all collectives (the modules' ``wire_bytes``)."""
        return float(self.modules["wire_bytes"].sum())

    def wire_bytes_by_kind(self) -> dict[str, float]:
        """Wire bytes per collective kind (``{"all-reduce": 1.6e5, ...}``), bytes per device per run."""
        ops = self._collectives(None)
        return {str(k): float(v) for k, v in ops.groupby("comm_kind")["wire_bytes"].sum().items()}

    @property
    def mfu(self) -> float:
        """Model FLOPs utilization, a fraction (1.0 = the chip's peak): measured (``measured_s``, from a trace)
        when some module has a measured time, else the roofline MFU (``roofline_s``: the best this program can
        reach on the chip). The one definition: ``hloscope.roofline.tables.total_mfu``. NaN without time."""
        from hloscope.roofline.tables import total_mfu

        return total_mfu(self.modules, self.chip, "measured_s" if self._measured() else "roofline_s")

    def _measured(self) -> bool:
        return bool((self.modules["measured_s"] > 0).any())

    # ---- selecting ops -------------------------------------------------------------------------------

    def select(self, pattern: str | re.Pattern[str]) -> pd.DataFrame:
        """Ops matching ``pattern``: a glob (``fnmatch``, case-sensitive) or compiled regex, tried on the opcode,
        the category (``matmul``, ``collective``, ``fusion:kLoop``...), the instruction name and the op_name
        -- whole, or any ``/``-separated part of it. A fusion holding a dot also matches ``dot`` (and one
        holding a convolution ``convolution``).

        Returns:
            The matching rows of ``ops`` (same columns).

        Raises:
            TypeError: ``pattern`` is neither a str nor an ``re.Pattern``.
        """
        ops = self.ops
        if isinstance(pattern, re.Pattern):
            def hit(fields: list[str]) -> bool:
                return any(pattern.search(f) for f in fields)
        elif isinstance(pattern, str):
            rx = re.compile(fnmatch.translate(pattern))

            def hit(fields: list[str]) -> bool:
                return any(rx.match(f) for f in fields)
        else:
            raise TypeError(f"pattern must be a str (glob) or re.Pattern, not {type(pattern).__name__}")
        mask = []
        for opcode, category, inst, op_name in zip(ops["opcode"], ops["category"], ops["instruction"], ops["op_name"]):
            opcode = opcode if isinstance(opcode, str) else ""
            op_name = op_name if isinstance(op_name, str) else ""
            fields = [opcode, str(category), str(inst), op_name, *op_name.split("/")]
            if category == "matmul" and opcode not in ("dot", "convolution"):
                fields.append("convolution" if "conv" in op_name else "dot")
            mask.append(hit(fields))
        return ops[mask]

    def _no_match(self, pattern: Any) -> str:
        ops = self.ops
        opcodes = ", ".join(sorted({str(o) for o in ops["opcode"] if isinstance(o, str) and o}))
        cats = ", ".join(sorted({str(c) for c in ops["category"] if isinstance(c, str) and c}))
        return (f"no op matches {_pattern_text(pattern)} (opcodes: {opcodes}; categories: {cats}; patterns are globs "
                "on opcode, category, instruction or op_name)")

    # ---- assertions ------------------------------------------------------------------------------------

    def assert_bound(self, pattern: str | re.Pattern[str], bound: Any) -> None:
        """Every op matching ``pattern`` (see ``select``) that does work is ``bound``-bound.

        Args:
            pattern: glob or regex on opcode, category, instruction or op_name (``"dot"``, ``"matmul"``,
                ``"*attention*"``).
            bound: ``"compute"``, ``"memory"`` or ``"communication"`` (``"comm"``), or a ``Bound``.

        Raises:
            ValueError: an unknown bound.
            AssertionError: no op matches, or some are bound otherwise (table of them with their times and
                arithmetic intensity against the chip's critical intensity).
        """
        __tracebackhide__ = True
        want = _bound_name(bound)
        rows = self.select(pattern)
        rows = rows[rows["roofline_s"] > 0]
        if rows.empty:
            raise AssertionError(self._no_match(pattern))
        bad = rows[rows["bound"] != want]
        if bad.empty:
            return
        raise AssertionError(
            f"{len(bad)} of {len(rows)} ops matching {_pattern_text(pattern)} are not {want}-bound on {self.chip.id}:\n"
            + _ops_table(bad, ("bound", "compute_s", "memory_s", "comm_s", "intensity", "critical_intensity"))
            + "\n(an op is compute-bound when its FLOPs per HBM byte exceed the chip's critical intensity)")

    def assert_max_roofline_time(self, seconds: float) -> None:
        """The program's total roofline time is at most ``seconds``.

        Raises:
            AssertionError: with the time by bound class and the five slowest ops.
        """
        __tracebackhide__ = True
        total = self.roofline_s
        if total <= seconds:
            return
        m = self.modules
        fq = format_quantity
        raise AssertionError(
            f"roofline time {fq(total, 's')} exceeds {fq(seconds, 's')} on {self.chip.id} (compute-bound ops "
            f"{fq(float(m['compute_bound_s'].sum()), 's')}, memory-bound {fq(float(m['memory_bound_s'].sum()), 's')}, "
            f"communication-bound {fq(float(m['communication_bound_s'].sum()), 's')}); slowest ops:\n"
            + _ops_table(self.ops.nlargest(5, "roofline_s"), ("bound", "roofline_s")))

    def assert_no_collective(self, kind: str | None = None) -> None:
        """The program has no collective of ``kind`` (``all-gather``, ``all-reduce``, ``reduce-scatter``,
        ``all-to-all``, ``collective-permute``, ...), or none at all when ``kind`` is None.

        Raises:
            ValueError: an unknown kind (with the closest known one).
            AssertionError: listing each such collective with its op_name and wire bytes.
        """
        __tracebackhide__ = True
        rows = self._collectives(kind)
        if rows.empty:
            return
        what = kind or "collective"
        raise AssertionError(f"{len(rows)} {what} op{'s' if len(rows) != 1 else ''} found on {self.chip.id} "
                             f"({format_quantity(float(rows['wire_bytes'].sum()), 'B')} on the wire):\n"
                             + _ops_table(rows, ("comm_kind", "group_size", "wire_bytes", "roofline_s")))

    def _collectives(self, kind: str | None) -> pd.DataFrame:
        if kind is not None and kind not in COLLECTIVE_KINDS:
            import difflib

            close = difflib.get_close_matches(kind, COLLECTIVE_KINDS, n=1)
            raise ValueError(f"unknown collective kind {kind!r}" + (f"; did you mean {close[0]!r}?" if close else "")
                             + f" (known: {', '.join(COLLECTIVE_KINDS)})")
        ops = self.ops
        kinds = ops["comm_kind"].fillna("")
        mask = (kinds != "") & ~ops["opcode"].fillna("").str.endswith("-done")
        if kind is not None:
            mask &= kinds == kind
        return ops[mask]

    def assert_mfu_at_least(self, fraction: float | str) -> None:
        """MFU (``mfu``: measured with a trace, else the roofline MFU) is at least ``fraction`` (0.4 or "40%").

        Raises:
            ValueError: ``fraction`` is not a fraction or percentage.
            AssertionError: with the non-compute-bound ops that cost the most time.
        """
        __tracebackhide__ = True
        want = parse_fraction(fraction, "assert_mfu_at_least")
        got = self.mfu
        if got >= want:
            return
        kind = "measured MFU" if self._measured() else "roofline MFU (static: the best reachable)"
        slow = self.ops[self.ops["bound"] != "compute"].nlargest(5, "roofline_s")
        raise AssertionError(f"{kind} {got:.1%} < {want:.1%} on {self.chip.id}; the costliest ops not bound by "
                             f"compute:\n" + _ops_table(slow, ("bound", "roofline_s", "intensity")))

    def assert_max_flops(self, flops: float) -> None:
        """Total FLOPs per run at most ``flops``.

        Raises:
            AssertionError: with the five ops doing the most FLOPs.
        """
        __tracebackhide__ = True
        self._assert_max("FLOPs", self.flops, flops, "FLOP", "flops")

    def assert_max_hbm_bytes(self, nbytes: float) -> None:
        """Total HBM bytes (read + written) per run at most ``nbytes``.

        Raises:
            AssertionError: with the five ops moving the most bytes.
        """
        __tracebackhide__ = True
        self._assert_max("HBM bytes", self.hbm_bytes, nbytes, "B", "hbm_bytes")

    @property
    def peak_bytes(self) -> float:
        """Device memory the program needs while it runs (bytes): the largest ``total_bytes`` (argument +
        output - alias + temp, XLA's ``memory_analysis()`` split) of its modules' ``memory`` footprints; NaN
        when the report has none (a report read from JSON without them, a Chrome trace)."""
        memory = getattr(self, "memory", None) or []
        return float(max(fp.total_bytes for fp in memory)) if memory else float("nan")

    def assert_fits(self, hbm_capacity_bytes: float | None = None, *, headroom: float | str = 0.0) -> None:
        """Every module's memory footprint fits one device: ``total_bytes <= capacity * (1 - headroom)``.

        Args:
            hbm_capacity_bytes: the capacity per device (bytes); default the chip's ``hbm_capacity_bytes``.
            headroom: a share of the capacity to keep free (``0.1`` or ``"10%"``), e.g. for the runtime's own
                allocations and fragmentation, which HLO text does not show.

        Raises:
            ValueError: no capacity given and the chip has none; or no memory footprint to check.
            AssertionError: naming each module that does not fit, by how many GiB, its peak instruction and its
                largest live buffers.
        """
        __tracebackhide__ = True
        from hloscope.memory.footprint import GIB

        capacity = hbm_capacity_bytes if hbm_capacity_bytes is not None else getattr(self.chip, "hbm_capacity_bytes",
                                                                                     None)
        if not capacity:
            raise ValueError(f"chip {self.chip.id} has no hbm_capacity_bytes: pass hbm_capacity_bytes=")
        memory = getattr(self, "memory", None) or []
        if not memory:
            raise ValueError("the report has no memory footprint (it was read from JSON without one, or comes from "
                             "a Chrome trace, which holds no schedule)")
        keep = parse_fraction(headroom, "assert_fits(headroom=)")
        limit = float(capacity) * (1.0 - keep)
        lines = []
        for fp in memory:
            if fp.total_bytes > limit:
                lines.append(f"{fp.module}: needs {fp.total_bytes / GIB:.3g} GiB, does not fit by "
                             f"{(fp.total_bytes - limit) / GIB:.3g} GiB (capacity {float(capacity) / GIB:.3g} GiB"
                             + (f", headroom {keep:.0%}" if keep else "")
                             + f"); peak at {fp.peak_instruction or '-'}"
                             + (f" ({fp.peak_source})" if fp.peak_source else ""))
                for b in fp.top_buffers[:5]:
                    lines.append(f"    {format_quantity(b.size_bytes, 'B'):>10}  {b.kind:9s} {b.instruction} "
                                 f"{b.result_shape} {b.op_name}")
        if lines:
            raise AssertionError("program does not fit on one device:\n" + "\n".join(lines))

    def assert_max_wire_bytes(self, nbytes: float, kind: str | None = None) -> None:
        """Bytes each device sends on the wire per run (of collective ``kind``, or all) at most ``nbytes``.

        Raises:
            ValueError: an unknown collective kind.
            AssertionError: with the five collectives sending the most.
        """
        __tracebackhide__ = True
        rows = self._collectives(kind)
        self._assert_max(f"{kind or 'collective'} wire bytes", float(rows["wire_bytes"].sum()), nbytes, "B",
                         "wire_bytes", rows)

    def _assert_max(self, what: str, got: float, limit: float, unit: str, col: str,
                    rows: pd.DataFrame | None = None) -> None:
        __tracebackhide__ = True
        if got <= limit:
            return
        rows = self.ops if rows is None else rows
        fq = format_quantity
        raise AssertionError(f"{what} {fq(got, unit)} exceed {fq(limit, unit)} ({got:.6g} > {limit:.6g}); "
                             "largest ops:\n" + _ops_table(rows.nlargest(5, col), (col,)))


# ---- message helpers -------------------------------------------------------------------------------


def _bound_name(bound: Any) -> str:
    name = getattr(bound, "value", bound)
    name = {"comm": "communication", "collective": "communication"}.get(name, name)
    if name not in BOUNDS:
        raise ValueError(f"unknown bound {bound!r}: expected one of {', '.join(BOUNDS)}")
    return name


def _pattern_text(pattern: Any) -> str:
    return f"/{pattern.pattern}/" if isinstance(pattern, re.Pattern) else repr(pattern)


_UNITS = {"compute_s": "s", "memory_s": "s", "comm_s": "s", "roofline_s": "s", "wire_bytes": "B",
          "hbm_bytes": "B", "flops": "FLOP"}


def _ops_table(rows: pd.DataFrame, cols: Iterable[str], limit: int = 10) -> str:
    """Plain-text table of ``rows``: instruction, opcode, op_name (last 50 characters) and ``cols`` (with units),
    at most ``limit`` rows then "... and N more"."""
    cols = list(cols)
    head = ["instruction", "opcode", "op_name", *cols]
    table = [head]
    for _, r in rows.head(limit).iterrows():
        op_name = r["op_name"] if isinstance(r["op_name"], str) else ""
        if len(op_name) > 50:
            op_name = "..." + op_name[-47:]
        cells = [str(r["instruction"]), str(r["opcode"]), op_name]
        for c in cols:
            v = r[c]
            if c in _UNITS:
                cells.append(format_quantity(float(v), _UNITS[c]))
            elif isinstance(v, float):
                cells.append(f"{v:.3g}")
            else:
                cells.append(str(v))
        table.append(cells)
    widths = [max(len(row[i]) for row in table) for i in range(len(head))]
    lines = ["  " + "  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in table]
    if len(rows) > limit:
        lines.append(f"  ... and {len(rows) - limit} more")
    return "\n".join(lines)
