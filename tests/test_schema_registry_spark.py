"""``valueFormat=avro`` through Spark: a batch read of a topic whose producers evolved the
schema, and a stream that meets a new schema id mid-way without calling the registry per
micro-batch. Values are written by confluent-kafka's AvroSerializer talking over HTTP to
the test registry (tests/helpers/schema_registry_server.py, standing in for Confluent's); the
referee is confluent-kafka's AvroDeserializer. One shared SparkSession (conftest)."""

from __future__ import annotations

import json
import time

import confluent_kafka
import pytest

from .helpers.broker_setup import create_topic
from .helpers.schema_registry import V1, V2, produce
from .helpers.waiting import wait_until

pytestmark = pytest.mark.spark

from confluent_kafka.schema_registry import Schema, SchemaRegistryClient  # noqa: E402
from confluent_kafka.schema_registry.avro import AvroDeserializer  # noqa: E402
from confluent_kafka.serialization import MessageField, SerializationContext  # noqa: E402

V1_PLUS = {
    **V1,
    "fields": V1["fields"] + [{"name": "email", "type": ["null", "string"], "default": None}],
}


def test_batch_read_of_an_evolved_topic_with_permissive_corrupt_rows(
    spark, mock_cluster, registry, topic_name
):
    create_topic(mock_cluster, topic_name, 1)
    old = [{"id": i, "name": f"n{i}", "score": i} for i in range(4)]
    new = [
        {
            "id": 100 + i,
            "score": 2**33 + i,
            "tier": "PRO",
            "tags": ["x"] * i,
            "email": f"{i}@e" if i % 2 else None,
        }
        for i in range(4)
    ]
    written = produce(mock_cluster.bootstrap, topic_name, registry.url, V1, old)
    written += produce(mock_cluster.bootstrap, topic_name, registry.url, V2, [None] + new)
    p = confluent_kafka.Producer({"bootstrap.servers": mock_cluster.bootstrap})
    p.produce(topic_name, value=b"\x00\x00\x00\x00\x02\xff", partition=0)  # cut short
    assert p.flush(10) == 0

    df = (
        spark.read.format("pykafka")
        .option("kafka.bootstrap.servers", mock_cluster.bootstrap)
        .option("subscribe", topic_name)
        .option("valueFormat", "avro")
        .option("schema.registry.url", registry.url)
        .option("mode", "PERMISSIVE")
        .option("includeHeaders", "true")
        .load()
    )
    assert df.schema.simpleString() == (
        "struct<key:binary,value:struct<id:bigint,score:bigint,tier:string,"
        "tags:array<string>,email:string>,topic:string,partition:int,offset:bigint,"
        "timestamp:timestamp,timestampType:int,headers:array<struct<key:string,"
        "value:binary>>,valueSchemaId:int,valueCorruptRecord:binary>"
    )
    rows = df.orderBy("offset").collect()
    de = AvroDeserializer(
        SchemaRegistryClient({"url": registry.url}), Schema(json.dumps(V2), "AVRO")
    )
    ctx = SerializationContext(topic_name, MessageField.VALUE)
    want = [de(v, ctx) if v is not None else None for v, _ in written] + [None]
    got = [r.value.asDict(recursive=True) if r.value is not None else None for r in rows]
    assert got == [dict(w, tags=list(w["tags"])) if w else None for w in want]
    assert [r.valueSchemaId for r in rows] == [1] * 4 + [None] + [2] * 5
    assert [r.valueCorruptRecord for r in rows] == [None] * 9 + [b"\x00\x00\x00\x00\x02\xff"]

    failing = (
        spark.read.format("pykafka")
        .option("kafka.bootstrap.servers", mock_cluster.bootstrap)
        .option("subscribe", topic_name)
        .option("valueFormat", "avro")
        .option("schema.registry.url", registry.url)
        .load()
    )
    with pytest.raises(Exception, match=f"topic '{topic_name}' partition 0 offset 9, schema id 2"):
        failing.collect()


def _wait_for(query, count: int, table: str, spark, timeout: float = 120) -> list:
    def enough_rows():
        if query.exception():
            raise query.exception()
        rows = spark.table(table).collect()
        return rows if len(rows) >= count else None

    return wait_until(enough_rows, timeout, f"{table}: {count} rows", interval=0.3)


