"""Fuzz hloscope's readers: mutated HLO text, XSpace files, Chrome traces and profile directories.

Usage (from the repository root)::

    python benchmarks/fuzz.py                                # 3,200 cases, seed 0, every kind
    python benchmarks/fuzz.py --cases 800 --seed 7 --kinds chrome,dir
    python benchmarks/fuzz.py --seed 0 --case 123 --keep /tmp/case123   # one case again, its input kept

Each case takes a seed input of its kind, applies one to three mutations and runs it through

* the API: ``hloscope.analyze(path, chip="tpu-v5e")``, which must return a ``Report`` or raise an
  ``hloscope.errors.HloscopeError`` whose message names the file (the case's directory name is in it);
* the CLI in-process (``hloscope.cli.main(["report", path, "--chip", "tpu-v5e", "--format", "json"])``,
  stdout and stderr captured): exit status 0, 2 or 3 only, and on failure exactly one line on stderr, never a
  ``Traceback``, and no control character in it (a hostile file name's escape sequences shown escaped).

Input kinds (``--kinds``):

* ``hlo``: HLO text files of ``fixtures/hlo/`` up to 40 kB, plus two small modules written here;
* ``xspace``: the ``fixtures/profile/*/plugins/profile/*/*.xplane.pb`` files;
* ``chrome``: a small TPU Chrome trace written here (``synthetic_chrome``) and, when the public corpus is
  present (``../shared/corpus/trace_json``), the first module runs of device 0 of each corpus trace;
* ``dir``: profile log directories (``log/plugins/profile/<run>/<host>.xplane.pb``) of mutated layouts
  (several runs or hosts, empty runs, a directory named like a file, symbolic-link loops, broken symbolic
  links, an unreadable file (``chmod 000``; no refusal when run as root), host and run names holding control
  characters and ANSI escape sequences) holding xspace files, mutated or not.

Mutations: byte flips, truncation, duplication and deletion of spans, numbers spliced in (negative, huge,
NaN, inf; in XSpace bytes: 10-byte varints), bracket and brace damage, junk bytes (NUL, invalid UTF-8),
deep nesting, gzip wrapping, gzip bombs (members of 16 MiB of padding, concatenated), and per format: JSON
values of the wrong type in a trace event, and XSpace protobuf fields (event times, stat values, the
embedded HLO proto) set to hostile values.

Outcomes, counted per kind: ``report``; ``HloscopeError`` (message names the file); ``unlocated`` (an
HloscopeError whose message does not name the file); ``other exception``; ``hang`` (over ``--time-limit``
seconds, 10 by default: the case is interrupted by ``SIGALRM``, which a long call into C only sees when it
returns, so the time is also measured); ``memory`` (see below); ``CLI traceback`` (an exception escaped
``hloscope.cli.main``); ``CLI bad exit`` (another status, not one line on stderr, or a control character in
it).

Memory: with ``--tracemalloc`` (default on) the peak of Python's and numpy's allocations during the API call
must stay under ``MEM_MULTIPLE`` x the bytes the readers must look at (the input as stored, or inflated when
gzip-compressed, at most the inflation cap) + ``MEM_CONSTANT``. jaxlib's C++ allocations (printing an embedded
HLO proto) are not traced.

The gzip inflation cap is set to 32 MiB in this process (``HLOSCOPE_MAX_INFLATED_BYTES``, unless already set),
so that bomb cases stay cheap; the bombs inflate to 64 MiB.
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import io
import json
import os
import random
import re
import shutil
import signal
import sys
import tempfile
import time
import traceback
import tracemalloc
import warnings
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO.parent / "shared" / "corpus"
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

KINDS = ("hlo", "xspace", "chrome", "dir")
OUTCOMES = ("report", "HloscopeError", "unlocated", "other exception", "hang", "memory", "CLI traceback",
            "CLI bad exit")
#: Memory bound of one case: MEM_MULTIPLE x input bytes + MEM_CONSTANT (tracemalloc peak).
MEM_MULTIPLE = 16
MEM_CONSTANT = 96 << 20
#: The inflation cap set for the fuzz process (bytes), and the size bombs inflate to.
FUZZ_INFLATE_CAP = 32 << 20
BOMB_BYTES = 64 << 20
CHIP = "tpu-v5e"

# --------------------------------------------------------------------------------------------------------
# Seeds


def _small_hlo_modules() -> dict[str, bytes]:
    loop = """HloModule loop_mod, entry_computation_layout={(f32[4,8]{1,0})->f32[4,8]{1,0}}

%cond (c.p: (s32[], f32[4,8])) -> pred[] {
  %c.p = (s32[], f32[4,8]{1,0}) parameter(0)
  %c.i = s32[] get-tuple-element((s32[], f32[4,8]{1,0}) %c.p), index=0
  %c.n = s32[] constant(10)
  ROOT %c.lt = pred[] compare(s32[] %c.i, s32[] %c.n), direction=LT
}

%body (b.p: (s32[], f32[4,8])) -> (s32[], f32[4,8]) {
  %b.p = (s32[], f32[4,8]{1,0}) parameter(0)
  %b.i = s32[] get-tuple-element((s32[], f32[4,8]{1,0}) %b.p), index=0
  %b.x = f32[4,8]{1,0} get-tuple-element((s32[], f32[4,8]{1,0}) %b.p), index=1
  %b.one = s32[] constant(1)
  %b.j = s32[] add(s32[] %b.i, s32[] %b.one)
  %b.y = f32[4,8]{1,0} exponential(f32[4,8]{1,0} %b.x)
  ROOT %b.t = (s32[], f32[4,8]{1,0}) tuple(s32[] %b.j, f32[4,8]{1,0} %b.y)
}

