"""The ``avro`` section of ``make bench``: Schema Registry Avro values decoded into typed
columns, several ways, each ending with the same one column (the value struct of Spark's
``from_avro`` mapping) written to the ``noop`` sink, or built in one process:

- ``spark.read.format("pykafka")`` with ``valueFormat=avro``, ``.select("value")``;
- the same read with ``valueFormat=binary`` (no decoding): our reader's own floor;
- Spark's floor for any Python data source: ``benchfloor`` (floor_source.py) yielding ready
  Arrow batches of the very columns of the Avro read, no Kafka, no decoding;
- confluent-kafka's ``Consumer`` (the read peer's settings from peers.py) with its
  ``AvroDeserializer`` (fastavro inside), dicts into ``pa.array`` of the struct type, in
  one process;
- the usual workaround in Spark: ``spark.read`` of the binary value and a Python UDF that
  strips the 5-byte header and decodes with fastavro per datum: ``udf(useArrow=True)``
  returning dicts, and ``arrow_udf`` (Spark 4.1+) building the struct with ``pa.array``.

Every Spark contender selects the one column ``value``: same rows, same column, same
action. Each round also counts the CPU seconds of every process (driver, Spark's JVM, its
Python workers, the broker), which a busy machine inflates far less than wall time; and a
read of one value per partition gives the fixed cost of a query (planning, task launch),
which every Spark figure includes.

The data: a flat 5-field record (long, string, double, boolean, timestamp-millis),
written by confluent-kafka's ``AvroSerializer`` to the test registry server
(tests/helpers/schema_registry_server.py), over ``partitions`` partitions of a Tansu topic.
"""

from __future__ import annotations

import io
import json
import statistics
import time

import pyarrow as pa

RECORD = {
    "type": "record",
    "name": "Reading",
    "namespace": "bench",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "sensor", "type": "string"},
        {"name": "value", "type": "double"},
        {"name": "ok", "type": "boolean"},
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    ],
}
ARROW = pa.struct(
    [
        ("id", pa.int64()),
        ("sensor", pa.string()),
        ("value", pa.float64()),
        ("ok", pa.bool_()),
        ("at", pa.timestamp("us", tz="UTC")),
    ]
)


def produce_avro(
    bootstrap: str, registry_url: str, topic: str, records: int, partitions: int
) -> None:
    import datetime as dt

    import confluent_kafka
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    from protocol.client.cluster import KafkaClient

    with KafkaClient(bootstrap_servers=bootstrap) as client:
        client.create_topics({topic: partitions})
        client.wait_for_topics([topic])
    ser = AvroSerializer(SchemaRegistryClient({"url": registry_url}), json.dumps(RECORD))
    ctx = SerializationContext(topic, MessageField.VALUE)
    p = confluent_kafka.Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 50,
            "batch.size": 1_000_000,
            "enable.idempotence": False,
        }
    )
    base = dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc)
    for i in range(records - partitions):
        value = ser(
            {
                "id": i,
                "sensor": f"sensor-{i % 1000}",
                "value": i * 0.5,
                "ok": bool(i & 1),
                "at": base + dt.timedelta(milliseconds=i),
            },
            ctx,
        )
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


# The same five fields for the Protobuf and JSON Schema cases of the ``jvm`` section (the
# timestamp as a long of milliseconds: neither format has Avro's logical type)
PROTO = """syntax = "proto3";
package bench;
message Reading { int64 id = 1; string sensor = 2; double value = 3; bool ok = 4; int64 at = 5; }
"""
PROTO_MESSAGE = "bench.Reading"
JSON_SCHEMA = {
    "type": "object",
    "properties": {
        "id": {"type": "integer"},
        "sensor": {"type": "string"},
        "value": {"type": "number"},
        "ok": {"type": "boolean"},
        "at": {"type": "integer"},
    },
}
#: the schema given to ``from_json``: what valueFormat=json maps JSON_SCHEMA to
JSON_DDL = "id BIGINT, sensor STRING, value DOUBLE, ok BOOLEAN, at BIGINT"


