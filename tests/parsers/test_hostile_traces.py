"""Hostile trace input (issue #20, "any input, no traceback"): every reader of profiles either reads what it
can -- skipping a bad event, and saying so in a note -- or raises a ``TraceError`` that names the file, where
(event index, character or byte offset) and what was expected.

Inputs are written here: small Chrome traces (``_trace``), the bundled XSpace fixtures mutated, gzip bombs
made of concatenated gzip members (a few hundred kB that inflate to 64 MiB), and paths no system can look up.
The skip-or-reject policy is in the docstring of ``hloscope/parsers/_chrome_trace.py``; the inflation cap in
``hloscope/parsers/_trace_dir.py`` and ``docs/chrome_trace.md``.
"""

from __future__ import annotations

import errno
import gzip
import json
import math
import os
import time
import tracemalloc
from pathlib import Path

import pytest

from hloscope.errors import ConfigError, HloParseError, HloscopeError, UnreadablePathError
from hloscope.parsers import parse_hlo
from hloscope.parsers import _json_stream as js
from hloscope.parsers._chrome_trace import read_chrome_events
from hloscope.parsers._trace_dir import INFLATE_ENV, find_xplane_files, inflate_limit
from hloscope.parsers._trace_error import TraceError
from hloscope.parsers._xspace_file import open_xspace, read_xspace
from hloscope.parsers.events import read_trace

REPO = Path(__file__).resolve().parents[2]
GPU_XPLANE = REPO / "fixtures" / "profile" / "gpu_mlp_train" / "plugins" / "profile" / "run0" / "localhost.xplane.pb"
LINE = "%add.1 = f32[8,128]{1,0:T(8,128)} add(f32[8,128]{1,0:T(8,128)} %p.0, f32[8,128]{1,0:T(8,128)} %p.1)"

# ---------------------------------------------------------------------------------------------------------
# Chrome traces


def _op(name: str, ts, dur, **args) -> dict:
    return {"ph": "X", "pid": 3, "tid": 3, "ts": ts, "dur": dur, "name": name,
            "args": {"long_name": LINE, "model_flops": "1024", "bytes_accessed": "12288", **args}}


def _trace(*extra) -> dict:
    """One TPU device with a module run holding three good ops (``add.1``-``add.3``), then ``extra`` events
    (event indices 6, 7, ...)."""
    events = [
        {"ph": "M", "pid": 3, "name": "process_name", "args": {"name": "/device:TPU:0"}},
        {"ph": "M", "pid": 3, "tid": 2, "name": "thread_name", "args": {"name": "XLA Modules"}},
        {"ph": "M", "pid": 3, "tid": 3, "name": "thread_name", "args": {"name": "XLA Ops"}},
        {"ph": "X", "pid": 3, "tid": 2, "ts": 0.0, "dur": 100.0, "name": "jit_f(7)", "args": {}},
        _op("add.1", 1.0, 2.0),
        _op("add.2", 4.0, 2.0),
        *extra,
        _op("add.3", 7.0, 2.0),
    ]
    return {"displayTimeUnit": "ns", "traceEvents": events}


def _write(path: Path, doc, *, compress: bool = True) -> Path:
    data = json.dumps(doc, allow_nan=True).encode()  # NaN / Infinity tokens, which Python's json reads
    path.write_bytes(gzip.compress(data) if compress else data)
    return path


def _good_ops(ev) -> list[str]:
    return [n for n in ev.ops["instruction"].astype(str) if n.startswith("add.")]


@pytest.mark.parametrize("key", ["ts", "dur", "pid", "tid"])
@pytest.mark.parametrize("value", ["abc", math.nan, math.inf, -math.inf, 2 ** 64, 10 ** 30, [1], {"a": 1}, True,
                                   -1.5],
                         ids=["str", "nan", "inf", "-inf", "2**64", "1e30", "list", "object", "bool", "negative"])
def test_a_bad_time_or_id_skips_the_event_and_says_so(tmp_path, key, value):
    """One op event with a hostile ``ts`` / ``dur`` / ``pid`` / ``tid``: the other ops are read exactly, the bad
    one is dropped (never given made-up times) and a note names the reason and its event index."""
    bad = _op("bad.1", 5.0, 1.0)
    bad[key] = value
    ev = read_chrome_events(_write(tmp_path / "t.trace.json.gz", _trace(bad)))
    assert _good_ops(ev) == ["add.1", "add.2", "add.3"]
    assert ev.ops.loc[ev.ops["instruction"] == "add.3", "start_ps"].tolist() == [7_000_000]
    kept = "bad.1" in set(ev.ops["instruction"].astype(str))
    # negative times are on the trace's own clock (kept); string / integral-float ids are ids (kept: they
    # name no process, so the event is not an op of this device)
    if key == "ts" and value == -1.5:
        assert kept and ev.ops.loc[ev.ops["instruction"] == "bad.1", "start_ps"].tolist() == [-1_500_000]
        return
    assert not kept
    if key in ("pid", "tid") and value in ("abc", 2 ** 64, 10 ** 30):
        return  # a valid id, of no named process or thread: not an op of this device, nothing to say
    skipped = [n for n in ev.notes if "skipped" in n]
    assert len(skipped) == 1 and "(first: event 6 of traceEvents)" in skipped[0], ev.notes
    assert (key if key in ("ts", "dur") else "pid or tid") in skipped[0]


def test_non_object_events_are_skipped_and_counted(tmp_path):
    ev = read_chrome_events(_write(tmp_path / "t.trace.json.gz", _trace(1, "x", None, [2, 3])))
    assert _good_ops(ev) == ["add.1", "add.2", "add.3"]
    assert "4 events skipped: not a JSON object (first: event 6 of traceEvents)" in ev.notes


