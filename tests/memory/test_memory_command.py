"""``hloscope memory`` on an HLO text file or an XLA dump directory parses and walks the modules without costing
them (``cli._footprints``, ``analysis.hlo_modules_of``): the same footprints as ``Report.memory`` of a full
analysis, the same modules in the same order and names, the same errors -- and no pandas in the process.

The footprints' own numbers are held to XLA's ``compiled.memory_analysis()`` in test_footprint.py; here the
expectation for each input is what the full analysis (the path this command took before) gives, and for the
dump dir, the modules its files' headers name.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

import hloscope
from hloscope.analysis import ModuleChoiceError, hlo_modules_of
from hloscope.cli import main

ROOT = Path(__file__).resolve().parents[2]
HLO = ROOT / "fixtures" / "hlo"
DUMP = ROOT / "fixtures" / "dump" / "flax_mlp_grad"
TEXTS = ["cpu_transformer_scan_grad.hlo.txt", "tpu-v5e_collectives.hlo.txt", "gpu-h100_mlp_train.hlo.txt"]


def _command_json(capsys, *args: str) -> dict:
    assert main(["memory", *args, "--format", "json"]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("name", TEXTS)
def test_a_text_file_gives_the_full_analysis_footprints(name, capsys):
    path = HLO / name
    doc = _command_json(capsys, str(path), "--chip", "h100")
    report = hloscope.analyze(path, chip="h100")
    assert doc["chip"] == "h100"
    assert doc["modules"] == [fp.to_dict() for fp in report.memory]
    assert [m["module"] for m in doc["modules"]] == [re.match(r"HloModule (\S+?),", path.read_text()).group(1)]


def test_a_dump_dir_gives_every_module_in_file_order(capsys):
    doc = _command_json(capsys, str(DUMP), "--chip", "tpu-v5e")
    report = hloscope.analyze(DUMP, chip="tpu-v5e")
    assert doc["modules"] == [fp.to_dict() for fp in report.memory]
    files = sorted(DUMP.glob("*after_optimizations.txt"))
    assert len(doc["modules"]) == len(files) > 1
    assert [m.name for m in hlo_modules_of(DUMP)] == [m.name for m in report.hlo_modules]


def test_a_dump_dir_module_is_picked_by_name(capsys):
    doc = _command_json(capsys, str(DUMP), "--chip", "tpu-v5e", "--module", "module_0006")
    assert [m["module"] for m in doc["modules"]] == ["jit_stage"]  # (module_0006.jit_stage.cpu_after_...)
    assert doc["modules"] == [fp.to_dict() for fp in hloscope.analyze(DUMP, chip="tpu-v5e",
                                                                       module="module_0006").memory]


def test_errors_name_the_flag_and_the_input(capsys):
    assert main(["memory", str(DUMP), "--chip", "tpu-v5e", "--module", "no_such_module"]) == 2
    err = capsys.readouterr().err
    assert "--module" in err and "no_such_module" in err
    with pytest.raises(ModuleChoiceError):
        hlo_modules_of(DUMP, "no_such_module")
    assert main(["memory", str(HLO / TEXTS[0])]) == 2  # no chip: the HLO text names none
    assert "chip" in capsys.readouterr().err


def test_a_profile_is_not_read_as_hlo():
    assert hlo_modules_of(ROOT / "fixtures" / "profile") is None


def test_the_command_does_not_import_pandas(tmp_path):
    out = tmp_path / "m.json"
    probe = ("import sys\nfrom hloscope.cli import main\n"
             f"assert main(['memory', {str(HLO / TEXTS[0])!r}, '--chip', 'h100', '--format', 'json', "
             f"'-o', {str(out)!r}]) == 0\nprint('pandas' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, check=True)
    assert done.stdout.strip() == "False"
    assert json.loads(out.read_text())["modules"][0]["module"]
