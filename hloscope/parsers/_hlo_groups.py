"""``replica_groups=`` of collectives: the explicit, iota and mesh-axes forms, read into ``hlo.ReplicaGroups``.

Grammar and meaning follow XLA (``xla/hlo/parser/hlo_parser.cc``, ``ParseCollectiveDeviceListBase``;
``xla/hlo/ir/replica_group.h``/``.cc``; ``xla/hlo/ir/tile_assignment.h``; ``xla/hlo/ir/mesh_and_axis.cc``):

* explicit ``{{0,1},{2,3}}`` (``CollectiveDeviceList``);
* iota ``[G,S]<=[d0,d1,...]T(perm)`` (``IotaReplicaGroupList``): iota over ``d0 x d1 x ...``, transposed by
  ``perm``, flattened, cut into G groups of S (XLA's parser takes an iota longer than ``G*S``; the groups use
  its first ids);
* mesh axes ``mesh['x'=2,'y'=4] {'y'}`` (``MeshAxesReplicaGroupList``, printed by its ``ToString``: the
  ``Mesh::ToString`` of ``mesh_and_axis.cc``, then the grouped axes). The mesh numbers its devices through
  ``device_ids=(...)`` when printed (``mesh[...], device_ids=([2,4]T(1,0)) {'y'}`` -- an iota ``[dims]T(perm)``
  or ``[n]`` -- or an explicit permutation ``(0,4,1,5,...)``), else row-major (device = flat mesh position).
  A grouped axis may be a sub-axis ``'y':(pre)size`` (``AxisRef::ToString``): axis y split as
  ``[pre, size, y/(pre*size)]`` and grouped along ``size``. ``flattened_replica_groups`` (replica_group.cc)
  reshapes the device array to the mesh (sub-axes split out), moves the grouped axes last -- the others in
  mesh order, then the grouped ones in the order listed -- and cuts the flattened result into groups: group
  k holds ``device_ids[p]`` for the mesh positions ``p`` that share group k's values of the other axes.

The group size needs none of the groups; ``ReplicaGroups.groups`` lists them on first access. A mesh or iota of
more than ``MAX_DEVICES`` devices is an error (``ValueError``; the parser adds the location): no real system
is that large, and the text ``mesh['x'=100000000,'y'=100] {'y'}`` would otherwise describe 10**10 devices.
"""

from __future__ import annotations

import functools
import math
import re
from typing import Callable, Final

from hloscope._regex import LazyPattern
from hloscope.hlo import ReplicaGroups

#: Most devices a mesh or an iota of replica groups may number: 2**20 (1,048,576). The largest TPU pods and GPU
#: clusters are tens of thousands of devices; a larger table is a damaged or hostile text, not a program.
MAX_DEVICES: Final = 1 << 20

_INTS = LazyPattern(r"\s*\d+\s*(?:,\s*\d+\s*)*", re.ASCII)
_IOTA: Final = LazyPattern(r"\[([\d,\s]*)\]\s*<=\s*\[([\d,\s]*)\]\s*(?:T\s*\(([\d,\s]*)\))?", re.ASCII)
#: ``mesh[<axes>][, device_ids=(<ids>)] {<grouped axes>}``; ``<ids>`` holds at most one level of parentheses.
_MESH: Final = LazyPattern(
    r"mesh\s*\[([^\]]*)\]\s*(?:,\s*device_ids\s*=\s*\(((?:[^()]|\([^()]*\))*)\)\s*)?\{([^}]*)\}", re.ASCII
)
_NAME = r"""(?:'([^']*)'|"([^"]*)"|([\w.\-]+))"""
_AXIS: Final = LazyPattern(r"\s*" + _NAME + r"\s*=\s*(\d+)\s*(,|$)", re.ASCII)
_REF: Final = LazyPattern(r"\s*" + _NAME + r"\s*(?::\s*\(\s*(\d+)\s*\)\s*(\d+))?\s*(,|$)", re.ASCII)
_DEVICE_IOTA: Final = LazyPattern(r"\s*\[([\d,\s]*)\]\s*(?:T\s*\(([\d,\s]*)\))?\s*", re.ASCII)


def _ints(text: str, what: str) -> tuple[int, ...]:
    """``1, 2,3`` -> ``(1, 2, 3)``: non-negative decimal integers (what XLA's lexer reads there); ``""`` -> ``()``."""
    if not text.strip():
        return ()
    if _INTS.fullmatch(text) is None:
        raise ValueError(f"expected non-negative integers in {what}, found {text[:40]!r}")
    return tuple(map(int, text.split(",")))


