"""Tests for hloscope.roofline.chips.

Expected numbers are typed in from "How to Scale Your Model" (Austin et al. 2025) and vendor spec sheets, or
derived here from the book's formulas; they are never read back from the module under test.
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import numpy as np
import pytest

from hloscope.roofline import chips as C
from hloscope.roofline.chips import (
    CHIPS,
    ChipSpec,
    ChipSpecError,
    UnknownChipError,
    all_chips,
    chip_to_dict,
    chips_to_toml,
    config_dir,
    get_chip,
    get_device_spec,
    load_chip_file,
    load_user_chips,
    roofline_flops_per_s,
)

# Book, Part 2 TPU Specs table (TPU v5e row) and Part 1's two-chip example.
BOOK_V5E_BF16_FLOPS_PER_S = 1.97e14
BOOK_V5E_INT8_OPS_PER_S = 3.94e14
BOOK_V5E_HBM_BYTES_PER_S = 8.1e11
BOOK_V5E_ICI_ONE_WAY_BYTES_PER_S = 4.5e10
# NVIDIA H100 SXM datasheet: 1,979 TFLOPS bf16 "with sparsity"; dense is half. 3.35 TB/s HBM.
NVIDIA_H100_BF16_SPARSE_FLOPS_PER_S = 1.979e15
NVIDIA_H100_HBM_BYTES_PER_S = 3.35e12


# --------------------------------------------------------------------------------------------------
# Critical intensities (Part 1 "Rooflines")
# --------------------------------------------------------------------------------------------------


def test_v5e_bf16_critical_intensity_is_about_240():
    v5e = get_chip("tpu-v5e")
    intensity = v5e.critical_intensity("bf16")
    assert intensity == pytest.approx(BOOK_V5E_BF16_FLOPS_PER_S / BOOK_V5E_HBM_BYTES_PER_S, rel=1e-9)
    # The book's rule of thumb: "B > 1.97e14 / 8.20e11 = 240".
    assert intensity == pytest.approx(240, rel=0.02)


def test_v5e_int8_critical_intensity_is_about_486():
    v5e = get_chip("tpu-v5e")
    assert v5e.critical_intensity("int8") == pytest.approx(
        BOOK_V5E_INT8_OPS_PER_S / BOOK_V5E_HBM_BYTES_PER_S, rel=1e-9
    )
    assert v5e.critical_intensity("s8") == pytest.approx(486, rel=0.01)


def test_h100_bf16_critical_intensity_is_about_295():
    h100 = get_chip("h100")
    intensity = h100.critical_intensity("bf16")
    assert 295 <= intensity <= 298  # book Part 1 Q5: 9.89e14 / 3.35e12 = 295
    dense = NVIDIA_H100_BF16_SPARSE_FLOPS_PER_S / 2
    assert intensity == pytest.approx(dense / NVIDIA_H100_HBM_BYTES_PER_S, rel=1e-3)


def test_b200_bf16_critical_intensity_is_about_281():
    # Book Part 12 Q3: "For B200 its 2250e12 / 8e12 = 281".
    assert get_chip("b200").critical_intensity("bf16") == pytest.approx(2250e12 / 8e12, rel=1e-9)


def test_gpu_peaks_are_dense_not_sparsity_doubled():
    h100 = get_chip("h100")
    assert h100.peak_flops_per_s["bf16"] == pytest.approx(NVIDIA_H100_BF16_SPARSE_FLOPS_PER_S / 2, rel=1e-3)
    assert h100.peak_flops_per_s["fp8"] == pytest.approx(3.958e15 / 2, rel=1e-3)
    assert h100.peak_flops_per_s["int8"] == pytest.approx(3.958e15 / 2, rel=1e-3)
    assert get_chip("a100").peak_flops_per_s["bf16"] == pytest.approx(312e12)  # 624 TFLOPS sparse
    assert get_chip("b200").peak_flops_per_s["fp4"] == pytest.approx(9e15)  # 18 PFLOPS sparse
    assert get_chip("h200").peak_flops_per_s == h100.peak_flops_per_s  # same GH100 compute
    assert get_chip("h200").hbm_bytes_per_s == pytest.approx(4.8e12)


# --------------------------------------------------------------------------------------------------
# The memory -> compute flip of a matmul on a v5e (Part 1 "Matrix multiplication", Question 2)
# --------------------------------------------------------------------------------------------------

D = F = 16384


def _first_compute_bound_batch(chip: ChipSpec, flops, hbm_bytes) -> int:
    """Smallest B in 1..4096 whose roofline FLOP/s reach the bf16 peak (found with the library's curve)."""
    batch = np.arange(1, 4097, dtype=float)
    intensity = flops(batch) / hbm_bytes(batch)
    attainable = roofline_flops_per_s(chip, "bf16", intensity)
    peak, _ = chip.peak_flops_for("bf16")
    assert attainable.shape == batch.shape and np.all(attainable <= peak)
    reached = np.flatnonzero(attainable >= peak * (1 - 1e-12))
    assert reached.size, "never compute-bound"
    return int(batch[reached[0]])


def test_bf16_matmul_flips_to_compute_bound_near_batch_240():
    v5e = get_chip("TPU v5 lite")
    found = _first_compute_bound_batch(
        v5e,
        flops=lambda b: 2 * b * D * F,
        hbm_bytes=lambda b: 2 * (b * D + D * F + b * F),  # bf16 X[B,D], Y[D,F] in, Z[B,F] out
    )
    # By hand: B*D*F / (B*D + D*F + B*F) = I with D = F gives B = I*D / (D - 2*I).
    i_crit = BOOK_V5E_BF16_FLOPS_PER_S / BOOK_V5E_HBM_BYTES_PER_S
    by_hand = i_crit * D / (D - 2 * i_crit)
    assert found == math.ceil(by_hand)
    assert found == pytest.approx(240, rel=0.05)  # the book's "batch size > 240" rule


def test_int8_weights_with_bf16_activations_flip_near_batch_120():
    # Book Q2: bf16[B,D] * int8[D,F] -> bf16[B,F]; compute stays bf16 (so the bf16 peak), weight bytes halve.
    v5e = get_chip("tpu-v5e")
    found = _first_compute_bound_batch(
        v5e,
        flops=lambda b: 2 * b * D * F,
        hbm_bytes=lambda b: 2 * b * D + 1 * D * F + 2 * b * F,
    )
    # By hand: 2*B*D^2 / (4*B*D + D^2) = I gives B = I*D / (2*D - 4*I), half the bf16 flip.
    i_crit = BOOK_V5E_BF16_FLOPS_PER_S / BOOK_V5E_HBM_BYTES_PER_S
    by_hand = i_crit * D / (2 * D - 4 * i_crit)
    assert found == math.ceil(by_hand)
    assert found == pytest.approx(120, rel=0.05)  # the book: "B > 120"


def test_two_chip_example_is_comm_bound_below_d_8755():
    # Part 1 "Network communication rooflines": X[B,D] . Y[D,F] split over D on two chips; each does
    # 2*B*(D/2)*F FLOPs and sends its 2*B*F-byte bf16 partial sum one way over one ICI link.
    v5e = get_chip("tpu-v5e")
    peak, _ = v5e.peak_flops_for("bf16")
    link = v5e.ici_link_bytes_per_s
    assert link == BOOK_V5E_ICI_ONE_WAY_BYTES_PER_S
    # Compute-bound iff B*D*F/peak > 2*B*F/link, i.e. D/2 > peak/link: "D > 8755".
    d_crit = 2 * peak / link
    assert d_crit == pytest.approx(8755, abs=1)
    b, f = 512, 16384

    def times(d: int) -> tuple[float, float]:
        return 2 * b * d * f / (2 * peak), 2 * b * f / link

    t_math, t_comm = times(8192)
    assert t_comm > t_math  # D = 8192 < 8755: communication-bound
    t_math, t_comm = times(9216)
    assert t_math > t_comm  # D = 9216 > 8755: compute-bound


# --------------------------------------------------------------------------------------------------
# Interconnect
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("chip_id", "one_way", "links", "axes"),
    [
        # Book Part 2 ICI table (one-way per link) and "TPU Networking" (4 or 6 neighbours).
        ("tpu-v4", 4.5e10, 6, 3),
        ("tpu-v5e", 4.5e10, 4, 2),
        ("tpu-v5p", 9e10, 6, 3),
        ("tpu-v6e", 9e10, 4, 2),
        ("tpu7x", 9e10, 6, 3),
    ],
)
def test_tpu_ici(chip_id, one_way, links, axes):
    chip = get_chip(chip_id)
    assert chip.kind == "tpu"
    assert chip.ici_link_bytes_per_s == pytest.approx(one_way)
    assert chip.ici_link_bidi_bytes_per_s == pytest.approx(2 * one_way)  # book's "bidi" column
    assert chip.ici_links_per_chip == links and chip.ici_torus_axes == axes
    assert chip.ici_bidirectional and chip.ici_wraparound
    assert chip.nvlink_bytes_per_s is None and chip.peer_link_bytes_per_s == chip.ici_link_bytes_per_s


