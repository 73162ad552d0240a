"""The executor read loop without Spark: exact ranges, leader moves, data loss, timeouts.

librdkafka's mock cluster moves leaders, deletes records and injects errors on demand;
the read_committed reads run on Apache Kafka (the session's ``kafka``)."""

import time

import confluent_kafka
import pyarrow as pa
import pytest

from kafka_source import joined_batches
from kafka_source.fetcher import DataLossError, read_range, read_ranges
from kafka_source.options import parse_reader_options
from kafka_source.offset_specs import OffsetRange
from protocol.errors import KafkaConnectionError, KafkaTimeoutError

from .helpers.broker_setup import create_topic


def options(bootstrap, **extra):
    base = {"kafka.bootstrap.servers": bootstrap, "subscribe": "unused"}
    base.update({k: str(v) for k, v in extra.items()})
    return parse_reader_options(base)


def produce(bootstrap, topic, n, partition=0, batch=100, value=lambda i: b"v%d" % i):
    p = confluent_kafka.Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.num.messages": batch}
    )
    for i in range(n):
        p.produce(topic, key=b"k%d" % i, value=value(i), partition=partition)
    assert p.flush(10) == 0


def rows(batches):
    table = pa.Table.from_batches(list(batches))
    return list(zip(table["offset"].to_pylist(), table["value"].to_pylist()))


def test_reads_exactly_the_range_across_batches(mock_cluster, topic_name):
    mock_cluster.create_topic(topic_name, 1, 1)
    produce(mock_cluster.bootstrap, topic_name, 1000, batch=37)
    got = rows(read_range(options(mock_cluster.bootstrap), OffsetRange(topic_name, 0, 123, 877)))
    assert got == [(i, b"v%d" % i) for i in range(123, 877)]


def test_batches_are_bounded_by_the_fetch_size(mock_cluster, topic_name):
    mock_cluster.create_topic(topic_name, 1, 1)
    produce(mock_cluster.bootstrap, topic_name, 3000, batch=50, value=lambda i: b"x" * 500)
    batches = list(
        read_range(
            options(mock_cluster.bootstrap, **{"kafka.max.partition.fetch.bytes": 65536}),
            OffsetRange(topic_name, 0, 0, 3000),
        )
    )
    assert sum(b.num_rows for b in batches) == 3000
    assert len(batches) > 10 and max(b.nbytes for b in batches) < 1_000_000


def test_leader_move_in_the_middle_of_a_read(mock_cluster, topic_name):
    mock_cluster.create_topic(topic_name, 1, 3)
    produce(mock_cluster.bootstrap, topic_name, 2000, batch=20)
    it = read_range(
        options(mock_cluster.bootstrap, **{"kafka.max.partition.fetch.bytes": 2048}),
        OffsetRange(topic_name, 0, 0, 2000),
    )
    mock_cluster.start_request_tracking()
    batches = [next(it)]
    for leader in (2, 3, 1):  # move the leader while the read goes on
        mock_cluster.partition_set_leader(topic_name, 0, leader)
        batches.append(next(it))
    got = rows(batches + list(it))
    fetched_from = {r.broker_id for r in mock_cluster.get_requests() if r.api_key == 1}
    mock_cluster.stop_request_tracking()
    assert len(fetched_from) >= 2  # the reader followed the leader (pipelining may skip one)
    assert [o for o, _ in got] == list(range(2000))


def test_deleted_records_fail_the_read_naming_the_lost_range(mock_cluster, topic_name):
    mock_cluster.create_topic(topic_name, 1, 1)
    produce(mock_cluster.bootstrap, topic_name, 100, batch=10)
    mock_cluster.partition_delete_records(topic_name, 0, 40)
    with pytest.raises(DataLossError) as info:
        list(read_range(options(mock_cluster.bootstrap), OffsetRange(topic_name, 0, 10, 100)))
    message = str(info.value)
    assert topic_name in message and "partition 0" in message and "[10, 40)" in message
    assert "failOnDataLoss" in message


def test_deleted_records_are_skipped_without_failOnDataLoss(mock_cluster, topic_name, caplog):
    mock_cluster.create_topic(topic_name, 1, 1)
    produce(mock_cluster.bootstrap, topic_name, 100, batch=10)
    mock_cluster.partition_delete_records(topic_name, 0, 40)
    got = rows(
        read_range(
            options(mock_cluster.bootstrap, failOnDataLoss="false"),
            OffsetRange(topic_name, 0, 10, 100),
        )
    )
    assert [o for o, _ in got] == list(range(40, 100))
    assert "skipped 30 offsets" in caplog.text


def test_a_range_past_the_end_of_the_log_fails_naming_the_lost_range(mock_cluster, topic_name):
    """The log ends inside the range (it was truncated, or the topic recreated, after the
    range was planned): the Fetch at the end answers nothing and ListOffsets agrees, so the
    rest of the range is data loss, named."""
    mock_cluster.create_topic(topic_name, 1, 1)
    produce(mock_cluster.bootstrap, topic_name, 100, batch=10)
    it = read_range(options(mock_cluster.bootstrap), OffsetRange(topic_name, 0, 90, 150))
    with pytest.raises(DataLossError) as info:
        list(it)
    message = str(info.value)
    assert "[100, 150)" in message and "the log now ends at offset 100" in message


