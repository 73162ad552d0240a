"""Protobuf and JSON Schema values read without Spark: written by confluent-kafka's
``ProtobufSerializer`` / ``JSONSerializer`` talking to the test registry (standing in for
Confluent's), decoded by ``read_range``, judged by confluent-kafka's deserializers."""

from __future__ import annotations

import dataclasses
import json
import sys

import confluent_kafka
import pyarrow as pa
import pytest

from kafka_source.fetcher import read_range
from kafka_source.offset_specs import OffsetRange
from kafka_source.options import parse_reader_options
from kafka_source.value_decoding import ValueDecodeError
from kafka_source.value_formats import resolve_formats

from .broker_setup import create_topic
from .schema_registry_server import RegistryServer

from confluent_kafka.schema_registry import SchemaRegistryClient  # noqa: E402
from confluent_kafka.serialization import MessageField, SerializationContext  # noqa: E402

PROTO = """
syntax = "proto3";
package shop;
import "google/protobuf/timestamp.proto";

message Order {
  int64 id = 1;
  string customer = 2;
  repeated Line lines = 3;
  map<string, int32> counts = 4;
  Status status = 5;
  google.protobuf.Timestamp at = 6;
  optional double discount = 7;
  message Line { string sku = 1; uint32 qty = 2; }
  enum Status { NEW = 0; PAID = 1; }
}
"""


@pytest.fixture
def registry():
    server = RegistryServer().start()
    yield server
    server.stop()


def _read(bootstrap, topic, end, **options):
    opts = parse_reader_options({"kafka.bootstrap.servers": bootstrap, "subscribe": topic,
                                 **options})
    opts = dataclasses.replace(opts, formats=resolve_formats(opts.formats))
    return pa.Table.from_batches(list(read_range(opts, OffsetRange(topic, 0, 0, end))))


def _pb2(tmp_path):
    import importlib
    import importlib.resources

    from grpc_tools import protoc
    (tmp_path / "shop.proto").write_text(PROTO)
    include = str(importlib.resources.files("grpc_tools") / "_proto")
    assert protoc.main(["protoc", f"-I{tmp_path}", f"-I{include}",
                        f"--python_out={tmp_path}", "shop.proto"]) == 0
    sys.path.insert(0, str(tmp_path))
    try:
        return importlib.import_module("shop_pb2")
    finally:
        sys.path.remove(str(tmp_path))


def test_protobuf_values_read_as_from_protobuf_types_them(mock_cluster, registry,
                                                          topic_name, tmp_path):
    from confluent_kafka.schema_registry.protobuf import (ProtobufDeserializer,
                                                          ProtobufSerializer)
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
    assert written[0][5] == 0   # the first message: message-index byte 0

    table = _read(mock_cluster.bootstrap, topic_name, 4, valueFormat="protobuf",
                  mode="PERMISSIVE", **{"schema.registry.url": registry.url})
    assert table.schema.field("value").type == pa.struct([
        ("id", pa.int64()), ("customer", pa.string()),
        ("lines", pa.list_(pa.struct([("sku", pa.string()), ("qty", pa.int32())]))),
        ("counts", pa.map_(pa.string(), pa.int32())), ("status", pa.string()),
        ("at", pa.timestamp("us", tz="UTC")), ("discount", pa.float64())])
    rows = table.column("value").to_pylist()
    de = ProtobufDeserializer(shop.Order, {"use.deprecated.format": False})
    back = de(written[0], ctx)
    assert rows[0]["id"] == back.id == 7 and rows[0]["customer"] == back.customer
    assert rows[0]["lines"] == [{"sku": l.sku, "qty": l.qty} for l in back.lines]
    assert rows[0]["counts"] == list(back.counts.items())
    assert rows[0]["status"] == "PAID" and rows[0]["discount"] == 0.0  # set: present
    assert rows[0]["at"].timestamp() == back.at.seconds
    # proto3 fields left at their defaults are null, as from_protobuf gives them
    assert rows[2] == {"id": 8, "customer": None, "lines": [], "counts": [], "status": None,
                       "at": None, "discount": None}
    assert rows[1] is None and rows[3] is None
    assert table.column("valueCorruptRecord").to_pylist() == [None, None, None, written[3]]


