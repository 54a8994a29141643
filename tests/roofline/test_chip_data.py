"""The built-in chip table as data: the packaged TOML file, the old ``hbm_bytes`` key, the AMD Instinct entries.

Expected AMD numbers are typed in from AMD's documents (ROCm "MI300 series microarchitecture" peak table, the
MI325X and MI355X product pages) with the arithmetic written out here; they are never read back from hloscope.
"""

from __future__ import annotations

import importlib.resources
import json
import subprocess
import sys

import pytest

from hloscope.roofline.chips import (
    CHIPS,
    ChipSpecError,
    UnknownChipError,
    all_chips,
    builtin_chips,
    builtin_chips_file,
    chip_from_dict,
    chip_to_dict,
    chips_to_toml,
    get_chip,
    get_device_spec,
    load_chip_file,
    load_user_chips,
)

TB = 1e12
GB = 1e9
GiB = 2**30


# --------------------------------------------------------------------------------------------------
# (a) The packaged table goes through the user-file reader
# --------------------------------------------------------------------------------------------------


def _packaged_file():
    return importlib.resources.files("hloscope.roofline") / "chips.toml"


def test_packaged_file_read_as_a_user_file_is_exactly_the_builtin_table():
    path = _packaged_file()
    assert path.is_file()
    on_its_own = load_chip_file(path, with_builtins=False)
    assert on_its_own == dict(CHIPS)
    assert list(on_its_own) == list(CHIPS)  # same order, too
    # Read as an ordinary user file (built-ins available as implicit bases), every table overrides its
    # built-in with identical values, so nothing changes either.
    assert load_chip_file(path) == dict(CHIPS)
    assert str(builtin_chips_file()) == str(path)


def test_builtin_table_is_loaded_once_and_cached():
    assert builtin_chips() is builtin_chips()
    assert get_chip("h100") is CHIPS["h100"]


def test_no_builtin_value_carries_the_default_user_file_source():
    # The reader labels a value without a source "user chip file <path>"; the packaged table must source all.
    for chip in CHIPS.values():
        for key, text in chip.sources.items():
            assert not text.startswith("user chip file"), (chip.id, key)