def proto_descriptor_file(folder: str) -> str:
    """``bench.desc``: PROTO compiled by protoc (grpcio-tools) into the descriptor set
    ``from_protobuf`` reads."""
    import importlib.resources
    import os

    from grpc_tools import protoc

    with open(os.path.join(folder, "bench.proto"), "w") as f:
        f.write(PROTO)
    out = os.path.join(folder, "bench.desc")
    include = str(importlib.resources.files("grpc_tools") / "_proto")
    argv = ["protoc", f"-I{folder}", f"-I{include}", "--include_imports"]
    if protoc.main([*argv, f"--descriptor_set_out={out}", "bench.proto"]) != 0:
        raise RuntimeError("protoc could not compile the bench's .proto")
    return out


def produce_registry(
    bootstrap: str, registry_url: str, topic: str, records: int, partitions: int, fmt: str
) -> None:
    """``records`` rows of the Avro case's values as Protobuf (``fmt="protobuf"``) or JSON
    (``"json"``), framed as Confluent's serializers frame them (magic 0, the schema id the
    registry gave, and for Protobuf the message index 0)."""
    import struct

    import confluent_kafka
    from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
    from google.protobuf import message_factory

    from kafka_common.protobuf import message_descriptor
    from protocol.client.cluster import KafkaClient

    with KafkaClient(bootstrap_servers=bootstrap) as client:
        client.create_topics({topic: partitions})
        client.wait_for_topics([topic])
    text, kind = (PROTO, "PROTOBUF") if fmt == "protobuf" else (json.dumps(JSON_SCHEMA), "JSON")
    schema_id = SchemaRegistryClient({"url": registry_url}).register_schema(
        f"{topic}-value", Schema(text, kind)
    )
    prefix = struct.pack(">bI", 0, schema_id) + (b"\x00" if fmt == "protobuf" else b"")
    make = message_factory.GetMessageClass(message_descriptor(PROTO, ()))
    p = confluent_kafka.Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 50, "batch.size": 1_000_000}
    )
    base_ms = 1_704_067_200_000  # 2024-01-01, as the Avro case
    for i in range(records):
        row = {"id": i, "sensor": f"sensor-{i % 1000}", "value": i * 0.5, "ok": bool(i & 1)}
        row["at"] = base_ms + i
        payload = (
            make(**row).SerializeToString()
            if fmt == "protobuf"
            else json.dumps(row, separators=(",", ":")).encode()
        )
        while True:
            try:
                p.produce(topic, value=prefix + payload, partition=i % partitions)
                break
            except BufferError:
                p.poll(0.1)
    assert p.flush(60) == 0


