"""Typed values decoded from HLO text on demand: a window, convolution dimension numbers, slice ranges, padding (the
attributes of convolutions, reduce-windows, slices and pads, XLA ``xla_data.proto``), and the resolved frames of a
module's ``StackFrames`` table.

Apart from ``hloscope.hlo`` (which still gives them by name) because few modules hold them and a dataclass costs ~1
ms to make at import: the parser imports this module when it first decodes one.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ConvolutionDimensionNumbers", "PaddingDimension", "SliceRange", "StackFrame", "WindowDimension"]


@dataclass(frozen=True, slots=True)
class WindowDimension:
    """One dimension of a ``window={...}`` attribute (XLA ``WindowDimension`` in ``xla_data.proto``)."""

    size: int = 1
    stride: int = 1
    padding_low: int = 0
    padding_high: int = 0
    window_dilation: int = 1  # printed rhs_dilate
    base_dilation: int = 1  # printed lhs_dilate
    window_reversal: bool = False


@dataclass(frozen=True, slots=True)
class ConvolutionDimensionNumbers:
    """``dim_labels=b01f_01io->b01f`` decoded (XLA ``ConvolutionDimensionNumbers``).

    Each field names dimension indices of the input (lhs), kernel (rhs) or output; spatial lists are in
    the order of the window's dimensions.
    """

    input_batch_dimension: int
    input_feature_dimension: int
    input_spatial_dimensions: tuple[int, ...]
    kernel_input_feature_dimension: int
    kernel_output_feature_dimension: int
    kernel_spatial_dimensions: tuple[int, ...]
    output_batch_dimension: int
    output_feature_dimension: int
    output_spatial_dimensions: tuple[int, ...]
    raw: str = ""


@dataclass(frozen=True, slots=True)
class SliceRange:
    """One ``[start:limit:stride]`` entry of a ``slice={...}`` attribute."""

    start: int
    limit: int
    stride: int = 1


@dataclass(frozen=True, slots=True)
class PaddingDimension:
    """One ``lo_hi[_interior]`` entry of a pad instruction's ``padding=`` attribute."""

    low: int
    high: int
    interior: int = 0


@dataclass(frozen=True, slots=True)
class StackFrame:
    """One resolved entry of the module's ``StackFrames`` table: innermost location and parent id."""

    file_name: str
    function_name: str
    line: int
    parent_frame_id: int
