"""Cost grows with data and brokers, not with partitions (issue 41): on a topic of many
partitions, counted by the fault proxy in front of the broker (``FaultProxy.requests``):

- planning a batch read sends one Metadata request and one ListOffsets request per broker
  for each end it resolves (``earliest`` to ``latest``: two, since Kafka answers
  INVALID_REQUEST to a partition named twice in one ListOffsets request), however many
  partitions the topic has;
- planning a micro-batch sends one Metadata request and one ListOffsets request per broker;
- the tasks of a ``spark.read`` or a micro-batch send one ListOffsets request (a small
  read's task looks the open ends of all its ranges up together) and one Fetch request per
  broker each (the first Fetch of all its ranges goes out at once), not one per partition.

``make test`` runs them on a topic of ``WIDE`` partitions on the session's Apache Kafka
behind its proxy (created and filled in about 5 s); ``make test-wide`` (marker
``wide_topic``) on ``WIDEST`` partitions on a node of its own with a larger heap (created
in two steps, since KRaft refuses an operation of more than 10,000 metadata records,
``broker_setup.create_wide_topic``, and filled in 35 s), which would take more than
``make test`` can spare. One record a partition keeps the read small
(``ONE_TASK_RECORDS``): above 20,000 records a read runs a task per partition.
Times are never asserted: ``make bench``'s ``scale`` section measures them.
"""

from __future__ import annotations

import time
import uuid

import pyarrow as pa
import pytest

from kafka_source.batch_reader import KafkaBatchReader, KafkaRangesPartition
from kafka_source.options import parse_reader_options
from kafka_source.task_split import ONE_TASK_RECORDS, small_read_groups
from kafka_source.stream_reader import KafkaStreamReader
from protocol.client.cluster import KafkaClient
from protocol.records import encode_batch
from protocol.schemas import FETCH, LIST_OFFSETS, METADATA

from .helpers.broker_setup import create_wide_topic, kafka_behind_fault_proxy

WIDE = 1_000
WIDEST = 10_000
PER_PARTITION = 1  # records in every partition (10,000 stay a small read: ONE_TASK_RECORDS)
#: The heap of the node that holds the WIDEST topic (the default 512 MB runs out of it).
WIDEST_HEAP_MB = 2048


def _produce_everywhere(bootstrap: str, topic: str, partitions: int) -> None:
    import confluent_kafka

    # idempotent: on a loaded machine a Produce request can time out in flight and be sent
    # again, and a plain producer then writes its records twice
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 20, "enable.idempotence": True}
    )
    for p in range(partitions):
        for i in range(PER_PARTITION):
            producer.produce(topic, value=b"%d-%d" % (p, i), partition=p)
        producer.poll(0)
    assert producer.flush(120) == 0


@pytest.fixture(
    scope="module",
    params=[WIDE, pytest.param(WIDEST, marks=pytest.mark.wide_topic)],
    ids=lambda n: f"{n}p",
)
def wide(request):
    """``(proxy, topic, partitions, brokers, bootstrap)``: a topic of ``partitions``
    partitions, each holding ``PER_PARTITION`` records, on an Apache Kafka node clients
    reach through ``proxy`` (or directly at ``bootstrap``)."""
    partitions = request.param
    own = None
    if partitions == WIDE:
        proxy, kafka = request.getfixturevalue("proxied_kafka")
    else:
        own = kafka_behind_fault_proxy(heap_mb=WIDEST_HEAP_MB)
        proxy, kafka = own.__enter__()
    topic = f"wide-{partitions}-{uuid.uuid4().hex[:8]}"
    try:
        began = time.monotonic()
        create_wide_topic(kafka.bootstrap, topic, partitions)
        with KafkaClient(bootstrap_servers=kafka.bootstrap) as client:
            brokers = len(client.metadata([topic]).brokers)
        _produce_everywhere(kafka.bootstrap, topic, partitions)
        print(f"{topic}: created and filled in {time.monotonic() - began:.1f} s")
        yield proxy, topic, partitions, brokers, kafka.bootstrap
    finally:
        if own is not None:
            own.__exit__(None, None, None)
        else:  # the session's broker goes on serving other tests: give its memory back
            with KafkaClient(bootstrap_servers=kafka.bootstrap) as client:
                client.delete_topics([topic], missing_ok=True)


@pytest.fixture
def wide_proxy(wide):
    """The proxy in front of ``wide``'s broker, reset before and after the test."""
    proxy = wide[0]
    proxy.reset()
    yield proxy
    proxy.reset()


def _options(proxy, topic: str, **more):
    return {
        "kafka.bootstrap.servers": proxy.address,
        "subscribe": topic,
        # a client of its own, not one the process's pool keeps warm from another test
        "kafka.client.id": f"wide-{uuid.uuid4().hex[:8]}",
        **more,
    }


def test_planning_a_batch_read_asks_each_broker_once_per_end(wide, wide_proxy):
    _, topic, partitions, brokers, _ = wide
    reader = KafkaBatchReader(parse_reader_options(_options(wide_proxy, topic)))
    planned = reader.partitions()
    assert wide_proxy.requests(METADATA.key) == 1
    assert wide_proxy.requests(LIST_OFFSETS.key) == 2 * brokers  # earliest, latest
    ranges = [r for part in planned for r in part.ranges]
    assert sorted(r.partition for r in ranges) == list(range(partitions))
    assert {(r.start, r.end) for r in ranges} == {(0, PER_PARTITION)}
    # a small read: a task per 1,000 ranges, as task_split.small_read_groups cuts them
    assert all(isinstance(part, KafkaRangesPartition) for part in planned)
    assert len(planned) == len(small_read_groups(range(partitions)))


