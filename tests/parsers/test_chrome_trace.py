"""Chrome-trace reader (``*.trace.json.gz`` -> the op-events table) and the HLO-line parser, on real TPU traces.

Inputs:

* small traces written by the tests (reader details, streaming across chunk boundaries, every error path);
* the public corpus at ``<repo>/../shared/corpus/trace_json``: three xprof-converted TPU traces of vLLM
  inference on 2 chips (vllm-project/tpu-inference, Apache-2.0), skipped when absent.

Oracles are independent of hloscope: the reader is checked against a plain ``json.load`` of the whole file and
against times and nesting worked out by hand (or by a brute-force definition of self time). The cost of the
lines is tested in ``tests/cost/test_trace_lines.py``.
"""

from __future__ import annotations

import gzip
import json
import random
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest

from hloscope.parsers import _json_stream as js
from hloscope.parsers._chrome_trace import TraceError, read_chrome_events
from hloscope.parsers._hlo_line import canonical_line, parse_line
from hloscope.parsers.events import MODULE_RUN_COLUMNS, OP_COLUMNS, OP_EXTRA_COLUMNS, STEP_COLUMNS

CORPUS = Path(__file__).resolve().parents[2].parent / "shared" / "corpus"
TRACES = sorted((CORPUS / "trace_json").glob("*.trace.json.gz")) if (CORPUS / "trace_json").is_dir() else []

#: The documented dtypes (``hloscope.parsers.events``), extra columns as this reader writes them.
DTYPES = {
    "host": "category", "device": "category", "device_id": "int32", "stream": "category", "program_id": "UInt64",
    "module": "category", "instruction": "category", "name": "category", "step": "Int64", "start_ps": "int64",
    "duration_ps": "int64", "self_ps": "int64", "hlo_text": "category", "hlo_category": "category",
    "xla_flops": "float64", "xla_bytes_accessed": "float64", "op_name": "category", "source": "category",
}

# ---------------------------------------------------------------------------------------------------------
# Small traces written here


def _meta(pid, name, tid=None, kind=None):
    kind = kind or ("thread_name" if tid is not None else "process_name")
    ev = {"ph": "M", "pid": pid, "name": kind, "args": {"labels" if kind == "process_labels" else "name": name}}
    if tid is not None:
        ev["tid"] = tid
    return ev


def _op(pid, name, ts, dur, tid=3, **args):
    return {"ph": "X", "pid": pid, "tid": tid, "ts": ts, "dur": dur, "name": name, "args": args}


LINE_ADD = "%add.1 = f32[8,128]{1,0:T(8,128)} add(f32[8,128]{1,0:T(8,128)} %p.0, f32[8,128]{1,0:T(8,128)} %p.1)"


def _small_trace() -> dict:
    """Two TPU devices, one module run each, a nested op, a host step annotation and a device Steps line.
    Metadata events come after the events they name (Chrome traces allow any order)."""
    events = [
        _op(3, "while.1", 100.0, 10.0, long_name="%while.1 = s32[] while(s32[] %c), condition=%c1, body=%b1",
            device_duration_ps="10000000", model_flops="0", bytes_accessed="4", hlo_category="while"),
        _op(3, "add.1", 101.0, 2.5, long_name=LINE_ADD, model_flops="1024", bytes_accessed="12288",
            hlo_category="non-fusion elementwise", tf_op="jit(f)/add", source="/src/model.py:42"),
        {"ph": "X", "pid": 3, "tid": 2, "ts": 99.0, "dur": 20.0, "name": "jit_f(123)", "args": {"run_id": "7"}},
        {"ph": "X", "pid": 3, "tid": 5, "ts": 99.0, "dur": 20.0, "name": "4", "args": {"step_num": "4"}},
        _op(4, "add.1", 201.0, 3.0, long_name=LINE_ADD, model_flops="1024", bytes_accessed="12288"),
        {"ph": "X", "pid": 4, "tid": 2, "ts": 200.0, "dur": 5.0, "name": "jit_f(123)", "args": {}},
        {"ph": "X", "pid": 701, "tid": 9, "ts": 50.0, "dur": 300.0, "name": "train", "args": {"step_num": 4}},
        {"ph": "X", "pid": 701, "tid": 9, "ts": 60.0, "dur": 1.0, "name": "python", "args": {}},
        {"ph": "i", "pid": 3, "tid": 3, "ts": 1.0, "name": "instant"},
        _meta(3, "/device:TPU:0"), _meta(3, "XLA Modules", 2), _meta(3, "XLA Ops", 3), _meta(3, "Steps", 5),
        _meta(4, "/device:TPU:1"), _meta(4, "XLA Modules", 2), _meta(4, "XLA Ops", 3),
        _meta(701, "/host:CPU"), _meta(701, "main", 9),
        {},
    ]
    return {"displayTimeUnit": "ns", "metadata": {"highres-ticks": True}, "traceEvents": events}