def test_stream_meets_a_new_schema_id_and_does_not_call_the_registry_per_batch(
    spark, mock_cluster, registry, topic_name, tmp_path
):
    create_topic(mock_cluster, topic_name, 1)
    url = registry.url
    produce(
        mock_cluster.bootstrap,
        topic_name,
        url,
        V1,
        [{"id": i, "name": "a", "score": i} for i in range(3)],
    )
    table = "registry_stream_" + topic_name.replace("-", "_")[-20:]
    query = (
        spark.readStream.format("pykafka")
        .option("kafka.bootstrap.servers", mock_cluster.bootstrap)
        .option("subscribe", topic_name)
        .option("startingOffsets", "earliest")
        .option("valueFormat", "avro")
        .option("schema.registry.url", url)
        .load()
        .selectExpr("offset", "value.id AS id", "value.name AS name", "valueSchemaId")
        .writeStream.format("memory")
        .queryName(table)
        .option("checkpointLocation", str(tmp_path / "cp"))
        .trigger(processingTime="300 milliseconds")
        .start()
    )
    try:
        _wait_for(query, 3, table, spark)
        registry.reset_calls()
        for round_ in range(3):  # more micro-batches, a seen id: no registry call
            produce(
                mock_cluster.bootstrap,
                topic_name,
                url,
                V1,
                [{"id": 10 + round_, "name": "b", "score": 0}],
            )
            _wait_for(query, 4 + round_, table, spark)
        assert [
            c
            for c in registry.calls()
            if not c[1].startswith("/associations") and not c[0] == "POST"
        ] == []
        # A producer evolves the schema mid-stream: an id the plan did not have.
        for round_ in range(6):
            produce(
                mock_cluster.bootstrap,
                topic_name,
                url,
                V1_PLUS,
                [{"id": 20 + round_, "name": "c", "score": 1, "email": "e"}],
            )
            rows = _wait_for(query, 7 + round_, table, spark)
        old_id, new_id = registry.subjects[f"{topic_name}-value"]
        lookups = [c for c in registry.calls() if c[1].startswith("/schemas/ids/")]
        # Once per Python worker that met it, not per micro-batch (6 of them): a session of
        # local[2] keeps up to four idle Python workers (a task's reader and writer run in
        # two), and Spark hands any of them the next task.
        assert 1 <= len(lookups) <= 4 and set(lookups) == {("GET", f"/schemas/ids/{new_id}")}
        a, b = old_id, new_id
        assert sorted((r.offset, r.id, r.name, r.valueSchemaId) for r in rows) == [
            (0, 0, "a", a),
            (1, 1, "a", a),
            (2, 2, "a", a),
            (3, 10, "b", a),
            (4, 11, "b", a),
            (5, 12, "b", a),
        ] + [(6 + i, 20 + i, "c", b) for i in range(6)]
    finally:
        query.stop()


def _consume(bootstrap, topic, count, timeout=30.0):
    c = confluent_kafka.Consumer(
        {"bootstrap.servers": bootstrap, "group.id": topic, "auto.offset.reset": "earliest"}
    )
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


