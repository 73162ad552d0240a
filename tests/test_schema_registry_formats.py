"""Protobuf and JSON Schema values read without Spark: written by confluent-kafka's
``ProtobufSerializer`` / ``JSONSerializer`` talking to the test registry (standing in for
Confluent's), decoded by ``read_range``, judged by confluent-kafka's deserializers."""

from __future__ import annotations

import dataclasses
import json

import confluent_kafka
import pyarrow as pa
import pytest

from kafka_source.fetcher import read_range
from kafka_source.offset_specs import OffsetRange
from kafka_source.options import parse_reader_options
from kafka_common.value_formats.decoding import ValueDecodeError
from kafka_common.value_formats import resolve_formats

from .helpers.broker_setup import create_topic

from confluent_kafka.schema_registry import SchemaRegistryClient  # noqa: E402
from confluent_kafka.serialization import MessageField, SerializationContext  # noqa: E402
from .helpers.schema_formats import DDL, EVENTS, LOOSE, PROTO, _pb2


def _read(bootstrap, topic, end, start=0, **options):
    opts = parse_reader_options(
        {"kafka.bootstrap.servers": bootstrap, "subscribe": topic, **options}
    )
    opts = dataclasses.replace(opts, formats=resolve_formats(opts.formats))
    return pa.Table.from_batches(list(read_range(opts, OffsetRange(topic, 0, start, end))))


def test_protobuf_values_read_as_from_protobuf_types_them(
    mock_cluster, registry, topic_name, tmp_path
):
    from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer

    shop = _pb2(tmp_path)
    create_topic(mock_cluster, topic_name, 1)
    sr = SchemaRegistryClient({"url": registry.url})
    ser = ProtobufSerializer(shop.Order, sr, {"use.deprecated.format": False})
    o1 = shop.Order(id=7, customer="ann", status=shop.Order.PAID, discount=0.0)
    o1.lines.add(sku="a", qty=2)
    o1.counts["x"] = 3
    o1.at.FromSeconds(1_700_000_000)
    o2 = shop.Order(id=8)
    p = confluent_kafka.Producer({"bootstrap.servers": mock_cluster.bootstrap})
    ctx = SerializationContext(topic_name, MessageField.VALUE)
    written = [ser(o1, ctx), None, ser(o2, ctx), b"\x00\x00\x00\x00\x01\x00\xff\xff"]
    for value in written:
        p.produce(topic_name, value=value, partition=0)
    assert p.flush(10) == 0
    assert written[0][5] == 0  # the first message: message-index byte 0

    table = _read(
        mock_cluster.bootstrap,
        topic_name,
        4,
        valueFormat="protobuf",
        mode="PERMISSIVE",
        **{"schema.registry.url": registry.url},
    )
    assert table.schema.field("value").type == pa.struct(
        [
            ("id", pa.int64()),
            ("customer", pa.string()),
            ("lines", pa.list_(pa.struct([("sku", pa.string()), ("qty", pa.int32())]))),
            ("counts", pa.map_(pa.string(), pa.int32())),
            ("status", pa.string()),
            ("at", pa.timestamp("us", tz="UTC")),
            ("discount", pa.float64()),
        ]
    )
    rows = table.column("value").to_pylist()
    de = ProtobufDeserializer(shop.Order, {"use.deprecated.format": False})
    back = de(written[0], ctx)
    assert rows[0]["id"] == back.id == 7 and rows[0]["customer"] == back.customer
    assert rows[0]["lines"] == [{"sku": line.sku, "qty": line.qty} for line in back.lines]
    assert rows[0]["counts"] == list(back.counts.items())
    assert rows[0]["status"] == "PAID" and rows[0]["discount"] == 0.0  # set: present
    assert rows[0]["at"].timestamp() == back.at.seconds
    # proto3 fields left at their defaults are null, as from_protobuf gives them
    assert rows[2] == {
        "id": 8,
        "customer": None,
        "lines": [],
        "counts": [],
        "status": None,
        "at": None,
        "discount": None,
    }
    assert rows[1] is None and rows[3] is None
    assert table.column("valueCorruptRecord").to_pylist() == [None, None, None, written[3]]


