"""The ``avro`` section of ``make bench``: Schema Registry Avro values decoded into typed
columns, three ways, each building the same Arrow column (the value struct of Spark's
``from_avro`` mapping):

- ``spark.read.format("pykafka")`` with ``valueFormat=avro`` into the ``noop`` sink
  (``local[cores]``);
- confluent-kafka's ``Consumer`` (the read peer's settings from peers.py) with its
  ``AvroDeserializer`` (fastavro inside), dicts into ``pa.array`` of the struct type, in
  one process;
- the usual workaround in Spark: ``spark.read`` of the binary value and a Python UDF
  (Arrow-optimized) that strips the 5-byte header and decodes with fastavro per datum.

The data: a flat 5-field record (long, string, double, boolean, timestamp-millis),
written by confluent-kafka's ``AvroSerializer`` to the test registry server
(tests/schema_registry_server.py), over ``partitions`` partitions of a Tansu topic.
"""

from __future__ import annotations

import io
import json
import statistics
import time

import pyarrow as pa

RECORD = {"type": "record", "name": "Reading", "namespace": "bench", "fields": [
    {"name": "id", "type": "long"},
    {"name": "sensor", "type": "string"},
    {"name": "value", "type": "double"},
    {"name": "ok", "type": "boolean"},
    {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}}]}
ARROW = pa.struct([("id", pa.int64()), ("sensor", pa.string()), ("value", pa.float64()),
                   ("ok", pa.bool_()), ("at", pa.timestamp("us", tz="UTC"))])


def produce_avro(bootstrap: str, registry_url: str, topic: str, records: int,
                 partitions: int) -> None:
    import datetime as dt

    import confluent_kafka
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    from protocol.cluster import KafkaClient
    with KafkaClient(bootstrap_servers=bootstrap) as client:
        client.create_topics({topic: partitions})
        client.wait_for_topics([topic])
    ser = AvroSerializer(SchemaRegistryClient({"url": registry_url}), json.dumps(RECORD))
    ctx = SerializationContext(topic, MessageField.VALUE)
    p = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 50,
                                  "batch.size": 1_000_000, "enable.idempotence": False})
    base = dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc)
    for i in range(records - partitions):
        value = ser({"id": i, "sensor": f"sensor-{i % 1000}", "value": i * 0.5,
                     "ok": bool(i & 1), "at": base + dt.timedelta(milliseconds=i)}, ctx)
        while True:
            try:
                p.produce(topic, value=value, partition=i % partitions)
                break
            except BufferError:
                p.poll(0.1)
    assert p.flush(60) == 0
    for part in range(partitions):  # Tansu: a one-record batch ends each partition
        p.produce(topic, value=value, partition=part)
        assert p.flush(10) == 0


def read_pykafka(spark, bootstrap, registry_url, topic) -> float:
    t = time.perf_counter()
    (spark.read.format("pykafka").option("kafka.bootstrap.servers", bootstrap)
     .option("subscribe", topic).option("valueFormat", "avro")
     .option("schema.registry.url", registry_url).load()
     .write.format("noop").mode("overwrite").save())
    return time.perf_counter() - t


def read_fastavro_udf(spark, bootstrap, topic) -> float:
    from pyspark.sql.functions import col, udf
    from pyspark.sql.types import (BooleanType, DoubleType, LongType, StringType,
                                   StructField, StructType, TimestampType)
    schema_json = json.dumps(RECORD)
    out = StructType([StructField("id", LongType()), StructField("sensor", StringType()),
                      StructField("value", DoubleType()), StructField("ok", BooleanType()),
                      StructField("at", TimestampType())])

    @udf(returnType=out, useArrow=True)
    def decode(value):
        import fastavro
        global _PARSED
        try:
            parsed = _PARSED
        except NameError:
            parsed = _PARSED = fastavro.parse_schema(json.loads(schema_json))
        if value is None:
            return None
        return fastavro.schemaless_reader(io.BytesIO(value[5:]), parsed, parsed)

    t = time.perf_counter()
    (spark.read.format("pykafka").option("kafka.bootstrap.servers", bootstrap)
     .option("subscribe", topic).load().select(decode(col("value")).alias("value"))
     .write.format("noop").mode("overwrite").save())
    return time.perf_counter() - t


