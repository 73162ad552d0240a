"""``deadLetterTopic`` on Apache Kafka: records that cannot be read (an Avro value without
Confluent's framing, a payload cut short) or written (larger than the topic's
max.message.bytes, no key on a compacted topic, a timestamp out of the topic's range) go
to the dead-letter topic unchanged, with the ``pykafka.error.*`` headers, and every input
record ends in exactly one of the result and the dead-letter topic. The referee that reads
the topics is librdkafka (confluent-kafka, read_committed)."""

from __future__ import annotations

import logging

import confluent_kafka
import pyarrow as pa
import pytest

from kafka_common.dead_letter import (
    CLASS_HEADER,
    MESSAGE_HEADER,
    OFFSET_HEADER,
    PARTITION_HEADER,
    STAGE_HEADER,
    TOPIC_HEADER,
)
from protocol.client.cluster import KafkaClient

from .helpers.sink import consume

pytestmark = pytest.mark.spark

SCHEMA = '{"type": "record", "name": "R", "fields": [{"name": "id", "type": "long"}]}'


def _framed(i: int) -> bytes:
    """Confluent's framing (magic byte, schema id 1) around the Avro long ``i``."""
    return b"\x00\x00\x00\x00\x01" + _zigzag(i)


def _zigzag(i: int) -> bytes:
    n, out = (i << 1) ^ (i >> 63), bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _topics(kafka, topics: dict[str, int], configs: dict[str, dict] | None = None) -> None:
    with KafkaClient(bootstrap_servers=kafka.bootstrap) as client:
        for name, partitions in topics.items():
            client.create_topics({name: partitions}, configs=(configs or {}).get(name))


def _context(headers) -> dict[str, str]:
    return {k: v.decode() for k, v in headers if k.startswith("pykafka.error.")}


# ---- reading ----------------------------------------------------------------------------


def _seed_read_topic(kafka, topic: str) -> list[tuple]:
    """Good records on both partitions, and three that cannot be decoded; returns those
    three as (partition, offset, key, value, headers, timestamp)."""
    p = confluent_kafka.Producer({"bootstrap.servers": kafka.bootstrap})
    bad = []
    offsets = {0: 0, 1: 0}
    for i in range(10):
        part = i % 2
        if i in (3, 6, 9):
            value = _zigzag(i) if i != 6 else b"\x00\x00\x00\x00\x01"  # bare Avro; cut short
            key, headers, ts = f"k{i}".encode(), [("h", f"v{i}".encode())], 1_700_000_000_000 + i
            p.produce(topic, key=key, value=value, partition=part, headers=headers, timestamp=ts)
            bad.append((part, offsets[part], key, value, headers, ts))
        else:
            p.produce(topic, value=_framed(i), partition=part)
        offsets[part] += 1
    assert p.flush(10) == 0
    return bad


def _read(spark, kafka, topic, dlt, **options):
    reader = (
        spark.read.format("pykafka")
        .option("kafka.bootstrap.servers", kafka.bootstrap)
        .option("subscribe", topic)
        .option("valueFormat", "avro")
        .option("valueSchema", SCHEMA)
        .option("deadLetterTopic", dlt)
    )
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


def _assert_dead_letters(got: list, bad: list, topic: str) -> None:
    assert len(got) == len(bad), got
    by_offset = {
        (int(_context(h)[PARTITION_HEADER]), int(_context(h)[OFFSET_HEADER])): (k, v, h, t)
        for k, v, h, t in got
    }
    for part, offset, key, value, headers, ts in bad:
        k, v, h, t = by_offset[(part, offset)]
        assert (k, v, t) == (key, value, ts)
        assert h[: len(headers)] == headers  # the record's own headers first, unchanged
        context = _context(h)
        assert context[TOPIC_HEADER] == topic
        assert context[STAGE_HEADER] == "VALUE_DECODE"
        assert context[CLASS_HEADER] == "ValueDecodeError"
        assert f"partition {part} offset {offset}" in context[MESSAGE_HEADER]


def test_batch_read_sends_undecodable_records_to_the_dead_letter_topic(spark, kafka, topic_name):
    dlt = topic_name + "-dlt"
    _topics(kafka, {topic_name: 2, dlt: 1})
    bad = _seed_read_topic(kafka, topic_name)

    rows = _read(spark, kafka, topic_name, dlt).collect()  # DROPMALFORMED by default
    assert sorted(r.value.id for r in rows) == [0, 1, 2, 4, 5, 7, 8]
    assert "valueCorruptRecord" not in rows[0].asDict()
    _assert_dead_letters(consume(kafka.bootstrap, dlt, 1, 3)[0], bad, topic_name)

    kept = _read(spark, kafka, topic_name, dlt, mode="PERMISSIVE").collect()
    assert len(kept) == 10
    nulls = sorted((r.partition, r.offset) for r in kept if r.value is None)
    assert nulls == sorted((b[0], b[1]) for b in bad)
    assert sorted(r.valueCorruptRecord for r in kept if r.value is None) == sorted(
        b[3] for b in bad
    )
    assert len(consume(kafka.bootstrap, dlt, 1, 6)[0]) == 6  # three more, as asked