def test_json_schema_values(mock_cluster, registry, topic_name):
    from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer

    schema = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "title": "Reading",
        "type": "object",
        "properties": {
            "sensor": {"type": "string"},
            "value": {"type": "number"},
            "count": {"type": "integer"},
            "tags": {"type": "array", "items": {"type": "string"}},
            "where": {"$ref": "#/definitions/Place"},
            "note": {"type": ["null", "string"]},
        },
        "definitions": {
            "Place": {
                "type": "object",
                "properties": {"lat": {"type": "number"}, "lon": {"type": "number"}},
            }
        },
    }
    create_topic(mock_cluster, topic_name, 1)
    sr = SchemaRegistryClient({"url": registry.url})
    ser = JSONSerializer(json.dumps(schema), sr)
    ctx = SerializationContext(topic_name, MessageField.VALUE)
    docs = [
        {
            "sensor": "s1",
            "value": 1.5,
            "count": 3,
            "tags": ["a"],
            "where": {"lat": 1.0, "lon": 2.0},
            "note": None,
        },
        {"sensor": "s2", "value": 2, "count": 4, "tags": []},
    ]
    written = [ser(d, ctx) for d in docs] + [b"\x00\x00\x00\x00\x01{not json"]
    p = confluent_kafka.Producer({"bootstrap.servers": mock_cluster.bootstrap})
    for value in written:
        p.produce(topic_name, value=value, partition=0)
    assert p.flush(10) == 0
    with pytest.raises(ValueDecodeError, match="offset 2, schema id 1 as json"):
        _read(
            mock_cluster.bootstrap,
            topic_name,
            3,
            valueFormat="json",
            **{"schema.registry.url": registry.url},
        )
    table = _read(
        mock_cluster.bootstrap,
        topic_name,
        2,
        valueFormat="json",
        **{"schema.registry.url": registry.url},
    )
    de = JSONDeserializer(json.dumps(schema), schema_registry_client=sr)
    want = [de(v, ctx) for v in written[:2]]
    got = table.column("value").to_pylist()
    for g, w in zip(got, want):
        assert {k: v for k, v in g.items() if v is not None} == {
            k: v for k, v in w.items() if v is not None
        }
    assert table.schema.field("value").type.field("count").type == pa.int64()


def _encode(registry, fmt, schema, batch, **options):
    from kafka_common.option_map import OptionMap
    from kafka_common.value_formats.encoding import encode_formats
    from kafka_common.value_formats import parse_writer_formats, resolve_sink_formats

    opts = OptionMap({"valueFormat": fmt, "schema.registry.url": registry.url, **options})
    formats = resolve_sink_formats(parse_writer_formats(opts, "orders"), schema)
    return encode_formats(batch, formats).column(0).to_pylist()


def test_writer_protobuf_and_json_bytes_read_by_confluent_s_deserializers(registry, tmp_path):
    """The sink's encoding step (what df.write runs per Arrow batch) without Spark."""
    import datetime as dt

    from confluent_kafka.schema_registry.json_schema import JSONDeserializer
    from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer
    from pyspark.sql.types import (
        ArrayType,
        DoubleType,
        LongType,
        MapType,
        StringType,
        StructField,
        StructType,
        TimestampType,
        IntegerType,
    )

    shop = _pb2(tmp_path)
    line = StructType([StructField("sku", StringType()), StructField("qty", LongType())])
    spark_schema = StructType(
        [
            StructField(
                "value",
                StructType(
                    [
                        StructField("id", LongType()),
                        StructField("customer", StringType()),
                        StructField("lines", ArrayType(line)),
                        StructField("counts", MapType(StringType(), IntegerType())),
                        StructField("status", StringType()),
                        StructField("at", TimestampType()),
                        StructField("discount", DoubleType()),
                    ]
                ),
            )
        ]
    )
    at = dt.datetime(2024, 5, 6, 7, 8, 9, 123000, tzinfo=dt.timezone.utc)
    rows = [
        {
            "id": 7,
            "customer": "ann",
            "lines": [{"sku": "a", "qty": 2}],
            "counts": [("x", 3)],
            "status": "PAID",
            "at": at,
            "discount": 0.5,
        },
        None,
    ]
    arrow = pa.struct(
        [
            ("id", pa.int64()),
            ("customer", pa.string()),
            ("lines", pa.list_(pa.struct([("sku", pa.string()), ("qty", pa.int64())]))),
            ("counts", pa.map_(pa.string(), pa.int32())),
            ("status", pa.string()),
            ("at", pa.timestamp("us", tz="UTC")),
            ("discount", pa.float64()),
        ]
    )
    batch = pa.RecordBatch.from_arrays([pa.array(rows, arrow)], names=["value"])
    ctx = SerializationContext("orders", MessageField.VALUE)

    out = _encode(
        registry,
        "protobuf",
        spark_schema,
        batch,
        valueSchema=PROTO,
        **{"auto.register.schemas": "true"},
    )
    assert out[1] is None  # a null value stays a tombstone
    assert out[0][:6] == b"\x00" + (1).to_bytes(4, "big") + b"\x00"
    order = ProtobufDeserializer(shop.Order, {"use.deprecated.format": False})(out[0], ctx)
    assert (order.id, order.customer, order.status, order.discount) == (7, "ann", 1, 0.5)
    assert [(line.sku, line.qty) for line in order.lines] == [("a", 2)]
    assert dict(order.counts) == {"x": 3} and order.at.ToDatetime(dt.timezone.utc) == at

    out = _encode(registry, "json", spark_schema, batch, **{"auto.register.schemas": "true"})
    schema_id = registry.subjects["orders-value"][-1]
    assert out[0][:5] == b"\x00" + schema_id.to_bytes(4, "big")
    doc = JSONDeserializer(
        None, schema_registry_client=SchemaRegistryClient({"url": registry.url})
    )(out[0], ctx)
    assert doc == {
        "id": 7,
        "customer": "ann",
        "lines": [{"sku": "a", "qty": 2}],
        "counts": {"x": 3},
        "status": "PAID",
        "at": at.isoformat(),
        "discount": 0.5,
    }


