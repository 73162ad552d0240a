"""Spark's type mapping (what ``from_avro`` gives, as Arrow) for every Avro type, logical
type and union shape, its options, and the values of every logical type against fastavro's
reading of the same bytes."""

import datetime
import decimal
import io
import json
import uuid

import fastavro
import numpy as np
import pyarrow as pa
import pytest

from kafka_common.avro import (
    AvroSchemaError,
    Decoder,
    arrow_type,
    parse_schema,
    spark_ddl,
    spark_type,
)

UTC = datetime.timezone.utc


def t(schema, **options):
    return arrow_type(parse_schema(json.dumps(schema)), options)


@pytest.mark.parametrize(
    "schema,expected",
    [
        ("int", pa.int32()),
        ("long", pa.int64()),
        ("float", pa.float32()),
        ("double", pa.float64()),
        ("boolean", pa.bool_()),
        ("string", pa.string()),
        ("bytes", pa.binary()),
        ("null", pa.null()),
        ({"type": "fixed", "name": "F", "size": 4}, pa.binary()),
        ({"type": "enum", "name": "E", "symbols": ["A"]}, pa.string()),
        ({"type": "int", "logicalType": "date"}, pa.date32()),
        ({"type": "long", "logicalType": "timestamp-millis"}, pa.timestamp("us", "UTC")),
        ({"type": "long", "logicalType": "timestamp-micros"}, pa.timestamp("us", "UTC")),
        ({"type": "long", "logicalType": "local-timestamp-millis"}, pa.timestamp("us")),
        ({"type": "long", "logicalType": "local-timestamp-micros"}, pa.timestamp("us")),
        ({"type": "long", "logicalType": "timestamp-nanos"}, pa.int64()),
        ({"type": "int", "logicalType": "time-millis"}, pa.int32()),
        ({"type": "long", "logicalType": "time-micros"}, pa.int64()),
        ({"type": "string", "logicalType": "uuid"}, pa.string()),
        (
            {"type": "bytes", "logicalType": "decimal", "precision": 20, "scale": 4},
            pa.decimal128(20, 4),
        ),
        (
            {"type": "fixed", "name": "D", "size": 5, "logicalType": "decimal", "precision": 11},
            pa.decimal128(11, 0),
        ),
        # invalid logical types are dropped, as Avro does: a precision the fixed cannot hold
        (
            {"type": "fixed", "name": "D", "size": 2, "logicalType": "decimal", "precision": 6},
            pa.binary(),
        ),
        ({"type": "bytes", "logicalType": "decimal", "precision": 4, "scale": 5}, pa.binary()),
        ({"type": "string", "logicalType": "date"}, pa.string()),
        (
            {"type": "array", "items": ["null", "int"]},
            pa.list_(pa.field("element", pa.int32(), nullable=True)),
        ),
        (
            {"type": "array", "items": "int"},
            pa.list_(pa.field("element", pa.int32(), nullable=False)),
        ),
        (
            {"type": "map", "values": "long"},
            pa.map_(
                pa.field("key", pa.string(), nullable=False),
                pa.field("value", pa.int64(), nullable=False),
            ),
        ),
        (["null", "string"], pa.string()),
        (["int", "long"], pa.int64()),
        (["float", "null", "double"], pa.float64()),
        (["string"], pa.string()),
        (
            ["null", "int", "string"],
            pa.struct([pa.field("member0", pa.int32()), pa.field("member1", pa.string())]),
        ),
        (
            {
                "type": "record",
                "name": "R",
                "fields": [{"name": "a", "type": "int"}, {"name": "b", "type": ["null", "string"]}],
            },
            pa.struct([pa.field("a", pa.int32(), nullable=False), pa.field("b", pa.string())]),
        ),
    ],
)
def test_spark_mapping(schema, expected):
    assert t(schema) == expected


def test_stable_union_identifiers_and_their_prefix():
    u = ["null", "int", {"type": "record", "name": "ns.Pt", "fields": []}, "string"]
    assert t(u, enableStableIdentifiersForUnionType="true").names == [
        "member_int",
        "member_Pt",
        "member_string",
    ]
    assert t(
        u, enableStableIdentifiersForUnionType="true", stableIdentifierPrefixForUnionType="x_"
    ).names == ["x_int", "x_Pt", "x_string"]
    with pytest.raises(AvroSchemaError, match="name conflict"):
        t(
            [
                {"type": "enum", "name": "a.T", "symbols": ["X"]},
                {"type": "fixed", "name": "b.t", "size": 1},
            ],
            enableStableIdentifiersForUnionType="true",
        )


