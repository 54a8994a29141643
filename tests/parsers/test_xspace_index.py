"""``open_xspace`` (indexed, line-by-line decoding) gives the same tables and errors as ``read_xspace``."""

from pathlib import Path

import pandas as pd
import pytest

from hloscope.parsers._xspace import TraceError, hlo_protos, op_events, open_xspace, read_xspace, step_events

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT.parent / "shared" / "corpus" / "xplane"
FILES = sorted(ROOT.glob("fixtures/profile/**/*.xplane.pb")) + sorted(
    p for p in CORPUS.glob("*.xplane.pb") if "tpu_inference_2" not in p.name)


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name[-50:])
def test_indexed_reader_matches_full_decode(path):
    full, indexed = read_xspace(path), open_xspace(path)
    pd.testing.assert_frame_equal(op_events(indexed), op_events(full))
    pd.testing.assert_frame_equal(step_events(open_xspace(path)), step_events(full))
    assert [(e.module_name, e.program_id, e.hlo_proto) for e in hlo_protos(open_xspace(path))] == [
        (e.module_name, e.program_id, e.hlo_proto) for e in hlo_protos(full)]


@pytest.mark.parametrize("content", [b"", b"\x00\x01garbage", b"HloModule m\n"])
def test_indexed_reader_rejects_what_the_full_decode_rejects(tmp_path, content):
    bad = tmp_path / "bad.xplane.pb"
    bad.write_bytes(content)
    with pytest.raises(TraceError) as full:
        read_xspace(bad)
    with pytest.raises(TraceError) as indexed:
        open_xspace(bad)
    assert str(bad) in str(full.value) and str(bad) in str(indexed.value)


def test_corrupted_upstream_file_is_rejected_by_both():
    path = CORPUS / "openxla__xprof__xprof__convert__test_xplanes__tpu_inference_2.xplane.pb"
    if not path.exists():
        pytest.skip("shared corpus not present")
    for reader in (read_xspace, open_xspace):
        with pytest.raises(TraceError, match="not an XSpace protobuf"):
            reader(path)