ENTRY %main (x: f32[4,8]) -> f32[4,8] {
  %x = f32[4,8]{1,0} parameter(0)
  %zero = s32[] constant(0)
  %t = (s32[], f32[4,8]{1,0}) tuple(s32[] %zero, f32[4,8]{1,0} %x)
  %w = (s32[], f32[4,8]{1,0}) while((s32[], f32[4,8]{1,0}) %t), condition=%cond, body=%body
  ROOT %r = f32[4,8]{1,0} get-tuple-element((s32[], f32[4,8]{1,0}) %w), index=1
}
"""
    dot = """HloModule dot_mod

ENTRY %main (a: bf16[128,256], b: bf16[256,512]) -> f32[128,512] {
  %a = bf16[128,256]{1,0} parameter(0)
  %b = bf16[256,512]{1,0} parameter(1)
  %d = f32[128,512]{1,0} dot(bf16[128,256]{1,0} %a, bf16[256,512]{1,0} %b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  %c = f32[] constant(0.5)
  %bc = f32[128,512]{1,0} broadcast(f32[] %c), dimensions={}
  ROOT %m = f32[128,512]{1,0} multiply(f32[128,512]{1,0} %d, f32[128,512]{1,0} %bc)
}
"""
    return {"inline_loop.hlo.txt": loop.encode(), "inline_dot.hlo.txt": dot.encode()}


_TPU_LINES = [
    ("fusion.1", "loop fusion", "%fusion.1 = f32[128,256]{1,0:T(8,128)} fusion(f32[128,256]{1,0:T(8,128)} %p0, "
     "f32[256]{0:T(256)} %p1), kind=kLoop, calls=%fused_computation.1", 32768, 262144),
    ("convolution.2", "convolution", "%convolution.2 = bf16[128,512]{1,0:T(8,128)(2,1)} convolution(bf16[128,256]"
     "{1,0:T(8,128)(2,1)} %a, bf16[256,512]{1,0:T(8,128)(2,1)} %b), dim_labels=bf_io->bf", 33554432, 458752),
    ("copy.3", "data formatting", "%copy.3 = f32[128,256]{0,1:T(8,128)} copy(f32[128,256]{1,0:T(8,128)} "
     "%fusion.1)", 0, 262144),
    ("all-reduce.4", "all-reduce", "%all-reduce.4 = f32[1024]{0:T(1024)} all-reduce(f32[1024]{0:T(1024)} %x), "
     "channel_id=1, replica_groups={{0,1}}, use_global_device_ids=true, to_apply=%add", 1024, 8192),
    ("reduce.5", "reduce", "%reduce.5 = f32[128]{0:T(128)} reduce(f32[128,256]{1,0:T(8,128)} %copy.3, f32[] %c), "
     "dimensions={1}, to_apply=%add", 32768, 131584),
    ("custom-call.6", "custom-call", '%custom-call.6 = f32[8]{0} custom-call(f32[8]{0} %q), '
     'custom_call_target="tpu_custom_call"', 0, 0),
]


def synthetic_chrome() -> dict:
    """A small valid TPU Chrome trace: two devices, two steps each, one module run per step, six ops per run
    (loop fusion, convolution, copy, all-reduce, reduce, custom call), host step markers. Values are strings,
    as libtpu writes them."""
    ev: list[dict] = [{"ph": "M", "pid": 9, "name": "process_name", "args": {"name": "/host:CPU"}},
                      {"ph": "M", "pid": 9, "tid": 5, "name": "thread_name", "args": {"name": "python"}}]
    for dev in (0, 1):
        pid = 3 + dev
        ev.append({"ph": "M", "pid": pid, "name": "process_name", "args": {"name": f"/device:TPU:{dev}"}})
        for tid, name in ((1, "Steps"), (2, "XLA Modules"), (3, "XLA Ops")):
            ev.append({"ph": "M", "pid": pid, "tid": tid, "name": "thread_name", "args": {"name": name}})
    t = 1000.0
    for step in range(2):
        ev.append({"ph": "X", "pid": 9, "tid": 5, "ts": t - 5, "dur": 120.0, "name": "train",
                   "args": {"step_num": str(step), "_r": "1"}})
        for dev in (0, 1):
            pid = 3 + dev
            ev.append({"ph": "X", "pid": pid, "tid": 1, "ts": t, "dur": 100.0, "name": str(step),
                       "args": {"group_id": str(step), "step_num": str(step)}})
            ev.append({"ph": "X", "pid": pid, "tid": 2, "ts": t + 1, "dur": 90.0, "name": "jit_step(1234)",
                       "args": {"device_duration_ps": "90000000", "run_id": str(step)}})
            ts = t + 2
            for name, category, line, flops, nbytes in _TPU_LINES:
                dur = 10.5 + dev
                ev.append({"ph": "X", "pid": pid, "tid": 3, "ts": round(ts, 6), "dur": dur, "name": name,
                           "args": {"long_name": line, "hlo_category": category, "model_flops": str(flops),
                                    "bytes_accessed": str(nbytes), "raw_bytes_accessed": str(nbytes),
                                    "device_duration_ps": str(int(dur * 1e6)), "tf_op": f"jit(step)/{name}",
                                    "source": "model.py:12"}})
                ts += dur + 0.25
        t += 150.0
    return {"displayTimeUnit": "ns", "metadata": {"highres-ticks": True}, "traceEvents": ev}


def _corpus_chrome(path: Path, max_events: int = 150) -> dict:
    """The metadata and the first module runs of device 0 of a corpus trace (up to ``max_events`` events)."""
    doc = json.loads(gzip.decompress(path.read_bytes()))
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    procs = {e.get("pid"): e["args"].get("name", "") for e in events
             if e.get("ph") == "M" and e.get("name") == "process_name"}
    dev0 = next((pid for pid, name in procs.items() if name == "/device:TPU:0"), None)
    meta = [e for e in events if e.get("ph") == "M" and (e.get("pid") == dev0 or procs.get(e.get("pid")) ==
                                                         "/host:CPU")]
    xs = sorted((e for e in events if e.get("ph") == "X" and e.get("pid") == dev0), key=lambda e: e["ts"])
    threads = {e.get("tid"): e["args"].get("name") for e in meta if e.get("name") == "thread_name"
               and e.get("pid") == dev0}
    runs = [e for e in xs if threads.get(e.get("tid")) == "XLA Modules"][:2]
    if runs:
        lo, hi = runs[0]["ts"], runs[-1]["ts"] + runs[-1]["dur"]
        xs = [e for e in xs if lo <= e["ts"] <= hi]
    return {"displayTimeUnit": "ns", "traceEvents": meta + xs[:max_events]}


@dataclass
class Seeds:
    """Seed inputs per kind: name -> bytes (chrome: name -> parsed JSON document)."""

    hlo: dict[str, bytes] = field(default_factory=dict)
    xspace: dict[str, bytes] = field(default_factory=dict)
    chrome: dict[str, dict] = field(default_factory=dict)


_SEEDS: Seeds | None = None


def seeds(corpus: bool = True) -> Seeds:
    """The seed inputs (read once per process). ``corpus``: also use the public corpus when present."""
    global _SEEDS
    if _SEEDS is not None:
        return _SEEDS
    s = Seeds()
    for p in sorted((REPO / "fixtures" / "hlo").glob("*.hlo.txt")):
        if p.stat().st_size <= 40_000:
            s.hlo[p.name] = p.read_bytes()
    s.hlo.update(_small_hlo_modules())
    for p in sorted((REPO / "fixtures" / "profile").glob("*/plugins/profile/*/*.xplane.pb")):
        s.xspace[p.parts[-5]] = p.read_bytes()
    s.chrome["synthetic"] = synthetic_chrome()
    if corpus and (CORPUS / "trace_json").is_dir():
        for p in sorted((CORPUS / "trace_json").glob("*.trace.json.gz"))[:3]:
            try:
                s.chrome["corpus_" + p.name.split("__")[-2]] = _corpus_chrome(p)
            except (OSError, ValueError, KeyError, TypeError):
                continue  # a corpus file that changed shape: not a seed
    _SEEDS = s
    return s


# --------------------------------------------------------------------------------------------------------
# Mutations. Each takes (rng, data) and returns the mutated data and a short description.

_HOSTILE_NUMBERS = [b"-1", b"-9223372036854775809", b"18446744073709551616", b"9223372036854775808", b"1e309",
                    b"-1e309", b"NaN", b"Infinity", b"-Infinity", b"1e-400", b"0", b"-0", b"4294967296",
                    b"2147483648", b"99999999999999999999999999999999999999", b"1" * 5000, b"0.5", b"-2.5e18"]
_NUMBER = re.compile(rb"-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?")
_BRACKETS = b"{}[]()"


def _span(rng: random.Random, n: int) -> tuple[int, int]:
    a = rng.randrange(n + 1)
    return a, min(n, a + rng.choice((1, 2, 8, 64, 512, 4096)))


def m_flip(rng, data: bytes):
    b = bytearray(data)
    k = rng.choice((1, 2, 4, 16))
    for _ in range(k):
        if b:
            b[rng.randrange(len(b))] ^= 1 << rng.randrange(8)
    return bytes(b), f"flip{k}"


def m_truncate(rng, data: bytes):
    cut = rng.randrange(len(data) + 1) if rng.random() < 0.7 else max(0, len(data) - rng.randrange(1, 64))
    return data[:cut], f"truncate@{cut}"


def m_duplicate(rng, data: bytes):
    a, b = _span(rng, len(data))
    at = rng.randrange(len(data) + 1)
    return data[:at] + data[a:b] * rng.choice((1, 2, 10)) + data[at:], f"dup[{a}:{b}]@{at}"


def m_delete(rng, data: bytes):
    a, b = _span(rng, len(data))
    return data[:a] + data[b:], f"del[{a}:{b}]"


def m_number(rng, data: bytes):
    """A number in the text replaced by a hostile one (text formats)."""
    spots = [m.span() for m in _NUMBER.finditer(data, 0, min(len(data), 2_000_000))]
    if not spots:
        return m_flip(rng, data)
    a, b = rng.choice(spots)
    new = rng.choice(_HOSTILE_NUMBERS)
    return data[:a] + new + data[b:], f"number@{a}={new[:12].decode()}"


def m_varint(rng, data: bytes):
    """A 10-byte varint (huge or negative int64) written over the bytes at a random position (XSpace)."""
    at = rng.randrange(len(data) + 1)
    v = rng.choice((b"\xff" * 9 + b"\x01", b"\x80" * 9 + b"\x01", b"\xff" * 10, b"\xff\xff\xff\xff\x0f"))
    end = at + len(v) if rng.random() < 0.5 else at
    return data[:at] + v + data[end:], f"varint@{at}"


def m_bracket(rng, data: bytes):
    spots = [i for i in range(min(len(data), 200_000)) if data[i] in _BRACKETS]
    if not spots:
        return m_flip(rng, data)
    i = rng.choice(spots)
    how = rng.choice(("drop", "swap", "add"))
    if how == "drop":
        return data[:i] + data[i + 1:], f"bracket-drop@{i}"
    if how == "swap":
        return data[:i] + bytes([rng.choice(_BRACKETS)]) + data[i + 1:], f"bracket-swap@{i}"
    return data[:i] + bytes([rng.choice(_BRACKETS)]) + data[i:], f"bracket-add@{i}"


def m_junk(rng, data: bytes):
    at = rng.randrange(len(data) + 1)
    junk = rng.choice((b"\x00", b"\xff\xfe", b"\xc3", "\u2028é\U0001f600".encode(), b"\r", b"\n" * 3,
                       bytes(rng.randrange(256) for _ in range(16)), b'"', b"\\", b"%", b"="))
    return data[:at] + junk + data[at:], f"junk@{at}"


def m_deep(rng, data: bytes):
    """Deep nesting inserted at a random position (JSON arrays, or parentheses for HLO text)."""
    depth = rng.choice((200, 5_000, 100_000))
    at = rng.randrange(len(data) + 1)
    o, c = (b"(", b")") if data[:1] not in (b"{", b"[") else (b"[", b"]")
    return data[:at] + o * depth + c * depth + data[at:], f"deep{depth}@{at}"


BYTE_MUTATIONS: dict[str, Callable] = {"flip": m_flip, "truncate": m_truncate, "duplicate": m_duplicate,
                                       "delete": m_delete, "number": m_number, "bracket": m_bracket,
                                       "junk": m_junk, "deep": m_deep}

_HOSTILE_VALUES = [None, [], {}, "", "x", "NaN", "-1", "1e400", -1, -(2 ** 63) - 1, 2 ** 64, 10 ** 30,
                   float("nan"), float("inf"), float("-inf"), 1e308, True, [1, 2], {"a": {"b": []}}, 3.5,
                   "9" * 40, "/device:TPU:99999999999", "jit_f(" + "9" * 30 + ")", "\x00", "a\nb"]
_EVENT_KEYS = ("pid", "tid", "ts", "dur", "ph", "name", "args")
_ARG_KEYS = ("long_name", "model_flops", "bytes_accessed", "device_duration_ps", "hlo_category", "tf_op",
             "source", "hlo_module", "program_id", "step_num", "name", "labels")


def mutate_chrome_doc(rng: random.Random, doc: dict) -> tuple[dict, str]:
    """A JSON-level mutation of a trace document (a deep copy is changed)."""
    doc = json.loads(json.dumps(doc))
    events = doc["traceEvents"]
    how = rng.choice(("field", "field", "field", "arg", "arg", "event", "top", "drop"))
    i = rng.randrange(len(events))
    if how == "field":
        key = rng.choice(_EVENT_KEYS)
        events[i][key] = rng.choice(_HOSTILE_VALUES)
        return doc, f"ev{i}.{key}"
    if how == "arg":
        args = events[i].setdefault("args", {})
        if not isinstance(args, dict):
            args = events[i]["args"] = {}
        key = rng.choice(_ARG_KEYS)
        args[key] = rng.choice(_HOSTILE_VALUES)
        return doc, f"ev{i}.args.{key}"
    if how == "event":
        events.insert(i, rng.choice(_HOSTILE_VALUES))
        return doc, f"insert-event@{i}"
    if how == "drop":
        key = rng.choice(_EVENT_KEYS)
        events[i].pop(key, None)
        return doc, f"ev{i}-{key}"
    what = rng.choice(("no-events", "events-object", "events-number", "bare-array", "extra-key"))
    if what == "no-events":
        del doc["traceEvents"]
    elif what == "events-object":
        doc["traceEvents"] = {"0": events[0]}
    elif what == "events-number":
        doc["traceEvents"] = 5
    elif what == "bare-array":
        return events, "bare-array"  # type: ignore[return-value]
    else:
        doc["metadata"] = rng.choice(_HOSTILE_VALUES)
    return doc, f"top-{what}"


def mutate_xspace_proto(rng: random.Random, data: bytes) -> tuple[bytes, str]:
    """A protobuf-level mutation of an XSpace: an event time, a stat value or an embedded HLO proto."""
    from hloscope.parsers import _xspace_schema as schema

    space = schema.XSpace.FromString(data)
    planes = [p for p in space.planes if p.lines or p.event_metadata]
    if not planes:
        return m_flip(rng, data)
    plane = rng.choice(planes)
    how = rng.choice(("event", "event", "stat", "line", "hlo", "metadata"))
    huge = rng.choice((-1, 2 ** 63 - 1, -(2 ** 63), 2 ** 62, 10 ** 18))
    if how == "hlo":
        protos = [(mid, st) for mid, md in plane.event_metadata.items() for st in md.stats
                  if st.WhichOneof("value") == "bytes_value" and len(st.bytes_value) > 64]
        if protos:
            _, st = rng.choice(protos)
            raw = bytearray(st.bytes_value)
            if rng.random() < 0.5:
                del raw[rng.randrange(len(raw)):]
            else:
                for _ in range(rng.choice((1, 8, 64))):
                    raw[rng.randrange(len(raw))] ^= 1 << rng.randrange(8)
            st.bytes_value = bytes(raw)
            return space.SerializeToString(), "hlo-proto"
        how = "event"
    lines = list(plane.lines)
    if how == "metadata" or not lines:
        if plane.event_metadata:
            mid = rng.choice(list(plane.event_metadata))
            md = plane.event_metadata[mid]
            md.name = rng.choice(("", "x" * 10_000, "jit_f(" + "9" * 5000 + ")", "\x00\xff", "jit_f(-1)"))
            return space.SerializeToString(), "md-name"
        return m_flip(rng, data)
    line = rng.choice(lines)
    if how == "line" or not line.events:
        field_ = rng.choice(("timestamp_ns", "duration_ps", "name"))
        if field_ == "name":
            line.name = rng.choice(("XLA Ops", "Steps", "XLA Modules", "", "\x00"))
        else:
            setattr(line, field_, huge)
        return space.SerializeToString(), f"line.{field_}"
    ev = rng.choice(list(line.events))
    if how == "event":
        field_ = rng.choice(("offset_ps", "duration_ps", "metadata_id", "num_occurrences"))
        if field_ == "metadata_id":
            ev.metadata_id = rng.choice((0, 10 ** 9, -1))
        elif field_ == "num_occurrences":
            ev.ClearField("offset_ps")
            ev.num_occurrences = rng.choice((-1, 2 ** 62))
        else:
            setattr(ev, field_, huge)
        return space.SerializeToString(), f"event.{field_}"
    if ev.stats:
        st = rng.choice(list(ev.stats))
        kind = rng.choice(("int64_value", "uint64_value", "double_value", "str_value", "ref_value",
                           "metadata_id"))
        if kind == "double_value":
            st.double_value = rng.choice((float("nan"), float("inf"), -1e300))
        elif kind == "str_value":
            st.str_value = rng.choice(("", "9" * 5000, "\x00", "x" * 100_000))
        elif kind == "ref_value":
            st.ref_value = rng.choice((0, 10 ** 12))
        elif kind == "uint64_value":
            st.uint64_value = 2 ** 64 - 1
        elif kind == "metadata_id":
            st.metadata_id = 10 ** 9
        else:
            st.int64_value = huge
        return space.SerializeToString(), f"stat.{kind}"
    return m_flip(rng, data)


def _gzip_member(data: bytes) -> bytes:
    return gzip.compress(data, compresslevel=1, mtime=0)


_PAD_MEMBER: dict[bytes, bytes] = {}


def gzip_bomb(prefix: bytes, pad: bytes, suffix: bytes, total: int = BOMB_BYTES) -> bytes:
    """gzip members ``prefix``, then ``total`` bytes of ``pad`` repeated (16 MiB members, compressed once per
    process), then ``suffix``: a small file that inflates to ``total`` bytes and more."""
    block = 16 << 20
    member = _PAD_MEMBER.get(pad)
    if member is None:
        member = _PAD_MEMBER[pad] = gzip.compress(pad * (block // len(pad)), compresslevel=9, mtime=0)
    return _gzip_member(prefix) + member * (total // block) + _gzip_member(suffix)


# --------------------------------------------------------------------------------------------------------
# Cases


@dataclass
class Case:
    """One fuzz input: how to write it, what it took, how big it is.

    Attributes:
        kind, index: the input kind and the case number.
        seed: the seed input's name.
        mutations: what was done to it, in order.
        write: writes the input under a directory and returns the path to analyze.
        size: the bytes the readers must look at (inflated size for gzip, at most the inflation cap).
    """

    kind: str
    index: int
    seed: str
    mutations: list[str]
    write: Callable[[Path], Path]
    size: int


def _mutate_bytes(rng: random.Random, data: bytes, names: tuple[str, ...], k: int) -> tuple[bytes, list[str]]:
    done = []
    for _ in range(k):
        if not data:
            break
        data, what = BYTE_MUTATIONS[rng.choice(names)](rng, data)
        done.append(what)
    return data, done


def _write_file(name: str, data: bytes) -> Callable[[Path], Path]:
    def write(d: Path) -> Path:
        p = d / name
        p.write_bytes(data)
        return p

    return write


def _inflated(data: bytes, stored: int) -> int:
    if data[:2] != b"\x1f\x8b":
        return stored
    return min(_inflated_size(data), FUZZ_INFLATE_CAP)


def _inflated_size(data: bytes) -> int:
    d = gzip.GzipFile(fileobj=io.BytesIO(data))
    n = 0
    try:
        while True:
            chunk = d.read(1 << 20)
            if not chunk:
                return n
            n += len(chunk)
            if n > FUZZ_INFLATE_CAP:
                return n
    except (OSError, EOFError, ValueError):
        return max(n, len(data))


def _hlo_case(rng: random.Random, index: int) -> Case:
    s = seeds()
    name = rng.choice(sorted(s.hlo))
    data, done = _mutate_bytes(rng, s.hlo[name], tuple(BYTE_MUTATIONS), rng.choice((1, 1, 2, 3)))
    if rng.random() < 0.05:
        data, done = _gzip_member(data), done + ["gzip"]
    return Case("hlo", index, name, done, _write_file("case.hlo.txt", data), max(len(data), 1))


def _xspace_bytes(rng: random.Random, data: bytes) -> tuple[bytes, list[str], bool]:
    """Mutated XSpace bytes, what was done, whether to name the file ``.xplane.pb.gz``."""
    done = []
    for _ in range(rng.choice((1, 1, 2))):
        if rng.random() < 0.4:
            try:
                data, what = mutate_xspace_proto(rng, data)
            except Exception:  # bytes that no longer decode: mutate them as bytes
                data, what = m_flip(rng, data)
        else:
            names = ("flip", "truncate", "duplicate", "delete", "junk")
            data, what = BYTE_MUTATIONS[rng.choice(names)](rng, data) if data else (data, "empty")
            if rng.random() < 0.3:
                data, what = m_varint(rng, data)
        done.append(what)
    gz = False
    r = rng.random()
    if r < 0.08:
        data, gz = _gzip_member(data), rng.random() < 0.5
        done.append("gzip")
        if rng.random() < 0.3:
            data = data[: rng.randrange(len(data) + 1)]
            done.append("gzip-truncated")
    elif r < 0.11:
        data, gz = gzip_bomb(data, b"\x00", b""), rng.random() < 0.5
        done.append("gzip-bomb")
    return data, done, gz


def _xspace_case(rng: random.Random, index: int) -> Case:
    s = seeds()
    name = rng.choice(sorted(s.xspace))
    data, done, gz = _xspace_bytes(rng, s.xspace[name])
    fname = "localhost.xplane.pb.gz" if gz else "localhost.xplane.pb"
    return Case("xspace", index, name, done, _write_file(fname, data), _inflated(data, max(len(data), 1)))


def _chrome_case(rng: random.Random, index: int) -> Case:
    s = seeds()
    name = rng.choice(sorted(s.chrome))
    doc = s.chrome[name]
    done = []
    if rng.random() < 0.5:
        doc, what = mutate_chrome_doc(rng, doc)
        done.append(what)
    text = json.dumps(doc, allow_nan=True).encode()
    if not done or rng.random() < 0.4:
        text, more = _mutate_bytes(rng, text, tuple(BYTE_MUTATIONS), rng.choice((1, 1, 2)))
        done += more
    r = rng.random()
    if r < 0.04:
        head = text[: len(text) // 2]
        cut = head.rfind(b",")
        data = gzip_bomb(text[:cut + 1] if cut > 0 else b'{"traceEvents": [', b" ", text[cut + 1:] if cut > 0
                         else b"]}")
        done.append("gzip-bomb")
        fname = "localhost.trace.json.gz"
    elif r < 0.85:
        data, fname = _gzip_member(text), "localhost.trace.json.gz"
        if rng.random() < 0.05:
            data = data[: rng.randrange(len(data) + 1)]
            done.append("gzip-truncated")
    else:
        data, fname = text, "localhost.trace.json"
    return Case("chrome", index, name, done, _write_file(fname, data), _inflated(data, max(len(data), 1)))


_LAYOUTS = ("log", "profile-dir", "run-dir", "two-runs", "two-hosts", "dir-named-xplane", "empty-runs",
            "zero-byte", "with-chrome", "symlink-loop", "profile-is-file", "odd-host", "gz-host", "no-runs",
            "broken-link", "only-dir-named-xplane", "unreadable", "odd-run")


def _dir_case(rng: random.Random, index: int) -> Case:
    s = seeds()
    name = rng.choice(sorted(s.xspace))
    good = s.xspace[name]
    layout = rng.choice(_LAYOUTS)
    done = [layout]
    if rng.random() < 0.7:
        bad, more, _ = _xspace_bytes(rng, good)
        done += more
    else:
        bad = good
    chrome = _gzip_member(json.dumps(s.chrome["synthetic"]).encode())
    host = rng.choice(("localhost", "t1v-n-0-w-3", "h\u00f6st", "new\nline", "tab\there", " ", "-r",
                       "esc\x1b[2J\x1b]0;t\x07", "bidi\u202eetc"))
    run_name = rng.choice(("2026_01_11_21_26_41", "run0", "zz"))
    if layout == "odd-run":
        run_name = rng.choice(("esc\x1b[31mred", "bell\x07", "del\x7f", "c1\x9b2J"))

    def write(d: Path) -> Path:
        log = d / "log"
        prof = log / "plugins" / "profile"
        run = prof / run_name
        if layout == "profile-is-file":
            (log / "plugins").mkdir(parents=True)
            prof.write_bytes(bad)
            return log
        run.mkdir(parents=True)
        if layout == "no-runs":
            shutil.rmtree(run)
            return log
        if layout == "empty-runs":
            (prof / "2027_01_01_00_00_00").mkdir()
            return log
        if layout == "broken-link":
            os.symlink(run / "gone.xplane.pb", run / "localhost.xplane.pb")
            return rng.choice((log, run, run / "localhost.xplane.pb"))
        if layout == "only-dir-named-xplane":
            (run / "localhost.xplane.pb").mkdir()
            return rng.choice((log, run, run / "localhost.xplane.pb"))
        target = f"{host if layout == 'odd-host' else 'localhost'}.xplane.pb"
        if layout == "gz-host":
            target += ".gz"
            (run / target).write_bytes(_gzip_member(bad))
        elif layout == "zero-byte":
            (run / target).write_bytes(b"")
        else:
            (run / target).write_bytes(bad)
        if layout == "two-runs":
            older = prof / "2000_01_01_00_00_00"
            older.mkdir()
            (older / "localhost.xplane.pb").write_bytes(good)
        elif layout == "two-hosts":
            (run / "zhost.xplane.pb").write_bytes(good)
        elif layout == "dir-named-xplane":
            (run / "a.xplane.pb").mkdir()
        elif layout == "with-chrome":
            (run / "localhost.trace.json.gz").write_bytes(chrome)
        elif layout == "symlink-loop":
            os.symlink("loop.xplane.pb", run / "loop.xplane.pb")
        elif layout == "unreadable":  # permission denied (not as root, which chmod 000 does not stop)
            (run / target).chmod(0)
        if layout == "profile-dir":
            return prof
        if layout == "run-dir":
            return run
        return log

    return Case("dir", index, name, done, write, _inflated(bad, max(len(bad), 1)))


_MAKERS = {"hlo": _hlo_case, "xspace": _xspace_case, "chrome": _chrome_case, "dir": _dir_case}


def make_case(seed: int, index: int, kinds: tuple[str, ...] = KINDS) -> Case:
    """Case ``index`` of a run with ``seed`` over ``kinds`` (kinds in turn; each case's own random stream)."""
    kind = kinds[index % len(kinds)]
    rng = random.Random(f"hloscope-fuzz:{seed}:{kind}:{index}")
    return _MAKERS[kind](rng, index)


# --------------------------------------------------------------------------------------------------------
# The oracle


class _Timeout(BaseException):
    """Raised by the SIGALRM handler: a case ran past its time limit (a BaseException, so that no
    ``except Exception`` of the code under test swallows it)."""


@contextlib.contextmanager
def deadline(seconds: float):
    """Interrupt the body after ``seconds`` (main thread only; elsewhere the limit is only measured)."""
    import threading

    if threading.current_thread() is not threading.main_thread() or not seconds:
        yield
        return

    def on_alarm(signum, frame):
        raise _Timeout()

    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


@dataclass
class Result:
    """What one case did.

    Attributes:
        outcome: one of ``OUTCOMES`` (the worst of the API's and the CLI's).
        api: the API's outcome; cli: the CLI's (None when not run).
        detail: the exception type and message (first line), or what the CLI printed.
        where: for an unexpected exception, the innermost hloscope frame (``file:line``).
        seconds: wall time of the API call; peak: its tracemalloc peak (bytes, 0 when not measured).
    """

    outcome: str
    api: str
    cli: str | None
    detail: str = ""
    where: str = ""
    seconds: float = 0.0
    peak: int = 0


def _where(tb) -> str:
    frames = [f for f in traceback.extract_tb(tb) if "hloscope" in f.filename and "benchmarks" not in f.filename]
    if not frames:
        return ""
    f = frames[-1]
    return f"{os.path.relpath(f.filename, REPO)}:{f.lineno}"


def _hlo_parser_frame(where: str) -> bool:
    """Whether a failure lies in the HLO-text parser (``hloscope/hlo.py``, ``hloscope/parsers/_hlo_*.py``)."""
    return where.startswith(("hloscope/hlo.py", "hloscope/parsers/_hlo_")) and "_hlo_line" not in where


def run_api(path: Path, token: str, time_limit: float, measure_memory: bool) -> tuple[str, str, str, float, int]:
    """``hloscope.analyze(path)`` under the time limit: (outcome, detail, where, seconds, tracemalloc peak)."""
    import hloscope
    from hloscope.errors import HloscopeError

    detail = where = ""
    peak = 0
    if measure_memory:
        tracemalloc.start()
    t0 = time.perf_counter()
    try:
        with deadline(time_limit):
            hloscope.analyze(str(path), chip=CHIP)
        outcome = "report"
    except _Timeout:
        outcome, detail = "hang", f"over {time_limit} s"
    except HloscopeError as e:
        text = str(e)
        outcome = "HloscopeError" if token in text else "unlocated"
        detail = f"{type(e).__name__}: {text.splitlines()[0][:300] if text else ''}"
        where = _where(e.__traceback__) if outcome == "unlocated" else ""
    except (Exception, RecursionError) as e:  # noqa: BLE001 - the oracle classifies every escape
        outcome = "other exception"
        first = str(e).splitlines()[0][:200] if str(e) else ""
        detail, where = f"{type(e).__name__}: {first}", _where(e.__traceback__)
    finally:
        seconds = time.perf_counter() - t0
        if measure_memory:
            peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
    if outcome != "hang" and seconds > time_limit:
        outcome, detail = "hang", f"{seconds:.1f} s (in a call that ignored the alarm)"
    return outcome, detail, where, seconds, peak


@contextlib.contextmanager
def _fd2_to(tmp):
    """File descriptor 2 (where C++ libraries log) redirected to the file ``tmp`` while the block runs."""
    sys.stderr.flush()
    saved = os.dup(2)
    os.dup2(tmp.fileno(), 2)
    try:
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def run_cli(path: Path, time_limit: float) -> tuple[str, str]:
    """``hloscope.cli.main(["report", path, ...])`` in-process: (outcome, detail). What reaches stderr counts
    both ``sys.stderr`` and file descriptor 2 (C++ log lines of jaxlib)."""
    from hloscope import cli

    out, err = io.StringIO(), io.StringIO()
    with tempfile.TemporaryFile() as fd2:
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), _fd2_to(fd2), \
                    deadline(time_limit):
                code = cli.main(["report", str(path), "--chip", CHIP, "--format", "json"])
        except _Timeout:
            return "hang", "CLI over the time limit"
        except SystemExit as e:
            code = e.code
        except (Exception, RecursionError) as e:  # noqa: BLE001
            return "CLI traceback", f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"
        fd2.seek(0)
        native = fd2.read(1 << 16).decode("utf-8", "replace")
    text = native + err.getvalue()
    lines = text.splitlines()
    if "Traceback" in text:
        return "CLI traceback", text[-300:]
    if code not in (0, 2, 3):
        return "CLI bad exit", f"exit {code}: {text[:200]}"
    if code and len(lines) != 1:
        return "CLI bad exit", f"exit {code} with {len(lines)} lines on stderr: {text[:300]!r}"
    if code and not lines[0].isprintable():
        return "CLI bad exit", f"exit {code} with control characters on stderr: {text[:300]!r}"
    return "ok", ""


_RANK = {o: i for i, o in enumerate(OUTCOMES)}


def run_case(case: Case, root: Path, *, time_limit: float = 10.0, cli: bool = True,
             measure_memory: bool = True, keep: bool = False) -> Result:
    """Write ``case`` under ``root`` and run the oracle on it (the API, then the CLI)."""
    token = f"fz{case.kind}{case.index:06d}"
    d = root / token
    if d.exists():
        shutil.rmtree(d)
    d.mkdir(parents=True)
    try:
        path = case.write(d)
        with warnings.catch_warnings():
            warnings.simplefilter("default")  # each case warns as a fresh process would
            api, detail, where, seconds, peak = run_api(path, token, time_limit, measure_memory)
            over = measure_memory and peak > MEM_MULTIPLE * case.size + MEM_CONSTANT
            if api in ("report", "HloscopeError") and over:
                api, detail = "memory", f"peak {peak / 2**20:.0f} MiB for {case.size / 2**20:.2f} MiB of input"
            cli_outcome, cli_detail = run_cli(path, time_limit) if cli else (None, "")
    finally:
        if not keep:
            shutil.rmtree(d, ignore_errors=True)
    outcome = api
    if cli_outcome not in (None, "ok") and _RANK[cli_outcome] > _RANK[api]:
        outcome, detail = cli_outcome, cli_detail
    return Result(outcome, api, cli_outcome, detail, where, seconds, peak)


# --------------------------------------------------------------------------------------------------------
# The runner


def table(counts: dict[str, Counter]) -> str:
    """Outcome counts per kind as a Markdown table."""
    kinds = [k for k in KINDS if k in counts]
    head = "| kind | cases | " + " | ".join(OUTCOMES) + " |"
    rows = [head, "|" + "---|" * (len(OUTCOMES) + 2)]
    total: Counter = Counter()
    for k in kinds:
        total.update(counts[k])
        rows.append(f"| {k} | {sum(counts[k].values())} | " + " | ".join(str(counts[k][o]) for o in OUTCOMES)
                    + " |")
    rows.append(f"| all | {sum(total.values())} | " + " | ".join(str(total[o]) for o in OUTCOMES) + " |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", type=int, default=3200, help="number of cases (kinds take turns)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--kinds", default=",".join(KINDS), help=f"comma-separated subset of {','.join(KINDS)}")
    ap.add_argument("--case", type=int, help="run only this case number (reproduce a failure)")
    ap.add_argument("--keep", type=Path, help="write the inputs under this directory and keep them")
    ap.add_argument("--time-limit", type=float, default=10.0, help="seconds per case (default 10)")
    ap.add_argument("--no-cli", action="store_true", help="skip the in-process CLI check")
    ap.add_argument("--no-tracemalloc", action="store_true", help="do not measure memory (faster)")
    ap.add_argument("--no-corpus", action="store_true", help="do not use ../shared/corpus seeds")
    ap.add_argument("--examples", type=int, default=3, help="failure examples printed per group")
    ap.add_argument("--log", type=Path, help="write one tab-separated line per case (kind, case, outcome, "
                                             "API outcome, detail) to this file")
    args = ap.parse_args(argv)
    kinds = tuple(k for k in args.kinds.split(",") if k)
    if not set(kinds) <= set(KINDS):
        ap.error(f"--kinds: unknown kind(s) {sorted(set(kinds) - set(KINDS))}; choose from {KINDS}")
    os.environ.setdefault("HLOSCOPE_MAX_INFLATED_BYTES", str(FUZZ_INFLATE_CAP))
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    seeds(corpus=not args.no_corpus)
    indices = [args.case] if args.case is not None else range(args.cases)
    counts: dict[str, Counter] = {}
    failures: dict[tuple, list] = {}
    root = args.keep or Path(tempfile.mkdtemp(prefix="hloscope-fuzz-"))
    t0 = time.perf_counter()
    slowest = (0.0, None)
    log = open(args.log, "w", encoding="utf-8") if args.log else None  # noqa: SIM115 - closed below
    try:
        for i in indices:
            case = make_case(args.seed, i, kinds)
            r = run_case(case, root, time_limit=args.time_limit, cli=not args.no_cli,
                         measure_memory=not args.no_tracemalloc, keep=args.keep is not None)
            counts.setdefault(case.kind, Counter())[r.outcome] += 1
            if log:
                detail = r.detail.replace("\t", " ").replace("\n", " ")[:300]
                log.write(f"{case.kind}\t{i}\t{r.outcome}\t{r.api}\t{detail}\n")
            if r.seconds > slowest[0]:
                slowest = (r.seconds, f"{case.kind} case {i}")
            if r.outcome not in ("report", "HloscopeError"):
                key = (case.kind, r.outcome, r.detail.split(":")[0], r.where)
                failures.setdefault(key, []).append((i, case, r))
    finally:
        if log:
            log.close()
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)
    elapsed = time.perf_counter() - t0
    print(f"seed {args.seed}, {sum(sum(c.values()) for c in counts.values())} cases, {elapsed:.1f} s "
          f"(slowest: {slowest[0]:.2f} s, {slowest[1]})")
    print(table(counts))
    for (kind, outcome, exc, where), items in sorted(failures.items(), key=lambda kv: -len(kv[1])):
        owner = " [the HLO-text parser]" if _hlo_parser_frame(where) else ""
        print(f"\n{len(items)} x {kind} / {outcome} / {exc} at {where or '-'}{owner}")
        for i, case, r in items[: args.examples]:
            print(f"  case {i} (seed input {case.seed}; {', '.join(case.mutations)}): {r.detail[:240]!r}")
            print(f"    reproduce: python benchmarks/fuzz.py --seed {args.seed} --kinds {','.join(kinds)} "
                  f"--case {i} --keep /tmp/fuzzcase")
    return 0


if __name__ == "__main__":
    sys.exit(main())
