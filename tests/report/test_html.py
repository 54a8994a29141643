"""The HTML report page: escaping of untrusted names, the roofline's geometry, self-containment, and a real
headless Chromium loading it (skipped where no Chromium is installed)."""

from __future__ import annotations

import math
import shutil
import struct
import subprocess
import zlib
from html.parser import HTMLParser
from pathlib import Path

import pytest

import hloscope
from hloscope.report.html import axes_for, points, render_html, roofs
from hloscope.roofline.chips import get_chip

ROOT = Path(__file__).resolve().parents[2]
HOSTILE = ROOT / "fixtures" / "hlo" / "cpu_hostile_names.hlo.txt"
GPU_TRACE = ROOT / "fixtures" / "profile" / "gpu_mlp_train_nocb"
# The scope names fixtures/make_hlo_fixtures.py puts in the op_name metadata (HOSTILE_NAMES there).
IMG = "<img src=x onerror=alert(1)>"
AMP = "&amp;\"'<b>"  # an entity, both quotes and a tag


class _Page(HTMLParser):
    """Tags, the text of the body, and what the page's scripts and resources are."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.text: list[str] = []
        self.scripts = 0
        self.attrs: list[tuple[str, str | None]] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.attrs.extend(attrs)
        self.scripts += tag == "script"

    def handle_data(self, data):
        self.text.append(data)


def _parse(page: str) -> _Page:
    p = _Page()
    p.feed(page)
    p.close()
    return p


@pytest.fixture(scope="module")
def hostile_page() -> str:
    return render_html(hloscope.analyze(str(HOSTILE), chip="tpu-v5e"))


def test_hostile_op_names_are_text_not_markup(hostile_page):
    assert "<img src=x" not in hostile_page
    assert "&lt;img src=x onerror=alert(1)&gt;" in hostile_page
    parsed = _parse(hostile_page)
    assert "img" not in parsed.tags and "b" not in parsed.tags
    assert parsed.scripts == 1  # the page's own, only
    text = "".join(parsed.text)
    assert IMG in text and AMP in text  # shown, as text (the entity not decoded into "&")
    assert not any(name.startswith("on") for name, _ in parsed.attrs)  # no event handler attribute


def test_page_is_self_contained(hostile_page):
    parsed = _parse(hostile_page)
    for name, value in parsed.attrs:
        if name in ("src", "href"):
            raise AssertionError(f"external resource {name}={value!r}")
    assert "http://" not in hostile_page.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert "https://" not in hostile_page


def test_ridges_are_peak_over_bandwidth():
    # TPU v5e spec sheet: 197 TFLOP/s bf16, 819 GB/s HBM (https://cloud.google.com/tpu/docs/v5e).
    chip = get_chip("tpu-v5e")
    ((label, peak, ridge),) = [r for r in roofs(chip) if "bf16" in r[0].split("/")]
    assert peak == pytest.approx(1.97e14)
    assert ridge == pytest.approx(1.97e14 / chip.hbm_bytes_per_s)
    assert 230 < ridge < 250
    # H100 SXM: fp8 and int8 share one roof at 1979 TFLOP/s (NVIDIA H100 datasheet, dense).
    labels = [r[0] for r in roofs(get_chip("h100"))]
    assert any("fp8" in lab and "int8" in lab for lab in labels)


def test_drawn_roof_meets_the_slope_at_the_ridge(hostile_page):
    chip = get_chip("tpu-v5e")
    report = hloscope.analyze(str(HOSTILE), chip="tpu-v5e")
    ax = axes_for(chip, points(report.ops))
    _, peak, ridge = roofs(chip)[0]  # the highest roof: where the drawn slope ends
    # The slope y = bw * x, mapped, passes through the roof's left end.
    x, y = ax.x(ridge), ax.y(chip.hbm_bytes_per_s * ridge)
    assert y == pytest.approx(ax.y(peak))
    assert f'x1="{x:.1f}" y1="{ax.y(peak):.1f}"' in hostile_page


def test_one_point_per_op_with_flops_and_time():
    report = hloscope.analyze(str(GPU_TRACE), chip="h100")
    ops = report.ops
    time_s = ops["measured_s"].where(ops["measured_s"] > 0).fillna(ops["roofline_s"])
    expected = int(((ops["flops"] > 0) & (ops["intensity"] > 0) & ops["intensity"].map(math.isfinite)
                    & (time_s > 0)).sum())
    page = render_html(report)
    assert expected >= 10
    assert page.count("<circle class=op ") == expected
    # Traced points sit at achieved FLOP/s: the largest GEMM (5.5e11... FLOPs in ~0.35 ms) below the bf16 roof.
    pts = points(report.ops)
    assert pts["traced"].all()
    gemm = pts[pts["opcode"] == "custom-call"]
    assert ((gemm["flops_per_s"] > 5e14) & (gemm["flops_per_s"] < 9.9e14)).all()


def _png_is_not_blank(path: Path) -> bool:
    """Decode an 8-bit RGB(A) PNG with the standard library and look for more than one pixel value."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, header = 8, b"", None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        chunk = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", chunk)
        elif kind == b"IDAT":
            idat += chunk
        pos += 12 + length
    width, height, depth, color = header[:4]
    assert depth == 8 and color in (2, 6)
    raw = zlib.decompress(idat)
    stride = width * (3 if color == 2 else 4) + 1
    # Distinct raw bytes across rows is enough: a blank page is one color (filters of a flat image are 0s).
    values = {raw[i * stride + 1:(i + 1) * stride] for i in range(0, height, max(height // 50, 1))}
    return len(values) > 1


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"]


@pytest.mark.skipif(_chromium() is None, reason="no Chromium installed (Debian package: chromium)")
@pytest.mark.parametrize("source", ["hostile", "gpu"])
def test_chromium_loads_the_page_without_errors(tmp_path, source):
    report = (hloscope.analyze(str(HOSTILE), chip="tpu-v5e") if source == "hostile"
              else hloscope.analyze(str(GPU_TRACE), chip="h100"))
    page = tmp_path / "report.html"
    page.write_text(render_html(report, title="hloscope test page"), encoding="utf-8")
    base = [_chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'profile'}"]
    console = ["--enable-logging=stderr", "--v=0"]  # console messages and uncaught errors -> ":CONSOLE" lines
    control = tmp_path / "control.html"
    control.write_text("<html><body><script>console.error('control'); no_such_function();</script></body></html>")
    seen = subprocess.run([*base, *console, "--dump-dom", control.as_uri()], capture_output=True, text=True,
                          timeout=90).stderr
    assert ":CONSOLE" in seen and "no_such_function" in seen  # the check below can see an error
    run = subprocess.run([*base, *console, "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=90)
    dom = run.stdout
    assert ":CONSOLE" not in run.stderr, [line for line in run.stderr.splitlines() if ":CONSOLE" in line]
    # The page's script sets data-ready at its end and turns any script error into the title.
    assert 'data-ready="1"' in dom
    assert "<title>hloscope test page</title>" in dom
    assert "<img" not in dom  # the hostile names stayed text in the live DOM too
    shot = tmp_path / "shot.png"
    subprocess.run([*base, f"--screenshot={shot}", "--window-size=1100,900", page.as_uri()],
                   capture_output=True, timeout=90)
    assert shot.exists() and _png_is_not_blank(shot)