def test_stream_every_record_in_the_result_or_the_dead_letter_topic(
    spark, kafka, topic_name, tmp_path
):
    dlt = topic_name + "-dlt"
    _topics(kafka, {topic_name: 2, dlt: 2})
    bad = _seed_read_topic(kafka, topic_name)
    table = "dlt_" + topic_name.replace("-", "_")
    query = (
        spark.readStream.format("pykafka")
        .option("kafka.bootstrap.servers", kafka.bootstrap)
        .option("subscribe", topic_name)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "3")
        .option("valueFormat", "avro")
        .option("valueSchema", SCHEMA)
        .option("deadLetterTopic", dlt)
        .load()
        .writeStream.format("memory")
        .queryName(table)
        .option("checkpointLocation", str(tmp_path / "cp"))
        .trigger(availableNow=True)
        .start()
    )
    try:
        query.awaitTermination(180)
        assert query.exception() is None
    finally:
        query.stop()
    ids = [r.value.id for r in spark.table(table).collect()]
    assert sorted(ids) == [0, 1, 2, 4, 5, 7, 8]
    got = consume(kafka.bootstrap, dlt, 2, 3)
    # a record's dead-letter partition is its own partition (modulo the topic's count)
    assert [len(got[0]), len(got[1])] == [sum(b[0] == p for b in bad) for p in (0, 1)]
    _assert_dead_letters(got[0] + got[1], bad, topic_name)


def test_a_range_reader_logs_how_many_records_went_to_the_dead_letter_topic(
    kafka, topic_name, caplog
):
    """The INFO line each task logs (in the executor's log under Spark), here driven
    without Spark on the same real broker."""
    from kafka_common.value_formats import resolve_formats
    from kafka_source.dead_letters import MalformedRecords
    from kafka_source.options import parse_reader_options

    dlt = topic_name + "-dlt"
    _topics(kafka, {topic_name: 1, dlt: 1})
    options = parse_reader_options(
        {
            "kafka.bootstrap.servers": kafka.bootstrap,
            "subscribe": topic_name,
            "valueFormat": "avro",
            "valueSchema": SCHEMA,
            "deadLetterTopic": dlt,
        }
    )
    schema = pa.schema(
        [
            ("key", pa.binary()),
            ("value", pa.binary()),
            ("offset", pa.int64()),
            ("timestamp", pa.timestamp("us", tz="UTC")),
            ("headers", pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))),
        ]
    )
    batch = pa.RecordBatch.from_pylist(
        [
            {"key": None, "value": _framed(1), "offset": 40, "timestamp": 1, "headers": []},
            {"key": b"k", "value": b"\x02", "offset": 41, "timestamp": 2_000, "headers": []},
        ],
        schema=schema,
    )
    with KafkaClient(bootstrap_servers=kafka.bootstrap) as client:
        formats = resolve_formats(options.formats)
        malformed = MalformedRecords(formats, client, topic_name, 0, False)
        out = malformed.decode(batch)
        with caplog.at_level(logging.INFO, logger="pykafka.source"):
            malformed.report()
    assert out.column("value").to_pylist() == [{"id": 1}]
    assert f"1 records could not be decoded and were written to the dead-letter topic '{dlt}'" in (
        caplog.text
    )
    (record,) = consume(kafka.bootstrap, dlt, 1, 1)[0]
    assert (record[0], record[1], record[3]) == (b"k", b"\x02", 2)
    assert _context(record[2])[OFFSET_HEADER] == "41"


def test_the_reader_refuses_a_dead_letter_topic_with_failfast(spark, kafka, topic_name):
    with pytest.raises(Exception, match="deadLetterTopic='d' cannot be used with mode=FAILFAST"):
        _read(spark, kafka, topic_name, "d", mode="FAILFAST").collect()


# ---- writing ----------------------------------------------------------------------------


def _write_rows(spark, rows):
    return spark.createDataFrame(
        rows, "topic string, key binary, value binary, timestamp timestamp"
    )