def test_planning_a_micro_batch_asks_each_broker_once(wide, wide_proxy):
    from pyspark.sql.streaming.datasource import ReadAllAvailable

    _, topic, partitions, brokers, bootstrap = wide
    reader = KafkaStreamReader(
        parse_reader_options(
            _options(wide_proxy, topic, startingOffsets="earliest"), for_streaming=True
        )
    )
    try:
        start = reader.initialOffset()
        assert sum(start[topic].values()) == 0 and len(start[topic]) == partitions
        for batch in range(2):
            wide_proxy.reset()
            end = reader.latestOffset(start, ReadAllAvailable())
            planned = reader.partitions(start, end)
            assert wide_proxy.requests(METADATA.key) == 1, f"micro-batch {batch}"
            assert wide_proxy.requests(LIST_OFFSETS.key) == brokers, f"micro-batch {batch}"
            ranges = [r for part in planned for r in part.ranges]
            expected = partitions * PER_PARTITION if batch == 0 else 1
            assert sum(r.end - r.start for r in ranges) == expected, f"micro-batch {batch}"
            # the tasks, run here: a Fetch request per task and broker
            wide_proxy.reset()
            rows = sum(b.num_rows for part in planned for b in reader.read(part))
            assert rows == expected, f"micro-batch {batch}"
            assert wide_proxy.requests(FETCH.key) == len(planned) * brokers, f"micro-batch {batch}"
            # one more record, in the last partition, for the next micro-batch
            with KafkaClient(bootstrap_servers=bootstrap) as client:
                answer = client.produce(
                    topic, partitions - 1, encode_batch(None, pa.array([b"more"], pa.binary()))
                )
                assert answer["error_code"] == 0
            start = end
    finally:
        reader.stop()


def test_a_spark_read_looks_offsets_up_per_task_not_per_partition(wide, wide_proxy, spark):
    from pyspark.sql import functions as F

    _, topic, partitions, brokers, bootstrap = wide
    with KafkaClient(bootstrap_servers=bootstrap) as client:  # not through the proxy
        written = sum(client.latest_offsets([(topic, p) for p in range(partitions)]).values())
    assert wide_proxy.requests(LIST_OFFSETS.key) == 0
    assert written <= ONE_TASK_RECORDS  # a small read: its tasks read many ranges each
    df = spark.read.format("pykafka").options(**_options(wide_proxy, topic)).load()
    rows, distinct = df.agg(F.count("*"), F.countDistinct("partition")).first()
    assert (rows, distinct) == (written, partitions)
    tasks = len(small_read_groups(range(partitions)))
    # Planning's two (earliest, latest) and one per task, each to every broker it reads;
    # every range's records come in its first answer: one Fetch per task and broker. On a
    # loaded machine a request that timed out is sent again and a failed task runs again:
    # twice that is allowed, far below one per partition (a task reads up to 1,000).
    list_offsets, fetches = wide_proxy.requests(LIST_OFFSETS.key), wide_proxy.requests(FETCH.key)
    print(
        f"{partitions} partitions, {tasks} tasks: {list_offsets} ListOffsets, "
        f"{fetches} Fetch requests"
    )
    assert list_offsets <= 2 * (2 + tasks) * brokers
    assert fetches <= 2 * tasks * brokers


def test_a_cut_first_fetch_costs_one_recovery_not_one_per_range(wide, wide_proxy, caplog):
    """A task's first Fetch for all its ranges, its connection cut when the answer comes:
    one recovery for the broker (a warning when the reading stalls and one when it goes
    on, one wait, one metadata refresh) and one Fetch more for the ranges still waiting,
    not one of each per range; every record read exactly once."""
    import logging

    _, topic, partitions, brokers, _ = wide
    reader = KafkaBatchReader(parse_reader_options(_options(wide_proxy, topic)))
    planned = reader.partitions()
    wide_proxy.reset()
    wide_proxy.drop_after_request(FETCH.key, count=1)
    with caplog.at_level(logging.WARNING, logger="pykafka"):
        table = pa.Table.from_batches([b for part in planned for b in reader.read(part)])
    assert wide_proxy.pending_drops(FETCH.key) == 0  # the answer was cut
    seen = sorted(zip(table.column("partition").to_pylist(), table.column("offset").to_pylist()))
    # what was planned (the micro-batch test may have added records to the last partition)
    ranges = sorted((r.partition, r.start, r.end) for part in planned for r in part.ranges)
    assert [r[0] for r in ranges] == list(range(partitions))
    assert seen == [(p, o) for p, start, end in ranges for o in range(start, end)]
    warned = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    metadata, fetches = wide_proxy.requests(METADATA.key), wide_proxy.requests(FETCH.key)
    print(f"{len(warned)} warnings, {metadata} Metadata, {fetches} Fetch requests")
    assert len(warned) <= 2 * brokers, warned
    # one refresh per broker (and the read's own first lookup)
    assert metadata <= 1 + brokers
    # the task's first (cut), the first range's own, one for the ranges still waiting
    assert fetches <= len(planned) * brokers + 2 * brokers
