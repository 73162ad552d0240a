"""Faults injected into real brokers, measured: connections cut under a big read, broker
errors and lost answers under a big write, a broker down under a streaming query, flipped
bytes in Fetch responses.

Brokers:

- Apache Kafka behind ``tests.helpers.fault_proxy.FaultProxy`` (its ``PROXIED`` listener
  advertises the proxy's port, so every connection of a client that bootstraps through
  the proxy goes through it; ``broker.bootstrap`` is the direct way in, for setting up and
  for referees): cut connections, dropped answers, flipped bytes. Kafka checks the
  sequences of idempotent producers, so a resend after a lost answer is proven to be
  recognised, not appended again.
- librdkafka's mock cluster (a private one, so the errors pushed here never reach other
  tests): broker error codes on Produce and a broker taken down and up.

The tests set ``kafka.fetch.max.bytes`` with ``kafka.max.partition.fetch.bytes`` to get
responses of the size they want.

Counts: the default sizes keep ``make test`` quick; ``PYKAFKA_SOAK=1`` (``make soak``) runs
the full ones (1 M records read, 100 k written with 1,000 faults per broker kind). Each
test records its figures with ``tests.helpers.reliability_report.record``.
"""

from __future__ import annotations

import json
import random
import threading
import time

import confluent_kafka
import pyarrow as pa
import pytest

from kafka_sink.writer import write_task
from kafka_source.fetcher import read_range
from kafka_source.offset_specs import OffsetRange
from kafka_testbed import MockCluster
from protocol.client.cluster import KafkaClient
from protocol.errors import CorruptRecordError, PyKafkaError
from protocol.schemas import FETCH, LIST_OFFSETS

from .helpers.reliability_report import record, soak
from .helpers.sink import batches, consume, options as writer_options, plan_for
from .helpers.faults import produce_numbered, reader_options
from .helpers.frames import rewriting
from .helpers.waiting import wait_until

SOAK = soak()
READ_RECORDS = 1_000_000 if SOAK else 200_000
SPARK_READ_RECORDS = READ_RECORDS if SOAK else 100_000
WRITE_RECORDS = 100_000 if SOAK else 20_000
WRITE_FAULTS = 1_000 if SOAK else 200
CUT_EVERY_MS = 200


# ---- brokers -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def private_mock():
    with MockCluster(brokers=3) as cluster:
        yield cluster


def read_partitions(opts, topic: str, ends: dict[int, int]) -> dict[int, pa.Table]:
    """Read every partition ``[0, end)`` with ``read_range``, one thread per partition
    (as Spark's tasks would), each in the order read_range yields."""
    out: dict[int, pa.Table] = {}
    errors: list = []

    def one(part: int) -> None:
        try:
            out[part] = pa.Table.from_batches(
                list(read_range(opts, OffsetRange(topic, part, 0, ends[part])))
            )
        except BaseException as e:  # re-raised below
            errors.append(e)

    threads = [threading.Thread(target=one, args=(p,)) for p in ends]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    if errors:
        raise errors[0]
    return out


def lost_and_duplicated(expected: list, got: list) -> tuple[int, int]:
    return len(set(expected) - set(got)), len(got) - len(set(got))


# ---- 1. a big read while the connection is cut every few hundred ms -----------------------