def _refusing_topics(kafka, base: str) -> dict[str, str]:
    names = {
        "large": base + "-large",
        "compact": base + "-compact",
        "old": base + "-old",
        "dlt": base + "-dlt",
    }
    _topics(
        kafka,
        {n: 1 for n in names.values()},
        {
            names["large"]: {"max.message.bytes": "3000"},
            names["compact"]: {"cleanup.policy": "compact"},
            names["old"]: {"message.timestamp.before.max.ms": "3600000"},
            names["dlt"]: {"max.message.bytes": "100000"},
        },
    )
    return names


def _refusing_rows(names: dict[str, str]) -> tuple[list, dict[str, list]]:
    """Rows for each refusing topic: (the rows, the values each topic should keep)."""
    import datetime

    now = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)
    old = datetime.datetime(2001, 1, 1)
    rows, keep = [], {}
    for i in range(12):
        big = i in (4, 9)
        value = (b"B%02d" % i) * (2000 if big else 1)
        rows.append((names["large"], b"k%d" % i, value, now))
        keep.setdefault(names["large"], []).append(None if big else value)
        key = None if i % 3 == 0 else b"k%d" % i
        rows.append((names["compact"], key, b"c%02d" % i, now))
        keep.setdefault(names["compact"], []).append(None if key is None else b"c%02d" % i)
        rows.append((names["old"], b"o", b"o%02d" % i, old if i in (2, 7) else now))
        keep.setdefault(names["old"], []).append(None if i in (2, 7) else b"o%02d" % i)
    return rows, keep


def _check_refusals(kafka, names, keep) -> None:
    dead = consume(kafka.bootstrap, names["dlt"], 1, 8)[0]
    classes: dict[str, list] = {}
    for _key, value, headers, _ in dead:
        context = _context(headers)
        assert context[STAGE_HEADER] == "PRODUCE" and context[PARTITION_HEADER] == "0"
        assert OFFSET_HEADER not in context
        classes.setdefault(context[TOPIC_HEADER], []).append((context[CLASS_HEADER], value))
    expected_class = {
        names["large"]: "MESSAGE_TOO_LARGE",
        names["compact"]: "INVALID_RECORD",
        names["old"]: "INVALID_TIMESTAMP",
    }
    for topic, wanted in keep.items():
        kept = [v for v in wanted if v is not None]
        written = [v for _, v, _, _ in consume(kafka.bootstrap, topic, 1, len(kept))[0]]
        assert written == kept, topic  # in order, once
        refused = [v for c, v in classes.get(topic, [])]
        originals = {
            names["large"]: [b"B04" * 2000, b"B09" * 2000],
            names["compact"]: [b"c00", b"c03", b"c06", b"c09"],
            names["old"]: [b"o02", b"o07"],
        }[topic]
        assert sorted(refused) == originals, topic
        assert {c for c, _ in classes[topic]} == {expected_class[topic]}, topic
    assert len(dead) == 8


@pytest.mark.parametrize("exactly_once", [False, True], ids=["idempotent", "exactlyOnce"])
def test_write_sends_refused_records_to_the_dead_letter_topic(
    spark, kafka, topic_name, exactly_once
):
    names = _refusing_topics(kafka, topic_name)
    rows, keep = _refusing_rows(names)
    (
        _write_rows(spark, rows)
        .coalesce(1)
        .write.format("pykafka")
        .mode("append")
        .option("kafka.bootstrap.servers", kafka.bootstrap)
        .option("deadLetterTopic", names["dlt"])
        .option("exactlyOnce", str(exactly_once).lower())
        .option("transactionalIdPrefix", topic_name)
        .option("kafka.linger.ms", "1000")  # each topic's rows in one batch
        .save()
    )
    _check_refusals(kafka, names, keep)


def test_without_a_dead_letter_topic_a_refused_record_fails_the_write(spark, kafka, topic_name):
    names = _refusing_topics(kafka, topic_name)
    rows = [r for r in _refusing_rows(names)[0] if r[0] == names["large"]]
    with pytest.raises(Exception, match="MESSAGE_TOO_LARGE"):
        (
            _write_rows(spark, rows)
            .write.format("pykafka")
            .mode("append")
            .option("kafka.bootstrap.servers", kafka.bootstrap)
            .save()
        )


