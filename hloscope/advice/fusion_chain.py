"""Rule ``unfused-memory-chain``: memory-bound elementwise, convert, copy and transpose ops that feed one another
without being fused, taking a large share of the module's time.

Source: "How to Scale Your Model", Part 1 (Rooflines): an elementwise op does O(1) FLOPs per byte and is
always memory-bound; each unfused step writes its result to HBM and the next reads it back. XLA's fusion passes
("Operator fusion" in the XLA architecture docs) remove those round trips when they can.

A chain is a set of such ops of one computation linked producer -> consumer where the producer has that one
user (so fusing needs no duplication: XLA's producer-consumer fusion). In-place updates (fusions rooted in a
``dynamic-update-slice``: a scan's carried buffers) are not chain members: they write in place and are not a
fusion opportunity. Fused into one, the chain would read its inputs and write its outputs once: the gain is at
most the chain's time minus its longest op's (``sum - max``), an upper bound.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hloscope.advice._common import (SIGNIFICANT_SHARE, Advice, OpsColumns, is_scheduled, modules_by_name, picked,
                                     time_column)
from hloscope.roofline.tables import nansum
from hloscope.units import duration

if TYPE_CHECKING:
    import numpy as np

    from hloscope.result import Report

RULE = "unfused-memory-chain"
SOURCE = "How to Scale Your Model, Part 1 (Rooflines: elementwise ops are memory-bound); XLA operator fusion"
_KINDS = ("elementwise", "fusion:kLoop", "data-movement", "fusion:kInput")
#: Of the data-movement ops, those a fusion could absorb (layout changes and conversions, not slices of buffers).
_MOVES = frozenset({"copy", "transpose", "convert", "broadcast", "reshape"})
#: Ops named in the advice (the chain's largest first); the rest are counted.
_SHOWN = 8


def advise(report: Report, share: np.ndarray | None = None,  # noqa: ARG001 - the rules' signature
           ops: OpsColumns | None = None) -> list[Advice]:
    import numpy as np

    modules = modules_by_name(report)
    scheduled = {name for name, module in modules.items() if is_scheduled(module)}
    if not scheduled:
        return []  # (before optimization XLA has not fused yet)
    ops = OpsColumns(report) if ops is None else ops
    col = time_column(ops)
    out = []
    time = ops.array(col)
    category, module_of = ops.column("category"), ops.column("module")
    kinds = np.fromiter(map(_KINDS.__contains__, category), bool, len(category))
    # The candidate rows by (module, computation), groups in sorted order, rows in the table's (as a sorted
    # ``groupby`` of the table gives them).
    groups: dict[tuple[str, str], list[int]] = {}
    computation = ops.column("computation")
    for i in picked(kinds & ops.equal("bound", "memory") & (time > 0)):
        groups.setdefault((module_of[i], computation[i]), []).append(i)
    instruction, opcode = ops.column("instruction"), ops.column("opcode")
    for (mname, cname), group in sorted(groups.items()):
        module = modules.get(mname)
        if module is None or len(group) < 2 or mname not in scheduled:
            continue
        total = nansum(time[ops.equal("module", mname)])  # (Series.sum of the module's rows)
        comp = module.computation(cname)
        # (a dict, in the table's row order: the chains, their members and the sums of their times come out
        # the same in every process -- a set's order changes with the interpreter's string hash seed)
        names = {instruction[i]: None for i in group
                 if (category[i] != "data-movement" or opcode[i] in _MOVES)
                 and not _in_place(module, comp, instruction[i])}
        if len(names) < 2:
            continue
        n_users: dict[str, int] = {}
        for i in range(len(comp.opcodes)):
            for o in set(comp.operands_at(i)):
                n_users[o] = n_users.get(o, 0) + 1
        parent = {n: n for n in names}

        def find(x):
            while parent[x] != x:
                parent[x] = parent[parent[x]]
                x = parent[x]
            return x

        for n in names:
            for o in comp.operands_at(comp.index_of(n)):
                if o in names and n_users.get(o) == 1:
                    parent[find(o)] = find(n)
        chains: dict[str, list[str]] = {}
        for n in names:
            chains.setdefault(find(n), []).append(n)
        times = {instruction[i]: time[i].item() for i in group}
        for members in chains.values():
            if len(members) < 2:
                continue
            t = [float(times[m]) for m in members]
            if total <= 0 or sum(t) < SIGNIFICANT_SHARE * total:
                continue
            members.sort(key=lambda m: -times[m])
            shown = ",".join(members[:_SHOWN]) + (f",... ({len(members) - _SHOWN} more)" if len(members) > _SHOWN
                                                  else "")
            out.append(Advice(
                RULE, mname, shown,
                f"{len(members)} memory-bound ops feeding one another unfused take {duration(sum(t))} "
                f"({sum(t) / total:.0%} of the module's time)",
                "fuse them (one pass over HBM): keep the chain inside one jitted function, avoid layout changes "
                "(transposes, copies) between its steps, or check why XLA did not fuse it (dump with "
                "--xla_dump_to and read the fusion decisions)",
                sum(t) - max(t), "sum - max of the chain's times", SOURCE))
    return out


def _in_place(module, comp, name: str) -> bool:
    """A fusion rooted in a ``dynamic-update-slice`` (or the op itself): it updates a buffer in place."""
    inst = comp.instruction(name)
    if inst.opcode == "dynamic-update-slice":
        return True
    for called in inst.called_computations.get("calls", ()) if inst.opcode == "fusion" else ():
        c = module.computation(called)
        if c.opcodes[c.root_index] == "dynamic-update-slice":
            return True
    return False
