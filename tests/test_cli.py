"""The ``hloscope`` command line: output formats, atomic writes and exit codes."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hloscope.cli import main

ROOT = Path(__file__).resolve().parents[1]
HLO = ROOT / "fixtures" / "hlo" / "tpu-v5e_mlp_sharded.hlo.txt"
CORRUPT = ROOT.parent / "shared" / "corpus" / "xplane" / "openxla__xprof__xprof__convert__test_xplanes__tpu_inference_2.xplane.pb"


def test_report_json_to_file(tmp_path):
    out = tmp_path / "r.json"
    out.write_text("previous report")
    assert main(["report", str(HLO), "--chip", "tpu-v5e", "--format", "json", "-o", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert doc["chip"]["id"] == "tpu-v5e" and doc["modules"][0]["name"] == "jit_mlp_train_step"
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]  # no temp file left behind


def test_report_table_and_csv(capsys):
    assert main(["report", str(HLO), "--chip", "tpu-v5e", "--top", "3"]) == 0
    assert "all-reduce" in capsys.readouterr().out
    assert main(["report", str(HLO), "--chip", "tpu-v5e", "--format", "csv"]) == 0
    assert capsys.readouterr().out.startswith("module,computation,instruction,opcode")


@pytest.mark.parametrize(("args", "code", "message"), [
    (["report", "no/such/path"], 3, "no such file"),
    (["report", str(HLO)], 2, "--chip"),
    (["report", str(HLO), "--chip", "tpu-v9"], 2, "closest match"),
])
def test_exit_codes(args, code, message, capsys):
    assert main(args) == code
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_corrupted_xplane_is_a_clean_error(capsys):
    if not CORRUPT.exists():
        pytest.skip("shared corpus not present")
    assert main(["report", str(CORRUPT)]) == 2
    assert "not an XSpace protobuf" in capsys.readouterr().err


def test_chips_json_fields(capsys):
    assert main(["chips", "--format", "json"]) == 0
    chips = {c["id"]: c for c in json.loads(capsys.readouterr().out)}
    v5e = chips["tpu-v5e"]
    assert v5e["peak_flops_per_s"]["bf16"] == 1.97e14 and v5e["hbm_bytes_per_s"] == 8.1e11
    for key in ("aliases", "hbm_capacity_bytes", "sources"):
        assert key in v5e


def test_python_dash_m():
    proc = subprocess.run([sys.executable, "-m", "hloscope", "--help"], capture_output=True, text=True)
    assert proc.returncode == 0 and "report" in proc.stdout


@pytest.mark.parametrize("fmt", ["json", "table"])
def test_a_reader_gone_is_a_quiet_exit_141(fmt, tmp_path):
    """``hloscope report ... | head``: the reader closes the pipe; the command stops with status 141 (128 + SIGPIPE,
    as a shell reports a process that signal ended) and no ``BrokenPipeError`` traceback, in either format."""
    fixture = Path(__file__).resolve().parents[1] / "fixtures" / "hlo" / "cpu_collectives.hlo.txt"
    proc = subprocess.Popen([sys.executable, "-m", "hloscope", "report", str(fixture), "--chip", "tpu-v5e",
                             "--format", fmt], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()  # (before the command writes anything: every write finds no reader)
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 141, err
    assert "Traceback" not in err and "BrokenPipeError" not in err, err


@pytest.mark.parametrize("fmt", ["json", "table"])
def test_a_static_report_loads_no_pandas(fmt, tmp_path):
    """``hloscope report FILE`` of HLO text, as JSON or as the terminal table with advice: the analysis keeps its
    tables as columns and neither output makes a DataFrame, so the process never imports pandas (~0.2 s of it).
    The output is the one the DataFrames give (tests/test_report_identity.py; tests/test_columns.py)."""
    out = tmp_path / "out"
    code = ("import sys; from hloscope.cli import main; "
            f"rc = main(['report', {str(HLO)!r}, '--chip', 'tpu-v5e', '--format', {fmt!r}, '--advice', "
            f"'-o', {str(out)!r}]); print(rc, 'pandas' in sys.modules)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert proc.stdout.split() == ["0", "False"], proc.stderr
    assert "jit_mlp_train_step" in out.read_text()


_BLAS_PROBE = """
import os, sys
sys.argv = ["hloscope", "chips"]
from hloscope.cli import console_main
assert "numpy" not in sys.modules  # (console_main must run before numpy's import for the setting to count)
console_main()
import numpy
print(os.environ["OPENBLAS_NUM_THREADS"], len(os.listdir("/proc/self/task")))
"""


@pytest.mark.skipif(not os.path.isdir("/proc/self/task") or (os.cpu_count() or 1) < 2,
                    reason="counts a process's threads in /proc on a machine of two cores or more")
@pytest.mark.parametrize("user_setting, threads", [(None, 1), ("2", 2)])
def test_the_command_line_keeps_openblas_to_one_thread_unless_told(user_setting: str | None, threads: int) -> None:
    """``console_main`` sets ``OPENBLAS_NUM_THREADS=1`` before numpy is imported (no command does linear algebra in
    numpy, and OpenBLAS's idle pool spins on the core the report's child uses): numpy's import then starts no
    thread beside the main one; a user's own setting is kept (two threads: the main one and one of the pool)."""
    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS")}
    if user_setting is not None:
        env["OPENBLAS_NUM_THREADS"] = user_setting
    out = subprocess.run([sys.executable, "-c", _BLAS_PROBE], capture_output=True, text=True, check=True,
                         env=env).stdout.split()
    assert out[-2:] == [user_setting or "1", str(threads)]