LINKED = {
    "type": "record",
    "name": "Node",
    "fields": [{"name": "v", "type": "int"}, {"name": "next", "type": ["null", "Node"]}],
}


def test_recursive_records_need_recursiveFieldMaxDepth_and_are_cut_there():
    with pytest.raises(AvroSchemaError, match="recursiveFieldMaxDepth"):
        t(LINKED)
    with pytest.raises(AvroSchemaError, match="recursiveFieldMaxDepth"):
        t(LINKED, recursiveFieldMaxDepth="13")
    assert spark_ddl(t(LINKED, recursiveFieldMaxDepth="1")) == "struct<`v`: int NOT NULL>"
    assert spark_ddl(t(LINKED, recursiveFieldMaxDepth=3)) == (
        "struct<`v`: int NOT NULL, `next`: struct<`v`: int NOT NULL, "
        "`next`: struct<`v`: int NOT NULL>>>"
    )
    # the data of the levels cut off is read past
    w = parse_schema(json.dumps(LINKED))
    value = {"v": 1, "next": {"v": 2, "next": {"v": 3, "next": {"v": 4, "next": None}}}}
    b = io.BytesIO()
    fastavro.schemaless_writer(b, fastavro.parse_schema(LINKED), value)
    arr, errors = Decoder(w, w, {"recursiveFieldMaxDepth": "2"}).decode(
        pa.array([b.getvalue(), b.getvalue()])
    )
    assert not errors.any()
    assert arr.to_pylist() == [{"v": 1, "next": {"v": 2}}] * 2


def test_spark_ddl_and_spark_type():
    s = t(
        {
            "type": "record",
            "name": "R",
            "fields": [
                {"name": "id", "type": "long"},
                {"name": "odd name", "type": ["null", "string"]},
                {"name": "ts", "type": {"type": "long", "logicalType": "local-timestamp-micros"}},
                {
                    "name": "m",
                    "type": {
                        "type": "map",
                        "values": [
                            "null",
                            {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 3},
                        ],
                    },
                },
            ],
        }
    )
    assert spark_ddl(s) == (
        "struct<`id`: bigint NOT NULL, `odd name`: string, "
        "`ts`: timestamp_ntz NOT NULL, "
        "`m`: map<string, decimal(9,3)> NOT NULL>"
    )
    pytest.importorskip("pyspark")
    from pyspark.sql.types import DecimalType, MapType, StringType

    st = spark_type(s)
    assert st["m"].dataType == MapType(StringType(), DecimalType(9, 3), True)
    assert not st["id"].nullable and st["odd name"].nullable


def _fastavro(schema, values):
    parsed = fastavro.parse_schema(schema)
    out = []
    for v in values:
        b = io.BytesIO()
        fastavro.schemaless_writer(b, parsed, v)
        out.append(b.getvalue())
    return out, [fastavro.schemaless_reader(io.BytesIO(p), parsed) for p in out]


EPOCH = datetime.datetime(1970, 1, 1, tzinfo=UTC)


