"""Which instruction attribute gets which typed value, and the opcodes hloscope knows.

Keys and value grammars follow XLA's ``hlo_parser.cc`` (``ParseAttributes`` and the per-opcode attribute
lists) and ``HloInstruction::ExtraAttributesToString``. A key missing here is kept as its raw text in
``HloInstruction.attributes``; it is never an error.
"""

from __future__ import annotations

from typing import Any, Callable, Final, Mapping

from hloscope.parsers import _hlo_re as r

_INT_LIST_KEYS = (
    "dimensions", "slice_sizes", "dynamic_slice_sizes", "offset_dims", "collapsed_slice_dims",
    "start_index_map", "update_window_dims", "inserted_window_dims", "scatter_dims_to_operand_dims",
    "lhs_batch_dims", "lhs_contracting_dims", "rhs_batch_dims", "rhs_contracting_dims",
    "operand_batching_dims", "start_indices_batching_dims", "input_batching_dims",
    "scatter_indices_batching_dims", "fft_length", "lhs_ragged_dims", "lhs_group_dims", "rhs_group_dims",
)
#: Counts a cost divides by: positive (XLA's verifier; a 0 or -1 gave a ZeroDivisionError or negative FLOPs).
_COUNT_KEYS = ("feature_group_count", "batch_group_count")
_INT_KEYS = (
    "index", "index_vector_dim", "channel_id",
    "split_dimension", "split_count", "concat_dimension", "iota_dimension", "k", "exponent_bits",
    "mantissa_bits", "all_gather_dimension", "cross_program_prefetch_index", "recall_target",
)
_BOOL_KEYS = (
    "largest", "is_stable", "indices_are_sorted", "unique_indices", "use_global_device_ids",
    "constrain_layout", "custom_call_has_side_effect", "is_host_transfer", "left_side", "lower",
    "unit_diagonal",
)
_STRING_KEYS = (
    "custom_call_target", "kind", "direction", "type", "fft_type", "distribution", "rng_algorithm",
    "algorithm", "custom_call_api_version", "api_version", "async_execution_thread", "transpose_a",
    "execution_thread", "custom_call_schedule", "schedule", "comparison_type",
)

#: key -> converter from the raw value text to a typed value.
ATTRIBUTE_PARSERS: Final[Mapping[str, Callable[[str], Any]]] = {
    **{k: r.dim_list for k in _INT_LIST_KEYS},
    **{k: r.int_value for k in _INT_KEYS},
    **{k: r.positive_int for k in _COUNT_KEYS},
    **{k: r.bool_value for k in _BOOL_KEYS},
    **{k: r.string_value for k in _STRING_KEYS},
    "window": r.window,
    "dim_labels": r.dim_labels,
    "slice": r.slice_ranges,
    "padding": r.padding_config,
    "replica_groups": r.replica_groups,
    "source_target_pairs": r.source_target_pairs,
    "control-predecessors": r.name_list,
    # Kept as text on purpose: hloscope reads no numbers from these.
    "operand_precision": str, "precision_config": str, "output_to_operand_aliasing": str,
    "operand_layout_constraints": str, "parameter_replication": str, "literal": str,
    "sparsity": str, "statistics": str, "result_accuracy": str, "origin": str,
    "to_apply_computation": str, "raw_backend_config": str, "dot_dimension_numbers": str,
}

#: Attribute keys whose values name called computations (see ``hlo.CALLED_COMPUTATION_ROLES``).
LIST_CALL_KEYS: Final = frozenset({"branch_computations", "calls", "called_computations"})

#: The 133 opcodes of XLA's ``HloOpcode`` enum (``xla/hlo/ir/hlo_opcode.h``) as jaxlib 0.10.2 prints and parses
#: them -- checked against its parser, which rejects the C++ enum spellings where they differ: ``cosine`` (not
#: cos), ``sine``, ``count-leading-zeros`` (not clz), ``exponential`` (not exp), ``exponential-minus-one``,
#: ``log-plus-one``, ``opt-barrier``, ``popcnt``, ``topk``. Anything else parses as an opaque instruction and is
#: listed in ``HloModule.unknown_opcodes``, except the async forms ``<op>-start``/``-update``/``-done`` of a
#: known opcode (``call-start``, ``slice-start``, ...), which XLA's parser reads as ``async-start`` ... wrapping
#: ``<op>`` and which hloscope keeps as printed.
ASYNC_SUFFIXES: Final = ("-start", "-update", "-done")
KNOWN_OPCODES: Final = frozenset(
    """
    abs acos acosh add add-dependency after-all all-gather all-gather-done all-gather-start all-reduce
    all-reduce-done all-reduce-start all-to-all and asin asinh async-done async-start async-update atan2
    atanh batch-norm-grad batch-norm-inference batch-norm-training bitcast bitcast-convert broadcast call
    cbrt ceil cholesky clamp collective-broadcast collective-permute collective-permute-done
    collective-permute-start compare complex concatenate conditional constant convert convolution copy
    copy-done copy-start cosh cosine count-leading-zeros custom-call divide domain dot dynamic-reshape
    dynamic-slice dynamic-update-slice erf exponential exponential-minus-one fft floor fusion gather
    get-dimension-size get-tuple-element imag infeed iota is-finite log log-plus-one logistic map maximum
    minimum mulhi multiply negate not opt-barrier or outfeed pad parameter partition-id popcnt power
    ragged-all-to-all ragged-dot real recv recv-done reduce reduce-precision reduce-scatter reduce-window
    remainder replica-id reshape reverse rng rng-bit-generator rng-get-and-update-state round-nearest-afz
    round-nearest-even rsqrt scaled-dot scan scatter select select-and-scatter send send-done
    set-dimension-size shift-left shift-right-arithmetic shift-right-logical sign sine sinh slice sort sqrt
    stochastic-convert subtract tan tanh topk transpose triangular-solve tuple while xor
    """.split()
)

#: The async forms (see above): ``<known opcode>-start``, ``-update``, ``-done``.
ASYNC_FORMS: Final = frozenset(op + suffix for op in KNOWN_OPCODES for suffix in ASYNC_SUFFIXES) - KNOWN_OPCODES
#: The known opcodes and their async forms: what the parser reads as XLA's (any other opcode is listed in
#: ``HloModule.unknown_opcodes``), and the rows its fast paths build -- ``BodyReader._rows_into``, its C form
#: ``_block_scan.build_rows``, a lazy body's operand readers, the line-by-line loop's inline path -- with operand
#: lists split as XLA prints them, alike for both (a deviceless TPU step prints hundreds of ``slice-start``).
KNOWN_OR_ASYNC: Final = KNOWN_OPCODES | ASYNC_FORMS
