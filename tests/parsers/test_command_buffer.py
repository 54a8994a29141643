"""Kernels replayed from GPU command buffers, joined back to their instructions -- checked against a trace of
the same program with command buffers off, where XLA itself tags every kernel with its instruction."""

from __future__ import annotations

from pathlib import Path

import pytest

from hloscope.parsers import parse_hlo
from hloscope.parsers._command_buffer import join_command_buffer_kernels
from hloscope.parsers._xspace import op_events, read_xspace

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
RUN = Path("plugins/profile/run0/localhost.xplane.pb")


@pytest.fixture(scope="module")
def module():
    return parse_hlo(FIXTURES / "hlo" / "gpu-h100_mlp_train.hlo.txt")


def _events(name):
    return op_events(read_xspace(FIXTURES / "profile" / name / RUN))


def _sequence(events):
    """The instructions of the kernels (memsets left out), in launch order."""
    real = events[~events["name"].str.startswith("Memset")].sort_values("start_ps")
    return list(real["hlo_op"])


def test_command_buffer_trace_names_no_instruction(module):
    names = {i.name for _, i in module.instructions()}
    events = _events("gpu_mlp_train")
    assert len(events) > 50
    assert not events["hlo_op"].isin(names).any()
    assert set(events["hlo_op"]) == {"command_buffer_1"}


def test_joined_kernels_match_the_trace_without_command_buffers(module):
    joined, counts = join_command_buffer_kernels(_events("gpu_mlp_train"), {module.name: module})
    reference = _events("gpu_mlp_train_nocb")  # hlo_op written by XLA for each kernel
    assert counts["by_gemm_order"] == 5 * 5  # 5 steps x 5 cuBLAS GEMMs
    # The same instructions in the same order, kernel for kernel, over all 5 steps. (Kernel names are not
    # compared: cuBLAS picked a different algorithm for one GEMM in the two processes.)
    assert _sequence(joined) == _sequence(reference)
    # Each kernel XLA emitted is named after the instruction both traces give it.
    xla_kernels = joined[~joined["name"].str.startswith(("Memset", "nvjet"))]
    assert (xla_kernels["name"] == xla_kernels["hlo_op"].str.replace(".", "_")).all()


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