def test_writer_frames_avro_as_confluent_s_deserializer_reads_it(
    spark, mock_cluster, registry, topic_name
):
    import datetime as dt

    create_topic(mock_cluster, topic_name, 1)
    df = spark.createDataFrame(
        [
            (
                1,
                "a",
                [1.5],
                {"k": 1},
                dt.date(2024, 2, 29),
                dt.datetime(2024, 1, 2, 3, 4, 5, 123456),
            ),
            (2, None, [], {}, None, None),
        ],
        "id long, name string, xs array<double>, m map<string,int>, d date, ts timestamp",
    ).coalesce(1)  # one task: the rows reach the topic in this order
    out = df.selectExpr(
        "CAST(id AS STRING) AS key", "IF(id = 2, NULL, struct(id, name, xs, m, d, ts)) AS value"
    )
    (
        out.write.format("pykafka")
        .option("kafka.bootstrap.servers", mock_cluster.bootstrap)
        .option("topic", topic_name)
        .option("valueFormat", "avro")
        .option("schema.registry.url", registry.url)
        .option("auto.register.schemas", "true")
        .mode("append")
        .save()
    )
    subject = f"{topic_name}-value"
    assert len(registry.subjects[subject]) == 1
    schema_id = registry.subjects[subject][0]
    registered = json.loads(registry.schemas[schema_id - 1]["schema"])
    assert registered[0]["name"] == "topLevelRecord" and registered[1] == "null"
    # A second write with the subject's latest schema (no registration): same id.
    (
        out.limit(1)
        .write.format("pykafka")
        .option("kafka.bootstrap.servers", mock_cluster.bootstrap)
        .option("topic", topic_name)
        .option("valueFormat", "avro")
        .option("schema.registry.url", registry.url)
        .mode("append")
        .save()
    )
    messages = _consume(mock_cluster.bootstrap, topic_name, 3)
    de = AvroDeserializer(SchemaRegistryClient({"url": registry.url}))
    values = [
        de(m.value(), SerializationContext(topic_name, MessageField.VALUE))
        if m.value() is not None
        else None
        for m in messages
    ]
    first = {
        "id": 1,
        "name": "a",
        "xs": [1.5],
        "m": {"k": 1},
        "d": dt.date(2024, 2, 29),
        "ts": dt.datetime(2024, 1, 2, 3, 4, 5, 123456, tzinfo=dt.timezone.utc),
    }
    assert values == [first, None, first]
    assert messages[1].value() is None  # a null value is a tombstone
    assert [m.value()[:5] for m in messages if m.value()] == [
        b"\x00" + schema_id.to_bytes(4, "big")
    ] * 2
    # And this connector's reader reads back what it wrote.
    back = (
        spark.read.format("pykafka")
        .option("kafka.bootstrap.servers", mock_cluster.bootstrap)
        .option("subscribe", topic_name)
        .option("valueFormat", "avro")
        .option("schema.registry.url", registry.url)
        .load()
        .orderBy("offset")
        .collect()
    )
    assert [r.value and r.value.asDict(recursive=True)["m"] for r in back] == [
        {"k": 1},
        None,
        {"k": 1},
    ]