def _write(path: Path, doc, *, compress: bool = True) -> Path:
    data = json.dumps(doc).encode()
    path.write_bytes(gzip.compress(data) if compress else data)
    return path


def _check_schema(ev) -> None:
    assert list(ev.ops.columns) == list(OP_COLUMNS + OP_EXTRA_COLUMNS)
    assert {c: str(t) for c, t in ev.ops.dtypes.items()} == DTYPES
    assert list(ev.steps.columns) == list(STEP_COLUMNS)
    assert list(ev.module_runs.columns) == list(MODULE_RUN_COLUMNS)
    for frame in (ev.steps, ev.module_runs):
        assert str(frame["start_ps"].dtype) == str(frame["duration_ps"].dtype) == "int64"
    assert str(ev.steps["step"].dtype) == "Int64" and str(ev.module_runs["program_id"].dtype) == "UInt64"


def test_reads_ops_modules_steps(tmp_path):
    ev = read_chrome_events(_write(tmp_path / "t.trace.json.gz", _small_trace()))
    _check_schema(ev)
    assert ev.platform == "tpu" and ev.device_kind is None and ev.hlo_modules == {} and ev.notes == []
    assert ev.files == [str(tmp_path / "t.trace.json.gz")]
    ops = ev.ops
    assert set(ops["host"]) == {"t"} and set(ops["stream"]) == {"XLA Ops"}
    assert list(ops["device"]) == ["/device:TPU:0", "/device:TPU:0", "/device:TPU:1"]
    assert list(ops["instruction"]) == list(ops["name"]) == ["while.1", "add.1", "add.1"]
    assert list(ops["device_id"]) == [0, 0, 1]
    assert set(ops["module"]) == {"jit_f"} and set(ops["program_id"]) == {123}
    # ts (us) x 1e6; device_duration_ps wins over dur; self time subtracts the nested op
    assert ops["start_ps"].tolist() == [100_000_000, 101_000_000, 201_000_000]
    assert ops["duration_ps"].tolist() == [10_000_000, 2_500_000, 3_000_000]
    assert ops["self_ps"].tolist() == [7_500_000, 2_500_000, 3_000_000]
    # TPU:0 has a Steps line (99..119 us: step 4); TPU:1 has none, so the host's step_num region (50..350 us)
    assert ops["step"].tolist() == [4, 4, 4]
    assert ops.loc[1, "hlo_text"] == LINE_ADD and ops.loc[1, "hlo_category"] == "non-fusion elementwise"
    assert ops.loc[1, "xla_flops"] == 1024 and ops.loc[1, "xla_bytes_accessed"] == 12288
    assert ops.loc[1, "op_name"] == "jit(f)/add" and ops.loc[1, "source"] == "/src/model.py:42"
    assert ops.loc[2, "op_name"] == "" and ops.loc[2, "source"] == ""
    runs = ev.module_runs
    assert list(runs["module"]) == ["jit_f", "jit_f"] and list(runs["program_id"]) == [123, 123]
    assert list(runs["device_id"]) == [0, 1] and set(runs["host"]) == {"t"}
    assert runs["start_ps"].tolist() == [99_000_000, 200_000_000]
    assert runs["duration_ps"].tolist() == [20_000_000, 5_000_000]
    steps = ev.steps
    assert steps["device"].tolist() == ["/host:CPU", "/device:TPU:0"] and steps["device_id"].tolist() == [-1, 0]
    assert steps["name"].tolist() == ["train", "4"] and steps["step"].tolist() == [4, 4]
    assert steps["start_ps"].tolist() == [50_000_000, 99_000_000]
    assert steps["duration_ps"].tolist() == [300_000_000, 20_000_000]