def _bounded_product(dims: tuple[int, ...], what: str) -> int:
    """The product of ``dims`` (all >= 1), or a ValueError when it passes ``MAX_DEVICES``."""
    total = 1
    for d in dims:
        if d < 1:
            raise ValueError(f"{what} has a dimension of size {d}; sizes must be positive")
        total *= d
        if total > MAX_DEVICES:
            raise ValueError(f"{what} numbers {math.prod(dims)} devices, more than hloscope reads "
                             f"({MAX_DEVICES} = 2**20)")
    return total


def _permutation(perm: tuple[int, ...], rank: int, what: str) -> tuple[int, ...]:
    if not perm:
        return tuple(range(rank))
    if sorted(perm) != list(range(rank)):
        raise ValueError(f"T{perm} of {what} is not a permutation of {rank} dims")
    return perm


def transposed_iota(dims: tuple[int, ...], perm: tuple[int, ...]) -> list[int]:
    """Row-major iota over ``dims``, transposed by ``perm``, flattened: the value at each position of the
    transposed array is the flat (row-major) index it came from (XLA ``IotaTileAssignment``)."""
    strides = [1] * len(dims)
    for i in range(len(dims) - 2, -1, -1):
        strides[i] = strides[i + 1] * dims[i + 1]
    flat = [0]
    for axis in perm:  # the transposed array's axes, major to minor
        stride = strides[axis]
        steps = [k * stride for k in range(dims[axis])]
        flat = [base + step for base in flat for step in steps]
    return flat


def _cut(flat: list[int], count: int, size: int) -> tuple[tuple[int, ...], ...]:
    return tuple(tuple(flat[g * size:(g + 1) * size]) for g in range(count))


def _iota(m: re.Match[str], text: str) -> ReplicaGroups:
    group_dims = _ints(m.group(1), "the iota's group dims")
    reshape_dims = _ints(m.group(2), "the iota's dims")
    if not group_dims or not reshape_dims:
        raise ValueError(f"iota replica groups {text!r} without dims")
    total = _bounded_product(reshape_dims, "the iota of the replica groups")
    wanted = _bounded_product(group_dims, "the replica groups")
    if wanted > total:
        raise ValueError(f"iota replica groups {list(group_dims)} need {wanted} devices, the iota has {total}")
    perm = _permutation(_ints(m.group(3) or "", "T(...)"), len(reshape_dims), "the iota")
    size = group_dims[-1] if len(group_dims) > 1 else wanted
    count = wanted // size
    return ReplicaGroups.lazy("iota", text, size, count,
                              functools.partial(_listed, reshape_dims, perm, None, count, size))


def _listed(dims: tuple[int, ...], perm: tuple[int, ...], device_ids: tuple[int, ...] | None, count: int,
            size: int) -> tuple[tuple[int, ...], ...]:
    """The groups: the transposed iota over ``dims`` (through ``device_ids``, the device at each position, when
    given), its first ``count * size`` entries cut into ``count`` groups of ``size`` (``ReplicaGroups.groups``)."""
    positions = transposed_iota(dims, perm)
    if device_ids is not None:
        positions = [device_ids[p] for p in positions]
    return _cut(positions, count, size)


def _names(pattern: re.Pattern[str], text: str, what: str) -> list[re.Match[str]]:
    """The comma-separated items of ``text``, each a match of ``pattern`` (which ends at a ',' or the end)."""
    items = []
    pos = 0
    text = text.strip()
    while pos < len(text):
        m = pattern.match(text, pos)
        if m is None or m.end() == pos:
            raise ValueError(f"expected {what}, found {text[pos:pos + 30]!r}")
        items.append(m)
        pos = m.end()
    return items


def _device_ids(text: str, total: int) -> Callable[[], list[int]] | None:
    """The mesh's ``device_ids=(...)``: a function giving the device at each flat mesh position (None: the
    identity, as for a mesh printed without device ids). Checked now, called when groups are listed."""
    m = _DEVICE_IOTA.fullmatch(text)
    if m is not None:
        dims = _ints(m.group(1), "device_ids")
        if not dims:
            raise ValueError("device_ids=([]) names no devices")
        n = _bounded_product(dims, "device_ids")
        if n != total:
            raise ValueError(f"device_ids=({text.strip()}) numbers {n} devices, the mesh has {total}")
        perm = _permutation(_ints(m.group(2) or "", "T(...)"), len(dims), "device_ids")
        if perm == tuple(range(len(dims))):
            return None
        return functools.partial(transposed_iota, dims, perm)
    ids = _ints(text, "device_ids")
    if len(ids) != total:
        raise ValueError(f"device_ids lists {len(ids)} devices, the mesh has {total}")
    if sorted(ids) != list(range(total)):  # (XLA's Mesh: a permutation of 0..n-1)
        raise ValueError("device_ids is not a permutation of 0..n-1")
    return functools.partial(list, ids)