def test_writer_looks_an_explicit_schema_up_and_refuses_an_unregistered_one(registry):
    from pyspark.sql.types import LongType, StructField, StructType

    from protocol.errors import ConfigError

    spark_schema = StructType(
        [StructField("value", StructType([StructField("id", LongType(), False)]), False)]
    )
    batch = pa.RecordBatch.from_arrays(
        [pa.array([{"id": 1}], pa.struct([("id", pa.int64())]))], names=["value"]
    )
    avro = json.dumps({"type": "record", "name": "R", "fields": [{"name": "id", "type": "long"}]})
    registry.register("orders-value", {"schema": avro})
    registry.register("orders-value", {"schema": avro.replace('"R"', '"R2"')})
    registry.reset_calls()
    out = _encode(registry, "avro", spark_schema, batch, valueSchema=avro)
    assert out == [b"\x00\x00\x00\x00\x01\x02"]  # id 1 (not the latest, 2), long 1
    assert registry.calls() == [("POST", "/subjects/orders-value")]
    with pytest.raises(ConfigError, match="register the schema under 'orders-value'"):
        _encode(registry, "avro", spark_schema, batch, valueSchema=avro.replace('"R"', '"Other"'))


def test_writer_encodes_with_the_subject_s_version_valueSchemaVersion_names(registry):
    """valueSchemaVersion=1 writes with version 1 of the subject, not its latest: the
    wire format carries version 1's id and Confluent's deserializer, which fetches the
    schema of that id, reads the record as version 1 has it. The column fits version 1
    only (version 2 added a field), so the latest is no way to write it. A version the
    subject lacks, or a subject the registry lacks, fails naming the option, the subject
    and the version."""
    from confluent_kafka.schema_registry.avro import AvroDeserializer
    from pyspark.sql.types import LongType, StructField, StructType

    from kafka_common.avro.encoder import AvroEncodeError
    from protocol.errors import ConfigError

    spark_schema = StructType(
        [StructField("value", StructType([StructField("id", LongType(), False)]), False)]
    )
    batch = pa.RecordBatch.from_arrays(
        [pa.array([{"id": 1}], pa.struct([("id", pa.int64())]))], names=["value"]
    )
    fields = [{"name": "id", "type": "long"}]
    registry.register("other-value", {"schema": '"string"'})  # ids of its own
    v1 = registry.register(
        "orders-value", {"schema": json.dumps({"type": "record", "name": "R", "fields": fields})}
    )["id"]
    added = {"name": "n", "type": "int", "default": 7}
    v2 = registry.register(
        "orders-value",
        {"schema": json.dumps({"type": "record", "name": "R", "fields": [*fields, added]})},
    )["id"]
    assert v1 != v2

    [out] = _encode(registry, "avro", spark_schema, batch, valueSchemaVersion="1")
    assert out == b"\x00" + v1.to_bytes(4, "big") + b"\x02"  # magic, v1's id, long 1
    deserialize = AvroDeserializer(SchemaRegistryClient({"url": registry.url}))
    assert deserialize(out, SerializationContext("orders", MessageField.VALUE)) == {"id": 1}
    with pytest.raises(AvroEncodeError, match="no field 'n'"):  # the latest: version 2
        _encode(registry, "avro", spark_schema, batch)

    for options, said in (
        ({"valueSchemaVersion": "3"}, "subject 'orders-value' has no version 3"),
        ({"valueSchemaVersion": "1", "valueSubject": "nope"}, "subject 'nope' has no version 1"),
    ):
        with pytest.raises(ConfigError) as info:
            _encode(registry, "avro", spark_schema, batch, **options)
        option = f"valueSchemaVersion={options['valueSchemaVersion']}"
        assert str(info.value).startswith(f"{option}: {said} in the Schema Registry")