def test_step_outside_the_device_markers_is_na(tmp_path):
    """A device with a Steps line takes its steps from it alone: an op after its last marker has no step, even
    inside a host step region; a device without one falls back to the host regions, NA outside them too."""
    doc = _small_trace()
    doc["traceEvents"] += [_op(3, "late.1", 130.0, 1.0), _op(4, "late.2", 400.0, 1.0)]
    ops = read_chrome_events(_write(tmp_path / "t.trace.json.gz", doc)).ops
    step = dict(zip(ops["instruction"], ops["step"]))
    assert step["add.1"] == 4 and step["late.1"] is pd.NA and step["late.2"] is pd.NA


def test_host_name_platform_and_device_kind(tmp_path):
    doc = {"traceEvents": [_meta(1, "/device:GPU:0"), _meta(1, "XLA Ops", 3),
                           _meta(1, "NVIDIA H100 80GB HBM3", kind="process_labels"), _op(1, "dot.1", 1.0, 1.0)]}
    ev = read_chrome_events(_write(tmp_path / "worker-3.trace.json", doc, compress=False))
    assert set(ev.ops["host"]) == {"worker-3"} and ev.platform == "gpu"
    assert ev.device_kind == "NVIDIA H100 80GB HBM3"
    assert ev.ops["step"].isna().all() and ev.steps.empty and ev.module_runs.empty
    # no module run: module "" (the join stage names it), program id NA
    assert ev.ops["module"].tolist() == [""] and ev.ops["program_id"].isna().all()


def test_array_format_and_plain_json(tmp_path):
    doc = _small_trace()["traceEvents"]
    ev = read_chrome_events(_write(tmp_path / "t.trace.json", doc, compress=False))
    assert len(ev.ops) == 3 and set(ev.ops["host"]) == {"t"}


@pytest.mark.parametrize("chunk", [1, 7, 64, 1000])
def test_streaming_across_chunk_boundaries(tmp_path, monkeypatch, chunk):
    path = _write(tmp_path / "t.trace.json.gz", _small_trace())
    whole = read_chrome_events(path)
    monkeypatch.setattr(js, "_CHUNK", chunk)
    part = read_chrome_events(path)
    pd.testing.assert_frame_equal(part.ops, whole.ops)
    pd.testing.assert_frame_equal(part.steps, whole.steps)
    pd.testing.assert_frame_equal(part.module_runs, whole.module_runs)


def test_ops_without_module_events(tmp_path):
    doc = _small_trace()
    doc["traceEvents"] = [e for e in doc["traceEvents"] if not (e.get("tid") == 2 and e.get("ph") == "X")]
    ev = read_chrome_events(_write(tmp_path / "t.trace.json.gz", doc))
    assert set(ev.ops["module"]) == {""} and ev.ops["program_id"].isna().all() and ev.module_runs.empty
    assert any("no XLA Modules event" in n for n in ev.notes)


def test_module_from_the_events_own_args(tmp_path):
    """``args.hlo_module`` / ``args.program_id`` win over the enclosing module run."""
    doc = _small_trace()
    doc["traceEvents"].append(_op(4, "mul.1", 202.0, 1.0, hlo_module="jit_g", program_id="9"))
    ops = read_chrome_events(_write(tmp_path / "t.trace.json.gz", doc)).ops
    row = ops[ops["instruction"] == "mul.1"].iloc[0]
    assert row["module"] == "jit_g" and row["program_id"] == 9


def _brute_self(events: list[tuple[int, int]]) -> list[int]:
    """Self time by definition: an event's parent is the nearest earlier event (sorted by start, longest
    first) that contains it; its self time is its duration minus its children's durations."""
    order = sorted(range(len(events)), key=lambda i: (events[i][0], -events[i][1]))
    ev = [events[i] for i in order]
    child = [0] * len(ev)
    for i, (s, d) in enumerate(ev):
        for j in range(i - 1, -1, -1):
            sj, dj = ev[j]
            if sj + dj >= s + d and sj + dj > s:
                child[j] += d
                break
    return [max(d - c, 0) for (_, d), c in zip(ev, child)]