def test_a_task_of_many_small_ranges_hands_spark_few_batches(mock_cluster, topic_name, monkeypatch):
    """A micro-batch over thousands of partitions has a record or two in each: a task's
    small ranges reach Spark joined into batches of up to JOINED_ROWS rows (Spark's Python
    worker pays per batch), every record once and in the ranges' order."""
    mock_cluster.create_topic(topic_name, 30, 1)
    for partition in range(30):
        produce(mock_cluster.bootstrap, topic_name, 3, partition=partition)
    ranges = [OffsetRange(topic_name, p, 1, 3) for p in range(30)]
    batches = list(read_ranges(options(mock_cluster.bootstrap), ranges))
    assert len(batches) == 1
    table = pa.Table.from_batches(batches)
    assert list(zip(table["partition"].to_pylist(), table["offset"].to_pylist())) == [
        (p, o) for p in range(30) for o in (1, 2)
    ]
    monkeypatch.setattr(joined_batches, "JOINED_ROWS", 7)
    batches = list(read_ranges(options(mock_cluster.bootstrap), ranges))
    assert max(b.num_rows for b in batches) <= 7 and sum(b.num_rows for b in batches) == 60
    assert len(batches) == 10  # three ranges of two rows each, then the next would pass 7


def test_a_task_s_small_ranges_joined_are_the_records_each_range_reads_alone(
    mock_cluster, topic_name, monkeypatch
):
    """The ranges of a task are joined before their records become Arrow arrays (one set
    of arrays for all): keys null or not, values empty or not, topics of other lengths,
    every column the same as each range read alone, in the ranges' order."""
    from protocol.records import accel
    from protocol.records.compiled_rows import CompiledRows

    other = topic_name + "-longer-name"
    mock_cluster.create_topic(topic_name, 6, 1)
    mock_cluster.create_topic(other, 2, 1)
    p = confluent_kafka.Producer({"bootstrap.servers": mock_cluster.bootstrap, "linger.ms": 5})
    counts: dict = {}
    for i in range(40):
        tp = (other, i % 2) if i % 5 == 0 else (topic_name, i % 6)
        counts[tp] = counts.get(tp, 0) + 1
        key = None if i % 3 == 0 else b"k%d" % i
        p.produce(tp[0], key=key, value=b"v" * (i % 4) if i % 7 else None, partition=tp[1])
    assert p.flush(10) == 0
    ranges = [OffsetRange(t, q, 1 if t == other else 0, n) for (t, q), n in sorted(counts.items())]
    o = options(mock_cluster.bootstrap)
    joins = []
    join = CompiledRows.join
    monkeypatch.setattr(CompiledRows, "join", staticmethod(lambda p: joins.append(p) or join(p)))
    joined = list(read_ranges(o, ranges))
    alone = [b for r in ranges for b in read_range(o, r)]
    assert accel.module() is not None
    assert [len(p) for p in joins] == [len(ranges)]  # the decoder's buffers, joined once
    assert len(joined) == 1 and len(alone) == len(ranges)
    assert joined[0].equals(pa.Table.from_batches(alone).combine_chunks().to_batches()[0])
    assert joined[0].column("key").null_count == sum(b.column("key").null_count for b in alone)
    with accel.forced(False):  # the pure decoder: batches joined as they are
        assert pa.Table.from_batches(list(read_ranges(o, ranges))).equals(
            pa.Table.from_batches(joined)
        )


def test_small_ranges_with_headers_join_into_one_batch_on_pyarrow_before_19(
    mock_cluster, topic_name, monkeypatch
):
    """With headers the ranges reach the join as Arrow batches: joined by
    ``pa.concat_batches`` (pyarrow 19 and later), else through a table, into the same one
    batch (pyarrow 15 to 18 have no ``concat_batches``; make test-minimums runs them)."""
    mock_cluster.create_topic(topic_name, 20, 1)
    p = confluent_kafka.Producer({"bootstrap.servers": mock_cluster.bootstrap})
    for q in range(20):
        p.produce(topic_name, value=b"v%d" % q, partition=q, headers=[("h", b"%d" % q)])
    assert p.flush(10) == 0
    ranges = [OffsetRange(topic_name, q, 0, 1) for q in range(20)]
    o = options(mock_cluster.bootstrap, includeHeaders="true")
    (newest,) = read_ranges(o, ranges)
    monkeypatch.delattr(pa, "concat_batches")
    (older,) = read_ranges(o, ranges)
    assert older.equals(newest) and older.num_rows == 20
    assert older.column("headers").to_pylist()[7] == [{"key": "h", "value": b"7"}]


def test_unreachable_broker_fails_within_the_timeout_naming_the_servers():
    o = options("127.0.0.1:1", **{"kafkaConsumer.pollTimeoutMs": 1500})
    started = time.monotonic()
    with pytest.raises((KafkaConnectionError, KafkaTimeoutError), match="127.0.0.1:1"):
        list(read_range(o, OffsetRange("t", 0, 0, 10)))
    assert time.monotonic() - started < 10


