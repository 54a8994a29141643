"""``hloscope._atomic.write_file``: a regular file is replaced whole or not at all; a device, a pipe or a link
target is written where it is, never replaced."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from hloscope._atomic import write_file

REPO = Path(__file__).resolve().parents[1]


def _no_replace(monkeypatch) -> None:
    """Make a replace fail loudly: a device must never be replaced (as root, /dev/null would become a file)."""
    def refuse(src, dst, *a, **k):
        raise AssertionError(f"os.replace({src!r}, {dst!r}) on a path that is not a regular file")

    monkeypatch.setattr(os, "replace", refuse)


def test_a_new_file_gets_the_text_and_opens_mode(tmp_path) -> None:
    target = tmp_path / "new.json"
    assert write_file(target, lambda s: s.write("héllo\n")) == target
    assert target.read_text(encoding="utf-8") == "héllo\n"
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(target.stat().st_mode) == 0o666 & ~umask  # (not mkstemp's 0600)
    assert os.listdir(tmp_path) == ["new.json"]


def test_an_existing_file_keeps_its_mode_and_is_replaced_whole(tmp_path) -> None:
    target = tmp_path / "old.json"
    target.write_text("old")
    target.chmod(0o640)
    write_file(target, lambda s: s.write("new"))
    assert target.read_text() == "new" and stat.S_IMODE(target.stat().st_mode) == 0o640


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path) -> None:
    target = tmp_path / "keep.json"
    target.write_text("precious")

    def half(stream) -> None:
        stream.write("half of a rep")
        raise RuntimeError("the writer failed")

    with pytest.raises(RuntimeError, match="writer failed"):
        write_file(target, half)
    assert target.read_text() == "precious"
    assert os.listdir(tmp_path) == ["keep.json"]


def test_a_link_stays_a_link_to_the_new_text(tmp_path) -> None:
    (tmp_path / "real").mkdir()
    real = tmp_path / "real" / "report.json"
    real.write_text("old")
    link = tmp_path / "link.json"
    link.symlink_to(real)
    assert write_file(link, lambda s: s.write("new")) == real
    assert link.is_symlink() and real.read_text() == "new"


def test_dev_null_is_written_to_not_replaced(monkeypatch) -> None:
    null = Path(os.devnull)
    if not null.exists() or not stat.S_ISCHR(null.stat().st_mode):
        pytest.skip(f"{null} is not a character device here")
    _no_replace(monkeypatch)
    write_file(null, lambda s: s.write("x" * 10_000))
    assert stat.S_ISCHR(null.stat().st_mode)


def test_a_named_pipe_is_written_to_not_replaced(tmp_path, monkeypatch) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()), daemon=True)
    reader.start()
    _no_replace(monkeypatch)
    write_file(fifo, lambda s: s.write("through the pipe\n"))
    reader.join(10)
    assert got == [b"through the pipe\n"]
    assert stat.S_ISFIFO(fifo.stat().st_mode)


def test_a_directory_is_an_error_and_left_alone(tmp_path) -> None:
    target = tmp_path / "adir"
    target.mkdir()
    with pytest.raises(OSError):
        write_file(target, lambda s: s.write("x"))
    assert target.is_dir() and os.listdir(tmp_path) == ["adir"]


def test_report_to_a_pipe_from_the_command_line(tmp_path, fixtures_dir) -> None:
    """``hloscope report -o PIPE`` (a shell's ``-o >(gzip > r.gz)`` hands the command such a path): the whole
    JSON comes through and the pipe stays a pipe."""
    fifo = tmp_path / "report.pipe"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()), daemon=True)
    reader.start()
    fixture = str(fixtures_dir / "hlo" / "cpu_mlp_1dev.hlo.txt")
    proc = subprocess.run([sys.executable, "-m", "hloscope", "report", fixture,
                           "--chip", "tpu-v5e", "--format", "json", "-o", str(fifo)],
                          capture_output=True, text=True, cwd=REPO, timeout=120)
    reader.join(10)
    assert proc.returncode == 0, proc.stderr
    assert got and got[0].startswith(b'{\n "schema": "hloscope.report/3"') and got[0].endswith(b"}\n")
    assert stat.S_ISFIFO(fifo.stat().st_mode)


def test_a_missing_directory_is_named_not_a_temporary_file(tmp_path) -> None:
    target = tmp_path / "no" / "such" / "report.json"
    with pytest.raises(FileNotFoundError) as err:
        write_file(target, lambda s: s.write("x"))
    assert err.value.filename == str(target.parent)


def test_an_unwritable_directory_is_named(tmp_path, monkeypatch) -> None:
    import tempfile

    def refused(*a, **k):
        raise PermissionError(13, "Permission denied", str(tmp_path / ".report.json.abc.tmp"))

    monkeypatch.setattr(tempfile, "mkstemp", refused)
    with pytest.raises(PermissionError) as err:
        write_file(tmp_path / "report.json", lambda s: s.write("x"))
    assert err.value.filename == str(tmp_path)


@pytest.mark.parametrize("where", ["a directory", "a missing directory", "an unwritable directory"])
def test_the_command_line_says_what_is_wrong_with_its_output(tmp_path, fixtures_dir, capsys, monkeypatch,
                                                             where) -> None:
    """``-o`` that cannot be written: one line naming the path and why, exit 3, no traceback; a directory or a
    missing one before any analysis."""
    from hloscope import cli

    analyzed = []
    real = cli._with_status
    monkeypatch.setattr(cli, "_with_status", lambda path, work: analyzed.append(path) or real(path, work))
    output = {"a directory": tmp_path, "a missing directory": tmp_path / "missing" / "r.json",
              "an unwritable directory": tmp_path / "r.json"}[where]
    if where == "an unwritable directory":
        import tempfile

        def refused(*a, **k):
            raise PermissionError(13, "Permission denied", str(tmp_path / ".r.json.x.tmp"))

        monkeypatch.setattr(tempfile, "mkstemp", refused)
    rc = cli.main(["report", str(fixtures_dir / "hlo" / "cpu_mlp_1dev.hlo.txt"), "--chip", "tpu-v5e", "--format",
                   "json", "-o", str(output)])
    err = capsys.readouterr().err
    assert rc == cli.EXIT_PATH
    assert err.startswith(f"hloscope: cannot write {output}: ") and err.count("\n") == 1, err
    assert {"a directory": "it is a directory", "a missing directory": f"no such directory {output.parent}",
            "an unwritable directory": f"Permission denied ({tmp_path})"}[where] in err
    assert bool(analyzed) == (where == "an unwritable directory")
