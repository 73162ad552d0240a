"""JSON Schema <-> Spark types: the Spark type (as Arrow) of a JSON Schema document
(``arrow_type``), and a JSON Schema of a Spark type (``json_schema_of``, for the writer's
``auto.register.schemas``).

``arrow_type(schema_text)``: object with properties -> struct in property order, object
with only ``additionalProperties`` -> map, string (``format`` date-time -> timestamp, date
-> date), integer -> long (byte, short or int when ``minimum``/``maximum`` are exactly that
type's range), number -> double, boolean, array -> array; a ``["null", T]`` type, or a
``oneOf``/``anyOf`` of null and one schema, is T; local ``$ref``s to ``#/definitions`` or
``#/$defs`` are followed; anything else is a string holding the JSON text.
"""

from __future__ import annotations

import json

import pyarrow as pa

from protocol.errors import ConfigError

__all__ = ["arrow_type", "json_schema_of", "holds_decimals"]


def _resolve(node, root, depth=0):
    if depth > 32:
        raise ConfigError("JSON Schema: $ref nests deeper than 32 levels")
    ref = node.get("$ref") if isinstance(node, dict) else None
    if ref is None:
        return node
    if not ref.startswith("#/"):
        raise ConfigError(f"JSON Schema: only local $refs are supported, not {ref!r}")
    target = root
    for part in ref[2:].split("/"):
        target = target[part]
    return _resolve(target, root, depth + 1)


def _type(node, root, depth=0) -> pa.DataType:
    if depth > 64:
        raise ConfigError("JSON Schema nests deeper than 64 levels (recursive $ref?)")
    node = _resolve(node, root)
    if node is True or node == {}:
        return pa.string()
    for key in ("oneOf", "anyOf"):
        if key in node:
            options = [o for o in node[key] if _resolve(o, root).get("type") != "null"]
            return _type(options[0], root, depth + 1) if len(options) == 1 else pa.string()
    kind = node.get("type")
    if isinstance(kind, list):
        kinds = [k for k in kind if k != "null"]
        kind = kinds[0] if len(kinds) == 1 else None
    if kind == "object" or (kind is None and "properties" in node):
        props = node.get("properties")
        if props:
            return pa.struct(
                [pa.field(name, _type(sub, root, depth + 1)) for name, sub in props.items()]
            )
        extra = node.get("additionalProperties")
        value = _type(extra, root, depth + 1) if isinstance(extra, dict) else pa.string()
        return pa.map_(pa.string(), value)
    if kind == "array":
        return pa.list_(_type(node.get("items", {}), root, depth + 1))
    if kind == "integer":
        return _integer(node)
    if kind == "string" and node.get("format") in _STRING_FORMATS:
        return _STRING_FORMATS[node["format"]]
    return {
        "string": pa.string(),
        "number": pa.float64(),
        "boolean": pa.bool_(),
        "null": pa.null(),
    }.get(kind, pa.string())


#: Strings with a format Spark has a type for (what the writer's auto-registered schemas
#: say of a timestamp or date column).
_STRING_FORMATS = {"date-time": pa.timestamp("us", tz="UTC"), "date": pa.date32()}


def _integer(node: dict) -> pa.DataType:
    """long, or byte/short/int when the bounds are exactly that type's range (what the
    writer's auto-registered schemas say of such a column)."""
    for t, bits in ((pa.int8(), 8), (pa.int16(), 16), (pa.int32(), 32)):
        if node.get("minimum") == -(2 ** (bits - 1)) and node.get("maximum") == 2 ** (bits - 1) - 1:
            return t
    return pa.int64()


def arrow_type(schema_text: str) -> pa.DataType:
    try:
        root = json.loads(schema_text)
    except ValueError as exc:
        raise ConfigError(f"the JSON Schema is not JSON: {exc}") from None
    return _type(root, root)


# ---- Spark -> JSON Schema (auto.register.schemas) ---------------------------------------


def json_schema_of(data_type) -> dict:
    """A JSON Schema (draft-07) of a Spark type, for auto.register.schemas with json."""
    from pyspark.sql import types as T

    t = data_type
    if isinstance(t, T.StructType):
        return {
            "type": "object",
            "properties": {
                f.name: _nullable(json_schema_of(f.dataType), f.nullable) for f in t.fields
            },
        }
    if isinstance(t, T.ArrayType):
        return {"type": "array", "items": _nullable(json_schema_of(t.elementType), t.containsNull)}
    if isinstance(t, T.MapType):
        return {
            "type": "object",
            "additionalProperties": _nullable(json_schema_of(t.valueType), t.valueContainsNull),
        }
    if isinstance(t, T.BooleanType):
        return {"type": "boolean"}
    for kind, bits in ((T.ByteType, 8), (T.ShortType, 16), (T.IntegerType, 32)):
        if isinstance(t, kind):
            # the type's range: validators hold values to it, and the reader
            # (kafka_common.json_schema.spark_types) reads the type back from it
            return {
                "type": "integer",
                "minimum": -(2 ** (bits - 1)),
                "maximum": 2 ** (bits - 1) - 1,
            }
    if isinstance(t, T.LongType):
        return {"type": "integer"}
    if isinstance(t, (T.FloatType, T.DoubleType, T.DecimalType)):
        return {"type": "number"}
    if isinstance(t, (T.DateType, T.TimestampType, T.TimestampNTZType)):
        return {"type": "string", "format": "date" if isinstance(t, T.DateType) else "date-time"}
    return {"type": "string"}


def _nullable(schema: dict, nullable: bool) -> dict:
    return {"oneOf": [{"type": "null"}, schema]} if nullable else schema


def holds_decimals(t: pa.DataType) -> bool:
    """Whether a decimal is anywhere in ``t``: its JSON numbers are then read and written
    as ``decimal.Decimal``, every digit kept."""
    if pa.types.is_decimal(t):
        return True
    if pa.types.is_struct(t):
        return any(holds_decimals(t.field(i).type) for i in range(t.num_fields))
    if pa.types.is_map(t):
        return holds_decimals(t.key_type) or holds_decimals(t.item_type)
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return holds_decimals(t.value_type)
    return False
