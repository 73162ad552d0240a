"""``valueFormat=avro`` through Spark: a batch read of a topic whose producers evolved the
schema, and a stream that meets a new schema id mid-way without calling the registry per
micro-batch. Values are written by confluent-kafka's AvroSerializer talking over HTTP to
the test registry (tests/schema_registry_server.py, standing in for Confluent's); the
referee is confluent-kafka's AvroDeserializer. One shared SparkSession (conftest)."""

from __future__ import annotations

import json
import time

import confluent_kafka
import pytest

from .broker_setup import create_topic
from .schema_registry_server import RegistryServer
from .test_schema_registry import V1, V2, produce

pytestmark = pytest.mark.spark

from confluent_kafka.schema_registry import Schema, SchemaRegistryClient  # noqa: E402
from confluent_kafka.schema_registry.avro import AvroDeserializer  # noqa: E402
from confluent_kafka.serialization import MessageField, SerializationContext  # noqa: E402

V1_PLUS = {**V1, "fields": V1["fields"] + [
    {"name": "email", "type": ["null", "string"], "default": None}]}


@pytest.fixture(scope="module")
def registry():
    server = RegistryServer().start()
    yield server
    server.stop()


def test_batch_read_of_an_evolved_topic_with_permissive_corrupt_rows(spark, mock_cluster,
                                                                     registry, topic_name):
    create_topic(mock_cluster, topic_name, 1)
    old = [{"id": i, "name": f"n{i}", "score": i} for i in range(4)]
    new = [{"id": 100 + i, "score": 2**33 + i, "tier": "PRO", "tags": ["x"] * i,
            "email": f"{i}@e" if i % 2 else None} for i in range(4)]
    written = produce(mock_cluster.bootstrap, topic_name, registry.url, V1, old)
    written += produce(mock_cluster.bootstrap, topic_name, registry.url, V2, [None] + new)
    p = confluent_kafka.Producer({"bootstrap.servers": mock_cluster.bootstrap})
    p.produce(topic_name, value=b"\x00\x00\x00\x00\x02\xff", partition=0)  # cut short
    assert p.flush(10) == 0

    df = (spark.read.format("pykafka").option("kafka.bootstrap.servers",
                                              mock_cluster.bootstrap)
          .option("subscribe", topic_name).option("valueFormat", "avro")
          .option("schema.registry.url", registry.url).option("mode", "PERMISSIVE")
          .option("includeHeaders", "true").load())
    assert df.schema.simpleString() == (
        "struct<key:binary,value:struct<id:bigint,score:bigint,tier:string,"
        "tags:array<string>,email:string>,topic:string,partition:int,offset:bigint,"
        "timestamp:timestamp,timestampType:int,headers:array<struct<key:string,"
        "value:binary>>,valueSchemaId:int,valueCorruptRecord:binary>")
    rows = df.orderBy("offset").collect()
    de = AvroDeserializer(SchemaRegistryClient({"url": registry.url}),
                          Schema(json.dumps(V2), "AVRO"))
    ctx = SerializationContext(topic_name, MessageField.VALUE)
    want = [de(v, ctx) if v is not None else None for v, _ in written] + [None]
    got = [r.value.asDict(recursive=True) if r.value is not None else None for r in rows]
    assert got == [dict(w, tags=list(w["tags"])) if w else None for w in want]
    assert [r.valueSchemaId for r in rows] == [1] * 4 + [None] + [2] * 5
    assert [r.valueCorruptRecord for r in rows] == [None] * 9 + [b"\x00\x00\x00\x00\x02\xff"]

    failing = (spark.read.format("pykafka").option("kafka.bootstrap.servers",
                                                   mock_cluster.bootstrap)
               .option("subscribe", topic_name).option("valueFormat", "avro")
               .option("schema.registry.url", registry.url).load())
    with pytest.raises(Exception, match=f"topic '{topic_name}' partition 0 offset 9, "
                                        "schema id 2"):
        failing.collect()


def _wait_for(query, count: int, table: str, spark, timeout: float = 120) -> list:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if query.exception():
            raise query.exception()
        rows = spark.table(table).collect()
        if len(rows) >= count:
            return rows
        time.sleep(0.3)
    raise AssertionError(f"{table}: fewer than {count} rows after {timeout}s")