def test_json_schema_values(mock_cluster, registry, topic_name):
    from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
    schema = {"$schema": "http://json-schema.org/draft-07/schema#", "title": "Reading",
              "type": "object", "properties": {
                  "sensor": {"type": "string"}, "value": {"type": "number"},
                  "count": {"type": "integer"},
                  "tags": {"type": "array", "items": {"type": "string"}},
                  "where": {"$ref": "#/definitions/Place"},
                  "note": {"type": ["null", "string"]}},
              "definitions": {"Place": {"type": "object", "properties": {
                  "lat": {"type": "number"}, "lon": {"type": "number"}}}}}
    create_topic(mock_cluster, topic_name, 1)
    sr = SchemaRegistryClient({"url": registry.url})
    ser = JSONSerializer(json.dumps(schema), sr)
    ctx = SerializationContext(topic_name, MessageField.VALUE)
    docs = [{"sensor": "s1", "value": 1.5, "count": 3, "tags": ["a"],
             "where": {"lat": 1.0, "lon": 2.0}, "note": None},
            {"sensor": "s2", "value": 2, "count": 4, "tags": []}]
    written = [ser(d, ctx) for d in docs] + [b"\x00\x00\x00\x00\x01{not json"]
    p = confluent_kafka.Producer({"bootstrap.servers": mock_cluster.bootstrap})
    for value in written:
        p.produce(topic_name, value=value, partition=0)
    assert p.flush(10) == 0
    with pytest.raises(ValueDecodeError, match="offset 2, schema id 1 as json"):
        _read(mock_cluster.bootstrap, topic_name, 3, valueFormat="json",
              **{"schema.registry.url": registry.url})
    table = _read(mock_cluster.bootstrap, topic_name, 2, valueFormat="json",
                  **{"schema.registry.url": registry.url})
    de = JSONDeserializer(json.dumps(schema), schema_registry_client=sr)
    want = [de(v, ctx) for v in written[:2]]
    got = table.column("value").to_pylist()
    for g, w in zip(got, want):
        assert {k: v for k, v in g.items() if v is not None} == \
            {k: v for k, v in w.items() if v is not None}
    assert table.schema.field("value").type.field("count").type == pa.int64()


def _encode(registry, fmt, schema, batch, **options):
    from kafka_common.option_map import OptionMap
    from kafka_sink.value_encoding import encode_formats
    from kafka_sink.value_formats import parse_sink_formats, resolve_sink_formats
    opts = OptionMap({"valueFormat": fmt, "schema.registry.url": registry.url, **options})
    formats = resolve_sink_formats(parse_sink_formats(opts, "orders"), schema)
    return encode_formats(batch, formats).column(0).to_pylist()


