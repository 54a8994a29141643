"""Steps and overlap on real CPU captures made for it (fixtures/make_step_profiles.py), against what the
construction implies and what the capture script measured itself: ``time.perf_counter`` around each step, the
host-side sleep, and the raw interval arithmetic of the script's ``trace_summary`` (its own code, over the
XSpace events it read with ``jax.profiler.ProfileData``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import hloscope

PROFILES = Path(__file__).resolve().parents[2] / "fixtures" / "profile"


def _load(name):
    path = PROFILES / name
    return hloscope.analyze(path, chip="h100"), json.loads((path / "timing.json").read_text())


def _raw_collectives(timing):
    """(device, n-th collective in time order) -> (duration_ms, covered_ms) from the script's own arithmetic."""
    return {(int(d), k): (c["duration_ms"], c["covered_ms"])
            for d, dev in timing["trace_summary"]["devices"].items() for k, c in enumerate(dev["collectives"])}


@pytest.mark.parametrize("name", ["cpu_allreduce_exposed", "cpu_allreduce_overlapped", "cpu_host_sleep"])
def test_step_wall_time_is_the_perf_counter_time(name):
    """The StepTraceAnnotation region is the step the script timed: within 0.5% of perf_counter."""
    report, timing = _load(name)
    per = report.steps_across_devices()
    assert list(per["step"]) == list(range(timing["n_steps"]))
    assert per["wall_s"].tolist() == pytest.approx(timing["step_perf_counter_s"], rel=5e-3)
    assert set(report.steps["source"]) == {"host steps"} and len(report.steps) == 8 * timing["n_steps"]


def test_result_used_at_once_is_fully_exposed():
    """Every chain starts from the all-reduce's result: nothing can run beside it."""
    report, timing = _load("cpu_allreduce_exposed")
    steps = report.steps
    assert (steps["comm_s"] > 0).all()
    assert (steps["overlapped_comm_s"] == 0).all() and (steps["comm_hidden_fraction"] == 0).all()
    assert steps["exposed_comm_s"].tolist() == pytest.approx(steps["comm_s"].tolist())
    raw = _raw_collectives(timing)
    assert sum(d for d, _ in raw.values()) == pytest.approx(steps["comm_s"].sum() * 1e3, rel=1e-6)
    assert report.modules["comm_hidden_fraction"].iloc[0] == 0


def test_independent_compute_hides_the_all_reduce():
    """Independent matmul chains run on another thread while the all-reduce is in flight: communication is
    hidden, and the hidden amount is the coverage the script computed from the raw events, device by device."""
    report, timing = _load("cpu_allreduce_overlapped")
    exposed, _ = _load("cpu_allreduce_exposed")
    steps = report.steps.sort_values(["device_id", "start_s"])
    raw = _raw_collectives(timing)
    for d, g in steps.groupby("device_id"):
        got = g["overlapped_comm_s"].tolist()
        want = [raw[(d, k)][1] * 1e-3 for k in range(len(g))]  # one all-reduce per step
        assert got == pytest.approx(want, abs=2e-9)
    summary, summary_exposed = report.step_summary(), exposed.step_summary()
    assert summary["comm_hidden_fraction"] > 0.5 > summary_exposed["comm_hidden_fraction"] == 0
    assert summary["median_exposed_comm_s"] < 0.5 * summary_exposed["median_exposed_comm_s"]
    # Per op, per step and device: what is hidden plus what is exposed is the all-reduce's measured time.
    op = report.ops[report.ops["category"] == "collective"].iloc[0]
    assert op["exposed_comm_s"] + op["overlapped_comm_s"] == pytest.approx(op["measured_s"])
    assert op["overlapped_comm_s"] / op["measured_s"] == pytest.approx(summary["comm_hidden_fraction"])


def test_exposed_comm_gate_fails_the_exposed_program():
    """`hloscope diff overlapped exposed --fail-on exposed_comm_s:+10%` fails: the same work with its all-reduce
    exposed."""
    result = hloscope.diff(PROFILES / "cpu_allreduce_overlapped", PROFILES / "cpu_allreduce_exposed",
                           chip="h100", rules="exposed_comm_s:+10%")
    assert any("exposed" in line for line in result.verdict.lines())
    back = hloscope.diff(PROFILES / "cpu_allreduce_exposed", PROFILES / "cpu_allreduce_overlapped",
                         chip="h100", rules="exposed_comm_s:+10%")
    assert not back.verdict.lines()


def test_host_sleep_is_idle_time():
    """Each step blocks on the device, then sleeps on the host: every device idles at least the sleep, and the
    idle gap after the device that finished last is the sleep (within 5%)."""
    report, timing = _load("cpu_host_sleep")
    sleep = timing["sleep_s"]
    steps = report.steps
    assert (steps["idle_s"] >= sleep).all()
    for _, g in steps.groupby("step"):
        last = g.loc[g["finish_s"].idxmax()]
        assert last["longest_gap_s"] == pytest.approx(sleep, rel=0.05)
    raw = timing["trace_summary"]["devices"]
    for d, g in steps.sort_values("start_s").groupby("device_id"):
        assert (g["idle_s"] * 1e3).tolist() == pytest.approx(raw[str(d)]["idle_ms_per_step"], abs=1e-6)
    assert report.gaps["duration_s"].iloc[0] >= sleep
