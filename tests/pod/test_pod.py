"""A run of several host files (fixtures/profile/cpu_multihost*: real captures of 2 JAX processes on this machine,
jax.distributed with CPU collectives; fixtures/make_pod_profiles.py) read host by host, on Dask or in this
process, gives the report a serial read of all the files gives; a corrupt host is named and the rest reported;
the deliberately slowed host is the straggler."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import hloscope
from hloscope.analysis import _traced

PROFILES = Path(__file__).resolve().parents[2] / "fixtures" / "profile"
SLOW = PROFILES / "cpu_multihost_slow"


def _doc(report):
    d = report.to_dict()
    d["coverage"] = {k: v for k, v in d["coverage"].items() if k not in ("hosts", "failed_hosts", "host_task_seconds",
                                                                      "peak_task_rss_bytes")}
    return d


@pytest.mark.parametrize("workers", [0, 2])
def test_host_by_host_equals_a_serial_read(workers):
    serial = _traced(SLOW, None, "h100", [])
    pod = hloscope.analyze(SLOW, chip="h100", workers=workers)
    assert pod.coverage["hosts"] == 2 and pod.coverage["failed_hosts"] == []
    a, b = _doc(serial), _doc(pod)
    assert a.keys() == b.keys()
    for key in a:
        assert a[key] == b[key], key


def test_the_slowed_host_is_the_straggler():
    """Process 1 slept before dispatching each step (timing.json): both its devices start late and the devices of
    host0 wait for them in the all-reduce."""
    timing = json.loads((SLOW / "timing.json").read_text())
    r = hloscope.analyze(SLOW, chip="h100", workers=0)
    slow_host = f"host{timing['slowed_process']}"
    assert set(r.stragglers["host"]) == {slow_host}
    assert all(ops.startswith("late start") for ops in r.stragglers["ops"])
    dev = r.per_device().set_index("host")
    assert (dev.loc[slow_host, "late_start_s"] > 0.5 * timing["sleep_s"]).all()
    others = dev.drop(index=slow_host)
    assert (others["exposed_comm_s"] > dev.loc[slow_host, "exposed_comm_s"].max()).all()
    normal = hloscope.analyze(PROFILES / "cpu_multihost", chip="h100", workers=0)
    assert not len(normal.stragglers)


def test_a_corrupt_host_is_named_and_the_rest_reported(tmp_path):
    run = tmp_path / "log" / "plugins" / "profile" / "run0"
    shutil.copytree(SLOW / "plugins" / "profile" / "run0", run)
    shutil.copy(run / "host1.xplane.pb", run / "host2.xplane.pb")
    (run / "host2.xplane.pb").write_bytes((run / "host2.xplane.pb").read_bytes()[:5000])  # truncated
    r = hloscope.analyze(tmp_path / "log", chip="h100", workers=0)
    assert r.coverage["hosts"] == 3
    assert [Path(f["file"]).name for f in r.coverage["failed_hosts"]] == ["host2.xplane.pb"]
    assert any(n.startswith("host host2 not read:") for n in r.notes)
    assert set(r.steps["host"]) == {"host0", "host1"}
    reference = hloscope.analyze(SLOW, chip="h100", workers=0)
    assert r.ops["measured_s"].sum() == pytest.approx(reference.ops["measured_s"].sum())


def test_cli_workers_flag(capsys):
    from hloscope.cli import main

    assert main(["report", str(SLOW), "--chip", "h100", "--workers", "0", "--top", "2"]) == 0
    out = capsys.readouterr().out
    assert "stragglers" in out and "devices (4 on 2 hosts" in out


def test_slowest_participant_of_each_all_reduce():
    """Each all-reduce instance joined across the two hosts by step: its longest participant is one of host0's
    devices (they wait for the slowed host1). By hand from the raw events: per step, the longest of the four
    devices' all-reduce events, averaged over the steps."""
    from hloscope.parsers.events import read_trace

    r = hloscope.analyze(SLOW, chip="h100", workers=0)
    op = r.ops[r.ops["category"] == "collective"].iloc[0]
    ev = read_trace(SLOW).ops
    ev = ev[ev["instruction"].astype(str) == op["instruction"]]
    per_step = ev.assign(dur=ev["duration_ps"] / 1e12).groupby("step")["dur"]
    assert op["slowest_participant_s"] == pytest.approx(per_step.max().mean())
    assert op["slowest_participant_s"] > 1.25 * op["measured_s"]  # the mean participant's (measured_s)
    host0 = ev[ev["host"].astype(str) == "host0"]
    assert per_step.max().tolist() == pytest.approx(
        host0.assign(dur=host0["duration_ps"] / 1e12).groupby("step")["dur"].max().tolist())


def test_host_clocks_line_up():
    """Each host file's times are relative to its own capture start (profile_start_time); shifted onto one
    clock, the hosts' step starts differ as the processes' own wall clocks (time.time_ns() at each step's start,
    timing.json) say, within 0.2 ms."""
    timing = json.loads((SLOW / "timing.json").read_text())
    r = hloscope.analyze(SLOW, chip="h100", workers=0)
    starts = r.steps.groupby(["step", "host"])["start_s"].min()
    for k in range(timing["traced_steps"]):
        wall = {h: p["steps"][k]["time_ns_start"] / 1e9 for h, p in timing["per_process"].items()}
        assert starts[(k, "host1")] - starts[(k, "host0")] == pytest.approx(wall["host1"] - wall["host0"], abs=2e-4)


def test_gpu_command_buffers_host_by_host(tmp_path):
    """Two copies of the bundled H100 capture (command buffers: kernels joined to instructions in each task)
    as two hosts: the same report as a serial read, notes included."""
    src = PROFILES / "gpu_mlp_train" / "plugins" / "profile" / "run0"
    run = tmp_path / "log" / "plugins" / "profile" / "run0"
    run.mkdir(parents=True)
    xplane = next(src.glob("*.xplane.pb"))
    for host in ("hostA", "hostB"):
        shutil.copy(xplane, run / f"{host}.xplane.pb")
    serial, pod = _doc(_traced(tmp_path / "log", None, None, [])), _doc(hloscope.analyze(tmp_path / "log", workers=0))
    assert serial == pod
    assert any(n.startswith("GPU command buffers") for n in pod["notes"])