@pytest.mark.parametrize("exactly_once", [False, True], ids=["idempotent", "exactlyOnce"])
def test_a_record_over_max_request_size_goes_to_the_dead_letter_topic(
    spark, kafka, topic_name, exactly_once
):
    """Without deadLetterTopic such a record fails the write before anything is sent;
    with it, the record goes there (in a request of its own: the dead-letter topic's
    max.message.bytes decides) and the others to their topic, in order."""
    import datetime

    dlt = topic_name + "-dlt"
    _topics(kafka, {topic_name: 1, dlt: 1}, {dlt: {"max.message.bytes": "100000"}})
    now = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)
    values = [(b"v%02d" % i) * (3000 if i in (2, 5) else 1) for i in range(8)]
    rows = [(topic_name, b"k%d" % i, v, now) for i, v in enumerate(values)]
    (
        _write_rows(spark, rows)
        .coalesce(1)
        .write.format("pykafka")
        .mode("append")
        .option("kafka.bootstrap.servers", kafka.bootstrap)
        .option("kafka.max.request.size", "4000")
        .option("deadLetterTopic", dlt)
        .option("exactlyOnce", str(exactly_once).lower())
        .option("transactionalIdPrefix", topic_name)
        .save()
    )
    written = [v for _, v, _, _ in consume(kafka.bootstrap, topic_name, 1, 6)[0]]
    assert written == [v for v in values if len(v) < 4000]
    dead = consume(kafka.bootstrap, dlt, 1, 2)[0]
    assert [(k, v) for k, v, _, _ in dead] == [(b"k2", values[2]), (b"k5", values[5])]
    for _, _, headers, _ in dead:
        context = _context(headers)
        assert context[CLASS_HEADER] == "RECORD_TOO_LARGE"
        assert (context[TOPIC_HEADER], context[PARTITION_HEADER]) == (topic_name, "0")
        assert (
            "max.request.size configuration (kafka.max.request.size)" in (context[MESSAGE_HEADER])
        )


def test_a_record_too_large_for_the_dead_letter_topic_too_fails_naming_both(
    spark, kafka, topic_name
):
    import datetime

    dlt = topic_name + "-dlt"
    _topics(kafka, {topic_name: 1, dlt: 1}, {dlt: {"max.message.bytes": "5000"}})
    now = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)
    rows = [(topic_name, b"k", b"x" * 9000, now)]
    with pytest.raises(Exception) as failed:
        (
            _write_rows(spark, rows)
            .write.format("pykafka")
            .mode("append")
            .option("kafka.bootstrap.servers", kafka.bootstrap)
            .option("kafka.max.request.size", "4000")
            .option("deadLetterTopic", dlt)
            .save()
        )
    message = str(failed.value)
    assert f"The dead-letter topic (deadLetterTopic='{dlt}') refused records" in message
    assert f"topic(s) '{topic_name}' refused or that exceeded kafka.max.request.size" in message
    assert consume(kafka.bootstrap, topic_name, 1, 0, timeout=1)[0] == []


# ---- the dead-letter topic checked when the query is planned ------------------------------


def _read_stream(spark, kafka, topic, dlt):
    return (
        spark.readStream.format("pykafka")
        .option("kafka.bootstrap.servers", kafka.bootstrap)
        .option("subscribe", topic)
        .option("valueFormat", "avro")
        .option("valueSchema", SCHEMA)
        .option("deadLetterTopic", dlt)
        .load()
    )


def _missing(dlt: str) -> str:
    return rf"deadLetterTopic: topic\(s\) '{dlt}' do not exist in the cluster"


def test_a_write_to_a_missing_dead_letter_topic_fails_at_once(spark, kafka, topic_name):
    _topics(kafka, {topic_name: 1})
    rows = [(topic_name, b"k", b"v", None)]
    with pytest.raises(Exception, match=_missing(topic_name + "-nope")):
        (
            _write_rows(spark, rows)
            .write.format("pykafka")
            .mode("append")
            .option("kafka.bootstrap.servers", kafka.bootstrap)
            .option("deadLetterTopic", topic_name + "-nope")
            .save()
        )
    assert consume(kafka.bootstrap, topic_name, 1, 0, timeout=1)[0] == []


def test_a_read_with_a_missing_dead_letter_topic_fails_at_once(spark, kafka, topic_name):
    _topics(kafka, {topic_name: 1})
    with pytest.raises(Exception, match=_missing(topic_name + "-nope")):
        _read(spark, kafka, topic_name, topic_name + "-nope").collect()


def test_a_stream_with_a_missing_dead_letter_topic_fails_at_once(
    spark, kafka, topic_name, tmp_path
):
    _topics(kafka, {topic_name: 1})
    query = (
        _read_stream(spark, kafka, topic_name, topic_name + "-nope")
        .writeStream.format("memory")
        .queryName("dlt_missing_" + topic_name.replace("-", "_"))
        .option("checkpointLocation", str(tmp_path / "cp"))
        .start()
    )
    try:
        with pytest.raises(Exception, match=_missing(topic_name + "-nope")):
            query.awaitTermination(120)
    finally:
        query.stop()
