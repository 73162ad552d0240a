"""A reader field's default (its JSON value in the schema) as the Python value Arrow takes
for the field's Spark type: what a row written without that field reads as."""

from __future__ import annotations

import decimal

import pyarrow as pa

from .schema import AvroSchema, AvroSchemaError
from .spark_types import MappingOptions, member_names, union_shape


def _blob(value) -> bytes:
    """Avro's JSON form of bytes and fixed: one character per byte (code points 0-255)."""
    if not isinstance(value, str):
        raise AvroSchemaError(f"a bytes default must be a string, got {value!r}")
    return value.encode("latin-1")


def default_value(node: AvroSchema, value, atype: pa.DataType, opts: MappingOptions):
    """``value`` (a schema default for ``node``) as a Python value of Arrow type ``atype``."""
    t = node.type
    if t == "union":
        first = node.branches[0]
        kind, branches, _ = union_shape(node)
        if first.type == "null":
            return None
        if kind in ("single", "long", "double"):
            return default_value(first, value, atype, opts)
        name = member_names(branches, opts)[branches.index(first)]
        if atype.get_field_index(name) < 0:
            return None
        return {name: default_value(first, value, atype.field(name).type, opts)}
    if value is None:
        return None
    if t == "record":
        out = {}
        for f in node.fields:
            i = atype.get_field_index(f.name)
            if i < 0:
                continue
            if isinstance(value, dict) and f.name in value:
                v = value[f.name]
            elif f.has_default:
                v = f.default
            else:
                raise AvroSchemaError(f"the default of record {node.name} lacks field {f.name}")
            out[f.name] = default_value(f.type, v, atype.field(i).type, opts)
        return out
    if t == "array":
        return [default_value(node.element, v, atype.value_type, opts) for v in value]
    if t == "map":
        return [
            (k, default_value(node.element, v, atype.item_type, opts)) for k, v in value.items()
        ]
    if t in ("bytes", "fixed"):
        raw = _blob(value)
        if pa.types.is_decimal(atype):
            unscaled = int.from_bytes(raw, "big", signed=True) if raw else 0
            return decimal.Decimal(unscaled).scaleb(-atype.scale, context=decimal.Context(prec=80))
        return raw
    if t == "long" and pa.types.is_timestamp(atype):
        return int(value) * (1000 if (node.logical or "").endswith("millis") else 1)
    if pa.types.is_floating(atype):
        return float(value)
    if pa.types.is_string(atype) and isinstance(value, str):
        return value
    return value


def default_array(
    node: AvroSchema, value, atype: pa.DataType, opts: MappingOptions, n: int
) -> pa.Array:
    """``n`` copies of a default as an Arrow array of ``atype``."""
    one = pa.array([default_value(node, value, atype, opts)], type=atype)
    if n == 1:
        return one
    import numpy as np

    return one.take(pa.array(np.zeros(n, dtype=np.int64)))