def test_writer_refuses_a_ddl_as_a_json_schema(registry):
    """A Spark DDL is a reader schema only: the writer says so instead of sending it to the
    registry as if it were a JSON Schema."""
    from kafka_common.option_map import OptionMap
    from kafka_common.value_formats import parse_writer_formats
    from protocol.errors import ConfigError

    opts = OptionMap(
        {
            "valueFormat": "json",
            "schema.registry.url": registry.url,
            "valueSchema": "id BIGINT, name STRING",
        }
    )
    registry.reset_calls()
    with pytest.raises(
        ConfigError,
        match="valueSchema with valueFormat=json must be a JSON "
        "Schema document.*auto.register.schemas=true",
    ):
        parse_writer_formats(opts, "orders")
    assert registry.calls() == []
    opts = OptionMap(
        {
            "valueFormat": "json",
            "schema.registry.url": registry.url,
            "valueSchema": ' {"type": "object"}',
        }
    )
    assert parse_writer_formats(opts, "orders")[0].inline_schema.strip() == '{"type": "object"}'


@pytest.mark.parametrize(
    "option", ["valueMessageName", "keyMessageName", "valueSubject", "keySchema"]
)
def test_a_schema_option_of_a_binary_column_is_refused_alike_by_reader_and_writer(option):
    """Issue 39: the writer ignored valueMessageName (and keyMessageName) with a binary
    value format, where the reader refuses it: the same words on both sides now."""
    from kafka_sink.options import parse_writer_options
    from protocol.errors import ConfigError

    servers = {"kafka.bootstrap.servers": "127.0.0.1:9092"}
    with pytest.raises(ConfigError) as read:
        parse_reader_options({**servers, "subscribe": "t", option: "x"})
    with pytest.raises(ConfigError) as write:
        parse_writer_options({**servers, "topic": "t", option: "x"})
    column = option[:3] if option.startswith("key") else "value"
    assert (
        str(read.value)
        == str(write.value)
        == (
            f"{option} is set but {column}Format is binary (set {column}Format to avro, "
            "protobuf or json)"
        )
    )


def test_proto_message_names_and_recursion_as_from_protobuf_needs():
    from kafka_common.protobuf import arrow_type, message_descriptor
    from protocol.errors import ConfigError

    assert message_descriptor(PROTO).full_name == "shop.Order"  # the first one
    assert message_descriptor(PROTO, name="Order").full_name == "shop.Order"
    line = message_descriptor(PROTO, name="shop.Order.Line")
    assert arrow_type(line) == pa.struct([("sku", pa.string()), ("qty", pa.int32())])
    assert arrow_type(line, {"upcast.unsigned.ints": "true"}).field("qty").type == pa.int64()
    # Message indexes count the descriptor's nested types, protoc's map entries included
    # (as confluent-kafka's serializer counts them): Order's are CountsEntry, Line.
    assert message_descriptor(PROTO, path=(0, 1)).full_name == "shop.Order.Line"
    with pytest.raises(ConfigError, match="message 'Nope' is not in"):
        message_descriptor(PROTO, name="Nope")
    tree = 'syntax = "proto3"; message Node { string name = 1; repeated Node kids = 2; }'
    with pytest.raises(ConfigError, match="recursive.fields.max.depth"):
        arrow_type(message_descriptor(tree))
    two = arrow_type(message_descriptor(tree), {"recursive.fields.max.depth": "2"})
    assert two == pa.struct(
        [("name", pa.string()), ("kids", pa.list_(pa.struct([("name", pa.string())])))]
    )


