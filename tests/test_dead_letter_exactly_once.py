"""The reader's dead-letter copies with ``exactlyOnce`` (``kafka_source.dead_letter_txn``),
a task's reading driven without Spark on Apache Kafka: the same range read again (a task
attempt that runs again, a micro-batch run again after a restart) writes no copy twice,
and the copies of an attempt that died before the range's end are never visible to
read_committed readers. Without ``exactlyOnce`` the copies are at least once: read twice,
written twice."""

from __future__ import annotations

import collections
import dataclasses
import uuid

import confluent_kafka
import pytest

from kafka_common.value_formats import resolve_formats
from kafka_source.fetcher import read_range
from kafka_source.offset_specs import OffsetRange
from kafka_source.options import parse_reader_options
from protocol.client import transactions as txn
from protocol.client.cluster import KafkaClient
from protocol.errors import ConfigError

from .helpers.txn_referee import (
    committed_values,
    librdkafka_read_committed,
    open_transactions,
    stable_offsets_behind,
)

SCHEMA = '{"type": "record", "name": "R", "fields": [{"name": "id", "type": "long"}]}'
RECORDS = 12
BAD = (2, 5, 11)  # not in Confluent's framing: cannot be decoded


def _value(i: int) -> bytes:
    if i in BAD:
        return f"bad-{i}".encode()
    return b"\x00\x00\x00\x00\x01" + bytes([i << 1])  # schema id 1, the Avro long i


def _setup(kafka) -> tuple[str, str]:
    tag = uuid.uuid4().hex[:8]
    topic, dlt = f"dleo-{tag}", f"dleo-{tag}-dlt"
    with KafkaClient(bootstrap_servers=kafka.bootstrap) as client:
        client.create_topics({topic: 1})
        client.create_topics({dlt: 1})
    p = confluent_kafka.Producer({"bootstrap.servers": kafka.bootstrap})
    for i in range(RECORDS):
        p.produce(topic, value=_value(i), partition=0)
    assert p.flush(30) == 0
    return topic, dlt


def _options(kafka, topic: str, dlt: str, **extra):
    options = parse_reader_options(
        {
            "kafka.bootstrap.servers": kafka.bootstrap,
            "subscribe": topic,
            "valueFormat": "avro",
            "valueSchema": SCHEMA,
            "deadLetterTopic": dlt,
            **extra,
        },
        for_streaming=True,
    )
    return dataclasses.replace(options, formats=resolve_formats(options.formats))


def _ids(batches) -> list[int]:
    return [v["id"] for b in batches for v in b.column("value").to_pylist()]


GOOD = [i for i in range(RECORDS) if i not in BAD]
BAD_VALUES = sorted(_value(i).decode() for i in BAD)


def test_a_range_read_again_writes_its_dead_letter_copies_once(kafka):
    topic, dlt = _setup(kafka)
    prefix = f"dleo-{uuid.uuid4().hex[:8]}"
    options = _options(kafka, topic, dlt, exactlyOnce="true", transactionalIdPrefix=prefix)
    rng = OffsetRange(topic, 0, 0, RECORDS)

    # an attempt that dies after writing copies, before the range's end: its transaction
    # stays open (the generator is neither resumed nor closed, as a killed process's)
    killed = read_range(options, rng)
    first = next(killed)
    assert first.num_rows > 0
    assert open_transactions(kafka.bootstrap, dlt, 1), "no copy was written in a transaction"

    # the attempt that runs again fences it (its copies aborted) and commits its own
    assert _ids(read_range(options, rng)) == GOOD
    # and a third reading of the range (a micro-batch run again) writes nothing
    assert _ids(read_range(options, rng)) == GOOD

    assert stable_offsets_behind(kafka.bootstrap, dlt, 1) == []
    assert open_transactions(kafka.bootstrap, dlt, 1) == []
    assert sorted(committed_values(kafka.bootstrap, dlt, 1)) == BAD_VALUES
    assert sorted(librdkafka_read_committed(kafka.bootstrap, dlt, 1)) == BAD_VALUES
    with KafkaClient(bootstrap_servers=kafka.bootstrap) as client:
        marker = txn.fetch_stable_offsets(client, f"{prefix}-dlt", [(topic, 0)])
    assert marker[(topic, 0)][0] == RECORDS  # the range's end, committed with the copies
    killed.close()  # the dead attempt's generator: its transaction is long fenced


def test_without_exactly_once_a_range_read_again_writes_its_copies_again(kafka):
    topic, dlt = _setup(kafka)
    options = _options(kafka, topic, dlt)
    rng = OffsetRange(topic, 0, 0, RECORDS)
    for _ in range(2):
        assert _ids(read_range(options, rng)) == GOOD
    seen = collections.Counter(committed_values(kafka.bootstrap, dlt, 1))
    assert seen == {v: 2 for v in BAD_VALUES}


def test_exactly_once_needs_a_dead_letter_topic_and_a_prefix(kafka):
    base = {
        "kafka.bootstrap.servers": kafka.bootstrap,
        "subscribe": "t",
        "valueFormat": "avro",
        "valueSchema": SCHEMA,
        "exactlyOnce": "true",
    }
    with pytest.raises(ConfigError, match="exactlyOnce.*set deadLetterTopic"):
        parse_reader_options(base)
    with pytest.raises(ConfigError, match="transactionalIdPrefix: a reader with exactlyOnce"):
        parse_reader_options({**base, "deadLetterTopic": "d"})
    batch = parse_reader_options({**base, "deadLetterTopic": "d", "transactionalIdPrefix": "p"})
    assert batch.dead_letter_txn is not None
    assert batch.dead_letter_txn.prefix.startswith("p-")  # a batch read's token after it
    stream = parse_reader_options(
        {**base, "deadLetterTopic": "d", "transactionalIdPrefix": "p"}, for_streaming=True
    )
    assert stream.dead_letter_txn is not None and stream.dead_letter_txn.prefix == "p"


def test_exactly_once_refuses_a_partition_split_between_tasks():
    from kafka_source.dead_letter_txn import DeadLetterTxnSpec, check_unsplit

    options = dataclasses.make_dataclass("O", [("dead_letter_txn", object)])
    ranges = [OffsetRange("t", 0, 0, 5), OffsetRange("t", 0, 5, 10)]
    with pytest.raises(ConfigError, match="split topic 't' partition 0 between tasks"):
        check_unsplit(options(DeadLetterTxnSpec("p")), ranges)
    assert check_unsplit(options(None), ranges) == ranges
    whole = [OffsetRange("t", 0, 0, 5), OffsetRange("t", 1, 0, 5)]
    assert check_unsplit(options(DeadLetterTxnSpec("p")), whole) == whole


def test_a_missing_grant_is_named():
    """The words of a refusal (an authorizer's answer, built as the client builds it)."""
    from kafka_source.dead_letter_txn import DeadLetterTxnSpec, _grant
    from protocol.authorization import request_error

    spec = DeadLetterTxnSpec("orders")
    tid = "orders-dlt-t-0"
    refused_id = request_error(53, "InitProducerId", transactional_id=tid)
    assert "grant the principal Write and Describe" in str(_grant(refused_id, spec))
    assert "transactional ids starting with 'orders'" in str(_grant(refused_id, spec))
    refused_group = request_error(30, "OffsetFetch", group="orders-dlt")
    text = str(_grant(refused_group, spec))
    assert "grant the principal Read on the group 'orders-dlt'" in text
