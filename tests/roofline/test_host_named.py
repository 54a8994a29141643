"""``chip="host"`` (or ``--chip host``) before ``hloscope calibrate`` has written ``host.toml``: the host is
measured on the fly, once a process, and the report says so (it used to be ``unknown chip 'host'``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import hloscope
from hloscope import analysis
from hloscope.roofline import calibrate as calibrate_mod
from hloscope.roofline.chips import UnknownChipError

TINY = {"repeats": 2, "size": 64, "memory_bytes": 1 << 20}
NOTE = "host chip measured on the fly; run `hloscope calibrate` once to measure it carefully"
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def uncalibrated(tmp_path, monkeypatch):
    """No ``host.toml`` anywhere, a small measurement, and a count of the measurements made."""
    monkeypatch.setenv("HLOSCOPE_CONFIG_DIR", str(tmp_path / "empty-config"))
    made = []
    real = calibrate_mod.calibrate_host

    def counted(**kwargs):
        made.append(kwargs)
        return real(**TINY)

    monkeypatch.setattr(calibrate_mod, "calibrate_host", counted)
    analysis._host_measurement.cache_clear()
    yield made
    analysis._host_measurement.cache_clear()


@pytest.mark.parametrize("name", ["host", "CPU", " Host "])
def test_the_host_named_is_measured_once_and_said(uncalibrated, fixtures_dir, name) -> None:
    path = fixtures_dir / "hlo" / "cpu_mlp_1dev.hlo.txt"
    first = hloscope.analyze(path, chip=name)
    second = hloscope.analyze(path.read_text(), chip=name)
    assert first.chip.id == second.chip.id == "host" and first.chip.kind == "cpu"
    assert first.notes[0] == NOTE and second.notes[0] == NOTE
    assert len(uncalibrated) == 1  # (one measurement a process)
    assert first.roofline_s > 0 and first.roofline_s == second.roofline_s


def test_a_calibrated_host_is_used_as_written(uncalibrated, tmp_path, monkeypatch, fixtures_dir) -> None:
    chip = calibrate_mod.calibrate_host(**TINY)  # (counted: one)
    monkeypatch.setenv("HLOSCOPE_CONFIG_DIR", str(tmp_path / "cfg"))
    calibrate_mod.save_host_chip(chip)
    report = hloscope.analyze(fixtures_dir / "hlo" / "cpu_mlp_1dev.hlo.txt", chip="host")
    assert report.chip.hbm_bytes_per_s == chip.hbm_bytes_per_s and NOTE not in report.notes
    assert len(uncalibrated) == 1


def test_another_unknown_name_is_still_an_error(uncalibrated, fixtures_dir) -> None:
    with pytest.raises(UnknownChipError, match="unknown chip 'hots'"):
        hloscope.analyze(fixtures_dir / "hlo" / "cpu_mlp_1dev.hlo.txt", chip="hots")
    assert uncalibrated == []


def test_command_line_report_on_the_host(tmp_path, fixtures_dir) -> None:
    env = {**os.environ, "HLOSCOPE_CONFIG_DIR": str(tmp_path / "empty-config")}
    fixture = str(fixtures_dir / "hlo" / "cpu_mlp_1dev.hlo.txt")
    proc = subprocess.run([sys.executable, "-m", "hloscope", "report", fixture,
                           "--chip", "host", "--format", "json"], capture_output=True, text=True, cwd=REPO, env=env,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    doc = __import__("json").loads(proc.stdout)
    assert doc["chip"]["id"] == "host" and doc["notes"][0] == NOTE and doc["memory"]