@pytest.mark.parametrize("key, value, column, expected", [
    ("model_flops", "abc", "xla_flops", math.nan),
    ("model_flops", -5, "xla_flops", math.nan),
    ("model_flops", "inf", "xla_flops", math.nan),
    ("model_flops", 2 ** 2000, "xla_flops", math.nan),
    ("bytes_accessed", [1], "xla_bytes_accessed", math.nan),
    ("long_name", 5, "hlo_text", ""),
    ("long_name", {"a": 1}, "hlo_text", ""),
    ("hlo_category", ["x"], "hlo_category", ""),
    ("device_duration_ps", -1, "duration_ps", 1_000_000),
    ("device_duration_ps", "x", "duration_ps", 1_000_000),
    ("device_duration_ps", 1e300, "duration_ps", 1_000_000),
    ("program_id", 2 ** 70, "program_id", 7),
    ("program_id", "x", "program_id", 7),
    ("hlo_module", 5, "module", "jit_f"),
])
def test_args_of_the_wrong_type_are_read_as_absent(tmp_path, key, value, column, expected):
    ev = read_chrome_events(_write(tmp_path / "t.trace.json.gz", _trace(_op("bad.1", 5.0, 1.0, **{key: value}))))
    row = ev.ops[ev.ops["instruction"] == "bad.1"].iloc[0]
    got = row[column]
    assert (math.isnan(got) if isinstance(expected, float) and math.isnan(expected) else got == expected)
    assert any(f"args.{key}" in n and "read as absent" in n and "event 6 of traceEvents" in n for n in ev.notes)


def test_steps_and_module_keys_with_huge_numbers(tmp_path):
    """A step number beyond 64 bits is absent (NA); a module key's id beyond 64 bits leaves the name whole; a
    device number beyond int32 gives device id -1."""
    doc = _trace(
        {"ph": "M", "pid": 3, "tid": 5, "name": "thread_name", "args": {"name": "Steps"}},
        {"ph": "X", "pid": 3, "tid": 5, "ts": 0.0, "dur": 50.0, "name": "9" * 30, "args": {}},
        {"ph": "X", "pid": 3, "tid": 2, "ts": 200.0, "dur": 5.0, "name": "jit_g(" + "9" * 40 + ")", "args": {}},
        {"ph": "M", "pid": 4, "name": "process_name", "args": {"name": "/device:TPU:" + "9" * 30}},
        {"ph": "M", "pid": 4, "tid": 3, "name": "thread_name", "args": {"name": "XLA Ops"}},
        {"ph": "X", "pid": 4, "tid": 3, "ts": 1.0, "dur": 1.0, "name": "other.1", "args": {}},
    )
    ev = read_chrome_events(_write(tmp_path / "t.trace.json.gz", doc))
    assert ev.steps["step"].isna().all()
    assert "jit_g(" + "9" * 40 + ")" in set(ev.module_runs["module"].astype(str))
    assert ev.ops.loc[ev.ops["instruction"] == "other.1", "device_id"].tolist() == [-1]


def _error(path: Path) -> str:
    with pytest.raises(TraceError) as e:
        read_chrome_events(path)
    assert str(path) in str(e.value) and e.value.path == str(path)
    assert "\n" not in str(e.value)
    return str(e.value)


@pytest.mark.parametrize("depth", [2_000, 100_000])
def test_deep_nesting_is_a_trace_error_with_the_event_index(tmp_path, depth):
    text = json.dumps(_trace()).replace('"traceEvents": [', '"traceEvents": [{"ph": "M"}, ' + "[" * depth
                                        + "]" * depth + ", ")
    path = tmp_path / "t.trace.json"
    path.write_text(text)
    msg = _error(path)
    assert "nested too deeply" in msg and "(event 1 of traceEvents)" in msg


def test_an_integer_too_long_to_decode_is_a_trace_error(tmp_path):
    path = tmp_path / "t.trace.json.gz"
    path.write_bytes(gzip.compress(json.dumps(_trace()).replace('"ts": 4.0', '"ts": ' + "1" * 5000).encode()))
    msg = _error(path)
    assert "4300" in msg and "(event 5 of traceEvents)" in msg


@pytest.mark.parametrize("text, message", [
    ('{"displayTimeUnit": "ns"}', "has no traceEvents array"),
    ('{"traceEvents": 5}', "traceEvents must be an array"),
    ('{"traceEvents": {"0": {}}}', "traceEvents must be an array"),
    ('{5: []}', "a key of the top-level object"),
    ('"just a string"', "is not a JSON trace"),
])
def test_trace_events_that_are_not_an_array(tmp_path, text, message):
    path = tmp_path / "t.trace.json"
    path.write_text(text)
    assert message in _error(path)


@pytest.mark.parametrize("chunk", [7, 1 << 20])
def test_syntax_error_offset_counts_the_whole_text(tmp_path, monkeypatch, chunk):
    """The character offset of an error is in the whole (inflated) text, not in the current chunk."""
    monkeypatch.setattr(js, "_CHUNK", chunk)
    good = json.dumps(_trace())
    at = good.index('"add.3"')
    text = good[:at] + "@" + good[at + 1:]
    path = tmp_path / "t.trace.json.gz"
    path.write_bytes(gzip.compress(text.encode()))
    msg = _error(path)
    assert f"at character {at:,}" in msg and "(event 6 of traceEvents)" in msg


def test_a_long_value_is_decoded_in_linear_time(tmp_path, monkeypatch):
    """A 4 MB string read in 1 kB chunks: the buffer doubles, so the value is decoded a few times, not 4000."""
    monkeypatch.setattr(js, "_CHUNK", 1024)
    doc = _trace(_op("long.1", 5.0, 1.0, source="s" * 4_000_000))
    path = _write(tmp_path / "t.trace.json.gz", doc)
    t0 = time.perf_counter()
    ev = read_chrome_events(path)
    assert time.perf_counter() - t0 < 5 and "long.1" in set(ev.ops["instruction"].astype(str))


