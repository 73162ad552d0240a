"""Spark's Avro type mapping, both directions (as Spark's ``SchemaConverters``).

Avro -> Spark: the Arrow (and Spark) type of what ``from_avro(value, schema)`` gives for a
schema (``arrow_type``). Spark -> Avro: the schema ``to_avro`` writes a column of a Spark
type with (``avro_schema_of``, for the writer's ``auto.register.schemas``).

The mapping is Spark's (``SchemaConverters.toSqlType``): records are structs, enums strings,
fixed and bytes binary (decimal128 with a valid ``decimal`` logical type), ``date`` dates,
``timestamp-millis``/``-micros`` timestamps (UTC), ``local-timestamp-*`` timestamps without
a zone, other logical types their underlying type; ``[null, T]`` is a nullable ``T``,
``[int, long]`` a long, ``[float, double]`` a double, any other union a struct of nullable
``member0..memberN`` (the branches left after dropping ``null``), or with
``enableStableIdentifiersForUnionType`` fields named ``<prefix><type name>`` (prefix
``stableIdentifierPrefixForUnionType``, default ``member_``). A record met again inside
itself is refused unless ``recursiveFieldMaxDepth`` (1 to 12) says how deep to go; past it
the field is dropped.
"""

from __future__ import annotations

import pyarrow as pa

from protocol.errors import ConfigError

from .schema import AvroSchema, AvroSchemaError

STABLE_IDS_OPTION = "enableStableIdentifiersForUnionType"
STABLE_PREFIX_OPTION = "stableIdentifierPrefixForUnionType"
RECURSION_OPTION = "recursiveFieldMaxDepth"
TIMESTAMP = pa.timestamp("us", tz="UTC")
TIMESTAMP_NTZ = pa.timestamp("us")


class MappingOptions:
    """The Spark Avro options that change the type mapping, read from an options dict."""

    def __init__(self, options: dict | None = None):
        options = {str(k).lower(): v for k, v in (options or {}).items()}
        self.stable_ids = str(options.get(STABLE_IDS_OPTION.lower(), "false")).lower() == "true"
        self.stable_prefix = str(options.get(STABLE_PREFIX_OPTION.lower(), "member_"))
        raw = options.get(RECURSION_OPTION.lower(), -1)
        try:
            self.max_depth = int(raw)
        except (TypeError, ValueError):
            raise AvroSchemaError(
                f"option {RECURSION_OPTION} must be an integer, got {raw!r}"
            ) from None


def union_shape(node: AvroSchema):
    """How Spark shows a union: ``("nullable", branch)``, ``("long", None)``,
    ``("double", None)`` or ``("struct", non-null branches)``; ``nullable`` says whether a
    null branch was there."""
    non_null = [b for b in node.branches if b.type != "null"]
    nullable = len(non_null) != len(node.branches)
    if len(non_null) == 1:
        return "single", non_null, nullable
    kinds = sorted(b.type for b in non_null)
    if kinds == ["int", "long"]:
        return "long", non_null, nullable
    if kinds == ["double", "float"]:
        return "double", non_null, nullable
    if not non_null:
        return "null", non_null, nullable
    return "struct", non_null, nullable


def member_names(branches, opts: MappingOptions) -> list[str]:
    if not opts.stable_ids:
        return [f"member{i}" for i in range(len(branches))]
    names, seen = [], set()
    for b in branches:
        n = f"{opts.stable_prefix}{b.simple_name}"
        if n.lower() in seen:
            raise AvroSchemaError(
                "Cannot generate stable identifier for Avro union type due "
                f"to name conflict of type name {b.simple_name}"
            )
        seen.add(n.lower())
        names.append(n)
    return names


