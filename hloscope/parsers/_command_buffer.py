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
    """Re-point GPU kernel events whose ``instruction`` is not an instruction of their module (a command
    buffer's thunk) at the instruction each kernel runs (rules in the module docstring).

    Library GEMM kernels are matched to the GEMM custom calls per (host, device, module) run of kernels, in
    start order: each device runs the program's GEMMs in program order.

    Args:
        events: the ``ops`` table of :class:`hloscope.parsers.events.TraceEvents` (uses ``device``,
            ``module``, ``instruction``, ``name``, ``start_ps``, and ``host`` when present); names may be
            ``category`` or plain string columns.
        modules: module name -> parsed module.

    Returns:
        ``(events, counts)``: ``events`` with ``instruction`` rewritten where a kernel was joined (a copy,
        same columns and dtypes -- a ``category`` column gets the new instruction names as categories and
        loses those no longer used; ``events`` itself when nothing was joined), and ``counts`` =
        ``{"by_name": ..., "by_gemm_order": ...}`` (kernels joined each way). Events of modules without
        HLO, of instructions the module has, and kernels neither rule places are left as they are.
    """
    import numpy as np
    import pandas as pd

    counts = {"by_name": 0, "by_gemm_order": 0}
    gpu = np.flatnonzero(events["device"].str.contains("GPU", regex=False, na=False).to_numpy(bool))
    if not gpu.size:
        return events, counts
    sub = events.iloc[gpu].reset_index(drop=True)  # label k: row gpu[k] of events
    keys = [k for k in ("host", "device") if k in sub.columns] + ["module"]
    rewrite: dict[int, str] = {}  # row position in events -> instruction it runs
    infos: dict[str, tuple] = {}
    for key, rows in sub.groupby(keys, sort=False, observed=True):
        module_name = key[-1]
        module = modules.get(module_name)
        if module is None:
            continue
        if module_name not in infos:
            names = set(chain.from_iterable(comp.names for comp in module.computations))  # (builds nothing)
            entry = module.entry.instructions
            by_kernel = {kernel_name(inst.name): inst.name for inst in entry}
            gemms = [inst.name for inst in entry if inst.opcode == "custom-call"
                     and inst.attributes.get("custom_call_target", "") in _LIBRARY_GEMM_TARGETS]
            infos[module_name] = (names, by_kernel, gemms)
        names, by_kernel, gemms = infos[module_name]
        foreign = rows[~rows["instruction"].isin(names)]
        if foreign.empty:
            continue
        kernel = foreign["name"].astype(object)
        named = kernel.map(by_kernel)
        hit = named.notna().to_numpy(bool)
        for label, inst in zip(foreign.index[hit], named[hit]):
            rewrite[int(gpu[label])] = inst
        counts["by_name"] += int(hit.sum())
        library = foreign[~hit & ~kernel.str.startswith(_COPY_PREFIXES).to_numpy(bool)]
        library = library.sort_values("start_ps", kind="stable")
        if gemms and len(library) and len(library) % len(gemms) == 0:
            for k, label in enumerate(library.index):
                rewrite[int(gpu[label])] = gemms[k % len(gemms)]
            counts["by_gemm_order"] += len(library)
    if not rewrite:
        return events, counts
    events = events.copy()
    pos = np.fromiter(rewrite, np.int64, len(rewrite))
    new = pd.Series(list(rewrite.values()), dtype=object)
    col = events["instruction"]
    if isinstance(col.dtype, pd.CategoricalDtype):
        added = sorted(set(new) - set(col.cat.categories))
        values = col.array.add_categories(added) if added else col.array.copy()
        values[pos] = new.to_numpy(object)
        events["instruction"] = pd.Series(values, index=events.index).cat.remove_unused_categories()
    else:
        values = col.to_numpy(object, copy=True)
        values[pos] = new.to_numpy(object)
        events["instruction"] = pd.Series(values, index=events.index, dtype=col.dtype)
    return events, counts