@pytest.mark.parametrize(
    ("chip_id", "nvlink_one_way", "ib_per_gpu"),
    [
        ("a100", 300e9, 200e9 / 8),  # NVLink 600 GB/s total; ConnectX-6 200 Gb/s per GPU
        ("h100", 450e9, 400e9 / 8),  # NVLink 900 GB/s total; ConnectX-7 400 Gb/s per GPU
        ("h200", 450e9, 400e9 / 8),
        ("b200", 900e9, 400e9 / 8),
    ],
)
def test_gpu_interconnect(chip_id, nvlink_one_way, ib_per_gpu):
    chip = get_chip(chip_id)
    assert chip.kind == "gpu"
    assert chip.nvlink_bytes_per_s == pytest.approx(nvlink_one_way)
    assert chip.nvlink_domain_size == 8
    assert chip.dcn_bytes_per_s == pytest.approx(ib_per_gpu)
    assert chip.ici_link_bytes_per_s is None and chip.peer_link_bytes_per_s == chip.nvlink_bytes_per_s


def test_capacity_units():
    assert get_chip("tpu-v5e").hbm_capacity_bytes == 16 * 2**30  # 16 GiB
    assert get_chip("tpu-v5p").hbm_capacity_bytes == 95 * 2**30
    assert get_chip("tpu7x").hbm_capacity_bytes == 192 * 2**30
    assert get_chip("h100").hbm_capacity_bytes == 80 * 10**9  # datasheet "80GB", decimal
    assert get_chip("tpu-v5e").on_chip_memory_bytes["vmem"] == 128 * 2**20  # book: 128 MiB VMEM