@pytest.mark.parametrize("argv", [
    ["report", "x.hlo", "--chip", "h100", "--format", "json", "-o", "r.json", "--top", "3", "--hlo", "a", "b"],
    ["memory", "x.hlo", "--chip", "tpu-v5e", "--fail-if-not-fits"],
    ["diff", "a.json", "b.json", "--fail-on", "roofline_s:+5%", "--fail-on", "wire_bytes:+0"],
    ["chips", "--format", "json"],
    ["calibrate", "--no-save"],
])
def test_one_command_parser_parses_as_the_whole(argv):
    """``build_parser(command)`` builds that command's subparser alone: a command line that starts with it parses
    to the same namespace as with every subparser built, and its usage names the same options."""
    from hloscope.cli import build_parser

    only, whole = build_parser(argv[0]), build_parser()
    assert vars(only.parse_args(argv)) == vars(whole.parse_args(argv))
    assert set(only._subparsers._group_actions[0].choices) == {argv[0]}
    assert (only._subparsers._group_actions[0].choices[argv[0]].format_help()
            == whole._subparsers._group_actions[0].choices[argv[0]].format_help())


def test_help_and_unknown_command_name_every_command(capsys):
    for argv in (["--help"], ["no-such-command"]):
        with pytest.raises(SystemExit):
            main(argv)
        text = capsys.readouterr()
        for command in ("report", "memory", "diff", "chips", "calibrate"):
            assert command in text.out + text.err, (argv, command)


def test_a_one_shot_json_report_freezes_the_collector_before_it_forks(monkeypatch):
    """What the process holds before the memory model's child forks (the imports) is frozen then, so neither
    process's collections walk it again (the process ends after the report)."""
    import gc

    from hloscope import _gc, cli

    seen = []
    monkeypatch.setattr(cli, "_footprints_in_child", lambda path, chip: seen.append(gc.get_freeze_count()))
    monkeypatch.setattr(_gc, "_exiting", False)
    gc.unfreeze()
    try:
        assert main(["report", str(HLO), "--chip", "tpu-v5e", "--format", "json", "-o", os.devnull],
                    one_shot=True) == 0
    finally:
        gc.unfreeze()  # (this test's process goes on)
    assert len(seen) == 1 and seen[0] > 1000