def test_writer_protobuf_and_json_bytes_read_by_confluent_s_deserializers(registry,
                                                                          tmp_path):
    """The sink's encoding step (what df.write runs per Arrow batch) without Spark."""
    import datetime as dt

    from confluent_kafka.schema_registry.json_schema import JSONDeserializer
    from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer
    from pyspark.sql.types import (ArrayType, DoubleType, LongType, MapType, StringType,
                                   StructField, StructType, TimestampType, IntegerType)
    shop = _pb2(tmp_path)
    line = StructType([StructField("sku", StringType()), StructField("qty", LongType())])
    spark_schema = StructType([StructField("value", StructType([
        StructField("id", LongType()), StructField("customer", StringType()),
        StructField("lines", ArrayType(line)),
        StructField("counts", MapType(StringType(), IntegerType())),
        StructField("status", StringType()), StructField("at", TimestampType()),
        StructField("discount", DoubleType())]))])
    at = dt.datetime(2024, 5, 6, 7, 8, 9, 123000, tzinfo=dt.timezone.utc)
    rows = [{"id": 7, "customer": "ann", "lines": [{"sku": "a", "qty": 2}],
             "counts": [("x", 3)], "status": "PAID", "at": at, "discount": 0.5},
            None]
    arrow = pa.struct([("id", pa.int64()), ("customer", pa.string()),
                       ("lines", pa.list_(pa.struct([("sku", pa.string()),
                                                     ("qty", pa.int64())]))),
                       ("counts", pa.map_(pa.string(), pa.int32())),
                       ("status", pa.string()), ("at", pa.timestamp("us", tz="UTC")),
                       ("discount", pa.float64())])
    batch = pa.RecordBatch.from_arrays([pa.array(rows, arrow)], names=["value"])
    ctx = SerializationContext("orders", MessageField.VALUE)

    out = _encode(registry, "protobuf", spark_schema, batch, valueSchema=PROTO,
                  **{"auto.register.schemas": "true"})
    assert out[1] is None                           # a null value stays a tombstone
    assert out[0][:6] == b"\x00" + (1).to_bytes(4, "big") + b"\x00"
    order = ProtobufDeserializer(shop.Order, {"use.deprecated.format": False})(out[0], ctx)
    assert (order.id, order.customer, order.status, order.discount) == (7, "ann", 1, 0.5)
    assert [(l.sku, l.qty) for l in order.lines] == [("a", 2)]
    assert dict(order.counts) == {"x": 3} and order.at.ToDatetime(dt.timezone.utc) == at

    out = _encode(registry, "json", spark_schema, batch, **{"auto.register.schemas": "true"})
    schema_id = registry.subjects["orders-value"][-1]
    assert out[0][:5] == b"\x00" + schema_id.to_bytes(4, "big")
    doc = JSONDeserializer(None, schema_registry_client=SchemaRegistryClient(
        {"url": registry.url}))(out[0], ctx)
    assert doc == {"id": 7, "customer": "ann", "lines": [{"sku": "a", "qty": 2}],
                   "counts": {"x": 3}, "status": "PAID", "at": at.isoformat(),
                   "discount": 0.5}


def test_writer_looks_an_explicit_schema_up_and_refuses_an_unregistered_one(registry):
    from pyspark.sql.types import LongType, StructField, StructType

    from protocol.errors import ConfigError
    spark_schema = StructType([StructField("value", StructType([
        StructField("id", LongType(), False)]), False)])
    batch = pa.RecordBatch.from_arrays([pa.array([{"id": 1}], pa.struct([("id",
                                                                          pa.int64())]))],
                                       names=["value"])
    avro = json.dumps({"type": "record", "name": "R", "fields": [{"name": "id",
                                                                    "type": "long"}]})
    registry.register("orders-value", {"schema": avro})
    registry.register("orders-value", {"schema": avro.replace('"R"', '"R2"')})
    registry.reset_calls()
    out = _encode(registry, "avro", spark_schema, batch, valueSchema=avro)
    assert out == [b"\x00\x00\x00\x00\x01\x02"]        # id 1 (not the latest, 2), long 1
    assert registry.calls() == [("POST", "/subjects/orders-value")]
    with pytest.raises(ConfigError, match="register the schema under 'orders-value'"):
        _encode(registry, "avro", spark_schema, batch,
                valueSchema=avro.replace('"R"', '"Other"'))


def test_proto_message_names_and_recursion_as_from_protobuf_needs():
    from kafka_common.protobuf import arrow_type, message_descriptor
    from protocol.errors import ConfigError
    assert message_descriptor(PROTO).full_name == "shop.Order"          # the first one
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
    assert two == pa.struct([("name", pa.string()), ("kids", pa.list_(pa.struct([
        ("name", pa.string())])))])