def test_tpu7x_per_device_view_halves_the_chip():
    chip = get_chip("TPU7x")
    assert chip.devices_per_chip == 2
    device = get_device_spec("TPU7x")
    assert device.devices_per_chip == 1 and device.id != chip.id and device.aliases == ()
    assert device.peak_flops_per_s["bf16"] == pytest.approx(2307e12 / 2)  # Google: 2307 TFLOPs per chip
    assert device.hbm_bytes_per_s == pytest.approx(7380e9 / 2)
    assert device.hbm_capacity_bytes == 96 * 2**30
    assert device.critical_intensity("bf16") == pytest.approx(chip.critical_intensity("bf16"))
    v5e = get_chip("tpu-v5e")
    assert v5e.per_device() is v5e


# --------------------------------------------------------------------------------------------------
# Lookup
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "chip_id"),
    [
        ("TPU v5 lite", "tpu-v5e"),
        ("TPU v5e", "tpu-v5e"),
        ("tpu_v5e", "tpu-v5e"),
        ("  tpu-V5E ", "tpu-v5e"),
        ("TPU v4", "tpu-v4"),
        ("TPU v5", "tpu-v5p"),
        ("TPU v5p", "tpu-v5p"),
        ("TPU v6 lite", "tpu-v6e"),
        ("Trillium", "tpu-v6e"),
        ("TPU7x", "tpu7x"),
        ("TPU 7x", "tpu7x"),
        ("ironwood", "tpu7x"),
        ("NVIDIA A100-SXM4-80GB", "a100"),
        ("NVIDIA H100 80GB HBM3", "h100"),
        ("nvidia h100 80gb hbm3", "h100"),
        ("NVIDIA H200", "h200"),
        ("NVIDIA B200", "b200"),
        ("H100", "h100"),
    ],
)
def test_alias_lookup(name, chip_id):
    assert get_chip(name).id == chip_id