@pytest.mark.parametrize("seed", range(5))
def test_self_time_matches_its_definition(tmp_path, seed):
    rng = random.Random(seed)
    events = []
    for _ in range(300):  # nested, overlapping, equal and zero-length events on one thread
        s = rng.randrange(0, 200)
        events.append((s, rng.choice([0, 1, 2, 5, 20, 60, 200])))
    doc = {"traceEvents": [_meta(3, "/device:TPU:0"), _meta(3, "XLA Ops", 3)]
           + [_op(3, f"op.{i}", float(s), float(d)) for i, (s, d) in enumerate(events)]}
    ops = read_chrome_events(_write(tmp_path / "t.trace.json.gz", doc)).ops
    assert ops["self_ps"].tolist() == [x * 1_000_000 for x in _brute_self(events)]


@pytest.mark.parametrize(
    "content, message",
    [
        (b"\x00\x01not a trace at all", "is not a JSON trace"),
        (gzip.compress(b"hello, world"), "is not a JSON trace"),
        (gzip.compress(b'{"traceEvents": [{"ph": "X", "pid": 3'), "is not valid JSON"),
        (gzip.compress(json.dumps(_small_trace()).encode())[:200], "cannot be decompressed"),
        (gzip.compress(b'{"displayTimeUnit": "ns", "otherData": {}}'), "has no traceEvents"),
        (gzip.compress(b'["not", "events"]'), "no per-HLO-op events"),
        (gzip.compress(json.dumps({"traceEvents": [_meta(701, "/host:CPU"), _op(701, "x", 1.0, 1.0)]}).encode()),
         "no per-HLO-op events"),
        (b"", "is not a JSON trace"),
    ],
    ids=["binary", "gzip-text", "truncated-json", "truncated-gzip", "no-traceEvents", "no-events", "host-only",
         "empty"],
)
def test_errors_name_the_path(tmp_path, content, message):
    path = tmp_path / "bad.trace.json.gz"
    path.write_bytes(content)
    with pytest.raises(TraceError) as e:
        read_chrome_events(path)
    assert str(path) in str(e.value) and message in str(e.value)
    assert e.value.path == str(path)


def test_missing_file_and_directory(tmp_path):
    with pytest.raises(TraceError, match="no such file"):
        read_chrome_events(tmp_path / "absent.trace.json.gz")
    with pytest.raises(TraceError, match="is a directory"):
        read_chrome_events(tmp_path)


def test_malformed_event_is_not_buffered_to_the_end(tmp_path, monkeypatch):
    monkeypatch.setattr(js, "_CHUNK", 16)
    monkeypatch.setattr(js, "_MAX_VALUE", 64)
    text = '{"traceEvents": [{"ph": "X", "pid": 3 "tid": 3}, ' + ", ".join(['{"ph": "M"}'] * 10000) + "]}"
    path = tmp_path / "bad.trace.json.gz"
    path.write_bytes(gzip.compress(text.encode()))
    reads = []
    real = js._read
    monkeypatch.setattr(js, "_read", lambda fh, p: reads.append(1) or real(fh, p))
    with pytest.raises(TraceError, match="is not valid JSON"):
        read_chrome_events(path)
    assert len(reads) < 20


# ---------------------------------------------------------------------------------------------------------
# One HLO line


def test_parse_line_tuples_comments_and_errors():
    line = ("%copy-start.1 = (f32[4,128]{1,0:T(4,128)S(1)}, f32[4,128]{1,0:T(4,128)}, /*index=2*/u32[]{:S(2)}) "
            "copy-start(f32[4,128]{1,0:T(4,128)} %p)")
    p = parse_line(line)
    assert p.instruction.opcode == "copy-start" and p.instruction.shape.is_tuple
    assert [s.element_count for s in p.operand_shapes] == [4 * 128]
    for bad in ("", "not hlo", "%x = f32[4]{0} add(%a, %b)", "%x = f32[4]{0} add(f32[4]{0} %a"):
        with pytest.raises(ValueError):
            parse_line(bad)


def test_canonical_line_renames_by_position():
    a = "%fusion.812 = f32[8]{0} fusion(f32[8]{0} %param.1, f32[8]{0} %fusion.3), kind=kLoop, calls=%fc.9"
    b = "%fusion.815 = f32[8]{0} fusion(f32[8]{0} %param.7, f32[8]{0} %fusion.4), kind=kLoop, calls=%fc.10"
    assert canonical_line(a)[0] == canonical_line(b)[0]
    assert canonical_line(a)[1] == ("fusion.812", "param.1", "fusion.3", "fc.9")
    assert canonical_line(a)[0].startswith("%n0 = f32[8]{0} fusion(f32[8]{0} %n1, f32[8]{0} %n2)")


