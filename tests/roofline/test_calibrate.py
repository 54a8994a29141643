"""Tests for hloscope.roofline.calibrate (host measurement with JAX on CPU, atomic host.toml)."""

from __future__ import annotations

import datetime as dt
import math
import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")  # before anything imports jax; libtpu may be installed

import pytest

from hloscope.roofline import calibrate as calibrate_mod
from hloscope.roofline.calibrate import HOST_CHIP_ID, calibrate_host, save_host_chip
from hloscope.roofline.chips import (
    CHIPS,
    HOST_FILE_NAME,
    ChipSpecError,
    all_chips,
    get_chip,
    load_chip_file,
    load_user_chips,
)

TINY = {"repeats": 2, "size": 64, "memory_bytes": 1 << 20}


@pytest.fixture(scope="module")
def host():
    return calibrate_host(**TINY)


def test_calibration_returns_positive_finite_numbers(host):
    assert host.id == HOST_CHIP_ID == "host"
    assert host.kind == "cpu" and "cpu" in host.aliases  # JAX's CPU device_kind
    assert set(host.peak_flops_per_s) == {"f32", "bf16"}
    values = [
        *host.peak_flops_per_s.values(), host.hbm_bytes_per_s, host.pcie_bytes_per_s, host.dcn_bytes_per_s
    ]
    for value in values:
        assert math.isfinite(value) and value > 0
    assert host.hbm_capacity_bytes > 0
    # Copies between CPU "devices" read and write every byte: half the read+write bandwidth.
    assert host.pcie_bytes_per_s == pytest.approx(host.hbm_bytes_per_s / 2)
    assert host.peer_link_bytes_per_s == host.pcie_bytes_per_s
    assert host.ici_link_bytes_per_s is None and host.nvlink_bytes_per_s is None
    # A 2-core CPU does well under 1e14 FLOP/s and 1e13 B/s; anything above means broken timing.
    assert host.peak_flops_per_s["f32"] < 1e14 and host.hbm_bytes_per_s < 1e13


def test_calibration_sources_say_what_when_and_where(host):
    today = dt.datetime.now(dt.timezone.utc).date()
    for key in ("peak_flops_per_s.f32", "peak_flops_per_s.bf16", "hbm_bytes_per_s"):
        text = host.sources[key]
        assert text.startswith("measured by hloscope calibrate on ")
        assert str(today) in text or str(today - dt.timedelta(days=1)) in text
        assert calibrate_mod.cpu_model_name() in text
    assert "[64,64]" in host.sources["peak_flops_per_s.f32"]
    assert "memory copies" in host.sources["pcie_bytes_per_s"]


def test_saved_host_toml_round_trips(host, tmp_path, monkeypatch):
    monkeypatch.setenv("HLOSCOPE_CONFIG_DIR", str(tmp_path / "cfg"))
    path = save_host_chip(host)
    assert path == tmp_path / "cfg" / HOST_FILE_NAME and path.is_file()
    assert load_chip_file(path) == {"host": host}
    assert load_user_chips() == {"host": host}
    merged = all_chips()
    assert get_chip("cpu", merged) == host
    assert set(CHIPS) < set(merged)
    assert [p.name for p in path.parent.iterdir()] == [HOST_FILE_NAME]  # no temp files left behind


def test_save_replaces_atomically(host, tmp_path, monkeypatch):
    target = tmp_path / "host.toml"
    target.write_text("# previous calibration\n", encoding="utf-8")

    def failing_replace(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(calibrate_mod.os, "replace", failing_replace)
    with pytest.raises(OSError, match="disk full"):
        save_host_chip(host, target)
    assert target.read_text(encoding="utf-8") == "# previous calibration\n"  # old file intact
    assert [p.name for p in tmp_path.iterdir()] == ["host.toml"]  # temp file removed
    monkeypatch.undo()

    save_host_chip(host, target)
    assert load_chip_file(target)["host"] == host


def test_saved_file_is_validated_on_load(host, tmp_path):
    path = save_host_chip(host, tmp_path / "host.toml")
    text = path.read_text(encoding="utf-8")
    path.write_text(text.replace("hbm_bytes_per_s = ", "hbm_bytes_per_s = -", 1), encoding="utf-8")
    with pytest.raises(ChipSpecError) as info:
        load_chip_file(path)
    assert (info.value.chip, info.value.field) == ("host", "hbm_bytes_per_s")


@pytest.mark.parametrize(
    "kwargs",
    [{"repeats": 0}, {"size": 0}, {"memory_bytes": 2}, {"dtypes": ()}, {"dtypes": ("f64",)}],
)
def test_bad_arguments(kwargs):
    with pytest.raises(ValueError):
        calibrate_host(**{**TINY, **kwargs})


def test_single_dtype():
    chip = calibrate_host(**TINY, dtypes=("f32",))
    assert set(chip.peak_flops_per_s) == {"f32"}
    assert chip.peak_flops_for("bf16") == (chip.peak_flops_per_s["f32"], True)
