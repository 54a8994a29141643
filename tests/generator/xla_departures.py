"""hloscope's documented departures from XLA's ``cost_analysis()`` FLOPs, applied to XLA's own number.

The expected hloscope FLOPs of a module are ``XLA flops + adjustment(text)`` where the adjustment is read off the
compiled HLO text by this module -- a few regular expressions, on purpose independent of hloscope's parser and
cost rules. The departures (docs/xla_cost_rules.md §16):

1. ``custom-call``: XLA charges -1 FLOPs for every custom call (inside fusions too); hloscope charges 0 for the
   helper targets and leaves the opaque ones out of its totals (NaN, flagged). Adjustment: +1 per custom call.
2. ``all-reduce`` / ``all-reduce-start``: XLA charges one FLOP per element of the result (the combiner and the
   group size are ignored); hloscope ``(N-1)/N x elements x FLOPs(to_apply)``.
3. ``reduce-scatter``: XLA charges 0; hloscope ``(N-1)/N x operand elements x FLOPs(to_apply)``.
4. ``reduce-window`` whose only window spans the whole padded dimension (size ``2d-1``, padding ``d-1`` on both
   sides): XLA charges ``rows + (d-1)`` applications, hloscope ``rows x (d-1)``.
5. ``while``: XLA counts the body and the condition once; hloscope ``trip count`` and ``trip count + 1`` times.
   Not read from the text: the catalogue gives each loop body's FLOPs by hand (``programs.py``).
6. ``conditional``: XLA takes the per-key max over branches, hloscope the branch with the most FLOPs +
   transcendentals. Not adjusted: the catalogue's branches order the same either way.
7. LAPACK ``custom-call`` (``lapack_?potrf_ffi``, ``lapack_?trsm_ffi``): hloscope charges the LAPACK Working
   Note 41 operation count (``hloscope/cost/custom_call_linalg.py``) instead of leaving them out. Adjustment:
   the count, written out here (potrf ``n^3/6 + n^2/2 + n/3`` multiplies and ``n^3/6 - n/6`` adds; trsm from the
   left ``k m (m+1)/2`` and ``k m (m-1)/2`` for an ``m x k`` right-hand side; complex ``6 mults + 2 adds``),
   times the batch.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

_ARRAY = re.compile(r"\b(?:pred|[subf]\d+|f8e\w+|bf16|c64|c128|token)\[([^\]]*)\]")
_HEADER = re.compile(r"^\s*(?:ENTRY\s+)?%?([\w.\-]+)\s*(?:\(|\{)")
_INST = re.compile(r"^\s*(?:ROOT\s+)?%?([\w.\-]+)\s*=\s*")
#: XLA's one-FLOP elementwise opcodes (docs/xla_cost_rules.md §3), as they appear in a reducer.
_FLOP_OPCODES = frozenset(
    "add subtract multiply divide remainder maximum minimum abs negate sign floor ceil round-nearest-afz "
    "round-nearest-even is-finite real imag complex not and or xor shift-left shift-right-arithmetic "
    "shift-right-logical popcnt count-leading-zeros compare select clamp convert bitcast-convert "
    "stochastic-convert reduce-precision".split())


def elements(shape_text: str) -> int:
    """Elements of every array in ``shape_text`` (a shape or a tuple of shapes), summed."""
    total = 0
    for dims in _ARRAY.findall(shape_text):
        dims = dims.replace("<=", "")
        total += math.prod(int(d) for d in dims.split(",") if d) if dims else 1
    return total


def _balanced(text: str, start: int) -> int:
    """Index just past the bracket group opening at ``text[start]`` (``(`` or ``{``)."""
    pairs = {"(": ")", "{": "}", "[": "]"}
    depth = 0
    for i in range(start, len(text)):
        c = text[i]
        if c in pairs:
            depth += 1
        elif c in ")}]":
            depth -= 1
            if depth == 0:
                return i + 1
    return len(text)


@dataclass
class Inst:
    name: str
    shape: str
    opcode: str
    operands: str
    attrs: str


@dataclass
class Module:
    computations: dict[str, list[Inst]] = field(default_factory=dict)
    num_partitions: int = 1
    replica_count: int = 1


def parse(text: str) -> Module:
    """The instructions of every computation of an HLO module text (name, shape, opcode, operand text, the
    attribute text after the operands)."""
    mod = Module()
    head = text[: text.find("\n")] if "\n" in text else text
    if m := re.search(r"num_partitions=(\d+)", head):
        mod.num_partitions = int(m.group(1))
    if m := re.search(r"replica_count=(\d+)", head):
        mod.replica_count = int(m.group(1))
    current: list[Inst] | None = None
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith(("HloModule", "//", "#")):
            continue
        if stripped == "}":
            current = None
            continue
        m = _INST.match(line)
        if m and current is not None:
            rest = line[m.end():]
            if rest.startswith("("):
                end = _balanced(rest, 0)
            else:
                end = rest.find(" ")
            shape, rest = rest[:end], rest[end:].lstrip()
            op_end = rest.find("(")
            opcode = rest[:op_end]
            close = _balanced(rest, op_end)
            current.append(Inst(m.group(1), shape, opcode, rest[op_end + 1: close - 1], rest[close:]))
            continue
        if stripped.endswith("{") and (h := _HEADER.match(line)):
            current = mod.computations.setdefault(h.group(1), [])
    return mod


def _attr(attrs: str, key: str) -> str | None:
    m = re.search(r"\b" + re.escape(key) + r"=", attrs)
    if not m:
        return None
    start = m.end()
    if start < len(attrs) and attrs[start] in "{[(":
        end = _balanced(attrs, start)
        # iota form "[2,4]<=[8]" or "[4,2]<=[2,4]T(1,0)"
        tail = re.match(r"<=\[[^\]]*\](?:T\([^)]*\))?", attrs[end:])
        return attrs[start: end + (tail.end() if tail else 0)]
    end = attrs.find(",", start)
    return attrs[start: end if end >= 0 else len(attrs)].strip()


def group_size(inst: Inst, mod: Module) -> int:
    """N of a collective: the size of its first replica group, or all devices of its mode for ``{}``."""
    mesh = re.search(r"replica_groups=mesh\[([^\]]*)\][^{]*\{([^}]*)\}", inst.attrs)
    if mesh:  # mesh['a'=2,'b'=4](, device_ids=...) {'b'}: groups over the named axes; 'b':(pre)size a sub-axis
        sizes = {k: int(v) for k, v in re.findall(r"'([^']+)'=(\d+)", mesh.group(1))}
        return math.prod(int(sub) if sub else sizes[axis]
                         for axis, sub in re.findall(r"'([^']+)'(?::\(\d+\)(\d+))?", mesh.group(2)))
    groups = _attr(inst.attrs, "replica_groups")
    if groups:
        if groups.startswith("["):  # iota: [groups, size]<=[...]
            dims = [int(d) for d in groups[1: groups.index("]")].split(",")]
            return dims[-1]
        inner = re.match(r"\{\{([^}]*)\}", groups)
        if inner:
            return len([d for d in inner.group(1).split(",") if d.strip()])
    if _attr(inst.attrs, "channel_id") is None:
        return mod.replica_count
    if _attr(inst.attrs, "use_global_device_ids") == "true":
        return mod.replica_count * mod.num_partitions
    return mod.num_partitions


def reducer_flops(name: str | None, mod: Module) -> int:
    """FLOPs of one application of a reducer computation (one per element of its one-FLOP instructions)."""
    if not name:
        return 1
    return sum(elements(i.shape) or 1 for i in mod.computations.get(name.lstrip("%"), ()) if i.opcode in _FLOP_OPCODES)


@dataclass
class Adjustment:
    """``flops``: what to add to XLA's number; ``terms``: which departure contributed how much."""

    flops: float = 0.0
    terms: dict[str, float] = field(default_factory=dict)

    def add(self, key: str, value: float) -> None:
        if value:
            self.flops += value
            self.terms[key] = self.terms.get(key, 0.0) + value


def _window_dims(window: str) -> list[dict[str, int]]:
    """``window={size=1x15 pad=0_0x7_7 stride=...}`` -> one dict per dim."""
    fields = dict(re.findall(r"(\w+)=([\w_x\-]+)", window.strip("{}")))
    n = len(fields.get("size", "").split("x"))
    dims = [dict(size=1, lo=0, hi=0, stride=1) for _ in range(n)]
    for k, s in enumerate(fields.get("size", "").split("x")):
        dims[k]["size"] = int(s)
    if "pad" in fields:
        for k, p in enumerate(fields["pad"].split("x")):
            lo, hi = p.split("_")
            dims[k]["lo"], dims[k]["hi"] = int(lo), int(hi)
    if "stride" in fields:
        for k, s in enumerate(fields["stride"].split("x")):
            dims[k]["stride"] = int(s)
    return dims


def _out_dims(shape: str) -> list[int]:
    m = _ARRAY.search(shape)
    return [int(d) for d in m.group(1).replace("<=", "").split(",") if d] if m else []


def operand_elements(inst: Inst, shapes: dict[str, str]) -> int:
    """Elements of ``inst``'s operands: printed with their shapes (``f32[8] %x``) or looked up by name."""
    total = 0
    for operand in re.findall(r"%([\w.\-]+)", inst.operands):
        total += elements(shapes.get(operand, ""))
    return total or elements(inst.operands)


def _custom_gather_scatter_bodies(mod: Module) -> set[str]:
    """Fused computations of ``kind=kCustom`` fusions holding a gather or scatter, and what they call: XLA costs
    such a fusion as its first gather/scatter alone (docs/xla_cost_rules.md §6.1) and never visits the rest."""
    skip: set[str] = set()
    for insts in mod.computations.values():
        for inst in insts:
            if inst.opcode != "fusion" or "kind=kCustom" not in inst.attrs:
                continue
            body = (_attr(inst.attrs, "calls") or "").lstrip("%")
            if any(i.opcode in ("gather", "scatter") for i in mod.computations.get(body, ())):
                todo = [body]
                while todo:
                    name = todo.pop()
                    if name in skip:
                        continue
                    skip.add(name)
                    for i in mod.computations.get(name, ()):
                        todo.extend(n.lstrip("%") for n in re.findall(r"(?:calls|to_apply)=(%?[\w.\-]+)", i.attrs))
    return skip


_LAPACK = re.compile(r'custom_call_target="lapack_([sdcz])(potrf|trsm)_ffi"')


def lapack_flops(inst: Inst, shapes: dict[str, str]) -> float:
    """Departure 7: the LAWN 41 count of a LAPACK potrf/trsm call, from its operands' printed shapes; 0 for
    any other custom call."""
    m = _LAPACK.search(inst.attrs)
    if not m:
        return 0.0
    dims = [_out_dims(shapes.get(name, "")) for name in re.findall(r"%([\w.\-]+)", inst.operands)]
    a = dims[0]
    n = a[-1]
    if m.group(2) == "potrf":
        mults, adds = n ** 3 / 6 + n * n / 2 + n / 3, n ** 3 / 6 - n / 6
    else:
        side = re.search(r"\bside = (\d+)", inst.attrs)
        rows, cols = dims[1][-2], dims[1][-1]
        if side and int(side.group(1)) != ord("L"):
            rows, cols = cols, rows
        mults, adds = cols * rows * (rows + 1) / 2, cols * rows * (rows - 1) / 2
    per = 6 * mults + 2 * adds if m.group(1) in "cz" else mults + adds
    return math.prod(a[:-2]) * round(per)


def adjustment(text: str) -> Adjustment:
    """Departures 1-4 and 7 of the module docstring, summed over every instruction of the module (loop bodies
    once, as XLA visits them)."""
    mod = parse(text)
    adj = Adjustment()
    unvisited = _custom_gather_scatter_bodies(mod)
    for comp, insts in mod.computations.items():
        shapes = {i.name: i.shape for i in insts}
        for inst in insts:
            op = inst.opcode
            if op == "custom-call" and comp not in unvisited:
                adj.add("custom-call: XLA -1 each", 1.0)
                adj.add("custom-call: LAPACK LAWN 41 count", lapack_flops(inst, shapes))
            elif op in ("all-reduce", "all-reduce-start"):
                n = group_size(inst, mod)
                per = reducer_flops(_attr(inst.attrs, "to_apply"), mod)
                operands = operand_elements(inst, shapes)
                xla = elements(inst.shape)  # every array leaf of the result
                ours = (n - 1) / n * operands * per if n else 0.0
                adj.add("all-reduce: (N-1)/N x elements", ours - xla)
            elif op == "reduce-scatter":
                n = group_size(inst, mod)
                per = reducer_flops(_attr(inst.attrs, "to_apply"), mod)
                ours = (n - 1) / n * operand_elements(inst, shapes) * per if n else 0.0
                adj.add("reduce-scatter: (N-1)/N x elements", ours)
            elif op == "reduce-window":
                window = _attr(inst.attrs, "window") or ""
                dims = _window_dims(window)
                out = _out_dims(inst.shape)
                reduced = [k for k, d in enumerate(dims) if d["size"] != 1]
                padded = [k for k, d in enumerate(dims) if d["lo"] or d["hi"]]
                if len(reduced) == 1 and padded == reduced and len(out) == len(dims) and not inst.shape.startswith("("):
                    k = reduced[0]
                    w, d = dims[k], out[k]
                    if w["lo"] == w["hi"] == d - 1 and w["size"] == 2 * d - 1 and w["stride"] == 1 and d > 1:
                        rows = math.prod(out) // d
                        per = reducer_flops(_attr(inst.attrs, "to_apply"), mod)
                        adj.add("reduce-window whole row", per * (rows * (d - 1) - (rows + d - 1)))
    return adj


def whiles(text: str) -> tuple[int, int]:
    """(``while`` instructions, how many of them carry XLA's ``known_trip_count``)."""
    mod = parse(text)
    loops = [i for insts in mod.computations.values() for i in insts if i.opcode == "while"]
    return len(loops), sum("known_trip_count" in i.attrs for i in loops)
