"""Per-plane lookups for the event readers: which stat ids matter, the stats every event inherits from its
``XEventMetadata`` (as arrays over metadata ids), and the interning of names as integer codes.

:class:`_PlaneOps` is built once per plane by :mod:`~hloscope.parsers._xspace_ops` and
:mod:`~hloscope.parsers._xspace_steps`; :class:`_Strings` is shared by every plane and file of one read, so
that the name columns stay ``int32`` code arrays until the final table is built.
"""

from __future__ import annotations

from typing import Any

from hloscope._columns import StringCodes
from hloscope.parsers._xspace_names import (
    STAT_CORRELATION_ID,
    STAT_DEVICE_ORDINAL,
    STAT_GROUP_ID,
    STAT_HLO_MODULE,
    STAT_HLO_OP,
    STAT_PROGRAM_ID,
    STAT_STEP_NUM,
    _U64,
    _as_int64,
    _as_program_id,
    _stat_ids,
    _stat_names,
    _stat_value,
)
from hloscope.parsers._xspace_wire import _ScannedLine, _wire_stat_value

_OP_STATS = {
    STAT_HLO_OP: "op",
    STAT_HLO_MODULE: "module",
    STAT_PROGRAM_ID: "pid",
    STAT_DEVICE_ORDINAL: "dev",
    STAT_CORRELATION_ID: "corr",
}
_STEP_STATS = {STAT_STEP_NUM: "step", STAT_GROUP_ID: "group"}
_KEY_CODE = {k: i for i, k in enumerate(("op", "module", "pid", "dev", "corr", "step", "group"))}


def _resolve_md_stats(plane, names: dict[int, str], ids: dict[int, str]) -> dict[int, dict[str, Any]]:
    """Wanted stats attached to each XEventMetadata (shared by all its events), resolved once."""
    out: dict[int, dict[str, Any]] = {}
    if not ids:
        return out
    for mid, md in plane.event_metadata.items():
        d = None
        for st in md.stats:
            key = ids.get(st.metadata_id)
            if key is not None:
                if d is None:
                    d = {}
                d[key] = _stat_value(st, names)
        if d:
            out[mid] = d
    return out


class _Codes:
    """Python values interned as small ints (0 is None), so that per-event columns are int arrays."""

    def __init__(self) -> None:
        self.values: list[Any] = [None]
        self._index: dict[tuple[type, Any], int] = {}

    def code(self, value: Any) -> int:
        if value is None:
            return 0
        key = (type(value), value)
        c = self._index.get(key)
        if c is None:
            c = self._index[key] = len(self.values)
            self.values.append(value)
        return c


class _Strings(StringCodes):
    """Strings interned as ``int32`` codes (in order of first sight) over one whole read: several planes, and
    several files in ``read_xspace_events``, so that codes from different planes can be concatenated as is."""

    __slots__ = ()