@pytest.mark.parametrize(
    "logical,values,spark_view",
    [
        (
            {"type": "int", "logicalType": "date"},
            [datetime.date(1, 1, 1), datetime.date(1970, 1, 1), datetime.date(9999, 12, 31)],
            lambda v: v,
        ),
        (
            {"type": "long", "logicalType": "timestamp-millis"},
            [
                EPOCH,
                datetime.datetime(1582, 10, 4, 23, 59, 59, 999000, tzinfo=UTC),
                datetime.datetime(2262, 4, 12, tzinfo=UTC),
            ],
            lambda v: v,
        ),
        (
            {"type": "long", "logicalType": "timestamp-micros"},
            [
                datetime.datetime(1, 1, 1, tzinfo=UTC),
                datetime.datetime(2024, 2, 29, 12, 0, 0, 1, tzinfo=UTC),
            ],
            lambda v: v,
        ),
        (
            {"type": "long", "logicalType": "local-timestamp-millis"},
            [datetime.datetime(1900, 1, 1, 0, 0, 0, 5000)],
            lambda v: v,
        ),
        (
            {"type": "long", "logicalType": "local-timestamp-micros"},
            [datetime.datetime(2030, 6, 1, 1, 2, 3, 456789)],
            lambda v: v,
        ),
        (
            {"type": "int", "logicalType": "time-millis"},
            [datetime.time(23, 59, 59, 999000)],
            lambda v: ((v.hour * 60 + v.minute) * 60 + v.second) * 1000 + v.microsecond // 1000,
        ),
        (
            {"type": "long", "logicalType": "time-micros"},
            [datetime.time(0, 0, 0, 1)],
            lambda v: v.microsecond,
        ),
        ({"type": "string", "logicalType": "uuid"}, [uuid.UUID(int=12345)], str),
        (
            {"type": "bytes", "logicalType": "decimal", "precision": 38, "scale": 10},
            [
                decimal.Decimal("-9999999999999999999999999999.9999999999"),
                decimal.Decimal("0E-10"),
                decimal.Decimal("12345678901234567890.0000000001"),
            ],
            lambda v: v,
        ),
        (
            {
                "type": "fixed",
                "name": "Money",
                "size": 8,
                "logicalType": "decimal",
                "precision": 18,
                "scale": 2,
            },
            [decimal.Decimal("-0.01"), decimal.Decimal("9999999999999999.99")],
            lambda v: v,
        ),
        (
            {"type": "fixed", "name": "Dur", "size": 12, "logicalType": "duration"},
            [b"\x01" * 12],
            lambda v: v,
        ),
    ],
)
def test_every_logical_type_reads_as_fastavro_reads_it(logical, values, spark_view):
    payloads, theirs = _fastavro(logical, values)
    w = parse_schema(json.dumps(logical))
    arr, errors = Decoder(w).decode(pa.array(payloads, pa.binary()))
    assert not errors.any()
    assert arr.type == arrow_type(w)
    assert arr.to_pylist() == [spark_view(v) for v in theirs]


def test_timestamp_millis_promoted_reader_keeps_the_instant():
    # the writer's long read as the reader's timestamp: the reader's unit decides
    w = parse_schema('"long"')
    r = parse_schema('{"type": "long", "logicalType": "timestamp-millis"}')
    payloads, _ = _fastavro("long", [1_700_000_000_123])
    arr, _ = Decoder(w, r).decode(pa.array(payloads, pa.binary()))
    assert arr.to_pylist() == [EPOCH + datetime.timedelta(milliseconds=1_700_000_000_123)]
    assert np.asarray(arr.view(pa.int64()))[0] == 1_700_000_000_123_000


def test_registry_references_resolve_named_types():
    address = (
        '{"type": "record", "name": "Address", "namespace": "com.acme", '
        '"fields": [{"name": "city", "type": "string"}]}'
    )
    person = {
        "type": "record",
        "name": "Person",
        "namespace": "com.acme",
        "fields": [
            {"name": "home", "type": "Address"},
            {"name": "work", "type": ["null", "com.acme.Address"]},
        ],
    }
    s = parse_schema(json.dumps(person), named={"address.avsc": address})
    assert spark_ddl(arrow_type(s)) == (
        "struct<`home`: struct<`city`: string NOT NULL> NOT NULL, "
        "`work`: struct<`city`: string NOT NULL>>"
    )
    with pytest.raises(AvroSchemaError, match="unknown type name 'Address'"):
        parse_schema(json.dumps(person))


def test_avro_schema_of_writes_each_spark_type_as_spark_s_to_avro_does():
    pytest.importorskip("pyspark")
    from pyspark.sql import types as T

    from kafka_common.avro.spark_types import avro_schema_of

    plain = {
        T.BooleanType(): "boolean",
        T.ByteType(): "int",
        T.ShortType(): "int",
        T.IntegerType(): "int",
        T.LongType(): "long",
        T.FloatType(): "float",
        T.DoubleType(): "double",
        T.StringType(): "string",
        T.BinaryType(): "bytes",
        T.DateType(): {"type": "int", "logicalType": "date"},
        T.TimestampType(): {"type": "long", "logicalType": "timestamp-micros"},
        T.TimestampNTZType(): {"type": "long", "logicalType": "local-timestamp-micros"},
    }
    for spark, avro in plain.items():
        assert avro_schema_of(spark, False) == avro, spark
        assert avro_schema_of(spark, True) == [avro, "null"], spark
    row = T.StructType([T.StructField("tags", T.ArrayType(T.LongType(), False), True)])
    assert avro_schema_of(row, False) == {
        "type": "record",
        "name": "topLevelRecord",
        "fields": [{"name": "tags", "type": [{"type": "array", "items": "long"}, "null"]}],
    }
