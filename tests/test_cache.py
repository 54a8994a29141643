"""hloscope._cache: a value kept between processes for exactly the bytes it was derived from, and the parsed
built-in chip table kept with it (hloscope.roofline.chip_files.load_builtin_chip_file)."""

from __future__ import annotations

import datetime
import marshal
import os
import tomllib
import zlib
from pathlib import Path

import pytest

from hloscope import _cache
from hloscope.roofline import chip_files
from hloscope.roofline.chip_files import builtin_chips_file, load_builtin_chip_file, load_chip_file


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("HLOSCOPE_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_a_value_comes_back_only_for_the_same_bytes(cache):
    assert _cache.load("x", b"abc") is None  # nothing kept yet
    value = {"a": [1, 2.5, "s"], "b": {"c": True, "d": None}}
    _cache.store("x", b"abc", value)
    assert _cache.load("x", b"abc") == value
    assert list(_cache.load("x", b"abc")) == ["a", "b"]  # key order kept
    assert _cache.load("x", b"abd") is None
    assert _cache.load("y", b"abc") is None
    assert [p.name for p in cache.iterdir()] == [f"x-{zlib.crc32(b'abc'):08x}.marshal"]


def test_an_entry_for_other_bytes_under_the_same_name_is_not_read(cache):
    # A file under the name of b"abc" (as a crc32 collision would make) that was derived from other bytes.
    _cache.store("x", b"other", 1)
    (other,) = cache.iterdir()
    other.rename(_cache._entry("x", b"abc"))
    assert _cache.load("x", b"abc") is None


@pytest.mark.parametrize("content", [b"", b"not marshal \x00\xff", marshal.dumps([1, 2, 3]),
                                     marshal.dumps(("hloscope-cache/0", b"abc", 1))])
def test_a_corrupt_or_foreign_entry_reads_as_none(cache, content):
    cache.mkdir()
    _cache._entry("x", b"abc").write_bytes(content)
    assert _cache.load("x", b"abc") is None
    _cache.store("x", b"abc", 7)  # and is replaced
    assert _cache.load("x", b"abc") == 7


def test_no_cache_when_the_directory_is_set_empty_or_cannot_be_made(tmp_path, monkeypatch):
    monkeypatch.setenv("HLOSCOPE_CACHE_DIR", "")
    assert _cache.cache_dir() is None
    _cache.store("x", b"abc", 1)
    assert _cache.load("x", b"abc") is None
    blocker = tmp_path / "file"
    blocker.write_text("a file where the directory would go")
    monkeypatch.setenv("HLOSCOPE_CACHE_DIR", str(blocker / "cache"))
    _cache.store("x", b"abc", 1)  # ignored
    assert _cache.load("x", b"abc") is None
    assert blocker.read_text() == "a file where the directory would go"


def test_a_value_marshal_cannot_keep_is_not_stored(cache):
    _cache.store("x", b"abc", {"when": datetime.date(2026, 11, 29)})
    assert _cache.load("x", b"abc") is None
    assert not cache.exists() or not any(cache.iterdir())


def test_default_directory_follows_xdg(monkeypatch, tmp_path):
    monkeypatch.delenv("HLOSCOPE_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert _cache.cache_dir() == tmp_path / "hloscope"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert _cache.cache_dir() == tmp_path / ".cache" / "hloscope"
    monkeypatch.setattr(os.path, "expanduser", lambda path: path)  # (no home directory: "~" stays "~")
    assert _cache.cache_dir() is None
    _cache.store("x", b"abc", 1)
    assert _cache.load("x", b"abc") is None


def test_builtin_table_from_the_cache_is_the_table_tomllib_reads(cache, monkeypatch):
    expected = load_chip_file(builtin_chips_file(), with_builtins=False)
    assert load_builtin_chip_file() == expected  # cold: parsed by tomllib, then kept
    assert len(list(cache.iterdir())) == 1

    def no_toml(*args, **kwargs):
        raise AssertionError("tomllib read a table the cache holds")

    monkeypatch.setattr(tomllib, "loads", no_toml)
    warm = load_builtin_chip_file()
    assert warm == expected
    assert list(warm) == list(expected)
    # A chip file the cache does not hold still goes through tomllib.
    with pytest.raises(AssertionError, match="tomllib read"):
        load_chip_file(builtin_chips_file(), with_builtins=False)


def test_builtin_file_is_the_file_beside_the_module():
    path = builtin_chips_file()
    assert path.is_file()
    assert path.parent == Path(chip_files.__file__).parent