def test_builtin_names_do_not_collide():
    owner: dict[str, str] = {}
    for chip in CHIPS.values():
        for name in {chip.id, *chip.aliases}:
            key = "".join(ch for ch in name.casefold() if ch.isalnum())
            assert owner.setdefault(key, chip.id) == chip.id, f"{name!r} names {owner[key]} and {chip.id}"


def test_unknown_chip_lists_ids_and_closest_match():
    with pytest.raises(UnknownChipError) as info:
        get_chip("TPU v5 lyte")
    err = info.value
    assert isinstance(err, ValueError)
    for chip_id in ("tpu-v4", "tpu-v5e", "tpu-v5p", "tpu-v6e", "tpu7x", "a100", "h100", "h200", "b200"):
        assert chip_id in str(err)
    assert err.closest == "tpu-v5e" and "closest match: 'tpu-v5e'" in str(err)
    with pytest.raises(UnknownChipError, match="no close match"):
        get_chip("qqqqqqqqqqqqqqqqqqqq")
    with pytest.raises(UnknownChipError):
        get_chip("")


def test_extra_chips_shadow_builtins():
    mine = dataclasses.replace(CHIPS["h100"], name="capped H100", hbm_bytes_per_s=2e12)
    extra = {"h100": mine}
    assert get_chip("NVIDIA H100 80GB HBM3", extra) is mine
    assert get_chip("tpu-v5e", extra) is CHIPS["tpu-v5e"]


# --------------------------------------------------------------------------------------------------
# Peaks and dtype fallbacks
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("chip_id", "dtype", "expected", "fallback"),
    [
        ("tpu-v5e", "bf16", 1.97e14, False),
        ("tpu-v5e", "f16", 1.97e14, False),  # bf16 key covers f16
        ("tpu-v5e", "s8", 3.94e14, False),
        ("tpu-v5e", "u8", 3.94e14, False),
        ("tpu-v5e", "s4", 7.88e14, False),  # JAX tpu_info: v5e int4 7.88e14
        ("tpu-v5e", "f8e4m3fn", 1.97e14, True),  # no fp8 figure -> bf16
        ("tpu-v5e", "f64", 1.97e14, True),  # f64 -> f32 (one bf16 pass at default precision)
        ("tpu-v4", "s4", 2.75e14, True),  # int4 -> int8
        ("tpu7x", "s8", 2.307e15, True),  # Ironwood has no int8 MXU mode -> bf16
        ("tpu7x", "f8e5m2", 4.614e15, False),
        ("h100", "s4", 1.979e15, True),  # Hopper has no int4 tensor cores -> int8
        ("h100", "f64", 6.7e13, False),
        ("h100", "f32", 4.945e14, False),  # TF32 dense (989 sparse / 2)
        ("h100", "s32", 4.945e14, True),  # wide integers always flagged
        ("b200", "f4e2m1fn", 9e15, False),
        ("b200", "f6e2m3fn", 4.5e15, False),  # FP6 at the FP8 rate
        ("a100", "float8_e4m3fn", 3.12e14, True),  # Ampere has no fp8 -> bf16
        ("a100", "bfloat16", 3.12e14, False),
    ],
)
def test_peak_flops_for(chip_id, dtype, expected, fallback):
    peak, flagged = get_chip(chip_id).peak_flops_for(dtype)
    assert peak == pytest.approx(expected)
    assert flagged is fallback