@pytest.fixture(scope="module")
def big_topic(proxied):
    proxy, broker = proxied
    proxy.reset()
    topic = f"t-faults-big-{random.randrange(1 << 30)}"
    with KafkaClient(bootstrap_servers=broker.bootstrap) as client:
        client.create_topics({topic: 2})
    produce_numbered(broker.bootstrap, topic, READ_RECORDS, 2)
    ends = {0: (READ_RECORDS + 1) // 2, 1: READ_RECORDS // 2}
    reference = read_partitions(big_read_options(proxy.address), topic, ends)  # no faults
    assert {p: t.num_rows for p, t in reference.items()} == ends
    return topic, ends, reference


def big_read_options(bootstrap: str):
    # Not pooled (idle bound 0): each read opens its connections, so the byte budgets of
    # cut_after_bytes (which apply to new connections) cut them mid-read. Pooled reads
    # through cut connections are tests/test_pool.py's.
    return reader_options(
        bootstrap,
        includeHeaders="true",
        **{
            "kafka.max.partition.fetch.bytes": 262_144,
            "kafka.fetch.max.bytes": 262_144,
            "kafkaConsumer.pollTimeoutMs": 30_000,
            "kafka.connections.max.idle.ms": 0,
        },
    )


def test_read_1m_records_with_connections_cut_every_200ms_equals_the_fault_free_read(
    proxied, proxy, big_topic
):
    """1 M records (200 k by default) of 2 partitions read with ``read_range`` through a
    proxy cutting every connection every 200 ms (mid-response: the client gets half a
    frame), plus 20 connections cut after a random number of bytes: the rows, their order
    and every column are exactly those of the same read without faults."""
    topic, ends, reference = big_topic
    opts = big_read_options(proxy.address)
    rng = random.Random(7)
    for _ in range(20):
        proxy.cut_after_bytes(rng.randrange(10, 600_000))
    threads_before = set(threading.enumerate())
    started = time.monotonic()
    proxy.cut_every(CUT_EVERY_MS)
    got = read_partitions(opts, topic, ends)
    proxy.cut_every(None)
    seconds = time.monotonic() - started
    cuts = proxy.stats["cuts"]

    lost = duplicated = 0
    for part, table in reference.items():
        expected = table["offset"].to_pylist()
        offsets = got[part]["offset"].to_pylist()
        assert offsets == expected, f"partition {part}: offsets differ"
        a, b = lost_and_duplicated(expected, offsets)
        lost, duplicated = lost + a, duplicated + b
        assert got[part].equals(table), f"partition {part}: rows differ"
    record(
        "faults/read_range_cut_connections",
        section="faults",
        what=f"read_range of {READ_RECORDS:,} records through a proxy cutting every "
        f"connection every {CUT_EVERY_MS} ms",
        faults=cuts,
        records=READ_RECORDS,
        lost=lost,
        duplicated=duplicated,
        seconds=seconds,
        connections=proxy.stats["connections"],
    )
    assert cuts >= 3, "the read was too quick to be cut: the test proves nothing"
    leftover = [
        t
        for t in set(threading.enumerate()) - threads_before
        if t.is_alive() and not t.name.startswith(("fault-proxy", "pykafka-pool"))
    ]
    assert not leftover, f"threads outlived the read: {leftover}"


def checksums(table: pa.Table, end: int) -> tuple:
    """(count, distinct offsets, first, last, sum of the CRC-32s of the values, of the keys
    (null as empty), of the header values, number of headers) of the rows below ``end``."""
    import zlib

    rows = table.filter(pa.compute.less(table["offset"], end))
    offsets = rows["offset"].to_pylist()
    headers = [h for hs in rows["headers"].to_pylist() for h in hs or ()]
    return (
        len(offsets),
        len(set(offsets)),
        min(offsets),
        max(offsets),
        sum(zlib.crc32(v or b"") for v in rows["value"].to_pylist()),
        sum(zlib.crc32(k or b"") for k in rows["key"].to_pylist()),
        sum(zlib.crc32(h["value"] or b"") for h in headers),
        len(headers),
    )


@pytest.mark.spark
def test_spark_read_with_connections_cut_equals_the_fault_free_read(
    spark, proxied, proxy, big_topic
):
    """The same topic (its first 100 k records by default) through
    ``spark.read.format("pykafka")`` (driver and executors through the cutting proxy),
    in 4 tasks: per partition the count, distinct offsets, first and last offset, and
    checksums of every value, key and header are those of the fault-free read."""
    from pyspark.sql import functions as F

    topic, ends, reference = big_topic
    ends = {p: min(e, SPARK_READ_RECORDS // 2) for p, e in ends.items()}
    ending = json.dumps({topic: {str(p): e for p, e in ends.items()}})
    expected = [(p, *checksums(reference[p], e)) for p, e in sorted(ends.items())]

    df = (
        spark.read.format("pykafka")
        .option("kafka.bootstrap.servers", proxy.address)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("endingOffsets", ending)
        .option("includeHeaders", "true")
        .option("minPartitions", "4")
        .option("kafka.max.partition.fetch.bytes", "262144")
        .option("kafka.fetch.max.bytes", "262144")
        .load()
    )
    crc_headers = F.aggregate(
        F.transform("headers", lambda h: F.crc32(F.coalesce(h["value"], F.lit(b"")))),
        F.lit(0).cast("bigint"),
        lambda a, x: a + x,
    )
    started = time.monotonic()
    proxy.cut_every(CUT_EVERY_MS)
    got = sorted(
        tuple(r)
        for r in df.groupBy("partition")
        .agg(
            F.count("*"),
            F.countDistinct("offset"),
            F.min("offset"),
            F.max("offset"),
            F.sum(F.crc32("value")),
            F.sum(F.crc32(F.coalesce("key", F.lit(b"")))),
            F.sum(crc_headers),
            F.sum(F.size("headers")),
        )
        .collect()
    )
    proxy.cut_every(None)
    seconds = time.monotonic() - started
    record(
        "faults/spark_read_cut_connections",
        section="faults",
        what=f"spark.read of {sum(ends.values()):,} records through a proxy cutting every "
        f"connection every {CUT_EVERY_MS} ms",
        faults=proxy.stats["cuts"],
        records=sum(r[1] for r in got),
        lost=sum(ends.values()) - sum(r[2] for r in got),
        duplicated=sum(r[1] - r[2] for r in got),
        seconds=seconds,
    )
    assert got == expected


# ---- 2. a big write with broker errors and lost answers -----------------------------------


def _check_written(bootstrap: str, topic: str, partitions: int, total: int):
    got = consume(bootstrap, topic, partitions, total, timeout=120)
    seen = [int(v[1:9]) for recs in got.values() for _, v, _, _ in recs]
    lost, duplicated = lost_and_duplicated(list(range(total)), seen)
    out_of_order = [
        p
        for p, recs in got.items()
        if [int(v[1:9]) for _, v, _, _ in recs] != sorted(int(v[1:9]) for _, v, _, _ in recs)
    ]
    return lost, duplicated, out_of_order


def test_write_with_produce_errors_from_the_mock_cluster(private_mock, topic_name):
    """100 k records (20 k by default) written by one task while 1,000 Produce requests
    (200) are answered NOT_LEADER_OR_FOLLOWER, REQUEST_TIMED_OUT or
    NOT_ENOUGH_REPLICAS_AFTER_APPEND, spread over the write (one pushed to a broker before
    each input batch): every record exactly once, in order per partition, read back by
    confluent-kafka. One request in flight per connection: the mock does not check
    producer sequences, so with more a later batch could land before a failed earlier one
    where a real broker would refuse it (see test_sink_producer)."""
    mock = private_mock
    mock.create_topic(topic_name, 3, 3)
    for part in range(3):
        mock.partition_set_leader(topic_name, part, part + 1)
    with KafkaClient(bootstrap_servers=mock.bootstrap) as client:
        client.wait_for_topics([topic_name])
    codes = [6, 7, 20]
    data = batches(WRITE_RECORDS, WRITE_RECORDS // WRITE_FAULTS)
    pushed = 0

    def stream():
        nonlocal pushed
        for i, batch in enumerate(data):
            mock.broker_push_request_error_rtts(i % 3 + 1, 0, [(codes[i % 3], 0)])
            pushed += 1
            yield batch

    opts = writer_options(
        mock,
        topic_name,
        **{
            "batch.size": 4000,
            "buffer.memory": 20_000,
            "retry.backoff.ms": 5,
            "max.in.flight.requests.per.connection": 1,
        },
    )
    started = time.monotonic()
    message = write_task(stream(), opts, plan_for(data[0], topic_name))
    seconds = time.monotonic() - started
    left = sum(mock.broker_error_stack_count(b, 0) for b in (1, 2, 3))
    injected = pushed - left
    lost, duplicated, out_of_order = _check_written(mock.bootstrap, topic_name, 3, WRITE_RECORDS)
    record(
        "faults/write_mock_produce_errors",
        section="faults",
        what=f"write_task of {WRITE_RECORDS:,} records, Produce answered "
        "NOT_LEADER_OR_FOLLOWER / REQUEST_TIMED_OUT / "
        "NOT_ENOUGH_REPLICAS_AFTER_APPEND (mock cluster)",
        faults=injected,
        records=WRITE_RECORDS,
        lost=lost,
        duplicated=duplicated,
        seconds=seconds,
        out_of_order_partitions=len(out_of_order),
    )
    assert message.records == WRITE_RECORDS
    assert (lost, duplicated, out_of_order) == (0, 0, [])
    assert injected >= WRITE_FAULTS * 0.9, f"only {injected} of {pushed} errors were used"


def test_write_with_answers_lost_and_connections_dropped(proxied, proxy, topic_name):
    """100 k records (20 k by default) written by one task to Apache Kafka with five
    requests in flight, while 1,000 (200) Produce requests (every third one until then)
    reach the broker but their answer is replaced by a cut connection (losing the answers
    of every request in flight on it): every record exactly once, in order per partition:
    Kafka recognises every resent batch by its producer id and sequence."""
    _, broker = proxied
    with KafkaClient(bootstrap_servers=broker.bootstrap) as client:
        client.create_topics({topic_name: 3})
    data = batches(WRITE_RECORDS, 1000)
    proxy.drop_after_request(0, WRITE_FAULTS, every=3)
    opts = writer_options(
        proxy,
        topic_name,
        **{
            "batch.size": 250,
            "buffer.memory": 20_000,
            "retry.backoff.ms": 5,
            "max.in.flight.requests.per.connection": 5,
        },
    )
    started = time.monotonic()
    message = write_task(iter(data), opts, plan_for(data[0], topic_name))
    seconds = time.monotonic() - started
    injected = proxy.stats["dropped_responses"]
    proxy.reset()
    lost, duplicated, out_of_order = _check_written(broker.bootstrap, topic_name, 3, WRITE_RECORDS)
    record(
        "faults/write_kafka_lost_answers",
        section="faults",
        what=f"write_task of {WRITE_RECORDS:,} records, 5 in flight, Produce answers "
        "replaced by a cut connection (Apache Kafka checks sequences)",
        faults=injected,
        records=WRITE_RECORDS,
        lost=lost,
        duplicated=duplicated,
        seconds=seconds,
        producer_ids=len(message.producer_ids),
        out_of_order_partitions=len(out_of_order),
    )
    assert message.records == WRITE_RECORDS
    assert (lost, duplicated, out_of_order) == (0, 0, [])
    assert injected == WRITE_FAULTS, f"only {injected} answers were dropped"


# ---- 3. a streaming query while its broker goes down and comes back ----------------------


@pytest.mark.spark
def test_streaming_query_through_a_broker_down_and_up(spark, private_mock, topic_name, tmp_path):
    """A processing-time query on 2 partitions, each led by a different broker, while a
    producer writes: the leader of partition 0 is taken down for 4 s (connections closed,
    new ones refused), then brought back. The foreachBatch sink is idempotent (rows keyed
    by (partition, offset), a replayed batch id overwrites itself): at the end it holds
    every offset of the log once, none seen in two batches."""
    mock = private_mock
    mock.create_topic(topic_name, 2, 1)
    mock.partition_set_leader(topic_name, 0, 1)
    mock.partition_set_leader(topic_name, 1, 2)
    with KafkaClient(bootstrap_servers=mock.bootstrap) as client:
        client.wait_for_topics([topic_name])

    seen: dict[tuple[int, int], int] = {}
    across_batches: list = []
    replays = {"batches": 0}
    batch_ids: set = set()
    lock = threading.Lock()

    def sink(df, batch_id):
        rows = df.select("partition", "offset").collect()
        with lock:
            if batch_id in batch_ids:
                replays["batches"] += 1
            batch_ids.add(batch_id)
            for r in rows:
                key = (r.partition, r.offset)
                if seen.get(key, batch_id) != batch_id:
                    across_batches.append(key)
                seen[key] = batch_id

    stop = threading.Event()
    produced = {"n": 0}

    def producer():
        p = confluent_kafka.Producer(
            {"bootstrap.servers": mock.bootstrap, "linger.ms": 5, "message.timeout.ms": 60_000}
        )
        while not stop.is_set():
            for part in (0, 1):
                p.produce(topic_name, value=b"live-%d" % produced["n"], partition=part)
                produced["n"] += 1
            p.poll(0)
            time.sleep(0.01)  # paces the producer while the query reads
        assert p.flush(60) == 0

    query = (
        spark.readStream.format("pykafka")
        .option("kafka.bootstrap.servers", mock.bootstrap)
        .option("subscribe", topic_name)
        .option("startingOffsets", "earliest")
        .load()
        .writeStream.foreachBatch(sink)
        .option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(processingTime="250 milliseconds")
        .start()
    )
    worker = threading.Thread(target=producer)
    worker.start()
    started = time.monotonic()
    outage = recovered = 0.0
    try:
        _wait_for(lambda: len(seen) > 200, 60, "the query read nothing")
        mock.broker_set_down(1)
        down_at = time.monotonic()
        time.sleep(4)  # the outage under test
        mock.broker_set_up(1)
        up_at = time.monotonic()
        outage = up_at - down_at
        after_outage = produced["n"] + 200
        _wait_for(lambda: produced["n"] > after_outage, 60, "records written after the outage")
        stop.set()
        worker.join(90)
        with KafkaClient(bootstrap_servers=mock.bootstrap) as client:
            ends = client.latest_offsets([(topic_name, 0), (topic_name, 1)])
        expected = {(p, o) for (_, p), end in ends.items() for o in range(end)}
        _wait_for(
            lambda: expected <= set(seen),
            90,
            lambda: f"the query did not catch up: {len(expected - set(seen))} missing",
            query,
        )
        assert query.exception() is None
        recovered = time.monotonic() - up_at
    finally:
        stop.set()
        worker.join(90)
        query.stop()
    seconds = time.monotonic() - started
    lost = len(expected - set(seen))
    record(
        "faults/streaming_broker_down_up",
        section="faults",
        what="streaming query (foreachBatch, idempotent sink) while a partition "
        "leader is down for 4 s (mock cluster)",
        faults=1,
        records=len(expected),
        lost=lost,
        duplicated=len(across_batches),
        seconds=seconds,
        outage_s=round(outage, 1),
        caught_up_s_after_the_outage=round(recovered, 1),
        batches=len(batch_ids),
        replayed_batches=replays["batches"],
    )
    assert lost == 0 and across_batches == []
    assert set(seen) == expected  # nothing beyond the log either


def _wait_for(condition, timeout: float, message, query=None) -> None:
    def met():
        if query is not None and query.exception() is not None:
            raise AssertionError(f"the query failed: {query.exception()}")
        return condition()

    wait_until(met, timeout, message, interval=0.1)


# ---- 4. flipped bytes ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def small_topic(proxied):
    proxy, broker = proxied
    proxy.reset()
    topic = f"t-faults-small-{random.randrange(1 << 30)}"
    with KafkaClient(bootstrap_servers=broker.bootstrap) as client:
        client.create_topics({topic: 1})
    produce_numbered(broker.bootstrap, topic, 3000, 1)
    return topic, 3000


OFFSET_NOT_AVAILABLE = 78


def test_a_new_leaders_high_watermark_behind_the_range_is_not_data_loss(proxy, small_topic):
    """A leader elected moments ago answers a Fetch with no records and its high watermark,
    behind the old leader's until it catches up, and ListOffsets with OFFSET_NOT_AVAILABLE
    meanwhile (KIP-207). A micro-batch planned from the old leader's high watermark met it
    when Kafka's broker-fault test paused a leader, and failed as data loss. The proxy plays
    that leader for the first answers: the reader waits and returns the whole range."""
    topic, total = small_topic

    def behind(body):
        for t in body["responses"]:
            for part in t["partitions"]:
                part.update(records=b"", high_watermark=100, last_stable_offset=100)
        return True

    def not_yet(body):
        for t in body["topics"]:
            for part in t["partitions"]:
                part.update(error_code=OFFSET_NOT_AVAILABLE, offset=-1, timestamp=-1)
        return True

    proxy.rewrite_response(FETCH.key, rewriting(FETCH, behind), count=3)
    proxy.rewrite_response(LIST_OFFSETS.key, rewriting(LIST_OFFSETS, not_yet), count=2)
    opts = reader_options(proxy.address, **{"kafkaConsumer.pollTimeoutMs": 20_000})
    table = pa.Table.from_batches(list(read_range(opts, OffsetRange(topic, 0, 500, total))))
    assert table["offset"].to_pylist() == list(range(500, total))
    assert proxy.pending_rewrites(FETCH.key) == proxy.pending_rewrites(LIST_OFFSETS.key) == 0


@pytest.mark.parametrize("record_byte", [0, 3, 17, 100, 1000])
def test_a_flipped_byte_in_record_data_is_a_crc_error_naming_the_batch(
    proxy, small_topic, record_byte
):
    """A bit flipped inside the records of the first batch of a Fetch response (past the
    CRC'd batch header): CorruptRecordError naming the topic, the partition and the
    batch's offset; no row of that response is returned."""
    topic, total = small_topic
    opts = reader_options(proxy.address, **{"kafkaConsumer.pollTimeoutMs": 10_000})
    proxy.flip_byte(1, in_records=True, record_byte=record_byte)
    rows = []
    with pytest.raises(CorruptRecordError) as info:
        for batch in read_range(opts, OffsetRange(topic, 0, 0, total)):
            rows.append(batch)
    flipped = proxy.flipped[-1]
    text = str(info.value)
    assert "CRC" in text and f"topic {topic!r}" in text and "partition 0" in text
    assert info.value.offset == flipped["base_offset"] == 0
    assert rows == []


@pytest.mark.parametrize("bit", [12, 40])
def test_a_flipped_base_offset_past_the_range_does_not_end_it_empty(proxy, small_topic, bit):
    """The CRC of a record batch does not cover its base offset. A bit flipped there that
    moves the answer's first batch past the range's end (bit 12: inside the log; bit 40:
    past the high watermark) looks like a range a compacted topic has emptied; the reader
    asks again instead of ending the range with no rows."""
    topic, _ = small_topic
    opts = reader_options(
        proxy.address,
        **{
            "kafkaConsumer.pollTimeoutMs": 5_000,
            "kafka.max.partition.fetch.bytes": 16_384,
            "kafka.fetch.max.bytes": 16_384,
        },
    )
    reference = pa.Table.from_batches(list(read_range(opts, OffsetRange(topic, 0, 0, 600))))
    assert reference.num_rows == 600
    byte = 7 - bit // 8  # the base offset is big-endian, 61 bytes before the records
    proxy.flip_byte(1, in_records=True, record_byte=byte - 61, xor=1 << (bit % 8))
    got = pa.Table.from_batches(
        list(read_range(opts, OffsetRange(topic, 0, 0, 600))), schema=reference.schema
    )
    assert proxy.flipped and proxy.flipped[-1]["base_offset"] == 0
    assert got.equals(reference)


def test_random_flips_in_fetch_responses_give_an_error_or_the_right_rows(proxy, small_topic):
    """One bit flipped at a random position of a Fetch response (anywhere after the size
    prefix: header, error codes, watermarks, record batch headers and records; half of
    them in the first 160 bytes), 150 times:
    each read either fails with one of the client's typed errors, or returns exactly the
    rows of the fault-free read. Never other rows."""
    topic, total = small_topic
    opts = reader_options(
        proxy.address,
        **{
            "kafkaConsumer.pollTimeoutMs": 5_000,
            "kafka.request.timeout.ms": 2_000,
            "kafka.max.partition.fetch.bytes": 16_384,
            "kafka.fetch.max.bytes": 16_384,
        },
    )
    end = 600
    reference = pa.Table.from_batches(list(read_range(opts, OffsetRange(topic, 0, 0, end))))
    rng = random.Random(11)
    outcomes = {"error": 0, "same rows": 0}
    errors: dict[str, int] = {}
    started = time.monotonic()
    cases = 150
    for _ in range(cases):
        # half in the first 160 bytes (response header, partition header, the first
        # batch header), half anywhere
        position = rng.randrange(0, 160) if rng.random() < 0.5 else rng.randrange(0, 16_500)
        proxy.flip_byte(1, position=position, xor=1 << rng.randrange(8))
        try:
            got = pa.Table.from_batches(
                list(read_range(opts, OffsetRange(topic, 0, 0, end))), schema=reference.schema
            )
        except PyKafkaError as e:
            outcomes["error"] += 1
            errors[type(e).__name__] = errors.get(type(e).__name__, 0) + 1
            continue
        assert got.equals(reference), f"wrong rows after {proxy.flipped[-1]}"
        outcomes["same rows"] += 1
    seconds = time.monotonic() - started
    record(
        "faults/fetch_response_bit_flips",
        section="faults",
        what="one bit flipped at a random position of a Fetch response, then read_range",
        faults=proxy.stats["flips"],
        records=cases * end,
        lost=0,
        duplicated=0,
        seconds=seconds,
        errors=outcomes["error"],
        same_rows=outcomes["same rows"],
        **{f"error_{k}": v for k, v in sorted(errors.items())},
    )
    assert proxy.stats["flips"] == cases


def test_metadata_refresh_goes_elsewhere_when_its_connection_died(private_mock, topic_name):
    """The client's open connection to broker 1 is closed by the broker going down: the
    next metadata refresh asks another broker instead of failing (before the fix, a
    streaming query's latestOffset failed here on the first trigger of the outage)."""
    mock = private_mock
    mock.create_topic(topic_name, 1, 1)
    with KafkaClient(bootstrap_servers=mock.bootstrap) as client:
        client.refresh_metadata([topic_name])
        client.connection(1)  # open, and first in line for the next refresh
        client._connections = {1: client._connections[1], **client._connections}
        mock.broker_set_down(1)
        try:
            started = time.monotonic()
            meta = client.refresh_metadata([topic_name])
            assert topic_name in meta.topics
            assert time.monotonic() - started < 10  # not the 30 s request timeout
        finally:
            mock.broker_set_up(1)