def arrow_field_of(node: AvroSchema, opts: MappingOptions, depths: dict | None = None):
    """(Arrow type, nullable) of ``node``, or None when the recursion limit drops it."""
    depths = {} if depths is None else depths
    t = node.type
    if t == "int":
        return (pa.date32() if node.logical == "date" else pa.int32()), False
    if t == "long":
        if node.logical in ("timestamp-millis", "timestamp-micros"):
            return TIMESTAMP, False
        if node.logical in ("local-timestamp-millis", "local-timestamp-micros"):
            return TIMESTAMP_NTZ, False
        return pa.int64(), False
    if t in ("bytes", "fixed"):
        if node.logical == "decimal":
            if node.precision > 38:
                raise AvroSchemaError(
                    f"decimal precision {node.precision} is above Spark's limit of 38"
                )
            return pa.decimal128(node.precision, node.scale), False
        return pa.binary(), False
    simple = {
        "string": pa.string(),
        "boolean": pa.bool_(),
        "double": pa.float64(),
        "float": pa.float32(),
        "enum": pa.string(),
        "null": pa.null(),
    }
    if t in simple:
        return simple[t], t == "null"
    if t == "record":
        depth = depths.get(node.name, 0)
        if depth > 0 and (opts.max_depth <= 0 or opts.max_depth > 12):
            raise AvroSchemaError(
                f"Found recursive reference in Avro schema ({node.name}), which can not be "
                f"processed by Spark by default. Try setting the option `{RECURSION_OPTION}` "
                "to 1 - 12. Going beyond 12 levels of recursion is not allowed."
            )
        if depth > 0 and depth >= opts.max_depth:
            return None
        inner = dict(depths)
        inner[node.name] = depth + 1
        fields = []
        for f in node.fields:
            got = arrow_field_of(f.type, opts, inner)
            if got is not None:
                fields.append(pa.field(f.name, got[0], nullable=got[1]))
        return pa.struct(fields), False
    if t == "array":
        got = arrow_field_of(node.element, opts, depths)
        if got is None:
            return None
        return pa.list_(pa.field("element", got[0], nullable=got[1])), False
    if t == "map":
        got = arrow_field_of(node.element, opts, depths)
        if got is None:
            return None
        return pa.map_(
            pa.field("key", pa.string(), nullable=False), pa.field("value", got[0], nullable=got[1])
        ), False
    if t == "union":
        kind, branches, nullable = union_shape(node)
        if kind == "null":
            return pa.null(), True
        if kind == "single":
            got = arrow_field_of(branches[0], opts, depths)
            return None if got is None else (got[0], got[1] or nullable)
        if kind == "long":
            return pa.int64(), nullable
        if kind == "double":
            return pa.float64(), nullable
        fields = []
        for name, b in zip(member_names(branches, opts), branches):
            got = arrow_field_of(b, opts, depths)
            if got is not None:
                fields.append(pa.field(name, got[0], nullable=True))
        return pa.struct(fields), nullable
    raise AvroSchemaError(f"Unsupported type {t}")


def arrow_type(reader_schema: AvroSchema, options: dict | None = None) -> pa.DataType:
    """The Arrow type of ``from_avro(value, reader_schema, options)``."""
    got = arrow_field_of(reader_schema, MappingOptions(options))
    assert got is not None  # the top level is never dropped
    return got[0]


#: Arrow's plain types: their Spark DDL name and their ``pyspark.sql.types`` class.
_PLAIN_TYPES = {
    pa.int32(): ("int", "IntegerType"),
    pa.int64(): ("bigint", "LongType"),
    pa.float32(): ("float", "FloatType"),
    pa.float64(): ("double", "DoubleType"),
    pa.bool_(): ("boolean", "BooleanType"),
    pa.string(): ("string", "StringType"),
    pa.binary(): ("binary", "BinaryType"),
    pa.date32(): ("date", "DateType"),
    pa.null(): ("void", "NullType"),
}


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def spark_ddl(t: pa.DataType) -> str:
    """The Spark SQL type string of an Arrow type from ``arrow_type`` (non-nullable struct
    fields say NOT NULL; DDL cannot say that an array's elements or a map's values are
    non-null, ``spark_type`` can)."""
    if pa.types.is_struct(t):
        parts = []
        for i in range(t.num_fields):
            f = t.field(i)
            parts.append(
                f"{_quote(f.name)}: {spark_ddl(f.type)}" + ("" if f.nullable else " NOT NULL")
            )
        return "struct<" + ", ".join(parts) + ">"
    if pa.types.is_map(t):
        return f"map<string, {spark_ddl(t.item_type)}>"
    if pa.types.is_list(t):
        return f"array<{spark_ddl(t.value_type)}>"
    if pa.types.is_decimal(t):
        return f"decimal({t.precision},{t.scale})"
    if pa.types.is_timestamp(t):
        return "timestamp" if t.tz is not None else "timestamp_ntz"
    if t in _PLAIN_TYPES:
        return _PLAIN_TYPES[t][0]
    raise TypeError(f"no Spark type for Arrow type {t}")