def test_protobuf_message_index_picks_the_message_and_another_is_a_mismatch(
    mock_cluster, registry, topic_name, tmp_path
):
    """confluent-kafka's ProtobufSerializer writes the message index of the class it is
    given: [0] (one 0 byte) for Created, [1] for Refund, [1, 0] for Refund.Reason. A
    value is read with the reader's message only when its index names that message: a
    Created read as a Refund would fill ``order`` with its ``id`` (same field number)."""
    from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer

    events = _pb2(tmp_path, EVENTS, "events")
    create_topic(mock_cluster, topic_name, 1)
    sr = SchemaRegistryClient({"url": registry.url})
    ctx = SerializationContext(topic_name, MessageField.VALUE)
    conf = {"use.deprecated.format": False, "auto.register.schemas": True}
    created = ProtobufSerializer(events.Created, sr, conf)
    refund = ProtobufSerializer(events.Refund, sr, conf)
    reason = ProtobufSerializer(events.Refund.Reason, sr, conf)
    r1 = events.Refund(order="o-1", cents=250)
    r1.reason.code, r1.reason.level = "late", 2
    written = [
        created(events.Created(id="o-1", cents=900), ctx),
        refund(r1, ctx),
        reason(events.Refund.Reason(code="broken", level=5), ctx),
        refund(events.Refund(order="o-2", cents=-5), ctx),
    ]
    p = confluent_kafka.Producer({"bootstrap.servers": mock_cluster.bootstrap})
    for value in written:
        p.produce(topic_name, value=value, partition=0)
    assert p.flush(10) == 0
    # One registered schema (the whole .proto file); the indexes after its id differ.
    assert len(registry.subjects[f"{topic_name}-value"]) == 1
    assert [
        w[5 : 5 + len(i)]
        for w, i in zip(written, [b"\x00", b"\x02\x02", b"\x04\x02\x00", b"\x02\x02"])
    ] == [b"\x00", b"\x02\x02", b"\x04\x02\x00", b"\x02\x02"]
    url = {"schema.registry.url": registry.url}

    table = _read(
        mock_cluster.bootstrap,
        topic_name,
        4,
        valueFormat="protobuf",
        valueMessageName="events.Refund",
        mode="PERMISSIVE",
        **url,
    )
    assert table.schema.field("value").type == pa.struct(
        [
            ("order", pa.string()),
            ("cents", pa.int64()),
            ("reason", pa.struct([("code", pa.string()), ("level", pa.int32())])),
        ]
    )
    rows = table.column("value").to_pylist()
    de = ProtobufDeserializer(events.Refund, {"use.deprecated.format": False})
    for i in (1, 3):
        back = de(written[i], ctx)
        want = {
            "order": back.order,
            "cents": back.cents,
            "reason": {"code": back.reason.code, "level": back.reason.level}
            if back.HasField("reason")
            else None,
        }
        assert rows[i] == want
    assert rows[1]["reason"] == {"code": "late", "level": 2}
    assert rows[0] is None and rows[2] is None  # Created, Refund.Reason: not Refunds
    assert table.column("valueCorruptRecord").to_pylist() == [written[0], None, written[2], None]
    assert table.column("valueSchemaId").to_pylist() == [1] * 4

    with pytest.raises(ValueDecodeError) as info:
        _read(
            mock_cluster.bootstrap,
            topic_name,
            4,
            valueFormat="protobuf",
            valueMessageName="events.Refund",
            **url,
        )
    assert f"topic {topic_name!r} partition 0 offset 0, schema id 1 as protobuf" in str(info.value)
    assert (
        "message index [0] names message events.Created, not the reader's "
        "events.Refund (set valueMessageName=events.Created" in str(info.value)
    )
    assert "1 more such rows" in str(info.value)

    # The nested message, by its full name: only the [1, 0] value is one.
    table = _read(
        mock_cluster.bootstrap,
        topic_name,
        4,
        valueFormat="protobuf",
        valueMessageName="events.Refund.Reason",
        mode="PERMISSIVE",
        **url,
    )
    back = ProtobufDeserializer(events.Refund.Reason, {"use.deprecated.format": False})(
        written[2], ctx
    )
    assert table.column("value").to_pylist() == [
        None,
        None,
        {"code": back.code, "level": back.level},
        None,
    ]

    # Without valueMessageName the reader is the first message, Created: the Refunds are
    # named as what they are.
    with pytest.raises(
        ValueDecodeError,
        match=r"offset 1, schema id 1 .*message index "
        r"\[1\] names message events.Refund, not the reader's "
        r"events.Created \(set valueMessageName=events.Refund",
    ):
        _read(mock_cluster.bootstrap, topic_name, 4, valueFormat="protobuf", **url)
    table = _read(mock_cluster.bootstrap, topic_name, 1, valueFormat="protobuf", **url)
    assert table.column("value").to_pylist() == [{"id": "o-1", "cents": 900}]


def test_protobuf_message_index_outside_the_schema_is_a_corrupt_record(
    mock_cluster, registry, topic_name
):
    create_topic(mock_cluster, topic_name, 1)
    schema_id = registry.register(
        f"{topic_name}-value", {"schema": EVENTS, "schemaType": "PROTOBUF"}
    )["id"]
    prefix = b"\x00" + schema_id.to_bytes(4, "big")
    values = [
        prefix + b"\x02\x04" + b"\x0a\x01x",  # [2]: the file has two messages
        prefix + b"\x04\x02\x06" + b"\x0a\x01x",  # [1, 3]: Refund has one nested
        prefix + b"\x02\x03" + b"\x0a\x01x",
    ]  # [-2]
    p = confluent_kafka.Producer({"bootstrap.servers": mock_cluster.bootstrap})
    for value in values:
        p.produce(topic_name, value=value, partition=0)
    assert p.flush(10) == 0
    table = _read(
        mock_cluster.bootstrap,
        topic_name,
        3,
        valueFormat="protobuf",
        mode="PERMISSIVE",
        **{"schema.registry.url": registry.url},
    )
    assert table.column("value").to_pylist() == [None] * 3
    assert table.column("valueCorruptRecord").to_pylist() == values
    with pytest.raises(
        ValueDecodeError,
        match=r"offset 0, schema id \d+ .*message index "
        r"\[2\] names no message of schema id",
    ):
        _read(
            mock_cluster.bootstrap,
            topic_name,
            3,
            valueFormat="protobuf",
            **{"schema.registry.url": registry.url},
        )