def read_confluent(bootstrap, registry_url, topic, records, partitions) -> float:
    """confluent-kafka's Consumer with the read peer's tuned settings (peers.py: assigned
    partitions, no group, deep prefetch) and its AvroDeserializer, rows -> Arrow."""
    import confluent_kafka
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroDeserializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    from peers import CONFLUENT_CONSUMER, call_setting, config
    de = AvroDeserializer(SchemaRegistryClient({"url": registry_url}))
    ctx = SerializationContext(topic, MessageField.VALUE)
    num = call_setting(CONFLUENT_CONSUMER, "num_messages", None)
    c = confluent_kafka.Consumer({"bootstrap.servers": bootstrap,
                                  **config(CONFLUENT_CONSUMER, None)})
    got, chunks = 0, []
    try:
        t = time.perf_counter()
        c.assign([confluent_kafka.TopicPartition(topic, p, 0) for p in range(partitions)])
        while got < records:
            batch = c.consume(min(num, records - got), 1.0)
            if any(m.error() for m in batch):
                raise RuntimeError(str(next(m.error() for m in batch if m.error())))
            got += len(batch)
            if batch:
                chunks.append(pa.array([de(m.value(), ctx) for m in batch], ARROW))
        seconds = time.perf_counter() - t
    finally:
        c.close()
    assert sum(len(a) for a in chunks) == records
    return seconds


def run_avro(spark, bootstrap: str, records: int, rounds: int, partitions: int,
             log) -> list[str]:
    """Produce the data, time each contender ``rounds`` times (interleaved), and return
    the Markdown lines of the section."""
    import os
    import sys
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, os.path.dirname(os.path.dirname(here)))
    from tests.schema_registry_server import RegistryServer
    registry = RegistryServer().start()
    topic = f"bench-avro-{records}"
    try:
        t = time.perf_counter()
        produce_avro(bootstrap, registry.url, topic, records, partitions)
        log(f"produced {records:,} Avro records in {time.perf_counter() - t:.1f} s")
        seconds: dict[str, list[float]] = {"pykafka": [], "confluent": [], "udf": []}
        read_pykafka(spark, bootstrap, registry.url, topic)  # warm the workers
        for r in range(rounds):
            for name, fn in (("pykafka", lambda: read_pykafka(spark, bootstrap,
                                                              registry.url, topic)),
                             ("confluent", lambda: read_confluent(bootstrap, registry.url,
                                                                  topic, records,
                                                                  partitions)),
                             ("udf", lambda: read_fastavro_udf(spark, bootstrap, topic))):
                s = fn()
                seconds[name].append(s)
                log(f"  avro {name:<10} round {r + 1}: {s:6.2f} s  "
                    f"{records / s:12,.0f} records/s")
    finally:
        registry.stop()

    def rate(name):
        return statistics.median(records / s for s in seconds[name])

    def vs(name):
        return statistics.median(b / a for a, b in zip(seconds["pykafka"], seconds[name]))
    cores = getattr(spark.sparkContext, "defaultParallelism", 2)
    return [
        "",
        "## Schema Registry Avro values (valueFormat=avro)",
        "",
        f"{records:,} values of a flat 5-field Avro record (long, string, double, boolean, "
        f"timestamp-millis; ~40 bytes with the 5-byte Confluent header) in {partitions} "
        "partitions, written by confluent-kafka's AvroSerializer; each contender builds the "
        "value struct column. Medians over the rounds; \"x pykafka\" is pykafka's rate over "
        "the contender's, median of per-round ratios.",
        "",
        "| Case | Records/s | pykafka x |",
        "|---|---:|---:|",
        f"| spark.read valueFormat=avro, noop sink, local[{cores}] | "
        f"{rate('pykafka'):,.0f} | 1.00 |",
        f"| confluent-kafka Consumer + AvroDeserializer -> Arrow, 1 process | "
        f"{rate('confluent'):,.0f} | {vs('confluent'):.2f} |",
        f"| spark.read + fastavro in an Arrow Python UDF, local[{cores}] | "
        f"{rate('udf'):,.0f} | {vs('udf'):.2f} |",
    ]
