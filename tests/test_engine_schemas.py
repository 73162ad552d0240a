"""Schemas as another engine hands them over (Sail: ``tests/test_sail.py`` runs the real
thing in ``make test-sail``); here the conversions alone, without a Spark session."""

from __future__ import annotations

import pyarrow as pa
import pytest
from pyspark.sql.types import (
    BinaryType,
    IntegerType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from pyspark_pykafka import KafkaDataSource
from protocol.errors import ConfigError
from kafka_source.spark_schema import as_struct_type, kafka_schema
from kafka_sink.validation import check_schema


def test_a_pyarrow_schema_reads_as_spark_s_struct_type():
    arrow = pa.schema(
        [
            ("key", pa.binary()),
            ("value", pa.string()),
            ("partition", pa.int32()),
            ("timestamp", pa.timestamp("us", tz="UTC")),
            ("naive", pa.timestamp("us")),
        ]
    )
    assert as_struct_type(arrow) == StructType(
        [
            StructField("key", BinaryType()),
            StructField("value", StringType()),
            StructField("partition", IntegerType()),
            StructField("timestamp", TimestampType()),
            StructField("naive", TimestampNTZType()),
        ]
    )
    # what the writer's checks then see: a timestamp column it can write
    plan = check_schema(as_struct_type(arrow.remove(4)), "t")
    assert plan.timestamp_kind == "timestamp" and plan.partition_column and plan.key_column
    with pytest.raises(ValueError, match="timestamp attribute unsupported type timestamp_ntz"):
        check_schema(
            as_struct_type(pa.schema([("value", pa.binary()), ("timestamp", pa.timestamp("us"))])),
            "t",
        )
    with pytest.raises(TypeError, match="StructType or a pyarrow.Schema"):
        as_struct_type("key binary")


def test_the_source_states_its_schema_as_a_struct_type_with_a_utc_timestamp():
    # Sail reads a DDL `timestamp` as timestamp_ntz, and then refuses the source's UTC
    # timestamps: the schema goes out as a StructType.
    source = KafkaDataSource(
        {"kafka.bootstrap.servers": "127.0.0.1:9", "subscribe": "t", "includeHeaders": "true"}
    )
    schema = source.schema()
    assert schema == kafka_schema(True)
    assert isinstance(schema["timestamp"].dataType, TimestampType)
    source.reader(schema)  # accepted: the source's own schema
    ntz = StructType(
        [
            StructField(f.name, TimestampNTZType()) if f.name == "timestamp" else f
            for f in schema.fields
        ]
    )
    with pytest.raises(ConfigError, match="fixed schema"):
        source.reader(ntz)