def _from_json(doc: dict) -> dict:
    """What from_json(value, DDL) gives for a document that fits DDL (see the Spark test
    for from_json itself as the referee)."""
    import datetime as dt
    import decimal

    at = doc.get("at")
    return {
        "id": doc.get("id"),
        "name": doc.get("name"),
        "tags": doc.get("tags"),
        "price": decimal.Decimal(str(doc["price"])).quantize(
            decimal.Decimal("0.01"), rounding=decimal.ROUND_HALF_UP
        )
        if "price" in doc
        else None,
        "at": dt.datetime.fromisoformat(at)
        if isinstance(at, str)
        else dt.datetime.fromtimestamp(at, dt.timezone.utc)
        if at is not None
        else None,
        "day": dt.date.fromisoformat(doc["day"]) if "day" in doc else None,
        "attrs": list(doc["attrs"].items()) if "attrs" in doc else None,
        "where": doc.get("where"),
        "missing": None,
    }


def test_json_values_read_with_a_ddl_reader_schema_as_from_json_converts(
    mock_cluster, registry, topic_name
):
    from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer

    create_topic(mock_cluster, topic_name, 1)
    sr = SchemaRegistryClient({"url": registry.url})
    ser = JSONSerializer(json.dumps(LOOSE), sr)
    ctx = SerializationContext(topic_name, MessageField.VALUE)
    docs = [
        {
            "id": 1,
            "name": "ann",
            "tags": ["a", None],
            "price": 12.345,
            "at": "2024-01-02T03:04:05.123+01:00",
            "day": "2024-02-03",
            "attrs": {"x": 5},
            "where": {"lat": 1.5, "lon": 2},
            "ignored": True,
        },
        {"id": 2, "price": "7", "at": 1_700_000_000},  # missing fields: null
        {"id": "3", "name": "bob"},  # a string for INT
        {"id": 4, "price": 12345.6},  # too many digits
        {"id": 2**31, "name": "big"},  # out of INT's range
        {"id": 6, "name": {"nested": [1, True]}},
    ]  # JSON text for STRING
    written = [ser(d, ctx) for d in docs]
    p = confluent_kafka.Producer({"bootstrap.servers": mock_cluster.bootstrap})
    for value in written + [None]:
        p.produce(topic_name, value=value, partition=0)
    assert p.flush(10) == 0
    url = {"schema.registry.url": registry.url}
    de = JSONDeserializer(json.dumps(LOOSE), schema_registry_client=sr)
    back = [de(v, ctx) for v in written]  # the referee's documents
    assert back == docs

    table = _read(
        mock_cluster.bootstrap,
        topic_name,
        7,
        valueFormat="json",
        valueSchema=DDL,
        mode="PERMISSIVE",
        **url,
    )
    assert table.schema.field("value").type == pa.struct(
        [
            ("id", pa.int32()),
            ("name", pa.string()),
            ("tags", pa.list_(pa.string())),
            ("price", pa.decimal128(6, 2)),
            ("at", pa.timestamp("us", tz="UTC")),
            ("day", pa.date32()),
            ("attrs", pa.map_(pa.string(), pa.int64())),
            ("where", pa.struct([("lat", pa.float64()), ("lon", pa.float64())])),
            ("missing", pa.string()),
        ]
    )
    rows = table.column("value").to_pylist()
    assert rows[0] == _from_json(back[0]) and rows[1] == _from_json(back[1])
    assert str(rows[0]["price"]) == "12.35" and str(rows[1]["price"]) == "7.00"
    assert rows[5] == {**_from_json({}), "id": 6, "name": '{"nested":[1,true]}'}
    assert rows[2] is None and rows[3] is None and rows[4] is None and rows[6] is None
    assert table.column("valueCorruptRecord").to_pylist() == [
        None,
        None,
        written[2],
        written[3],
        written[4],
        None,
        None,
    ]
    assert table.column("valueSchemaId").to_pylist() == [1] * 6 + [None]

    for end, offset, reason in [
        (3, 2, "id: expected an integer (int), got the string '3'"),
        (4, 3, "price: 12345.6 does not fit decimal(6, 2)"),
        (5, 4, "id: 2147483648 is out of range for int"),
    ]:
        with pytest.raises(ValueDecodeError) as info:
            _read(
                mock_cluster.bootstrap,
                topic_name,
                end,
                start=offset,
                valueFormat="json",
                valueSchema=DDL,
                **url,
            )
        assert (
            f"topic {topic_name!r} partition 0 offset {offset}, schema id 1 as json"
            in str(info.value)
        ) and reason in str(info.value)

    # No registry: the DDL reads every framed value (the id is still reported).
    table = _read(mock_cluster.bootstrap, topic_name, 2, valueFormat="json", valueSchema=DDL)
    assert table.column("value").to_pylist() == [_from_json(d) for d in back[:2]]
    assert table.column("valueSchemaId").to_pylist() == [1, 1]


