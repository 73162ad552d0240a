"""Helpers of the reader's streaming tests: produced values, stub clients and readers, the
query's time limit."""

from __future__ import annotations

from confluent_kafka import Producer
from kafka_source.offset_reader import OffsetReader
from kafka_source.options import parse_reader_options
from kafka_source.stream_reader import KafkaStreamReader
from protocol.client.cluster import ClusterMetadata, PartitionInfo, TopicInfo
from protocol.primitives import ZERO_UUID


QUERY_TIMEOUT_S = 120


SINK_SCHEMA = "topic STRING, partition INT, offset BIGINT, value STRING"


def produce(
    bootstrap: str, topic: str, values: dict[int, list[str]], *, value_bytes: int = 0
) -> None:
    """Produce ``values[partition]`` in order, in ordinary multi-record batches (each value
    padded with '.' to ``value_bytes``)."""
    errors: list = []
    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 5,
            "enable.idempotence": False,
            "max.in.flight": 1,
            "message.timeout.ms": 20000,
        }
    )
    for partition, vals in values.items():
        for v in vals:
            p.produce(
                topic,
                value=v.ljust(value_bytes, ".").encode(),
                partition=partition,
                on_delivery=lambda err, msg: err and errors.append(err),
            )
    assert p.flush(30) == 0
    assert errors == []


def values_for(tag: str, partitions, per_partition, start: int = 0) -> dict[int, list[str]]:
    """``{partition: ["tag-p<partition>-<i>", ...]}``; ``per_partition`` is a count or a
    list of counts."""
    counts = (
        per_partition if isinstance(per_partition, (list, tuple)) else [per_partition] * partitions
    )
    return {p: [f"{tag}-p{p}-{i}" for i in range(start, start + n)] for p, n in enumerate(counts)}


def expected_rows(
    topic: str, values: dict[int, list[str]], first_offset: int = 0, value_bytes: int = 0
) -> list[tuple]:
    return sorted(
        (topic, p, first_offset + o, v.ljust(value_bytes, "."))
        for p, vals in values.items()
        for o, v in enumerate(vals)
    )


def stream(spark, options: dict[str, str]):
    reader = spark.readStream.format("pykafka")
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load().selectExpr(
        "topic", "partition", "offset", "CAST(value AS STRING) AS value"
    )


def start_query(
    spark, options: dict[str, str], sink: str, checkpoint: str, available_now: bool = True
):
    writer = (
        stream(spark, options)
        .writeStream.format("parquet")
        .option("path", sink)
        .option("checkpointLocation", checkpoint)
    )
    if available_now:
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime="200 milliseconds")
    return writer.start()


def run_available_now(
    spark, options: dict[str, str], sink: str, checkpoint: str, timeout: float = QUERY_TIMEOUT_S
) -> list:
    """Run one ``Trigger.AvailableNow`` query into a parquet sink until it ends; returns
    the progress reports of its batches that read something."""
    query = start_query(spark, options, sink, checkpoint)
    try:
        assert query.awaitTermination(timeout), f"query still running after {timeout}s"
        return [p for p in query.recentProgress if p.numInputRows > 0]
    finally:
        query.stop()


def read_sink(spark, sink: str) -> list[tuple[str, int, int, str]]:
    """The rows (topic, partition, offset, value) the sink's log has committed, sorted."""
    rows = spark.read.schema(SINK_SCHEMA).parquet(sink).collect()
    return sorted((r.topic, r.partition, r.offset, r.value) for r in rows)


A0, A1, B0 = ("a", 0), ("a", 1), ("b", 0)


class StubClient:
    """What the stream reader's driver side asks of a ``KafkaClient``."""

    def __init__(self, latest: dict, earliest: dict | None = None):
        from protocol.config import ClientConfig

        self.config = ClientConfig(bootstrap_servers=["127.0.0.1:9"])  # the retry backoff
        self.latest = dict(latest)
        self.earliest = dict(earliest or {})
        self.commits: list[tuple[str, dict]] = []

    def refresh_metadata(self, topics=None) -> ClusterMetadata:
        parts: dict[str, dict] = {}
        for t, p in self.latest:
            parts.setdefault(t, {})[p] = PartitionInfo(t, p, leader=1)
        return ClusterMetadata(
            {1: ("127.0.0.1", 9)},
            1,
            "stub",
            {t: TopicInfo(t, ZERO_UUID, ps) for t, ps in parts.items()},
        )

    def refresh_in_use(self) -> ClusterMetadata:
        return self.refresh_metadata()

    def latest_offsets(self, tps, isolation_level=0) -> dict:
        return {tp: self.latest[tp] for tp in tps}

    def earliest_offsets(self, tps) -> dict:
        return {tp: self.earliest.get(tp, 0) for tp in tps}

    def list_offsets(self, timestamps, isolation_level=0) -> dict:
        return {
            tp: ((self.earliest.get(tp, 0) if ts == -2 else self.latest[tp]), -1)
            for tp, ts in timestamps.items()
        }

    def commit_offsets(self, group, offsets) -> None:
        self.commits.append((group, dict(offsets)))

    def close(self) -> None:
        pass


def stub_reader(client: StubClient, **options: str) -> KafkaStreamReader:
    """A stream reader whose driver-side lookups go to ``client`` through the real
    ``OffsetReader`` (retries without pauses unless fetchOffset.retryIntervalMs says)."""
    reader = KafkaStreamReader(
        parse_reader_options(
            {
                "kafka.bootstrap.servers": "127.0.0.1:9",
                "subscribePattern": ".*",
                "fetchOffset.retryIntervalMs": "0",
                **options,
            },
            for_streaming=True,
        )
    )
    o = reader.options
    reader._client = OffsetReader(
        client, o.fetch_offset_num_retries, o.fetch_offset_retry_interval_ms
    )
    return reader
