"""XSpace / HloProto message classes, built at import time without protoc, TensorFlow or xprof.

The profiler's XSpace schema is small and stable, so instead of vendoring generated ``*_pb2.py`` files
(which pin a protobuf runtime version) we describe the messages in Python as a
``google.protobuf.descriptor_pb2.FileDescriptorProto`` and let the installed protobuf runtime build the
classes with ``message_factory.GetMessageClass``.

Field numbers are copied from the public schema files:

* XSpace & friends: ``third_party/tsl/tsl/profiler/protobuf/xplane.proto`` in openxla/xla (the same file
  lives at ``xla/tsl/profiler/protobuf/xplane.proto`` in newer trees and in tensorflow/tsl), package
  ``tensorflow.profiler``, proto3.
* HloProto (only the fields we need to unwrap the module): ``xla/service/hlo.proto`` in openxla/xla:
  ``HloProto.hlo_module = 1``, ``HloModuleProto.name = 1``, ``HloModuleProto.id = 5``.

The classes are registered in a private descriptor pool (not the default one), so they never clash with a
TensorFlow / xprof / tensorboard-plugin-profile copy of the same proto that another library might load.

Exports: ``XSpace``, ``XPlane``, ``XLine``, ``XEvent``, ``XStat``, ``XEventMetadata``, ``XStatMetadata``,
``HloProtoHeader`` (``xla.HloProto`` with ``hlo_module`` kept as raw bytes) and ``HloModuleHeader``
(``xla.HloModuleProto`` reduced to ``name`` and ``id``; unknown fields are preserved on parse).
"""

from __future__ import annotations

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

_F = descriptor_pb2.FieldDescriptorProto

_XPLANE_PACKAGE = "tensorflow.profiler"
_HLO_PACKAGE = "hloscope_private.xla"  # private name: field numbers match xla.HloProto, names need not


def _field(
    msg: descriptor_pb2.DescriptorProto,
    name: str,
    number: int,
    ftype: int,
    *,
    repeated: bool = False,
    type_name: str | None = None,
    oneof_index: int | None = None,
) -> None:
    """Append one field to ``msg`` (proto3 semantics: singular scalars have no presence)."""
    f = msg.field.add()
    f.name = name
    f.number = number
    f.type = ftype
    f.label = _F.LABEL_REPEATED if repeated else _F.LABEL_OPTIONAL
    if type_name is not None:
        f.type_name = type_name
    if oneof_index is not None:
        f.oneof_index = oneof_index
    f.json_name = "".join(p if i == 0 else p.capitalize() for i, p in enumerate(name.split("_")))


def _map_entry(parent: descriptor_pb2.DescriptorProto, entry_name: str, value_type: str) -> str:
    """Declare the synthetic ``<Field>Entry`` message of a ``map<int64, value_type>`` field."""
    entry = parent.nested_type.add()
    entry.name = entry_name
    entry.options.map_entry = True
    _field(entry, "key", 1, _F.TYPE_INT64)
    _field(entry, "value", 2, _F.TYPE_MESSAGE, type_name=value_type)
    return f".{_XPLANE_PACKAGE}.{parent.name}.{entry_name}"