def _kafka(spark, bootstrap, topic, ends: dict | None, **options):
    reader = (
        spark.read.format("pykafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
    )
    if ends is not None:
        reader = reader.option("endingOffsets", json.dumps({topic: ends}))
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


def _noop(make_df) -> float:
    """Seconds to define the DataFrame (``load()``, where the reader schema is fetched)
    and write it to ``noop``."""
    t = time.perf_counter()
    make_df().write.format("noop").mode("overwrite").save()
    return time.perf_counter() - t


def read_pykafka(spark, bootstrap, registry_url, topic, ends=None) -> float:
    return _noop(
        lambda: _kafka(
            spark,
            bootstrap,
            topic,
            ends,
            valueFormat="avro",
            **{"schema.registry.url": registry_url},
        ).select("value")
    )


def read_binary(spark, bootstrap, topic, ends=None) -> float:
    """The same read with the value left as bytes: what our reader costs through Spark
    with nothing to decode."""
    return _noop(lambda: _kafka(spark, bootstrap, topic, ends).select("value"))


def read_floor(spark, records: int, partitions: int) -> float:
    """Spark's own cost of a Python data source that yields ready Arrow batches of the
    Avro read's columns (floor_source.py, ``shape=avro``): no Kafka, no decoding."""
    return _noop(
        lambda: (
            spark.read.format("benchfloor")
            .option("shape", "avro")
            .option("rows", records)
            .option("partitions", partitions)
            .load()
            .select("value")
        )
    )


def _out_type():
    from pyspark.sql.types import (
        BooleanType,
        DoubleType,
        LongType,
        StringType,
        StructField,
        StructType,
        TimestampType,
    )

    return StructType(
        [
            StructField("id", LongType()),
            StructField("sensor", StringType()),
            StructField("value", DoubleType()),
            StructField("ok", BooleanType()),
            StructField("at", TimestampType()),
        ]
    )


def read_fastavro_udf(spark, bootstrap, topic, ends=None) -> float:
    from pyspark.sql.functions import col, udf

    schema_json = json.dumps(RECORD)
    out = _out_type()

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

    return _noop(
        lambda: _kafka(spark, bootstrap, topic, ends).select(decode(col("value")).alias("value"))
    )


def read_fastavro_arrow_udf(spark, bootstrap, topic, ends=None) -> float:
    """The workaround as an ``arrow_udf`` (Spark 4.1+): fastavro per datum, the dicts
    into ``pa.array`` of the struct type (Arrow's C++ conversion, not PySpark's per-row
    one)."""
    from pyspark.sql.functions import arrow_udf, col

    schema_json = json.dumps(RECORD)

    @arrow_udf(_out_type())
    def decode(values):
        import fastavro

        global _PARSED_A
        try:
            parsed = _PARSED_A
        except NameError:
            parsed = _PARSED_A = fastavro.parse_schema(json.loads(schema_json))
        read = fastavro.schemaless_reader
        return pa.array(
            [
                None if v is None else read(io.BytesIO(v[5:]), parsed, parsed)
                for v in values.to_pylist()
            ],
            ARROW,
        )

    return _noop(
        lambda: _kafka(spark, bootstrap, topic, ends).select(decode(col("value")).alias("value"))
    )


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
    c = confluent_kafka.Consumer(
        {"bootstrap.servers": bootstrap, **config(CONFLUENT_CONSUMER, None)}
    )
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


#: (key, label) of the contenders, in the order of the table
CASES = (
    ("pykafka", "spark.read valueFormat=avro, noop sink, local[{cores}]"),
    ("binary", "spark.read valueFormat=binary (no decoding), noop sink, local[{cores}]"),
    (
        "floor",
        "Spark floor: Python source of ready Arrow batches of the same columns, "
        "no Kafka, local[{cores}]",
    ),
    ("confluent", "confluent-kafka Consumer + AvroDeserializer -> Arrow, 1 process"),
    ("udf", "spark.read + fastavro in udf(useArrow=True), local[{cores}]"),
    ("arrow_udf", "spark.read + fastavro in arrow_udf (pa.array), local[{cores}]"),
)
#: the contenders whose fixed cost (one value per partition) is measured
FIXED = ("pykafka", "floor", "udf")


def run_avro(spark, bootstrap: str, records: int, rounds: int, partitions: int, log) -> list[str]:
    """Produce the data, time each contender ``rounds`` times (interleaved), and return
    the Markdown lines of the section."""
    import os
    import sys

    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, os.path.dirname(os.path.dirname(here)))
    from spark_cases import cpu_seconds, cpu_snapshot
    from tests.helpers.schema_registry_server import RegistryServer

    registry = RegistryServer().start()
    topic = f"bench-avro-{records}"
    one = {str(p): 1 for p in range(partitions)}  # one value per partition
    url = registry.url
    runs = {
        "pykafka": lambda ends=None: read_pykafka(spark, bootstrap, url, topic, ends),
        "binary": lambda ends=None: read_binary(spark, bootstrap, topic, ends),
        "floor": lambda ends=None: read_floor(
            spark, records if ends is None else partitions, partitions
        ),
        "confluent": lambda: read_confluent(bootstrap, url, topic, records, partitions),
        "udf": lambda ends=None: read_fastavro_udf(spark, bootstrap, topic, ends),
        "arrow_udf": lambda ends=None: read_fastavro_arrow_udf(spark, bootstrap, topic, ends),
    }
    seconds: dict[str, list[float]] = {name: [] for name, _ in CASES}
    cpu: dict[str, list[float]] = {name: [] for name, _ in CASES}
    fixed: dict[str, list[float]] = {name: [] for name in FIXED}
    fixed_cpu: dict[str, list[float]] = {name: [] for name in FIXED}
    try:
        t = time.perf_counter()
        produce_avro(bootstrap, url, topic, records, partitions)
        log(f"produced {records:,} Avro records in {time.perf_counter() - t:.1f} s")
        for name in ("pykafka", "binary", "floor", "udf", "arrow_udf"):
            runs[name]()  # warm the workers
        for r in range(rounds):
            for name, _ in CASES:
                before = cpu_snapshot()
                s = runs[name]()
                used = sum(cpu_seconds(before, cpu_snapshot()).values())
                seconds[name].append(s)
                cpu[name].append(used)
                log(
                    f"  avro {name:<10} round {r + 1}: {s:6.2f} s  "
                    f"{records / s:12,.0f} records/s  {used:5.2f} CPU s  "
                    f"load {os.getloadavg()[0]:.1f}"
                )
            for name in FIXED:
                before = cpu_snapshot()
                fixed[name].append(runs[name](one))
                fixed_cpu[name].append(sum(cpu_seconds(before, cpu_snapshot()).values()))
                log(
                    f"  avro {name:<10} round {r + 1}: {fixed[name][-1]:6.2f} s  "
                    f"{fixed_cpu[name][-1]:5.2f} CPU s for {partitions} values"
                )
    finally:
        registry.stop()

    def rate(name):
        return statistics.median(records / s for s in seconds[name])

    def vs(name):
        return statistics.median(b / a for a, b in zip(seconds["pykafka"], seconds[name]))

    def cpu_per_m(name):
        return statistics.median(cpu[name]) * 1e6 / records

    def past_fixed(name):
        """Records/s once the fixed cost of a query is paid (median per round)."""
        return statistics.median(
            records / max(s - f, 1e-3) for s, f in zip(seconds[name], fixed[name])
        )

    def cpu_past_fixed(name):
        """CPU s per M records once the fixed cost's CPU is paid (medians)."""
        return (
            max(statistics.median(cpu[name]) - statistics.median(fixed_cpu[name]), 1e-3)
            * 1e6
            / records
        )

    cores = getattr(spark.sparkContext, "defaultParallelism", 2)
    rows = [
        f"| {label.format(cores=cores)} | {rate(name):,.0f} | {vs(name):.2f} | "
        f"{cpu_per_m(name):.2f} |"
        for name, label in CASES
    ]
    floor_vs_udf = statistics.median(u / f for f, u in zip(seconds["floor"], seconds["udf"]))
    floor_vs_arrow = statistics.median(
        u / f for f, u in zip(seconds["floor"], seconds["arrow_udf"])
    )
    fixed_ours, fixed_udf = (statistics.median(fixed[n]) for n in ("pykafka", "udf"))
    marginal = {n: cpu_past_fixed(n) for n in FIXED}
    return [
        "",
        "## Schema Registry Avro values (valueFormat=avro)",
        "",
        f"{records:,} values of a flat 5-field Avro record (long, string, double, boolean, "
        f"timestamp-millis; ~40 bytes with the 5-byte Confluent header) in {partitions} "
        "partitions, written by confluent-kafka's AvroSerializer; each contender builds the "
        "value struct column (Spark's select the one column `value`, into the noop sink). "
        "Medians over the rounds; \"pykafka x\" is pykafka's rate over the contender's, "
        "median of per-round ratios; CPU s per M records counts every process (driver, "
        "Spark's JVM and Python workers, the broker).",
        "",
        "| Case | Records/s | pykafka x | CPU s per M records |",
        "|---|---:|---:|---:|",
        *rows,
        "",
        f"The Spark floor row is what any Python data source costs Spark for these columns "
        f"with nothing to fetch or decode: it runs {floor_vs_udf:.2f}x the udf route and "
        f"{floor_vs_arrow:.2f}x the arrow_udf route, the most a Python source can reach "
        f"against them. A read of one value per partition takes {fixed_ours:.2f} s with "
        f"valueFormat=avro and {fixed_udf:.2f} s with the udf (the fixed cost of a query: "
        f"planning, the registry, task launch), included above; past it, pykafka reads "
        f"{past_fixed('pykafka'):,.0f} values/s and the udf route "
        f"{past_fixed('udf'):,.0f} ({past_fixed('pykafka') / past_fixed('udf'):.2f}x; "
        f"noisy: the difference of two timings). In CPU s per M records past the fixed "
        f"cost's CPU (steadier on a busy machine): pykafka {marginal['pykafka']:.2f}, "
        f"the floor {marginal['floor']:.2f}, the udf route {marginal['udf']:.2f}; the udf "
        f"route takes {marginal['udf'] / marginal['pykafka']:.2f}x pykafka's CPU and "
        f"{marginal['udf'] / marginal['floor']:.2f}x the floor's.",
    ]