def test_json_reader_schema_is_a_ddl_or_a_json_schema_and_errors_say_which(registry):
    from kafka_source.options import parse_reader_options
    from kafka_source.spark_schema import formatted_schema
    from protocol.errors import ConfigError

    def value_type(schema):
        opts = parse_reader_options(
            {
                "kafka.bootstrap.servers": "127.0.0.1:9",
                "subscribe": "t",
                "valueFormat": "json",
                "valueSchema": schema,
            }
        )
        return formatted_schema(False, resolve_formats(opts.formats))["value"].dataType

    assert (
        value_type("id INT, tags ARRAY<STRING>").simpleString()
        == "struct<id:int,tags:array<string>>"
    )
    assert value_type("ARRAY<STRUCT<id: BIGINT>>").simpleString() == "array<struct<id:bigint>>"
    assert (
        value_type(' {"type": "object", "properties": {"id": {"type": "integer"}}}').simpleString()
        == "struct<id:bigint>"
    )
    with pytest.raises(
        ConfigError,
        match=r"valueSchema is neither a JSON Schema document "
        r"nor a Spark DDL string: it starts with '\{' as a JSON Schema does, "
        r"but is not JSON",
    ):
        value_type('{"type": "object",')
    with pytest.raises(
        ConfigError,
        match=r"valueSchema is neither a JSON Schema document "
        r".* nor a Spark DDL string .*: as DDL, unknown type 'INTEGR' at "
        r"position 3",
    ):
        value_type("id INTEGR, name STRING")
    with pytest.raises(ConfigError, match="valueSchema: the DDL 'INT' is a single int32"):
        value_type("INT")
    with pytest.raises(ConfigError, match="valueSchema: a map for JSON needs STRING keys"):
        value_type("m MAP<INT, STRING>")
    # The key the same way, under its own option name.
    opts = parse_reader_options(
        {
            "kafka.bootstrap.servers": "127.0.0.1:9",
            "subscribe": "t",
            "keyFormat": "json",
            "keySchema": "id BIGINT",
        }
    )
    assert (
        formatted_schema(False, resolve_formats(opts.formats))["key"].dataType.simpleString()
        == "struct<id:bigint>"
    )
    opts = parse_reader_options(
        {
            "kafka.bootstrap.servers": "127.0.0.1:9",
            "subscribe": "t",
            "keyFormat": "json",
            "keySchema": "id BIGNUM",
        }
    )
    with pytest.raises(ConfigError, match="keySchema is neither a JSON Schema document"):
        formatted_schema(False, resolve_formats(opts.formats))


TREE = """
syntax = "proto3";
package t;
import "google/protobuf/duration.proto";
message Node {
  string name = 1;
  repeated Node kids = 2;
  Kind kind = 3;
  google.protobuf.Duration took = 4;
  int32 n = 5;
  map<string, Node> byname = 6;
  enum Kind { LEAF = 0; BRANCH = 1; }
}
"""


def test_protobuf_decoder_options_as_from_protobuf_applies_them():
    """The compiled decoder (no broker needed): recursion cut at
    recursive.fields.max.depth, emit.default.values, enums.as.ints, Duration, a map of
    messages; the payloads are the protobuf runtime's own serialization."""
    import datetime as dt

    import numpy as np
    from google.protobuf import message_factory

    from kafka_common.protobuf import Decoder, message_descriptor

    desc = message_descriptor(TREE)
    Node = message_factory.GetMessageClass(desc)
    root = Node(name="r", kind=1, n=3)
    root.took.FromTimedelta(dt.timedelta(seconds=2, microseconds=5))
    kid = root.kids.add(name="k")
    kid.kids.add(name="deep")  # cut at depth 2
    root.byname["x"].n = 7
    payloads = pa.array(
        [
            b"\xff" + root.SerializeToString(),
            None,
            b"\xff\x0a\x05ab",
            b"\xff" + Node().SerializeToString(),
        ]
    )
    starts = np.ones(4, np.int32)

    plain = Decoder(desc, {"recursive.fields.max.depth": "2"})
    array, errors = plain.decode(payloads, starts)
    assert errors.tolist() == [False, False, True, False]  # truncated: a corrupt row
    kid_null = {"name": None, "kind": None, "took": None, "n": None}
    assert array.to_pylist() == [
        {
            "name": "r",
            "kids": [{**kid_null, "name": "k"}],
            "kind": "BRANCH",
            "took": dt.timedelta(seconds=2, microseconds=5),
            "n": 3,
            "byname": [("x", {**kid_null, "n": 7})],
        },
        None,
        None,
        {"name": None, "kids": [], "kind": None, "took": None, "n": None, "byname": []},
    ]

    opts = {
        "recursive.fields.max.depth": "2",
        "emit.default.values": "true",
        "enums.as.ints": "true",
    }
    array, _ = Decoder(desc, opts).decode(payloads, starts)
    kid_default = {"name": "", "kind": 0, "took": None, "n": 0}
    assert array.to_pylist()[0] == {
        "name": "r",
        "kids": [{**kid_default, "name": "k"}],
        "kind": 1,
        "took": dt.timedelta(seconds=2, microseconds=5),
        "n": 3,
        "byname": [("x", {**kid_default, "n": 7})],
    }
    assert array.to_pylist()[3] == {
        "name": "",
        "kids": [],
        "kind": 0,
        "took": None,
        "n": 0,
        "byname": [],
    }