# ---------------------------------------------------------------------------------------------------------
# gzip bombs


def _bomb(prefix: bytes, pad: bytes, suffix: bytes, total: int = 64 << 20) -> bytes:
    """gzip members: ``prefix``, ``total`` bytes of ``pad``, ``suffix`` (a file of ~100 kB)."""
    block = 16 << 20
    member = gzip.compress(pad * (block // len(pad)), compresslevel=9)
    return gzip.compress(prefix) + member * (total // block) + gzip.compress(suffix)


def _limited(fn, limit_bytes: int):
    """``fn()``'s TraceError, checking it came fast and with bounded Python/numpy memory (tracemalloc)."""
    tracemalloc.start()
    t0 = time.perf_counter()
    try:
        with pytest.raises(TraceError) as e:
            fn()
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    assert time.perf_counter() - t0 < 10
    assert peak < 3 * limit_bytes + (8 << 20), f"peak {peak / 2**20:.0f} MiB"
    return str(e.value)


def test_chrome_gzip_bomb_stops_at_the_limit(tmp_path, monkeypatch):
    monkeypatch.setenv(INFLATE_ENV, "4M")
    path = tmp_path / "bomb.trace.json.gz"
    path.write_bytes(_bomb(b'{"traceEvents": [', b" ", b"]}"))
    assert path.stat().st_size < 1 << 20
    msg = _limited(lambda: read_chrome_events(path), 4 << 20)
    assert str(path) in msg and "inflates to more than 4,194,304 bytes" in msg and INFLATE_ENV in msg


@pytest.mark.parametrize("suffix", [".xplane.pb", ".xplane.pb.gz"])
@pytest.mark.parametrize("reader", [open_xspace, read_xspace, read_trace], ids=["open", "read", "read_trace"])
def test_xspace_gzip_bomb_stops_at_the_limit(tmp_path, monkeypatch, suffix, reader):
    monkeypatch.setenv(INFLATE_ENV, "4M")
    path = tmp_path / f"localhost{suffix}"
    path.write_bytes(_bomb(GPU_XPLANE.read_bytes(), b"\0", b""))
    msg = _limited(lambda: reader(path), 4 << 20)
    assert str(path) in msg and "gzip bomb" in msg and INFLATE_ENV in msg


def test_compressed_profiles_below_the_limit_still_read(tmp_path, monkeypatch):
    monkeypatch.setenv(INFLATE_ENV, "1M")
    path = tmp_path / "localhost.xplane.pb.gz"
    path.write_bytes(gzip.compress(GPU_XPLANE.read_bytes()))  # 67 kB inflated
    assert len(open_xspace(path).planes) == len(open_xspace(GPU_XPLANE).planes)
    trace = _write(tmp_path / "t.trace.json.gz", _trace())
    assert _good_ops(read_chrome_events(trace)) == ["add.1", "add.2", "add.3"]


def test_inflate_limit_default_and_environment(monkeypatch):
    monkeypatch.delenv(INFLATE_ENV, raising=False)
    assert inflate_limit(1000) == 256 << 20  # the floor
    assert inflate_limit(10 << 30) == 640 << 30  # 64x the compressed size
    for raw, expected in [("8G", 8 << 30), ("512MiB", 512 << 20), ("123", 123), (" 4 k ", 4096)]:
        monkeypatch.setenv(INFLATE_ENV, raw)
        assert inflate_limit(1) == expected, raw
    monkeypatch.setenv(INFLATE_ENV, "0")
    assert inflate_limit(1) >= 1 << 62  # no limit
    monkeypatch.setenv(INFLATE_ENV, "lots")
    with pytest.raises(ConfigError, match=INFLATE_ENV):
        inflate_limit(1)


def test_truncated_gzip_names_the_inflated_bytes(tmp_path):
    path = tmp_path / "localhost.xplane.pb.gz"
    path.write_bytes(gzip.compress(GPU_XPLANE.read_bytes())[:5000])
    with pytest.raises(TraceError, match=r"truncated or corrupted after [\d,]+ inflated bytes") as e:
        open_xspace(path)
    assert str(path) in str(e.value)


# ---------------------------------------------------------------------------------------------------------
# XSpace


def _with_corrupt_hlo(tmp_path: Path, how: str) -> Path:
    from hloscope.parsers import _xspace_schema as schema

    space = schema.XSpace.FromString(GPU_XPLANE.read_bytes())
    for plane in space.planes:
        for md in plane.event_metadata.values():
            for st in md.stats:
                if st.WhichOneof("value") == "bytes_value" and len(st.bytes_value) > 1000:
                    raw = bytearray(st.bytes_value)
                    if how == "truncate":
                        del raw[len(raw) // 3:]
                    else:
                        raw[40:48] = b"\xff" * 8
                    st.bytes_value = bytes(raw)
    path = tmp_path / "run0" / "localhost.xplane.pb"
    path.parent.mkdir()
    path.write_bytes(space.SerializeToString())
    return path


@pytest.mark.parametrize("how", ["truncate", "garble"])
def test_a_corrupt_embedded_hlo_proto_is_a_trace_error(tmp_path, capfd, how):
    """jaxlib rejects the proto: a TraceError naming the file and the module (not jaxlib's bare ValueError),
    and none of jaxlib's C++ log lines on stderr (the CLI prints one line)."""
    import hloscope

    path = _with_corrupt_hlo(tmp_path, how)
    with pytest.raises(TraceError) as e:
        hloscope.analyze(path, chip="tpu-v5e")
    msg = str(e.value)
    assert msg.startswith(str(path)) and "module jit_train_step(" in msg and "embedded HLO proto" in msg
    assert "--hlo" in msg and "\n" not in msg
    captured = capfd.readouterr()
    assert "Begin stack trace" not in captured.err and "wire_format" not in captured.err


@pytest.mark.parametrize("cut", [1, 7, 100, 5000, 30000, -1])
@pytest.mark.parametrize("reader", [open_xspace, read_xspace], ids=["open", "read"])
def test_truncated_xspace_names_the_byte_offset(tmp_path, cut, reader):
    data = GPU_XPLANE.read_bytes()
    path = tmp_path / "localhost.xplane.pb"
    path.write_bytes(data[:cut])
    with pytest.raises(TraceError) as e:
        reader(path)
    assert str(path) in str(e.value) and "byte" in str(e.value)


@pytest.mark.parametrize("seed", range(6))
def test_garbage_bytes_are_a_trace_error(tmp_path, seed):
    import random

    rng = random.Random(seed)
    path = tmp_path / "localhost.xplane.pb"
    path.write_bytes(bytes(rng.randrange(256) for _ in range(rng.choice((3, 100, 5000)))))
    with pytest.raises(TraceError) as e:
        read_trace(path)
    assert str(path) in str(e.value)


def test_corrupt_events_name_the_line_bytes(tmp_path):
    """Bytes flipped inside a line's events (found when the line is read): the line's byte range."""
    import numpy as np

    from hloscope.parsers._xspace_file import _LineRef, _scan_ref

    ref = _LineRef("XLA Ops", lambda: (b"\x22\x05\x08\xff\xff\xff\xff", 0, 7), (1000, 1007))
    with pytest.raises(TraceError, match="in the line at bytes 1,000-1,007"):
        list(_scan_ref(ref, np.zeros(0, np.int64), "f.xplane.pb"))


def _mutated_xplane(tmp_path: Path, mutate) -> Path:
    from hloscope.parsers import _xspace_schema as schema

    space = schema.XSpace.FromString(GPU_XPLANE.read_bytes())
    mutate(space)
    path = tmp_path / "run0" / "localhost.xplane.pb"
    path.parent.mkdir(exist_ok=True)
    path.write_bytes(space.SerializeToString())
    return path


def _first_op_line(space):
    plane = next(p for p in space.planes if p.name.startswith("/device:GPU"))
    return next(line for line in plane.lines if line.events)


@pytest.mark.parametrize("field, value", [
    ("timestamp_ns", 2 ** 63 - 1), ("timestamp_ns", -(2 ** 63)), ("offset_ps", 2 ** 63 - 1),
    ("offset_ps", -(2 ** 62)), ("duration_ps", -1), ("duration_ps", 2 ** 62),
])
def test_xspace_times_beyond_int64_are_a_trace_error(tmp_path, field, value):
    """Times that would wrap around int64 once computed with (start = line timestamp x 1000 + offset): the
    line's bytes are named, never silently wrong numbers."""
    import hloscope

    def mutate(space):
        line = _first_op_line(space)
        setattr(line if field == "timestamp_ns" else line.events[0], field, value)

    path = _mutated_xplane(tmp_path, mutate)
    with pytest.raises(TraceError) as e:
        hloscope.analyze(path, chip="tpu-v5e")
    msg = str(e.value)
    assert msg.startswith(str(path)) and "in the line at bytes" in msg and "2**61" in msg


@pytest.mark.parametrize("digits", ["9" * 30, "9" * 5000, "3000000000"])
def test_a_plane_device_number_beyond_int32_is_a_trace_error(tmp_path, digits):
    def mutate(space):
        next(p for p in space.planes if p.name.startswith("/device:GPU")).name = "/device:GPU:" + digits

    path = _mutated_xplane(tmp_path, mutate)
    for reader in (read_trace, read_xspace):
        with pytest.raises(TraceError, match=r"device number beyond 2\*\*31 - 1") as e:
            reader(path)
        assert str(path) in str(e.value) and len(str(e.value)) < 600


def test_names_with_thousands_of_digits(tmp_path):
    """A module key ``jit_f(<5000 digits>)`` and a line name with 5000 digits: no ``int`` of them (Python
    refuses more than 4300 digits); the file reads, or fails with a TraceError."""
    import hloscope

    def mutate(space):
        for plane in space.planes:
            for md in plane.event_metadata.values():
                if md.name.startswith("jit_train_step("):
                    md.name = "jit_train_step(" + "9" * 5000 + ")"
        _first_op_line(space).name = "Stream #" + "7" * 5000

    path = _mutated_xplane(tmp_path, mutate)
    try:
        hloscope.analyze(path, chip="tpu-v5e")
    except HloscopeError as e:
        assert str(path) in str(e)


def _with_step_num(space, value: str) -> None:
    for plane in space.planes:
        ids = {m.id: m.name for m in plane.stat_metadata.values()}
        for line in plane.lines:
            for event in line.events:
                for st in event.stats:
                    if ids.get(st.metadata_id) == "step_num":
                        st.str_value = value


def test_a_step_number_beyond_64_bits_is_na(tmp_path):
    import hloscope

    path = _mutated_xplane(tmp_path, lambda space: _with_step_num(space, "9" * 25))
    report = hloscope.analyze(path, chip="tpu-v5e")
    assert len(report.ops)
    assert read_trace(path).steps["step"].isna().all()


@pytest.mark.parametrize("value", ["\u00b2", "\u0667", "1_000", " 7 x", "9" * 5000, "-" + "9" * 20, ""],
                         ids=["superscript-two", "arabic-indic-seven", "underscore", "junk", "5000-digits",
                              "below-int64", "empty"])
def test_a_step_number_that_is_not_an_integer_string(tmp_path, value):
    """A ``step_num`` stat whose text ``str.isdigit()`` may accept but ``int()`` refuses (or that is no int64):
    read as no step number -- the file is analysed, its step column NA."""
    import hloscope

    path = _mutated_xplane(tmp_path, lambda space: _with_step_num(space, value))
    report = hloscope.analyze(path, chip="tpu-v5e")
    assert len(report.ops)
    assert read_trace(path).steps["step"].isna().all()


@pytest.mark.parametrize("value, expected", [
    (7, 7), ("7", 7), (" 7 ", 7), ("+7", 7), ("-3", -3), ((1 << 63) - 1, (1 << 63) - 1), (-(1 << 63), -(1 << 63)),
    (1 << 63, None), (1 << 64, None), ("9" * 20, None), ("9" * 5000, None), ("\u00b2", None), ("\u0667", None),
    ("1_000", None), ("7.0", None), ("", None), (7.0, None), (True, None), (None, None), (b"7", None), ([7], None),
])
def test_as_step(value, expected):
    from hloscope.parsers._xspace_steps import _as_step

    assert _as_step(value) == expected


def test_field_number_zero_is_not_read_as_a_field(tmp_path):
    """Zero bytes (a bomb's padding, or a zeroed file) are field 0: rejected at the first, not walked."""
    path = tmp_path / "localhost.xplane.pb"
    path.write_bytes(b"\0" * (8 << 20))
    t0 = time.perf_counter()
    with pytest.raises(TraceError, match="field number 0 at byte 0"):
        open_xspace(path)
    assert time.perf_counter() - t0 < 1


def test_too_many_lines_is_not_a_profile(tmp_path, monkeypatch):
    from hloscope.parsers import _xspace_file

    monkeypatch.setattr(_xspace_file, "_MAX_LINES", 1)
    with pytest.raises(TraceError, match="more than 1 lines in the plane at bytes"):
        open_xspace(GPU_XPLANE)


# ---------------------------------------------------------------------------------------------------------
# Paths no system can look up


@pytest.mark.parametrize("path", ["a\x00b", "a\x00b.xplane.pb", Path("dir\x00") / "x.xplane.pb"])
@pytest.mark.parametrize("reader", [find_xplane_files, open_xspace, read_xspace, read_trace])
def test_a_path_with_nul_is_a_trace_error(path, reader):
    with pytest.raises(TraceError) as e:
        reader(path)
    msg = str(e.value)
    assert "NUL" in msg and "\x00" not in msg and "\\x00" in msg


def test_a_nul_in_a_chrome_trace_path(tmp_path):
    with pytest.raises(TraceError, match="NUL"):
        read_chrome_events(str(tmp_path / "a\x00b.trace.json.gz"))


@pytest.mark.parametrize("path", ["x" * 5000, "/".join(["x" * 300] * 3), Path("y" * 256) / "x.xplane.pb"])
@pytest.mark.parametrize("reader", [find_xplane_files, open_xspace, read_xspace, read_trace,
                                    read_chrome_events])
def test_an_absurdly_long_path_is_a_trace_error(path, reader):
    with pytest.raises(TraceError) as e:
        reader(path)
    msg = str(e.value)
    assert "too long" in msg and len(msg) < 600 and isinstance(e.value, HloscopeError)


# ---------------------------------------------------------------------------------------------------------
# Module keys with program ids of thousands of digits (XLA Modules lines)


def _tpu_xspace_with_module(name: str):
    """A small TPU-shaped XSpace: one ``XLA Modules`` event named ``name`` holding two ``XLA Ops`` events."""
    from hloscope.parsers import _xspace_schema as schema

    xs = schema.XSpace(hostnames=["t1v"])
    tpu = xs.planes.add(id=1, name="/device:TPU:0")
    for mid, md_name in [(1, name), (2, "fusion.1"), (3, "copy.2")]:
        tpu.event_metadata[mid].CopyFrom(schema.XEventMetadata(id=mid, name=md_name))
    mods = tpu.lines.add(id=2, name="XLA Modules", timestamp_ns=1000)
    mods.events.add(metadata_id=1, offset_ps=100, duration_ps=9_000_000)
    ops = tpu.lines.add(id=3, name="XLA Ops", timestamp_ns=1000)
    ops.events.add(metadata_id=2, offset_ps=200, duration_ps=1_000_000)
    ops.events.add(metadata_id=3, offset_ps=2_000_000, duration_ps=500_000)
    return xs


@pytest.mark.parametrize("suffix", ["9" * 5000, "9" * 30, str(1 << 64), "-" + "9" * 19, "\u0667"],
                         ids=["5000-digits", "30-digits", "2**64", "below-int64", "arabic-indic-digit"])
def test_a_module_key_whose_id_is_no_64_bit_integer_keeps_its_name(tmp_path, suffix):
    """``jit_f(<id>)`` on an ``XLA Modules`` line with an id no 64-bit program id can be: no ``int()`` of
    thousands of digits (Python refuses more than 4300), no id wrapped modulo 2**64; the name is kept whole and
    the program id is NA."""
    from hloscope.parsers._xspace_events import read_xspace_events

    name = f"jit_f({suffix})"
    path = tmp_path / "t1v.xplane.pb"
    path.write_bytes(_tpu_xspace_with_module(name).SerializeToString())
    ev = read_xspace_events([path])
    assert list(ev.module_runs["module"]) == [name]
    assert ev.module_runs["program_id"].isna().all()
    assert list(ev.ops["module"]) == [name, name] and ev.ops["program_id"].isna().all()


def test_a_module_key_with_a_64_bit_id_is_split(tmp_path):
    from hloscope.parsers._xspace_events import read_xspace_events

    path = tmp_path / "t1v.xplane.pb"
    path.write_bytes(_tpu_xspace_with_module(f"jit_f({(1 << 64) - 1})").SerializeToString())
    ev = read_xspace_events([path])
    assert list(ev.module_runs["module"]) == ["jit_f"] and list(ev.module_runs["program_id"]) == [(1 << 64) - 1]


@pytest.mark.parametrize("name, expected", [
    ("jit_f(6)", ("jit_f", 6)), ("jit_f", ("jit_f", None)), ("a(b)(3)", ("a(b)", 3)),
    ("jit_f(-5)", ("jit_f", (1 << 64) - 5)),  # an int64 read off the wire: the same 64 bits, unsigned
    (f"jit_f({(1 << 64) - 1})", ("jit_f", (1 << 64) - 1)), (f"jit_f(-{1 << 63})", ("jit_f", 1 << 63)),
    (f"jit_f({1 << 64})", (f"jit_f({1 << 64})", None)),
    (f"jit_f(-{(1 << 63) + 1})", (f"jit_f(-{(1 << 63) + 1})", None)),
    ("jit_f(" + "9" * 21 + ")", ("jit_f(" + "9" * 21 + ")", None)),
    ("jit_f(" + "9" * 5000 + ")", ("jit_f(" + "9" * 5000 + ")", None)),
    ("jit_f(\u0667)", ("jit_f(\u0667)", None)), ("jit_f(\u00b2)", ("jit_f(\u00b2)", None)),
    ("jit_f()", ("jit_f()", None)),
])
def test_module_key(name, expected):
    from hloscope.parsers._xspace_ops import _module_key

    assert _module_key(name) == expected


# ---------------------------------------------------------------------------------------------------------
# Paths the system will not read: permission denied, broken symbolic links, directories named like files


@pytest.fixture
def chmod_works(tmp_path):
    """Skip unless ``chmod 000`` stops this process reading a file: as root (``os.geteuid() == 0``, or any
    process with ``CAP_DAC_OVERRIDE``) it does not."""
    probe = tmp_path / "probe"
    probe.write_bytes(b"x")
    probe.chmod(0)
    try:
        probe.read_bytes()
    except PermissionError:
        return
    finally:
        probe.chmod(0o600)
    pytest.skip(f"chmod 000 does not stop reads here (euid {os.geteuid()}: root, or CAP_DAC_OVERRIDE)")


def _cli(*args: str) -> tuple[int, str]:
    """``hloscope.cli.main(args)`` in-process: (exit status, stderr)."""
    import contextlib
    import io

    from hloscope import cli

    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = cli.main(list(args))
    return code, err.getvalue()


def _one_line_naming(text: str, path: Path) -> None:
    assert len(text.splitlines()) == 1 and "Traceback" not in text and str(path) in text


HLO = "HloModule m\nENTRY e {\n  ROOT p = f32[4] parameter(0)\n}\n"


def test_an_unreadable_xplane_file(tmp_path, chmod_works):
    import hloscope

    path = tmp_path / "log" / "run0" / "localhost.xplane.pb"
    path.parent.mkdir(parents=True)
    path.write_bytes(GPU_XPLANE.read_bytes())
    path.chmod(0)
    for given in (path, path.parent, tmp_path / "log"):
        with pytest.raises(TraceError, match="Permission denied") as e:
            hloscope.analyze(given, chip="tpu-v5e")
        assert e.value.path == str(path) and str(e.value).startswith(str(path))
    code, err = _cli("report", str(path), "--chip", "tpu-v5e")
    assert code == 2
    _one_line_naming(err, path)


def test_an_unlistable_run_dir(tmp_path, chmod_works):
    run = tmp_path / "log" / "plugins" / "profile" / "run0"
    run.mkdir(parents=True)
    (run / "localhost.xplane.pb").write_bytes(GPU_XPLANE.read_bytes())
    run.chmod(0)
    try:
        with pytest.raises(TraceError, match=r"is a directory that cannot be listed \(Permission denied\)") as e:
            read_trace(run)
        assert e.value.path == str(run)
        with pytest.raises(TraceError, match=r"skipped: run0 \(cannot be listed: Permission denied\)"):
            read_trace(tmp_path / "log")
        with pytest.raises(UnreadablePathError, match="Permission denied"):
            parse_hlo(run)
    finally:
        run.chmod(0o700)


def test_an_unreadable_hlo_file(tmp_path, chmod_works):
    import hloscope

    path = tmp_path / "m.hlo.txt"
    path.write_text(HLO)
    path.chmod(0)
    for read in (lambda: parse_hlo(path), lambda: parse_hlo(str(path)),
                 lambda: hloscope.analyze(path, chip="tpu-v5e")):
        with pytest.raises(UnreadablePathError, match=r"cannot be read \(Permission denied\)") as e:
            read()
        assert e.value.path == str(path) and not isinstance(e.value, FileNotFoundError)
    code, err = _cli("report", str(path), "--chip", "tpu-v5e")
    assert code == 2
    _one_line_naming(err, path)


def test_an_unreadable_module_of_a_dump_dir(tmp_path, chmod_works):
    import hloscope

    module = tmp_path / "module_0001.jit_f.cpu_after_optimizations.txt"
    module.write_text(HLO)
    module.chmod(0)
    with pytest.raises(UnreadablePathError, match="Permission denied") as e:
        hloscope.analyze(tmp_path, chip="tpu-v5e")
    assert e.value.path == str(module)
    code, err = _cli("report", str(tmp_path), "--chip", "tpu-v5e")
    assert code == 2
    _one_line_naming(err, module)


def test_permission_denied_is_located_without_chmod(tmp_path, monkeypatch):
    """The same conversions with the refusal simulated, so that they are tested as root too."""
    import hloscope

    path = tmp_path / "m.hlo.txt"
    path.write_text(HLO)

    def refusing(real):
        """``real``, refused on the test's own paths only: pytest reads the sources of the modules imported
        meanwhile (hloscope's lazy imports) with ``Path.read_bytes`` to rewrite their asserts."""
        def refuse(self, *args, **kwargs):
            if not str(self).startswith(str(tmp_path)):
                return real(self, *args, **kwargs)
            raise PermissionError(13, "Permission denied", str(self))
        return refuse

    monkeypatch.setattr(Path, "read_bytes", refusing(Path.read_bytes))
    for read in (lambda: parse_hlo(path), lambda: hloscope.analyze(path, chip="tpu-v5e")):
        with pytest.raises(UnreadablePathError, match=r"m\.hlo\.txt: cannot be read \(Permission denied\)"):
            read()
    monkeypatch.setattr(Path, "iterdir", refusing(Path.iterdir))
    monkeypatch.setattr(os, "scandir", refusing(os.scandir))
    with pytest.raises(TraceError, match=r"cannot be listed \(Permission denied\)"):
        read_trace(tmp_path)
    with pytest.raises(UnreadablePathError, match="Permission denied"):
        parse_hlo(tmp_path)


def test_a_broken_symlink(tmp_path):
    """A symbolic link to nothing, as the path given or as the xplane file of a run: an HloscopeError that
    says so; for HLO also a FileNotFoundError (the CLI exits 3, one line)."""
    import hloscope

    from hloscope.errors import MissingPathError

    link = tmp_path / "localhost.xplane.pb"
    link.symlink_to(tmp_path / "gone.xplane.pb")
    for read in (read_trace, find_xplane_files, lambda p: hloscope.analyze(p, chip="tpu-v5e")):
        with pytest.raises(TraceError, match="is a broken symbolic link") as e:
            read(link)
        assert e.value.path == str(link)
    with pytest.raises(TraceError, match=r"skipped: localhost\.xplane\.pb \(a broken symbolic link\)"):
        read_trace(tmp_path)
    hlo = tmp_path / "m.hlo.txt"
    hlo.symlink_to(tmp_path / "gone.hlo.txt")
    for given in (hlo, str(hlo)):
        with pytest.raises(MissingPathError, match="a broken symbolic link") as e:
            parse_hlo(given)
        assert isinstance(e.value, FileNotFoundError) and isinstance(e.value, HloscopeError)
        assert e.value.errno == errno.ENOENT and e.value.path == str(hlo)
    with pytest.raises(HloscopeError) as e:
        hloscope.analyze(hlo, chip="tpu-v5e")
    assert str(hlo) in str(e.value)
    code, err = _cli("report", str(hlo), "--chip", "tpu-v5e")
    assert code == 3
    _one_line_naming(err, hlo)


def test_a_directory_named_like_a_file(tmp_path):
    import hloscope

    run = tmp_path / "run0"
    xplane = run / "x.xplane.pb"
    xplane.mkdir(parents=True)
    for read in (read_trace, find_xplane_files, lambda p: hloscope.analyze(p, chip="tpu-v5e")):
        with pytest.raises(TraceError, match="is a directory, not a file") as e:
            read(xplane)
        assert e.value.path == str(xplane)
    for read in (open_xspace, read_xspace):
        with pytest.raises(TraceError, match="is a directory"):
            read(xplane)
    with pytest.raises(TraceError, match=r"skipped: x\.xplane\.pb \(a directory\)"):
        read_trace(run)
    chrome = tmp_path / "t.trace.json.gz"
    chrome.mkdir()
    with pytest.raises(TraceError, match="is a directory"):
        read_chrome_events(chrome)
    with pytest.raises(TraceError, match="is a directory, not a file"):
        read_trace(chrome)
    hlo = tmp_path / "m.hlo.txt"
    hlo.mkdir()
    with pytest.raises(UnreadablePathError, match="is a directory holding no post-optimization module") as e:
        parse_hlo(hlo)
    assert e.value.path == str(hlo)
    code, err = _cli("report", str(xplane), "--chip", "tpu-v5e")
    assert code == 2
    _one_line_naming(err, xplane)


def test_a_symlink_loop_named_like_an_xplane(tmp_path):
    loop = tmp_path / "loop.xplane.pb"
    loop.symlink_to(loop)
    with pytest.raises(TraceError, match="cannot be looked up"):
        read_trace(loop)
    with pytest.raises(TraceError, match=r"skipped: loop\.xplane\.pb \(a loop of symbolic links\)"):
        read_trace(tmp_path)


# ---------------------------------------------------------------------------------------------------------
# Control characters in paths and names: escaped in every message, never sent to the terminal

HOSTILE_NAME = "run\x1b[2J\x1b]0;owned\x07\nline\r\t\x7f\x9b\u202e"


def _clean(text: str) -> None:
    """No control character (ESC, BEL, line breaks, DEL, C1, bidi override) in ``text``; the ESC shown escaped."""
    assert text.isprintable(), repr(text)
    assert "\\x1b[2J" in text and "\\n" in text


def test_escaped():
    from hloscope.errors import escaped

    assert escaped("plain h\u00f6st \u00e9") == "plain h\u00f6st \u00e9"
    assert escaped("a\x00b\x1b[31m\n\t\x7f\x9b\u2028\udcff") == "a\\x00b\\x1b[31m\\n\\t\\x7f\\x9b\\u2028\\udcff"
    assert escaped(escaped(HOSTILE_NAME)) == escaped(HOSTILE_NAME)


def test_trace_error_escapes_path_and_message():
    import pickle

    e = TraceError(f"/tmp/{HOSTILE_NAME}", f"has no run named {HOSTILE_NAME}")
    _clean(str(e))
    assert e.path == f"/tmp/{HOSTILE_NAME}"  # the attribute keeps the path as given
    again = pickle.loads(pickle.dumps(e))
    assert str(again) == str(e)


def test_a_hostile_run_name_is_escaped(tmp_path):
    import hloscope

    prof = tmp_path / "log" / "plugins" / "profile"
    (prof / HOSTILE_NAME).mkdir(parents=True)
    for read in (read_trace, lambda p: hloscope.analyze(p, chip="tpu-v5e")):
        with pytest.raises(TraceError) as e:
            read(tmp_path / "log")
        _clean(str(e.value))
    run = prof / HOSTILE_NAME
    with pytest.raises(TraceError) as e:
        read_trace(run)
    _clean(str(e.value))
    # The command line reads a path holding a line break as the path it names (not as HLO text), and a path
    # that names nothing exits 3 with the name escaped.
    code, err = _cli("report", str(run), "--chip", "tpu-v5e")
    assert code == 2 and len(err.splitlines()) == 1
    err = err.rstrip("\n")
    assert err.isprintable() and "\\x1b[2J" in err and str(tmp_path) in err
    code, err = _cli("report", str(prof / f"missing{HOSTILE_NAME}"), "--chip", "tpu-v5e")
    assert code == 3 and len(err.splitlines()) == 1 and "no such file" in err
    assert err.rstrip("\n").isprintable() and "\\x1b[2J" in err


def test_a_hostile_file_name_is_escaped(tmp_path):
    """An xplane file, an HLO file, a broken link and a dump dir's module, each named with escape sequences."""
    import hloscope

    from hloscope.analysis import ModuleChoiceError

    xplane = tmp_path / f"{HOSTILE_NAME}.xplane.pb"
    xplane.write_bytes(b"not a profile")
    with pytest.raises(TraceError) as e:
        read_trace(xplane)
    _clean(str(e.value))
    hlo = tmp_path / f"{HOSTILE_NAME}.hlo.txt"
    hlo.write_text("HloModule m\nENTRY e {\n  ROOT p = f32[4] nonsense(\n}\n")
    for read in (lambda: parse_hlo(hlo), lambda: hloscope.analyze(hlo, chip="tpu-v5e")):
        with pytest.raises(HloParseError) as e:
            read()
        _clean(str(e.value).splitlines()[0])
    hlo.write_bytes(b"HloModule m\xff")
    with pytest.raises(HloParseError, match="byte 11") as e:
        parse_hlo(hlo)
    _clean(str(e.value))
    link = tmp_path / f"{HOSTILE_NAME}.txt"
    link.symlink_to(tmp_path / HOSTILE_NAME)
    with pytest.raises(HloscopeError) as e:
        parse_hlo(link)
    _clean(str(e.value).split("(a broken")[0])
    dump = tmp_path / "dump"
    dump.mkdir()
    for i in (1, 2):
        (dump / f"module_000{i}.{HOSTILE_NAME}.cpu_after_optimizations.txt").write_text(HLO)
    with pytest.raises(ModuleChoiceError) as e:
        hloscope.analyze(dump, chip="tpu-v5e", module="nope")
    _clean(str(e.value))
    assert e.value.message("--module").isprintable()


def test_report_schema_error_escapes():
    from hloscope.errors import ReportSchemaError

    _clean(str(ReportSchemaError(f"/tmp/{HOSTILE_NAME}.json", "not a report")))


# ---------------------------------------------------------------------------------------------------------
# parse_hlo(bytes); ModuleChoiceError from hloscope.errors


def test_parse_hlo_reads_bytes_as_utf8_text():
    import hloscope

    for given in (HLO.encode(), bytearray(HLO.encode()), memoryview(HLO.encode())):
        m = hloscope.parse_hlo(given)
        assert (m.name, m.source, m.entry.root.name) == ("m", "<bytes>", "p")
    # Non-ASCII text (a name in metadata) decodes as UTF-8.
    text = HLO.replace("parameter(0)", 'parameter(0), metadata={op_name="h\u00f6st"}')
    assert hloscope.parse_hlo(text.encode()).entry.root.name == "p"


def test_parse_hlo_bytes_are_never_a_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "m.hlo.txt").write_text(HLO)
    with pytest.raises(HloParseError, match="^<bytes>:1:1: "):
        parse_hlo(b"m.hlo.txt")


@pytest.mark.parametrize("data, offset", [
    (HLO.encode()[:20] + b"\xff" + HLO.encode()[20:], 20),
    (b"\x80", 0),
    ("HloModule h\u00f6s".encode() + b"\xc3", 14),  # a sequence cut short at the end (\u00f6 is 2 bytes)
    (HLO.encode()[:12] + b"\0" + HLO.encode()[12:], 12),
    ("HloModule \u00e9\u00e9".encode() + b"\0", 14),  # the offset counts bytes, not characters
], ids=["invalid-byte", "first-byte", "truncated-sequence", "nul", "nul-after-non-ascii"])
def test_parse_hlo_bytes_that_are_not_text_name_the_byte(data, offset):
    with pytest.raises(HloParseError) as e:
        parse_hlo(data)
    assert e.value.byte_offset == offset and e.value.source == "<bytes>"
    assert str(e.value).startswith(f"<bytes>: byte {offset}: ")


def test_module_choice_error_is_importable_from_errors():
    import hloscope.analysis
    import hloscope.errors
    from hloscope.errors import ModuleChoiceError

    assert ModuleChoiceError is hloscope.analysis.ModuleChoiceError is hloscope.errors.ModuleChoiceError
    assert issubclass(ModuleChoiceError, HloscopeError)
    with pytest.raises(AttributeError):
        hloscope.errors.NoSuchError  # noqa: B018
