"""The read-ahead thread of ``_scan_refs`` (large planes) gives the tables, and the errors, of a serial read."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from hloscope.parsers import _xspace_file
from hloscope.parsers._xspace import TraceError, open_xspace
from hloscope.parsers._xspace_events import read_xspace_events
from hloscope.parsers._xspace_file import _plane_sources, _scan_ref, _scan_refs

ROOT = Path(__file__).resolve().parents[2]
FILES = sorted(ROOT.glob("fixtures/profile/**/*.xplane.pb"))
TRAIN = ROOT / "fixtures/profile/cpu_train_step/plugins/profile/run0/localhost.xplane.pb"


@pytest.fixture
def threaded(monkeypatch):
    """Every plane read ahead in a thread, however small."""
    monkeypatch.setattr(_xspace_file, "_PREFETCH_MIN_BYTES", 0)


def _frames(events):
    return events.ops, events.steps, events.module_runs


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.parent.parent.parent.parent.name + "/" + p.name)
def test_read_ahead_gives_the_serial_tables(path, monkeypatch):
    serial = read_xspace_events([path])
    monkeypatch.setattr(_xspace_file, "_PREFETCH_MIN_BYTES", 0)
    ahead = read_xspace_events([path])
    for a, b in zip(_frames(ahead), _frames(serial)):
        pd.testing.assert_frame_equal(a, b)
    assert ahead.notes == serial.notes


def _host_lines():
    ix = open_xspace(TRAIN)
    for plane, refs in _plane_sources(ix):
        if plane.name == "/host:CPU":
            return refs, ix.path
    raise AssertionError("no /host:CPU plane")


def test_lines_left_early_do_not_shift_the_next_ones(threaded):
    refs, source = _host_lines()
    want = np.zeros(0, np.int64)  # no stats: the event fields are compared
    expected = [[sl.ev_off.tolist() for sl in _scan_ref(ref, want, source)] for ref in refs]
    got = []
    for k, (ref, chunks) in enumerate(_scan_refs(refs, want, source)):
        if k % 2:  # every other line abandoned before its first chunk
            got.append(None)
            continue
        got.append([sl.ev_off.tolist() for sl in chunks])
    assert [g for g in got if g is not None] == [e for k, e in enumerate(expected) if k % 2 == 0]


def test_a_corrupted_line_raises_the_serial_error(tmp_path, monkeypatch):
    refs, _ = _host_lines()
    a, b = max((r.span for r in refs), key=lambda s: s[1] - s[0])
    data = bytearray(TRAIN.read_bytes())
    mid = (a + b) // 2
    data[mid:mid + 16] = b"\xff" * 16  # a varint that never ends, inside the longest line's events
    bad = tmp_path / "bad.xplane.pb"
    bad.write_bytes(bytes(data))
    with pytest.raises(TraceError) as serial:
        read_xspace_events([bad])
    monkeypatch.setattr(_xspace_file, "_PREFETCH_MIN_BYTES", 0)
    with pytest.raises(TraceError) as ahead:
        read_xspace_events([bad])
    assert str(ahead.value) == str(serial.value)
