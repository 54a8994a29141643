"""The code-array groupings of ``steps.breakdown`` and ``roofline.join`` equal the pandas groupbys they replace."""

from pathlib import Path

import numpy as np
import pytest

from hloscope.parsers.events import read_trace
from hloscope.roofline.join import _devices, _op_sums, named_modules
from hloscope.steps.breakdown import _device_groups, _op_pairs

ROOT = Path(__file__).resolve().parents[2]
PROFILES = sorted(p for p in (ROOT / "fixtures" / "profile").iterdir() if p.is_dir())


@pytest.fixture(scope="module", params=PROFILES, ids=lambda p: p.name)
def ops(request):
    return named_modules(read_trace(request.param, None).ops)


def test_device_groups_equal_pandas_indices(ops):
    expected = ops.groupby(["host", "device", "device_id"], observed=True, sort=True).indices
    got = _device_groups(ops)
    assert list(got) == list(expected)
    for key, rows in expected.items():
        np.testing.assert_array_equal(got[key], rows)


def test_device_groups_without_categoricals(ops):
    plain = ops.astype({"host": str, "device": str})
    expected = plain.groupby(["host", "device", "device_id"], observed=True, sort=True).indices
    assert list(_device_groups(plain)) == list(expected)


def test_op_sums_equal_pandas_groupby_in_order(ops):
    grouped = ops.groupby(["module", "instruction"], observed=True, sort=False)["self_ps"].agg(["sum", "count"])
    expected = {(str(m), str(i)): (int(t), int(c))
                for (m, i), t, c in zip(grouped.index, grouped["sum"].tolist(), grouped["count"].tolist())}
    assert list(_op_sums(ops).items()) == list(expected.items())


def test_devices_equal_drop_duplicates(ops):
    expected = {(str(h), str(d), int(i))
                for h, d, i in ops[["host", "device", "device_id"]].drop_duplicates().itertuples(index=False)}
    assert _devices(ops) == expected


def test_op_pairs_index_the_distinct_pairs(ops):
    pair, names = _op_pairs(ops)
    assert len(set(names)) == len(names) and pair.dtype == np.int32
    got = [names[k] for k in pair.tolist()]
    assert got == [(str(m), str(i)) for m, i in zip(ops["module"], ops["instruction"])]
