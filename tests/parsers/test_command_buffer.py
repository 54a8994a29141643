"""Kernels replayed from GPU command buffers, joined back to their instructions -- checked against a trace of
the same program with command buffers off, where XLA itself tags every kernel with its instruction."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from hloscope.parsers import parse_hlo
from hloscope.parsers._command_buffer import join_command_buffer_kernels
from hloscope.parsers._xspace import read_xspace_events

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
RUN = Path("plugins/profile/run0/localhost.xplane.pb")


@pytest.fixture(scope="module")
def module():
    return parse_hlo(FIXTURES / "hlo" / "gpu-h100_mlp_train.hlo.txt")


def _events(name):
    return read_xspace_events([FIXTURES / "profile" / name / RUN]).ops


def _sequence(events):
    """The instructions of the kernels (memsets left out), in launch order."""
    real = events[~events["name"].str.startswith("Memset")].sort_values("start_ps")
    return list(real["instruction"].astype(str))


def test_command_buffer_trace_names_no_instruction(module):
    names = {i.name for _, i in module.instructions()}
    events = _events("gpu_mlp_train")
    assert len(events) > 50
    assert not events["instruction"].isin(names).any()
    assert set(events["instruction"]) == {"command_buffer_1"}


def test_joined_kernels_match_the_trace_without_command_buffers(module):
    events = _events("gpu_mlp_train")
    joined, counts = join_command_buffer_kernels(events, {module.name: module})
    reference = _events("gpu_mlp_train_nocb")  # hlo_op written by XLA for each kernel
    assert counts["by_gemm_order"] == 5 * 5  # 5 steps x 5 cuBLAS GEMMs
    # The same instructions in the same order, kernel for kernel, over all 5 steps. (Kernel names are not
    # compared: cuBLAS picked a different algorithm for one GEMM in the two processes.)
    assert _sequence(joined) == _sequence(reference)
    # Each kernel XLA emitted is named after the instruction both traces give it.
    xla_kernels = joined[~joined["name"].str.startswith(("Memset", "nvjet"))]
    assert (xla_kernels["name"].astype(str) == xla_kernels["instruction"].astype(str).str.replace(".", "_")).all()
    # Same table back: columns, dtypes (instruction still a category, holding only the names in use), rows;
    # only the instruction changed, and the input is untouched.
    assert list(joined.columns) == list(events.columns)
    assert [str(t) for t in joined.dtypes] == [str(t) for t in events.dtypes]
    assert set(joined["instruction"].cat.categories) == set(joined["instruction"].astype(str))
    pd.testing.assert_frame_equal(joined.drop(columns="instruction"), events.drop(columns="instruction"))
    assert set(events["instruction"]) == {"command_buffer_1"}
    # by name or by GEMM order, every kernel but the memsets was joined
    assert counts["by_name"] + counts["by_gemm_order"] == (~events["name"].str.startswith("Memset")).sum()


def test_library_gemms_are_ordered_per_device(module):
    """Two GPUs that ran the same steps: each device's GEMM kernels are matched in that device's order, so the
    result per device is that of one device alone."""
    one = _events("gpu_mlp_train")
    other = one.copy()
    other["device"] = other["device"].cat.rename_categories(["/device:GPU:1"])
    other["device_id"] = other["device_id"] + 1
    other["start_ps"] += 1_000  # interleaved in time with GPU:0's kernels
    both = pd.concat([one, other])  # (index labels repeat: rows are placed by position)
    joined, counts = join_command_buffer_kernels(both, {module.name: module})
    alone, counts_alone = join_command_buffer_kernels(one, {module.name: module})
    assert counts == {k: 2 * v for k, v in counts_alone.items()}
    for dev in ("/device:GPU:0", "/device:GPU:1"):
        assert _sequence(joined[joined["device"] == dev]) == _sequence(alone)


def test_report_on_command_buffer_trace_is_joined():
    import hloscope

    cb = hloscope.analyze(str(FIXTURES / "profile" / "gpu_mlp_train"), chip="h100")
    ref = hloscope.analyze(str(FIXTURES / "profile" / "gpu_mlp_train_nocb"), chip="h100")
    assert cb.coverage["joined_time_fraction"] > 0.99
    assert any("command buffers" in n for n in cb.notes)
    a = cb.ops.set_index("instruction")["measured_s"]
    b = ref.ops.set_index("instruction")["measured_s"]
    big = b[b > 10e-6].index
    # Two runs of the same program: each op of more than 10 us within 15% of the other run's time.
    assert ((a[big] - b[big]).abs() / b[big]).max() < 0.15
