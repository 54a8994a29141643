"""What the custom-call rules share: backend configs read as Python values, and the scratch workspace.

A custom call's ``backend_config`` comes in two printed forms:

- JSON (``backend_config={"cudnn_fmha_backend_config": {...}}``): XLA's GPU ``GpuBackendConfig`` protos and
  Mosaic TPU's ``custom_call_config``; ``HloInstruction.backend_config`` decodes it.
- An MLIR attribute dictionary (``backend_config={uplo = 76 : ui8}``), which typed-FFI custom calls
  (``api_version=API_VERSION_TYPED_FFI``) print: jaxlib's LAPACK/cuSOLVER kernels, Transformer Engine's
  ``te_fused_attn_*_ffi``, ``triton_kernel_call_ffi`` (``{cost_estimate_json = "{\\"flops\\": 1000}"}``, the
  form of XLA's ``gpu_hlo_cost_analysis_test.cc``), Pallas Triton's ``__gpu$xla.gpu.triton``. The grammar is
  MLIR's builtin attribute syntax (https://mlir.llvm.org/docs/Dialects/Builtin/): ``name = value`` entries, a
  value optionally typed (``16 : i64``), strings with ``\\"``, ``\\\\``, ``\\n``, ``\\t`` and two-hex-digit
  escapes, arrays ``[...]``, dense arrays ``array<i64: 1, 2>``, nested dictionaries, and unit entries (a name
  alone, read as True).

``backend_config(inst)`` gives either form as a dict ({} when absent or unreadable);
``cost_estimate(config)`` finds a kernel author's cost estimate in it. ``workspace_bytes`` and
``without_workspace`` take a GPU library call's scratch buffer out of its written bytes.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from hloscope._regex import LazyPattern
from hloscope.cost._types import OpCost

if TYPE_CHECKING:
    from hloscope.hlo import HloInstruction

_BARE_KEY_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_$.-")
_SIMPLE_ESCAPES = {'"': '"', "\\": "\\", "n": "\n", "t": "\t"}
_HEX = frozenset("0123456789abcdefABCDEF")
_PLAIN = LazyPattern(r'[^"\\]*')


class _Unreadable(ValueError):
    pass


class _MlirReader:
    """Recursive-descent reader for one MLIR attribute dictionary (module docstring)."""

    __slots__ = ("text", "pos")

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def _skip_space(self) -> None:
        text, pos = self.text, self.pos
        while pos < len(text) and text[pos] in " \t\r\n":
            pos += 1
        self.pos = pos

    def _peek(self) -> str:
        self._skip_space()
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def _expect(self, ch: str) -> None:
        if self._peek() != ch:
            raise _Unreadable(f"expected {ch!r} at {self.pos}")
        self.pos += 1

    def dictionary(self) -> dict[str, Any]:
        self._expect("{")
        out: dict[str, Any] = {}
        if self._peek() == "}":
            self.pos += 1
            return out
        while True:
            key = self._string() if self._peek() == '"' else self._bare()
            if self._peek() == "=":
                self.pos += 1
                out[key] = self.value()
            else:
                out[key] = True  # a unit attribute
            if self._closed("}"):
                return out

    def _closed(self, close: str) -> bool:
        """After an item of a dictionary or array: True at its closing ``close``, False at a ``,``; both taken."""
        ch = self._peek()
        self.pos += 1
        if ch == close:
            return True
        if ch != ",":
            raise _Unreadable(f"expected ',' or {close!r} at {self.pos - 1}")
        return False

    def _span(self, chars: str | frozenset[str], inside: bool, what: str) -> str:
        """The longest non-empty run of characters from here (after white space) that are in ``chars``
        (``inside``) or not in it."""
        self._skip_space()
        start = pos = self.pos
        text = self.text
        while pos < len(text) and (text[pos] in chars) == inside:
            pos += 1
        if pos == start:
            raise _Unreadable(f"expected {what} at {start}")
        self.pos = pos
        return text[start:pos]

    def _bare(self) -> str:
        return self._span(_BARE_KEY_CHARS, True, "a name")

    def _string(self) -> str:
        self._expect('"')
        text = self.text
        out: list[str] = []
        pos = self.pos
        while True:
            end = _PLAIN.match(text, pos).end()  # (a C-speed scan to the next quote or backslash)
            out.append(text[pos:end])
            if end >= len(text):
                raise _Unreadable("unterminated string")
            if text[end] == '"':
                self.pos = end + 1
                return "".join(out)
            esc = text[end + 1:end + 2]
            if esc in _SIMPLE_ESCAPES:
                out.append(_SIMPLE_ESCAPES[esc])
                pos = end + 2
            elif len(text) >= end + 3 and text[end + 1] in _HEX and text[end + 2] in _HEX:
                out.append(chr(int(text[end + 1:end + 3], 16)))
                pos = end + 3
            else:
                raise _Unreadable(f"bad escape at {end}")

    def value(self) -> Any:
        ch = self._peek()
        if ch == '"':
            result: Any = self._string()
        elif ch == "{":
            result = self.dictionary()
        elif ch == "[":
            result = self._array()
        else:
            word = self._token()
            if word == "true":
                result = True
            elif word == "false":
                result = False
            elif word in ("array", "dense", "dense_resource", "sparse") and self._peek() == "<":
                result = self._angle_payload(word)
            else:
                result = _number(word)
        if self._peek() == ":":  # the value's type: `16 : i64`, `1.0 : f64`
            self.pos += 1
            self._type()
        return result

    def _array(self) -> list[Any]:
        self._expect("[")
        items: list[Any] = []
        if self._peek() == "]":
            self.pos += 1
            return items
        while True:
            items.append(self.value())
            if self._closed("]"):
                return items

    def _token(self) -> str:
        return self._span(" \t\r\n,:}]<>=", False, "a value")

    def _balanced_angle(self) -> str:
        """Text between ``<`` and its matching ``>`` (strings inside skipped whole)."""
        self._expect("<")
        text = self.text
        depth, start, pos = 1, self.pos, self.pos
        while pos < len(text):
            ch = text[pos]
            if ch == '"':
                self.pos = pos
                self._string()
                pos = self.pos
                continue
            if ch == "<":
                depth += 1
            elif ch == ">":
                depth -= 1
                if depth == 0:
                    self.pos = pos + 1
                    return text[start:pos]
            pos += 1
        raise _Unreadable("unbalanced '<'")

    def _angle_payload(self, word: str) -> Any:
        body = self._balanced_angle()
        if word == "array":  # `array<i64: 1, 2>`: a dense array attribute
            _, _, values = body.partition(":")
            return [_number(v.strip()) for v in values.split(",") if v.strip()]
        return f"{word}<{body}>"

    def _type(self) -> None:
        self._token()
        if self._peek() == "<":
            self._balanced_angle()


def _number(word: str) -> Any:
    try:
        return int(word, 0)
    except ValueError:
        pass
    try:
        return float(word)
    except ValueError:
        return word  # an identifier-like value (an enum, `unit`, a symbol): kept as printed


def mlir_attribute_dict(text: str) -> dict[str, Any] | None:
    """``{uplo = 76 : ui8, name = "k"}`` -> ``{"uplo": 76, "name": "k"}``; None when ``text`` is not one
    well-formed dictionary."""
    reader = _MlirReader(text)
    try:
        result = reader.dictionary()
    except (_Unreadable, IndexError, ValueError):
        return None
    reader._skip_space()
    return result if reader.pos == len(text) else None


def backend_config(inst: HloInstruction) -> dict[str, Any]:
    """The instruction's backend config as a dict: JSON or an MLIR attribute dictionary; {} when there is none
    or it is neither. An MLIR dictionary is read once per distinct text (a model prints the same fused-attention
    config in every layer) and the dict is shared: the cost rules read it, none changes it."""
    text = inst.backend_config_text
    if not text:
        return {}
    cfg = inst.backend_config
    if isinstance(cfg, dict):
        return cfg
    if isinstance(cfg, str):
        parsed = _shared_mlir_attribute_dict(cfg.strip())
        if parsed is not None:
            return parsed
    return {}


#: ``mlir_attribute_dict`` kept per text (bounded: a module holds a few distinct custom-call configs).
_shared_mlir_attribute_dict = lru_cache(maxsize=1024)(mlir_attribute_dict)


def cost_estimate(config: dict[str, Any]) -> dict[str, Any] | None:
    """A kernel author's cost estimate carried in a backend config, or None.

    Where it is found:

    - Mosaic TPU (``tpu_custom_call``): ``{"custom_call_config": {..., "cost_estimate": {"flops": F,
      "transcendentals": T, "bytes_accessed": B, "remote_bytes_transferred": R}}}`` (``jax/_src/tpu_custom_call.py``
      ``CustomCallBackendConfig.to_json``; Pallas ``pl.CostEstimate``);
    - a top-level ``cost_estimate`` object (the same fields);
    - ``cost_estimate_json = "<JSON object>"`` in an MLIR dictionary (``triton_kernel_call_ffi``, as XLA's
      ``gpu_hlo_cost_analysis_test.cc`` and XProf's ``xplane_to_op_metrics_db_test.cc`` print it), or a
      ``cost_estimate`` dictionary there.

    Units: ``flops`` and ``transcendentals`` are operations per execution of the call, ``bytes_accessed``
    HBM bytes per execution.
    """
    est: Any = config.get("cost_estimate")
    if est is None:
        inner = config.get("custom_call_config")
        if isinstance(inner, dict):
            est = inner.get("cost_estimate")
    if est is None and isinstance(config.get("cost_estimate_json"), str):
        try:
            est = json.loads(config["cost_estimate_json"])
        except ValueError:
            return None
    if not isinstance(est, dict) or not any(k in est for k in ("flops", "transcendentals", "bytes_accessed")):
        return None
    for key in ("flops", "transcendentals", "bytes_accessed"):
        value = est.get(key)
        if value is None:
            continue
        try:
            number = float(value)
        except (TypeError, ValueError):
            return None  # not a usable estimate: the call stays unknown rather than half-trusted
        if isinstance(value, bool) or not number >= 0 or number == float("inf"):
            return None
    return est


def workspace_bytes(inst: HloInstruction) -> int:
    """Bytes of the scratch workspace a GPU library call returns as the last element of its result tuple (a
    rank-1 ``s8``/``u8`` array, which XLA's GEMM, convolution and fused-attention rewriters and Transformer
    Engine append): the library may use any part of it, so it is not charged as written. 0 when the result
    has none."""
    shape = inst.shape
    if not shape.is_tuple or len(shape.tuple_shapes) < 2:
        return 0
    last = shape.tuple_shapes[-1]
    return last.hbm_size_bytes if last.element_type in ("s8", "u8") and len(last.dims) == 1 else 0


def without_workspace(inst: HloInstruction, cost: OpCost) -> OpCost:
    """``cost`` with the workspace (``workspace_bytes``) taken out of the bytes written."""
    workspace = workspace_bytes(inst)
    if not workspace:
        return cost
    return OpCost(cost.flops, cost.transcendentals, cost.bytes_read, cost.bytes_written - workspace,
                  flags=cost.flags)