def _mesh(m: re.Match[str], text: str) -> ReplicaGroups:
    names: list[str] = []
    sizes: list[int] = []
    for a in _names(_AXIS, m.group(1), "mesh axes such as 'x'=2"):
        name = next(g for g in a.groups()[:3] if g is not None)
        if name in names:
            raise ValueError(f"mesh axis {name!r} named twice")
        names.append(name)
        sizes.append(int(a.group(4)))
    if not names:
        raise ValueError("a mesh without axes")
    total = _bounded_product(tuple(sizes), "the mesh")
    ids = _device_ids(m.group(2), total) if m.group(2) is not None else None
    # Grouped axes: (mesh axis index, pre-size, size); a whole axis is (index, 1, its size).
    refs: list[tuple[int, int, int, bool]] = []
    for r in _names(_REF, m.group(3), "grouped mesh axes such as 'y' or 'y':(1)2"):
        name = next(g for g in r.groups()[:3] if g is not None)
        if name not in names:
            raise ValueError(f"grouped axis {name!r} is not a mesh axis {names}")
        axis = names.index(name)
        full = sizes[axis]
        if r.group(4) is None:
            refs.append((axis, 1, full, False))
            continue
        pre, size = int(r.group(4)), int(r.group(5))
        if pre < 1 or size < 2 or size >= full or full % (pre * size):
            raise ValueError(f"sub-axis {name!r}:({pre}){size} does not split axis {name!r} of size {full} "
                             "(pre-size >= 1, 1 < size < axis size, pre-size * size dividing it)")
        refs.append((axis, pre, size, True))
    if not refs:
        raise ValueError("no grouped mesh axis in {...}")
    reindexed, grouped = _reindexed(sizes, refs, names)
    group_size = math.prod(size for _, _, size, _ in refs)
    count = total // group_size
    order = tuple(i for i in range(len(reindexed)) if i not in grouped) + tuple(grouped)
    return ReplicaGroups.lazy("mesh", text, group_size, count,
                              functools.partial(_mesh_listed, tuple(reindexed), order, ids, count, group_size))


def _mesh_listed(dims: tuple[int, ...], order: tuple[int, ...], ids: Callable[[], list[int]] | None, count: int,
                 size: int) -> tuple[tuple[int, ...], ...]:
    return _listed(dims, order, None if ids is None else tuple(ids()), count, size)


def _reindexed(sizes: list[int], refs: list[tuple[int, int, int, bool]], names: list[str]
               ) -> tuple[list[int], list[int]]:
    """The mesh's dims with the grouped sub-axes split out, and the index there of each grouped axis, in the
    order listed (``MeshAxesReplicaGroupList::ComputeReindexedAxes``)."""
    reindexed: list[int] = []
    grouped: dict[int, int] = {}  # position in refs -> reindexed axis
    for axis, full in enumerate(sizes):
        on_axis = sorted((pre, k, size, sub) for k, (a, pre, size, sub) in enumerate(refs) if a == axis)
        if not on_axis:
            reindexed.append(full)
            continue
        if len(on_axis) > 1 and not all(sub for _, _, _, sub in on_axis):
            raise ValueError(f"mesh axis {names[axis]!r} grouped twice")
        covered = 1  # product of the dims laid out so far on this axis
        for pre, k, size, _ in on_axis:
            if pre % covered:
                raise ValueError(f"sub-axes of mesh axis {names[axis]!r} overlap")
            if pre > covered:
                reindexed.append(pre // covered)
            grouped[k] = len(reindexed)
            reindexed.append(size)
            covered = pre * size
        if covered < full:
            reindexed.append(full // covered)
    return reindexed, [grouped[k] for k in range(len(refs))]


def _explicit(text: str) -> ReplicaGroups:
    body = text[1:-1].strip() if text.endswith("}") else None
    if body is None:
        raise ValueError(f"expected {{{{...}},...}}, found {text[:40]!r}")
    if not body:
        return ReplicaGroups((), "explicit", text)
    groups = []
    for group in re.findall(r"\{([^{}]*)\}", body):
        groups.append(_ints(group, "a replica group"))
    return ReplicaGroups(tuple(groups), "explicit", text)


@functools.lru_cache(maxsize=4096)
def replica_groups(text: str) -> ReplicaGroups:
    """Parse ``replica_groups`` in the explicit, iota or mesh-axes form (see the module docstring). Raises
    ValueError. Cached per text (the result is immutable): a module's collectives repeat a few group texts."""
    text = text.strip()
    if text.startswith("{"):
        return _explicit(text)
    m = _IOTA.fullmatch(text)
    if m:
        return _iota(m, text)
    m = _MESH.fullmatch(text)
    if m:
        return _mesh(m, text)
    raise ValueError(f"expected replica groups {{{{0,1}},...}}, [a,b]<=[n] or mesh[...] {{...}}, found {text[:60]!r}")