def _xplane_file() -> descriptor_pb2.FileDescriptorProto:
    """FileDescriptorProto equivalent to tsl/profiler/protobuf/xplane.proto (openxla/xla)."""
    fd = descriptor_pb2.FileDescriptorProto()
    fd.name = "hloscope/tsl/profiler/protobuf/xplane.proto"
    fd.package = _XPLANE_PACKAGE
    fd.syntax = "proto3"
    p = f".{_XPLANE_PACKAGE}."

    # message XSpace { repeated XPlane planes = 1; repeated string errors = 2;
    #                  repeated string warnings = 3; repeated string hostnames = 4; }
    m = fd.message_type.add(name="XSpace")
    _field(m, "planes", 1, _F.TYPE_MESSAGE, repeated=True, type_name=p + "XPlane")
    _field(m, "errors", 2, _F.TYPE_STRING, repeated=True)
    _field(m, "warnings", 3, _F.TYPE_STRING, repeated=True)
    _field(m, "hostnames", 4, _F.TYPE_STRING, repeated=True)

    # message XPlane { int64 id = 1; string name = 2; repeated XLine lines = 3;
    #   map<int64, XEventMetadata> event_metadata = 4; map<int64, XStatMetadata> stat_metadata = 5;
    #   repeated XStat stats = 6; }
    m = fd.message_type.add(name="XPlane")
    _field(m, "id", 1, _F.TYPE_INT64)
    _field(m, "name", 2, _F.TYPE_STRING)
    _field(m, "lines", 3, _F.TYPE_MESSAGE, repeated=True, type_name=p + "XLine")
    em = _map_entry(m, "EventMetadataEntry", p + "XEventMetadata")
    _field(m, "event_metadata", 4, _F.TYPE_MESSAGE, repeated=True, type_name=em)
    sm = _map_entry(m, "StatMetadataEntry", p + "XStatMetadata")
    _field(m, "stat_metadata", 5, _F.TYPE_MESSAGE, repeated=True, type_name=sm)
    _field(m, "stats", 6, _F.TYPE_MESSAGE, repeated=True, type_name=p + "XStat")

    # message XLine { int64 id = 1; int64 display_id = 10; string name = 2; string display_name = 11;
    #   int64 timestamp_ns = 3; int64 duration_ps = 9; repeated XEvent events = 4; reserved 5, 6, 7, 8; }
    m = fd.message_type.add(name="XLine")
    _field(m, "id", 1, _F.TYPE_INT64)
    _field(m, "display_id", 10, _F.TYPE_INT64)
    _field(m, "name", 2, _F.TYPE_STRING)
    _field(m, "display_name", 11, _F.TYPE_STRING)
    _field(m, "timestamp_ns", 3, _F.TYPE_INT64)
    _field(m, "duration_ps", 9, _F.TYPE_INT64)
    _field(m, "events", 4, _F.TYPE_MESSAGE, repeated=True, type_name=p + "XEvent")
    for lo in (5, 6, 7, 8):
        m.reserved_range.add(start=lo, end=lo + 1)

    # message XEvent { int64 metadata_id = 1;
    #   oneof data { int64 offset_ps = 2; int64 num_occurrences = 5; }
    #   int64 duration_ps = 3; repeated XStat stats = 4; }
    m = fd.message_type.add(name="XEvent")
    m.oneof_decl.add(name="data")
    _field(m, "metadata_id", 1, _F.TYPE_INT64)
    _field(m, "offset_ps", 2, _F.TYPE_INT64, oneof_index=0)
    _field(m, "num_occurrences", 5, _F.TYPE_INT64, oneof_index=0)
    _field(m, "duration_ps", 3, _F.TYPE_INT64)
    _field(m, "stats", 4, _F.TYPE_MESSAGE, repeated=True, type_name=p + "XStat")

    # message XStat { int64 metadata_id = 1; oneof value { double double_value = 2;
    #   uint64 uint64_value = 3; int64 int64_value = 4; string str_value = 5; bytes bytes_value = 6;
    #   uint64 ref_value = 7; bytes compressed_str_value = 8; } }
    m = fd.message_type.add(name="XStat")
    m.oneof_decl.add(name="value")
    _field(m, "metadata_id", 1, _F.TYPE_INT64)
    _field(m, "double_value", 2, _F.TYPE_DOUBLE, oneof_index=0)
    _field(m, "uint64_value", 3, _F.TYPE_UINT64, oneof_index=0)
    _field(m, "int64_value", 4, _F.TYPE_INT64, oneof_index=0)
    _field(m, "str_value", 5, _F.TYPE_STRING, oneof_index=0)
    _field(m, "bytes_value", 6, _F.TYPE_BYTES, oneof_index=0)
    _field(m, "ref_value", 7, _F.TYPE_UINT64, oneof_index=0)
    _field(m, "compressed_str_value", 8, _F.TYPE_BYTES, oneof_index=0)

    # message XEventMetadata { int64 id = 1; string name = 2; string display_name = 4; bytes metadata = 3;
    #   repeated XStat stats = 5; repeated int64 child_id = 6; }
    m = fd.message_type.add(name="XEventMetadata")
    _field(m, "id", 1, _F.TYPE_INT64)
    _field(m, "name", 2, _F.TYPE_STRING)
    _field(m, "display_name", 4, _F.TYPE_STRING)
    _field(m, "metadata", 3, _F.TYPE_BYTES)
    _field(m, "stats", 5, _F.TYPE_MESSAGE, repeated=True, type_name=p + "XStat")
    _field(m, "child_id", 6, _F.TYPE_INT64, repeated=True)

    # message XStatMetadata { int64 id = 1; string name = 2; string description = 3; }
    m = fd.message_type.add(name="XStatMetadata")
    _field(m, "id", 1, _F.TYPE_INT64)
    _field(m, "name", 2, _F.TYPE_STRING)
    _field(m, "description", 3, _F.TYPE_STRING)
    return fd