def test_peaks_are_always_positive():
    dtypes = [
        "pred", "s1", "u2", "s4", "u4", "s8", "u8", "s16", "u32", "s64", "f4e2m1fn", "f6e3m2fn", "f8e3m4",
        "f8e4m3b11fnuz", "f8e5m2fnuz", "f8e8m0fnu", "bf16", "f16", "f32", "f64", "c64", "c128",
    ]
    for chip in CHIPS.values():
        for dtype in dtypes:
            peak, _ = chip.peak_flops_for(dtype)
            assert peak > 0 and math.isfinite(peak)


def test_unknown_dtype_is_rejected():
    with pytest.raises(ValueError, match="unknown dtype"):
        get_chip("h100").peak_flops_for("tuple")


def test_roofline_curve():
    v5e = get_chip("tpu-v5e")
    # Memory-bound: intensity * bandwidth. Compute-bound: the peak.
    assert roofline_flops_per_s(v5e, "bf16", 100) == pytest.approx(100 * 8.1e11)
    assert roofline_flops_per_s(v5e, "bf16", 1000) == pytest.approx(1.97e14)
    curve = roofline_flops_per_s(v5e, "bf16", [0, 10, 1e6])
    assert isinstance(curve, np.ndarray)
    np.testing.assert_allclose(curve, [0.0, 8.1e12, 1.97e14])
    grid = roofline_flops_per_s(v5e, "int8", np.full((2, 3), 1e4))
    assert grid.shape == (2, 3) and np.all(grid == 3.94e14)
    with pytest.raises(ValueError):
        roofline_flops_per_s(v5e, "bf16", -1.0)
    with pytest.raises(ValueError):
        roofline_flops_per_s(v5e, "bf16", [1.0, float("nan")])


# --------------------------------------------------------------------------------------------------
# Provenance, JSON, validation
# --------------------------------------------------------------------------------------------------


def test_every_builtin_value_has_a_source():
    for chip in CHIPS.values():
        for f in dataclasses.fields(ChipSpec):
            value = getattr(chip, f.name)
            if f.name in ("id", "sources") or value is None:
                continue
            if f.name in ("peak_flops_per_s", "on_chip_memory_bytes"):
                for key in value:
                    assert chip.source_for(f.name, key), (chip.id, f.name, key)
            elif f.name not in ("ici_bidirectional", "ici_wraparound") or value:
                assert chip.source_for(f.name), (chip.id, f.name)


def test_chip_to_dict_is_json_ready():
    data = json.loads(json.dumps(chip_to_dict(get_chip("tpu-v5e"))))
    assert data["id"] == "tpu-v5e"
    assert "TPU v5 lite" in data["aliases"]
    assert data["peak_flops_per_s"]["bf16"] == pytest.approx(1.97e14)
    assert data["hbm_bytes_per_s"] == pytest.approx(8.1e11)
    assert data["hbm_capacity_bytes"] == 16 * 2**30
    assert "hbm_bytes" not in data  # the old name is read, never written
    assert data["ici_link_bytes_per_s"] == pytest.approx(4.5e10)
    assert data["ici_link_bidi_bytes_per_s"] == pytest.approx(9e10)
    assert data["dcn_bytes_per_s"] == pytest.approx(3.125e9)
    assert data["pcie_bytes_per_s"] == pytest.approx(1.6e10)
    assert data["nvlink_bytes_per_s"] is None
    assert data["critical_intensity_flops_per_byte"]["bf16"] == pytest.approx(1.97e14 / 8.1e11)
    assert data["sources"]["hbm_bytes_per_s"]


