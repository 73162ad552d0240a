"""The DataFrame schema of the Kafka source, exactly as Spark's own connector has it, and
the schemas other engines hand a data source, read as Spark's.

Sail (a Spark Connect server in Rust that runs Python data sources in-process) passes
``writer()`` a ``pyarrow.Schema`` rather than a ``StructType``, and reads the type name
``timestamp`` in a DDL string as ``timestamp_ntz`` (its default timestamp type), so the
source states its schema as a ``StructType`` (:func:`kafka_schema`), which means the same
to both engines.
"""

from __future__ import annotations

BASE_COLUMNS = (
    "key binary, value binary, topic string, partition int, offset long, "
    "timestamp timestamp, timestampType int"
)
HEADERS_COLUMN = "headers array<struct<key: string, value: binary>>"


def kafka_schema_ddl(include_headers: bool) -> str:
    return BASE_COLUMNS + (", " + HEADERS_COLUMN if include_headers else "")


def kafka_schema(include_headers: bool):
    """The schema as a ``StructType``, built without a Spark session (workers have none)."""
    from pyspark.sql.types import (
        ArrayType,
        BinaryType,
        IntegerType,
        LongType,
        StringType,
        StructField,
        StructType,
        TimestampType,
    )

    fields = [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
    ]
    if include_headers:
        fields.append(
            StructField(
                "headers",
                ArrayType(
                    StructType(
                        [StructField("key", StringType()), StructField("value", BinaryType())]
                    )
                ),
            )
        )
    return StructType(fields)


def formatted_schema(include_headers: bool, formats):
    """The schema with ``valueFormat``/``keyFormat``: the value (key) column of the reader
    schema's type, then ``valueSchemaId`` (``keySchemaId``) and, under PERMISSIVE,
    ``valueCorruptRecord``. Needs resolved formats; imports pyarrow and the codecs."""
    from pyspark.sql.pandas.types import from_arrow_type
    from pyspark.sql.types import StructField, StructType

    from kafka_common.value_formats.codecs import formatted_columns

    typed, added = formatted_columns(formats)
    fields = [
        StructField(f.name, from_arrow_type(typed[f.name])) if f.name in typed else f
        for f in kafka_schema(include_headers).fields
    ]
    fields += [StructField(f.name, from_arrow_type(f.type)) for f in added]
    return StructType(fields)


def as_struct_type(schema):
    """``schema`` as a ``StructType``: Spark's as is, a ``pyarrow.Schema`` (Sail) converted
    with PySpark's own Arrow mapping, the same on every PySpark: a timestamp with a time
    zone is ``timestamp``, one without is ``timestamp_ntz`` (which the sink refuses, as
    Spark's does)."""
    from pyspark.sql.types import StructType

    if isinstance(schema, StructType):
        return schema
    import pyarrow as pa

    if isinstance(schema, pa.Schema):
        from pyspark.sql.pandas.types import from_arrow_schema

        return from_arrow_schema(schema, prefer_timestamp_ntz=True)
    raise TypeError(f"expected a StructType or a pyarrow.Schema, got {type(schema).__name__}")
