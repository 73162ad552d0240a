"""Spark's ``from_protobuf`` mapping (``SchemaConverters`` of spark-protobuf), as Arrow.

int32/sint32/sfixed32 and uint32 -> int (uint32 -> long with ``upcast.unsigned.ints``),
int64/sint64/sfixed64/uint64 -> long (uint64 -> decimal(20, 0) with the upcast), float,
double, bool, string, bytes -> binary, enum -> string (int with ``enums.as.ints``), message
-> struct, repeated -> array, map -> map, ``google.protobuf.Timestamp`` -> timestamp,
``Duration`` -> day-time interval (Arrow duration), recursion cut at
``recursive.fields.max.depth`` (default: refused, as Spark does).
"""

from __future__ import annotations

import pyarrow as pa

from protocol.errors import ConfigError

__all__ = ["arrow_type", "ProtoOptions", "repeated"]


def repeated(field) -> bool:
    """Whether a field is repeated (``is_repeated`` in protobuf 6+, ``label`` before)."""
    flag = getattr(field, "is_repeated", None)
    if flag is not None:
        return bool(flag)
    return field.label == field.LABEL_REPEATED


class ProtoOptions:
    def __init__(self, options: dict | None = None):
        o = {k.lower(): str(v).lower() for k, v in (options or {}).items()}
        self.enums_as_ints = o.get("enums.as.ints") == "true"
        self.upcast = o.get("upcast.unsigned.ints") == "true"
        self.emit_defaults = o.get("emit.default.values") == "true"
        self.max_depth = int(o.get("recursive.fields.max.depth", "-1"))


def _scalar(field, opts: ProtoOptions) -> pa.DataType:
    from google.protobuf.descriptor import FieldDescriptor as F

    t = field.type
    if t in (F.TYPE_INT32, F.TYPE_SINT32, F.TYPE_SFIXED32):
        return pa.int32()
    if t in (F.TYPE_UINT32, F.TYPE_FIXED32):
        return pa.int64() if opts.upcast else pa.int32()
    if t in (F.TYPE_INT64, F.TYPE_SINT64, F.TYPE_SFIXED64):
        return pa.int64()
    if t in (F.TYPE_UINT64, F.TYPE_FIXED64):
        return pa.decimal128(20, 0) if opts.upcast else pa.int64()
    if t == F.TYPE_FLOAT:
        return pa.float32()
    if t == F.TYPE_DOUBLE:
        return pa.float64()
    if t == F.TYPE_BOOL:
        return pa.bool_()
    if t == F.TYPE_STRING:
        return pa.string()
    if t == F.TYPE_BYTES:
        return pa.binary()
    if t == F.TYPE_ENUM:
        return pa.int32() if opts.enums_as_ints else pa.string()
    raise ConfigError(f"protobuf field {field.full_name}: unsupported type {t}")


def _field_type(field, opts: ProtoOptions, seen: dict) -> pa.DataType | None:
    from google.protobuf.descriptor import FieldDescriptor as F

    if field.type == F.TYPE_MESSAGE:
        msg = field.message_type
        if msg.GetOptions().map_entry:
            k, v = msg.fields_by_name["key"], msg.fields_by_name["value"]
            value = _field_type(v, opts, seen)
            # A map of a message cut by the recursion depth is cut with it
            return None if value is None else pa.map_(_field_type(k, opts, seen), value)
        if msg.full_name == "google.protobuf.Timestamp":
            inner = pa.timestamp("us", tz="UTC")
        elif msg.full_name == "google.protobuf.Duration":
            inner = pa.duration("us")
        else:
            inner = _message(msg, opts, seen)
            if inner is None:
                return None
    else:
        inner = _scalar(field, opts)
    if repeated(field):
        return pa.list_(inner)
    return inner


def _message(msg, opts: ProtoOptions, seen: dict) -> pa.StructType | None:
    depth = seen.get(msg.full_name, 0)
    if depth:
        if opts.max_depth <= 0:
            raise ConfigError(
                f"protobuf message {msg.full_name} is recursive: set "
                "recursive.fields.max.depth (1 to 10), as from_protobuf needs"
            )
        if depth >= opts.max_depth:
            return None
    seen = {**seen, msg.full_name: depth + 1}
    fields = []
    for f in msg.fields:
        t = _field_type(f, opts, seen)
        if t is not None:
            fields.append(pa.field(f.name, t))
    return pa.struct(fields)


def arrow_type(descriptor, options: dict | None = None) -> pa.DataType:
    return _message(descriptor, ProtoOptions(options), {})
