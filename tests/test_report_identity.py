"""Speed work must not move a number: every fixture's JSON report equals, section by section, the report of
the commit recorded in ``tests/data/report_digests.json`` (made by ``tests/data/make_report_digests.py``: first
at c8380e1, before issue #16's speed work; remade at 5a7361b with the fix of async flights that read the done
op's communication flag from the wrong event -- only the ``steps`` of the three vllm TPU traces moved, by at
most 8.4 ns of busy time per step; ``tests/steps/test_breakdown.py::test_flight_found_whatever_the_event_order``;
remade at 83860d3, where the modules table's time by bound class became an exact sum (``math.fsum``) instead of
pandas' groupby sum, whose last bit depends on the pandas version -- only ``modules`` of six inputs moved, each
value by at most 3e-16 relative; ``tests/roofline/test_group_sums.py``).

A change that means to move numbers regenerates the digests (``python tests/data/make_report_digests.py``) and
says so in its commit; the failure message names the sections that moved.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"
sys.path.insert(0, str(DATA))

from make_report_digests import report_digests  # noqa: E402

_RECORDED = json.loads((DATA / "report_digests.json").read_text())


@pytest.mark.parametrize("rel", sorted(_RECORDED["inputs"]))
def test_report_json_is_unchanged(rel: str) -> None:
    path = (ROOT / rel).resolve()
    if not path.exists():
        pytest.skip(f"{rel} is not here (the shared corpus is optional)")
    entry = _RECORDED["inputs"][rel]
    now = report_digests(str(path), entry["chip"])
    moved = sorted(k for k in set(now) | set(entry["digests"]) if now.get(k) != entry["digests"].get(k))
    assert not moved, f"{rel}: sections moved since commit {_RECORDED['commit']}: {moved}"


def test_the_reference_covers_every_fixture() -> None:
    """Each fixture HLO, the dump dir and the bundled profiles are in the reference (a new fixture is added by
    regenerating it)."""
    fixtures = {f"fixtures/hlo/{f.name}" for f in (ROOT / "fixtures" / "hlo").glob("*.hlo.txt")}
    fixtures |= {"fixtures/dump/cpu_small"}
    fixtures |= {f"fixtures/profile/{n}" for n in ("cpu_train_step", "gpu_mlp_train", "gpu_mlp_train_nocb")}
    assert fixtures <= set(_RECORDED["inputs"]), sorted(fixtures - set(_RECORDED["inputs"]))
