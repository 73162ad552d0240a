"""Helpers of the writer's tests: options, plans, rows, topics and what was written."""

from __future__ import annotations

import time
import confluent_kafka
import pyarrow as pa
from kafka_sink.options import parse_writer_options
from kafka_sink.validation import WritePlan
from protocol.client.cluster import KafkaClient
from protocol.records import batch as rb
from .broker_setup import create_topic


HEADERS_TYPE = pa.list_(
    pa.field("element", pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())]))
)


TS_TYPE = pa.timestamp("us", tz="UTC")


def make_topic(broker, name: str, partitions: int) -> None:
    """A topic (with three replicas on the mock cluster)."""
    create_topic(broker, name, partitions, replication_factor=3)


def options(broker, topic: str | None = None, **extra):
    opts = {"kafka.bootstrap.servers": broker.bootstrap, "kafka.retry.backoff.ms": "20"}
    if topic is not None:
        opts["topic"] = topic
    opts.update(
        {k if k.startswith(("kafka.", "topic")) else f"kafka.{k}": str(v) for k, v in extra.items()}
    )
    return parse_writer_options(opts)


def plan_for(batch: pa.RecordBatch, topic: str | None) -> WritePlan:
    names = set(batch.schema.names)
    kind = None
    if "timestamp" in names:
        kind = (
            "double" if pa.types.is_floating(batch.schema.field("timestamp").type) else "timestamp"
        )
    return WritePlan(
        topic_option=topic,
        topic_column=topic is None and "topic" in names,
        key_column="key" in names,
        headers_column="headers" in names,
        partition_column="partition" in names,
        timestamp_kind=kind,
    )


def rows(
    n: int,
    start: int = 0,
    *,
    keys=True,
    headers=False,
    timestamps=False,
    partitions=None,
    value_size=None,
) -> pa.RecordBatch:
    """Rows numbered ``start..start+n``: key ``k<i>``, value ``v<i>`` (or padded)."""
    idx = range(start, start + n)
    cols, names = [], []
    if keys:
        cols.append(pa.array([b"k%08d" % i for i in idx], pa.binary()))
        names.append("key")
    if value_size:
        cols.append(pa.array([(b"v%08d" % i).ljust(value_size, b"-") for i in idx]))
    else:
        cols.append(pa.array([b"v%08d" % i for i in idx], pa.binary()))
    names.append("value")
    if headers:
        cols.append(
            pa.array(
                [
                    [{"key": "h", "value": b"%d" % i}, {"key": "n", "value": None}] if i % 3 else []
                    for i in idx
                ],
                HEADERS_TYPE,
            )
        )
        names.append("headers")
    if timestamps:
        cols.append(pa.array([1_700_000_000_000_000 + i * 1000 + 999 for i in idx], TS_TYPE))
        names.append("timestamp")
    if partitions is not None:
        cols.append(pa.array([partitions(i) for i in idx], pa.int32()))
        names.append("partition")
    return pa.RecordBatch.from_arrays(cols, names=names)


def batches(total: int, size: int, **kw) -> list[pa.RecordBatch]:
    return [rows(min(size, total - s), s, **kw) for s in range(0, total, size)]


def consume(
    bootstrap: str, topic: str, partitions: int, expected: int, timeout: float = 30
) -> dict[int, list]:
    """Every record from offset 0, per partition, with confluent-kafka."""
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"check-{topic}",
            "enable.auto.commit": False,
            "enable.partition.eof": False,
        }
    )
    try:
        consumer.assign([confluent_kafka.TopicPartition(topic, p, 0) for p in range(partitions)])
        out: dict[int, list] = {p: [] for p in range(partitions)}
        got = 0
        deadline = time.monotonic() + timeout
        while got < expected and time.monotonic() < deadline:
            for m in consumer.consume(10_000, 0.5):
                if m.error():
                    raise AssertionError(str(m.error()))
                out[m.partition()].append((m.key(), m.value(), m.headers() or [], m.timestamp()[1]))
                got += 1
        # a little longer, to catch duplicates beyond the expected count
        for m in consumer.consume(10_000, 0.3):
            if not m.error():
                out[m.partition()].append((m.key(), m.value(), m.headers() or [], m.timestamp()[1]))
        return out
    finally:
        consumer.close()


def assert_exactly_once_in_order(got: dict[int, list], total: int, *, ordered=True) -> None:
    seen = [int(v[1:9]) for recs in got.values() for _, v, _, _ in recs]
    assert len(seen) == total, f"{len(seen)} records read, {total} written"
    assert sorted(seen) == list(range(total)), "records lost or duplicated"
    if ordered:
        for p, recs in got.items():
            idx = [int(v[1:9]) for _, v, _, _ in recs]
            assert idx == sorted(idx), f"partition {p} out of order"


def raw_batches(bootstrap: str, topic: str, partition: int) -> list:
    """The v2 batch headers of a partition, fetched with our client."""
    headers = []
    offset = 0
    with KafkaClient(bootstrap_servers=bootstrap) as client:
        for _ in range(1000):
            part = client.fetch({(topic, partition): offset}, max_wait_ms=100)[(topic, partition)]
            data = part["records"] or b""
            found = False
            for pos, _base, _size, _magic in rb.iter_batches(data):
                h = rb.parse_header(data, pos)
                if h.base_offset < offset:
                    continue
                headers.append(h)
                offset = h.base_offset + h.last_offset_delta + 1
                found = True
            if not found:
                break
    return headers