def _hlo_file() -> descriptor_pb2.FileDescriptorProto:
    """Just enough of xla/service/hlo.proto (openxla/xla) to unwrap an HloProto and name its module."""
    fd = descriptor_pb2.FileDescriptorProto()
    fd.name = "hloscope/xla/service/hlo_header.proto"
    fd.package = _HLO_PACKAGE
    fd.syntax = "proto3"
    # message HloProto { HloModuleProto hlo_module = 1; BufferAssignmentProto buffer_assignment = 3; }
    # hlo_module is declared as bytes: same wire type (length-delimited), and we want the raw bytes.
    m = fd.message_type.add(name="HloProtoHeader")
    _field(m, "hlo_module", 1, _F.TYPE_BYTES)
    _field(m, "buffer_assignment", 3, _F.TYPE_BYTES)
    # message HloModuleProto { string name = 1; string entry_computation_name = 2; ...; int64 id = 5;
    #   int64 entry_computation_id = 6; ... }
    m = fd.message_type.add(name="HloModuleHeader")
    _field(m, "name", 1, _F.TYPE_STRING)
    _field(m, "entry_computation_name", 2, _F.TYPE_STRING)
    _field(m, "id", 5, _F.TYPE_INT64)
    _field(m, "entry_computation_id", 6, _F.TYPE_INT64)
    return fd


POOL = descriptor_pool.DescriptorPool()
POOL.Add(_xplane_file())
POOL.Add(_hlo_file())


def _cls(full_name: str):
    return message_factory.GetMessageClass(POOL.FindMessageTypeByName(full_name))


XSpace = _cls(f"{_XPLANE_PACKAGE}.XSpace")
XPlane = _cls(f"{_XPLANE_PACKAGE}.XPlane")
XLine = _cls(f"{_XPLANE_PACKAGE}.XLine")
XEvent = _cls(f"{_XPLANE_PACKAGE}.XEvent")
XStat = _cls(f"{_XPLANE_PACKAGE}.XStat")
XEventMetadata = _cls(f"{_XPLANE_PACKAGE}.XEventMetadata")
XStatMetadata = _cls(f"{_XPLANE_PACKAGE}.XStatMetadata")
HloProtoHeader = _cls(f"{_HLO_PACKAGE}.HloProtoHeader")
HloModuleHeader = _cls(f"{_HLO_PACKAGE}.HloModuleHeader")

__all__ = [
    "HloModuleHeader",
    "HloProtoHeader",
    "XEvent",
    "XEventMetadata",
    "XLine",
    "XPlane",
    "XSpace",
    "XStat",
    "XStatMetadata",
]