# ---------------------------------------------------------------------------------------------------------
# The corpus: reader vs a plain json.load

needs_corpus = pytest.mark.skipif(not TRACES, reason=f"public corpus absent: {CORPUS / 'trace_json'}")


def _plain_ops(path: Path) -> list[dict]:
    """The XLA Ops events of the trace's device processes, read with ``json`` alone."""
    doc = json.loads(gzip.decompress(path.read_bytes()))
    names = {e["pid"]: e["args"]["name"] for e in doc["traceEvents"] if e.get("name") == "process_name"}
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in doc["traceEvents"]
               if e.get("name") == "thread_name"}
    out = []
    for e in doc["traceEvents"]:
        if (e.get("ph") == "X" and names.get(e["pid"], "").startswith("/device:")
                and threads.get((e["pid"], e["tid"])) == "XLA Ops"):
            args = e.get("args", {})
            dur = int(args["device_duration_ps"]) if "device_duration_ps" in args else round(e["dur"] * 1e6)
            out.append({"device": names[e["pid"]], "name": e["name"], "start_ps": round(e["ts"] * 1e6),
                        "duration_ps": dur, "args": args})
    return out, doc, names, threads


@needs_corpus
@pytest.mark.parametrize("path", TRACES, ids=[p.name[-40:] for p in TRACES])
def test_reader_matches_plain_json_load(path):
    ev = read_chrome_events(path)
    _check_schema(ev)
    plain, doc, names, threads = _plain_ops(path)
    ops = ev.ops
    assert len(ops) == len(plain) > 6000
    assert set(ops["host"]) == {path.name[: -len(".trace.json.gz")]}
    # per device: the sum of durations in integer ps, and every (name, start, duration) exactly
    for device in ("/device:TPU:0", "/device:TPU:1"):
        mine = ops[ops["device"] == device]
        theirs = [e for e in plain if e["device"] == device]
        assert int(mine["duration_ps"].sum()) == sum(e["duration_ps"] for e in theirs)
        assert Counter(zip(mine["name"].astype(str), mine["start_ps"].tolist(), mine["duration_ps"].tolist())) \
            == Counter((e["name"], e["start_ps"], e["duration_ps"]) for e in theirs)
        assert (mine["device_id"] == int(device[-1])).all()
    assert ops["xla_flops"].sum() == sum(float(e["args"]["model_flops"]) for e in plain)
    assert ops["xla_bytes_accessed"].sum() == sum(float(e["args"]["bytes_accessed"]) for e in plain)
    assert Counter(ops["hlo_text"].astype(str)) == Counter(e["args"]["long_name"] for e in plain)
    assert Counter(ops["hlo_category"].astype(str)) == Counter(e["args"]["hlo_category"] for e in plain)
    assert (ops["instruction"].astype(str) == ops["name"].astype(str)).all()
    # sorted by device, then start
    key = list(zip(ops["device_id"].tolist(), ops["start_ps"].tolist()))
    assert key == sorted(key)
    # every op lies inside a module run of its device: 4 modules, each run once per device
    runs = [e for e in doc["traceEvents"]
            if e.get("ph") == "X" and threads.get((e["pid"], e.get("tid"))) == "XLA Modules"]
    assert len(ev.module_runs) == len(runs) == 8
    assert Counter(ev.module_runs["module"].astype(str)) == Counter(e["name"].rsplit("(", 1)[0] for e in runs)
    assert ev.module_runs.groupby("module", observed=True).size().eq(2).all()
    assert (ops["module"] != "").all() and ops["program_id"].notna().all()
    assert set(ops["module"]) == set(ev.module_runs["module"])
    assert ev.steps.empty and ops["step"].isna().all()  # vLLM inference: no step annotations
    # no nesting on TPU XLA Ops lines: self time = duration
    assert (ops["self_ps"] == ops["duration_ps"]).all()
    assert ev.platform == "tpu" and ev.device_kind is None and ev.hlo_modules == {}