def test_protobuf_message_index_in_the_schema_id_header(
    mock_cluster, registry, topic_name, tmp_path
):
    """confluent-kafka's header_schema_id_serializer puts the id and the message index in
    the ``__value_schema_id`` header and leaves the value unframed: the index there picks
    the message the same way."""
    from confluent_kafka.schema_registry import header_schema_id_serializer
    from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer

    events = _pb2(tmp_path, EVENTS, "events")
    create_topic(mock_cluster, topic_name, 1)
    sr = SchemaRegistryClient({"url": registry.url})
    conf = {"use.deprecated.format": False, "schema.id.serializer": header_schema_id_serializer}
    p = confluent_kafka.Producer({"bootstrap.servers": mock_cluster.bootstrap})
    written = []
    for cls, msg in [
        (events.Refund, events.Refund(order="o-9", cents=12)),
        (events.Created, events.Created(id="c-1")),
    ]:
        headers = []
        ctx = SerializationContext(topic_name, MessageField.VALUE, headers)
        value = ProtobufSerializer(cls, sr, conf)(msg, ctx)
        written.append((value, headers))
        p.produce(topic_name, value=value, partition=0, headers=headers)
    assert p.flush(10) == 0
    header = dict(written[0][1])["__value_schema_id"]
    assert header[0] == 1 and header[17:] == b"\x02\x02"  # a schema GUID, index [1]
    table = _read(
        mock_cluster.bootstrap,
        topic_name,
        2,
        valueFormat="protobuf",
        valueMessageName="events.Refund",
        mode="PERMISSIVE",
        **{"schema.registry.url": registry.url},
    )
    value, headers = written[0]
    back = ProtobufDeserializer(events.Refund, {"use.deprecated.format": False})(
        value, SerializationContext(topic_name, MessageField.VALUE, headers)
    )
    assert table.column("value").to_pylist() == [
        {"order": back.order, "cents": back.cents, "reason": None},
        None,
    ]
    assert table.column("valueCorruptRecord").to_pylist() == [None, written[1][0]]


def test_json_decoder_reads_each_payload_alone_whatever_its_neighbours():
    """The decoder parses ASCII payloads in place in the column's buffer: a payload that is
    not whole JSON on its own stays corrupt even when it and the next one would make JSON
    together, and the result is the same as the row-by-row path (non-ASCII column)."""
    import numpy as np

    from kafka_common.json_schema import Decoder
    from kafka_common.spark_ddl import parse_ddl

    t = parse_ddl("a INT, s STRING")
    payloads = [
        b'{"a": 1}',
        b'{"a": ',
        b"2}",
        b"",
        b' {"a": 3} ',
        b'{"a": 4} x',
        None,
        b'{"a": 5}{"a": 6}',
        b"NaN",
        b'{"s": [1,2',
        b"]}",
        b'{"a": 7, "s": "ok"}',
    ]
    prefixed = [None if p is None else b"\x00\x00\x00\x00\x01" + p for p in payloads]
    starts = np.full(len(payloads), 5, np.int32)
    want_ok = [
        {"a": 1, "s": None},
        None,
        None,
        None,
        {"a": 3, "s": None},
        None,
        None,
        None,
        None,
        None,
        None,
        {"a": 7, "s": "ok"},
    ]
    want_err = [False, True, True, True, False, True, False, True, True, True, True, False]
    for extra in (b'{"s": "x"}', '{"s": "é"}'.encode()):  # ASCII: in place; else per row
        array, errors, reasons = Decoder(t).decode(
            pa.array(prefixed + [b"\x00" * 5 + extra]), np.append(starts, 5)
        )
        assert array.to_pylist()[:-1] == want_ok
        assert errors.tolist() == want_err + [False]
        assert "not JSON" in reasons[1] and "expected an object" in reasons[8]
        assert array.to_pylist()[-1] == {"a": None, "s": extra.decode()[7:-2]}