def test_fetch_offset_retries_follow_the_options(mock_cluster, topic_name):
    """fetchOffset.numRetries / retryIntervalMs: the driver's offset lookups are retried
    that many times, that far apart, around the client's own retries."""
    from kafka_source.offset_reader import OffsetReader
    from protocol.client.cluster import KafkaClient

    mock_cluster.create_topic(topic_name, 1, 1)
    produce(mock_cluster.bootstrap, topic_name, 5)
    tp = (topic_name, 0)
    # Each attempt is bounded by a 300 ms request deadline, so a long run of
    # NOT_LEADER_OR_FOLLOWER answers exhausts one attempt; the next attempt succeeds.
    with KafkaClient(
        bootstrap_servers=mock_cluster.bootstrap, request_timeout_ms=300, retry_backoff_ms=50
    ) as client:
        mock_cluster.push_request_errors(2, [6] * 6)
        started = time.monotonic()
        assert OffsetReader(client, 3, 200).latest_offsets([tp]) == {tp: 5}
        assert time.monotonic() - started >= 0.2  # at least one retry interval
        mock_cluster.push_request_errors(2, [6] * 200)
        with pytest.raises(KafkaTimeoutError):
            OffsetReader(client, 1, 50).latest_offsets([tp])
        mock_cluster.clear_request_errors(2)


@pytest.mark.parametrize("fail_on_data_loss", [True, False])
def test_read_committed_past_the_last_stable_offset_is_data_loss(
    kafka, topic_name, caplog, fail_on_data_loss
):
    """A read_committed range ending past the last stable offset (a transaction left open):
    after kafkaConsumer.pollTimeoutMs, as in Spark, it is data loss, not a timeout:
    failOnDataLoss=true fails naming the range, false returns the committed records and
    skips the rest."""
    create_topic(kafka, topic_name, 1)
    produce(kafka.bootstrap, topic_name, 5)  # offsets 0-4, outside any transaction
    p = confluent_kafka.Producer(
        {"bootstrap.servers": kafka.bootstrap, "transactional.id": f"tx-{topic_name}"}
    )
    p.init_transactions(10)
    p.begin_transaction()
    for i in range(3):
        p.produce(topic_name, value=b"open-%d" % i, partition=0)
    assert p.flush(10) == 0  # offsets 5-7, in a transaction never committed
    o = options(
        kafka.bootstrap,
        **{
            "kafka.isolation.level": "read_committed",
            "kafkaConsumer.pollTimeoutMs": 1500,
            "failOnDataLoss": str(fail_on_data_loss).lower(),
        },
    )
    try:
        if fail_on_data_loss:
            with pytest.raises(DataLossError) as info:
                list(read_range(o, OffsetRange(topic_name, 0, 0, 8)))
            message = str(info.value)
            assert "[5, 8)" in message and "last stable offset" in message, message
        else:
            got = rows(read_range(o, OffsetRange(topic_name, 0, 0, 8)))
            assert [v for _, v in got] == [b"v%d" % i for i in range(5)]
            assert "skipped 3 offsets" in caplog.text
    finally:
        p.abort_transaction(10)


def test_a_broker_failing_the_shared_first_fetch_costs_one_recovery(caplog):
    """A task's first Fetch for all its ranges, one of three brokers not answering it in
    time: the other brokers' answers are used as they are (one Fetch each), the silent
    broker's ranges cost one recovery (a stall warning and its end, one metadata refresh)
    and one Fetch more for those still waiting; every record read exactly once."""
    import logging

    from kafka_testbed import MockCluster
    from protocol.schemas import FETCH, METADATA

    with MockCluster(brokers=3) as mock:
        topic, partitions = "shared", 30
        mock.create_topic(topic, partitions=partitions)
        for p in range(partitions):
            mock.partition_set_leader(topic, p, 1 + p % 3)
            produce(mock.bootstrap, topic, 1, partition=p)
        o = options(mock.bootstrap, **{"kafka.request.timeout.ms": 1000})
        ranges = [OffsetRange(topic, p, 0, 1) for p in range(partitions)]
        mock.broker_push_request_error_rtts(3, FETCH.key, [(0, 4000)])  # a slow answer
        mock.start_request_tracking()
        with caplog.at_level(logging.WARNING, logger="pykafka"):
            table = pa.Table.from_batches(list(read_ranges(o, ranges)))
        asked = [(r.broker_id, r.api_key) for r in mock.get_requests()]
        mock.stop_request_tracking()
    seen = sorted(zip(table["partition"].to_pylist(), table["offset"].to_pylist()))
    assert seen == [(p, 0) for p in range(partitions)]
    fetches = {b: asked.count((b, FETCH.key)) for b in (1, 2, 3)}
    # the answering brokers' parts kept; the silent one's: first, the first range's own,
    # one for the ranges still waiting
    assert fetches[1] == fetches[2] == 1 and fetches[3] <= 3, fetches
    assert sum(k == METADATA.key for _, k in asked) <= 2, asked
    warned = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warned) <= 2, warned