def test_chipspec_validates_values():
    base = CHIPS["h100"]
    with pytest.raises(ChipSpecError, match="hbm_bytes_per_s") as info:
        dataclasses.replace(base, hbm_bytes_per_s=-1.0)
    assert info.value.chip == "h100" and info.value.field == "hbm_bytes_per_s"
    with pytest.raises(ChipSpecError, match="bf16"):
        dataclasses.replace(base, peak_flops_per_s={"int8": 1e15})
    with pytest.raises(ChipSpecError, match="peak_flops_per_s.bf16"):
        dataclasses.replace(base, peak_flops_per_s={"bf16": 0.0})
    with pytest.raises(ChipSpecError, match="nvlink_bytes_per_s"):
        dataclasses.replace(base, nvlink_bytes_per_s=True)  # a bool is not a number
    with pytest.raises(ChipSpecError, match="peak_flops_per_s.fp16"):
        dataclasses.replace(base, peak_flops_per_s={"bf16": 1e15, "fp16": 1e15})
    with pytest.raises(ChipSpecError, match="kind"):
        dataclasses.replace(base, kind="fpga")
    with pytest.raises(dataclasses.FrozenInstanceError):
        base.hbm_capacity_bytes = 1  # type: ignore[misc]
    with pytest.raises(TypeError):
        base.peak_flops_per_s["bf16"] = 1.0  # type: ignore[index]


# --------------------------------------------------------------------------------------------------
# Chip files
# --------------------------------------------------------------------------------------------------


