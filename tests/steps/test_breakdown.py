"""The per-step breakdown on hand-built events whose every number is worked out by hand in the comments (times in
microseconds; the tables hold picoseconds and seconds)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from hloscope.parsers.events import MODULE_RUN_COLUMNS, OP_COLUMNS, STEP_COLUMNS, TraceEvents
from hloscope.steps.breakdown import step_breakdown
from hloscope.steps.intervals import covered, gaps, union
from hloscope.steps.summary import across_devices, step_summary

US = 1_000_000  # ps per microsecond


def _events(rows, steps=(), runs=()):
    """rows: (device_id, stream, instruction, start_us, duration_us, self_us or None)."""
    ops = pd.DataFrame([{
        "host": "h", "device": "/device:GPU:%d" % d, "device_id": d, "stream": st, "program_id": 1, "module": "m",
        "instruction": inst, "name": inst, "step": pd.NA, "start_ps": s * US, "duration_ps": dur * US,
        "self_ps": (dur if self_us is None else self_us) * US} for d, st, inst, s, dur, self_us in rows],
        columns=OP_COLUMNS)
    for c in ("host", "device", "stream", "module", "instruction", "name"):
        ops[c] = ops[c].astype("category")
    st = pd.DataFrame([{"host": "h", "device": dev, "device_id": d, "name": "train", "step": n, "start_ps": s * US,
                        "duration_ps": dur * US} for dev, d, n, s, dur in steps], columns=STEP_COLUMNS)
    mr = pd.DataFrame([{"host": "h", "device": "/device:GPU:%d" % d, "device_id": d, "module": m, "program_id": 1,
                        "start_ps": s * US, "duration_ps": dur * US} for d, m, s, dur in runs],
                      columns=MODULE_RUN_COLUMNS)
    return TraceEvents(ops, st, mr, platform="gpu")


# The scored ops table's few columns the breakdown reads. Roofline seconds are per module run and device, as
# ``occurrences`` (events per run and device): one event of ``dot`` is worth 10 us at the roof.
OPS = pd.DataFrame([
    ("m", "dot", "matmul", "dot", "", "compute", 10e-6, 1.0),
    ("m", "fusion", "fusion:kLoop", "fusion", "", "memory", 8e-6, 1.0),
    ("m", "all-reduce", "collective", "all-reduce", "all-reduce", "communication", 5e-6, 1.0),
    ("m", "while", "control", "while", "", "unknown", 0.0, 0.5),
], columns=["module", "instruction", "category", "opcode", "comm_kind", "bound", "roofline_s", "occurrences"])

# Device 0, host step markers: step 0 = [0, 100), step 1 = [100, 200).
#   step 0: while [5, 80) holding (self 15 of 75) dot [10, 40) and fusion [40, 60) on stream A; all-reduce
#           [30, 70) on stream B.
#   step 1: all-reduce [110, 150) alone.
ROWS = [(0, "A", "while", 5, 75, 15), (0, "A", "dot", 10, 30, None), (0, "A", "fusion", 40, 20, None),
        (0, "B", "all-reduce", 30, 40, None), (0, "B", "all-reduce", 110, 40, None)]
HOST_STEPS = [("/host:CPU", -1, 0, 0, 100), ("/host:CPU", -1, 1, 100, 100)]


def test_step_partition_by_hand():
    b = step_breakdown(_events(ROWS, HOST_STEPS), OPS, {"m": 2.0})
    s0, s1 = b.steps.iloc[0], b.steps.iloc[1]
    us = 1e-6
    # step 0: busy = |[5, 80)| = 75; compute = |dot| = 30; memory = |[10, 60)| - 30 = 20;
    # exposed = |[10, 70)| - |[10, 60)| = 10 (the all-reduce's [60, 70)); other = 75 - 30 - 20 - 10 = 15 (while
    # alone); idle = 100 - 75 = 25; comm = 40, overlapped 30.
    assert s0["source"] == "host steps" and s0["first"] and not s1["first"]
    for col, want in [("wall_s", 100), ("busy_s", 75), ("compute_s", 30), ("memory_s", 20), ("exposed_comm_s", 10),
                      ("other_s", 15), ("idle_s", 25), ("comm_s", 40), ("overlapped_comm_s", 30),
                      ("longest_gap_s", 20), ("finish_s", 80)]:
        assert s0[col] == pytest.approx(want * us), col
    assert s0["comm_hidden_fraction"] == pytest.approx(0.75)
    # roofline of the step: each event is worth its op's roofline_s x runs / events of the op, the host's runs
    # being 2 (2 steps x 1 device): the dot and the fusion ran once in the two runs (10 x 2 / 1 = 20, 8 x 2 / 1 =
    # 16), the all-reduce twice (5 x 2 / 2 = 5), the while costs 0: 41
    assert s0["roofline_s"] == pytest.approx(41 * us)
    assert s0["roofline_fraction"] == pytest.approx(0.41)
    assert s0["events"] == 4
    assert s0["by_category_s"] == pytest.approx({"control": 15 * us, "matmul": 30 * us, "fusion:kLoop": 20 * us,
                                                 "collective": 40 * us})
    # step 1: the all-reduce alone: all exposed; idle 60; the longest gap is [150, 200).
    for col, want in [("busy_s", 40), ("exposed_comm_s", 40), ("overlapped_comm_s", 0), ("idle_s", 60),
                      ("longest_gap_s", 50)]:
        assert s1[col] == pytest.approx(want * us), col
    # The parts add up to the wall time.
    parts = b.steps[["compute_s", "memory_s", "exposed_comm_s", "other_s", "idle_s"]].sum(axis=1)
    assert np.allclose(parts, b.steps["wall_s"])
    # Per op, per module run and device (2 runs): exposed (10 + 40) / 2, overlapped (30 + 0) / 2.
    assert b.op_overlap[("m", "all-reduce")] == pytest.approx((25 * us, 15 * us))
    # The longest gaps, named by the ops around them: [150, 200) after the all-reduce, [80, 100) after the while,
    # [100, 110) before the second all-reduce.
    g = b.gaps
    assert list(g["duration_s"].round(9)) == pytest.approx([50 * us, 20 * us, 10 * us, 5 * us])
    assert g["before"].iloc[0] == "all-reduce (m)" and g["after"].iloc[0] == ""
    assert g["before"].iloc[1] == "while (m)"
    assert g["after"].iloc[2] == "all-reduce (m)" and g["step"].iloc[2] == 1
    assert g["before"].iloc[3] == "" and g["after"].iloc[3] == "while (m)"  # the step's leading [0, 5)


def test_device_markers_win_over_host_markers_and_module_runs_stand_in():
    rows = ROWS + [(1, "A", "dot", 12, 30, None), (2, "A", "dot", 500, 30, None), (2, "A", "dot", 600, 30, None)]
    device_steps = [("/device:GPU:1", 1, 7, 10, 50)]
    b = step_breakdown(_events(rows, HOST_STEPS + device_steps, runs=[(2, "m", 490, 60), (2, "m", 590, 60)]), OPS,
                       {"m": 2.0})
    by = {d: g for d, g in b.steps.groupby("device_id")}
    assert list(by[0]["source"]) == ["host steps", "host steps"]
    assert list(by[1]["source"]) == ["device steps"] and int(by[1]["step"].iloc[0]) == 7
    assert by[1]["busy_s"].iloc[0] == pytest.approx(30e-6) and by[1]["idle_s"].iloc[0] == pytest.approx(20e-6)
    # Device 2 has no markers on its host... it has the host's: host markers apply to every device of the host.
    assert set(by[2]["source"]) == {"host steps"}
    # Without host markers, device 2's module runs are its steps, numbered in time order.
    b = step_breakdown(_events(rows, device_steps, runs=[(2, "m", 490, 60), (2, "m", 590, 60)]), OPS, {"m": 2.0})
    d2 = b.steps[b.steps["device_id"] == 2]
    assert list(d2["source"]) == ["module runs", "module runs"] and list(d2["step"]) == [0, 1]
    assert list(d2["module"]) == ["m", "m"] and d2["busy_s"].tolist() == pytest.approx([30e-6, 30e-6])
    # Device 0 has neither: one window over the whole trace, and a note says so.
    d0 = b.steps[b.steps["device_id"] == 0]
    assert list(d0["source"]) == ["trace"] and d0["wall_s"].iloc[0] == pytest.approx(145e-6)  # [5, 150)
    assert any("no step markers" in n for n in b.notes)


def test_unjoined_collective_kernel_counts_as_communication():
    rows = [(0, "compute", "dot", 0, 50, None), (0, "comm", "ncclDevKernel_AllReduce_Sum_f32", 40, 30, None)]
    b = step_breakdown(_events(rows, [("/host:CPU", -1, 0, 0, 100)]), OPS, {"m": 1.0})
    s = b.steps.iloc[0]
    assert s["comm_s"] == pytest.approx(30e-6) and s["exposed_comm_s"] == pytest.approx(20e-6)
    assert b.op_overlap[("m", "ncclDevKernel_AllReduce_Sum_f32")] == pytest.approx((20e-6, 10e-6))


def test_across_devices_and_summary():
    rows = [(0, "A", "dot", 0, 50, None), (1, "A", "dot", 0, 80, None),
            (0, "A", "dot", 100, 50, None), (1, "A", "dot", 100, 50, None),
            (0, "A", "dot", 200, 60, None), (1, "A", "dot", 200, 50, None)]
    steps = [("/host:CPU", -1, n, 100 * n, 100) for n in range(3)]
    per = across_devices(step_breakdown(_events(rows, steps), OPS, {"m": 6.0}).steps)
    assert list(per["step"]) == [0, 1, 2] and list(per["first"]) == [True, False, False]
    # step 0: device 1 finished at 80, device 0 at 50: straggler gap = 80 - median(50, 80) = 15
    assert per["slowest_device"].iloc[0] == "GPU:1" and per["straggler_gap_s"].iloc[0] == pytest.approx(15e-6)
    assert per["busy_s"].iloc[0] == pytest.approx(65e-6)  # mean of 50 and 80
    s = step_summary(step_breakdown(_events(rows, steps), OPS, {"m": 6.0}).steps)
    assert s["steps"] == 3 and s["first_step"] == 0 and s["median_excludes_first"]
    # step 1 idle = 100 - 50 = 50 on both devices; step 2: 40 and 50 -> mean 45; median of (50, 45) = 47.5
    assert s["median_idle_s"] == pytest.approx(47.5e-6)
    assert math.isnan(s["comm_hidden_fraction"])


def test_intervals_against_a_bitmap():
    rng = np.random.default_rng(0)
    for _ in range(300):
        n = int(rng.integers(0, 25))
        s = rng.integers(0, 200, n)
        e = s + rng.integers(-5, 40, n)
        us, ue = union(s, e)
        bitmap = np.zeros(400, bool)
        for a, b in zip(s, e):
            bitmap[a:max(a, b)] = True
        assert int((ue - us).sum()) == int(bitmap.sum())
        assert (us[1:] > ue[:-1]).all()  # disjoint and not touching
        lo = rng.integers(0, 250, 6)
        hi = lo + rng.integers(-3, 100, 6)
        got = covered(us, ue, lo, hi)
        for i in range(6):
            assert got[i] == bitmap[lo[i]:max(lo[i], hi[i])].sum()
        w, g0, g1 = gaps(us, ue, lo[:1], np.maximum(lo[:1], hi[:1]))
        assert (w == 0).all()
        assert not bitmap[np.concatenate([np.arange(a, b) for a, b in zip(g0, g1)] or [[]]).astype(int)].any()
        assert int((g1 - g0).sum()) == (max(lo[0], hi[0]) - lo[0]) - int(got[0])


def test_async_start_and_done_are_one_flight():
    """A TPU XLA Ops line: all-gather-start [10, 12), the fusion XLA scheduled between [12, 50), all-gather-done
    [50, 60) (the wait). As one flight [10, 60): hidden 38 (under the fusion), exposed 12 (2 + 10) -- the same
    exposed time as the two events alone, but the fusion now counts as hiding the transfer."""
    ops = pd.concat([OPS, pd.DataFrame([
        ("m", "ag-start", "collective", "all-gather-start", "all-gather", "communication", 5e-6, 1.0),
        ("m", "ag-done", "collective", "all-gather-done", "all-gather", "communication", 0.0, 1.0),
    ], columns=OPS.columns)], ignore_index=True)
    rows = [(0, "XLA Ops", "ag-start", 10, 2, None), (0, "XLA Ops", "fusion", 12, 38, None),
            (0, "XLA Ops", "ag-done", 50, 10, None)]
    ev = _events(rows, [("/host:CPU", -1, 0, 0, 100)])
    paired = step_breakdown(ev, ops, {"m": 1.0}, {("m", "ag-done"): "ag-start"}).steps.iloc[0]
    alone = step_breakdown(ev, ops, {"m": 1.0}, {}).steps.iloc[0]
    us = 1e-6
    assert paired["exposed_comm_s"] == pytest.approx(12 * us) == alone["exposed_comm_s"]
    assert paired["comm_s"] == pytest.approx(50 * us) and paired["overlapped_comm_s"] == pytest.approx(38 * us)
    assert alone["overlapped_comm_s"] == 0
    assert paired["busy_s"] == pytest.approx(50 * us) == alone["busy_s"]
    b = step_breakdown(ev, ops, {"m": 1.0}, {("m", "ag-done"): "ag-start"})
    assert b.op_overlap == {("m", "ag-start"): pytest.approx((12 * us, 38 * us))}  # the done is absorbed


def test_done_operand_read_from_a_chrome_trace_line():
    from hloscope.steps.breakdown import pairs_from_lines

    ev = pd.DataFrame({"module": ["m", "m"], "instruction": ["copy-done.206", "all-gather-done.1"], "hlo_text": [
        "%copy-done.206 = s32[1024]{0:T(1024)S(1)} copy-done((s32[1024]{0:T(1024)S(1)}, s32[1024]{0:T(1024)}, "
        "u32[]{:S(2)}) %copy-start.206)",
        "%all-gather-done.1 = f32[8]{0} all-gather-done(f32[8]{0} %all-gather-start.1)"]})
    assert pairs_from_lines(ev) == {("m", "copy-done.206"): "copy-start.206",
                                     ("m", "all-gather-done.1"): "all-gather-start.1"}


def test_flight_found_whatever_the_event_order():
    """The done op's communication flag is read per op, not from the event that happens to share its index: with
    a fusion [0, 5) as the first event (ops sorted by name put ag-done first), the flight of
    ``test_async_start_and_done_are_one_flight`` still forms -- hidden 38 us under the second fusion."""
    ops = pd.concat([OPS, pd.DataFrame([
        ("m", "ag-start", "collective", "all-gather-start", "all-gather", "communication", 5e-6, 1.0),
        ("m", "ag-done", "collective", "all-gather-done", "all-gather", "communication", 0.0, 1.0),
    ], columns=OPS.columns)], ignore_index=True)
    rows = [(0, "XLA Ops", "fusion", 0, 5, None), (0, "XLA Ops", "ag-start", 10, 2, None),
            (0, "XLA Ops", "fusion", 12, 38, None), (0, "XLA Ops", "ag-done", 50, 10, None)]
    ev = _events(rows, [("/host:CPU", -1, 0, 0, 100)])
    step = step_breakdown(ev, ops, {"m": 1.0}, {("m", "ag-done"): "ag-start"}).steps.iloc[0]
    assert step["overlapped_comm_s"] == pytest.approx(38e-6) and step["exposed_comm_s"] == pytest.approx(12e-6)