class _PlaneOps:
    """Per-plane lookups for op_events: stat ids, and the wanted metadata stats as arrays over metadata ids."""

    def __init__(self, plane, stats: dict[str, str]) -> None:
        import numpy as np

        self.names = _stat_names(plane)
        self.ids = _stat_ids(self.names, stats)
        self.want = np.array(sorted(self.ids), np.int64)
        self.want_code = np.array([_KEY_CODE[self.ids[i]] for i in sorted(self.ids)], np.int8)
        md_stats = _resolve_md_stats(plane, self.names, self.ids)
        keys = sorted(plane.event_metadata)
        self.md_ids = np.array(keys, np.int64)
        self.codes = _Codes()
        code = self.codes.code
        # one slot per metadata id plus a last slot (index -1) for ids without metadata
        m = len(keys) + 1
        self.md_name = np.empty(m, object)
        self.md_name[:-1] = [plane.event_metadata[k].name for k in keys]
        self.md_name[-1] = ""
        self.md_op = np.zeros(m, np.int64)
        self.md_module = np.zeros(m, np.int64)
        self.md_pid = np.zeros(m, np.uint64)
        self.md_pid_ok = np.zeros(m, bool)
        self.md_dev = np.zeros(m, np.int64)
        self.md_dev_ok = np.zeros(m, bool)
        self.md_corr = np.zeros(m, bool)
        self.md_step = {}
        for i, k in enumerate(keys):
            d = md_stats.get(k)
            if not d:
                continue
            self.md_op[i] = code(d.get("op"))
            self.md_module[i] = code(d.get("module"))
            pid = _as_program_id(d.get("pid"))
            if pid is not None:
                self.md_pid[i], self.md_pid_ok[i] = pid, True
            dev = d.get("dev")
            if not (dev is None or isinstance(dev, (str, bytes, float))):
                self.md_dev[i], self.md_dev_ok[i] = _as_int64(int(dev) & _U64), True
            self.md_corr[i] = "corr" in d
            if "step" in d or "group" in d:
                self.md_step[k] = d
        self._name_codes = None  # md_name as _Strings codes, made on first use
        self._op_codes = np.zeros(0, np.int32)  # codes.values as _Strings codes: as an op name ...
        self._module_codes = np.zeros(0, np.int32)  # ... and as a module name (None -> "")

    def name_codes(self, strings: _Strings):
        """``int32`` array: the :class:`_Strings` code of each ``md_name`` slot (the last one, ``""``, for
        metadata ids that have no metadata)."""
        if self._name_codes is None:
            self._name_codes = strings.codes(self.md_name)
        return self._name_codes

    def value_str_codes(self, strings: _Strings):
        """``(op, module)``: ``int32`` arrays mapping each code of ``self.codes`` to the :class:`_Strings`
        code of its value printed as an op name (``str(v)``) and as a module name (``""`` for None).

        Extended as ``self.codes`` grows (stat values seen line by line)."""
        import numpy as np

        values = self.codes.values
        done = self._op_codes.shape[0]
        if done < len(values):
            new = values[done:]
            ops = strings.codes(v if type(v) is str else str(v) for v in new)
            mods = strings.codes("" if v is None else v if type(v) is str else str(v) for v in new)
            self._op_codes = np.concatenate([self._op_codes, ops])
            self._module_codes = np.concatenate([self._module_codes, mods])
        return self._op_codes, self._module_codes

    def md_index(self, mids):
        """Position of each event's metadata in the ``md_*`` arrays (-1: no such metadata)."""
        import numpy as np

        if not self.md_ids.size:
            return np.full(mids.shape[0], -1, np.int64)
        pos = np.minimum(np.searchsorted(self.md_ids, mids), self.md_ids.size - 1)
        return np.where(self.md_ids[pos] == mids, pos, -1)

    def stat_keys(self, sl: _ScannedLine):
        """The key of each wanted stat of a scanned line, as codes (``_KEY_CODE``: "op" -> 0, ...)."""
        import numpy as np

        return self.want_code[np.searchsorted(self.want, sl.st_mid)]

    def value_codes(self, sl: _ScannedLine, sel):
        """Codes (see ``_Codes``) of the values of stats ``sel``; refs resolved once per distinct ref."""
        import numpy as np

        kind = sl.st_kind[sel]
        out = np.zeros(sel.shape[0], np.int64)
        ref = np.flatnonzero(kind == 7)
        if ref.size:
            u, inv = np.unique(sl.st_val[sel[ref]], return_inverse=True)
            ucodes = np.array([self.codes.code(self.names.get(int(r), "")) for r in u], np.int64)
            out[ref] = ucodes[inv]
        for j in np.flatnonzero(kind != 7):
            i = sel[j]
            out[j] = self.codes.code(
                _wire_stat_value(sl.buf, int(kind[j]), int(sl.st_val[i]), int(sl.st_vs[i]), int(sl.st_ve[i]),
                                 self.names)
            )
        return out

    def python_values(self, sl: _ScannedLine, sel) -> list[Any]:
        return [
            _wire_stat_value(sl.buf, int(sl.st_kind[i]), int(sl.st_val[i]), int(sl.st_vs[i]), int(sl.st_ve[i]),
                             self.names)
            for i in sel
        ]