def test_protobuf_and_json_values_through_spark_read(
    spark, mock_cluster, registry, topic_name, tmp_path
):
    """A topic of Protobuf values (the .proto's second message, so a message index [1])
    and one of JSON Schema values, read by ``spark.read``; referees: confluent-kafka's
    ProtobufDeserializer and JSONDeserializer."""
    import datetime as dt
    import decimal

    from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
    from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer

    from .helpers.schema_formats import DDL, EVENTS, LOOSE, _pb2

    events = _pb2(tmp_path, EVENTS, "events")
    sr = SchemaRegistryClient({"url": registry.url})
    p = confluent_kafka.Producer({"bootstrap.servers": mock_cluster.bootstrap})

    def read(topic, **options):
        reader = (
            spark.read.format("pykafka")
            .option("kafka.bootstrap.servers", mock_cluster.bootstrap)
            .option("subscribe", topic)
            .option("schema.registry.url", registry.url)
        )
        for k, v in options.items():
            reader = reader.option(k, v)
        return reader.load().orderBy("offset")

    pb_topic = topic_name + "-pb"
    create_topic(mock_cluster, pb_topic, 1)
    ctx = SerializationContext(pb_topic, MessageField.VALUE)
    ser = ProtobufSerializer(events.Refund, sr, {"use.deprecated.format": False})
    refunds = [events.Refund(order=f"o{i}", cents=i * 100 - 150) for i in range(3)]
    refunds[1].reason.code, refunds[1].reason.level = "late", 3
    pb_written = [ser(r, ctx) for r in refunds]
    for value in pb_written[:2] + [None] + pb_written[2:]:
        p.produce(pb_topic, value=value, partition=0)

    json_topic = topic_name + "-json"
    create_topic(mock_cluster, json_topic, 1)
    jctx = SerializationContext(json_topic, MessageField.VALUE)
    jser = JSONSerializer(json.dumps(LOOSE), sr)
    docs = [
        {
            "id": 1,
            "name": "ann",
            "tags": ["a"],
            "price": 2.5,
            "day": "2024-02-29",
            "at": "2024-01-02T03:04:05Z",
            "attrs": {"k": 7},
            "where": {"lat": 1.5},
        },
        {"id": 2},
    ]
    json_written = [jser(d, jctx) for d in docs]
    for value in json_written:
        p.produce(json_topic, value=value, partition=0)
    assert p.flush(10) == 0

    df = read(pb_topic, valueFormat="protobuf", valueMessageName="events.Refund")
    assert df.schema.simpleString().startswith(
        "struct<key:binary,value:struct<order:string,cents:bigint,reason:struct<"
        "code:string,level:int>>,topic:string"
    )
    rows = df.collect()
    de = ProtobufDeserializer(events.Refund, {"use.deprecated.format": False})
    want = []
    for value in pb_written[:2] + [None] + pb_written[2:]:
        if value is None:
            want.append(None)
            continue
        back = de(value, ctx)
        want.append(
            {
                "order": back.order,
                "cents": back.cents or None,
                "reason": {"code": back.reason.code, "level": back.reason.level}
                if back.HasField("reason")
                else None,
            }
        )
    assert [r.value.asDict(recursive=True) if r.value else None for r in rows] == want
    pb_id = registry.subjects[f"{pb_topic}-value"][0]
    assert [r.valueSchemaId for r in rows] == [pb_id, pb_id, None, pb_id]

    # A flat message (scalar fields only) is decoded column by column in the workers
    flat_topic = topic_name + "-pb-flat"
    create_topic(mock_cluster, flat_topic, 1)
    fctx = SerializationContext(flat_topic, MessageField.VALUE)
    fser = ProtobufSerializer(events.Created, sr, {"use.deprecated.format": False})
    created = [events.Created(id=f"c{i}" * (i % 3), cents=(i - 20) * 7) for i in range(40)]
    for c in created:
        p.produce(flat_topic, value=fser(c, fctx), partition=0)
    assert p.flush(10) == 0
    got = [r.value.asDict() for r in read(flat_topic, valueFormat="protobuf").collect()]
    assert got == [{"id": c.id or None, "cents": c.cents or None} for c in created]

    jde = JSONDeserializer(json.dumps(LOOSE), schema_registry_client=sr)
    back = [jde(v, jctx) for v in json_written]
    # The registry's JSON Schema as the reader schema ...
    df = read(json_topic, valueFormat="json")
    value_type = df.schema["value"].dataType.simpleString()
    assert value_type.startswith("struct<id:string,name:string,tags:array<string>,")
    got = [r.value.asDict(recursive=True) for r in df.collect()]
    assert [g["tags"] for g in got] == [b.get("tags") for b in back]
    assert [g["id"] for g in got] == [str(b["id"]) for b in back]  # a union: JSON text
    # ... and a DDL (the from_json route).
    df = read(json_topic, valueFormat="json", valueSchema=DDL)
    assert df.schema["value"].dataType.simpleString() == (
        "struct<id:int,name:string,tags:array<string>,price:decimal(6,2),at:timestamp,"
        "day:date,attrs:map<string,bigint>,where:struct<lat:double,lon:double>,"
        "missing:string>"
    )
    rows = df.selectExpr("value.*", "CAST(value.at AS STRING) AS at_utc").collect()
    assert [
        (r.id, r.name, r.tags, r.price, r.day, r.attrs, r.where and r.where.asDict()) for r in rows
    ] == [
        (
            b["id"],
            b.get("name"),
            b.get("tags"),
            decimal.Decimal(str(b["price"])).quantize(decimal.Decimal("0.01"))
            if "price" in b
            else None,
            dt.date.fromisoformat(b["day"]) if "day" in b else None,
            b.get("attrs"),
            {"lat": b["where"]["lat"], "lon": None} if "where" in b else None,
        )
        for b in back
    ]
    assert [r.at_utc for r in rows] == ["2024-01-02 03:04:05", None]  # session tz UTC
    # The types Avro and Protobuf never give: tinyint, timestamp_ntz (through Arrow).
    df = read(json_topic, valueFormat="json", valueSchema="id TINYINT, day TIMESTAMP_NTZ")
    assert df.schema["value"].dataType.simpleString() == "struct<id:tinyint,day:timestamp_ntz>"
    assert [r.value.asDict() for r in df.collect()] == [
        {"id": 1, "day": dt.datetime(2024, 2, 29)},
        {"id": 2, "day": None},
    ]


