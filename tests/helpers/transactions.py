"""Helpers of the transactional writer's tests: options, creating and committing writers,
what read_committed readers see."""

from __future__ import annotations

import pyarrow as pa
from kafka_sink.options import parse_writer_options
from kafka_sink.transactions import commit_transactions
from kafka_sink.validation import WritePlan
from kafka_sink.writer import write_task
from protocol.client import transactions as txn
from protocol.client.cluster import KafkaClient
from protocol.errors import BrokerError
from protocol.records.encode_arrow import encode_batch
from .txn_referee import (
    committed_values,
    librdkafka_read_committed,
    open_transactions,
    stable_offsets_behind,
)


def create(broker, topic, partitions=2):
    with KafkaClient(bootstrap_servers=broker.bootstrap) as c:
        c.create_topics({topic: partitions})


def produce_in_txn(client, tid, pid, epoch, topic, value: bytes) -> None:
    """Partition 0 of ``topic`` joins the open transaction and gets one record, ``value``
    (resent while the broker answers a retriable error: a new topic's leader may not be
    ready yet, NOT_LEADER_OR_FOLLOWER)."""
    txn.add_partitions(client, tid, pid, epoch, [(topic, 0)])
    batch = encode_batch(
        None,
        pa.array([value]),
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=0,
        transactional=True,
    )

    def attempt():
        code = client.produce(topic, 0, batch, transactional_id=tid)["error_code"]
        if code:
            raise BrokerError.for_code(code, "Produce", topic=topic, partition=0)

    client.retrying(f"Produce to {topic!r}", attempt)


def options(broker, topic, **extra):
    return parse_writer_options(
        {
            "kafka.bootstrap.servers": broker.bootstrap,
            "topic": topic,
            "exactlyOnce": "true",
            **extra,
        }
    )


def rows(tag, n):
    return pa.RecordBatch.from_arrays(
        [
            pa.array([b"k%d" % i for i in range(n)]),
            pa.array([f"{tag}-{i}".encode() for i in range(n)]),
        ],
        names=["key", "value"],
    )


PLAN_KEY_VALUE = dict(
    topic_column=False,
    key_column=True,
    headers_column=False,
    partition_column=False,
    timestamp_kind=None,
)


def task(
    broker,
    topic,
    prefix,
    tag,
    n,
    partition_id=0,
    attempt=0,
    batch_id=None,
    fresh_ids=False,
    **extra,
):
    plan = WritePlan(topic_option=topic, **PLAN_KEY_VALUE)
    return write_task(
        iter([rows(tag, n)]),
        options(broker, topic, **extra),
        plan,
        prefix=prefix,
        task=(partition_id, attempt, batch_id),
        fresh_ids=fresh_ids,
    )


def values(tag, n):
    return [f"{tag}-{i}" for i in range(n)]


def commit(broker, topic, prefix, messages, batch_id=None):
    with KafkaClient(bootstrap_servers=broker.bootstrap) as client:
        return commit_transactions(client, options(broker, topic), prefix, messages, batch_id)


def assert_read_committed_shows(broker, topic, partitions, expected) -> None:
    """Kafka's rule on the log and librdkafka's read_committed consumer (which relies on
    the broker's last stable offset and AbortedTransactions) both show ``expected``, and
    nothing is left open, once Kafka has written its markers (after EndTxn answered)."""
    assert stable_offsets_behind(broker.bootstrap, topic, partitions) == []
    assert open_transactions(broker.bootstrap, topic, partitions) == []
    assert sorted(committed_values(broker.bootstrap, topic, partitions)) == sorted(expected)
    assert sorted(
        librdkafka_read_committed(broker.bootstrap, topic, partitions, idle_s=1.5)
    ) == sorted(expected)
