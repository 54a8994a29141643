"""Typed values decoded from HLO text on demand: a window, convolution dimension numbers, slice ranges, padding (the
attributes of convolutions, reduce-windows, slices and pads, XLA ``xla_data.proto``), and the resolved frames of a
module's ``StackFrames`` table.

Apart from ``hloscope.hlo`` (which still gives them by name) because few modules hold them: the parser imports this
module when it first decodes one. Immutable records (``hloscope._record.FrozenRecord``: compared, hashed and printed
by their fields as frozen dataclasses are, without the cost of making a dataclass at import).
"""

from __future__ import annotations

from hloscope._record import FrozenRecord

__all__ = ["ConvolutionDimensionNumbers", "PaddingDimension", "SliceRange", "StackFrame", "WindowDimension"]


class WindowDimension(FrozenRecord):
    """One dimension of a ``window={...}`` attribute (XLA ``WindowDimension`` in ``xla_data.proto``):
    ``window_dilation`` is printed ``rhs_dilate``, ``base_dilation`` ``lhs_dilate``."""

    __slots__ = ("size", "stride", "padding_low", "padding_high", "window_dilation", "base_dilation",
                 "window_reversal")
    size: int
    stride: int
    padding_low: int
    padding_high: int
    window_dilation: int
    base_dilation: int
    window_reversal: bool

    def __init__(self, size: int = 1, stride: int = 1, padding_low: int = 0, padding_high: int = 0,
                 window_dilation: int = 1, base_dilation: int = 1, window_reversal: bool = False) -> None:
        self._init_fields(size, stride, padding_low, padding_high, window_dilation, base_dilation, window_reversal)


class ConvolutionDimensionNumbers(FrozenRecord):
    """``dim_labels=b01f_01io->b01f`` decoded (XLA ``ConvolutionDimensionNumbers``).

    Each field names dimension indices of the input (lhs), kernel (rhs) or output; spatial lists are in
    the order of the window's dimensions.
    """

    __slots__ = ("input_batch_dimension", "input_feature_dimension", "input_spatial_dimensions",
                 "kernel_input_feature_dimension", "kernel_output_feature_dimension", "kernel_spatial_dimensions",
                 "output_batch_dimension", "output_feature_dimension", "output_spatial_dimensions", "raw")
    input_batch_dimension: int
    input_feature_dimension: int
    input_spatial_dimensions: tuple[int, ...]
    kernel_input_feature_dimension: int
    kernel_output_feature_dimension: int
    kernel_spatial_dimensions: tuple[int, ...]
    output_batch_dimension: int
    output_feature_dimension: int
    output_spatial_dimensions: tuple[int, ...]
    raw: str

    def __init__(self, input_batch_dimension: int, input_feature_dimension: int,
                 input_spatial_dimensions: tuple[int, ...], kernel_input_feature_dimension: int,
                 kernel_output_feature_dimension: int, kernel_spatial_dimensions: tuple[int, ...],
                 output_batch_dimension: int, output_feature_dimension: int,
                 output_spatial_dimensions: tuple[int, ...], raw: str = "") -> None:
        self._init_fields(input_batch_dimension, input_feature_dimension, input_spatial_dimensions,
                          kernel_input_feature_dimension, kernel_output_feature_dimension, kernel_spatial_dimensions,
                          output_batch_dimension, output_feature_dimension, output_spatial_dimensions, raw)


class SliceRange(FrozenRecord):
    """One ``[start:limit:stride]`` entry of a ``slice={...}`` attribute."""

    __slots__ = ("start", "limit", "stride")
    start: int
    limit: int
    stride: int

    def __init__(self, start: int, limit: int, stride: int = 1) -> None:
        self._init_fields(start, limit, stride)


class PaddingDimension(FrozenRecord):
    """One ``lo_hi[_interior]`` entry of a pad instruction's ``padding=`` attribute."""

    __slots__ = ("low", "high", "interior")
    low: int
    high: int
    interior: int

    def __init__(self, low: int, high: int, interior: int = 0) -> None:
        self._init_fields(low, high, interior)


class StackFrame(FrozenRecord):
    """One resolved entry of the module's ``StackFrames`` table: innermost location and parent id."""

    __slots__ = ("file_name", "function_name", "line", "parent_frame_id")
    file_name: str
    function_name: str
    line: int
    parent_frame_id: int

    def __init__(self, file_name: str, function_name: str, line: int, parent_frame_id: int) -> None:
        self._init_fields(file_name, function_name, line, parent_frame_id)