def test_json_conversion_and_ddl_parser_agree_with_spark(spark):
    """Spark itself is the referee: ``DataType.fromDDL`` for the DDL parser, and
    ``from_json`` (FAILFAST) for the conversion of each document: the rows this decoder
    reads agree with from_json's, and every row it calls corrupt makes from_json fail."""
    import pyarrow as pa
    from pyspark.sql.functions import from_json
    from pyspark.sql.pandas.types import to_arrow_type
    from pyspark.sql.types import DataType

    from kafka_common.json_schema import Decoder
    from kafka_common.spark_ddl import parse_ddl

    for ddl in [
        "id INT, name STRING, tags ARRAY<STRING>",
        "a: tinyint, b short, c Long, d REAL, e dec(5), f numeric(7, 3), g decimal",
        "`a b` double, t timestamp_ntz, u timestamp_ltz, v timestamp, w date, "
        "z binary, q boolean COMMENT 'c'",
        "m MAP<STRING, ARRAY<STRUCT<a: INT, b: STRUCT<c: BIGINT>>>>",
        "string string, array array<int>",
        "struct<a:int>",
        "array<struct<a:int>>",
    ]:
        assert parse_ddl(ddl) == to_arrow_type(DataType.fromDDL(ddl), timezone="UTC"), ddl

    ddl = (
        "i INT, b TINYINT, l BIGINT, f FLOAT, d DOUBLE, m DECIMAL(5, 2), s STRING, "
        "ok BOOLEAN, bin BINARY, day DATE, ts TIMESTAMP, nt TIMESTAMP_NTZ, "
        "xs ARRAY<INT>, kv MAP<STRING, DOUBLE>, st STRUCT<a: INT, b: STRING>"
    )
    fits = [
        '{"i": 1, "b": -128, "l": 9007199254740993, "f": 1.5, "d": 2, "m": 1.005, '
        '"s": "x", "ok": true, "bin": "AAE=", "day": "2024-02-29", '
        '"ts": "2024-01-02T03:04:05.123456+02:00", "nt": "2024-01-02T03:04:05", '
        '"xs": [1, null], "kv": {"a": 1.5, "b": null}, "st": {"a": 1, "c": 2}}',
        '{"s": 12.5, "d": "NaN", "f": "-Infinity", "m": "3.14159", "ts": 1700000000}',
        '{"s": {"k": [1, "two", null, false, 1e20, 1.50, 2.5e-9]}, "st": {}, "xs": []}',
        '{"unknown": 1, "b": 200, "f": 3.4e39, "d": 1e400, "kv": {"a": "+INF"}}',
        '{"ts": "2024-01-02 03:04:05", "day": "2024-2-9", "nt": "2024-01-02"}',
        '{"ts": "2024-1-2T3:04:05.1234567Z", "day": "2024-02-29T10:00", "m": 1e2}',
        '{"ts": "2024-01-02", "s": true, "m": 0.001, "st": null}',
    ]
    corrupt = [
        "null",
        '"x"',
        "[]",
        '[{"i": 1}]',
        '{"i": 1',
        '{"i": 1.0}',
        '{"i": "1"}',
        '{"b": 256}',
        '{"b": -129}',
        '{"l": 1e3}',
        '{"ok": "true"}',
        '{"i": true}',
        '{"m": 1234.5}',
        '{"m": -999.995}',
        '{"m": "abc"}',
        '{"xs": {"a": 1}}',
        '{"st": [1]}',
        '{"day": "29.02.2024"}',
        '{"day": 5}',
        '{"d": "1.5"}',
        '{"ts": 1.5}',
        '{"nt": "2024-01-02T03:04:05Z"}',
        '{"bin": 5}',
        '{"bin": "AAE"}',
        '{"d": "INF"}',
    ]
    docs = fits + corrupt
    atype = parse_ddl(ddl)
    array, errors, _ = Decoder(atype).decode(pa.array([d.encode() for d in docs]), [0] * len(docs))
    assert list(errors) == [False] * len(fits) + [True] * len(corrupt)
    # One query: from_json in PERMISSIVE mode puts a malformed row's text in the corrupt
    # record column (and nothing else in the row).
    df = spark.createDataFrame(list(enumerate(docs)), "i int, j string")
    spark_rows = (
        df.orderBy("i")
        .select(
            from_json(
                "j",
                ddl + ", _corrupt_record STRING",
                {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": "_corrupt_record"},
            ).alias("v")
        )
        .toArrow()
        .column("v")
        .combine_chunks()
    )
    assert spark_rows.field("_corrupt_record").to_pylist() == [None] * len(fits) + corrupt
    theirs = pa.StructArray.from_arrays(
        [spark_rows.field(n) for n in atype.names], names=atype.names
    )
    ours = array.cast(theirs.type).slice(0, len(fits)).to_pylist()

    def same(x):  # NaN as a string: nan != nan
        if isinstance(x, dict):
            return {k: same(v) for k, v in x.items()}
        if isinstance(x, (list, tuple)):
            return [same(v) for v in x]
        return "NaN" if isinstance(x, float) and x != x else x

    assert same(ours) == same(theirs.slice(0, len(fits)).to_pylist())
