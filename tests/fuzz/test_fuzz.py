"""Fuzz test (issue #20, "any input, no traceback"): seeded, mutated HLO text, XSpace files, Chrome traces and
profile directories through ``hloscope.analyze`` and the CLI.

The engine -- seeds, mutations, oracle -- is ``benchmarks/fuzz.py`` (its docstring says what each input kind and
mutation is); this test runs ``CASES_PER_KIND`` cases of each kind with ``SEED``, one test per case, so that a
failure names its case and reproduces alone with::

    python benchmarks/fuzz.py --seed 20 --case N --keep /tmp/case    # N: the test id's number

Oracle: ``analyze`` returns a ``Report`` or raises an ``HloscopeError`` whose message names the file; the
in-process CLI (``hloscope.cli.main``, on every other case: it repeats the API's work) exits 0, 2 or 3, with one
line on stderr on failure (file descriptor 2 included, where jaxlib logs), no control character in it (file, host
and run names holding ANSI escape sequences are among the inputs) and no traceback. Each case is
interrupted after 10 s (``SIGALRM``) and its tracemalloc peak must stay under ``MEM_MULTIPLE`` (16) x the bytes
the readers must look at (inflated size for gzip, at most the cap) + 96 MiB. The gzip inflation cap is set to
32 MiB (``HLOSCOPE_MAX_INFLATED_BYTES``) so that the bomb cases (64 MiB inflated) stay cheap. A few cases also
run the real CLI in a subprocess (``test_cli_in_a_subprocess``).

``KNOWN`` lists cases whose failure lies in a file being fixed elsewhere (the HLO-text parser); they are
``xfail(strict=False)`` with the reason.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("hloscope_fuzz_engine", REPO / "benchmarks" / "fuzz.py")
fuzz = sys.modules[_spec.name] = importlib.util.module_from_spec(_spec)  # registered: it holds dataclasses
_spec.loader.exec_module(fuzz)

SEED = 20
CASES_PER_KIND = 80
TIME_LIMIT_S = 10.0
#: (kind, case) -> why it fails today, in a file another change owns.
KNOWN: dict[tuple[str, int], str] = {}


@pytest.fixture(scope="module")
def fuzz_root(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HLOSCOPE_MAX_INFLATED_BYTES", str(fuzz.FUZZ_INFLATE_CAP))
        yield tmp_path_factory.mktemp("fuzz")


def _params():
    out = []
    for i in range(CASES_PER_KIND * len(fuzz.KINDS)):
        kind = fuzz.KINDS[i % len(fuzz.KINDS)]
        marks = [pytest.mark.xfail(strict=False, reason=KNOWN[(kind, i)])] if (kind, i) in KNOWN else []
        out.append(pytest.param(i, id=f"{kind}-{i}", marks=marks))
    return out


@pytest.mark.parametrize("index", _params())
def test_fuzz_case(fuzz_root, index):
    case = fuzz.make_case(SEED, index)
    r = fuzz.run_case(case, fuzz_root, time_limit=TIME_LIMIT_S, cli=index % 2 == 0, measure_memory=True)
    assert r.outcome in ("report", "HloscopeError"), (
        f"{case.kind} case {index} (seed input {case.seed}; {', '.join(case.mutations)}): {r.outcome}: "
        f"{r.detail} at {r.where or '?'} -- reproduce: python benchmarks/fuzz.py --seed {SEED} --case {index} "
        "--keep /tmp/case")


def test_seeds_of_every_kind():
    """Every kind has seeds (the corpus ones are optional), and the kinds take turns."""
    s = fuzz.seeds()
    assert s.hlo and s.xspace and s.chrome
    kinds = {fuzz.make_case(SEED, i).kind for i in range(8)}
    assert kinds == set(fuzz.KINDS)


_SUBPROCESS_CASES = [
    # (what, the input _write_input writes)
    ("xspace with a corrupt HLO proto: jaxlib logs on fd 2", "corrupt_hlo"),
    ("chrome gzip bomb", "bomb"),
    ("truncated xspace", "truncated"),
]


def _write_input(kind: str, d: Path) -> Path:
    from hloscope.parsers import _xspace_schema as schema

    xplane = REPO / "fixtures" / "profile" / "gpu_mlp_train" / "plugins" / "profile" / "run0" / "localhost.xplane.pb"
    if kind == "corrupt_hlo":
        space = schema.XSpace.FromString(xplane.read_bytes())
        for plane in space.planes:
            for md in plane.event_metadata.values():
                for st in md.stats:
                    if st.WhichOneof("value") == "bytes_value" and len(st.bytes_value) > 1000:
                        st.bytes_value = st.bytes_value[: len(st.bytes_value) // 2]
        p = d / "localhost.xplane.pb"
        p.write_bytes(space.SerializeToString())
        return p
    if kind == "bomb":
        p = d / "localhost.trace.json.gz"
        p.write_bytes(fuzz.gzip_bomb(b'{"traceEvents": [', b" ", b"]}"))
        return p
    p = d / "localhost.xplane.pb"
    p.write_bytes(xplane.read_bytes()[:30000])
    return p


@pytest.mark.parametrize("what, kind", _SUBPROCESS_CASES, ids=[k for _, k in _SUBPROCESS_CASES])
def test_cli_in_a_subprocess(tmp_path, what, kind):
    """The real command line, in its own process: exit 2, one line on stderr (jaxlib's C++ logs included),
    naming the file; no traceback."""
    path = _write_input(kind, tmp_path)
    env = dict(os.environ, HLOSCOPE_MAX_INFLATED_BYTES=str(fuzz.FUZZ_INFLATE_CAP), JAX_PLATFORMS="cpu")
    proc = subprocess.run([sys.executable, "-m", "hloscope", "report", str(path), "--chip", "tpu-v5e"],
                          capture_output=True, text=True, env=env, timeout=120, cwd=REPO)
    assert proc.returncode == 2, (what, proc.returncode, proc.stderr[-2000:])
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, (what, proc.stderr[-2000:])
    assert str(path) in lines[0]


def test_the_cli_oracle_refuses_control_characters(monkeypatch, tmp_path):
    """``run_cli`` counts an error line holding a control character (an unescaped escape sequence of a hostile
    file name) as ``CLI bad exit``."""
    from hloscope import cli

    def main(argv):
        print("hloscope: /tmp/run\x1b[2J: bad", file=sys.stderr)
        return 2

    monkeypatch.setattr(cli, "main", main)
    outcome, detail = fuzz.run_cli(tmp_path, 10.0)
    assert outcome == "CLI bad exit" and "control characters" in detail