def test_importing_chips_reads_no_file_and_chip_files_imports_first():
    code = "import hloscope.roofline.chips as c; print(c._builtin_state.cache_info().currsize)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "0"  # nothing read until a chip is looked up
    code = (
        "from hloscope.roofline.chip_files import builtin_chips_file, load_chip_file\n"
        "print(len(load_chip_file(builtin_chips_file(), with_builtins=False)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert int(out.stdout) == len(CHIPS)


# --------------------------------------------------------------------------------------------------
# (b) The old key hbm_bytes (HBM capacity) still loads
# --------------------------------------------------------------------------------------------------

# A host.toml as `hloscope calibrate` wrote it before hbm_bytes was renamed hbm_capacity_bytes.
OLD_HOST_TOML = """\
# hloscope chip file written by `hloscope calibrate`; re-run it to refresh.
format_version = 1

[chips.host]
name = "host CPU: test (2 logical CPUs)"
kind = "cpu"
aliases = ["cpu"]
hbm_bytes_per_s = 2.0e10
hbm_bytes = 8589934592
devices_per_chip = 1
pcie_bytes_per_s = 1.0e10
dcn_bytes_per_s = 1.0e10

[chips.host.peak_flops_per_s]
f32 = 1.0e11

[chips.host.sources]
hbm_bytes = "physical RAM (sysconf SC_PHYS_PAGES * SC_PAGE_SIZE or /proc/meminfo); measured on 2026-01-01"
hbm_bytes_per_s = "measured on 2026-01-01"
"""


def test_old_style_host_file_with_hbm_bytes_still_loads(tmp_path):
    (tmp_path / "host.toml").write_text(OLD_HOST_TOML, encoding="utf-8")
    # A chips.toml that builds on the old host file, itself also using the old key.
    (tmp_path / "chips.toml").write_text(
        '[chips.host-big]\nbase = "host"\nhbm_bytes = 17179869184\n', encoding="utf-8"
    )
    user = load_user_chips(tmp_path)
    host = user["host"]
    assert host.hbm_capacity_bytes == 8 * GiB
    assert host.source_for("hbm_capacity_bytes").startswith("physical RAM")
    assert "hbm_bytes" not in host.sources
    assert user["host-big"].hbm_capacity_bytes == 16 * GiB
    assert get_chip("cpu", all_chips(tmp_path)) == host
    # Written back, only the new name appears.
    text = chips_to_toml([host])
    assert "hbm_capacity_bytes = 8589934592" in text and "hbm_bytes =" not in text
    assert load_chip_file(_write(tmp_path, text))["host"] == host


def _write(tmp_path, text):
    path = tmp_path / "rewritten.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_report_json_chip_with_old_key_still_loads():
    data = json.loads(json.dumps(chip_to_dict(get_chip("tpu-v5e"))))
    data["hbm_bytes"] = data.pop("hbm_capacity_bytes")
    data["sources"]["hbm_bytes"] = data["sources"].pop("hbm_capacity_bytes")
    chip = chip_from_dict(data)
    assert chip == get_chip("tpu-v5e")
    assert chip.hbm_capacity_bytes == 16 * GiB
    both = dict(data, hbm_capacity_bytes=data["hbm_bytes"])
    with pytest.raises(ChipSpecError, match="old name") as info:
        chip_from_dict(both)
    assert info.value.field == "hbm_bytes" and info.value.chip == "tpu-v5e"
    bad = dict(data, hbm_bytes=-1)
    with pytest.raises(ChipSpecError) as info:
        chip_from_dict(bad)
    assert info.value.field == "hbm_bytes"  # named as the dict spells it


# --------------------------------------------------------------------------------------------------
# (c) AMD Instinct: critical intensity from the spec sheets, worked by hand
# --------------------------------------------------------------------------------------------------

# AMD ROCm docs, "AMD Instinct MI300 series microarchitecture", peak-performance table: Matrix BF16 1307.4
# TFLOPS (= 2048 FLOPs/clock/CU x 304 CUs x 2.1 GHz); "peak memory bandwidth of the GPU is 5.3 TB per second".
MI300X_BF16_FLOPS_PER_S = 2048 * 304 * 2.1e9  # 1.3074e15
MI300X_HBM_BYTES_PER_S = 5.3 * TB
# AMD MI300X product page: FP16/BF16 2614.9 TFLOPS "with structured sparsity"; dense is half.
MI300X_BF16_SPARSE_FLOPS_PER_S = 2614.9e12
# AMD MI325X: same compute as MI300X (1307.4 TFLOPS bf16), HBM3E at 6 TB/s.
MI325X_BF16_FLOPS_PER_S = 1307.4e12
MI325X_HBM_BYTES_PER_S = 6.0 * TB
# AMD MI355X product page: FP16/BF16 2.5 PFLOPS dense (5 PFLOPS with structured sparsity), 8 TB/s HBM3E.
MI355X_BF16_FLOPS_PER_S = 2.5e15
MI355X_HBM_BYTES_PER_S = 8.0 * TB


@pytest.mark.parametrize(
    ("chip_id", "by_hand"),
    [
        ("mi300x", 1307.4e12 / 5.3e12),  # = 246.7 FLOPs per HBM byte
        ("mi325x", 1307.4e12 / 6.0e12),  # = 217.9
        ("mi355x", 2.5e15 / 8.0e12),  # = 312.5
    ],
)
def test_amd_bf16_critical_intensity(chip_id, by_hand):
    assert get_chip(chip_id).critical_intensity("bf16") == pytest.approx(by_hand, rel=1e-6)


def test_amd_spec_sheet_numbers():
    mi300x, mi325x, mi355x = get_chip("mi300x"), get_chip("mi325x"), get_chip("mi355x")
    assert mi300x.peak_flops_per_s["bf16"] == pytest.approx(MI300X_BF16_FLOPS_PER_S, rel=1e-4)
    assert mi300x.peak_flops_per_s["bf16"] == pytest.approx(MI300X_BF16_SPARSE_FLOPS_PER_S / 2, rel=1e-4)
    assert mi300x.critical_intensity("bf16") == pytest.approx(
        MI300X_BF16_FLOPS_PER_S / MI300X_HBM_BYTES_PER_S, rel=1e-4
    )
    assert mi300x.peak_flops_per_s["fp8"] == pytest.approx(2614.9e12)  # Matrix FP8, dense
    assert mi300x.peak_flops_per_s["f32"] == pytest.approx(163.4e12)  # Matrix FP32, not TF32's 653.7
    assert mi325x.peak_flops_per_s == mi300x.peak_flops_per_s  # same CDNA 3 compute
    assert mi325x.critical_intensity("bf16") == pytest.approx(
        MI325X_BF16_FLOPS_PER_S / MI325X_HBM_BYTES_PER_S, rel=1e-6
    )
    assert mi355x.critical_intensity("bf16") == pytest.approx(
        MI355X_BF16_FLOPS_PER_S / MI355X_HBM_BYTES_PER_S, rel=1e-6
    )
    assert mi355x.peak_flops_for("f4e2m1fn") == (pytest.approx(10.1e15), False)  # MXFP4 10.1 PFLOPS
    assert mi300x.peak_flops_for("f4e2m1fn") == (pytest.approx(2614.9e12), True)  # CDNA 3: no fp4 -> fp8
    # Capacities in GiB, as AMD's ROCm "GPU hardware specifications" table states them.
    assert [c.hbm_capacity_bytes for c in (mi300x, mi325x, mi355x)] == [192 * GiB, 256 * GiB, 288 * GiB]


@pytest.mark.parametrize(
    ("chip_id", "link_bidi_bytes_per_s"),
    [
        ("mi300x", 128 * GB),  # 16 lanes x 32 Gb/s per Infinity Fabric link, both directions
        ("mi325x", 128 * GB),
        ("mi355x", 153.6 * GB),
    ],
)
def test_amd_infinity_fabric_is_seven_links_to_seven_peers(chip_id, link_bidi_bytes_per_s):
    chip = get_chip(chip_id)
    assert chip.kind == "gpu" and chip.nvlink_domain_size == 8
    assert chip.nvlink_bytes_per_s == pytest.approx(7 * link_bidi_bytes_per_s / 2)  # egress, one direction
    assert chip.peer_link_bytes_per_s == chip.nvlink_bytes_per_s
    assert chip.pcie_bytes_per_s == pytest.approx(64 * GB)  # PCIe Gen5 x16, each way
    assert chip.dcn_bytes_per_s == pytest.approx(400e9 / 8)  # one 400 Gb/s NIC per GPU


# --------------------------------------------------------------------------------------------------
# (d) Device kinds
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("device_kind", "chip_id"),
    [
        ("AMD Instinct MI300X", "mi300x"),
        ("MI300X", "mi300x"),
        ("amd instinct mi300x", "mi300x"),
        ("AMD Instinct MI300X VF", "mi300x"),  # SR-IOV virtual function (cloud VMs)
        ("gfx942:sramecc+:xnack-", "mi300x"),  # XLA's name when HIP reports none
        ("gfx942", "mi300x"),
        ("AMD Instinct MI325X", "mi325x"),
        ("AMD Instinct MI325X VF", "mi325x"),
        ("AMD Instinct MI355X", "mi355x"),
        ("gfx950:sramecc+:xnack-", "mi355x"),
        ("NVIDIA H100 80GB HBM3", "h100"),
        ("NVIDIA A100-SXM4-80GB", "a100"),
        ("NVIDIA H200", "h200"),
        ("NVIDIA B200", "b200"),
        ("TPU v5 lite", "tpu-v5e"),
    ],
)
def test_get_device_spec_resolves_device_kinds(device_kind, chip_id):
    assert get_device_spec(device_kind).id == chip_id


def test_unmapped_amd_parts_stay_unknown():
    # An MI350X has the MI355X's silicon at a lower clock: not silently scored as an MI355X.
    with pytest.raises(UnknownChipError) as info:
        get_device_spec("AMD Instinct MI350X")
    assert "AMD Instinct MI350X" in str(info.value)
    with pytest.raises(UnknownChipError):
        get_device_spec("gfx90a:sramecc+:xnack-")  # MI200 series: not in the table


def test_user_file_overrides_an_amd_chip(tmp_path):
    (tmp_path / "chips.toml").write_text(
        "[chips.MI300X]\nhbm_bytes_per_s = 4.3e12\n\n[chips.MI300X.sources]\n"
        'hbm_bytes_per_s = "our STREAM run"\n',
        encoding="utf-8",
    )
    merged = all_chips(tmp_path)
    mine = get_device_spec("AMD Instinct MI300X", merged)
    assert mine.hbm_bytes_per_s == 4.3e12 and mine.source_for("hbm_bytes_per_s") == "our STREAM run"
    assert mine.peak_flops_per_s == CHIPS["mi300x"].peak_flops_per_s
    assert get_device_spec("AMD Instinct MI300X").hbm_bytes_per_s == 5.3e12  # built-in untouched