def test_stream_meets_a_new_schema_id_and_does_not_call_the_registry_per_batch(
        spark, mock_cluster, registry, topic_name, tmp_path):
    create_topic(mock_cluster, topic_name, 1)
    url = registry.url
    produce(mock_cluster.bootstrap, topic_name, url, V1,
            [{"id": i, "name": "a", "score": i} for i in range(3)])
    table = "registry_stream_" + topic_name.replace("-", "_")[-20:]
    query = (spark.readStream.format("pykafka")
             .option("kafka.bootstrap.servers", mock_cluster.bootstrap)
             .option("subscribe", topic_name).option("startingOffsets", "earliest")
             .option("valueFormat", "avro").option("schema.registry.url", url).load()
             .selectExpr("offset", "value.id AS id", "value.name AS name", "valueSchemaId")
             .writeStream.format("memory").queryName(table)
             .option("checkpointLocation", str(tmp_path / "cp"))
             .trigger(processingTime="300 milliseconds").start())
    try:
        _wait_for(query, 3, table, spark)
        registry.reset_calls()
        for round_ in range(3):   # more micro-batches, a seen id: no registry call
            produce(mock_cluster.bootstrap, topic_name, url, V1,
                    [{"id": 10 + round_, "name": "b", "score": 0}])
            _wait_for(query, 4 + round_, table, spark)
        assert [c for c in registry.calls() if not c[1].startswith("/associations")
                and not c[0] == "POST"] == []
        # A producer evolves the schema mid-stream: an id the plan did not have.
        for round_ in range(6):
            produce(mock_cluster.bootstrap, topic_name, url, V1_PLUS,
                    [{"id": 20 + round_, "name": "c", "score": 1, "email": "e"}])
            rows = _wait_for(query, 7 + round_, table, spark)
        old_id, new_id = registry.subjects[f"{topic_name}-value"]
        lookups = [c for c in registry.calls() if c[1].startswith("/schemas/ids/")]
        # Once per Python worker that met it, not per micro-batch (6 of them): a session of
        # local[2] keeps up to four idle Python workers (a task's reader and writer run in
        # two), and Spark hands any of them the next task.
        assert 1 <= len(lookups) <= 4 and set(lookups) == {("GET", f"/schemas/ids/{new_id}")}
        a, b = old_id, new_id
        assert sorted((r.offset, r.id, r.name, r.valueSchemaId) for r in rows) == [
            (0, 0, "a", a), (1, 1, "a", a), (2, 2, "a", a), (3, 10, "b", a), (4, 11, "b", a),
            (5, 12, "b", a)] + [(6 + i, 20 + i, "c", b) for i in range(6)]
    finally:
        query.stop()


def _consume(bootstrap, topic, count, timeout=30.0):
    c = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": topic,
                                  "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    got, deadline = [], time.monotonic() + timeout
    try:
        while len(got) < count and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and not m.error():
                got.append(m)
    finally:
        c.close()
    return sorted(got, key=lambda m: m.offset())


def test_writer_frames_avro_as_confluent_s_deserializer_reads_it(spark, mock_cluster,
                                                                  registry, topic_name):
    import datetime as dt
    create_topic(mock_cluster, topic_name, 1)
    df = spark.createDataFrame(
        [(1, "a", [1.5], {"k": 1}, dt.date(2024, 2, 29),
          dt.datetime(2024, 1, 2, 3, 4, 5, 123456)),
         (2, None, [], {}, None, None)],
        "id long, name string, xs array<double>, m map<string,int>, d date, ts timestamp",
    ).coalesce(1)  # one task: the rows reach the topic in this order
    out = df.selectExpr("CAST(id AS STRING) AS key",
                        "IF(id = 2, NULL, struct(id, name, xs, m, d, ts)) AS value")
    (out.write.format("pykafka").option("kafka.bootstrap.servers", mock_cluster.bootstrap)
     .option("topic", topic_name).option("valueFormat", "avro")
     .option("schema.registry.url", registry.url).option("auto.register.schemas", "true")
     .mode("append").save())
    subject = f"{topic_name}-value"
    assert len(registry.subjects[subject]) == 1
    schema_id = registry.subjects[subject][0]
    registered = json.loads(registry.schemas[schema_id - 1]["schema"])
    assert registered[0]["name"] == "topLevelRecord" and registered[1] == "null"
    # A second write with the subject's latest schema (no registration): same id.
    (out.limit(1).write.format("pykafka")
     .option("kafka.bootstrap.servers", mock_cluster.bootstrap).option("topic", topic_name)
     .option("valueFormat", "avro").option("schema.registry.url", registry.url)
     .mode("append").save())
    messages = _consume(mock_cluster.bootstrap, topic_name, 3)
    de = AvroDeserializer(SchemaRegistryClient({"url": registry.url}))
    values = [de(m.value(), SerializationContext(topic_name, MessageField.VALUE))
              if m.value() is not None else None for m in messages]
    first = {"id": 1, "name": "a", "xs": [1.5], "m": {"k": 1}, "d": dt.date(2024, 2, 29),
             "ts": dt.datetime(2024, 1, 2, 3, 4, 5, 123456, tzinfo=dt.timezone.utc)}
    assert values == [first, None, first]
    assert messages[1].value() is None                     # a null value is a tombstone
    assert [m.value()[:5] for m in messages if m.value()] == \
        [b"\x00" + schema_id.to_bytes(4, "big")] * 2
    # And this connector's reader reads back what it wrote.
    back = (spark.read.format("pykafka").option("kafka.bootstrap.servers",
                                                mock_cluster.bootstrap)
            .option("subscribe", topic_name).option("valueFormat", "avro")
            .option("schema.registry.url", registry.url).load().orderBy("offset").collect())
    assert [r.value and r.value.asDict(recursive=True)["m"] for r in back] == \
        [{"k": 1}, None, {"k": 1}]
