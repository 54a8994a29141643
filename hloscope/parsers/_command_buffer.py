"""GPU kernels replayed from a command buffer (CUDA graph), joined back to the HLO instructions they run.

XLA's GPU runtime records runs of thunks into command buffers (on by default; ``--xla_gpu_enable_command_buffer``
names the kinds). The profiler then tags every kernel the buffer launches with the buffer's thunk as its
``hlo_op`` (``command_buffer_1``), which is no instruction of the HLO module -- so a plain join leaves the whole
step unjoined. The kernels themselves still say what they run (seen on an H100 trace, jax 0.11.2,
``fixtures/profile/gpu_mlp_train``):

* a kernel XLA emits for a fusion (or another instruction) is named after it, with ``.`` and ``-`` printed as
  ``_``: ``input_reduce_fusion_1`` runs ``input_reduce_fusion.1``;
* a library kernel (cuBLAS's ``nvjet_*``, ``cutlass_*``, ...) names no instruction; the module's GEMM custom
  calls (``__cublas$gemm``, ``__cublas$lt$matmul``, ...) run in program order, one kernel each, so the k-th
  such kernel of a run is the k-th GEMM custom call of the entry computation;
* ``Memset`` / ``Memcpy`` events of the buffer (workspace zeroing) stay with the buffer's thunk.

The result is checked against a trace of the same program taken with command buffers off, where every
kernel names its instruction (``fixtures/profile/gpu_mlp_train_nocb``; tests/parsers/test_command_buffer.py).
"""

from __future__ import annotations

from itertools import chain
from typing import TYPE_CHECKING, Mapping

if TYPE_CHECKING:
    import pandas as pd

    from hloscope.hlo import HloModule

#: Custom-call targets whose kernels come from a GEMM library (cost rule: ``hloscope.cost.custom_call``).
_LIBRARY_GEMM_TARGETS = frozenset({"__cublas$gemm", "__cublas$lt$matmul", "__cublas$lt$matmul$f8",
                                   "__hipblas$gemm", "__hipblaslt$matmul"})
_COPY_PREFIXES = ("Memset", "Memcpy", "memset", "memcpy")


def kernel_name(instruction: str) -> str:
    """The name XLA gives the kernel of an instruction: ``.`` and ``-`` printed as ``_``."""
    return instruction.replace(".", "_").replace("-", "_")


def join_command_buffer_kernels(events: pd.DataFrame, modules: Mapping[str, HloModule]
                                ) -> tuple[pd.DataFrame, dict[str, int]]:
    """Re-point GPU kernel events whose ``hlo_op`` is not an instruction of their module (a command buffer's
    thunk) at the instruction each kernel runs (rules in the module docstring).

    Args:
        events: ``op_events`` rows (columns ``plane``, ``name``, ``hlo_op``, ``hlo_module``, ``start_ps``).
        modules: module name -> parsed module.

    Returns:
        ``(events, counts)``: a copy of ``events`` with ``hlo_op`` rewritten where a kernel was joined, and
        ``counts`` = ``{"by_name": ..., "by_gemm_order": ...}`` (kernels joined each way). Events of modules
        without HLO, of instructions the module has, and kernels neither rule places are left as they are.
    """
    counts = {"by_name": 0, "by_gemm_order": 0}
    gpu = events["plane"].str.contains("GPU", regex=False)
    if not gpu.any():
        return events, counts
    events = events.copy()
    for module_name, rows in events[gpu].groupby("hlo_module", sort=False):
        module = modules.get(module_name)
        if module is None:
            continue
        names = set(chain.from_iterable(comp.names for comp in module.computations))  # (builds nothing)
        foreign = rows[~rows["hlo_op"].isin(names)]
        if foreign.empty:
            continue
        entry = module.entry.instructions
        by_kernel = {kernel_name(inst.name): inst.name for inst in entry}
        gemms = [inst.name for inst in entry if inst.opcode == "custom-call"
                 and inst.attributes.get("custom_call_target", "") in _LIBRARY_GEMM_TARGETS]
        named = foreign["name"].map(by_kernel)
        hit = named.notna()
        events.loc[named[hit].index, "hlo_op"] = named[hit]
        counts["by_name"] += int(hit.sum())
        library = foreign[~hit & ~foreign["name"].str.startswith(_COPY_PREFIXES)].sort_values("start_ps")
        if gemms and len(library) and len(library) % len(gemms) == 0:
            events.loc[library.index, "hlo_op"] = [gemms[i % len(gemms)] for i in range(len(library))]
            counts["by_gemm_order"] += len(library)
    return events, counts