def _write(tmp_path: Path, text: str, name: str = "chips.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_config_dir_precedence(monkeypatch, tmp_path):
    monkeypatch.setenv("HLOSCOPE_CONFIG_DIR", str(tmp_path / "explicit"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    assert config_dir() == tmp_path / "explicit"
    monkeypatch.delenv("HLOSCOPE_CONFIG_DIR")
    assert config_dir() == tmp_path / "xdg" / "hloscope"
    monkeypatch.delenv("XDG_CONFIG_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert config_dir() == tmp_path / "home" / ".config" / "hloscope"


def test_override_and_new_chips(tmp_path, monkeypatch):
    _write(
        tmp_path,
        """
# An H100 whose measured HBM bandwidth is lower than the datasheet's.
[chips.h100]
hbm_bytes_per_s = 3.0e12

[chips.h100.sources]
hbm_bytes_per_s = "our STREAM run, 2026-11-01"

# A new chip derived from a built-in: only the bf16 peak changes.
[chips.h100-capped]
base = "NVIDIA H100 80GB HBM3"
name = "H100 at 500 W"
aliases = ["capped"]

[chips.h100-capped.peak_flops_per_s]
bf16 = 7.0e14

# A chip defined from scratch.
[chips.mychip]
name = "My accelerator"
kind = "other"
hbm_bytes_per_s = 1e12
hbm_capacity_bytes = 17179869184
pcie_bytes_per_s = 3.2e10

[chips.mychip.peak_flops_per_s]
bf16 = 5e14
int8 = 1e15
""",
    )
    monkeypatch.setenv("HLOSCOPE_CONFIG_DIR", str(tmp_path))
    user = load_user_chips()
    assert list(user) == ["h100", "h100-capped", "mychip"]

    h100 = user["h100"]
    assert h100.hbm_bytes_per_s == 3.0e12
    assert h100.peak_flops_per_s == CHIPS["h100"].peak_flops_per_s  # untouched fields inherited
    assert h100.aliases == CHIPS["h100"].aliases
    assert h100.source_for("hbm_bytes_per_s") == "our STREAM run, 2026-11-01"
    assert h100.source_for("nvlink_bytes_per_s") == CHIPS["h100"].source_for("nvlink_bytes_per_s")

    capped = user["h100-capped"]
    assert capped.peak_flops_per_s["bf16"] == 7.0e14
    assert capped.peak_flops_per_s["fp8"] == CHIPS["h100"].peak_flops_per_s["fp8"]  # merged per entry
    assert capped.hbm_bytes_per_s == CHIPS["h100"].hbm_bytes_per_s  # from the base, not the override
    assert capped.aliases == ("capped",)  # the base's device names stay with the base
    assert str(tmp_path / "chips.toml") in capped.source_for("peak_flops_per_s", "bf16")

    mine = user["mychip"]
    assert mine.critical_intensity("bf16") == pytest.approx(500)
    assert mine.peak_flops_for("s4") == (1e15, True)
    assert mine.source_for("hbm_bytes_per_s") == f"user chip file {tmp_path / 'chips.toml'}"

    merged = all_chips()
    assert set(CHIPS) <= set(merged)
    assert get_chip("NVIDIA H100 80GB HBM3", merged).hbm_bytes_per_s == 3.0e12
    assert get_chip("capped", merged).id == "h100-capped"
    assert get_chip("tpu-v5e", merged) is CHIPS["tpu-v5e"]


def test_no_user_files_means_no_user_chips(tmp_path):
    assert load_user_chips(tmp_path) == {}
    assert all_chips(tmp_path) == dict(CHIPS)


def test_host_chip_can_be_a_base(tmp_path):
    host = dataclasses.replace(CHIPS["h100"], id="host", aliases=("cpu",), kind="cpu")
    (tmp_path / "host.toml").write_text(chips_to_toml([host]), encoding="utf-8")
    _write(tmp_path, '[chips.host-fast]\nbase = "host"\nhbm_bytes_per_s = 9e12\n')
    user = load_user_chips(tmp_path)
    assert user["host"] == host
    assert user["host-fast"].hbm_bytes_per_s == 9e12
    assert user["host-fast"].peak_flops_per_s == host.peak_flops_per_s


@pytest.mark.parametrize("chip", list(CHIPS.values()), ids=list(CHIPS))
def test_toml_round_trip_of_builtins(tmp_path, chip):
    renamed = dataclasses.replace(chip, id="copy")  # a fresh id, so no implicit base fills anything in
    path = _write(tmp_path, chips_to_toml([renamed]))
    assert load_chip_file(path) == {"copy": renamed}


@pytest.mark.parametrize(
    ("text", "chip", "field", "words"),
    [
        pytest.param(
            '[chips.foo]\nname = "x"\nhbm_bytes_per_s = 1e12\n\n[chips.foo.peak_flops_per_s]\nbf16 = 1e14\n',
            "foo", "hbm_capacity_bytes", "missing required field", id="missing-field",
        ),
        pytest.param(
            "[chips.foo]\nhbm_bytes_per_s = -2e12\nhbm_capacity_bytes = 100\n"
            "[chips.foo.peak_flops_per_s]\nbf16 = 1e14\n",
            "foo", "hbm_bytes_per_s", "positive", id="negative-value",
        ),
        pytest.param(
            '[chips.foo]\nhbm_bytes_per_s = "fast"\nhbm_capacity_bytes = 100\n'
            "[chips.foo.peak_flops_per_s]\nbf16 = 1e14\n",
            "foo", "hbm_bytes_per_s", "number", id="non-numeric",
        ),
        pytest.param(
            "[chips.foo]\nhbm_bytes_per_s = 1e12\nhbm_capacity_bytes = 100\n[chips.foo.peak_flops_per_s]\nbf16 = 0\n",
            "foo", "peak_flops_per_s.bf16", "positive", id="zero-peak",
        ),
        pytest.param(
            "[chips.foo]\nhbm_bytes_per_s = 1e12\nhbm_capacity_bytes = 100.5\n"
            "[chips.foo.peak_flops_per_s]\nbf16 = 1\n",
            "foo", "hbm_capacity_bytes", "whole number", id="fractional-bytes",
        ),
        pytest.param(  # the old key is still read, and an error names the key the file uses
            "[chips.foo]\nhbm_bytes_per_s = 1e12\nhbm_bytes = 100.5\n"
            "[chips.foo.peak_flops_per_s]\nbf16 = 1\n",
            "foo", "hbm_bytes", "whole number", id="fractional-bytes-old-key",
        ),
        pytest.param(
            "[chips.foo]\nhbm_bytes_per_s = 1e12\nhbm_bytes = 100\nhbm_capacity_bytes = 100\n"
            "[chips.foo.peak_flops_per_s]\nbf16 = 1\n",
            "foo", "hbm_bytes", "old name", id="old-and-new-key",
        ),
        pytest.param(
            "[chips.h100]\nhbm_bandwidth = 3e12\n", "h100", "hbm_bandwidth", "unknown field", id="typo",
        ),
        pytest.param(
            '[chips.foo]\nbase = "h1000"\n', "foo", "base", "closest match: 'h100'", id="unknown-base",
        ),
        pytest.param(
            '[chips.a]\nbase = "b"\n[chips.b]\nbase = "a"\n', "a", "base", "cycle", id="base-cycle",
        ),
        pytest.param(
            '[chips.h100]\nici_wraparound = "yes"\n', "h100", "ici_wraparound", "true or false",
            id="bad-bool",
        ),
    ],
)
def test_bad_chip_files_name_file_chip_and_field(tmp_path, text, chip, field, words):
    path = _write(tmp_path, text, "bad.toml")
    with pytest.raises(ChipSpecError) as info:
        load_chip_file(path)
    err = info.value
    assert isinstance(err, ValueError)
    assert (err.path, err.chip, err.field) == (path, chip, field)
    message = str(err)
    for part in (str(path), f"chip {chip!r}", f"field {field!r}", words):
        assert part in message


def test_toml_syntax_error_reports_line_column_chip_and_field(tmp_path):
    path = _write(
        tmp_path,
        "[chips.foo]\nhbm_capacity_bytes = 100\nhbm_bytes_per_s = 3.0e12e\n"
        "[chips.foo.peak_flops_per_s]\nbf16 = 1e14\n",
        "syntax.toml",
    )
    with pytest.raises(ChipSpecError) as info:
        load_chip_file(path)
    err = info.value
    assert err.line == 3 and err.column is not None
    message = str(err)
    assert str(path) in message and "line 3" in message and "column" in message
    assert err.chip == "foo" and err.field == "hbm_bytes_per_s"
    assert "chip 'foo'" in message and "field 'hbm_bytes_per_s'" in message


def test_syntax_error_in_a_subtable_names_the_entry(tmp_path):
    path = _write(tmp_path, "[chips.bar]\nhbm_capacity_bytes = 1\n[chips.bar.peak_flops_per_s]\nint8 = = 3\n")
    with pytest.raises(ChipSpecError) as info:
        load_chip_file(path)
    assert (info.value.chip, info.value.field, info.value.line) == ("bar", "peak_flops_per_s.int8", 4)


def test_unreadable_and_non_utf8_files(tmp_path):
    with pytest.raises(ChipSpecError, match="cannot read"):
        load_chip_file(tmp_path / "missing.toml")
    path = tmp_path / "latin1.toml"
    path.write_bytes(b'[chips.x]\nname = "\xe9"\n')
    with pytest.raises(ChipSpecError, match="UTF-8"):
        load_chip_file(path)


def test_ids_are_case_and_punctuation_insensitive(tmp_path):
    path = _write(tmp_path, "[chips.TPU_V5E]\nhbm_bytes_per_s = 8.2e11\n")
    loaded = load_chip_file(path)
    assert list(loaded) == ["tpu-v5e"]  # an override of the built-in, under its canonical id
    assert loaded["tpu-v5e"].hbm_bytes_per_s == 8.2e11
    assert loaded["tpu-v5e"].peak_flops_per_s == CHIPS["tpu-v5e"].peak_flops_per_s
    path = _write(tmp_path, "[chips.tpu-v5e]\n[chips.TPU_V5E]\n", "twice.toml")
    with pytest.raises(ChipSpecError, match="defined twice"):
        load_chip_file(path)


def test_module_import_does_not_pull_in_jax():
    import subprocess
    import sys

    code = "import sys, hloscope.roofline.chips; print('jax' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
    assert C.__name__ == "hloscope.roofline.chips"