def spark_type(t: pa.DataType):
    """The ``pyspark.sql.types`` type of an Arrow type from ``arrow_type`` (with every
    nullability flag); imports pyspark."""
    from pyspark.sql import types as T

    if pa.types.is_struct(t):
        return T.StructType(
            [
                T.StructField(t.field(i).name, spark_type(t.field(i).type), t.field(i).nullable)
                for i in range(t.num_fields)
            ]
        )
    if pa.types.is_map(t):
        return T.MapType(T.StringType(), spark_type(t.item_type), t.item_field.nullable)
    if pa.types.is_list(t):
        return T.ArrayType(spark_type(t.value_type), t.value_field.nullable)
    if pa.types.is_decimal(t):
        return T.DecimalType(t.precision, t.scale)
    if pa.types.is_timestamp(t):
        return T.TimestampType() if t.tz is not None else T.TimestampNTZType()
    if t in _PLAIN_TYPES:
        return getattr(T, _PLAIN_TYPES[t][1])()
    raise TypeError(f"no Spark type for Arrow type {t}")


# ---- Spark -> Avro (to_avro) -----------------------------------------------------------


def avro_schema_of(data_type, nullable: bool, name: str = "topLevelRecord", namespace: str = ""):
    """The Avro schema Spark's ``to_avro`` (``SchemaConverters.toAvroType``) writes a
    column of ``data_type`` with: records named after their fields, nullable types as a
    union of the type and null."""
    from pyspark.sql import types as T

    t = data_type
    plain: dict[type, str | dict[str, object]] = {
        T.BooleanType: "boolean",
        T.ByteType: "int",
        T.ShortType: "int",
        T.IntegerType: "int",
        T.LongType: "long",
        T.FloatType: "float",
        T.DoubleType: "double",
        T.StringType: "string",
        T.BinaryType: "bytes",
        T.DateType: {"type": "int", "logicalType": "date"},
        T.TimestampNTZType: {"type": "long", "logicalType": "local-timestamp-micros"},
        T.TimestampType: {"type": "long", "logicalType": "timestamp-micros"},
    }
    avro = next((a for kind, a in plain.items() if isinstance(t, kind)), None)
    if avro is not None:
        return [avro, "null"] if nullable else avro
    if isinstance(t, T.DecimalType):
        size = next(n for n in range(1, 17) if 2 ** (8 * n - 1) > 10**t.precision)
        avro = {
            "type": "fixed",
            "name": name,
            **({"namespace": namespace} if namespace else {}),
            "size": size,
            "logicalType": "decimal",
            "precision": t.precision,
            "scale": t.scale,
        }
    elif isinstance(t, T.ArrayType):
        avro = {
            "type": "array",
            "items": avro_schema_of(t.elementType, t.containsNull, name, namespace),
        }
    elif isinstance(t, T.MapType):
        if not isinstance(t.keyType, T.StringType):
            raise ConfigError(f"Avro maps need string keys, not {t.keyType.simpleString()}")
        avro = {
            "type": "map",
            "values": avro_schema_of(t.valueType, t.valueContainsNull, name, namespace),
        }
    elif isinstance(t, T.StructType):
        inner = f"{namespace}.{name}" if namespace else name
        avro = {
            "type": "record",
            "name": name,
            **({"namespace": namespace} if namespace else {}),
            "fields": [
                {"name": f.name, "type": avro_schema_of(f.dataType, f.nullable, f.name, inner)}
                for f in t.fields
            ],
        }
    else:
        raise ConfigError(f"no Avro type for Spark's {t.simpleString()}")
    return [avro, "null"] if nullable else avro
