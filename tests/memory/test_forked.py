"""``hloscope.memory.forked``: the footprints a forked child computes are the ones the parent would, and any
failure of the child leaves the parent to compute them itself. ``hloscope report --format json`` prints the same
document with the child (the default on a machine of two cores or more) and without it
(``HLOSCOPE_ONE_PROCESS=1``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from hloscope.memory import footprint
from hloscope.parsers import parse_hlo

ROOT = Path(__file__).resolve().parents[2]
HLO = ROOT / "fixtures" / "hlo"

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the child is forked on Linux only")


def _isolated(code: str) -> str:
    """Run ``code`` in a fresh interpreter, where no thread runs (a test process has JAX's, and no child is
    forked beside them), after ``PRELUDE``; returns its stdout. It prints ``skip`` where no child is started."""
    done = subprocess.run([sys.executable, "-c", PRELUDE + code], capture_output=True, text=True, timeout=120,
                          cwd=ROOT, env={k: v for k, v in os.environ.items() if k != "HLOSCOPE_ONE_PROCESS"})
    assert done.returncode == 0, done.stderr
    if done.stdout.startswith("skip"):
        pytest.skip("no child started here (one usable core)")
    return done.stdout


PRELUDE = f"""
import os, sys
from pathlib import Path
from hloscope.memory import footprint
from hloscope.memory.forked import start_footprints
from hloscope.parsers import parse_hlo
from hloscope.roofline.chips import get_chip
HLO = Path({str(HLO)!r})
def started(path, chip):
    child = start_footprints(str(path), chip)
    if child is None:
        print("skip")
        sys.exit(0)
    return child
"""


@pytest.mark.parametrize("name", ["tpu-v5e_transformer_scan_grad.hlo.txt", "cpu_mlp_tp2.hlo.txt"])
def test_the_child_computes_the_footprint_the_parent_would(name):
    assert _isolated(f"""
chip = get_chip("tpu-v5e").per_device()
child = started(HLO / {name!r}, chip)
got = child.result()
assert got == [footprint(parse_hlo(HLO / {name!r}), chip)], got
assert got[0].hbm_capacity_bytes == float(chip.hbm_capacity_bytes)
assert child.result() is None  # (collected once)
print("ok")
""") == "ok\n"


def test_a_child_that_fails_gives_none(tmp_path):
    bad = tmp_path / "bad.hlo"
    bad.write_text("HloModule m\n\nENTRY e {\n  p = f32[2] bogus(\n}\n")
    assert _isolated(f"print(started({str(bad)!r}, None).result())") == "None\n"


def test_a_cancelled_child_is_reaped():
    assert _isolated("""
child = started(HLO / "cpu_mlp_1dev.hlo.txt", None)
pid = child.pid
child.cancel()
assert child.pid == -1 and child.result() is None
try:
    os.waitpid(pid, os.WNOHANG)
except ChildProcessError:
    print("reaped")
""") == "reaped\n"


def test_no_child_beside_other_threads_or_when_asked_for_one_process():
    assert _isolated("""
import threading
stop = threading.Event()
t = threading.Thread(target=stop.wait)
t.start()
print(start_footprints(str(HLO / "cpu_mlp_1dev.hlo.txt"), None))
stop.set()
t.join()
os.environ["HLOSCOPE_ONE_PROCESS"] = "1"
print(start_footprints(str(HLO / "cpu_mlp_1dev.hlo.txt"), None))
""") == "None\nNone\n"


def test_footprints_of_other_modules_are_not_taken():
    import hloscope

    report = hloscope.analyze(HLO / "cpu_mlp_1dev.hlo.txt", chip="h100")
    other = footprint(parse_hlo(HLO / "cpu_collectives.hlo.txt"))
    assert not report._use_memory([other])
    mine = footprint(parse_hlo(HLO / "cpu_mlp_1dev.hlo.txt"), report.chip)
    assert report._use_memory([mine]) and report.memory == [mine]
    assert report.modules["peak_bytes"].tolist() == [float(mine.total_bytes)]
    assert not report._use_memory([mine])  # (computed already)


@pytest.mark.parametrize("name", ["tpu-v5e_transformer_scan_grad.hlo.txt", "gpu-h100_mlp_train.hlo.txt"])
def test_report_json_is_the_same_with_and_without_the_child(name, tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "HLOSCOPE_ONE_PROCESS"}
    cmd = [sys.executable, "-m", "hloscope", "report", str(HLO / name), "--chip", "tpu-v5e", "--format", "json"]
    forked = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True, timeout=120)
    alone = subprocess.run(cmd, capture_output=True, text=True, env={**env, "HLOSCOPE_ONE_PROCESS": "1"},
                           check=True, timeout=120)
    assert forked.stdout == alone.stdout and '"temp_bytes"' in forked.stdout
    assert forked.stderr == alone.stderr == ""


def test_report_errors_are_the_same_with_the_child(tmp_path):
    bad = tmp_path / "bad.hlo"
    bad.write_text("HloModule m\n\nENTRY e {\n  p = f32[2] bogus(\n}\n")
    cmd = [sys.executable, "-m", "hloscope", "report", str(bad), "--chip", "tpu-v5e", "--format", "json"]
    forked = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    alone = subprocess.run(cmd, capture_output=True, text=True, timeout=120,
                           env={**os.environ, "HLOSCOPE_ONE_PROCESS": "1"})
    assert forked.returncode == alone.returncode != 0
    assert forked.stderr == alone.stderr and "bad.hlo" in forked.stderr and forked.stdout == ""



def test_the_command_line_takes_the_footprints_of_its_child():
    out = _isolated("""
import json, io, contextlib
import hloscope.memory.forked as forked
from hloscope import cli
got = []
result = forked.FootprintsInChild.result
forked.FootprintsInChild.result = lambda self: got.append(result(self)) or got[-1]
buf = io.StringIO()
with contextlib.redirect_stdout(buf):
    assert cli.main(["report", str(HLO / "tpu-v5e_transformer_scan_grad.hlo.txt"), "--chip", "tpu-v5e",
                     "--format", "json"], one_shot=True) == 0
if not got:
    print("skip")
    sys.exit(0)
assert got[0] is not None
assert json.loads(buf.getvalue())["memory"] == [fp.to_dict() for fp in got[0]]
print("taken")
""")
    assert out == "taken\n"
